#include "core/checksum.hpp"

#include <array>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.hpp"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace fp8rl {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

const std::array<uint32_t, 256>& table() {
  static const std::array<uint32_t, 256> t = [] {
    std::array<uint32_t, 256> r{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1u) ? kPoly : 0u);
      r[i] = c;
    }
    return r;
  }();
  return t;
}

uint32_t crc32c_table(const unsigned char* p, size_t n, uint32_t c) {
  const auto& t = table();
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xffu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(const unsigned char* p, size_t n,
                                                          uint32_t c) {
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  c = static_cast<uint32_t>(c64);
  for (; n > 0; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t n, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  static const bool sse42 = __builtin_cpu_supports("sse4.2");
  c = sse42 ? crc32c_sse42(p, n, c) : crc32c_table(p, n, c);
#else
  c = crc32c_table(p, n, c);
#endif
  return ~c;
}

FileChecksum file_checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  check(in.good(), "cannot open " + path);
  FileChecksum r;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    r.crc32c = crc32c(buf.data(), got, r.crc32c);
    r.bytes += got;
  }
  check(in.eof(), "cannot read " + path);
  return r;
}

}  // namespace fp8rl
