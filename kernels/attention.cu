// Causal grouped-query attention, forward and backward, in FP32 (mirrors
// engine/backend/cpu/attention.cpp).
// Shapes: B sequences of T tokens (rows b·T + t), q / o / dout / dq [B·T, Hq·D], k / v / dk / dv
// [B·T, Hkv·D]; query head h reads kv head h / (Hq/Hkv); lse [B, Hq, T] f32 (natural log);
// scale = 1/sqrt(D); D ≤ 256.
//
// Forward (flash-attention style): one CTA per (query tile, head, sequence) keeps its Q tile in
// shared memory and walks the key tiles up to the diagonal with an online softmax (running max
// and sum per row, output accumulator rescaled in registers).
//
// Backward recomputes P = exp(s·scale − lse) instead of storing it, with Di = rowsum(dO ⊙ O)
// precomputed into the scratch buffer, dP = dO·Vᵀ and dS = P ⊙ (dP − Di). Two kernels each own
// their outputs, so every output element is summed in a fixed order and written once (no
// atomics, no zeroing, deterministic):
//  - dq: one CTA per (query tile, head, sequence) walks the key tiles: dq = scale·dS·K;
//  - dk, dv: one CTA per (key tile, kv head, sequence) walks the query heads of its group and
//    the query tiles from the diagonal on: dk = scale·dSᵀ·Q, dv = Pᵀ·dO.
// The scores are computed twice (once per kernel). For BF16 operands at head dims 64 and 128 the
// kernel option attention_mma = 1 runs the forward and the backward on the tensor cores instead
// (attention_mma.cu: the same structure, mma.sync BF16 products).
//
// Thread layout, all kernels: 256 threads as a 16x16 grid, ty = tid / 16 and tx = tid % 16. A
// thread owns rows ty·kR + r of its CTA's tile, columns tx + 16c of a score tile and head-dim
// columns tx + 16c of the accumulators. The 16 threads of a row are one half-warp, so row
// reductions are 4 xor-shuffles. Shared tiles have an odd row pitch (D | 1): the column-wise reads
// of the score loops (16 different rows, same d) then hit 16 different banks.
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "attention_mma.hpp"
#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"

namespace fp8rl {
namespace {

using cuda::In, cuda::Out;

constexpr int kThreads = 256;
constexpr int kMaxHeadDim = 256;

// Tile sizes for head dims up to kMaxD (64, 128 or 256). kRows: the CTA's own rows (query rows
// in forward and dq, key rows in dkv); kCols: the inner tile walked in the loop (key rows in
// forward and dq, query rows in dkv).
template <int kMaxD>
struct Tiles {
  static constexpr int kRows = kMaxD <= 128 ? 64 : 32;
  static constexpr int kCols = 32;
  static constexpr int kR = kRows / 16;   // own rows per thread
  static constexpr int kC = kCols / 16;   // score-tile columns per thread
  static constexpr int kDc = kMaxD / 16;  // head-dim columns per thread
  static constexpr int kSp = kCols + 1;   // pitch of a [kRows][kCols] score tile
};

__host__ __device__ constexpr int tile_pitch(int D) {
  return D | 1;
}

// Shared memory (floats) of each kernel for head dim D.
template <int kMaxD>
constexpr int forward_smem_floats(int D) {  // Q [kRows], K, V [kCols], P [kRows][kSp]
  using Tl = Tiles<kMaxD>;
  return (Tl::kRows + 2 * Tl::kCols) * tile_pitch(D) + Tl::kRows * Tl::kSp;
}
template <int kMaxD>
constexpr int dq_smem_floats(int D) {  // Q, dO [kRows], K, V [kCols], dS [kRows][kSp]
  using Tl = Tiles<kMaxD>;
  return (2 * Tl::kRows + 2 * Tl::kCols) * tile_pitch(D) + Tl::kRows * Tl::kSp;
}
template <int kMaxD>
constexpr int dkv_smem_floats(int D) {  // K, V [kRows], Q, dO [kCols], P, dS [kRows][kSp], lse, Di
  using Tl = Tiles<kMaxD>;
  return (2 * Tl::kRows + 2 * Tl::kCols) * tile_pitch(D) + 2 * Tl::kRows * Tl::kSp + 2 * Tl::kCols;
}

// dst[r·pitch + d] = src[(row0 + r)·ld + col0 + d] for r < valid, 0 for valid ≤ r < rows
// (d < D). Consecutive threads take consecutive d: coalesced row reads.
__device__ __forceinline__ void load_tile(float* dst, int pitch, In src, int64_t row0, int valid,
                                          int rows, int64_t ld, int64_t col0, int D) {
  const int n = rows * D;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    const int r = i / D, d = i - r * D;
    dst[r * pitch + d] = r < valid ? src[(row0 + r) * ld + col0 + d] : 0.0f;
  }
}

// Max / sum over the 16 threads (one half-warp) that share a row.
__device__ __forceinline__ float row_max(float v) {
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(cuda::kFullMask, v, off));
  return v;
}
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) v += __shfl_xor_sync(cuda::kFullMask, v, off);
  return v;
}

// Score tiles of the thread's rows and columns for several pairs of shared tiles at once: for
// pair n, acc_n[r][c] = Σ_d rows[n][(ty·kR + r)·pitch + d] · cols[n][(tx + 16c)·pitch + d], d
// ascending (one multiply-add chain per score). The pairs share the d loop, so their loads
// interleave. The accumulators are separate arrays (one per pair, not one [n][kR][kC] array): the
// compiler then unrolls and schedules the loop as it does hand-written code.
template <int kR, int kC, int... kI, class... Acc>
__device__ __forceinline__ void tile_dots(std::integer_sequence<int, kI...>,
                                          const float* const (&rows)[sizeof...(kI)],
                                          const float* const (&cols)[sizeof...(kI)], int pitch,
                                          int D, int tx, int ty, Acc&... acc) {
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int c = 0; c < kC; ++c) ((acc[r][c] = 0.0f), ...);
  for (int d = 0; d < D; ++d) {
    float rv[sizeof...(kI)][kR], cv[sizeof...(kI)][kC];
#pragma unroll
    for (int r = 0; r < kR; ++r) ((rv[kI][r] = rows[kI][(ty * kR + r) * pitch + d]), ...);
#pragma unroll
    for (int c = 0; c < kC; ++c) ((cv[kI][c] = cols[kI][(tx + 16 * c) * pitch + d]), ...);
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int c = 0; c < kC; ++c) ((acc[r][c] += rv[kI][r] * cv[kI][c]), ...);
  }
}
template <int kR, int kC, class... Acc>
__device__ __forceinline__ void tile_dots(const float* const (&rows)[sizeof...(Acc)],
                                          const float* const (&cols)[sizeof...(Acc)], int pitch,
                                          int D, int tx, int ty, Acc&... acc) {
  tile_dots<kR, kC>(std::make_integer_sequence<int, sizeof...(Acc)>(), rows, cols, pitch, D, tx, ty,
                    acc...);
}

// Products of score tiles with shared tiles for several pairs at once: for pair n,
// acc_n[r][c] += Σ_{j < count} w[n][(ty·kR + r)·kSp + j] · tiles[n][j·pitch + tx + 16c], j
// ascending, for the thread's head-dim columns tx + 16c < D (w: [kRows][kSp] score tiles, tiles:
// [count][pitch]). Separate accumulator arrays as in tile_dots.
template <int kSp, int kR, int kDc, int... kI, class... Acc>
__device__ __forceinline__ void accumulate_products(std::integer_sequence<int, kI...>,
                                                    const float* const (&w)[sizeof...(kI)],
                                                    const float* const (&tiles)[sizeof...(kI)],
                                                    int count, int pitch, int D, int tx, int ty,
                                                    Acc&... acc) {
  for (int j = 0; j < count; ++j) {
    float wv[sizeof...(kI)][kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) ((wv[kI][r] = w[kI][(ty * kR + r) * kSp + j]), ...);
#pragma unroll
    for (int c = 0; c < kDc; ++c) {
      const int col = tx + 16 * c;
      if (col < D) {
        float tv[sizeof...(kI)];
        ((tv[kI] = tiles[kI][j * pitch + col]), ...);
#pragma unroll
        for (int r = 0; r < kR; ++r) ((acc[r][c] += wv[kI][r] * tv[kI]), ...);
      }
    }
  }
}
template <int kSp, int kR, int kDc, class... Acc>
__device__ __forceinline__ void accumulate_products(const float* const (&w)[sizeof...(Acc)],
                                                    const float* const (&tiles)[sizeof...(Acc)],
                                                    int count, int pitch, int D, int tx, int ty,
                                                    Acc&... acc) {
  accumulate_products<kSp, kR, kDc>(std::make_integer_sequence<int, sizeof...(Acc)>(), w, tiles,
                                    count, pitch, D, tx, ty, acc...);
}

// Calls f(r, c, i) for each of the thread's elements of a CTA's output tile: row ty·kR + r < valid
// of the tile, which starts at row row0 of a [·, ld] operand, and head-dim column tx + 16c < D
// from column col0; i is the element's index in the operand. Then row_end(r, row) for the row.
struct NoRowEnd {
  __device__ void operator()(int, int) const {}
};
template <int kR, int kDc, class F, class G = NoRowEnd>
__device__ __forceinline__ void for_each_output(int64_t row0, int valid, int64_t ld, int64_t col0,
                                                int D, int tx, int ty, F f, G row_end = {}) {
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int row = ty * kR + r;
    if (row >= valid) continue;
    const int64_t out_row = (row0 + row) * ld + col0;
#pragma unroll
    for (int c = 0; c < kDc; ++c) {
      const int col = tx + 16 * c;
      if (col < D) f(r, c, out_row + col);
    }
    row_end(r, row);
  }
}

// P = exp(s·scale − lse) and dS = P·(dP − Di) of the thread's scores (r, c), 0 where the key
// follows the query or the query is at or past T (tk ≤ tq < T also keeps tk inside the sequence).
// Score (r, c) pairs position row0 + ty·kR + r of the sequence (the CTA's own rows) with position
// col0 + tx + 16c (the inner tile). kKeyRows (dk, dv): the own rows are keys, and P is stored too
// (for dV); otherwise (dq) they are queries and Ps is not used. dS (and P) go to the [kRows][kSp]
// tiles at (ty·kR + r, tx + 16c). The queries' lse and Di are read only for live scores, at index
// tx + 16c (kKeyRows: the query tile's values) or r (the thread's per-row values).
template <bool kKeyRows, int kSp, int kR, int kC>
__device__ __forceinline__ void probs_and_grads(const float (&s)[kR][kC], const float (&dp)[kR][kC],
                                                int64_t row0, int64_t col0, int64_t T, float scale,
                                                const float* lse, const float* di, float* Ps,
                                                float* dSs, int tx, int ty) {
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int64_t t_row = row0 + ty * kR + r;
#pragma unroll
    for (int c = 0; c < kC; ++c) {
      const int64_t t_col = col0 + tx + 16 * c;
      const int64_t tq = kKeyRows ? t_col : t_row, tk = kKeyRows ? t_row : t_col;
      const int col = tx + 16 * c, stat = kKeyRows ? col : r;
      float p = 0.0f, ds = 0.0f;
      if (tk <= tq && tq < T) {
        p = expf(s[r][c] * scale - lse[stat]);
        ds = p * (dp[r][c] - di[stat]);
      }
      if constexpr (kKeyRows) Ps[(ty * kR + r) * kSp + col] = p;
      dSs[(ty * kR + r) * kSp + col] = ds;
    }
  }
}

// The query tile of a forward or dq CTA, grid (query tiles, Hq, B): block x = 0 takes the last
// tile (the most key tiles), so the longest CTAs start first. Queries t0 .. t0 + valid − 1 of
// sequence b, query head h, which reads kv head hk.
struct QueryTile {
  int64_t t0, b;
  int h, hk, valid;
};
template <int kBr>
__device__ __forceinline__ QueryTile query_tile(int64_t T, int Hq, int Hkv) {
  const int64_t t0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kBr;
  const int h = blockIdx.y;
  return {t0, blockIdx.z, h, h / (Hq / Hkv),
          static_cast<int>(min(static_cast<int64_t>(kBr), T - t0))};
}

// What every CTA of a forward or dq kernel sets up first: the thread's place in the 16x16 grid,
// the shared tiles' pitch, its query tile, and where the tile's rows and head columns lie in
// q / o / dout / dq ([B·T, Hq·D]) and k / v ([B·T, Hkv·D]).
struct QueryCta {
  int tx, ty, pitch;
  QueryTile tile;
  int64_t q_ld, kv_ld;    // row strides
  int64_t seq0;           // the sequence's first row
  int64_t q_col, kv_col;  // the heads' first columns (h·D, hk·D)
};
template <int kBr>
__device__ __forceinline__ QueryCta query_cta(int64_t T, int Hq, int Hkv, int D) {
  const QueryTile tile = query_tile<kBr>(T, Hq, Hkv);
  return {static_cast<int>(threadIdx.x & 15),
          static_cast<int>(threadIdx.x >> 4),
          tile_pitch(D),
          tile,
          static_cast<int64_t>(Hq) * D,
          static_cast<int64_t>(Hkv) * D,
          tile.b * T,
          static_cast<int64_t>(tile.h) * D,
          static_cast<int64_t>(tile.hk) * D};
}

// Carves consecutive arrays out of a kernel's dynamic shared memory, in the order of the
// *_smem_floats sums above.
struct SmemCarver {
  float* at;
  __device__ float* take(int floats) {
    float* p = at;
    at += floats;
    return p;
  }
};

// Walks the key tiles of a query tile up to the one holding its last query t_last (forward, dq):
// once every thread is done with the previous tile, loads rows k0 .. k0 + kBc − 1 of k and v
// (head columns from col; rows past T zero) into Ks and Vs, then calls body(k0, k_valid).
template <int kBc, class Body>
__device__ __forceinline__ void for_each_key_tile(In k, In v, float* Ks, float* Vs, int pitch,
                                                  int64_t seq0, int64_t t_last, int64_t T,
                                                  int64_t ld, int64_t col, int D, Body body) {
  const int64_t n_kt = t_last / kBc + 1;
  for (int64_t kt = 0; kt < n_kt; ++kt) {
    const int64_t k0 = kt * kBc;
    const int k_valid = static_cast<int>(min(static_cast<int64_t>(kBc), T - k0));
    __syncthreads();  // the previous tile's K, V and scores are no longer read
    load_tile(Ks, pitch, k, seq0 + k0, k_valid, kBc, ld, col, D);
    load_tile(Vs, pitch, v, seq0 + k0, k_valid, kBc, ld, col, D);
    __syncthreads();
    body(k0, k_valid);
  }
}

// --- forward

// One CTA per query tile (query_tile).
template <int kMaxD>
__global__ void __launch_bounds__(kThreads)
    attention_forward_kernel(In q, In k, In v, Out o, float* __restrict__ lse, int64_t T, int Hq,
                             int Hkv, int D, float scale) {
  using Tl = Tiles<kMaxD>;
  constexpr int kBr = Tl::kRows, kBc = Tl::kCols, kR = Tl::kR, kC = Tl::kC, kDc = Tl::kDc;
  constexpr int kSp = Tl::kSp;
  extern __shared__ float smem[];
  const QueryCta cta = query_cta<kBr>(T, Hq, Hkv, D);
  const int tx = cta.tx, ty = cta.ty, pitch = cta.pitch;
  const auto [t0, b, h, hk, q_valid] = cta.tile;
  SmemCarver sm{smem};
  float* Qs = sm.take(kBr * pitch);  // [kBr][pitch]
  float* Ks = sm.take(kBc * pitch);  // [kBc][pitch]
  float* Vs = sm.take(kBc * pitch);  // [kBc][pitch]
  float* Ps = sm.take(kBr * kSp);    // [kBr][kSp]

  load_tile(Qs, pitch, q, cta.seq0 + t0, q_valid, kBr, cta.q_ld, cta.q_col, D);

  float m_run[kR], l_run[kR], acc[kR][kDc];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    m_run[r] = -INFINITY;
    l_run[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < kDc; ++c) acc[r][c] = 0.0f;
  }

  // Tile 0 holds key 0, which no query masks, so every row's running max is finite from the
  // first tile on.
  for_each_key_tile<kBc>(
      k, v, Ks, Vs, pitch, cta.seq0, t0 + q_valid - 1, T, cta.kv_ld, cta.kv_col, D,
      [&](int64_t k0, int k_valid) {
        float s[kR][kC];  // Q·Kᵀ
        tile_dots<kR, kC>({Qs}, {Ks}, pitch, D, tx, ty, s);

#pragma unroll
        for (int r = 0; r < kR; ++r) {
          const int64_t tq = t0 + ty * kR + r;
          float mx = -INFINITY;
#pragma unroll
          for (int c = 0; c < kC; ++c) {
            const int64_t tk = k0 + tx + 16 * c;
            s[r][c] = (tk <= tq && tk < T) ? s[r][c] * scale : -INFINITY;
            mx = fmaxf(mx, s[r][c]);
          }
          const float m_new = fmaxf(m_run[r], row_max(mx));
          const float alpha = expf(m_run[r] - m_new);  // 0 on the first tile (m_run = −inf)
          float sum = 0.0f;
#pragma unroll
          for (int c = 0; c < kC; ++c) {
            const float p = expf(s[r][c] - m_new);
            sum += p;
            Ps[(ty * kR + r) * kSp + tx + 16 * c] = p;
          }
          l_run[r] = l_run[r] * alpha + row_sum(sum);
          m_run[r] = m_new;
#pragma unroll
          for (int c = 0; c < kDc; ++c) acc[r][c] *= alpha;
        }
        __syncthreads();  // P complete

        // Keys past T have p = 0.
        accumulate_products<kSp, kR, kDc>({Ps}, {Vs}, k_valid, pitch, D, tx, ty, acc);
      });

  for_each_output<kR, kDc>(
      cta.seq0 + t0, q_valid, cta.q_ld, cta.q_col, D, tx, ty,
      [&](int r, int c, int64_t i) { o.store(i, acc[r][c] / l_run[r]); },
      [&](int r, int row) {
        if (tx == 0) lse[(b * Hq + h) * T + t0 + row] = m_run[r] + logf(l_run[r]);
      });
}

// --- backward

// di[(b·Hq + h)·T + t] = Σ_d dout·o over head h of row b·T + t: one warp per (row, head).
__global__ void __launch_bounds__(kThreads)
    attention_di_kernel(In dout, In o, float* __restrict__ di, int64_t rows, int64_t T, int Hq,
                        int D) {
  const int lane = threadIdx.x & 31;
  const int64_t items = rows * Hq;
  const int64_t step = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  for (int64_t item = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5;
       item < items; item += step) {  // warp-uniform
    const int64_t row = item / Hq;
    const int h = static_cast<int>(item - row * Hq);
    const int64_t base = (row * Hq + h) * D;
    float acc = 0.0f;
    for (int d = lane; d < D; d += 32) acc += dout[base + d] * o[base + d];
    acc = cuda::warp_sum(acc);
    if (lane == 0) {
      const int64_t b = row / T, t = row - b * T;
      di[(b * Hq + h) * T + t] = acc;
    }
  }
}

// dq: one CTA per query tile (query_tile), as in the forward.
template <int kMaxD>
__global__ void __launch_bounds__(kThreads)
    attention_dq_kernel(In dout, In q, In k, In v, const float* __restrict__ lse,
                        const float* __restrict__ di, Out dq, int64_t T, int Hq, int Hkv, int D,
                        float scale) {
  using Tl = Tiles<kMaxD>;
  constexpr int kBr = Tl::kRows, kBc = Tl::kCols, kR = Tl::kR, kC = Tl::kC, kDc = Tl::kDc;
  constexpr int kSp = Tl::kSp;
  extern __shared__ float smem[];
  const QueryCta cta = query_cta<kBr>(T, Hq, Hkv, D);
  const int tx = cta.tx, ty = cta.ty, pitch = cta.pitch;
  const auto [t0, b, h, hk, q_valid] = cta.tile;
  SmemCarver sm{smem};
  float* Qs = sm.take(kBr * pitch);         // [kBr][pitch]
  float* dOs = sm.take(kBr * pitch);        // [kBr][pitch]
  float* Ks = sm.take(kBc * pitch);         // [kBc][pitch]
  float* Vs = sm.take(kBc * pitch);         // [kBc][pitch]
  float* dSs = sm.take(kBr * kSp);          // [kBr][kSp]
  const int64_t stats0 = (b * Hq + h) * T;  // lse / di of query t at stats0 + t

  load_tile(Qs, pitch, q, cta.seq0 + t0, q_valid, kBr, cta.q_ld, cta.q_col, D);
  load_tile(dOs, pitch, dout, cta.seq0 + t0, q_valid, kBr, cta.q_ld, cta.q_col, D);

  float lse_r[kR], di_r[kR], acc[kR][kDc];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int row = ty * kR + r;
    lse_r[r] = row < q_valid ? lse[stats0 + t0 + row] : 0.0f;
    di_r[r] = row < q_valid ? di[stats0 + t0 + row] : 0.0f;
#pragma unroll
    for (int c = 0; c < kDc; ++c) acc[r][c] = 0.0f;
  }

  for_each_key_tile<kBc>(
      k, v, Ks, Vs, pitch, cta.seq0, t0 + q_valid - 1, T, cta.kv_ld, cta.kv_col, D,
      [&](int64_t k0, int k_valid) {
        float s[kR][kC], dp[kR][kC];  // Q·Kᵀ, dO·Vᵀ
        tile_dots<kR, kC>({Qs, dOs}, {Ks, Vs}, pitch, D, tx, ty, s, dp);

        probs_and_grads<false, kSp>(s, dp, t0, k0, T, scale, lse_r, di_r, nullptr, dSs, tx, ty);
        __syncthreads();  // dS complete

        accumulate_products<kSp, kR, kDc>({dSs}, {Ks}, k_valid, pitch, D, tx, ty, acc);
      });

  for_each_output<kR, kDc>(cta.seq0 + t0, q_valid, cta.q_ld, cta.q_col, D, tx, ty,
                           [&](int r, int c, int64_t i) { dq.store(i, scale * acc[r][c]); });
}

// dk, dv for one key tile of one kv head: grid (key tiles, Hkv, B). Key tile 0 sees every query
// tile, so block x = 0 (started first) is the longest.
template <int kMaxD>
__global__ void __launch_bounds__(kThreads)
    attention_dkv_kernel(In dout, In q, In k, In v, const float* __restrict__ lse,
                         const float* __restrict__ di, Out dk, Out dv, int64_t T, int Hq, int Hkv,
                         int D, float scale) {
  using Tl = Tiles<kMaxD>;
  constexpr int kBk = Tl::kRows, kBq = Tl::kCols, kR = Tl::kR, kC = Tl::kC, kDc = Tl::kDc;
  constexpr int kSp = Tl::kSp;
  extern __shared__ float smem[];
  const int pitch = tile_pitch(D);
  SmemCarver sm{smem};
  float* Ks = sm.take(kBk * pitch);   // [kBk][pitch]
  float* Vs = sm.take(kBk * pitch);   // [kBk][pitch]
  float* Qs = sm.take(kBq * pitch);   // [kBq][pitch]
  float* dOs = sm.take(kBq * pitch);  // [kBq][pitch]
  float* Ps = sm.take(kBk * kSp);     // [kBk][kSp]
  float* dSs = sm.take(kBk * kSp);    // [kBk][kSp]
  float* Ls = sm.take(kBq);           // [kBq] lse of the query tile
  float* Ds = sm.take(kBq);           // [kBq] di of the query tile

  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kBk;
  const int hk = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int group = Hq / Hkv;
  const int k_valid = static_cast<int>(min(static_cast<int64_t>(kBk), T - k0));
  const int64_t q_ld = static_cast<int64_t>(Hq) * D, kv_ld = static_cast<int64_t>(Hkv) * D;
  const int64_t seq0 = b * T;

  load_tile(Ks, pitch, k, seq0 + k0, k_valid, kBk, kv_ld, static_cast<int64_t>(hk) * D, D);
  load_tile(Vs, pitch, v, seq0 + k0, k_valid, kBk, kv_ld, static_cast<int64_t>(hk) * D, D);

  float dK[kR][kDc], dV[kR][kDc];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int c = 0; c < kDc; ++c) dK[r][c] = dV[r][c] = 0.0f;

  // Queries before k0 see none of this tile's keys: start at the query tile holding k0.
  const int64_t qt_first = k0 / kBq, n_qt = (T + kBq - 1) / kBq;
  for (int hi = 0; hi < group; ++hi) {
    const int h = hk * group + hi;
    const int64_t stats0 = (b * Hq + h) * T;
    for (int64_t qt = qt_first; qt < n_qt; ++qt) {
      const int64_t t0 = qt * kBq;
      const int q_valid = static_cast<int>(min(static_cast<int64_t>(kBq), T - t0));
      __syncthreads();  // the previous tile's Q, dO, P, dS, lse, di are no longer read
      load_tile(Qs, pitch, q, seq0 + t0, q_valid, kBq, q_ld, static_cast<int64_t>(h) * D, D);
      load_tile(dOs, pitch, dout, seq0 + t0, q_valid, kBq, q_ld, static_cast<int64_t>(h) * D, D);
      if (threadIdx.x < kBq) {
        const int i = threadIdx.x;
        Ls[i] = i < q_valid ? lse[stats0 + t0 + i] : 0.0f;
        Ds[i] = i < q_valid ? di[stats0 + t0 + i] : 0.0f;
      }
      __syncthreads();

      float s[kR][kC], dp[kR][kC];  // K·Qᵀ, V·dOᵀ (transposed scores)
      tile_dots<kR, kC>({Ks, Vs}, {Qs, dOs}, pitch, D, tx, ty, s, dp);

      probs_and_grads<true, kSp>(s, dp, k0, t0, T, scale, Ls, Ds, Ps, dSs, tx, ty);
      __syncthreads();  // P and dS complete

      accumulate_products<kSp, kR, kDc>({Ps, dSs}, {dOs, Qs}, q_valid, pitch, D, tx, ty, dV, dK);
    }
  }

  for_each_output<kR, kDc>(seq0 + k0, k_valid, kv_ld, static_cast<int64_t>(hk) * D, D, tx, ty,
                           [&](int r, int c, int64_t i) {
                             dk.store(i, scale * dK[r][c]);
                             dv.store(i, dV[r][c]);
                           });
}

// --- launch

struct AttentionDims {
  int64_t B = 0, T = 0;
  int Hq = 0, Hkv = 0, D = 0;
};

// Checks the shared operands of forward and backward; returns the sizes.
AttentionDims check_dims(const char* op, const Matrix& q, const Matrix& k, const Matrix& v,
                         int64_t B, int64_t T, int64_t Hq, int64_t Hkv) {
  const std::string p = std::string(op) + ": ";
  check(B >= 0 && T >= 0,
        p + "negative sequence count " + std::to_string(B) + " or length " + std::to_string(T));
  check(Hq > 0 && Hkv > 0 && Hq % Hkv == 0, p + "query heads " + std::to_string(Hq) +
                                                " must be a positive multiple of kv heads " +
                                                std::to_string(Hkv));
  check(Hq <= 65535, p + std::to_string(Hq) + " query heads: at most 65535 supported");
  check(B <= 65535, p + std::to_string(B) + " sequences: at most 65535 per call supported");
  cuda::check_activation(op, "q", q);
  check(q.cols % Hq == 0, p + "width of " + cuda::shape_of("q", q) + " is not a multiple of " +
                              std::to_string(Hq) + " query heads");
  const int64_t D = q.cols / Hq;
  check(D >= 1 && D <= kMaxHeadDim, p + "head dim " + std::to_string(D) + " (" +
                                        cuda::shape_of("q", q) + ", " + std::to_string(Hq) +
                                        " heads) is outside 1.." + std::to_string(kMaxHeadDim));
  cuda::check_activation(op, "q", q, B * T, Hq * D);
  cuda::check_activation(op, "k", k, B * T, Hkv * D);
  cuda::check_activation(op, "v", v, B * T, Hkv * D);
  check((T + Tiles<256>::kCols - 1) / Tiles<256>::kCols <= INT_MAX, p + "sequence too long");
  AttentionDims d;
  d.B = B;
  d.T = T;
  d.Hq = static_cast<int>(Hq);
  d.Hkv = static_cast<int>(Hkv);
  d.D = static_cast<int>(D);
  return d;
}

// Allows `kernel` its dynamic shared memory (above the default 48 KiB) or says why it cannot.
template <class Kernel>
void allow_smem(Kernel kernel, size_t bytes, const char* name, int D) {
  int device = 0, optin = 0;
  FP8RL_CUDA_CHECK(cudaGetDevice(&device));
  FP8RL_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  check(bytes <= static_cast<size_t>(optin),
        std::string(name) + ": head dim " + std::to_string(D) + " needs " + std::to_string(bytes) +
            " bytes of shared memory per block, the device allows " + std::to_string(optin));
  FP8RL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
}

// Launches a tile kernel on grid (row tiles of T, heads, B) with `floats` floats of dynamic shared
// memory, once allowed (`what` names the call in errors, `name` the kernel).
template <int kMaxD, class Kernel, class... Args>
void launch_tiles(Kernel kernel, int floats, const char* what, const char* name,
                  const AttentionDims& d, int heads, cudaStream_t stream, Args... args) {
  const size_t smem = sizeof(float) * static_cast<size_t>(floats);
  allow_smem(kernel, smem, what, d.D);
  const int64_t tiles = (d.T + Tiles<kMaxD>::kRows - 1) / Tiles<kMaxD>::kRows;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(heads),
                  static_cast<unsigned>(d.B));
  kernel<<<grid, kThreads, smem, stream>>>(args...);
  cuda::check_launch(name);
}

// Calls f(std::integral_constant<int, kMaxD>()) with the tile configuration for head dim D.
template <class F>
void with_tiles_for(int D, F f) {
  if (D <= 64) {
    f(std::integral_constant<int, 64>());
  } else if (D <= 128) {
    f(std::integral_constant<int, 128>());
  } else {
    f(std::integral_constant<int, 256>());
  }
}

float attention_scale(int D) {
  return 1.0f / std::sqrt(static_cast<float>(D));
}

// Whether the tensor-core kernels (attention_mma.cu) run: the option asks for them (1) and they
// take the operands (all BF16, head dim 64 or 128, 16-byte aligned).
bool mma_takes(int64_t option, int D, std::initializer_list<const Matrix*> operands) {
  if (option != 1) return false;
  for (const Matrix* m : operands)
    if (m->dtype != DType::bf16 || !cuda::attention_mma_takes(D, {m->data})) return false;
  return true;
}

}  // namespace

void CudaBackend::attention_forward(const Matrix& q, const Matrix& k, const Matrix& v, int64_t B,
                                    int64_t T, int64_t Hq, int64_t Hkv, const Matrix& o,
                                    float* lse) {
  const OpScope scope(*this, "attention_forward");
  const char* op = "attention_forward";
  const AttentionDims d = check_dims(op, q, k, v, B, T, Hq, Hkv);
  cuda::check_activation(op, "o", o, q.rows, q.cols);
  if (d.B == 0 || d.T == 0) return;
  cuda::check_data(op, {{"q", q.data}, {"k", k.data}, {"v", v.data}, {"o", o.data}, {"lse", lse}});
  check(o.data != q.data && o.data != k.data && o.data != v.data,
        std::string(op) + ": o must not alias q, k or v");
  make_current();
  const float scale = attention_scale(d.D);
  if (mma_takes(options_.attention_mma, d.D, {&q, &k, &v, &o})) {
    cuda::attention_forward_mma(
        {q.data, k.data, v.data, o.data, lse, d.B, d.T, d.Hq, d.Hkv, d.D, scale}, stream_);
    return;
  }
  with_tiles_for(d.D, [&](auto max_d) {
    constexpr int kMaxD = decltype(max_d)::value;
    launch_tiles<kMaxD>(attention_forward_kernel<kMaxD>, forward_smem_floats<kMaxD>(d.D),
                        "attention_forward", "attention_forward_kernel", d, d.Hq, stream_,
                        cuda::in_of(q), cuda::in_of(k), cuda::in_of(v), cuda::out_of(o), lse, d.T,
                        d.Hq, d.Hkv, d.D, scale);
  });
}

void CudaBackend::attention_backward(const Matrix& dout, const Matrix& q, const Matrix& k,
                                     const Matrix& v, const Matrix& o, const float* lse, int64_t B,
                                     int64_t T, int64_t Hq, int64_t Hkv, const Matrix& dq,
                                     const Matrix& dk, const Matrix& dv) {
  const OpScope scope(*this, "attention_backward");
  const char* op = "attention_backward";
  const AttentionDims d = check_dims(op, q, k, v, B, T, Hq, Hkv);
  cuda::check_activation(op, "dout", dout, q.rows, q.cols);
  cuda::check_activation(op, "o", o, q.rows, q.cols);
  cuda::check_activation(op, "dq", dq, q.rows, q.cols);
  cuda::check_activation(op, "dk", dk, k.rows, k.cols);
  cuda::check_activation(op, "dv", dv, v.rows, v.cols);
  if (d.B == 0 || d.T == 0) return;
  cuda::check_data(op, {{"dout", dout.data},
                        {"q", q.data},
                        {"k", k.data},
                        {"v", v.data},
                        {"o", o.data},
                        {"lse", lse},
                        {"dq", dq.data},
                        {"dk", dk.data},
                        {"dv", dv.data}});
  // The two kernels read all inputs while writing their outputs.
  for (const void* out : {dq.data, dk.data, dv.data})
    check(out != dout.data && out != q.data && out != k.data && out != v.data,
          std::string(op) + ": dq, dk and dv must not alias the inputs");
  check(dq.data != dk.data && dq.data != dv.data && dk.data != dv.data,
        std::string(op) + ": dq, dk and dv must be distinct");
  make_current();

  const int64_t rows = d.B * d.T;
  auto* di = static_cast<float*>(scratch(sizeof(float) * static_cast<size_t>(rows * d.Hq)));
  attention_di_kernel<<<cuda::grid_for(rows * d.Hq, kThreads / 32, int64_t{32} * sm_count_),
                        kThreads, 0, stream_>>>(cuda::in_of(dout), cuda::in_of(o), di, rows, d.T,
                                                d.Hq, d.D);
  cuda::check_launch("attention_di_kernel");

  const float scale = attention_scale(d.D);
  if (mma_takes(options_.attention_mma, d.D, {&dout, &q, &k, &v, &o, &dq, &dk, &dv})) {
    cuda::attention_backward_mma({dout.data, q.data, k.data, v.data, lse, di, dq.data, dk.data,
                                  dv.data, d.B, d.T, d.Hq, d.Hkv, d.D, scale},
                                 stream_);
    return;
  }
  const In in_dout = cuda::in_of(dout), in_q = cuda::in_of(q), in_k = cuda::in_of(k),
           in_v = cuda::in_of(v);
  with_tiles_for(d.D, [&](auto max_d) {
    constexpr int kMaxD = decltype(max_d)::value;
    launch_tiles<kMaxD>(attention_dq_kernel<kMaxD>, dq_smem_floats<kMaxD>(d.D),
                        "attention_backward (dq)", "attention_dq_kernel", d, d.Hq, stream_, in_dout,
                        in_q, in_k, in_v, lse, di, cuda::out_of(dq), d.T, d.Hq, d.Hkv, d.D, scale);
    launch_tiles<kMaxD>(attention_dkv_kernel<kMaxD>, dkv_smem_floats<kMaxD>(d.D),
                        "attention_backward (dk, dv)", "attention_dkv_kernel", d, d.Hkv, stream_,
                        in_dout, in_q, in_k, in_v, lse, di, cuda::out_of(dk), cuda::out_of(dv), d.T,
                        d.Hq, d.Hkv, d.D, scale);
  });
}

}  // namespace fp8rl
