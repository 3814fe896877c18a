// CRC-32C (Castagnoli): the checksums of checkpoint files, to tell a complete file from one
// written incompletely or changed since (not a defence against deliberate tampering).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace fp8rl {

// CRC-32C of n bytes, continuing from crc (0 for a fresh sum). SSE4.2's crc32 instruction where
// the CPU has it, else a table; both give the same value. crc32c("123456789") = 0xe3069283.
uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// CRC-32C and size of a whole file; throws Error naming the file when it cannot be read.
struct FileChecksum {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};
FileChecksum file_checksum(const std::string& path);

}  // namespace fp8rl
