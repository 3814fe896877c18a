#include "ipc/endpoints.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/files.hpp"

namespace fp8rl::ipc {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;

// Why folder cannot hold our sockets ("" when it can): it must be a directory (not a link) of
// this user's with no group or other permission bits.
std::string unsafe_folder(const std::string& folder) {
  struct stat st {};
  if (::lstat(folder.c_str(), &st) != 0)
    return std::string("cannot be read: ") + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  if (st.st_uid != ::geteuid())
    return "belongs to uid " + std::to_string(st.st_uid) + ", not to this user (uid " +
           std::to_string(::geteuid()) + ")";
  if ((st.st_mode & 077) != 0)
    return "is open to other users (mode " + mode_string(static_cast<int>(st.st_mode & 07777)) +
           "; chmod 700 " + folder + ")";
  return "";
}

}  // namespace

std::string runtime_dir() {
  std::string dir;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x) {
    // The session's runtime folder must itself be ours (a sudo that kept another user's
    // XDG_RUNTIME_DIR would otherwise put our sockets in their hands).
    const std::string why = unsafe_folder(x);
    check(why.empty(), std::string("XDG_RUNTIME_DIR ") + x + " " + why +
                           ": refusing to put the worker's sockets there (unset XDG_RUNTIME_DIR "
                           "or point it at your own runtime folder)");
    dir = (fs::path(x) / "fp8rl").string();
  } else {
    dir = "/tmp/fp8rl-" + std::to_string(::geteuid());
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error("cannot create the socket folder " + dir + ": " + std::strerror(errno));
  const std::string why = unsafe_folder(dir);
  check(why.empty(), "the socket folder " + dir + " " + why +
                         ": refusing to put the worker's sockets there (remove it, or set "
                         "XDG_RUNTIME_DIR to a folder of your own)");
  return dir;
}

Endpoints private_endpoints(const std::string& tag) {
  const std::string base = runtime_dir() + "/" + tag;
  Endpoints e{"ipc://" + base + "-control", "ipc://" + base + "-telemetry"};
  check(e.telemetry.size() - 6 <= kMaxSocketPath,
        "the socket path " + e.telemetry.substr(6) +
            " is longer than a Unix socket address holds (" + std::to_string(kMaxSocketPath) +
            " bytes): set XDG_RUNTIME_DIR to a shorter folder");
  return e;
}

bool reachable_by_other_users(const std::string& ep) {
  if (ep.rfind("inproc://", 0) == 0) return false;
  if (ep.rfind("ipc://", 0) == 0) {
    const std::string path = ep.substr(6);
    if (path.empty() || path[0] == '@') return true;  // abstract: no permissions at all
    const fs::path folder = fs::absolute(fs::path(path)).parent_path();
    return !unsafe_folder(folder.string()).empty();
  }
  return true;  // tcp (loopback included), and any other transport
}

void remove_socket_file(const std::string& ep) {
  if (ep.rfind("ipc://", 0) != 0 || ep.size() <= 6 || ep[6] == '@') return;
  std::error_code ec;
  fs::remove(ep.substr(6), ec);
}

void remove_stale_sockets() {
  std::error_code ec;
  const std::string dir = [] {
    try {
      return runtime_dir();
    } catch (const Error&) {
      return std::string();
    }
  }();
  if (dir.empty()) return;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_socket(ec)) continue;
    // Young files may belong to a worker between bind() and listen().
    if (now - entry.last_write_time(ec) < std::chrono::minutes(1) || ec) continue;
    const std::string path = entry.path().string();
    if (path.size() > kMaxSocketPath) continue;
    const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const bool refused =
        ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno == ECONNREFUSED;
    ::close(s);
    if (refused) fs::remove(entry.path(), ec);
  }
}

}  // namespace fp8rl::ipc
