#include "ipc/curve.hpp"

#include <zmq.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "ipc/zmq_frames.hpp"

namespace fp8rl::ipc {
namespace {

namespace fs = std::filesystem;

constexpr const char* kServerFile = "server.key";
constexpr const char* kClientFile = "client.key";
constexpr const char* kAuthorizedFile = "authorized_clients";

[[noreturn]] void zmq_fail(const std::string& what) {
  throw Error(what + ": " + zmq_strerror(zmq_errno()), "zmq errno " + std::to_string(zmq_errno()));
}

void set_option(void* socket, int option, const std::string& value, const char* name) {
  if (zmq_setsockopt(socket, option, value.data(), value.size()) != 0)
    zmq_fail(std::string("CURVE: setting ") + name);
}

// Secret files are the owner's alone: a file others can read or write is refused.
void check_private(const std::string& path, const char* wanted = "600") {
  const int mode = file_mode(path);
  check(mode >= 0, "cannot read " + path);
  check((mode & 077) == 0, path + " is open to other users (mode " + mode_string(mode) +
                               "); it must be 0" + wanted + ": chmod " + wanted + " " + path);
}

CurveKeyPair read_pair(const std::string& path) {
  check_private(path);
  std::istringstream in(read_text_file(path));
  CurveKeyPair p;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    check(eq != std::string::npos, path + ":" + std::to_string(n) + ": expected 'name = key'");
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
      return s;
    };
    const std::string name = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (name == "public-key")
      p.public_key = value;
    else if (name == "secret-key")
      p.secret_key = value;
    else
      throw Error(path + ":" + std::to_string(n) + ": unknown entry '" + name + "'");
  }
  check_curve_key(p.public_key, path + " public-key");
  check_curve_key(p.secret_key, path + " secret-key");
  char derived[41];
  check(zmq_curve_public(derived, p.secret_key.c_str()) == 0 && p.public_key == derived,
        path + ": the public key does not belong to the secret key");
  return p;
}

CurveKeyPair make_pair(const std::string& path, const char* role) {
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0) zmq_fail("CURVE: making a key pair");
  write_private_file(path,
                     std::string("# fp8rl CURVE key pair (") + role +
                         "). The secret key must stay on this machine and private (mode 0600).\n"
                         "public-key = " +
                         pub + "\nsecret-key = " + sec + "\n");
  return {pub, sec};
}

CurveKeyPair load_or_make_pair(const std::string& path, const char* role) {
  return fs::exists(path) ? read_pair(path) : make_pair(path, role);
}

std::vector<std::string> read_authorized(const std::string& path) {
  std::vector<std::string> keys;
  if (!fs::exists(path)) return keys;
  check_private(path);
  std::istringstream in(read_text_file(path));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    const std::string key = line.substr(start, 40);
    check_curve_key(key, path + ":" + std::to_string(n));
    keys.push_back(key);
  }
  return keys;
}

}  // namespace

std::string keys_dir() {
  if (const char* d = std::getenv("FP8RL_KEYS"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x)
    return (fs::path(x) / "fp8rl" / "keys").string();
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / ".config" / "fp8rl" / "keys").string();
}

bool curve_available() {
  return zmq_has("curve") == 1;
}

void check_curve_key(const std::string& key, const std::string& what) {
  uint8_t raw[32];
  check(key.size() == 40 && zmq_z85_decode(raw, key.c_str()) != nullptr,
        what + ": '" + key.substr(0, 48) + "' is not a CURVE key (40 Z85 characters)");
}

CurveKeys load_or_create_keys(const std::string& dir) {
  check(curve_available(),
        "this ZeroMQ library was built without CURVE: workers cannot be reached securely beyond "
        "this machine");
  create_private_directories(dir);
  check_private(dir, "700");
  CurveKeys k;
  k.dir = dir;
  k.server = load_or_make_pair((fs::path(dir) / kServerFile).string(), "worker");
  k.client = load_or_make_pair((fs::path(dir) / kClientFile).string(), "studio and CLI");
  k.authorized = {k.client.public_key};
  for (auto& key : read_authorized((fs::path(dir) / kAuthorizedFile).string()))
    if (std::find(k.authorized.begin(), k.authorized.end(), key) == k.authorized.end())
      k.authorized.push_back(key);
  return k;
}

bool authorize_client(const std::string& dir, const std::string& public_key,
                      const std::string& comment) {
  check_curve_key(public_key, "client key");
  const CurveKeys k = load_or_create_keys(dir);
  if (std::find(k.authorized.begin(), k.authorized.end(), public_key) != k.authorized.end())
    return false;
  const std::string path = (fs::path(dir) / kAuthorizedFile).string();
  std::string text = fs::exists(path) ? read_text_file(path)
                                      : "# Client public keys this install's workers accept, one "
                                        "a line (fp8rl keys authorize KEY).\n";
  text += public_key + (comment.empty() ? "" : "  " + comment) + "\n";
  write_private_file(path, text);
  return true;
}

void make_curve_server(void* socket, const CurveKeys& keys) {
  const int on = 1;
  if (zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &on, sizeof on) != 0)
    zmq_fail("CURVE: making a server socket");
  set_option(socket, ZMQ_CURVE_SECRETKEY, keys.server.secret_key, "the server secret key");
  // Every handshake is put to the context's ZAP handler (ZapAuthenticator), which the worker
  // binds before this socket binds.
  set_option(socket, ZMQ_ZAP_DOMAIN, "fp8rl", "the ZAP domain");
}

void make_curve_client(void* socket, const std::string& server_public_key,
                       const CurveKeyPair& client) {
  check_curve_key(server_public_key, "the worker's public key");
  set_option(socket, ZMQ_CURVE_SERVERKEY, server_public_key, "the worker's public key");
  set_option(socket, ZMQ_CURVE_PUBLICKEY, client.public_key, "the client public key");
  set_option(socket, ZMQ_CURVE_SECRETKEY, client.secret_key, "the client secret key");
}

ZapAuthenticator::ZapAuthenticator(void* ctx, std::vector<std::string> authorized)
    : authorized_(std::move(authorized)) {
  zap_ = zmq_socket(ctx, ZMQ_REP);
  if (!zap_) zmq_fail("ZAP: socket");
  const int linger = 0;
  zmq_setsockopt(zap_, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_bind(zap_, "inproc://zeromq.zap.01") != 0) zmq_fail("ZAP: binding the handler");
}

ZapAuthenticator::~ZapAuthenticator() {
  if (zap_) zmq_close(zap_);
}

void ZapAuthenticator::handle() {
  while (true) {
    // [version, request id, domain, address, routing id, mechanism, credentials...]
    const auto frames = recv_frames(zap_);
    if (frames.empty()) return;
    bool ok = false;
    if (frames.size() >= 7 && frames[0] == "1.0" && frames[5] == "CURVE" &&
        frames[6].size() == 32) {
      char z85[41];
      zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(frames[6].data()), 32);
      ok = std::find(authorized_.begin(), authorized_.end(), std::string(z85)) != authorized_.end();
    }
    ++(ok ? admitted_ : refused_);
    const std::string request_id = frames.size() >= 2 ? frames[1] : "";
    send_frames(zap_, {"1.0", request_id, ok ? "200" : "400",
                       ok ? "OK" : "client key not authorized", ok ? "client" : "", ""});
  }
}

}  // namespace fp8rl::ipc
