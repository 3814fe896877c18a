// The protocol buffer wire format (protobuf's "Encoding" page), read and written by hand: the
// few messages of TensorBoard's event files need no generated code. A message is a sequence of
// fields, each a key (field number << 3 | wire type) as a varint, then its value: a varint
// (type 0), 8 little-endian bytes (1), a length-prefixed byte string (2: strings, bytes,
// nested messages, packed repeated numbers) or 4 little-endian bytes (5). Groups (3, 4) are
// obsolete and rejected.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp8rl::proto {

enum class WireType : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

// One field as read: its number and wire type; the value in `varint` (types 0, 1 and 5: the
// raw 64 or 32 bits for the fixed ones) or `bytes` (type 2, a view into the message).
struct Field {
  uint32_t number = 0;
  WireType type = WireType::kVarint;
  uint64_t varint = 0;
  std::string_view bytes;

  // The value as a double (fixed64), a float (fixed32), a signed integer (varint, two's
  // complement as int64 and int32 encode it), a bool.
  double as_double() const;
  float as_float() const;
  int64_t as_int64() const { return static_cast<int64_t>(varint); }
  bool as_bool() const { return varint != 0; }
};

// Reads the fields of one message in order. next() throws fp8rl::Error("<what>: …") on a
// truncated or malformed message.
class Reader {
 public:
  Reader(std::string_view message, const char* what) : p_(message), what_(what) {}
  // The next field into *f; false at the end of the message.
  bool next(Field* f);

 private:
  uint64_t varint();
  std::string_view p_;
  const char* what_;
};

// Appends the numbers of a repeated double / float / varint field to out, packed (one
// length-delimited field) or not (one field per number), as a reader must accept both.
void append_doubles(const Field& f, std::vector<double>& out, const char* what);
void append_floats(const Field& f, std::vector<float>& out, const char* what);
void append_varints(const Field& f, std::vector<uint64_t>& out, const char* what);

// Writes fields into a byte string (the message); nested messages are written into a Writer of
// their own and added with bytes().
class Writer {
 public:
  void varint(uint32_t number, uint64_t v);
  void int64(uint32_t number, int64_t v) { varint(number, static_cast<uint64_t>(v)); }
  void fixed64(uint32_t number, uint64_t v);
  void fixed32(uint32_t number, uint32_t v);
  void f64(uint32_t number, double v);  // a double (fixed64)
  void f32(uint32_t number, float v);   // a float (fixed32)
  void bytes(uint32_t number, std::string_view v);
  // A repeated double field, packed.
  void packed_doubles(uint32_t number, const std::vector<double>& v);

  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void key(uint32_t number, WireType type);
  void raw_varint(uint64_t v);
  std::string out_;
};

}  // namespace fp8rl::proto
