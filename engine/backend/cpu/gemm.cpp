// CPU reference GEMMs: inputs are read as the FP32 values they stand for — BF16 widened, FP8
// dequantized exactly as the formats define them — by the backend's GEMM (sgemm.hpp: one fixed
// order of operations per element, so results do not depend on the batch layout, the thread
// count or the CPU). The conversion happens while the GEMM packs its operands; there is no
// separate pass over the matrices and no FP32 copy of them.
#include "backend/cpu/cpu_backend.hpp"
#include "backend/cpu/sgemm.hpp"
#include "core/error.hpp"
#include "fp8/codec.hpp"

namespace fp8rl {
namespace {

CpuGemmOperand operand(const Matrix& m) {
  CpuGemmOperand op;
  op.kind = m.dtype == DType::f32 ? CpuGemmOperand::Kind::f32 : CpuGemmOperand::Kind::bf16;
  op.data = m.data;
  op.rows = m.rows;
  op.cols = m.cols;
  return op;
}

CpuGemmOperand operand(const Fp8Matrix& q) {
  CpuGemmOperand op;
  op.kind = CpuGemmOperand::Kind::fp8;
  op.data = q.codes;
  op.rows = q.rows;
  op.cols = q.cols;
  op.scale_inv = q.scale_inv;
  op.table = fp8_table(q.format);
  op.block = q.block;
  return op;
}

}  // namespace

std::string cpu_gemm_description() {
  std::string paths;
  for (CpuGemmPath p : cpu_gemm_paths())
    paths += std::string(paths.empty() ? "" : ", ") + cpu_gemm_path_name(p);
  return std::string("built-in FP32 GEMM, ") + cpu_gemm_path_name(cpu_gemm_default_path()) +
         " path (this CPU: " + paths + "; every path gives the same bits)";
}

void CpuBackend::gemm(const Matrix& a, const Matrix& b, const Matrix& c, float beta) {
  check_gemm_operands(a, b, c, beta);
  cpu_gemm_nt(a.rows, b.rows, a.cols, operand(a), operand(b), beta, c.data, c.dtype == DType::bf16,
              cpu_gemm_default_path());
}

void CpuBackend::gemm_fp8(const Fp8Matrix& a, const Fp8Matrix& b, const Matrix& c, float beta) {
  check_gemm_fp8_operands(a, b, c, beta);
  cpu_gemm_nt(a.rows, b.rows, a.cols, operand(a), operand(b), beta, c.data, c.dtype == DType::bf16,
              cpu_gemm_default_path());
}

}  // namespace fp8rl
