#include "model/fused_linears.hpp"

#include <string>

#include "core/error.hpp"

namespace fp8rl {

FusedLinears::FusedLinears(Backend& be, std::vector<Linear*> members)
    : be_(be), members_(std::move(members)) {
  check(!members_.empty(), "fused linears: no members");
  for (const Linear* l : members_) {
    check(l != nullptr, "fused linears: a null member");
    check(l->in_features() == members_[0]->in_features(), "fused linears: " + l->weight().name +
                                                              " reads another input width than " +
                                                              members_[0]->weight().name);
    first_.push_back(rows_);
    rows_ += l->out_features();
  }
}

// Member i's rows of the stack: bf16 [out_i, in], or its 128x128 tiles (whole tile rows: the
// members before it have whole 128-row tiles).
Matrix FusedLinears::bf16_rows(size_t i) const {
  const int64_t K = members_[0]->in_features();
  return Matrix{bf16_->buf.as<uint8_t>() + static_cast<size_t>(first_[i] * K) * 2,
                members_[i]->out_features(), K, DType::bf16};
}

Fp8Matrix FusedLinears::fp8_rows(size_t i) const {
  const int64_t K = members_[0]->in_features();
  return Fp8Matrix{fp8_->q.codes + first_[i] * K,
                   fp8_->q.scale_inv + scale_count(ScaleBlock::tile128x128, first_[i], K),
                   members_[i]->out_features(),
                   K,
                   ScaleBlock::tile128x128,
                   fp8_->q.format};
}

void FusedLinears::refresh() {
  const Linear& a = *members_[0];
  const Precision p = a.precision();
  bool ok = p == Precision::bf16 || p == Precision::fp8;
  for (size_t i = 0; ok && i < members_.size(); ++i) {
    const Linear& l = *members_[i];
    ok = l.precision() == p;
    if (ok && p == Precision::fp8)
      ok = l.quant_options().format == a.quant_options().format &&
           l.quant_options().pow2_scales == a.quant_options().pow2_scales &&
           (i + 1 == members_.size() || l.out_features() % kBlock == 0);
  }
  if (!ok) {
    // Members still in the stack take their own copies back before it goes (those whose
    // precision changed own theirs already).
    for (size_t i = 0; i < members_.size(); ++i)
      if (in_stack(i)) members_[i]->place_weight({}, {});
    bf16_.reset();
    fp8_.reset();
    return;
  }
  if (stacked()) return;  // every member's copy already lives in the stack, remade in place
  const int64_t K = a.in_features();
  if (p == Precision::bf16) {
    fp8_.reset();
    bf16_ = Tensor::make(be_, rows_, K, DType::bf16);
    for (size_t i = 0; i < members_.size(); ++i) members_[i]->place_weight(bf16_rows(i), {});
  } else {
    bf16_.reset();
    fp8_ = Fp8Tensor::make(be_, rows_, K, ScaleBlock::tile128x128, a.quant_options().format);
    for (size_t i = 0; i < members_.size(); ++i) members_[i]->place_weight({}, fp8_rows(i));
  }
}

bool FusedLinears::in_stack(size_t i) const {
  const Linear& l = *members_[i];
  if (bf16_)
    return l.precision() == Precision::bf16 && l.bf16_weight() &&
           l.bf16_weight()->data == bf16_rows(i).data;
  return fp8_ && l.precision() == Precision::fp8 && l.fp8_weight() &&
         l.fp8_weight()->codes == fp8_rows(i).codes;
}

bool FusedLinears::stacked() const {
  if (!bf16_ && !fp8_) return false;
  for (size_t i = 0; i < members_.size(); ++i)
    if (!in_stack(i)) return false;
  return true;
}

size_t FusedLinears::bytes() const {
  if (bf16_) return bf16_->buf.bytes();
  if (fp8_) return fp8_->codes.bytes() + fp8_->scales.bytes();
  return 0;
}

bool FusedLinears::runs_stacked(const LinearInput& x) const {
  if (!stacked() || x.x().rows == 0) return false;
  for (const Linear* l : members_)
    if (l->observed()) return false;
  return true;
}

bool FusedLinears::forward_stacked(LinearInput& x, const Matrix& y) {
  const int64_t M = x.x().rows;
  check(y.rows == M && y.cols == rows_, "fused linears: the stacked output must be [" +
                                            std::to_string(M) + ", " + std::to_string(rows_) + "]");
  if (!runs_stacked(x)) return false;
  const Matrix w16 = bf16_ ? bf16_->m() : Matrix{};
  members_[0]->forward_with(x, bf16_ ? &w16 : nullptr, fp8_ ? &fp8_->q : nullptr, y);
  return true;
}

void FusedLinears::forward(LinearInput& x, const std::vector<Matrix>& ys) {
  check(ys.size() == members_.size(), "fused linears: " + std::to_string(ys.size()) +
                                          " outputs for " + std::to_string(members_.size()) +
                                          " linears");
  const int64_t M = x.x().rows;
  for (size_t i = 0; i < members_.size(); ++i)
    check(
        ys[i].rows == M && ys[i].cols == members_[i]->out_features() && ys[i].dtype == ys[0].dtype,
        "fused linears: output " + std::to_string(i) + " is not [" + std::to_string(M) + ", " +
            std::to_string(members_[i]->out_features()) + "] of the first output's dtype");
  if (!runs_stacked(x)) {  // decided first: the stacked output is made only to be used
    for (size_t i = 0; i < members_.size(); ++i) members_[i]->forward(x, ys[i]);
    return;
  }
  const Tensor y = Tensor::make(be_, M, rows_, ys[0].dtype);
  forward_stacked(x, y.m());
  int64_t col = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    be_.copy_columns(y.m(), col, ys[i], 0, ys[i].cols);
    col += ys[i].cols;
  }
}

}  // namespace fp8rl
