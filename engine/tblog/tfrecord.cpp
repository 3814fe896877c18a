#include "tblog/tfrecord.hpp"

#include "core/checksum.hpp"

namespace fp8rl::tblog {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;
constexpr size_t kHeader = 12;  // length + its CRC
constexpr size_t kFooter = 4;   // the data's CRC

uint64_t load_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

void store_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t n) {
  const uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + kMaskDelta;
}

void append_record(std::string& out, std::string_view payload) {
  std::string header;
  store_le(header, payload.size(), 8);
  out += header;
  store_le(out, masked_crc32c(header.data(), 8), 4);
  out.append(payload);
  store_le(out, masked_crc32c(payload.data(), payload.size()), 4);
}

RecordScan scan_records(std::string_view bytes, uint64_t base,
                        const std::function<void(std::string_view)>& on_record) {
  RecordScan s;
  size_t at = 0;
  for (;;) {
    const size_t left = bytes.size() - at;
    if (left < kHeader) {
      s.partial = left;
      break;
    }
    const char* p = bytes.data() + at;
    if (static_cast<uint32_t>(load_le(p + 8, 4)) != masked_crc32c(p, 8)) {
      s.bad_length = true;
      break;
    }
    const uint64_t n = load_le(p, 8);
    if (n > left - kHeader || left - kHeader - n < kFooter) {
      s.partial = left;
      break;
    }
    const std::string_view data(p + kHeader, n);
    if (static_cast<uint32_t>(load_le(p + kHeader + n, 4)) ==
        masked_crc32c(data.data(), data.size())) {
      ++s.records;
      on_record(data);
    } else {
      ++s.bad_crc;
    }
    at += kHeader + n + kFooter;
  }
  s.end = base + at;
  return s;
}

}  // namespace fp8rl::tblog
