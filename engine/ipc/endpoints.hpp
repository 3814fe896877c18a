// Where a worker's sockets live, and who else could reach them (docs/security.md).
//
// By default a worker's control and telemetry sockets are Unix sockets in a folder that is the
// user's alone (runtime_dir(), mode 0700): the kernel refuses every other local user's connect()
// before ZeroMQ sees it, so another account can neither steer a run nor read its telemetry. An
// endpoint other local users could reach — any tcp address (loopback included), an abstract
// socket (ipc://@name), a socket file in a folder that is not private — is served with ZeroMQ
// CURVE and this user's keys instead (ipc/curve.hpp), automatically.
#pragma once

#include <string>

namespace fp8rl::ipc {

// The user's private folder for sockets: $XDG_RUNTIME_DIR/fp8rl when XDG_RUNTIME_DIR is set,
// else /tmp/fp8rl-<uid>; made 0700 when missing. Throws an Error naming the folder, and how to
// mend it, when it is not a directory, belongs to another user or is open to others (group or
// other permission bits) — a folder someone else controls could hand our sockets to them.
std::string runtime_dir();

struct Endpoints {
  std::string control, telemetry;
};
// ipc:// endpoints for a worker named after tag (letters, digits, '-', '.'), in runtime_dir().
// Throws when the paths would be longer than a Unix socket address holds (107 bytes).
Endpoints private_endpoints(const std::string& tag);

// Whether a user other than this one could connect to endpoint ep (see the file comment).
// inproc:// endpoints and socket files in a folder of this user's with mode 0700 are private.
bool reachable_by_other_users(const std::string& ep);

// Removes the socket file of an ipc:// endpoint this process bound (ZeroMQ 4.3 leaves it when
// the socket closes); nothing for other endpoints. Call after the socket is closed.
void remove_socket_file(const std::string& ep);

// Removes socket files in runtime_dir() that nobody listens on any more (left by killed
// workers) and that are older than a minute. Best effort: errors are ignored.
void remove_stale_sockets();

}  // namespace fp8rl::ipc
