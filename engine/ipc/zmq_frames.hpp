// Multipart send/receive helpers over libzmq sockets, shared by the worker and the client.
#pragma once

#include <zmq.h>

#include <string>
#include <vector>

namespace fp8rl::ipc {

// Receives one whole multipart message without blocking; empty when none is waiting.
inline std::vector<std::string> recv_frames(void* socket) {
  std::vector<std::string> frames;
  int more = 0;
  do {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, socket, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&m);
      return frames;
    }
    frames.emplace_back(static_cast<const char*>(zmq_msg_data(&m)), zmq_msg_size(&m));
    more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  } while (more);
  return frames;
}

// Sends frames as one multipart message without blocking (dropped when the peer is gone).
inline void send_frames(void* socket, const std::vector<std::string>& frames) {
  for (size_t i = 0; i < frames.size(); ++i)
    zmq_send(socket, frames[i].data(), frames[i].size(),
             (i + 1 < frames.size() ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
}

}  // namespace fp8rl::ipc
