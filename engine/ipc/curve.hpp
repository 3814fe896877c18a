// ZeroMQ CURVE for workers reachable beyond this machine: this install's keys, the CURVE
// options of a socket, and the ZAP handler that admits only authorized clients.
//
// A worker bound to loopback or IPC speaks plain ZeroMQ (only this machine reaches it). A worker
// bound to any other address (`--allow-remote`) is a CURVE server on both sockets: traffic is
// encrypted, and a client must know the worker's public key and hold a secret key whose public
// half the worker's install has authorized — anyone else's handshake is refused.
//
// The keys of an install live in one folder (keys_dir()): server.key (the worker's key pair),
// client.key (the studio's and the CLI's key pair) and authorized_clients (public keys a worker
// accepts, one a line; this install's own client key is always accepted). Made on first use;
// the folder is 0700 and every file 0600, and a key file that others can read is refused (a
// copied secret key is a leaked one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp8rl::ipc {

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

struct CurveKeys {
  std::string dir;
  CurveKeyPair server, client;
  std::vector<std::string> authorized;  // client public keys a worker accepts (own client first)
};

// $FP8RL_KEYS, else $XDG_CONFIG_HOME/fp8rl/keys, else ~/.config/fp8rl/keys.
std::string keys_dir();
// Whether this ZeroMQ was built with CURVE (libsodium).
bool curve_available();
// The install's keys in dir, made when missing (see the file comment). Throws an Error naming
// the file when one is unreadable, malformed, or open to other users.
CurveKeys load_or_create_keys(const std::string& dir = keys_dir());
// Adds a client's public key to dir/authorized_clients (with an optional comment); a malformed
// key is an Error. Returns false when it was already there.
bool authorize_client(const std::string& dir, const std::string& public_key,
                      const std::string& comment = "");
// Throws unless key is a Z85-encoded 32-byte CURVE key (40 characters).
void check_curve_key(const std::string& key, const std::string& what);

// Makes a socket (before bind) a CURVE server with the install's server key pair.
void make_curve_server(void* socket, const CurveKeys& keys);
// Makes a socket (before connect) a CURVE client of the server with that public key.
void make_curve_client(void* socket, const std::string& server_public_key,
                       const CurveKeyPair& client);

// ZeroMQ's authentication protocol (ZAP) for a context's CURVE servers: admits the authorized
// client keys, refuses every other. Bind it before the CURVE sockets bind; call handle() when
// socket() is readable (it answers every pending request without blocking).
class ZapAuthenticator {
 public:
  ZapAuthenticator(void* ctx, std::vector<std::string> authorized_public_keys);
  ~ZapAuthenticator();
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  void* socket() const { return zap_; }
  void handle();
  int64_t admitted() const { return admitted_; }
  int64_t refused() const { return refused_; }

 private:
  void* zap_ = nullptr;
  std::vector<std::string> authorized_;
  int64_t admitted_ = 0, refused_ = 0;
};

}  // namespace fp8rl::ipc
