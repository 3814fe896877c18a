#include "core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.hpp"

namespace fp8rl {

namespace fs = std::filesystem;

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  check(in.good(), "cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Json read_json_file(const std::string& path) {
  const std::string text = read_text_file(path);
  try {
    return Json::parse(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.message());
  }
}

void create_private_directories(const std::string& path) {
  if (path.empty()) return;
  // Top down, so that each folder we make is made 0700 whatever the umask (mkdir applies it,
  // and a umask never adds bits).
  fs::path made;
  for (const auto& part : fs::path(path)) {
    made /= part;
    if (::mkdir(made.c_str(), 0700) == 0 || errno == EEXIST) continue;
    throw Error("cannot create directory '" + made.string() + "': " + std::strerror(errno));
  }
  struct stat st {};
  check(::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
        "cannot create directory '" + path + "': it exists and is not a directory");
}

std::ofstream open_private_file(const std::string& path, std::ios::openmode mode) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | ((mode & std::ios::app) ? O_APPEND : 0);
  const int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) throw Error("cannot write " + path + ": " + std::strerror(errno));
  // An existing file keeps its mode through open(): make it the owner's alone as well.
  const bool ok = ::fchmod(fd, 0600) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw Error("cannot make " + path + " private (chmod 600): " + std::strerror(err));
  std::ofstream out(path, mode | std::ios::out);
  check(out.good(), "cannot write " + path);
  return out;
}

void write_private_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out = open_private_file(tmp);
    errno = 0;
    out << text;
    out.flush();
    check(out.good(),
          "write failed for " + tmp + (errno ? std::string(": ") + std::strerror(errno) : ""));
  }
  fs::rename(tmp, path);
}

bool out_of_space(const std::exception& e) {
  const std::string what = e.what();
  for (const char* says : {std::strerror(ENOSPC), std::strerror(EDQUOT), std::strerror(EFBIG)})
    if (what.find(says) != std::string::npos) return true;
  return what.find("database or disk is full") != std::string::npos;  // SQLITE_FULL
}

int file_mode(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

std::string mode_string(int mode) {
  char m[8];
  std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(mode) & 07777u);
  return m;
}

std::vector<std::string> paths_open_to_others(const std::string& root, size_t limit) {
  std::vector<std::string> open;
  auto note = [&](const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || S_ISLNK(st.st_mode) || S_ISSOCK(st.st_mode)) return;
    if ((st.st_mode & 077) != 0 && open.size() < limit) open.push_back(p.string());
  };
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(root, ec))) return open;
  note(root);
  if (!fs::is_directory(fs::symlink_status(root, ec))) return open;
  for (auto it = fs::recursive_directory_iterator(
           root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator() && open.size() < limit; it.increment(ec))
    note(it->path());
  return open;
}

}  // namespace fp8rl
