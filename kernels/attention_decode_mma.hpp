// attention_cached's decode step on the tensor cores for an FP8 (E4M3) or BF16 KV cache at head
// dim 128 (attention_decode_mma.cu), the default (kernel option attention_kernel = 3)
// (CudaBackend::attention_decode chooses; attention_decode.cu combines the splits).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace fp8rl::cuda {

// The head dim the kernel takes.
inline constexpr int64_t kDecodeMmaHeadDim = 128;

// Operands of one decode step: row i of q attends to the first lengths[i] positions of cache
// slot slot_ids[i] (rows whose slot or length is out of range get zeros, as attention_cached).
// Split z of `splits` takes a contiguous range of a row's keys; with one split the kernel writes
// o, with more it writes each (row, head, split)'s running max and sum (part_ml: pairs) and its
// unnormalised output (part_acc), which decode_attention_combine_kernel merges, as for the FP32
// decode kernel.
struct DecodeMmaArgs {
  const uint16_t* q = nullptr;       // [n, Hq·128] BF16
  uint16_t* o = nullptr;             // [n, Hq·128] BF16 (one split)
  bool fp8 = true;                   // the cache: E4M3 codes, else BF16 values
  const uint8_t* cache_k = nullptr;  // [num_slots·max_len, width] elements
  const uint8_t* cache_v = nullptr;
  const float* k_scale_inv = nullptr;  // FP8: device scalars, value = code · scale_inv
  const float* v_scale_inv = nullptr;
  const int32_t* slot_ids = nullptr;  // [n]
  const int32_t* lengths = nullptr;   // [n]
  float* part_ml = nullptr;           // [n·Hq·splits][2] (max, sum), more than one split
  float* part_acc = nullptr;          // [n·Hq·splits, 128]
  int64_t n = 0, num_slots = 0, max_len = 0, width = 0;  // width: Hkv·128 codes a position
  int Hq = 0, Hkv = 0, splits = 1;
  float scale = 0;  // the softmax scale, 1/sqrt(128)
  // With codes (one split): o's 1x128 blocks — a head each — quantized as o is written, as
  // quantize of the BF16 o makes them: codes [n, Hq·128], scale_inv per (row, head) in the
  // row1x128 layout; E5M2 or E4M3, power-of-two scales or not.
  uint8_t* codes = nullptr;
  float* scale_inv = nullptr;
  bool e5m2 = false, pow2 = false;
};

// Keys a CTA streams per stage: a split's range is a multiple of it.
inline constexpr int64_t kDecodeMmaStageKeys = 64;

// The keys [begin, end) of a row that split z of `splits` takes, as both decode kernels split a
// sequence (attention_decode.cu, attention_decode_mma.cu): whole stages of stage_keys keys,
// sized from the row's own length (read from device memory, so every split of a short sequence
// still has keys while lengths grow); empty for a row whose slot or length is out of range, and
// for a split past the row's keys.
struct KeyRange {
  int begin = 0, end = 0;
};
__host__ __device__ inline KeyRange split_keys(int64_t slot, int len, int64_t num_slots,
                                               int64_t max_len, int splits, int z, int stage_keys) {
  if (!(slot >= 0 && slot < num_slots && len >= 1 && len <= max_len)) return {};
  const int64_t per = (len + splits - 1) / splits;
  const int64_t chunk = (per + stage_keys - 1) / stage_keys * stage_keys;
  const int64_t begin = z * chunk < len ? z * chunk : len;
  const int64_t end = begin + chunk < len ? begin + chunk : len;
  return {static_cast<int>(begin), static_cast<int>(end)};
}

// Why the kernel cannot take these operands, "" when it can: head dim 128 (width = Hkv·128),
// Hq a multiple of Hkv, the caches 16-byte aligned (cp.async), an FP8 cache's scales given,
// splits within 1..the stages of max_len.
std::string decode_mma_problem(const DecodeMmaArgs& a);

// One launch on `stream` of device `device` (grid: rows × kv heads · ⌈group / 8⌉ × splits), no
// host synchronisation. Needs decode_mma_problem(a) == "".
void attention_decode_mma(const DecodeMmaArgs& a, int device, cudaStream_t stream);

}  // namespace fp8rl::cuda
