#include "tblog/proto_wire.hpp"

#include <bit>
#include <cstring>

#include "core/error.hpp"

namespace fp8rl::proto {
namespace {

uint64_t load_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

double Field::as_double() const {
  return std::bit_cast<double>(varint);
}

float Field::as_float() const {
  return std::bit_cast<float>(static_cast<uint32_t>(varint));
}

uint64_t Reader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p_.empty()) throw Error(std::string(what_) + ": message ends inside a varint");
    const auto b = static_cast<unsigned char>(p_.front());
    p_.remove_prefix(1);
    v |= static_cast<uint64_t>(b & 0x7fu) << shift;
    if ((b & 0x80u) == 0) return v;
  }
  throw Error(std::string(what_) + ": varint longer than 10 bytes");
}

bool Reader::next(Field* f) {
  if (p_.empty()) return false;
  const uint64_t key = varint();
  f->number = static_cast<uint32_t>(key >> 3);
  const auto type = static_cast<uint8_t>(key & 7u);
  if (f->number == 0) throw Error(std::string(what_) + ": field number 0");
  switch (type) {
    case 0:
      f->type = WireType::kVarint;
      f->varint = varint();
      return true;
    case 1:
    case 5: {
      const size_t n = type == 1 ? 8 : 4;
      if (p_.size() < n)
        throw Error(std::string(what_) + ": message ends inside field " +
                    std::to_string(f->number));
      f->type = type == 1 ? WireType::kFixed64 : WireType::kFixed32;
      f->varint = load_le(p_.data(), static_cast<int>(n));
      p_.remove_prefix(n);
      return true;
    }
    case 2: {
      const uint64_t n = varint();
      if (n > p_.size())
        throw Error(std::string(what_) + ": field " + std::to_string(f->number) + " says " +
                    std::to_string(n) + " bytes, " + std::to_string(p_.size()) + " are left");
      f->type = WireType::kBytes;
      f->bytes = p_.substr(0, n);
      p_.remove_prefix(n);
      return true;
    }
    default:
      throw Error(std::string(what_) + ": field " + std::to_string(f->number) + " has wire type " +
                  std::to_string(type) + " (groups are not supported)");
  }
}

void append_doubles(const Field& f, std::vector<double>& out, const char* what) {
  if (f.type == WireType::kFixed64) {
    out.push_back(f.as_double());
  } else if (f.type == WireType::kBytes) {
    if (f.bytes.size() % 8 != 0)
      throw Error(std::string(what) + ": packed doubles of " + std::to_string(f.bytes.size()) +
                  " bytes");
    for (size_t i = 0; i < f.bytes.size(); i += 8)
      out.push_back(std::bit_cast<double>(load_le(f.bytes.data() + i, 8)));
  } else {
    throw Error(std::string(what) + ": field " + std::to_string(f.number) + " is not a double");
  }
}

void append_floats(const Field& f, std::vector<float>& out, const char* what) {
  if (f.type == WireType::kFixed32) {
    out.push_back(f.as_float());
  } else if (f.type == WireType::kBytes) {
    if (f.bytes.size() % 4 != 0)
      throw Error(std::string(what) + ": packed floats of " + std::to_string(f.bytes.size()) +
                  " bytes");
    for (size_t i = 0; i < f.bytes.size(); i += 4)
      out.push_back(std::bit_cast<float>(static_cast<uint32_t>(load_le(f.bytes.data() + i, 4))));
  } else {
    throw Error(std::string(what) + ": field " + std::to_string(f.number) + " is not a float");
  }
}

void append_varints(const Field& f, std::vector<uint64_t>& out, const char* what) {
  if (f.type == WireType::kVarint) {
    out.push_back(f.varint);
  } else if (f.type == WireType::kBytes) {
    // A packed run: varints back to back.
    std::string_view rest = f.bytes;
    while (!rest.empty()) {
      uint64_t v = 0;
      int shift = 0;
      for (;; shift += 7) {
        if (rest.empty() || shift >= 64)
          throw Error(std::string(what) + ": malformed packed varints");
        const auto b = static_cast<unsigned char>(rest.front());
        rest.remove_prefix(1);
        v |= static_cast<uint64_t>(b & 0x7fu) << shift;
        if ((b & 0x80u) == 0) break;
      }
      out.push_back(v);
    }
  } else {
    throw Error(std::string(what) + ": field " + std::to_string(f.number) + " is not a varint");
  }
}

void Writer::raw_varint(uint64_t v) {
  while (v >= 0x80u) {
    out_.push_back(static_cast<char>((v & 0x7fu) | 0x80u));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void Writer::key(uint32_t number, WireType type) {
  raw_varint((static_cast<uint64_t>(number) << 3) | static_cast<uint64_t>(type));
}

void Writer::varint(uint32_t number, uint64_t v) {
  key(number, WireType::kVarint);
  raw_varint(v);
}

void Writer::fixed64(uint32_t number, uint64_t v) {
  key(number, WireType::kFixed64);
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

void Writer::fixed32(uint32_t number, uint32_t v) {
  key(number, WireType::kFixed32);
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

void Writer::f64(uint32_t number, double v) {
  fixed64(number, std::bit_cast<uint64_t>(v));
}

void Writer::f32(uint32_t number, float v) {
  fixed32(number, std::bit_cast<uint32_t>(v));
}

void Writer::bytes(uint32_t number, std::string_view v) {
  key(number, WireType::kBytes);
  raw_varint(v.size());
  out_.append(v);
}

void Writer::packed_doubles(uint32_t number, const std::vector<double>& v) {
  key(number, WireType::kBytes);
  raw_varint(v.size() * 8);
  for (double d : v) {
    const uint64_t u = std::bit_cast<uint64_t>(d);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((u >> (8 * i)) & 0xffu));
  }
}

}  // namespace fp8rl::proto
