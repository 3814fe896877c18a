// CudaBackend::qkv_heads: a generation step's heads from the stacked q/k/v projection in one
// pass (kernels/qkv_heads.cuh); head dims it does not take run Backend::qkv_heads' default.
#include <cuda_runtime.h>

#include <climits>

#include "cuda_backend.hpp"
#include "cuda_check.hpp"
#include "ops_common.cuh"
#include "qkv_heads.cuh"

namespace fp8rl {

void CudaBackend::qkv_heads(const Matrix& qkv, int64_t hq, int64_t hkv, const Matrix& q_norm,
                            const Matrix& k_norm, float eps, const int32_t* positions,
                            const Rope& rope, const Matrix& q, const Matrix& k, const Matrix& v) {
  const OpScope scope(*this, "qkv_heads");
  check_qkv_heads_operands(qkv, hq, hkv, q_norm, k_norm, q, k, v);
  if (qkv.rows == 0) return;
  const char* op = "qkv_heads";
  cuda::check_data(op, "qkv", qkv.data);
  cuda::check_data(op, "positions", positions);
  cuda::check_data(op, "q", q.data);
  cuda::check_data(op, "k", k.data);
  cuda::check_data(op, "v", v.data);
  check(hq + 2 * hkv <= INT_MAX, "qkv_heads: too many heads");
  make_current();
  if (qkv_heads_kernels::launch_qkv_heads(qkv, hq, hkv, q_norm, k_norm, eps, positions, rope, q, k,
                                          v, stream_, sm_count_))
    return;
  Backend::qkv_heads(qkv, hq, hkv, q_norm, k_norm, eps, positions, rope, q, k, v);
}

}  // namespace fp8rl
