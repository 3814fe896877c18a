// Grouped GEMMs (mixture-of-experts experts, tokens sorted by expert): CudaBackend::gemm_grouped,
// gemm_fp8_grouped, group_scales, gemm_wgrad_grouped and gemm_fp8_wgrad_grouped. Shapes and
// semantics: Backend.
//
// BF16 and f32 (gemm_grouped): one cublasGemmGroupedBatchedEx call for all groups (cuBLAS, not
// cuBLASLt: loaded at run time like NCCL, so that the module loads without it; when it cannot be
// loaded, or has no kernel for the types, one cuBLASLt matmul per group runs instead). cuBLAS
// takes bf16 x bf16 → bf16 and f32 x f32 → f32 with FP32 compute; other pairings (bf16 → f32
// with beta: the weight gradients) run one cuBLASLt matmul per group. The layout is gemm.cu's:
// row-major C[M,N] = A[M,K]·B[N,K]ᵀ is the column-major TN call m = N, n = M_g, k = K.
//
// Block-scaled FP8 (gemm_fp8_grouped): cuBLASLt has no grouped block-scaled matmul, so each
// non-empty group is one gemm_fp8 (cuBLASLt VEC128 x BLK128x128) issued from this one call, with
// no host synchronisation; groups whose row count is not a multiple of 8 run over the rounded row
// count where the contiguous layout allows it (see there), else gemm_fp8 pads them, and groups
// whose scales do not start 16-byte aligned in the grouped layout get an aligned copy of them
// first. Kernel option gemm_grouped_kernel = 3 runs all groups in one launch instead
// (gemm_grouped_mma.cu, mma.sync FP8 on the tensor cores).
#include <dlfcn.h>

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "gemm_grouped_mma.hpp"

namespace fp8rl {
namespace {

constexpr int kThreads = 256;

// --- cuBLAS, loaded at run time (libcublas.so.13 beside cuBLASLt in the toolkit).
struct CublasApi {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasGemmGroupedBatchedEx) gemm_grouped = nullptr;
  decltype(&::cublasGetStatusName) status_name = nullptr;
  std::string problem;  // why it cannot be used; empty when loaded
};

constexpr const char* kCublasLibrary = "libcublas.so.13";

// Loads cuBLAS once (thread-safe); the library stays loaded for the life of the process.
const CublasApi& cublas_api() {
  static CublasApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = dlopen(kCublasLibrary, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = dlerror();
      api.problem = std::string("cannot load ") + kCublasLibrary + ": " + (e ? e : "dlopen failed");
      return;
    }
    auto load = [&](auto& slot, const char* name) {
      dlerror();
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(handle, name));
      if (!slot && api.problem.empty())
        api.problem = std::string(kCublasLibrary) + " has no " + name;
    };
    load(api.create, "cublasCreate_v2");
    load(api.destroy, "cublasDestroy_v2");
    load(api.set_stream, "cublasSetStream_v2");
    load(api.gemm_grouped, "cublasGemmGroupedBatchedEx");
    load(api.status_name, "cublasGetStatusName");
  });
  return api;
}

cudaDataType_t data_type(DType t) {
  return t == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
}

template <class T>
T* row_at(T* data, int64_t first, int64_t cols, size_t elem) {
  using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(data) +
                              static_cast<size_t>(first * cols) * elem);
}

// --- group_scales: one launch per up to kScaleGroups groups, their first rows by value (no
// upload, so it may be recorded into a graph).
constexpr int kScaleGroups = 256;
struct ScaleGroups {
  int64_t first[kScaleGroups + 1];  // group i of the launch: rows [first[i], first[i + 1])
  int count = 0;
};

// For the launch's rows [g.first[0], g.first[count]) of a [total, ·] 1x128 operand with kb
// blocks per row: out[kb·f + cb·n + r] = in[cb·total + f + r] per group (f its first row, n its
// rows). Grid: x over the launch's rows, y over the column blocks.
__global__ void __launch_bounds__(kThreads)
    group_scales_kernel(const float* __restrict__ in, int64_t total, int64_t kb,
                        float* __restrict__ out, ScaleGroups g) {
  const int64_t row = g.first[0] + static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (row >= g.first[g.count]) return;
  // The group of this row: the last i with first[i] <= row (first[] ascending).
  int lo = 0, hi = g.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (g.first[mid] <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int64_t f = g.first[lo], n = g.first[lo + 1] - f, r = row - f;
  for (int64_t cb = blockIdx.y; cb < kb; cb += gridDim.y)
    out[kb * f + cb * n + r] = in[cb * total + row];
}

}  // namespace

namespace cuda {
void destroy_cublas_handle(void* handle) noexcept {
  const CublasApi& api = cublas_api();
  if (handle && api.destroy) (void)api.destroy(static_cast<cublasHandle_t>(handle));
}
}  // namespace cuda

void CudaBackend::gemm_grouped(const Matrix& a, const std::vector<Matrix>& b, const Matrix& c,
                               const std::vector<int64_t>& rows, float beta) {
  const OpScope scope(*this, "gemm_grouped");
  check_grouped_rows("gemm_grouped", rows, a.rows, b.size());
  check(c.rows == a.rows,
        "gemm_grouped: c has " + std::to_string(c.rows) + " rows, a " + std::to_string(a.rows));
  // Each group's operands by gemm's rules (shapes, dtypes, beta), before anything runs.
  int64_t first = 0, groups = 0;
  const int64_t K = a.cols, N = c.cols;
  for (size_t g = 0; g < rows.size(); ++g) {
    const int64_t n = rows[g];
    if (n > 0) {
      check_gemm_operands(Matrix{a.data, n, K, a.dtype}, b[g], Matrix{c.data, n, N, c.dtype}, beta);
      check(b[g].data != nullptr, "gemm_grouped: null weight of group " + std::to_string(g));
      ++groups;
    }
    first += n;
  }
  const bool types = (a.dtype == DType::bf16 && c.dtype == DType::bf16) ||
                     (a.dtype == DType::f32 && c.dtype == DType::f32);
  const bool fits_int = K <= INT_MAX && N <= INT_MAX && a.rows <= INT_MAX;
  const CublasApi& api = cublas_api();
  if (groups == 0 || K == 0 || N == 0 || !types || !fits_int || !api.problem.empty() ||
      options_.gemm_grouped_kernel == 2 || !grouped_cublas_problem_.empty()) {
    Backend::gemm_grouped(a, b, c, rows, beta);
    return;
  }
  check(a.data && c.data, "gemm_grouped: null pointer");
  make_current();
  if (!cublas_) {
    cublasHandle_t h = nullptr;
    const cublasStatus_t s = api.create(&h);
    if (s != CUBLAS_STATUS_SUCCESS) {
      grouped_cublas_problem_ = std::string("cublasCreate: ") + api.status_name(s);
      Backend::gemm_grouped(a, b, c, rows, beta);
      return;
    }
    cublas_ = h;
  }
  const auto handle = static_cast<cublasHandle_t>(cublas_);
  FP8RL_CUBLAS_CHECK(api.set_stream(handle, stream_));

  // Per cuBLAS group (one problem each): sizes, leading dimensions and scalars on the host;
  // the A, B, C pointer arrays in device memory (one upload, staged by the runtime: no wait).
  const size_t G = static_cast<size_t>(groups);
  std::vector<cublasOperation_t> ta(G, CUBLAS_OP_T), tb(G, CUBLAS_OP_N);
  std::vector<int> m(G, static_cast<int>(N)), n(G), k(G, static_cast<int>(K));
  std::vector<int> lda(G, static_cast<int>(K)), ldb(G, static_cast<int>(K)),
      ldc(G, static_cast<int>(N)), size(G, 1);
  std::vector<float> alpha(G, 1.0f), betas(G, beta);
  std::vector<const void*> ptrs(3 * G);  // A (our b), B (our a rows), C (our c rows)
  first = 0;
  size_t i = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    const int64_t r = rows[g];
    if (r > 0) {
      n[i] = static_cast<int>(r);
      ptrs[i] = b[g].data;
      ptrs[G + i] = row_at(static_cast<const void*>(a.data), first, K, dtype_size(a.dtype));
      ptrs[2 * G + i] = row_at(static_cast<const void*>(c.data), first, N, dtype_size(c.dtype));
      ++i;
    }
    first += r;
  }
  const Buffer dev = alloc(ptrs.size() * sizeof(void*));
  FP8RL_CUDA_CHECK(cudaMemcpyAsync(dev.data(), ptrs.data(), ptrs.size() * sizeof(void*),
                                   cudaMemcpyHostToDevice, stream_));
  void** arrays = static_cast<void**>(dev.data());
  const void* const* a_arrays = arrays;
  const void* const* b_arrays = arrays + G;
  void* const* c_arrays = arrays + 2 * G;
  const cudaDataType_t at = data_type(a.dtype), ct = data_type(c.dtype);
  const cublasStatus_t s =
      api.gemm_grouped(handle, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(),
                       a_arrays, at, lda.data(), b_arrays, at, ldb.data(), betas.data(), c_arrays,
                       ct, ldc.data(), static_cast<int>(G), size.data(), CUBLAS_COMPUTE_32F);
  if (s == CUBLAS_STATUS_NOT_SUPPORTED) {
    // Nothing ran: the per-group matmuls from now on.
    grouped_cublas_problem_ = "cublasGemmGroupedBatchedEx: CUBLAS_STATUS_NOT_SUPPORTED";
    Backend::gemm_grouped(a, b, c, rows, beta);
    return;
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cublasGemmGroupedBatchedEx: ") + api.status_name(s));
}

void CudaBackend::gemm_fp8_grouped(const Fp8Matrix& a, const std::vector<Fp8Matrix>& b,
                                   const Matrix& c, const std::vector<int64_t>& rows, float beta) {
  const OpScope scope(*this, "gemm_fp8_grouped");
  check_grouped_rows("gemm_fp8_grouped", rows, a.rows, b.size());
  check(a.block == ScaleBlock::row1x128, "gemm_fp8_grouped: a must be 1x128 blocks");
  check(c.rows == a.rows,
        "gemm_fp8_grouped: c has " + std::to_string(c.rows) + " rows, a " + std::to_string(a.rows));
  const int64_t K = a.cols, kb = blocks_of(K);
  // Every group in one launch of the tensor-core kernel where it takes the operands (else the
  // per-group matmuls below, which also check them): always under kernel option 3; by default
  // when the non-empty groups average at most kSingleLaunchRows rows (on an H200 it ran 2.2x the
  // per-group matmuls at ~256 rows a group and 0.64x at ~1,024).
  int64_t busy = 0;
  for (const int64_t n : rows) busy += n > 0 ? 1 : 0;
  constexpr int64_t kSingleLaunchRows = 384;
  const bool single =
      options_.gemm_grouped_kernel == 3 ||
      (options_.gemm_grouped_kernel == 1 && busy > 0 && a.rows <= kSingleLaunchRows * busy);
  if (single && a.rows > 0 && c.cols > 0 && K > 0 &&
      (c.dtype == DType::f32 || c.dtype == DType::bf16) && c.data && a.codes && a.scale_inv) {
    cuda::GroupedMmaArgs m;
    m.a = a.codes;
    m.a_scales = a.scale_inv;
    m.rows = rows;
    m.c = c.data;
    m.c_bf16 = c.dtype == DType::bf16;
    m.N = c.cols;
    m.K = K;
    m.beta = beta;
    m.e4m3 = a.format == Fp8Format::e4m3;
    bool fits = true;
    for (size_t g = 0; g < b.size(); ++g) {
      const Fp8Matrix& w = b[g];
      fits = fits && w.block == ScaleBlock::tile128x128 && w.rows == c.cols && w.cols == K &&
             w.format == a.format && (rows[g] == 0 || (w.codes && w.scale_inv));
      m.b.push_back(w.codes);
      m.b_scales.push_back(w.scale_inv);
    }
    if (fits && cuda::grouped_mma_problem(m).empty()) {
      make_current();
      cuda::gemm_fp8_grouped_mma(m, stream_);
      return;
    }
  }
  // cuBLASLt wants n = M_g % 8 == 0; gemm_fp8 pads other row counts through copies of the codes,
  // the scales and the output (three more launches per group). In the contiguous layout a group
  // can instead run over M_g rounded up to 8 rows (the over-read rows are the next groups' codes)
  // and write those extra rows' garbage into the next groups' output rows, which their own
  // matmuls, queued after it on the stream, overwrite — when it overwrites (beta 0), when no other
  // padding is needed (K % 16 == 0, every N % 8 == 0) and when the rounded rows stay inside a and
  // c. Its scales are then re-laid for the rounded row count (one 2-D copy; the extra rows' scales
  // are 0, so their products are zeros, not NaNs). Kernel option gemm_grouped_kernel=2 turns this
  // off (then gemm_fp8's padding).
  bool overread = beta == 0.0f && K > 0 && K % 16 == 0 && options_.gemm_grouped_kernel != 2;
  for (size_t g = 0; g < rows.size(); ++g)
    if (rows[g] > 0 && b[g].rows % 8 != 0) overread = false;
  // A group's scales start at a.scale_inv + kb·first_g, 4-byte aligned only; cuBLASLt's scale
  // pointers are given 16-byte alignment (what standalone operands have: pool allocations) by
  // copying such groups' scales into 256-byte aligned slots of one allocation (kb·M_g floats
  // each, small).
  auto rounded = [&](int64_t first, int64_t n) {
    const int64_t np = (n + 7) / 8 * 8;
    return overread && np != n && first + np <= a.rows ? np : n;
  };
  auto needs_slot = [&](int64_t first, int64_t n) {
    return kb > 0 &&
           (rounded(first, n) != n || cuda::pointer_alignment(a.scale_inv + kb * first) < 16);
  };
  auto slot_bytes = [&](int64_t first, int64_t n) {
    return (static_cast<size_t>(kb * rounded(first, n)) * sizeof(float) + 255) / 256 * 256;
  };
  size_t bytes = 0;
  int64_t first = 0;
  for (const int64_t n : rows) {
    if (n > 0 && needs_slot(first, n)) bytes += slot_bytes(first, n);
    first += n;
  }
  const Buffer slots = bytes > 0 ? alloc(bytes) : Buffer{};
  if (bytes > 0) {
    make_current();
    FP8RL_CUDA_CHECK(cudaMemsetAsync(slots.data(), 0, bytes, stream_));
  }
  size_t at = 0;
  first = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    const int64_t n = rows[g];
    if (n > 0) {
      const float* scales = a.scale_inv + kb * first;
      const int64_t np = rounded(first, n);
      if (needs_slot(first, n)) {
        float* slot = reinterpret_cast<float*>(static_cast<char*>(slots.data()) + at);
        // [kb, n] (pitch n) into [kb, np] (pitch np).
        FP8RL_CUDA_CHECK(cudaMemcpy2DAsync(
            slot, static_cast<size_t>(np) * sizeof(float), scales,
            static_cast<size_t>(n) * sizeof(float), static_cast<size_t>(n) * sizeof(float),
            static_cast<size_t>(kb), cudaMemcpyDeviceToDevice, stream_));
        at += slot_bytes(first, n);
        scales = slot;
      }
      gemm_fp8(Fp8Matrix{a.codes + first * K, const_cast<float*>(scales), np, K,
                         ScaleBlock::row1x128, a.format},
               b[g],
               Matrix{row_at(c.data, first, c.cols, dtype_size(c.dtype)), np, c.cols, c.dtype},
               beta);
    }
    first += n;
  }
}

void CudaBackend::group_scales(const Fp8Matrix& q, const std::vector<int64_t>& rows, float* out) {
  const OpScope scope(*this, "group_scales");
  check_grouped_rows("group_scales", rows, q.rows, rows.size());
  check(q.block == ScaleBlock::row1x128, "group_scales: q must be 1x128 blocks");
  check(out != q.scale_inv, "group_scales: out must not be q's scales");
  const int64_t kb = blocks_of(q.cols), total = q.rows;
  if (kb == 0 || total == 0) return;
  check(q.scale_inv && out, "group_scales: null pointer");
  make_current();
  int64_t first = 0;
  size_t g = 0;
  while (g < rows.size()) {
    ScaleGroups sg;
    sg.first[0] = first;
    while (g < rows.size() && sg.count < kScaleGroups) {
      first += rows[g++];
      sg.first[++sg.count] = first;
    }
    const int64_t launch_rows = sg.first[sg.count] - sg.first[0];
    if (launch_rows == 0) continue;
    const dim3 grid(static_cast<unsigned>((launch_rows + kThreads - 1) / kThreads),
                    static_cast<unsigned>(std::min<int64_t>(kb, 65535)));
    group_scales_kernel<<<grid, kThreads, 0, stream_>>>(q.scale_inv, total, kb, out, sg);
    cuda::check_launch("group_scales_kernel");
  }
}

void CudaBackend::gemm_wgrad_grouped(const Matrix& dy, const Matrix& x,
                                     const std::vector<Matrix>& c,
                                     const std::vector<int64_t>& rows) {
  const OpScope scope(*this, "gemm_wgrad_grouped");
  Backend::gemm_wgrad_grouped(dy, x, c, rows);  // one gemm_wgrad per group
}

void CudaBackend::gemm_fp8_wgrad_grouped(const std::vector<Fp8Matrix>& a,
                                         const std::vector<Fp8Matrix>& b,
                                         const std::vector<Matrix>& c) {
  const OpScope scope(*this, "gemm_fp8_wgrad_grouped");
  Backend::gemm_fp8_wgrad_grouped(a, b, c);  // one gemm_fp8 per non-empty group
}

}  // namespace fp8rl
