// A host emulation of the CUDA features kernels/attention_mma.cu, gemm_grouped_mma.cu,
// attention_decode_mma.cu and the quantize, RMSNorm and SwiGLU producers use, so
// that their kernels run on the CPU (tests/emulation/test_*_emulated.cpp):
//  - a CTA's threads (a multiple of 32, up to 1024) are fibers (ucontext) run one at a time; one
//    warp leads and the others run in a random quarter of the scheduler's passes, so warps drift
//    apart between barriers; a CTA whose fibers all wait (a barrier some thread never reaches,
//    a collective in divergent code) aborts as a deadlock;
//  - __syncthreads and the warp collectives (shfl.xor, shfl.down of 4- and 8-byte values) are
//    barriers that yield; atomics are plain read-modify-writes (one fiber runs at a time);
//  - ldmatrix .x4 (.trans) and mma.sync m16n8k16 BF16 / f16 and m16n8k32 FP8 → FP32 follow the
//    PTX ISA's fragment tables (written here independently of the kernel), shfl.xor reads
//    another lane's slot;
//  - cp.async is a copy deferred to the thread's cp.async.wait_group (a tile read before its wait
//    holds stale bytes) or made at once (a buffer refilled while a lagging warp still reads it
//    shows); a test runs both;
//  - shared memory starts as 0xFF bytes (FP32 and BF16 NaN): a read of a byte never written
//    shows; guard bytes after it catch a write past its end;
//  - FP8 conversions (cvt.rn.satfinite E4M3 / E5M2 and back to half) from the formats'
//    definitions: each code's value, nearest with ties to the even code, |x| at or above the
//    largest finite value gives it, NaN 0x7f (written here independently of engine/fp8/codec).
//  - float → binary16 (cvt.rn.f16.f32, subnormals and overflow to inf included) and PRMT
//    (__byte_perm) by their definitions.
// The kernel file is compiled as host C++ after its PTX wrappers are replaced
// (emulate_kernel.py); this header stands in for cuda_runtime.h, cuda_bf16.h, cuda_fp16.h and
// cuda_fp8.h (tests/emulation/include). CUDA's own names
// (dim3, threadIdx, __syncthreads, ...) are kept on purpose. Kernel launches (kernel<<<...>>>)
// become emu::launch_kernel (emulate_kernel.py).
#pragma once
#include <math.h>

#include <cmath>

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <setjmp.h>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return {a, b, c, d};
}
struct alignas(8) uint2 {
  unsigned x, y;
};
inline uint2 make_uint2(unsigned a, unsigned b) {
  return {a, b};
}
struct alignas(8) float2 {
  float x, y;
};
inline float2 make_float2(float a, float b) {
  return {a, b};
}
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float a, float b, float c, float d) {
  return {a, b, c, d};
}
using cudaStream_t = void*;
inline int64_t min(int64_t a, int64_t b) {
  return a < b ? a : b;
}
inline int64_t max(int64_t a, int64_t b) {
  return a > b ? a : b;
}

struct __nv_bfloat162 {
  uint16_t x, y;
};
inline uint16_t emu_f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float emu_bf2f(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) {
  return {emu_f2bf(lo), emu_f2bf(hi)};
}

namespace emu {
// The CTA's threads are fibers run one at a time by a round-robin scheduler; a barrier yields
// until its generation changes.
struct Barrier {
  int count, arrived = 0;
  unsigned gen = 0;
  explicit Barrier(int n) : count(n) {}
  void wait();
};
struct Warp {
  Barrier bar{32};
  uint64_t slot[32];  // the shuffles' values
  uint32_t addr[32];
  uint32_t a[32][4], b[32][2];
  float c[32][4];
  float d[16][8];        // an mma's result, computed once by the first lane past the barrier
  unsigned d_gen = ~0u;  // the barrier generation d belongs to
};
struct Cta {
  std::vector<uint8_t> smem;  // the dynamic shared memory (smem_bytes), then kGuard guard bytes
  size_t smem_bytes = 0;
  Barrier bar;
  std::vector<Warp> warps;
  std::map<std::string, std::vector<uint8_t>> statics;  // the kernel's __shared__ arrays by name
  explicit Cta(int threads) : bar(threads), warps(static_cast<size_t>(threads / 32)) {}
};
inline constexpr size_t kGuard = 256;
struct Copy {
  void* dst;
  const void* src;
};
struct Fiber {
  ucontext_t ctx;  // its start (makecontext)
  jmp_buf jmp;     // where it yielded
  bool started = false;
  std::vector<char> stack;
  bool done = false;
  uint3 idx;
  unsigned linear = 0;  // x + y·blockDim.x + z·blockDim.x·blockDim.y
  std::deque<std::vector<Copy>> committed;
  std::vector<Copy> pending;
  const Barrier* waiting_on = nullptr;  // the barrier it waits at (skipped until it opens)
  unsigned waiting_gen = 0;
};
inline Cta* cta = nullptr;
// cp.async's copies land at wait_group (deferred: a read before the wait sees stale bytes) or
// at once (eager: a refill of a buffer that another warp still reads shows, since a fiber runs
// ahead until it blocks). A test runs both.
inline bool eager_copies = false;
inline Fiber* current = nullptr;
// Switches: a fiber starts through swapcontext and then moves by _setjmp/_longjmp (no signal-mask
// system call per switch, which made swapcontext the emulation's main cost).
inline jmp_buf scheduler;
inline uint3 block_idx, grid_dim, block_dim;
inline std::function<void()> body;
inline void yield() {
  if (!_setjmp(current->jmp)) _longjmp(scheduler, 1);
}
inline void Barrier::wait() {
  const unsigned g = gen;
  if (++arrived == count) {
    arrived = 0;
    ++gen;
    return;
  }
  current->waiting_on = this;
  current->waiting_gen = g;
  while (gen == g) yield();
  current->waiting_on = nullptr;
}
inline int lane() {
  return static_cast<int>(current->linear & 31);
}
template <class T>
T* shared_memory() {
  return reinterpret_cast<T*>(cta->smem.data());
}
// The CTA's __shared__ array `name` of count T (0xFF bytes at first): the same for every thread.
template <class T>
T* static_shared(size_t count, const char* name) {
  auto& a = cta->statics[name];
  if (a.empty()) a.assign(count * sizeof(T), 0xff);
  return reinterpret_cast<T*>(a.data());
}
inline Warp& warp() {
  return cta->warps[current->linear >> 5];
}
// Lane src's value of v (every lane of the warp calls it: a warp-wide barrier).
template <class T>
T exchange(T v, int src) {
  static_assert(sizeof(T) <= sizeof(uint64_t));
  auto& w = warp();
  const int l = lane();
  std::memcpy(&w.slot[l], &v, sizeof(T));
  w.bar.wait();
  T r;
  std::memcpy(&r, &w.slot[src], sizeof(T));
  w.bar.wait();
  return r;
}
inline void full_mask(unsigned mask) {
  if (mask != 0xffffffffu) {
    std::fprintf(stderr, "emu: only full-warp shuffles are emulated\n");
    std::abort();
  }
}
inline void complete(std::vector<Copy>& g) {
  for (const Copy& c : g) std::memcpy(c.dst, c.src, 16);
}
}  // namespace emu

#define threadIdx (::emu::current->idx)
#define blockIdx (::emu::block_idx)
#define blockDim (::emu::block_dim)
#define gridDim (::emu::grid_dim)

inline void __syncthreads() {
  emu::cta->bar.wait();
}

// The runtime calls of a launch: the emulated device allows 227 KiB of shared memory per block
// (an H100's opt-in limit).
enum cudaError_t { cudaSuccess = 0 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int) {
  *value = 227 * 1024;
  return cudaSuccess;
}
template <class Kernel>
cudaError_t cudaFuncSetAttribute(Kernel, cudaFuncAttribute, int) {
  return cudaSuccess;
}
inline uint64_t __cvta_generic_to_shared(const void* p) {
  const auto* b = static_cast<const uint8_t*>(p);
  if (b < emu::cta->smem.data() || b >= emu::cta->smem.data() + emu::cta->smem_bytes) {
    std::fprintf(stderr, "emu: shared address outside the CTA's shared memory\n");
    std::abort();
  }
  return static_cast<uint64_t>(b - emu::cta->smem.data());
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  emu::full_mask(mask);
  return emu::exchange(v, emu::lane() ^ lane_mask);
}
template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane) {
  emu::full_mask(mask);
  return emu::exchange(v, src_lane & 31);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
  emu::full_mask(mask);
  const int src = emu::lane() + static_cast<int>(delta);
  return emu::exchange(v, src < 32 ? src : emu::lane());  // past the warp: the lane's own value
}

namespace emu {
inline uint16_t smem16(uint32_t byte) {
  if (byte + 2 > cta->smem_bytes || byte % 2) {
    std::fprintf(stderr, "emu: ldmatrix reads outside shared memory (%u)\n", byte);
    std::abort();
  }
  uint16_t v;
  std::memcpy(&v, cta->smem.data() + byte, 2);
  return v;
}
inline void cp_async16(void* smem, const void* gmem) {
  if (reinterpret_cast<uintptr_t>(smem) % 16 || reinterpret_cast<uintptr_t>(gmem) % 16) {
    std::fprintf(stderr, "emu: cp.async with an unaligned address\n");
    std::abort();
  }
  __cvta_generic_to_shared(smem);
  if (eager_copies)
    std::memcpy(smem, gmem, 16);
  else
    current->pending.push_back({smem, gmem});
}
inline void commit() {
  current->committed.push_back(std::move(current->pending));
  current->pending.clear();
}
inline void wait(int n) {
  while (static_cast<int>(current->committed.size()) > n) {
    complete(current->committed.front());
    current->committed.pop_front();
  }
}
inline void ldsm(uint32_t (&r)[4], uint32_t addr, bool trans) {
  auto& w = warp();
  const int l = lane(), g = l >> 2, c = l & 3;
  if (addr % 16) {
    std::fprintf(stderr, "emu: ldmatrix row address not 16-byte aligned\n");
    std::abort();
  }
  w.addr[l] = addr;
  w.bar.wait();
  for (int j = 0; j < 4; ++j) {
    uint16_t lo, hi;
    if (!trans) {
      lo = smem16(w.addr[8 * j + g] + 2 * (2 * c));
      hi = smem16(w.addr[8 * j + g] + 2 * (2 * c + 1));
    } else {
      lo = smem16(w.addr[8 * j + 2 * c] + 2 * g);
      hi = smem16(w.addr[8 * j + 2 * c + 1] + 2 * g);
    }
    r[j] = lo | static_cast<uint32_t>(hi) << 16;
  }
  w.bar.wait();
}
// One warp-wide mma.sync m16n8kK: every lane deposits its fragments; the first lane past the
// barrier fills A [16][K] and B [K][8] from them (unpack(lane, A, B) for each lane's A and B
// fragments) and computes D = A·B + C, each row·column sum in FP32 in k order; every lane takes
// its D fragment (C and D as m16n8k16's: c0, c1 = row g, cols 2c, 2c+1; c2, c3 = row g+8).
template <int K, class Unpack>
inline void warp_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                     Unpack unpack) {
  auto& w = warp();
  const int l = lane();
  for (int i = 0; i < 4; ++i) w.a[l][i] = a[i], w.c[l][i] = d[i];
  w.b[l][0] = b0;
  w.b[l][1] = b1;
  w.bar.wait();
  if (w.d_gen != w.bar.gen) {  // the first lane after the barrier computes D = A·B + C
    float A[16][K], B[K][8];
    for (int L = 0; L < 32; ++L) {
      const int g = L >> 2, c = L & 3;
      unpack(L, A, B);
      w.d[g][2 * c] = w.c[L][0], w.d[g][2 * c + 1] = w.c[L][1];
      w.d[g + 8][2 * c] = w.c[L][2], w.d[g + 8][2 * c + 1] = w.c[L][3];
    }
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        float sum = 0;
        for (int k = 0; k < K; ++k) sum += A[m][k] * B[k][n];
        w.d[m][n] += sum;
      }
    w.d_gen = w.bar.gen;
  }
  const int g = l >> 2, c = l & 3;
  d[0] = w.d[g][2 * c], d[1] = w.d[g][2 * c + 1];
  d[2] = w.d[g + 8][2 * c], d[3] = w.d[g + 8][2 * c + 1];
  w.bar.wait();
}
// mma.sync m16n8k16 with 16-bit operands (two a register, the lower k low), each half read by
// value(bits): A rows g and g+8, k 2c, 2c+1 and 2c+8, 2c+9; B k 2c, 2c+1 and 2c+8, 2c+9, col g.
template <class Value>
inline void mma16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, Value value) {
  auto& w = warp();
  auto lo = [&](uint32_t v) { return value(static_cast<uint16_t>(v & 0xffff)); };
  auto hi = [&](uint32_t v) { return value(static_cast<uint16_t>(v >> 16)); };
  warp_mma<16>(d, a, b0, b1, [&](int L, float(&A)[16][16], float(&B)[16][8]) {
    const int g = L >> 2, c = L & 3;
    A[g][2 * c] = lo(w.a[L][0]), A[g][2 * c + 1] = hi(w.a[L][0]);
    A[g + 8][2 * c] = lo(w.a[L][1]), A[g + 8][2 * c + 1] = hi(w.a[L][1]);
    A[g][2 * c + 8] = lo(w.a[L][2]), A[g][2 * c + 9] = hi(w.a[L][2]);
    A[g + 8][2 * c + 8] = lo(w.a[L][3]), A[g + 8][2 * c + 9] = hi(w.a[L][3]);
    B[2 * c][g] = lo(w.b[L][0]), B[2 * c + 1][g] = hi(w.b[L][0]);
    B[2 * c + 8][g] = lo(w.b[L][1]), B[2 * c + 9][g] = hi(w.b[L][1]);
  });
}
// mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32.
inline void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma16(d, a, b0, b1, emu_bf2f);
}

inline void fiber_entry() {
  body();
  current->done = true;
  _longjmp(scheduler, 1);
}
// Runs fiber f until it yields or ends. Its own frame holds the _setjmp (noinline), so the
// scheduler's locals never live across the jump back.
[[gnu::noinline]] inline void resume(Fiber& f) {
  current = &f;
  if (!_setjmp(scheduler)) {
    if (f.started) _longjmp(f.jmp, 1);
    f.started = true;
    ucontext_t from;
    swapcontext(&from, &f.ctx);  // does not return: the fiber jumps back
  }
}
// Runs kernel_body on grid x block threads (fibers), CTA after CTA, with smem_bytes of dynamic
// shared memory (0xFF bytes, then guard bytes checked at the CTA's end).
inline void run_grid(dim3 grid, dim3 block, size_t smem_bytes, std::function<void()> kernel_body) {
  const unsigned threads = block.x * block.y * block.z;
  if (threads == 0 || threads % 32 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
    std::fprintf(stderr, "emu: bad launch (%u threads, grid %u x %u x %u)\n", threads, grid.x,
                 grid.y, grid.z);
    std::abort();
  }
  grid_dim = {grid.x, grid.y, grid.z};
  block_dim = {block.x, block.y, block.z};
  body = std::move(kernel_body);
  static std::vector<Fiber> fibers(1024);
  for (unsigned t = 0; t < threads; ++t) fibers[t].stack.resize(1 << 18);
  const unsigned warps = threads / 32;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        auto c = std::make_unique<Cta>(static_cast<int>(threads));
        c->smem.assign(smem_bytes + kGuard, 0xff);
        std::fill(c->smem.begin() + static_cast<ptrdiff_t>(smem_bytes), c->smem.end(),
                  uint8_t{0xa5});
        c->smem_bytes = smem_bytes;
        cta = c.get();
        block_idx = {x, y, z};
        for (unsigned t = 0; t < threads; ++t) {
          Fiber& f = fibers[t];
          f.done = false;
          f.started = false;
          f.waiting_on = nullptr;
          f.linear = t;
          f.idx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
          f.committed.clear();
          f.pending.clear();
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, fiber_entry, 0);
        }
        // One warp leads (a different one per CTA); the others run in a quarter of the
        // scheduler's passes, at random, so warps drift apart between barriers as on a GPU.
        const unsigned lead = (x + y + z) % warps;
        unsigned state = 2654435761u * (x + 1) + 40503u * (y + 1) + 97u * (z + 1);
        for (bool left = true; left;) {
          left = false;
          bool runnable = false;
          for (unsigned w = 0; w < warps; ++w) {
            state = state * 1664525u + 1013904223u;
            const bool runs = w == lead || (state >> 30) == 0;
            for (unsigned t = 32 * w; t < 32 * w + 32; ++t) {
              Fiber& f = fibers[t];
              if (f.done) continue;
              const bool blocked = f.waiting_on && f.waiting_on->gen == f.waiting_gen;
              runnable = runnable || !blocked;
              if (runs && !blocked) {
                resume(f);
              }
              left = left || !f.done;
            }
          }
          if (left && !runnable) {
            std::fprintf(stderr, "emu: deadlock: every thread of CTA (%u, %u, %u) waits\n", x, y,
                         z);
            std::abort();
          }
        }
        for (unsigned t = 0; t < threads; ++t)
          if (!fibers[t].pending.empty() || !fibers[t].committed.empty()) {
            std::fprintf(stderr, "emu: cp.async left uncompleted at the kernel's end\n");
            std::abort();
          }
        const uint8_t* guard = c->smem.data() + smem_bytes;
        for (size_t i = 0; i < kGuard; ++i)
          if (guard[i] != 0xa5) {
            std::fprintf(stderr, "emu: shared memory written past its %zu bytes\n", smem_bytes);
            std::abort();
          }
      }
}
// Runs kernel(p) on grid x threads fibers.
template <class Kernel, class P>
void launch(Kernel kernel, dim3 grid, int threads, size_t smem_bytes, const P& p) {
  run_grid(grid, dim3(static_cast<unsigned>(threads)), smem_bytes, [&] { kernel(p); });
}
// kernel<<<grid, block, smem, stream>>>(args...) (emulate_kernel.py writes the launches so):
// every thread calls the kernel with its own copies of the arguments.
struct Config {
  dim3 grid, block;
  size_t smem = 0;
  cudaStream_t stream = nullptr;
};
template <class Kernel, class... Args>
void launch_kernel(Kernel kernel, const Config& c, const Args&... args) {
  const std::tuple<Args...> a(args...);
  run_grid(c.grid, c.block, c.smem, [&] { std::apply(kernel, a); });
}
}  // namespace emu

// --- the intrinsics, types and runtime calls of the quantize kernels (kernels/quantize.cuh)

// Plain IEEE operations: the build has no contraction (-ffp-contract=off) and no fast math.
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fsub_rn(float a, float b) {
  return a - b;
}
inline float __fdiv_rn(float a, float b) {
  return a / b;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
// A misaligned vector load faults on the device ("misaligned address"): here too.
template <class T>
T __ldg(const T* p) {
  if (reinterpret_cast<uintptr_t>(p) % alignof(T)) {
    std::fprintf(stderr, "emu: misaligned %zu-byte load\n", sizeof(T));
    std::abort();
  }
  return *p;
}
// ld.global.cg (L2 only): a plain load here, with __ldg's alignment check.
template <class T>
T __ldcg(const T* p) {
  return __ldg(p);
}
// One fiber runs at a time and memory is the host's: a fence has nothing to order.
inline void __threadfence() {}
// ld.global.cs (evict-first): a plain load here, with __ldg's alignment check.
template <class T>
T __ldcs(const T* p) {
  return __ldg(p);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = old + v;
  return old;
}
inline double atomicAdd(double* p, double v) {
  const double old = *p;
  *p = old + v;
  return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
inline float atomicAdd(float* p, float v) {
  const float old = *p;
  *p = old + v;
  return old;
}

// BF16: round to nearest even, NaN → 0x7fff (cvt.rn.bf16.f32's canonical NaN).
struct __nv_bfloat16 {
  uint16_t x;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {0x7fff};
  return {static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) {
  return b.x;
}
inline float __bfloat162float(__nv_bfloat16 b) {
  return __uint_as_float(static_cast<unsigned>(b.x) << 16);
}

// binary16 by its bits.
struct __half_raw {
  unsigned short x;
};
struct __half {
  unsigned short bits;
  __half(__half_raw r) : bits(r.x) {}  // NOLINT: cuda_fp16.h's conversion
};
inline float __half2float(__half h) {
  const unsigned sign = (h.bits >> 15) & 1u, e = (h.bits >> 10) & 31u, m = h.bits & 1023u;
  float v;
  if (e == 31)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = std::ldexp(static_cast<float>(m), -24);
  else
    v = std::ldexp(static_cast<float>(1024 + m), static_cast<int>(e) - 25);
  return sign ? -v : v;
}
// cvt.rn.f16.f32: nearest binary16, ties to even (subnormals below 2^-14, |x| ≥ 65520 → inf),
// NaN → 0x7fff.
inline __half __float2half_rn(float f) {
  const unsigned short sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return __half_raw{0x7fff};
  const double a = std::fabs(static_cast<double>(f));
  if (a >= 65520.0) return __half_raw{static_cast<unsigned short>(sign | 0x7c00)};
  int e;
  std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): the quantum is 2^(e - 11), 2^-24 at least
  const double quantum = std::ldexp(1.0, std::max(e - 11, -24));
  const double r = std::nearbyint(a / quantum) * quantum;  // ties to even (the default mode)
  if (r < std::ldexp(1.0, -14))                            // subnormal (or zero)
    return __half_raw{static_cast<unsigned short>(sign | static_cast<unsigned>(r * 16777216.0))};
  std::frexp(r, &e);
  const unsigned mant = static_cast<unsigned>(std::ldexp(r, 11 - e)) - 1024u;
  return __half_raw{static_cast<unsigned short>(sign | (e - 1 + 15) << 10 | mant)};
}
inline unsigned short __half_as_ushort(__half h) {
  return h.bits;
}
struct __half2_raw {
  unsigned short x, y;
};
// PRMT's default mode: byte i of the result is byte (s >> 4i) & 7 of {y:x} (x bytes 0-3).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t xy = static_cast<uint64_t>(y) << 32 | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<unsigned>((xy >> (8 * ((s >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return r;
}

// FP8 by the formats' definitions (OCP FP8): E4M3 bias 7, 3 mantissa bits, S.1111.111 NaN and no
// infinity (largest finite 0x7e = 448); E5M2 bias 15, 2 mantissa bits, exponent 31 inf / NaN
// (largest finite 0x7b = 57344).
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
using __nv_fp8_storage_t = unsigned char;
namespace emu {
inline double fp8_value(unsigned code, bool e4m3) {
  const int mant = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const unsigned mag = code & 0x7fu, e = mag >> mant, m = mag & ((1u << mant) - 1);
  double v;
  if (e4m3 && mag == 0x7f)
    v = NAN;
  else if (!e4m3 && e == 31)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), 1 - bias - mant);
  else
    v = std::ldexp(static_cast<double>((1u << mant) + m), static_cast<int>(e) - bias - mant);
  return (code & 0x80u) ? -v : v;
}
// Positive finite values by code (0 .. the largest finite code).
struct Fp8Values {
  double v[128];
  unsigned max_code;
  explicit Fp8Values(bool e4m3) : max_code(e4m3 ? 0x7eu : 0x7bu) {
    for (unsigned c = 0; c <= max_code; ++c) v[c] = fp8_value(c, e4m3);
  }
};
// cvt.rn.satfinite: the nearest finite code, ties to the even code (its mantissa's last bit is
// the code's), |x| at or beyond the largest finite value → it, NaN → 0x7f; the sign is kept
// (also for zero).
inline uint8_t fp8_encode(float x, bool e4m3) {
  static const Fp8Values e4(true), e5(false);
  const Fp8Values& t = e4m3 ? e4 : e5;
  if (std::isnan(x)) return 0x7f;
  const unsigned sign = std::signbit(x) ? 0x80u : 0u;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= t.v[t.max_code]) return static_cast<uint8_t>(sign | t.max_code);
  unsigned lo = 0, hi = t.max_code;  // t.v[lo] <= a < t.v[hi]
  while (hi - lo > 1) {
    const unsigned mid = (lo + hi) / 2;
    (t.v[mid] <= a ? lo : hi) = mid;
  }
  const double below = a - t.v[lo], above = t.v[hi] - a;  // exact in double
  const unsigned c = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint8_t>(sign | c);
}
// mma.sync.m16n8k16.row.col.f32.f16.f16.f32 (mma16 with binary16 halves).
inline void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma16(d, a, b0, b1, [](uint16_t h) { return __half2float(__half_raw{h}); });
}
}  // namespace emu
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t sat,
                                                __nv_fp8_interpretation_t f) {
  if (sat != __NV_SATFINITE) {
    std::fprintf(stderr, "emu: only the saturating FP8 conversion is emulated\n");
    std::abort();
  }
  return emu::fp8_encode(x, f == __NV_E4M3);
}
// Exact: every FP8 value is a binary16 value (E5M2 is binary16's top byte); NaN → 0x7fff.
inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t code, __nv_fp8_interpretation_t f) {
  if (f == __NV_E5M2) return {static_cast<unsigned short>(code << 8)};
  const double v = emu::fp8_value(code, true);
  if (std::isnan(v)) return {0x7fff};
  const unsigned short sign = (code & 0x80) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0) return {sign};
  int e;
  const double m = std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): E4M3's range is normal in half
  return {static_cast<unsigned short>(sign | (e - 1 + 15) << 10 |
                                      static_cast<unsigned>((2 * m - 1) * 1024))};
}

using __nv_fp8x2_storage_t = unsigned short;
// Two codes (the low byte first) to binary16, exactly.
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t codes,
                                              __nv_fp8_interpretation_t f) {
  return {__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(codes & 0xff), f).x,
          __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(codes >> 8), f).x};
}

// Occupancy: blocks per SM by threads (2048 a SM) and shared memory (228 KiB a SM, 1 KiB of it
// reserved per block), as on an H100.
template <class Kernel>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, Kernel, int threads,
                                                          size_t smem) {
  int n = 2048 / threads;
  if (smem) n = std::min(n, static_cast<int>(228 * 1024 / (smem + 1024)));
  *blocks = n;
  return cudaSuccess;
}

namespace emu {
// mma.sync.m16n8k32.row.col.f32.{e4m3|e5m2}.{e4m3|e5m2}.f32: D = A·B + C, A 16x32 and B 32x8 of
// FP8 codes, four a register with the lowest k in the lowest byte (PTX ISA, "Matrix fragments
// for mma.m16n8k32", 8-bit types): a0 = (row g, k 4c..4c+3), a1 = (row g+8, k 4c..), a2 =
// (row g, k 16+4c..), a3 = (row g+8, k 16+4c..); b0 = (k 4c..4c+3, col g), b1 = (k 16+4c..,
// col g); C and D as m16n8k16's (warp_mma). The products are exact in FP32 (the hardware's own
// order and internal precision are not emulated: the GPU round's op cases compare those).
inline void mma_fp8(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, bool a_e4m3,
                    bool b_e4m3) {
  auto& w = warp();
  auto byte = [](uint32_t v, int i) { return (v >> (8 * i)) & 0xffu; };
  warp_mma<32>(d, a, b0, b1, [&](int L, float(&A)[16][32], float(&B)[32][8]) {
    const int g = L >> 2, c = L & 3;
    for (int i = 0; i < 4; ++i) {
      A[g][4 * c + i] = static_cast<float>(fp8_value(byte(w.a[L][0], i), a_e4m3));
      A[g + 8][4 * c + i] = static_cast<float>(fp8_value(byte(w.a[L][1], i), a_e4m3));
      A[g][16 + 4 * c + i] = static_cast<float>(fp8_value(byte(w.a[L][2], i), a_e4m3));
      A[g + 8][16 + 4 * c + i] = static_cast<float>(fp8_value(byte(w.a[L][3], i), a_e4m3));
      B[4 * c + i][g] = static_cast<float>(fp8_value(byte(w.b[L][0], i), b_e4m3));
      B[16 + 4 * c + i][g] = static_cast<float>(fp8_value(byte(w.b[L][1], i), b_e4m3));
    }
  });
}
}  // namespace emu
