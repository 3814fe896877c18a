// Linears that read one input — a layer's q, k and v projections; its gate and up — run as one GEMM
// where only their outputs are wanted (the prefill and decode steps of generation). At decode's few
// rows a GEMM costs about the same whatever its width (round 5 on an H100: k or v's 4 MB of FP8
// tiles took as long as q's 16 MB), so one launch over the stacked weight replaces two or three.
#pragma once

#include <optional>
#include <vector>

#include "model/linear.hpp"
#include "model/tensor.hpp"

namespace fp8rl {

// The members stay separate linears (parameters, names, precisions, telemetry, checkpoints);
// their compute copies of W live in one buffer here, one above the other — [Σ out, in] in bf16,
// or FP8 128x128 tiles whose scales stack as whole tile rows (Linear::place_weight) — so the
// stack costs no memory and every refresh of a member remakes its rows in place.
class FusedLinears {
 public:
  // members: at least one, all reading inputs of one width.
  FusedLinears(Backend& be, std::vector<Linear*> members);

  // Places the members' compute copies in a stack of their precision (after a change of
  // precision, which gives each member its own copies back; nothing to do while they stack);
  // drops the stack when they cannot stack: not one shared precision of bf16 or fp8, FP8 formats
  // or scale rules that differ, or an FP8 member before the last whose rows are not whole
  // 128-row tiles (its last tile row would share scales with the next member's rows).
  void refresh();
  // Whether every member's compute copy is its rows of the stack (false after a member's
  // precision changed, until refresh()).
  bool stacked() const;
  // Bytes of the stack (0 without one): the members' compute copies, not a second copy.
  size_t bytes() const;

  // y [M, Σ out] = x·[W_0; W_1; ...]ᵀ, the members' outputs side by side, in one GEMM of their
  // precision (the same per-element products as each member's, bit for bit on the CPU, whose
  // GEMM fixes every element's order whatever the width) and true — when stacked(), x has rows
  // and no member's quantizations are observed; otherwise false, nothing done.
  bool forward_stacked(LinearInput& x, const Matrix& y);
  // Whether forward_stacked runs on x (stacked(), x has rows, no member observed): asked first,
  // a caller makes the stacked output only when it will be written.
  bool runs_stacked(const LinearInput& x) const;
  // ys[i] [M, out_i] = x·W_iᵀ for every member i (one dtype, f32 or bf16): forward_stacked and a
  // column copy into each ys[i], or member i's forward(x, ys[i]).
  void forward(LinearInput& x, const std::vector<Matrix>& ys);
  int64_t out_features() const { return rows_; }  // Σ out

 private:
  Backend& be_;
  std::vector<Linear*> members_;
  int64_t rows_ = 0;            // Σ out
  std::vector<int64_t> first_;  // member i's first row in the stack
  std::optional<Tensor> bf16_;
  std::optional<Fp8Tensor> fp8_;
  Matrix bf16_rows(size_t i) const;
  Fp8Matrix fp8_rows(size_t i) const;
  bool in_stack(size_t i) const;  // member i's compute copy is its rows of the stack
};

}  // namespace fp8rl
