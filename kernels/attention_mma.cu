// Causal grouped-query attention on the tensor cores, for BF16 operands and head dims 64 and 128
// (FlashAttention-2's arithmetic in the structure of attention.cu's FP32 kernels).
//
// Forward: CTA (query tile, query head, sequence) walks the key tiles up to the diagonal,
// S = Q·Kᵀ, online softmax in registers (running max and sum per row, the output accumulator
// rescaled when the max grows), O += P·V; o = O / l and lse = max + log l at the end.
//
// Backward: dq, dk, dv from dout, q, k, v, lse and di = rowsum(dO ⊙ O) (attention.cu's di
// kernel). Two kernels each own their outputs, as attention.cu's: every output element is summed in
// a fixed order by one thread and written once — no atomics, bit-reproducible run to run.
//  - dq: CTA (query tile, query head, sequence) walks the key tiles up to the diagonal:
//    S = Q·Kᵀ, dP = dO·Vᵀ, P = exp(S·scale − lse), dS = P ⊙ (dP − Di), dq += dS·K.
//  - dk, dv: CTA (key tile, kv head, sequence) walks the query heads of its group and the query
//    tiles from the diagonal on, in the transposed form: Sᵀ = K·Qᵀ, Pᵀ, dV += Pᵀ·dO,
//    dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ⊙ (dPᵀ − Di), dK += dSᵀ·Q. Each warp owns 16 key rows and everything
//    computed for them, so no score tile is transposed or shared between warps.
// Tiles are 64 rows (queries and keys); 4 warps, warp w owns rows 16w .. 16w + 15 of the CTA's
// own tile (queries in dq, keys in dk/dv) against all 64 rows of the walked tile. The walked
// tile is double-buffered: cp.async fetches the next one while the current one is multiplied.
//
// Numerics (FlashAttention-2's): the products sum in FP32 on the tensor cores
// (mma.sync.m16n8k16 BF16 → FP32); P and dS are rounded to BF16 once, as the A operand of
// O += P·V, dV += Pᵀ·dO, dq += dS·K and dK += dSᵀ·Q; the softmax sums and dS are computed from
// the FP32 P; the outputs are rounded once to BF16. exp is exp2f of (s·scale·log2 e − m) with m
// the running max (forward) or lse·log2 e (backward).
//
// Fragment layouts relied on (PTX ISA, "Matrix fragments for mma.m16n8k16" with .bf16, and
// "ldmatrix"), for the reviewer: lane = threadIdx.x % 32, g = lane / 4, c = lane % 4.
//  [A] A (16x16, .row): a0 = (row g, cols 2c, 2c+1), a1 = (row g+8, cols 2c, 2c+1),
//      a2 = (row g, cols 2c+8, 2c+9), a3 = (row g+8, cols 2c+8, 2c+9); in each .b32 the lower
//      column index sits in the low 16 bits.
//  [B] B (16x8, .col): b0 = (rows k = 2c, 2c+1; col n = g), b1 = (rows 2c+8, 2c+9; col g).
//  [C] C/D (16x8 f32): c0, c1 = (row g, cols 2c, 2c+1), c2, c3 = (row g+8, cols 2c, 2c+1).
//  [L] ldmatrix .m8n8.x4.b16: lanes 8i .. 8i+7 give the 8 row addresses (16 bytes each) of
//      matrix i; register ri of a lane holds row g, elements 2c, 2c+1 of matrix i.
//  [T] with .trans: register ri holds elements (row 2c, col g) and (row 2c+1, col g) of matrix i
//      (low 16 bits: row 2c), i.e. row g, elements 2c, 2c+1 of its transpose.
// How they are used (l = lane):
//  - A from a row-major [m][k] tile at (m0, k0) — ldsm_a: lane l addresses row
//    m0 + l%8 + 8·((l/8)%2), column k0 + 8·(l/16): matrices 0..3 = (rows 0-7, k 0-7),
//    (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = a0..a3 by [L] and [A].
//  - B from a tile stored [n][k] (K or V rows for Q·Kᵀ, dO·Vᵀ; Q or dO rows for K·Qᵀ, V·dOᵀ) at
//    (n0, k0), two n8 tiles at once — ldsm_b: lane l addresses row n0 + l%8 + 8·(l/16), column
//    k0 + 8·((l/8)%2): matrices 0..3 = (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
//    (n 8-15, k 8-15): by [L] ri = row n = g, k = 2c, 2c+1, i.e. B[k][n] = tile[n][k] as [B]
//    wants: {r0, r1} = b0, b1 of n tile n0, {r2, r3} of n tile n0 + 8.
//  - B from a tile stored [k][n] (K for dS·K; dO, Q for Pᵀ·dO, dSᵀ·Q) at (k0, n0) — ldsm_bt
//    (.trans): lane l addresses row k0 + l%8 + 8·((l/8)%2), column n0 + 8·(l/16): matrices
//    0..3 = (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15); by [T] ri holds
//    tile[k = 2c, 2c+1][n = g] as [B] wants: {r0, r1} = b0, b1 of n tile n0, {r2, r3} of n0 + 8.
//  - C to A (P, dS as the next A operand, the score tile's n becoming k): for k step j (scores
//    16j .. 16j+15), a0 = {C(2j).c0, c1}, a1 = {C(2j).c2, c3}, a2 = {C(2j+1).c0, c1},
//    a3 = {C(2j+1).c2, c3} by [C] and [A] (C(n) = the n-th 8-column tile); pack_bf16 puts the
//    first (lower column) value in the low 16 bits.
//  - Row statistics (forward): by [C] the 64 scores of row g (or g+8) of a warp's tile are held
//    by the 4 lanes 4g .. 4g+3, so a row's max and sum are each lane's own over its 16 values,
//    then xor-shuffles over lane bits 0 and 1 (quad_max, quad_sum).
// Shared tiles are [64][D + 8] BF16: the 16-byte pad shifts each row by 4 banks, so the 8 row
// addresses of an ldmatrix matrix hit 8 different 4-bank groups (no conflicts), and keeps every
// row 16-byte aligned for cp.async and ldmatrix. Rows past T are zero-filled (never garbage in
// a product); their scores are masked (key ≤ query < T) so they contribute exactly 0.
#include "attention_mma.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

#include "core/error.hpp"
#include "cuda_check.hpp"
#include "mma_ptx.cuh"

namespace fp8rl::cuda {
namespace {

using namespace ptx;  // cp.async, ldmatrix, mma.sync (mma_ptx.cuh)

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 64;                // rows of every tile (queries and keys)
constexpr int kPad = 8;                  // BF16 after each row of a shared tile (16 bytes)
constexpr int kScoreTiles = kTile / 8;   // n8 tiles of a warp's 16 x 64 score tile
constexpr int kScoreSteps = kTile / 16;  // k16 steps over a score tile's columns
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
struct Shape {
  static_assert(D % 16 == 0, "head dim must be a multiple of 16");
  static constexpr int kPitch = D + kPad;                    // BF16 per shared row
  static constexpr int kTileElems = kTile * kPitch;          // BF16 per shared tile
  static constexpr int kSteps = D / 16;                      // k16 steps over the head dim
  static constexpr int kOutTiles = D / 8;                    // n8 tiles of a 16 x D output
  static constexpr int kChunks = D / 8;                      // 16-byte pieces of a row
  static constexpr int kLoads = kTile * kChunks / kThreads;  // pieces per thread per tile
  static_assert(kTile * kChunks % kThreads == 0, "tile loads must split evenly");
};

// Dynamic shared memory (bytes) of either kernel: six tiles (the own two, the walked two
// double-buffered) and, in dk/dv, lse and di of the query tile, double-buffered.
template <int D>
constexpr size_t smem_bytes() {
  return 6 * sizeof(uint16_t) * Shape<D>::kTileElems + 4 * sizeof(float) * kTile;
}

// Two floats rounded to nearest-even BF16, `lo` in the low 16 bits.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo: the low half
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

// Shared addresses each lane gives ldmatrix (see the header), as byte offsets from a tile's
// start: lane_a for A from a row-major [m][k] tile (and for B from a [k][n] tile with .trans),
// lane_b for B from a tile stored [n][k]. The 16x16 block at (row0, col0) adds
// 2·(row0·pitch + col0): with row0 and col0 known at compile time ldmatrix takes it as an
// immediate offset.
template <int kPitch>
__device__ __forceinline__ uint32_t lane_a(int lane) {
  return 2u *
         static_cast<uint32_t>(((lane & 7) + ((lane >> 3) & 1) * 8) * kPitch + (lane >> 4) * 8);
}
template <int kPitch>
__device__ __forceinline__ uint32_t lane_b(int lane) {
  return 2u *
         static_cast<uint32_t>(((lane & 7) + (lane >> 4) * 8) * kPitch + ((lane >> 3) & 1) * 8);
}
template <int kPitch>
__device__ constexpr uint32_t block_offset(int row0, int col0) {
  return 2u * static_cast<uint32_t>(row0 * kPitch + col0);
}

// acc[n8 tile j] = A · B over the head dim, A = the warp's 16 rows of a row-major [m][D] tile
// (a: the shared address of its lane_a for those rows), B[k][n] = brows[n][k] (b: the shared
// address of a [kTile][D] tile plus lane_b): a warp's 16 x 64 score tile (Q·Kᵀ, dO·Vᵀ, K·Qᵀ,
// V·dOᵀ).
template <int D>
__device__ __forceinline__ void scores(float (&acc)[kScoreTiles][4], uint32_t a, uint32_t b) {
  using S = Shape<D>;
#pragma unroll
  for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < S::kSteps; ++kk) {
    uint32_t af[4];
    ldsm_x4(af, a + block_offset<S::kPitch>(0, 16 * kk));
#pragma unroll
    for (int np = 0; np < kTile / 16; ++np) {
      uint32_t bf[4];
      ldsm_x4(bf, b + block_offset<S::kPitch>(16 * np, 16 * kk));
      mma_bf16(acc[2 * np], af, bf[0], bf[1]);
      mma_bf16(acc[2 * np + 1], af, bf[2], bf[3]);
    }
  }
}

// The warp's 16 x 64 score tile as BF16 A fragments, one per k16 step (C to A, see the header).
__device__ __forceinline__ void to_a_fragments(const float (&s)[kScoreTiles][4],
                                               uint32_t (&a)[kScoreSteps][4]) {
#pragma unroll
  for (int j = 0; j < kScoreSteps; ++j) {
    a[j][0] = pack_bf16(s[2 * j][0], s[2 * j][1]);
    a[j][1] = pack_bf16(s[2 * j][2], s[2 * j][3]);
    a[j][2] = pack_bf16(s[2 * j + 1][0], s[2 * j + 1][1]);
    a[j][3] = pack_bf16(s[2 * j + 1][2], s[2 * j + 1][3]);
  }
}

// out[n8 tile] += A · tile, A = the warp's 16 x 64 tile as BF16 fragments, tile a shared
// [kTile][D] tile stored [k][n] (K, dO or Q; bt: its shared address plus lane_a).
template <int D>
__device__ __forceinline__ void accumulate(float (&out)[Shape<D>::kOutTiles][4],
                                           const uint32_t (&a)[kScoreSteps][4], uint32_t bt) {
  using S = Shape<D>;
#pragma unroll
  for (int j = 0; j < kScoreSteps; ++j)
#pragma unroll
    for (int nd = 0; nd < S::kSteps; ++nd) {
      uint32_t bf[4];
      ldsm_x4_trans(bf, bt + block_offset<S::kPitch>(16 * j, 16 * nd));
      mma_bf16(out[2 * nd], a[j], bf[0], bf[1]);
      mma_bf16(out[2 * nd + 1], a[j], bf[2], bf[3]);
    }
}

// Starts copying rows row0 .. row0 + valid − 1 (columns col0 .. col0 + D − 1) of a [·, ld] BF16
// operand into a shared [kTile][pitch] tile (cp.async, 16 bytes each; the caller commits);
// rows valid .. kTile − 1 become zero.
template <int D>
__device__ __forceinline__ void load_tile(uint16_t* dst, const uint16_t* __restrict__ src,
                                          int64_t row0, int valid, int64_t ld, int64_t col0) {
  using S = Shape<D>;
#pragma unroll
  for (int i = 0; i < S::kLoads; ++i) {
    const int piece = static_cast<int>(threadIdx.x) + i * kThreads;
    const int r = piece / S::kChunks, c = (piece % S::kChunks) * 8;
    uint16_t* d = dst + r * S::kPitch + c;
    if (r < valid)
      cp_async16(d, src + (row0 + r) * ld + col0 + c);
    else
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
  }
}

// Writes a warp's 16 x D FP32 tile times `mul` as BF16 to rows row0 + g, row0 + g + 8 (those
// below `valid` rows of the CTA tile: `local` is the first row's index in it) of a [·, ld]
// operand from column col0.
template <int D>
__device__ __forceinline__ void store_rows(uint16_t* __restrict__ dst,
                                           const float (&acc)[Shape<D>::kOutTiles][4], float mul,
                                           int64_t row0, int local, int valid, int64_t ld,
                                           int64_t col0, int lane) {
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (local + g + 8 * half >= valid) continue;
    uint16_t* row = dst + (row0 + g + 8 * half) * ld + col0;
#pragma unroll
    for (int j = 0; j < Shape<D>::kOutTiles; ++j)
      *reinterpret_cast<uint32_t*>(row + 8 * j + 2 * c) =
          pack_bf16(mul * acc[j][2 * half], mul * acc[j][2 * half + 1]);
  }
}

struct Params {
  const uint16_t *dout, *q, *k, *v;
  const float *lse, *di;
  uint16_t *dq, *dk, *dv;
  int64_t T;
  int Hq, Hkv;
  float scale;
};

// dq: grid (query tiles, Hq, B); block x = 0 takes the last query tile (the most key tiles), so
// the longest CTAs start first.
template <int D>
__global__ void __launch_bounds__(kThreads) attention_dq_mma_kernel(Params p) {
  using S = Shape<D>;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* Qs = smem;
  uint16_t* dOs = Qs + S::kTileElems;
  // K, V of key tile kt in buffer kt % 2: Ks(buf), Vs(buf).
  auto Ks = [&](int buf) { return dOs + (1 + 2 * buf) * S::kTileElems; };
  auto Vs = [&](int buf) { return dOs + (2 + 2 * buf) * S::kTileElems; };

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t T = p.T;
  const int64_t t0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kTile;
  const int h = static_cast<int>(blockIdx.y), hk = h / (p.Hq / p.Hkv);
  const int64_t b = blockIdx.z;
  const int q_valid = static_cast<int>(min(static_cast<int64_t>(kTile), T - t0));
  const int64_t q_ld = static_cast<int64_t>(p.Hq) * D, kv_ld = static_cast<int64_t>(p.Hkv) * D;
  const int64_t seq0 = b * T, q_col = static_cast<int64_t>(h) * D,
                kv_col = static_cast<int64_t>(hk) * D;
  const int64_t n_kt = (t0 + q_valid - 1) / kTile + 1;  // key tiles up to the diagonal

  load_tile<D>(Qs, p.q, seq0 + t0, q_valid, q_ld, q_col);
  load_tile<D>(dOs, p.dout, seq0 + t0, q_valid, q_ld, q_col);
  const int k_valid0 = static_cast<int>(min(static_cast<int64_t>(kTile), T));
  load_tile<D>(Ks(0), p.k, seq0, k_valid0, kv_ld, kv_col);
  load_tile<D>(Vs(0), p.v, seq0, k_valid0, kv_ld, kv_col);
  cp_async_commit();

  // The thread's two query rows (16·warp + g and + 8): lse·log2 e and di (0 past T).
  float lse2[2], di[2];
  const int64_t stats0 = (b * p.Hq + h) * T;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = 16 * warp + g + 8 * half;
    lse2[half] = row < q_valid ? p.lse[stats0 + t0 + row] * kLog2e : 0.0f;
    di[half] = row < q_valid ? p.di[stats0 + t0 + row] : 0.0f;
  }
  const float scale2 = p.scale * kLog2e;
  // ldmatrix addresses: the warp's rows of Q and dO (A), this lane's offsets in a walked tile.
  const uint32_t la = lane_a<S::kPitch>(lane), lb = lane_b<S::kPitch>(lane);
  const uint32_t q_a = smem_addr(Qs) + block_offset<S::kPitch>(16 * warp, 0) + la;
  const uint32_t do_a = smem_addr(dOs) + block_offset<S::kPitch>(16 * warp, 0) + la;

  float acc[S::kOutTiles][4];
#pragma unroll
  for (int j = 0; j < S::kOutTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

  for (int64_t kt = 0; kt < n_kt; ++kt) {
    const int buf = static_cast<int>(kt & 1);
    if (kt + 1 < n_kt) {  // fetch the next key tile into the other buffer
      const int64_t k1 = (kt + 1) * kTile;
      const int valid = static_cast<int>(min(static_cast<int64_t>(kTile), T - k1));
      load_tile<D>(Ks(buf ^ 1), p.k, seq0 + k1, valid, kv_ld, kv_col);
      load_tile<D>(Vs(buf ^ 1), p.v, seq0 + k1, valid, kv_ld, kv_col);
      cp_async_commit();
      cp_async_wait<1>();  // all but the group just committed: this tile (and Q, dO) landed
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // every thread's pieces of this tile are visible

    // Score (row, key k0 + col) is live when col ≤ last[half] (key ≤ query; queries at or past
    // T have last = −1), query − k0 clamped to kTile.
    const int64_t k0 = kt * kTile;
    int last[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * warp + g + 8 * half;
      last[half] =
          row < q_valid ? static_cast<int>(min(t0 + row - k0, static_cast<int64_t>(kTile))) : -1;
    }
    float s[kScoreTiles][4], dp[kScoreTiles][4];
    scores<D>(s, q_a, smem_addr(Ks(buf)) + lb);
    scores<D>(dp, do_a, smem_addr(Vs(buf)) + lb);
    // dS = P ⊙ (dP − Di), P = exp(S·scale − lse); 0 unless key ≤ query < T.
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e >> 1;
        float ds = 0.0f;
        if (8 * j + 2 * c + (e & 1) <= last[half]) {
          const float pr = exp2f(s[j][e] * scale2 - lse2[half]);
          ds = pr * (dp[j][e] - di[half]);
        }
        s[j][e] = ds;
      }
    uint32_t a_ds[kScoreSteps][4];
    to_a_fragments(s, a_ds);
    accumulate<D>(acc, a_ds, smem_addr(Ks(buf)) + la);
    __syncthreads();  // done with this buffer before the next iteration refills it
  }

  store_rows<D>(p.dq, acc, p.scale, seq0 + t0 + 16 * warp, 16 * warp, q_valid, q_ld, q_col, lane);
}

// dk, dv: grid (key tiles, Hkv, B); key tile 0 sees every query tile, so block x = 0 (started
// first) is the longest.
template <int D>
__global__ void __launch_bounds__(kThreads) attention_dkv_mma_kernel(Params p) {
  using S = Shape<D>;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* Ks = smem;
  uint16_t* Vs = Ks + S::kTileElems;
  // Q, dO, lse·log2 e and di of the query tile of iteration it in buffer it % 2.
  auto Qs = [&](int buf) { return Vs + (1 + 2 * buf) * S::kTileElems; };
  auto dOs = [&](int buf) { return Vs + (2 + 2 * buf) * S::kTileElems; };
  float* stats = reinterpret_cast<float*>(Vs + 5 * S::kTileElems);
  auto Ls = [&](int buf) { return stats + 2 * buf * kTile; };
  auto Ds = [&](int buf) { return stats + (2 * buf + 1) * kTile; };

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t T = p.T;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int hk = static_cast<int>(blockIdx.y);
  const int64_t b = blockIdx.z;
  const int group = p.Hq / p.Hkv;
  const int k_valid = static_cast<int>(min(static_cast<int64_t>(kTile), T - k0));
  const int64_t q_ld = static_cast<int64_t>(p.Hq) * D, kv_ld = static_cast<int64_t>(p.Hkv) * D;
  const int64_t seq0 = b * T, kv_col = static_cast<int64_t>(hk) * D;
  // Queries before k0 see none of this tile's keys: start at the query tile holding k0 (the
  // tiles have the same size, so it is tile blockIdx.x).
  const int64_t qt_first = k0 / kTile, n_qt = (T + kTile - 1) / kTile;
  const int64_t per_head = n_qt - qt_first, steps = per_head * group;

  // Iteration `it` is query tile qt_first + it % per_head of query head hk·group + it / per_head:
  // starts fetching its Q and dO (cp.async, not committed) and writes its lse·log2 e and di.
  auto fetch = [&](int64_t it, int buf) {
    const int h = hk * group + static_cast<int>(it / per_head);
    const int64_t t0 = (qt_first + it % per_head) * kTile;
    const int valid = static_cast<int>(min(static_cast<int64_t>(kTile), T - t0));
    const int64_t q_col = static_cast<int64_t>(h) * D;
    load_tile<D>(Qs(buf), p.q, seq0 + t0, valid, q_ld, q_col);
    load_tile<D>(dOs(buf), p.dout, seq0 + t0, valid, q_ld, q_col);
    if (threadIdx.x < kTile) {
      const int i = static_cast<int>(threadIdx.x);
      const int64_t stats0 = (b * p.Hq + h) * T;
      Ls(buf)[i] = i < valid ? p.lse[stats0 + t0 + i] * kLog2e : 0.0f;
      Ds(buf)[i] = i < valid ? p.di[stats0 + t0 + i] : 0.0f;
    }
  };

  load_tile<D>(Ks, p.k, seq0 + k0, k_valid, kv_ld, kv_col);
  load_tile<D>(Vs, p.v, seq0 + k0, k_valid, kv_ld, kv_col);
  fetch(0, 0);
  cp_async_commit();

  const float scale2 = p.scale * kLog2e;
  // ldmatrix addresses: the warp's rows of K and V (A), this lane's offsets in a walked tile.
  const uint32_t la = lane_a<S::kPitch>(lane), lb = lane_b<S::kPitch>(lane);
  const uint32_t k_a = smem_addr(Ks) + block_offset<S::kPitch>(16 * warp, 0) + la;
  const uint32_t v_a = smem_addr(Vs) + block_offset<S::kPitch>(16 * warp, 0) + la;

  float dk[S::kOutTiles][4], dv[S::kOutTiles][4];
#pragma unroll
  for (int j = 0; j < S::kOutTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.0f;

  for (int64_t it = 0; it < steps; ++it) {
    const int buf = static_cast<int>(it & 1);
    if (it + 1 < steps) {
      fetch(it + 1, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // this tile's Q, dO, lse and di (and K, V) are visible

    // Score (key row, query t0 + col) is live when first[half] ≤ col < end (key ≤ query < T):
    // 32-bit offsets from t0 (clamped: a key row before t0 sees every query of the tile).
    const int64_t t0 = (qt_first + it % per_head) * kTile;
    const int end = static_cast<int>(min(static_cast<int64_t>(kTile), T - t0));
    int first[2];
#pragma unroll
    for (int half = 0; half < 2; ++half)
      first[half] = static_cast<int>(max(k0 + 16 * warp + g + 8 * half - t0, int64_t{-1}));
    const float* L = Ls(buf);
    const float* Dd = Ds(buf);
    // Pᵀ = exp(K·Qᵀ·scale − lse), 0 unless key ≤ query < T; `live` keeps the mask for dSᵀ.
    float s[kScoreTiles][4];
    scores<D>(s, k_a, smem_addr(Qs(buf)) + lb);
    uint32_t live = 0;
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * j + 2 * c + (e & 1);
        const bool on = first[e >> 1] <= col && col < end;
        s[j][e] = on ? exp2f(s[j][e] * scale2 - L[col]) : 0.0f;
        live |= static_cast<uint32_t>(on) << (4 * j + e);
      }
    {
      uint32_t a_p[kScoreSteps][4];
      to_a_fragments(s, a_p);
      accumulate<D>(dv, a_p, smem_addr(dOs(buf)) + la);  // dV += Pᵀ·dO
    }
    // dSᵀ = Pᵀ ⊙ (V·dOᵀ − Di).
    float dp[kScoreTiles][4];
    scores<D>(dp, v_a, smem_addr(dOs(buf)) + lb);
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * j + 2 * c + (e & 1);
        dp[j][e] = (live >> (4 * j + e)) & 1u ? s[j][e] * (dp[j][e] - Dd[col]) : 0.0f;
      }
    {
      uint32_t a_ds[kScoreSteps][4];
      to_a_fragments(dp, a_ds);
      accumulate<D>(dk, a_ds, smem_addr(Qs(buf)) + la);  // dK += dSᵀ·Q
    }
    __syncthreads();  // done with this buffer before the next iteration refills it
  }

  store_rows<D>(p.dk, dk, p.scale, seq0 + k0 + 16 * warp, 16 * warp, k_valid, kv_ld, kv_col, lane);
  store_rows<D>(p.dv, dv, 1.0f, seq0 + k0 + 16 * warp, 16 * warp, k_valid, kv_ld, kv_col, lane);
}

// The forward: grid (query tiles, Hq, B), block x = 0 takes the last query tile (the most key
// tiles). Each warp keeps its 16 rows' running max m and partial sums l (a quad's four lanes
// each sum their own columns; the max is quad-wide, so the partial sums share one scale and are
// added at the end) and its 16 x D output accumulator, rescaled when the max grows.
struct ForwardParams {
  const uint16_t *q, *k, *v;
  uint16_t* o;
  float* lse;
  int64_t T;
  int Hq, Hkv;
  float scale;
};

// Max and sum over the quad of lanes that hold one row's columns (lanes 4g .. 4g + 3, [C]).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <int D>
__global__ void __launch_bounds__(kThreads) attention_forward_mma_kernel(ForwardParams p) {
  using S = Shape<D>;
  extern __shared__ __align__(16) uint16_t smem[];
  uint16_t* Qs = smem;
  auto Ks = [&](int buf) { return Qs + (1 + 2 * buf) * S::kTileElems; };
  auto Vs = [&](int buf) { return Qs + (2 + 2 * buf) * S::kTileElems; };

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t T = p.T;
  const int64_t t0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kTile;
  const int h = static_cast<int>(blockIdx.y), hk = h / (p.Hq / p.Hkv);
  const int64_t b = blockIdx.z;
  const int q_valid = static_cast<int>(min(static_cast<int64_t>(kTile), T - t0));
  const int64_t q_ld = static_cast<int64_t>(p.Hq) * D, kv_ld = static_cast<int64_t>(p.Hkv) * D;
  const int64_t seq0 = b * T, q_col = static_cast<int64_t>(h) * D,
                kv_col = static_cast<int64_t>(hk) * D;
  const int64_t n_kt = (t0 + q_valid - 1) / kTile + 1;

  load_tile<D>(Qs, p.q, seq0 + t0, q_valid, q_ld, q_col);
  const int k_valid0 = static_cast<int>(min(static_cast<int64_t>(kTile), T));
  load_tile<D>(Ks(0), p.k, seq0, k_valid0, kv_ld, kv_col);
  load_tile<D>(Vs(0), p.v, seq0, k_valid0, kv_ld, kv_col);
  cp_async_commit();

  const float scale2 = p.scale * kLog2e;
  const uint32_t la = lane_a<S::kPitch>(lane), lb = lane_b<S::kPitch>(lane);
  const uint32_t q_a = smem_addr(Qs) + block_offset<S::kPitch>(16 * warp, 0) + la;

  // Per row half (rows 16·warp + g and + 8): the running max of s·scale·log2 e (−inf before any
  // key) and this lane's partial sum of exp2(s·scale·log2 e − max).
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc[S::kOutTiles][4];
#pragma unroll
  for (int j = 0; j < S::kOutTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

  for (int64_t kt = 0; kt < n_kt; ++kt) {
    const int buf = static_cast<int>(kt & 1);
    if (kt + 1 < n_kt) {
      const int64_t k1 = (kt + 1) * kTile;
      const int valid = static_cast<int>(min(static_cast<int64_t>(kTile), T - k1));
      load_tile<D>(Ks(buf ^ 1), p.k, seq0 + k1, valid, kv_ld, kv_col);
      load_tile<D>(Vs(buf ^ 1), p.v, seq0 + k1, valid, kv_ld, kv_col);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    // Live scores as in the dq kernel: key k0 + col with col ≤ last[half].
    const int64_t k0 = kt * kTile;
    int last[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = 16 * warp + g + 8 * half;
      last[half] =
          row < q_valid ? static_cast<int>(min(t0 + row - k0, static_cast<int64_t>(kTile))) : -1;
    }
    float s[kScoreTiles][4];
    scores<D>(s, q_a, smem_addr(Ks(buf)) + lb);
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e >> 1;
        s[j][e] = 8 * j + 2 * c + (e & 1) <= last[half] ? s[j][e] * scale2 : -INFINITY;
        mx[half] = fmaxf(mx[half], s[j][e]);
      }
    // A valid row has a live key in every tile it walks (key k0 ≤ its query), so its max is
    // finite from the first tile on; rows past T stay at −inf and use 0 as their base (every p
    // and the rescale factor then are 0, never NaN; their outputs are not written).
    float base[2], alpha[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float m_new = fmaxf(m[half], quad_max(mx[half]));
      base[half] = m_new == -INFINITY ? 0.0f : m_new;
      alpha[half] = exp2f(m[half] - base[half]);  // 0 on the first tile (m = −inf)
      m[half] = m_new;
      l[half] *= alpha[half];
    }
#pragma unroll
    for (int j = 0; j < kScoreTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int half = e >> 1;
        s[j][e] = exp2f(s[j][e] - base[half]);  // masked: exp2(−inf) = 0
        l[half] += s[j][e];
      }
#pragma unroll
    for (int j = 0; j < S::kOutTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] *= alpha[e >> 1];
    uint32_t a_p[kScoreSteps][4];
    to_a_fragments(s, a_p);
    accumulate<D>(acc, a_p, smem_addr(Vs(buf)) + la);  // O += P·V
    __syncthreads();
  }

  // o = acc / l (rounded once to BF16), lse = (m + log2 l)·ln 2 (natural log, as the FP32
  // kernel's and the CPU's).
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const float sum = quad_sum(l[half]);
    const int row = 16 * warp + g + 8 * half;
    if (row >= q_valid) continue;
    const float inv = 1.0f / sum;
    uint16_t* out = p.o + (seq0 + t0 + row) * q_ld + q_col;
#pragma unroll
    for (int j = 0; j < S::kOutTiles; ++j)
      *reinterpret_cast<uint32_t*>(out + 8 * j + 2 * c) =
          pack_bf16(acc[j][2 * half] * inv, acc[j][2 * half + 1] * inv);
    if (c == 0) p.lse[(b * p.Hq + h) * T + t0 + row] = (m[half] + log2f(sum)) * kLn2;
  }
}

template <class Kernel, class P>
void launch(Kernel kernel, const char* name, size_t smem, dim3 grid, cudaStream_t stream,
            const P& p) {
  int device = 0, optin = 0;
  FP8RL_CUDA_CHECK(cudaGetDevice(&device));
  FP8RL_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  check(smem <= static_cast<size_t>(optin),
        std::string(name) + ": needs " + std::to_string(smem) +
            " bytes of shared memory per block, the device allows " + std::to_string(optin));
  FP8RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  kernel<<<grid, kThreads, smem, stream>>>(p);
  check_launch(name);
}

template <int D>
void run(const AttentionMmaArgs& a, cudaStream_t stream) {
  const Params p{static_cast<const uint16_t*>(a.dout),
                 static_cast<const uint16_t*>(a.q),
                 static_cast<const uint16_t*>(a.k),
                 static_cast<const uint16_t*>(a.v),
                 a.lse,
                 a.di,
                 static_cast<uint16_t*>(a.dq),
                 static_cast<uint16_t*>(a.dk),
                 static_cast<uint16_t*>(a.dv),
                 a.T,
                 a.Hq,
                 a.Hkv,
                 a.scale};
  const auto tiles = static_cast<unsigned>((a.T + kTile - 1) / kTile);
  launch(attention_dq_mma_kernel<D>, "attention_dq_mma_kernel", smem_bytes<D>(),
         dim3(tiles, static_cast<unsigned>(a.Hq), static_cast<unsigned>(a.B)), stream, p);
  launch(attention_dkv_mma_kernel<D>, "attention_dkv_mma_kernel", smem_bytes<D>(),
         dim3(tiles, static_cast<unsigned>(a.Hkv), static_cast<unsigned>(a.B)), stream, p);
}

}  // namespace

bool attention_mma_takes(int D, std::initializer_list<const void*> operands) {
  if (D != 64 && D != 128) return false;
  for (const void* ptr : operands)
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;
  return true;
}

void attention_forward_mma(const AttentionMmaForwardArgs& a, cudaStream_t stream) {
  check(attention_mma_takes(a.D, {a.q, a.k, a.v, a.o}),
        "attention_forward_mma: head dim " + std::to_string(a.D) +
            " or an unaligned operand (needs D 64 or 128, 16-byte aligned BF16 operands)");
  auto go = [&](auto kernel, size_t smem) {
    const ForwardParams p{static_cast<const uint16_t*>(a.q),
                          static_cast<const uint16_t*>(a.k),
                          static_cast<const uint16_t*>(a.v),
                          static_cast<uint16_t*>(a.o),
                          a.lse,
                          a.T,
                          a.Hq,
                          a.Hkv,
                          a.scale};
    const auto tiles = static_cast<unsigned>((a.T + kTile - 1) / kTile);
    launch(kernel, "attention_forward_mma_kernel", smem,
           dim3(tiles, static_cast<unsigned>(a.Hq), static_cast<unsigned>(a.B)), stream, p);
  };
  // Q and the double-buffered K, V: five tiles.
  if (a.D == 64)
    go(attention_forward_mma_kernel<64>, 5 * sizeof(uint16_t) * Shape<64>::kTileElems);
  else
    go(attention_forward_mma_kernel<128>, 5 * sizeof(uint16_t) * Shape<128>::kTileElems);
}

void attention_backward_mma(const AttentionMmaArgs& a, cudaStream_t stream) {
  check(attention_mma_takes(a.D, {a.dout, a.q, a.k, a.v, a.dq, a.dk, a.dv}),
        "attention_backward_mma: head dim " + std::to_string(a.D) +
            " or an unaligned operand (needs D 64 or 128, 16-byte "
            "aligned BF16 operands)");
  if (a.D == 64)
    run<64>(a, stream);
  else
    run<128>(a, stream);
}

}  // namespace fp8rl::cuda
