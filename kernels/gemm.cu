// GEMMs through cuBLASLt: CudaBackend::gemm (f32/bf16), gemm_fp8 (block-scaled FP8, Hopper) and
// gemm_fp8_unsupported. The API facts we rely on are in docs/fp8-numerics.md.
//
// Row-major C[M,N] = A[M,K]·B[N,K]ᵀ is cuBLAS's column-major TN call m = N, n = M, k = K with
// cuBLAS A = our b (TRANSA = T, lda = K), cuBLAS B = our a (TRANSB = N, ldb = K), C = D (ldc = N).
// Our scale layouts are cuBLASLt's: 1x128 = VEC128_32F, 128x128 tiles = BLK128x128_32F.
//
// FP8 shape rules (K % 16, m % 8, n % 8) are met by zero-padding through the backend's scratch
// buffer: codes of padded rows/cols are 0, padded rows of 1x128 operands get scale 1. Padding K
// by < 16 and M, N by < 8 never changes the number of 128-blocks (16 and 8 divide 128), so tile
// scales and the K-block count stay as they are; only a 1x128 scale array, whose layout depends
// on the row count, is re-laid. The padded product is copied back into C ([M, N] part).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <string>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "fp8/format.hpp"
#include "grid_stride.cuh"

namespace fp8rl {
namespace {

constexpr int kThreads = 256;

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

cudaDataType_t data_type(DType t) {
  return t == DType::f32 ? CUDA_R_32F : CUDA_R_16BF;
}
cudaDataType_t fp8_type(Fp8Format f) {
  return f == Fp8Format::e4m3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
}
int32_t scale_mode(ScaleBlock b) {
  return b == ScaleBlock::row1x128 ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                                   : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
}

const char* type_name(int32_t t) {
  switch (t) {
    case CUDA_R_32F:
      return "f32";
    case CUDA_R_16BF:
      return "bf16";
    case CUDA_R_8F_E4M3:
      return "e4m3";
    case CUDA_R_8F_E5M2:
      return "e5m2";
    default:
      return "?";
  }
}
const char* mode_name(int32_t m) {
  return m == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F       ? "1x128"
         : m == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F ? "128x128"
                                                            : "unscaled";
}

// The key in our row-major terms, for messages.
std::string describe(const cuda::GemmKey& k) {
  std::string s = "c [" + std::to_string(k.n) + ", " + std::to_string(k.m) + "] " +
                  type_name(k.d_type) + " = a [" + std::to_string(k.n) + ", " +
                  std::to_string(k.k) + "] " + type_name(k.b_type);
  if (k.b_scale_mode >= 0) s += std::string(" ") + mode_name(k.b_scale_mode);
  s += " x b [" + std::to_string(k.m) + ", " + std::to_string(k.k) + "]^T " + type_name(k.a_type);
  if (k.a_scale_mode >= 0) s += std::string(" ") + mode_name(k.a_scale_mode);
  s += k.accumulate ? ", beta != 0" : ", beta 0";
  s += ", alignment a/b/c " + std::to_string(k.align_b) + "/" + std::to_string(k.align_a) + "/" +
       std::to_string(k.align_d);
  if (k.algo > 0) s += ", the heuristic's algorithm " + std::to_string(k.algo + 1);
  if (k.nt) s += ", NT (a and b^T read as stored)";
  return s;
}

// --- helper kernels (padding, conversion); all guard every access.

// out [prows, pcols] = in [rows, cols] zero-padded (prows ≥ rows, pcols ≥ cols). Block x covers
// kThreads columns; rows grid-stride over blockIdx.y.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    pad_matrix_kernel(const T* __restrict__ in, int64_t rows, int64_t cols, T* __restrict__ out,
                      int64_t prows, int64_t pcols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (c >= pcols) return;
  for (int64_t r = blockIdx.y; r < prows; r += gridDim.y)
    out[r * pcols + c] = (r < rows && c < cols) ? in[r * cols + c] : T(0);
}

// 1x128 scales of a [rows, K] operand (s[cb·rows + r], kb blocks) re-laid for prows rows; the
// padded rows (all-zero codes) get scale 1.
__global__ void __launch_bounds__(kThreads)
    relayout_vec128_scales_kernel(const float* __restrict__ in, int64_t rows, int64_t kb,
                                  float* __restrict__ out, int64_t prows) {
  const int64_t n = kb * prows;
  cuda::for_each_index<kThreads>(n, [&](int64_t i) {
    const int64_t cb = i / prows, r = i % prows;
    out[i] = r < rows ? in[cb * rows + r] : 1.0f;
  });
}

// bf16 (raw bits) = round-to-nearest-even(f32).
__global__ void __launch_bounds__(kThreads)
    f32_to_bf16_kernel(const float* __restrict__ in, uint16_t* __restrict__ out, int64_t n) {
  cuda::for_each_index<kThreads>(
      n, [&](int64_t i) { out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i])); });
}

__global__ void __launch_bounds__(kThreads)
    scale_kernel(float* __restrict__ c, int64_t n, float beta) {
  cuda::for_each_index<kThreads>(n, [&](int64_t i) { c[i] = __fmul_rn(c[i], beta); });
}

unsigned stride_grid(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 8192));
}

template <typename T>
void pad_matrix(const T* in, int64_t rows, int64_t cols, T* out, int64_t prows, int64_t pcols,
                cudaStream_t stream) {
  const int64_t col_blocks = (pcols + kThreads - 1) / kThreads;
  check(col_blocks <= INT_MAX, "gemm_fp8: operand too wide to pad");
  const dim3 grid(static_cast<unsigned>(col_blocks),
                  static_cast<unsigned>(std::min<int64_t>(prows, 65535)));
  pad_matrix_kernel<T><<<grid, kThreads, 0, stream>>>(in, rows, cols, out, prows, pcols);
  cuda::check_launch("pad_matrix_kernel");
}

// --- FP8 geometry: the padded cuBLAS problem for operands a [M, K], b [N, K].
struct Fp8Geometry {
  int64_t M = 0, N = 0, K = 0, Mp = 0, Np = 0, Kp = 0;
  bool pad_a_codes = false, pad_a_scales = false;  // our a = cuBLAS B
  bool pad_b_codes = false, pad_b_scales = false;  // our b = cuBLAS A
  bool pad_out = false;
};

Fp8Geometry fp8_geometry(const Fp8Matrix& a, const Fp8Matrix& b) {
  Fp8Geometry g;
  g.M = a.rows;
  g.N = b.rows;
  g.K = a.cols;
  g.Kp = round_up(g.K, 16);
  // m % 8 is always required; n % 8 only when B is 1x128-scaled, but padding M costs nothing
  // in the uses here (a is 1x128 there) and keeps one rule.
  g.Np = round_up(g.N, 8);
  g.Mp = round_up(g.M, 8);
  g.pad_a_codes = g.Mp != g.M || g.Kp != g.K;
  g.pad_a_scales = a.block == ScaleBlock::row1x128 && g.Mp != g.M;
  g.pad_b_codes = g.Np != g.N || g.Kp != g.K;
  g.pad_b_scales = b.block == ScaleBlock::row1x128 && g.Np != g.N;
  g.pad_out = g.Mp != g.M || g.Np != g.N;
  return g;
}

cuda::GemmKey fp8_key(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, bool accumulate,
                      const Fp8Geometry& g) {
  cuda::GemmKey k;
  k.m = g.Np;
  k.n = g.Mp;
  k.k = g.Kp;
  k.a_type = fp8_type(b.format);
  k.b_type = fp8_type(a.format);
  k.d_type = data_type(c.dtype);
  k.a_scale_mode = scale_mode(b.block);
  k.b_scale_mode = scale_mode(a.block);
  k.accumulate = accumulate;
  // Padded operands live in the scratch buffer at 256-byte aligned offsets.
  k.align_a = g.pad_b_codes ? 256 : cuda::pointer_alignment(b.codes);
  k.align_a_scale = g.pad_b_scales ? 256 : cuda::pointer_alignment(b.scale_inv);
  k.align_b = g.pad_a_codes ? 256 : cuda::pointer_alignment(a.codes);
  k.align_b_scale = g.pad_a_scales ? 256 : cuda::pointer_alignment(a.scale_inv);
  k.align_d = g.pad_out ? 256 : cuda::pointer_alignment(c.data);
  return k;
}

constexpr const char* kTileTileReason = "cuBLASLt rejects 128x128 x 128x128 block scaling";
// cuBLASLt's FP8 matmuls take E4M3 x E4M3, E4M3 x E5M2 and E5M2 x E4M3 inputs, not E5M2 x E5M2.
constexpr const char* kE5m2PairReason =
    "cuBLASLt has no E5M2 x E5M2 FP8 matmul (one operand must be E4M3)";

template <class T>
void set_attr(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value,
              const char* what) {
  cuda::check_cublas(cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)), what);
}

// Sub-buffers of one scratch allocation, each 256-byte aligned.
class ScratchLayout {
 public:
  size_t take(size_t bytes) {
    const size_t at = size_;
    size_ = (size_ + bytes + 255) / 256 * 256;
    return at;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

}  // namespace

const cuda::GemmPlan& CudaBackend::plan(const cuda::GemmKey& wanted) const {
  cuda::GemmKey key = wanted;
  key.algo = static_cast<int32_t>(options_.gemm_algo - 1);
  std::lock_guard<std::mutex> lock(plans_mutex_);
  if (const auto* cached = plans_.find(key)) return **cached;

  auto p = std::make_unique<cuda::GemmPlan>();
  FP8RL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t trans_a = key.nt ? CUBLAS_OP_N : CUBLAS_OP_T,
                trans_b = key.nt ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, trans_a, "set TRANSA");
  set_attr(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, trans_b, "set TRANSB");
  if (key.a_scale_mode >= 0) {
    const int8_t fast_accum = 0;
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast_accum, "set FAST_ACCUM");
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, key.a_scale_mode, "set A_SCALE_MODE");
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, key.b_scale_mode, "set B_SCALE_MODE");
    // Stand-in scale pointers with the alignment of the real ones (set per call), in case the
    // heuristic looks at them.
    auto stand_in = [&](uint32_t align) -> const void* {
      return static_cast<const char*>(workspace_) + (align >= 256 ? 0 : align);
    };
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, stand_in(key.align_a_scale),
             "set A_SCALE_POINTER");
    set_attr(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, stand_in(key.align_b_scale),
             "set B_SCALE_POINTER");
  }
  const auto a_type = static_cast<cudaDataType_t>(key.a_type);
  const auto b_type = static_cast<cudaDataType_t>(key.b_type);
  const auto d_type = static_cast<cudaDataType_t>(key.d_type);
  // TN: A stored k x m, B k x n; NT: A stored m x k, B n x k (column-major, packed).
  if (key.nt) {
    FP8RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, a_type, key.m, key.k, key.m));
    FP8RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, b_type, key.n, key.k, key.n));
  } else {
    FP8RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->a, a_type, key.k, key.m, key.k));
    FP8RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->b, b_type, key.k, key.n, key.k));
  }
  FP8RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->c, d_type, key.m, key.n, key.m));
  FP8RL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->d, d_type, key.m, key.n, key.m));

  cublasLtMatmulPreference_t pref = nullptr;
  FP8RL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  // The heuristic's first results, up to the one the gemm_algo option names (≤ 16). A plain
  // array: nvcc 13.0 hit an internal error on a std::vector of them here.
  cublasLtMatmulHeuristicResult_t results[16] = {};
  const int wanted_count = std::min(key.algo + 1, 16);
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
      FP8RL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
    };
    set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
    set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
    status = cublasLtMatmulAlgoGetHeuristic(lt_, p->desc, p->a, p->b, p->c, p->d, pref,
                                            wanted_count, results, &found);
  } catch (...) {
    (void)cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  (void)cublasLtMatmulPreferenceDestroy(pref);

  if (status == CUBLAS_STATUS_SUCCESS && found > key.algo &&
      results[key.algo].state == CUBLAS_STATUS_SUCCESS) {
    p->algo = results[key.algo].algo;
  } else if (status == CUBLAS_STATUS_SUCCESS && found > 0) {
    p->unsupported = "cuBLASLt offers " + std::to_string(found) + " algorithm(s) for " +
                     describe(wanted) + ", not " + std::to_string(key.algo + 1) +
                     " (kernel option gemm_algo)";
  } else if (status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED) {
    // A property of the problem, not a failure: remembered like a plan. (INVALID_VALUE is
    // documented for a bad request only, so it is thrown below: it means a bug here, and must
    // not turn into skipped tests.)
    std::string why = "no cuBLASLt algorithm for " + describe(key);
    if (status != CUBLAS_STATUS_SUCCESS)
      why += std::string(" [") + cublasLtGetStatusName(status) + "]";
    p->unsupported = why;
  } else {
    cuda::check_cublas(status, "cublasLtMatmulAlgoGetHeuristic");
  }
  return *plans_.insert(key, std::move(p));
}

void CudaBackend::run_plan(const cuda::GemmPlan& p, const void* a, const void* b, void* d,
                           float beta, const float* a_scale, const float* b_scale) {
  if (p.unsupported) throw Error(*p.unsupported);
  // The scale pointers are read when the matmul is enqueued, so updating the cached descriptor
  // per call is safe with earlier calls still queued.
  if (a_scale) set_attr(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale, "set A scales");
  if (b_scale) set_attr(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale, "set B scales");
  const float alpha = 1.0f;
  FP8RL_CUBLAS_CHECK(cublasLtMatmul(lt_, p.desc, &alpha, a, p.a, b, p.b, &beta, d, p.c, d, p.d,
                                    &p.algo, workspace_, kWorkspaceBytes, stream_));
}

bool CudaBackend::begin_product(const char* op, int64_t M, int64_t N, int64_t K, const Matrix& c,
                                float beta) {
  if (M == 0 || N == 0) return false;
  check(c.data != nullptr, std::string(op) + ": null output pointer");
  make_current();
  if (K != 0) return true;
  // An empty contraction: c = beta·c.
  const int64_t n = c.rows * c.cols;
  if (n == 0 || beta == 1.0f) return false;
  if (beta == 0.0f) {
    // All-zero bits are +0 in f32 and bf16 (and C is not read, as in BLAS).
    FP8RL_CUDA_CHECK(
        cudaMemsetAsync(c.data, 0, static_cast<size_t>(n) * dtype_size(c.dtype), stream_));
    return false;
  }
  scale_kernel<<<stride_grid(n), kThreads, 0, stream_>>>(static_cast<float*>(c.data), n, beta);
  cuda::check_launch("scale_kernel");
  return false;
}

bool CudaBackend::run_matmul(bool nt, int64_t m, int64_t n, int64_t k, const void* a, const void* b,
                             DType in, const Matrix& c, float beta, std::string* why) {
  const bool via_f32 = in == DType::f32 && c.dtype == DType::bf16;
  cuda::GemmKey key;
  key.m = m;
  key.n = n;
  key.k = k;
  key.nt = nt;
  key.a_type = data_type(in);
  key.b_type = data_type(in);
  key.d_type = via_f32 ? CUDA_R_32F : data_type(c.dtype);
  key.accumulate = beta != 0.0f;
  key.align_a = cuda::pointer_alignment(a);
  key.align_b = cuda::pointer_alignment(b);
  key.align_d = via_f32 ? 256 : cuda::pointer_alignment(c.data);
  const cuda::GemmPlan& p = plan(key);
  if (p.unsupported) {
    if (why) *why = *p.unsupported;
    return false;
  }
  void* d = via_f32 ? scratch(static_cast<size_t>(m * n) * sizeof(float)) : c.data;
  run_plan(p, a, b, d, beta, nullptr, nullptr);
  if (via_f32) {
    f32_to_bf16_kernel<<<stride_grid(m * n), kThreads, 0, stream_>>>(
        static_cast<const float*>(d), static_cast<uint16_t*>(c.data), m * n);
    cuda::check_launch("f32_to_bf16_kernel");
  }
  return true;
}

void CudaBackend::gemm(const Matrix& a, const Matrix& b, const Matrix& c, float beta) {
  const OpScope scope(*this, "gemm");
  check_gemm_operands(a, b, c, beta);
  const int64_t M = a.rows, N = b.rows, K = a.cols;
  if (!begin_product("gemm", M, N, K, c, beta)) return;
  check(a.data && b.data, "gemm: null input pointer");
  std::string why;
  if (!run_matmul(false, N, M, K, b.data, a.data, a.dtype, c, beta, &why))
    throw Error("gemm: " + why);
}

// dW [N, K] = dyᵀ·x: cuBLAS's NT call m = K, n = N, k = M with A = x ([M, K] row-major is K x M
// column-major, lda = K, not transposed), B = dy (N x M column-major, ldb = N, transposed), C
// [N, K] row-major = K x N column-major (ldc = K). No transposed copies (the default's two
// passes over dy and x); without an NT algorithm for the shape, the default.
void CudaBackend::gemm_wgrad(const Matrix& dy, const Matrix& x, const Matrix& c, float beta) {
  const OpScope scope(*this, "gemm_wgrad");
  check_gemm_wgrad_operands(dy, x, c, beta);
  const int64_t M = dy.rows, N = dy.cols, K = x.cols;
  if (!begin_product("gemm_wgrad", N, K, M, c, beta)) return;
  check(dy.data && x.data, "gemm_wgrad: null input pointer");
  if (!run_matmul(true, K, N, M, x.data, dy.data, dy.dtype, c, beta, nullptr))
    Backend::gemm_wgrad(dy, x, c, beta);
}

std::optional<std::string> CudaBackend::gemm_fp8_unsupported(const Fp8Matrix& a, const Fp8Matrix& b,
                                                             const Matrix& c) const {
  try {
    check_gemm_fp8_operands(a, b, c, 0.0f);
  } catch (const Error& e) {
    return e.message();
  }
  if (a.block == ScaleBlock::tile128x128 && b.block == ScaleBlock::tile128x128)
    return std::string(kTileTileReason);
  if (a.format == Fp8Format::e5m2 && b.format == Fp8Format::e5m2)
    return std::string(kE5m2PairReason);
  if (a.rows == 0 || b.rows == 0 || a.cols == 0) return std::nullopt;  // no matmul to run
  make_current();
  const Fp8Geometry g = fp8_geometry(a, b);
  // f32 outputs serve both overwrite and accumulation (wgrad): both must run.
  if (const auto& p = plan(fp8_key(a, b, c, false, g)); p.unsupported) return p.unsupported;
  if (c.dtype == DType::f32) {
    if (const auto& p = plan(fp8_key(a, b, c, true, g)); p.unsupported) return p.unsupported;
  }
  return std::nullopt;
}

void CudaBackend::gemm_fp8(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) {
  const OpScope scope(*this, "gemm_fp8");
  check_gemm_fp8_operands(a, b, c, beta);
  check(!(a.block == ScaleBlock::tile128x128 && b.block == ScaleBlock::tile128x128),
        std::string("gemm_fp8: ") + kTileTileReason);
  check(!(a.format == Fp8Format::e5m2 && b.format == Fp8Format::e5m2),
        std::string("gemm_fp8: ") + kE5m2PairReason);
  const int64_t M = a.rows, N = b.rows, K = a.cols;
  if (!begin_product("gemm_fp8", M, N, K, c, beta)) return;
  check(a.codes && a.scale_inv && b.codes && b.scale_inv, "gemm_fp8: null input pointer");
  const Fp8Geometry g = fp8_geometry(a, b);
  const cuda::GemmPlan& p = plan(fp8_key(a, b, c, beta != 0.0f, g));
  if (p.unsupported) throw Error("gemm_fp8: " + *p.unsupported);

  // Scratch for whatever needs padding (nothing for aligned shapes).
  const int64_t kb = blocks_of(K);
  const size_t out_size = dtype_size(c.dtype);
  ScratchLayout layout;
  const size_t at_bq = g.pad_b_codes ? layout.take(static_cast<size_t>(g.Np * g.Kp)) : 0;
  const size_t at_bs = g.pad_b_scales ? layout.take(sizeof(float) * kb * g.Np) : 0;
  const size_t at_aq = g.pad_a_codes ? layout.take(static_cast<size_t>(g.Mp * g.Kp)) : 0;
  const size_t at_as = g.pad_a_scales ? layout.take(sizeof(float) * kb * g.Mp) : 0;
  const size_t at_d = g.pad_out ? layout.take(out_size * g.Mp * g.Np) : 0;
  char* base = layout.size() > 0 ? static_cast<char*>(scratch(layout.size())) : nullptr;

  const uint8_t* bq = b.codes;
  const float* bs = b.scale_inv;
  const uint8_t* aq = a.codes;
  const float* as = a.scale_inv;
  void* d = c.data;
  // An operand's codes [rows, K] padded to [rows_p, Kp], and its scales relaid for rows_p rows, in
  // the scratch buffer at byte offset `at`.
  auto pad_codes = [&](const uint8_t* codes, int64_t rows, int64_t rows_p, size_t at) {
    auto* out = reinterpret_cast<uint8_t*>(base + at);
    pad_matrix<uint8_t>(codes, rows, K, out, rows_p, g.Kp, stream_);
    return static_cast<const uint8_t*>(out);
  };
  auto pad_scales = [&](const float* scales, int64_t rows, int64_t rows_p, size_t at) {
    auto* out = reinterpret_cast<float*>(base + at);
    relayout_vec128_scales_kernel<<<stride_grid(kb * rows_p), kThreads, 0, stream_>>>(
        scales, rows, kb, out, rows_p);
    cuda::check_launch("relayout_vec128_scales_kernel");
    return static_cast<const float*>(out);
  };
  if (g.pad_b_codes) bq = pad_codes(b.codes, N, g.Np, at_bq);
  if (g.pad_b_scales) bs = pad_scales(b.scale_inv, N, g.Np, at_bs);
  if (g.pad_a_codes) aq = pad_codes(a.codes, M, g.Mp, at_aq);
  if (g.pad_a_scales) as = pad_scales(a.scale_inv, M, g.Mp, at_as);
  if (g.pad_out) {
    d = base + at_d;
    // beta != 0 needs C's values in the padded product (f32 only, see the operand check).
    if (beta != 0.0f)
      pad_matrix<float>(static_cast<const float*>(c.data), M, N, static_cast<float*>(d), g.Mp, g.Np,
                        stream_);
  }

  run_plan(p, bq, aq, d, beta, bs, as);

  if (g.pad_out) {
    FP8RL_CUDA_CHECK(cudaMemcpy2DAsync(c.data, static_cast<size_t>(N) * out_size, d,
                                       static_cast<size_t>(g.Np) * out_size,
                                       static_cast<size_t>(N) * out_size, static_cast<size_t>(M),
                                       cudaMemcpyDeviceToDevice, stream_));
  }
}

}  // namespace fp8rl
