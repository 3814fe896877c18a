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
    rows_ += l->out_features();
  }
}

void FusedLinears::refresh() {
  versions_.clear();
  const Linear& a = *members_[0];
  const Precision p = a.precision();
  bool ok = p == Precision::bf16 || p == Precision::fp8;
  for (size_t i = 0; ok && i < members_.size(); ++i) {
    const Linear& l = *members_[i];
    ok = l.precision() == p &&
         (p == Precision::bf16 ? l.bf16_weight() != nullptr : l.fp8_weight() != nullptr);
    if (ok && p == Precision::fp8)
      ok = l.quant_options().format == a.quant_options().format &&
           l.quant_options().pow2_scales == a.quant_options().pow2_scales &&
           (i + 1 == members_.size() || l.out_features() % kBlock == 0);
  }
  const int64_t K = a.in_features();
  if (!ok) {
    bf16_.reset();
    fp8_.reset();
    return;
  }
  int64_t row = 0;
  if (p == Precision::bf16) {
    fp8_.reset();
    if (!bf16_) bf16_ = Tensor::make(be_, rows_, K, DType::bf16);
    for (const Linear* l : members_) {
      const size_t bytes = static_cast<size_t>(l->out_features() * K) * 2;
      be_.copy(bf16_->buf.as<uint8_t>() + static_cast<size_t>(row * K) * 2,
               l->bf16_weight()->buf.data(), bytes);
      row += l->out_features();
    }
  } else {
    bf16_.reset();
    const Fp8Format f = a.quant_options().format;
    if (!fp8_ || fp8_->q.format != f)
      fp8_ = Fp8Tensor::make(be_, rows_, K, ScaleBlock::tile128x128, f);
    for (const Linear* l : members_) {
      const Fp8Matrix& w = l->fp8_weight()->q;
      const int64_t N = l->out_features();
      be_.copy(fp8_->q.codes + row * K, w.codes, static_cast<size_t>(N * K));
      // Whole tile rows: the member's scales follow the previous members' tile rows.
      be_.copy(fp8_->q.scale_inv + scale_count(ScaleBlock::tile128x128, row, K), w.scale_inv,
               static_cast<size_t>(scale_count(ScaleBlock::tile128x128, N, K)) * sizeof(float));
      row += N;
    }
  }
  for (const Linear* l : members_) versions_.push_back(l->compute_version());
}

bool FusedLinears::stacked() const {
  if (!bf16_ && !fp8_) return false;
  for (size_t i = 0; i < members_.size(); ++i)
    if (members_[i]->compute_version() != versions_[i]) return false;
  return true;
}

size_t FusedLinears::bytes() const {
  if (bf16_) return bf16_->buf.bytes();
  if (fp8_) return fp8_->codes.bytes() + fp8_->scales.bytes();
  return 0;
}

bool FusedLinears::forward_stacked(LinearInput& x, const Matrix& y) {
  const int64_t M = x.x().rows;
  check(y.rows == M && y.cols == rows_, "fused linears: the stacked output must be [" +
                                            std::to_string(M) + ", " + std::to_string(rows_) + "]");
  if (!stacked() || M == 0) return false;
  for (const Linear* l : members_)
    if (l->observed()) return false;
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
  const Tensor y = Tensor::make(be_, M, rows_, ys[0].dtype);
  if (!forward_stacked(x, y.m())) {
    for (size_t i = 0; i < members_.size(); ++i) members_[i]->forward(x, ys[i]);
    return;
  }
  int64_t col = 0;
  for (size_t i = 0; i < members_.size(); ++i) {
    be_.copy_columns(y.m(), col, ys[i], 0, ys[i].cols);
    col += ys[i].cols;
  }
}

}  // namespace fp8rl
