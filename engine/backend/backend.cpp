#include "backend/backend.hpp"

#include <cmath>
#include <type_traits>
#include <utility>

#include "core/error.hpp"

namespace fp8rl {

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = o.owner_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.owner_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Buffer::reset() {
  if (owner_ && data_) owner_->raw_free(data_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

std::unique_ptr<BackendGraph> Backend::capture(const std::function<void()>&, std::string& why_not) {
  why_not = "the " + name() + " backend records no graphs";
  return nullptr;
}

void Backend::linear_fp8(const Matrix& x, const Fp8Matrix& w, const Matrix& y,
                         const QuantOptions& opt) {
  check(x.dtype == DType::f32 || x.dtype == DType::bf16,
        std::string("linear_fp8: input x must be f32 or bf16, got ") + dtype_name(x.dtype));
  check(w.block == ScaleBlock::tile128x128, "linear_fp8: the weight must be 128x128 tiles");
  check(w.format == opt.format, "linear_fp8: the weight's FP8 format differs from the options'");
  const Buffer codes = alloc(static_cast<size_t>(x.rows * x.cols));
  const Buffer scales =
      alloc(static_cast<size_t>(scale_count(ScaleBlock::row1x128, x.rows, x.cols)) * sizeof(float));
  const Fp8Matrix xq{codes.as<uint8_t>(),  scales.as<float>(), x.rows, x.cols,
                     ScaleBlock::row1x128, opt.format};
  quantize(x, xq, opt, nullptr);
  gemm_fp8(xq, w, y, 0.0f);
}

namespace {

// out's FP8 operands of t (already written, rounded to its dtype).
void quantize_operands(Backend& be, const Matrix& t, const Fp8Operands& out,
                       const QuantOptions& opt) {
  if (out.transposed.codes) {
    be.quantize_with_transpose(t, out.along, out.transposed, opt, nullptr, nullptr);
  } else {
    be.quantize(t, out.along, opt, nullptr);
  }
}

// t itself, or — when its data is null (the producer need not write it) — a temporary of its
// shape and dtype held by `storage`.
Matrix written(Backend& be, const Matrix& t, Buffer& storage) {
  if (t.data || t.rows == 0 || t.cols == 0) return t;
  storage = be.alloc(static_cast<size_t>(t.rows * t.cols) * dtype_size(t.dtype));
  Matrix m = t;
  m.data = storage.data();
  return m;
}

}  // namespace

void Backend::rmsnorm_forward_fp8(const Matrix& x, const Matrix& w, float eps, const Matrix& y,
                                  float* rstd, const Fp8Operands& out, const QuantOptions& opt) {
  Buffer storage;
  const Matrix yw = written(*this, y, storage);
  rmsnorm_forward(x, w, eps, yw, rstd);
  quantize_operands(*this, yw, out, opt);
}

void Backend::rmsnorm_backward_fp8(const Matrix& dy, const Matrix& x, const Matrix& w,
                                   const float* rstd, const Matrix& residual, const Matrix& dx,
                                   const Matrix& dw, const Fp8Operands& out,
                                   const QuantOptions& opt) {
  Buffer storage_dx, storage_d;
  const Matrix dxw = written(*this, dx, storage_dx);
  if (!residual.data) {
    rmsnorm_backward(dy, x, w, rstd, dxw, dw);
  } else {
    const Matrix d = written(*this, Matrix{nullptr, dx.rows, dx.cols, dx.dtype}, storage_d);
    rmsnorm_backward(dy, x, w, rstd, d, dw);
    add(residual, d, dxw);
  }
  if (dx.rows == 0 || dx.cols == 0) return;  // nothing to quantize
  // The operands' view of dx: M rows of K = heads·D.
  const int64_t M = out.along.rows, K = out.along.cols;
  check(M * K == dx.rows * dx.cols && dx.cols > 0 && K % dx.cols == 0,
        "rmsnorm_backward_fp8: operands [" + std::to_string(M) + ", " + std::to_string(K) +
            "] are not a view of dx [" + std::to_string(dx.rows) + ", " + std::to_string(dx.cols) +
            "] as rows of whole groups");
  quantize_operands(*this, Matrix{dxw.data, M, K, dxw.dtype}, out, opt);
}

void Backend::swiglu_forward_fp8(const Matrix& gate, const Matrix& up, const Matrix& h,
                                 const Fp8Operands& out, const QuantOptions& opt) {
  Buffer storage;
  const Matrix hw = written(*this, h, storage);
  swiglu_forward(gate, up, hw);
  quantize_operands(*this, hw, out, opt);
}

namespace {

// The halves of a stacked gate/up projection gu [M, 2I] copied out into storage: gate, up.
std::pair<Matrix, Matrix> stacked_halves(Backend& be, const Matrix& gu, Buffer& storage) {
  check(gu.cols % 2 == 0 && gu.dtype != DType::fp8,
        "swiglu_forward_stacked: gu must be [M, 2I] f32 or bf16, got [" + std::to_string(gu.rows) +
            ", " + std::to_string(gu.cols) + "]");
  const int64_t M = gu.rows, I = gu.cols / 2;
  storage = be.alloc(static_cast<size_t>(M * gu.cols) * dtype_size(gu.dtype));
  const Matrix gate{storage.data(), M, I, gu.dtype},
      up{storage.as<uint8_t>() + static_cast<size_t>(M * I) * dtype_size(gu.dtype), M, I, gu.dtype};
  if (M > 0 && I > 0) {
    be.copy_columns(gu, 0, gate, 0, I);
    be.copy_columns(gu, I, up, 0, I);
  }
  return {gate, up};
}

}  // namespace

void Backend::add_rmsnorm_forward(const Matrix& x, const Matrix& r, const Matrix& w, float eps,
                                  const Matrix& y, float* rstd) {
  add(x, r, x);
  rmsnorm_forward(x, w, eps, y, rstd);
}

void Backend::add_rmsnorm_forward_fp8(const Matrix& x, const Matrix& r, const Matrix& w, float eps,
                                      const Matrix& y, float* rstd, const Fp8Operands& out,
                                      const QuantOptions& opt) {
  add(x, r, x);
  rmsnorm_forward_fp8(x, w, eps, y, rstd, out, opt);
}

void Backend::swiglu_forward_stacked(const Matrix& gu, const Matrix& h) {
  Buffer storage;
  const auto [gate, up] = stacked_halves(*this, gu, storage);
  swiglu_forward(gate, up, h);
}

void Backend::swiglu_forward_stacked_fp8(const Matrix& gu, const Matrix& h, const Fp8Operands& out,
                                         const QuantOptions& opt) {
  Buffer storage;
  const auto [gate, up] = stacked_halves(*this, gu, storage);
  swiglu_forward_fp8(gate, up, h, out, opt);
}

void Backend::attention_cached_fp8(const Matrix& q, const KvCacheView& cache,
                                   const int32_t* slot_ids, const int32_t* lengths, int64_t Hq,
                                   int64_t Hkv, const Matrix& o, const Fp8Operands& out,
                                   const QuantOptions& opt) {
  check(out.transposed.codes == nullptr,
        "attention_cached_fp8: o is a forward-only input (no transposed operand)");
  check(o.data || o.rows == 0 || o.cols == 0, "attention_cached_fp8: o must be written");
  attention_cached(q, cache, slot_ids, lengths, Hq, Hkv, o);
  quantize_operands(*this, o, out, opt);
}

void Backend::swiglu_backward_fp8(const Matrix& dh, const Matrix& gate, const Matrix& up,
                                  const Matrix& dgate, const Matrix& dup,
                                  const Fp8Operands& out_gate, const QuantOptions& opt_gate,
                                  const Fp8Operands& out_up, const QuantOptions& opt_up) {
  check(out_gate.transposed.codes && out_up.transposed.codes,
        "swiglu_backward_fp8: the gradients' operands need their transposed copies (wgrad)");
  Buffer storage_gate, storage_up;
  const Matrix dg = written(*this, dgate, storage_gate), du = written(*this, dup, storage_up);
  swiglu_backward(dh, gate, up, dg, du);
  quantize_operands(*this, dg, out_gate, opt_gate);
  quantize_operands(*this, du, out_up, opt_up);
}

namespace {
// Row `first` of a row-major matrix at data with cols columns of elem bytes.
template <class T>
T* row_at(T* data, int64_t first, int64_t cols, size_t elem) {
  using Byte = std::conditional_t<std::is_const_v<T>, const uint8_t, uint8_t>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(data) +
                              static_cast<size_t>(first * cols) * elem);
}
}  // namespace

int64_t check_grouped_rows(const char* op, const std::vector<int64_t>& rows, int64_t stacked_rows,
                           size_t per_group) {
  check(!rows.empty(), std::string(op) + ": no groups");
  check(per_group == rows.size(), std::string(op) + ": " + std::to_string(rows.size()) +
                                      " groups of rows but " + std::to_string(per_group) +
                                      " per-group operands");
  int64_t total = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    check(rows[g] >= 0, std::string(op) + ": group " + std::to_string(g) + " has " +
                            std::to_string(rows[g]) + " rows");
    total += rows[g];
  }
  check(total == stacked_rows, std::string(op) + ": the groups' rows sum to " +
                                   std::to_string(total) + ", the stacked operands have " +
                                   std::to_string(stacked_rows));
  return total;
}

void Backend::gemm_grouped(const Matrix& a, const std::vector<Matrix>& b, const Matrix& c,
                           const std::vector<int64_t>& rows, float beta) {
  check_grouped_rows("gemm_grouped", rows, a.rows, b.size());
  check(c.rows == a.rows,
        "gemm_grouped: c has " + std::to_string(c.rows) + " rows, a " + std::to_string(a.rows));
  int64_t first = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    const int64_t n = rows[g];
    if (n > 0)
      gemm(Matrix{row_at(a.data, first, a.cols, dtype_size(a.dtype)), n, a.cols, a.dtype}, b[g],
           Matrix{row_at(c.data, first, c.cols, dtype_size(c.dtype)), n, c.cols, c.dtype}, beta);
    first += n;
  }
}

void Backend::gemm_fp8_grouped(const Fp8Matrix& a, const std::vector<Fp8Matrix>& b, const Matrix& c,
                               const std::vector<int64_t>& rows, float beta) {
  check_grouped_rows("gemm_fp8_grouped", rows, a.rows, b.size());
  check(a.block == ScaleBlock::row1x128, "gemm_fp8_grouped: a must be 1x128 blocks");
  check(c.rows == a.rows,
        "gemm_fp8_grouped: c has " + std::to_string(c.rows) + " rows, a " + std::to_string(a.rows));
  const int64_t K = a.cols, kb = blocks_of(K);
  int64_t first = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    const int64_t n = rows[g];
    if (n > 0)
      gemm_fp8(Fp8Matrix{row_at(a.codes, first, K, 1), a.scale_inv + kb * first, n, K,
                         ScaleBlock::row1x128, a.format},
               b[g], Matrix{row_at(c.data, first, c.cols, dtype_size(c.dtype)), n, c.cols, c.dtype},
               beta);
    first += n;
  }
}

void Backend::group_scales(const Fp8Matrix& q, const std::vector<int64_t>& rows, float* out) {
  check_grouped_rows("group_scales", rows, q.rows, rows.size());
  check(q.block == ScaleBlock::row1x128, "group_scales: q must be 1x128 blocks");
  check(out != q.scale_inv, "group_scales: out must not be q's scales");
  const int64_t kb = blocks_of(q.cols), total = q.rows;
  int64_t first = 0;
  for (const int64_t n : rows) {
    if (n > 0)
      for (int64_t cb = 0; cb < kb; ++cb)
        copy(out + kb * first + cb * n, q.scale_inv + cb * total + first,
             static_cast<size_t>(n) * sizeof(float));
    first += n;
  }
}

void Backend::qkv_heads(const Matrix& qkv, int64_t hq, int64_t hkv, const Matrix& q_norm,
                        const Matrix& k_norm, float eps, const int32_t* positions,
                        const Rope& rope_rule, const Matrix& q, const Matrix& k, const Matrix& v) {
  check_qkv_heads_operands(qkv, hq, hkv, q_norm, k_norm, q, k, v);
  const int64_t M = qkv.rows, D = q.cols / hq;
  if (M == 0) return;
  const size_t es = dtype_size(qkv.dtype);
  // q and k: their columns, normalized per head (through a raw copy) or copied straight.
  auto head_part = [&](int64_t col, const Matrix& out, int64_t heads, const Matrix& w) {
    if (!w.data) {
      copy_columns(qkv, col, out, 0, out.cols);
      return;
    }
    const Buffer raw = alloc(static_cast<size_t>(M * out.cols) * es);
    const Buffer rstd = alloc(static_cast<size_t>(M * heads) * sizeof(float));
    copy_columns(qkv, col, Matrix{raw.data(), M, out.cols, qkv.dtype}, 0, out.cols);
    rmsnorm_forward(Matrix{raw.data(), M * heads, D, qkv.dtype}, w, eps,
                    Matrix{out.data, M * heads, D, out.dtype}, rstd.as<float>());
  };
  head_part(0, q, hq, q_norm);
  head_part(hq * D, k, hkv, k_norm);
  rope(q, hq, positions, rope_rule, false);
  rope(k, hkv, positions, rope_rule, false);
  copy_columns(qkv, (hq + hkv) * D, v, 0, v.cols);
}

void Backend::gemm_wgrad(const Matrix& dy, const Matrix& x, const Matrix& c, float beta) {
  check_gemm_wgrad_operands(dy, x, c, beta);
  const int64_t M = dy.rows, N = dy.cols, K = x.cols;
  const Buffer dyt = alloc(static_cast<size_t>(N * M) * dtype_size(dy.dtype));
  const Buffer xt = alloc(static_cast<size_t>(K * M) * dtype_size(x.dtype));
  transpose(dy, Matrix{dyt.data(), N, M, dy.dtype});
  transpose(x, Matrix{xt.data(), K, M, x.dtype});
  gemm(Matrix{dyt.data(), N, M, dy.dtype}, Matrix{xt.data(), K, M, x.dtype}, c, beta);
}

void Backend::gemm_wgrad_grouped(const Matrix& dy, const Matrix& x, const std::vector<Matrix>& c,
                                 const std::vector<int64_t>& rows) {
  check_grouped_rows("gemm_wgrad_grouped", rows, dy.rows, c.size());
  check(x.rows == dy.rows && x.dtype == dy.dtype,
        "gemm_wgrad_grouped: dy and x must have the same rows and dtype");
  const int64_t N = dy.cols, K = x.cols;
  int64_t first = 0;
  for (size_t g = 0; g < rows.size(); ++g) {
    const int64_t n = rows[g];
    if (n > 0)
      gemm_wgrad(Matrix{row_at(dy.data, first, N, dtype_size(dy.dtype)), n, N, dy.dtype},
                 Matrix{row_at(x.data, first, K, dtype_size(x.dtype)), n, K, x.dtype}, c[g], 1.0f);
    first += n;
  }
}

void Backend::gemm_fp8_wgrad_grouped(const std::vector<Fp8Matrix>& a,
                                     const std::vector<Fp8Matrix>& b,
                                     const std::vector<Matrix>& c) {
  check(a.size() == b.size() && a.size() == c.size(),
        "gemm_fp8_wgrad_grouped: " + std::to_string(a.size()) + " dY operands, " +
            std::to_string(b.size()) + " X operands, " + std::to_string(c.size()) + " outputs");
  for (size_t g = 0; g < a.size(); ++g)
    if (a[g].cols > 0) gemm_fp8(a[g], b[g], c[g], 1.0f);
}

namespace {
[[noreturn]] void missing_op(const Backend& be, const char* op) {
  throw Error("the " + be.name() + " backend has no " + op +
              " (multi-head latent attention runs on the backends that implement it)");
}
}  // namespace

void Backend::copy_columns(const Matrix&, int64_t, const Matrix&, int64_t, int64_t) {
  missing_op(*this, "copy_columns");
}
void Backend::rope_columns(const Matrix&, int64_t, int64_t, int64_t, int64_t, const int32_t*,
                           const Rope&, bool) {
  missing_op(*this, "rope_columns");
}
void Backend::mla_attention_forward(const Matrix&, const Matrix&, const Matrix&, int64_t, int64_t,
                                    const MlaDims&, float, const Matrix&, float*) {
  missing_op(*this, "mla_attention_forward");
}
void Backend::mla_attention_backward(const Matrix&, const Matrix&, const Matrix&, const Matrix&,
                                     const Matrix&, const float*, int64_t, int64_t, const MlaDims&,
                                     float, const Matrix&, const Matrix&, const Matrix&) {
  missing_op(*this, "mla_attention_backward");
}
void Backend::mla_cache_write(const Matrix&, const Matrix&, const int32_t*, const int32_t*,
                              const MlaDims&, const KvCacheView&) {
  missing_op(*this, "mla_cache_write");
}
void Backend::mla_attention_cached(const Matrix&, const Matrix&, const KvCacheView&, const int32_t*,
                                   const int32_t*, const MlaDims&, float, const Matrix&) {
  missing_op(*this, "mla_attention_cached");
}

double QuantStats::relative_error() const {
  return ref_sq > 0 ? std::sqrt(err_sq / ref_sq) : 0.0;
}

QuantStats QuantStatsSum::stats() const {
  QuantStats s;
  s.elements = static_cast<int64_t>(elements);
  s.blocks = static_cast<int64_t>(blocks);
  s.saturated = static_cast<int64_t>(saturated);
  s.flushed_to_zero = static_cast<int64_t>(flushed_to_zero);
  s.degenerate_blocks = static_cast<int64_t>(degenerate_blocks);
  s.err_sq = err_sq;
  s.ref_sq = ref_sq;
  return s;
}

QuantStatsSum& QuantStatsSum::operator+=(const QuantStats& s) {
  elements += static_cast<unsigned long long>(s.elements);
  blocks += static_cast<unsigned long long>(s.blocks);
  saturated += static_cast<unsigned long long>(s.saturated);
  flushed_to_zero += static_cast<unsigned long long>(s.flushed_to_zero);
  degenerate_blocks += static_cast<unsigned long long>(s.degenerate_blocks);
  err_sq += s.err_sq;
  ref_sq += s.ref_sq;
  return *this;
}

QuantStats& QuantStats::operator+=(const QuantStats& o) {
  elements += o.elements;
  blocks += o.blocks;
  saturated += o.saturated;
  flushed_to_zero += o.flushed_to_zero;
  degenerate_blocks += o.degenerate_blocks;
  err_sq += o.err_sq;
  ref_sq += o.ref_sq;
  return *this;
}

namespace {
std::string shape(const char* name, int64_t r, int64_t c) {
  return std::string(name) + " [" + std::to_string(r) + ", " + std::to_string(c) + "]";
}

// The shape checks of a product c [rows, cols] of operands a and b (shapes as shape() writes
// them), contracted: whether their contracted sizes agree.
void check_product_shapes(const char* op, const std::string& a, const std::string& b,
                          bool contracted, const Matrix& c, int64_t rows, int64_t cols) {
  check(contracted, std::string(op) + ": contracted sizes differ: " + a + " vs " + b);
  check(c.rows == rows && c.cols == cols,
        std::string(op) + ": output " + shape("c", c.rows, c.cols) + " must be [" +
            std::to_string(rows) + ", " + std::to_string(cols) + "]");
}

// Inputs of one float dtype (f32 or bf16) for a BF16 / FP32 product.
void check_float_inputs(const char* op, DType a, DType b) {
  check(a == b && a != DType::fp8, std::string(op) +
                                       ": inputs must both be f32 or both bf16, got " +
                                       dtype_name(a) + " and " + dtype_name(b));
}

// A product's output: f32 or bf16, and f32 when it accumulates (beta != 0).
void check_product_output(const char* op, const Matrix& c, float beta) {
  check(c.dtype != DType::fp8, std::string(op) + ": output must be f32 or bf16");
  check(c.dtype == DType::f32 || beta == 0.0f, std::string(op) + ": beta != 0 needs an f32 output");
}
}  // namespace

void check_gemm_operands(const Matrix& a, const Matrix& b, const Matrix& c, float beta) {
  check_product_shapes("gemm", shape("a", a.rows, a.cols), shape("b", b.rows, b.cols),
                       a.cols == b.cols, c, a.rows, b.rows);
  check_float_inputs("gemm", a.dtype, b.dtype);
  check_product_output("gemm", c, beta);
}

void check_gemm_fp8_operands(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) {
  check_product_shapes("gemm_fp8", shape("a", a.rows, a.cols), shape("b", b.rows, b.cols),
                       a.cols == b.cols, c, a.rows, b.rows);
  check(a.format == b.format, "gemm_fp8: operands in different FP8 formats");
  check_product_output("gemm_fp8", c, beta);
}

void check_gemm_wgrad_operands(const Matrix& dy, const Matrix& x, const Matrix& c, float beta) {
  check_product_shapes("gemm_wgrad", shape("dy", dy.rows, dy.cols), shape("x", x.rows, x.cols),
                       dy.rows == x.rows, c, dy.cols, x.cols);
  check_float_inputs("gemm_wgrad", dy.dtype, x.dtype);
  check_product_output("gemm_wgrad", c, beta);
}

void check_qkv_heads_operands(const Matrix& qkv, int64_t hq, int64_t hkv, const Matrix& q_norm,
                              const Matrix& k_norm, const Matrix& q, const Matrix& k,
                              const Matrix& v) {
  check(hq > 0 && hkv > 0 && q.cols % hq == 0, "qkv_heads: " + std::to_string(hq) + " query and " +
                                                   std::to_string(hkv) + " key/value heads for " +
                                                   shape("q", q.rows, q.cols));
  const int64_t M = qkv.rows, D = q.cols / hq;
  check(q.rows == M && k.rows == M && v.rows == M && k.cols == hkv * D && v.cols == hkv * D &&
            qkv.cols == (hq + 2 * hkv) * D,
        "qkv_heads: " + shape("qkv", qkv.rows, qkv.cols) + " is not q " +
            shape("", q.rows, q.cols) + ", k " + shape("", k.rows, k.cols) + " and v " +
            shape("", v.rows, v.cols) + " side by side (heads of " + std::to_string(D) + ")");
  check(q.dtype == qkv.dtype && k.dtype == qkv.dtype && v.dtype == qkv.dtype &&
            qkv.dtype != DType::fp8,
        "qkv_heads: qkv, q, k and v must share one dtype (f32 or bf16)");
  check((q_norm.data == nullptr) == (k_norm.data == nullptr),
        "qkv_heads: the QK-norm needs both norm weights or neither");
  if (q_norm.data)
    check(q_norm.rows == 1 && q_norm.cols == D && k_norm.rows == 1 && k_norm.cols == D,
          "qkv_heads: norm weights must be [1, " + std::to_string(D) + "]");
}

void check_quantize_operands(const Matrix& x, const Fp8Matrix& out) {
  check(x.rows == out.rows && x.cols == out.cols, "quantize: " + shape("input", x.rows, x.cols) +
                                                      " vs " + shape("output", out.rows, out.cols));
  check(x.dtype != DType::fp8, "quantize: input must be f32 or bf16");
  check(x.rows >= 0 && x.cols >= 0, "quantize: negative shape");
}

}  // namespace fp8rl
