#include "dist/communicator.hpp"

#include <algorithm>
#include <cstring>

namespace fp8rl {

void SingleProcess::all_gather(const void* send, size_t bytes, void* recv) {
  if (bytes) std::memmove(recv, send, bytes);
}

std::string broadcast_string(Communicator& comm, const std::string& s, int root) {
  if (comm.size() == 1) return s;
  uint64_t n = s.size();
  comm.broadcast(&n, sizeof n, root);
  std::string out = comm.rank() == root ? s : std::string(n, '\0');
  if (n) comm.broadcast(out.data(), n, root);
  return out;
}

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& s) {
  const size_t R = static_cast<size_t>(comm.size());
  if (R == 1) return {s};
  std::vector<uint64_t> sizes(R);
  const uint64_t mine = s.size();
  comm.all_gather(&mine, sizeof mine, sizes.data());
  uint64_t most = 0;
  for (uint64_t n : sizes) most = std::max(most, n);
  std::string padded = s;
  padded.resize(most, '\0');
  std::string all(most * R, '\0');
  if (most) comm.all_gather(padded.data(), most, all.data());
  std::vector<std::string> out(R);
  for (size_t r = 0; r < R; ++r) out[r] = all.substr(r * most, sizes[r]);
  return out;
}

std::vector<float> all_gather_floats(Communicator& comm, const std::vector<float>& v) {
  if (comm.size() == 1) return v;
  std::string bytes(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  std::vector<float> out;
  for (const std::string& part : all_gather_strings(comm, bytes)) {
    const size_t at = out.size();
    out.resize(at + part.size() / sizeof(float));
    if (!part.empty()) std::memcpy(out.data() + at, part.data(), part.size());
  }
  return out;
}

std::pair<int64_t, int64_t> share_of(int64_t n, int rank, int size) {
  const int64_t base = n / size, extra = n % size, r = rank;
  const int64_t begin = r * base + std::min(r, extra);
  return {begin, begin + base + (r < extra ? 1 : 0)};
}

}  // namespace fp8rl
