// TFRecord framing, as TensorBoard's event files use it: each record is
//   uint64 length (little-endian) · uint32 masked CRC-32C of those 8 bytes ·
//   data[length] · uint32 masked CRC-32C of the data,
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace fp8rl::tblog {

uint32_t masked_crc32c(const void* data, size_t n);

// Appends one record holding payload to out.
void append_record(std::string& out, std::string_view payload);

// What a scan of a file's bytes found.
struct RecordScan {
  uint64_t end = 0;         // offset after the last whole record: where the next scan starts
  int64_t records = 0;      // records passed to on_record
  int64_t bad_crc = 0;      // whole records whose data CRC failed: skipped
  bool bad_length = false;  // a header whose length CRC failed: nothing after it can be framed
  uint64_t partial = 0;     // bytes after `end` that do not make a whole record yet (a record
                            // being written, or a truncated file); 0 with bad_length
};

// Scans bytes (a file's content from offset base on) record by record, calling
// on_record(payload) for each record whose CRCs hold. Stops at a header whose length CRC fails
// (bad_length) or at an incomplete record at the end (partial).
RecordScan scan_records(std::string_view bytes, uint64_t base,
                        const std::function<void(std::string_view)>& on_record);

}  // namespace fp8rl::tblog
