// fp8rl bench attention: causal grouped-query attention forward and backward at one head shape,
// for several sequence lengths, in TFLOP/s, on each kernel a backend offers (the CUDA backend's
// FP32 kernels and its tensor-core kernels, kernel option attention_mma) with the ratios and the
// two kernels' difference, in one run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <utility>

#include "bench.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"

namespace fp8rl::cli::bench {
namespace {

std::vector<float> download_bf16(Backend& be, const Buffer& b, int64_t n) {
  std::vector<bf16> h(static_cast<size_t>(n));
  be.download(h.data(), b.data(), h.size() * sizeof(bf16));
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = bf16_to_float(h[i]);
  return out;
}

// ‖x − y‖ / ‖y‖ (0 when both are zero).
double relative_difference(const std::vector<float>& x, const std::vector<float>& y) {
  double d = 0, n = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    d += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    n += double(y[i]) * y[i];
  }
  return n > 0 ? std::sqrt(d / n) : std::sqrt(d);
}

}  // namespace

Json bench_attention(Backend& be, const AttentionOptions& o) {
  check(!o.seq_lens.empty(), "--seq-lens: no sequence length given");
  check(o.tokens > 0 && o.heads_q > 0 && o.heads_kv > 0 && o.heads_q % o.heads_kv == 0 &&
            o.head_dim > 0,
        "bench attention: bad shape");
  const int64_t Hq = o.heads_q, Hkv = o.heads_kv, D = o.head_dim;
  std::printf("backend %s: %s\n", be.name().c_str(), be.device().c_str());
  std::printf(
      "causal GQA attention, BF16, %lld query / %lld kv heads of %lld; B = max(1, %lld / T) "
      "sequences of T tokens\n"
      "FLOPs (causal, FlashAttention's convention): forward 4·B·Hq·T²·D / 2, backward 2.5x the "
      "forward\n",
      (long long)Hq, (long long)Hkv, (long long)D, (long long)o.tokens);
  Json run = backend_json(be);
  run["heads_q"] = Hq;
  run["heads_kv"] = Hkv;
  run["head_dim"] = D;
  run["tokens"] = o.tokens;
  run["flops"] = "forward 4*B*Hq*T^2*D/2 (causal), backward 2.5x forward";

  // The kernels: the backend's own, or with kernel options both of CUDA's (attention_mma).
  const bool options = !be.kernel_options().empty();
  struct Kernel {
    const char* name;  // "": the backend's only kernels
    int64_t mma;       // attention_mma's value; 0: the backend's default
  };
  std::vector<Kernel> kernels;
  if (options)
    kernels = {{"fp32", 2}, {"mma", 1}};
  else
    kernels = {{"", 0}};
  std::printf("%6s %4s", "T", "B");
  for (const Kernel& k : kernels)
    for (const char* pass : {"fwd", "bwd"}) {
      const std::string name = *k.name ? std::string(k.name) + " " + pass : pass;
      std::printf(" %10s %10s", (name + " ms").c_str(), (name + " TF/s").c_str());
    }
  if (options) std::printf(" %8s %8s %10s", "fwd x", "bwd x", "mma diff");
  std::printf("\n");
  std::fflush(stdout);

  Json::Array rows;
  Rng rng(4242);
  for (int64_t T : o.seq_lens) {
    const int64_t B = std::max<int64_t>(1, o.tokens / T), rows_n = B * T;
    Buffer q = upload_random_bf16(be, rows_n * Hq * D, rng),
           k = upload_random_bf16(be, rows_n * Hkv * D, rng),
           v = upload_random_bf16(be, rows_n * Hkv * D, rng),
           dout = upload_random_bf16(be, rows_n * Hq * D, rng);
    Buffer out = be.alloc(static_cast<size_t>(rows_n * Hq * D) * 2),
           lse = be.alloc(static_cast<size_t>(B * Hq * T) * 4),
           dq = be.alloc(static_cast<size_t>(rows_n * Hq * D) * 2),
           dk = be.alloc(static_cast<size_t>(rows_n * Hkv * D) * 2),
           dv = be.alloc(static_cast<size_t>(rows_n * Hkv * D) * 2);
    auto m = [](const Buffer& b, int64_t r, int64_t c) {
      return Matrix{b.data(), r, c, DType::bf16};
    };
    const Matrix Q = m(q, rows_n, Hq * D), K = m(k, rows_n, Hkv * D), V = m(v, rows_n, Hkv * D),
                 O = m(out, rows_n, Hq * D), dO = m(dout, rows_n, Hq * D),
                 dQ = m(dq, rows_n, Hq * D), dK = m(dk, rows_n, Hkv * D),
                 dV = m(dv, rows_n, Hkv * D);
    auto* L = lse.as<float>();
    const double fwd_flops = 4.0 * B * Hq * double(T) * T * D / 2, bwd_flops = 2.5 * fwd_flops;

    Json row;
    row["T"] = T;
    row["B"] = B;
    std::printf("%6lld %4lld", (long long)T, (long long)B);
    std::vector<double> t_fwd, t_bwd;
    std::vector<std::vector<float>> outputs;  // o, dq, dk, dv of each kernel, concatenated
    for (const Kernel& kern : kernels) {
      const OptionGuard guard(be, "attention_mma", kern.mma);
      check(kern.mma == 0 || guard.ok(),
            "bench attention: the backend has kernel options but no attention_mma");
      // The backward reads the o and lse of the same kernel's forward (its last call).
      t_fwd.push_back(time_op(
          be, [&] { be.attention_forward(Q, K, V, B, T, Hq, Hkv, O, L); }, o.seconds, 3));
      t_bwd.push_back(time_op(
          be, [&] { be.attention_backward(dO, Q, K, V, O, L, B, T, Hq, Hkv, dQ, dK, dV); },
          o.seconds, 3));
      const std::string suffix = *kern.name ? std::string("_") + kern.name : "";
      for (const auto& [pass, t, flops] : {std::make_tuple("forward", t_fwd.back(), fwd_flops),
                                           std::make_tuple("backward", t_bwd.back(), bwd_flops)}) {
        row[pass + suffix + "_ms"] = number(t * 1e3);
        row[pass + suffix + "_tflops"] = number(flops / t / 1e12);
        std::printf(" %10.3f %10.3g", t * 1e3, flops / t / 1e12);
      }
      std::fflush(stdout);
      if (options) {
        std::vector<float> all;
        for (const auto& [b, n] :
             {std::make_pair(&out, rows_n * Hq * D), std::make_pair(&dq, rows_n * Hq * D),
              std::make_pair(&dk, rows_n * Hkv * D), std::make_pair(&dv, rows_n * Hkv * D)}) {
          const std::vector<float> part = download_bf16(be, *b, n);
          all.insert(all.end(), part.begin(), part.end());
        }
        outputs.push_back(std::move(all));
      }
    }
    if (options) {
      // ‖mma − fp32‖ / ‖fp32‖ over o, dq, dk, dv together: the tensor cores' BF16 rounding of P
      // and dS (the op cases bound it by 1e-2 per output against the CPU).
      const double diff = relative_difference(outputs[1], outputs[0]);
      row["mma_forward_speedup"] = number(t_fwd[0] / t_fwd[1]);
      row["mma_backward_speedup"] = number(t_bwd[0] / t_bwd[1]);
      row["mma_vs_fp32_rel_diff"] = number(diff);
      std::printf(" %7.2fx %7.2fx %10.1e", t_fwd[0] / t_fwd[1], t_bwd[0] / t_bwd[1], diff);
    }
    std::printf("\n");
    std::fflush(stdout);
    rows.push_back(row);
  }
  if (options)
    std::printf(
        "fp32: the FP32 kernels (attention_mma = 2, the default), mma: the tensor-core kernels "
        "(attention_mma = 1); x: fp32 ms / mma ms; mma diff: |o,dq,dk,dv (mma) - (fp32)| / "
        "|(fp32)|.\nTarget: mma bwd >= 200 TF/s at T >= 1024 (FlashAttention-2: 214-322 on "
        "an H100).\n");
  std::printf("\n");
  run["rows"] = rows;
  return run;
}

}  // namespace fp8rl::cli::bench
