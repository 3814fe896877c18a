// A host emulation of the CUDA features kernels/attention_mma.cu uses, so that its kernels run on
// the CPU (tests/emulation/test_attention_mma_emulated.cpp):
//  - a CTA's 128 threads are fibers (ucontext) run one at a time; one warp leads and the others
//    run in a random quarter of the scheduler's passes, so warps drift apart between barriers;
//  - __syncthreads and the warp collectives are barriers that yield;
//  - ldmatrix .x4 (.trans) and mma.sync m16n8k16 BF16 → FP32 follow the PTX ISA's fragment
//    tables (written here independently of the kernel), shfl.xor reads another lane's slot;
//  - cp.async is a copy deferred to the thread's cp.async.wait_group (a tile read before its wait
//    holds stale bytes) or made at once (a buffer refilled while a lagging warp still reads it
//    shows); a test runs both;
//  - shared memory starts as 0xFF bytes (BF16 NaN): a read of a byte never written shows.
// The kernel file is compiled as host C++ after its PTX wrappers are replaced
// (emulate_kernel.py); this header stands in for cuda_runtime.h and cuda_bf16.h. CUDA's own names
// (dim3, threadIdx, __syncthreads, ...) are kept on purpose.
#pragma once
#include <math.h>

#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
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
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) {
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
  uint32_t addr[32];
  uint32_t a[32][4], b[32][2];
  float c[32][4], f[32];
  float d[16][8];        // an mma's result, computed once by the first lane past the barrier
  unsigned d_gen = ~0u;  // the barrier generation d belongs to
};
struct Cta {
  std::vector<uint8_t> smem;
  Barrier bar{128};
  Warp warps[4];
};
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
inline uint3 block_idx, grid_dim;
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
  return static_cast<int>(current->idx.x & 31);
}
template <class T>
T* shared_memory() {
  return reinterpret_cast<T*>(cta->smem.data());
}
inline Warp& warp() {
  return cta->warps[current->idx.x >> 5];
}
inline void complete(std::vector<Copy>& g) {
  for (const Copy& c : g) std::memcpy(c.dst, c.src, 16);
}
}  // namespace emu

#define threadIdx (::emu::current->idx)
#define blockIdx (::emu::block_idx)
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
  if (b < emu::cta->smem.data() || b >= emu::cta->smem.data() + emu::cta->smem.size()) {
    std::fprintf(stderr, "emu: shared address outside the CTA's shared memory\n");
    std::abort();
  }
  return static_cast<uint64_t>(b - emu::cta->smem.data());
}
inline float __shfl_xor_sync(unsigned, float v, int mask) {
  auto& w = emu::warp();
  const int l = emu::lane();
  w.f[l] = v;
  w.bar.wait();
  const float r = w.f[l ^ mask];
  w.bar.wait();
  return r;
}

namespace emu {
inline uint16_t smem16(uint32_t byte) {
  if (byte + 2 > cta->smem.size() || byte % 2) {
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
inline void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  auto& w = warp();
  const int l = lane();
  for (int i = 0; i < 4; ++i) w.a[l][i] = a[i], w.c[l][i] = d[i];
  w.b[l][0] = b0;
  w.b[l][1] = b1;
  w.bar.wait();
  if (w.d_gen != w.bar.gen) {  // the first lane after the barrier computes D = A·B + C
    float A[16][16], B[16][8];
    auto lo = [](uint32_t v) { return emu_bf2f(static_cast<uint16_t>(v & 0xffff)); };
    auto hi = [](uint32_t v) { return emu_bf2f(static_cast<uint16_t>(v >> 16)); };
    for (int L = 0; L < 32; ++L) {
      const int g = L >> 2, c = L & 3;
      A[g][2 * c] = lo(w.a[L][0]), A[g][2 * c + 1] = hi(w.a[L][0]);
      A[g + 8][2 * c] = lo(w.a[L][1]), A[g + 8][2 * c + 1] = hi(w.a[L][1]);
      A[g][2 * c + 8] = lo(w.a[L][2]), A[g][2 * c + 9] = hi(w.a[L][2]);
      A[g + 8][2 * c + 8] = lo(w.a[L][3]), A[g + 8][2 * c + 9] = hi(w.a[L][3]);
      B[2 * c][g] = lo(w.b[L][0]), B[2 * c + 1][g] = hi(w.b[L][0]);
      B[2 * c + 8][g] = lo(w.b[L][1]), B[2 * c + 9][g] = hi(w.b[L][1]);
      w.d[g][2 * c] = w.c[L][0], w.d[g][2 * c + 1] = w.c[L][1];
      w.d[g + 8][2 * c] = w.c[L][2], w.d[g + 8][2 * c + 1] = w.c[L][3];
    }
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        float sum = 0;
        for (int k = 0; k < 16; ++k) sum += A[m][k] * B[k][n];
        w.d[m][n] += sum;
      }
    w.d_gen = w.bar.gen;
  }
  const int g = l >> 2, c = l & 3;
  d[0] = w.d[g][2 * c], d[1] = w.d[g][2 * c + 1];
  d[2] = w.d[g + 8][2 * c], d[3] = w.d[g + 8][2 * c + 1];
  w.bar.wait();
}

// Runs kernel(p) on grid x 128 threads (fibers), CTA after CTA.
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
template <class Kernel, class P>
void launch(Kernel kernel, dim3 grid, int threads, size_t smem_bytes, const P& p) {
  if (threads != 128) std::abort();
  grid_dim = {grid.x, grid.y, grid.z};
  body = [&] { kernel(p); };
  static std::vector<Fiber> fibers(128);
  for (auto& f : fibers) f.stack.resize(1 << 18);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        auto c = std::make_unique<Cta>();
        c->smem.assign(smem_bytes, 0xff);
        cta = c.get();
        block_idx = {x, y, z};
        for (unsigned t = 0; t < 128; ++t) {
          Fiber& f = fibers[t];
          f.done = false;
          f.started = false;
          f.waiting_on = nullptr;
          f.idx = {t, 0, 0};
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
        const unsigned lead = (x + y + z) % 4;
        unsigned state = 2654435761u * (x + 1) + 40503u * (y + 1) + 97u * (z + 1);
        for (bool left = true; left;) {
          left = false;
          for (unsigned w = 0; w < 4; ++w) {
            state = state * 1664525u + 1013904223u;
            const bool runs = w == lead || (state >> 30) == 0;
            for (unsigned t = 32 * w; t < 32 * w + 32; ++t) {
              Fiber& f = fibers[t];
              if (f.done) continue;
              const bool blocked = f.waiting_on && f.waiting_on->gen == f.waiting_gen;
              if (runs && !blocked) {
                resume(f);
              }
              left = left || !f.done;
            }
          }
        }
        for (auto& f : fibers)
          if (!f.pending.empty() || !f.committed.empty()) {
            std::fprintf(stderr, "emu: cp.async left uncompleted at the kernel's end\n");
            std::abort();
          }
      }
}
}  // namespace emu
