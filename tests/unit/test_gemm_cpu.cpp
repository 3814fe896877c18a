// CPU GEMMs: the FP32 kernel's fixed order of operations, bit for bit, on every instruction-set
// path; BF16 and FP8 operands converted while packing equal the FP32 GEMM of their values; FP8
// against FP64 of the dequantized inputs (the same math: ≤ 1e-6) and against FP64 of the
// unquantized inputs (within a bound derived from E4M3's precision); BF16 and errors.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend_registry.hpp"
#include "backend/cpu/sgemm.hpp"
#include "core/bf16.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "fp8/codec.hpp"

using namespace fp8rl;

namespace {

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  Fp8Matrix m;
};

Quantized quantize(Backend& be, std::vector<float>& x, int64_t rows, int64_t cols, ScaleBlock b) {
  Quantized q;
  q.codes.resize(rows * cols);
  q.scales.resize(scale_count(b, rows, cols));
  q.m = Fp8Matrix{q.codes.data(), q.scales.data(), rows, cols, b};
  be.quantize(Matrix{x.data(), rows, cols, DType::f32}, q.m, {}, nullptr);
  return q;
}

double deq(const Fp8Matrix& q, int64_t r, int64_t c) {
  return double(e4m3_to_float(q.codes[r * q.cols + c])) *
         q.scale_inv[scale_index(q.block, q.rows, q.cols, r, c)];
}

std::vector<float> random(Rng& rng, int64_t n) {
  std::vector<float> v(n);
  for (auto& x : v) x = float(rng.normal() * (rng.uniform() < 0.01 ? 20 : 1));
  return v;
}

// The kernel's contract (sgemm.hpp), written as plainly as possible: for each element,
// acc = beta·C (or 0), then acc = acc + a·b in index order, each step rounded to FP32.
void reference_sgemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B, float beta,
                     float* C) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = beta == 0.0f ? 0.0f : beta * C[i * N + j];
      for (int64_t k = 0; k < K; ++k) {
        const float prod = A[i * K + k] * B[j * K + k];
        acc = acc + prod;
      }
      C[i * N + j] = acc;
    }
}

// FP32 unit roundoff: the error bound of a sum of n rounded terms is about n·u·Σ|terms|.
constexpr double kU32 = 0x1p-24;

}  // namespace

class TestGemmCpu : public QObject {
  Q_OBJECT
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();

 private slots:
  void fp8FpropAgainstFp64() {
    Rng rng(3);
    const int64_t M = 96, N = 80, K = 515;  // K not a multiple of 128
    auto x = random(rng, M * K), w = random(rng, N * K);
    const auto qx = quantize(*cpu_, x, M, K, ScaleBlock::row1x128);
    const auto qw = quantize(*cpu_, w, N, K, ScaleBlock::tile128x128);
    std::vector<float> y(M * N);
    cpu_->gemm_fp8(qx.m, qw.m, Matrix{y.data(), M, N, DType::f32}, 0.0f);

    double num = 0, den = 0;
    const double u = 0x1p-4;  // E4M3 unit roundoff (3 mantissa bits)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double same = 0, exact = 0, bound = 0, abs_sum = 0;
        for (int64_t k = 0; k < K; ++k) {
          same += deq(qx.m, i, k) * deq(qw.m, j, k);
          exact += double(x[i * K + k]) * w[j * K + k];
          // |x − x̂| ≤ max(u·|x|, half the smallest subnormal step scaled back) per operand.
          const double ax = std::fabs(x[i * K + k]), aw = std::fabs(w[j * K + k]);
          const double ex =
              std::max(u * ax, 0x1p-10 * qx.m.scale_inv[scale_index(qx.m.block, M, K, i, k)]);
          const double ew =
              std::max(u * aw, 0x1p-10 * qw.m.scale_inv[scale_index(qw.m.block, N, K, j, k)]);
          bound += (ax + ex) * (aw + ew) - ax * aw;
          abs_sum += std::fabs(deq(qx.m, i, k) * deq(qw.m, j, k));
        }
        const double got = y[i * N + j];
        num += (got - same) * (got - same);
        den += same * same;
        // FP8 vs the unquantized product: within the bound E4M3 implies (+ FP32 accumulation).
        const double fp32_acc = double(2 * K) * kU32 * abs_sum;  // K products, K sums
        QVERIFY2(
            std::fabs(got - exact) <= bound + fp32_acc,
            qPrintable(
                QString("(%1,%2): |%3 - %4| > %5").arg(i).arg(j).arg(got).arg(exact).arg(bound)));
      }
    // Same math as FP64 of the dequantized inputs.
    QVERIFY2(std::sqrt(num / den) <= 1e-6, qPrintable(QString::number(std::sqrt(num / den))));
  }

  // Every path (generic SSE2, AVX2, AVX-512 where the CPU has them) on awkward sizes, with
  // beta 0, 1 and 0.5 (beta = 0 must not read C: it holds NaN here), equals the reference's
  // bits. This is what makes a row's result independent of the batch it is computed in.
  void sgemmFollowsItsContractOnEveryPath() {
    Rng rng(11);
    const int64_t sizes[][3] = {{1, 1, 1},      {3, 5, 7},    {17, 33, 130}, {70, 257, 300},
                                {130, 16, 513}, {6, 300, 64}, {65, 1, 257}};
    for (const auto& sz : sizes) {
      const int64_t M = sz[0], N = sz[1], K = sz[2];
      auto a = random(rng, M * K), b = random(rng, N * K), c0 = random(rng, M * N);
      for (float beta : {0.0f, 1.0f, 0.5f}) {
        std::vector<float> want = c0;
        if (beta == 0.0f) std::fill(want.begin(), want.end(), NAN);
        std::vector<float> init = want;
        reference_sgemm(M, N, K, a.data(), b.data(), beta, want.data());
        for (CpuGemmPath path : cpu_gemm_paths()) {
          std::vector<float> got = init;
          cpu_sgemm_nt(M, N, K, a.data(), b.data(), beta, got.data(), path);
          QVERIFY2(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0,
                   qPrintable(QString("%1 path, %2x%3x%4, beta %5: bits differ from the reference")
                                  .arg(cpu_gemm_path_name(path))
                                  .arg(M)
                                  .arg(N)
                                  .arg(K)
                                  .arg(beta)));
          // A row computed alone (M = 1) has the bits it has inside the batch.
          std::vector<float> row(init.begin() + (M - 1) * N, init.begin() + M * N);
          cpu_sgemm_nt(1, N, K, a.data() + (M - 1) * K, b.data(), beta, row.data(), path);
          QVERIFY(std::memcmp(row.data(), want.data() + (M - 1) * N, N * sizeof(float)) == 0);
        }
      }
    }
  }

  // BF16 and FP8 operands are converted while the GEMM packs them: the result must be, bit for
  // bit, the FP32 GEMM of the operands converted beforehand (widened, or dequantized as
  // Backend::dequantize does), on every path, for FP32 and BF16 outputs, 1x128 and 128x128
  // scales, K across several 128-blocks and K slices, and with beta.
  void convertedOperandsEqualTheFp32GemmOfTheirValues() {
    Rng rng(17);
    const int64_t sizes[][3] = {
        {1, 1, 1}, {5, 17, 129}, {70, 130, 300}, {130, 16, 513}, {65, 257, 256}};
    for (const auto& sz : sizes) {
      const int64_t M = sz[0], N = sz[1], K = sz[2];
      auto x = random(rng, M * K), w = random(rng, N * K), c0 = random(rng, M * N);
      const auto qa = quantize(*cpu_, x, M, K, ScaleBlock::row1x128);
      for (ScaleBlock wb : {ScaleBlock::row1x128, ScaleBlock::tile128x128}) {
        const auto qb = quantize(*cpu_, w, N, K, wb);
        std::vector<float> da(M * K), db(N * K);
        cpu_->dequantize(qa.m, Matrix{da.data(), M, K, DType::f32});
        cpu_->dequantize(qb.m, Matrix{db.data(), N, K, DType::f32});
        std::vector<bf16> ha(M * K), hb(N * K);
        std::vector<float> wa(M * K), wbv(N * K);
        for (int64_t i = 0; i < M * K; ++i) wa[i] = bf16_to_float(ha[i] = float_to_bf16(x[i]));
        for (int64_t i = 0; i < N * K; ++i) wbv[i] = bf16_to_float(hb[i] = float_to_bf16(w[i]));
        const CpuGemmOperand fa{CpuGemmOperand::Kind::fp8,  qa.m.codes, M, K, qa.m.scale_inv,
                                fp8_table(Fp8Format::e4m3), qa.m.block};
        const CpuGemmOperand fb{CpuGemmOperand::Kind::fp8,  qb.m.codes, N, K, qb.m.scale_inv,
                                fp8_table(Fp8Format::e4m3), qb.m.block};
        const CpuGemmOperand ba{CpuGemmOperand::Kind::bf16, ha.data(), M, K, nullptr, nullptr, {}};
        const CpuGemmOperand bb{CpuGemmOperand::Kind::bf16, hb.data(), N, K, nullptr, nullptr, {}};
        for (CpuGemmPath path : cpu_gemm_paths())
          for (float beta : {0.0f, 1.0f}) {
            for (int kind = 0; kind < 2; ++kind) {  // fp8, bf16 operands
              const auto& A = kind == 0 ? fa : ba;
              const auto& B = kind == 0 ? fb : bb;
              const auto& va = kind == 0 ? da : wa;
              const auto& vb = kind == 0 ? db : wbv;
              std::vector<float> want = c0, got = c0;
              cpu_sgemm_nt(M, N, K, va.data(), vb.data(), beta, want.data(), path);
              cpu_gemm_nt(M, N, K, A, B, beta, got.data(), false, path);
              const QString what = QString("%1 path, %2 operands, %3x%4x%5, beta %6, %7 weights")
                                       .arg(cpu_gemm_path_name(path))
                                       .arg(kind == 0 ? "fp8" : "bf16")
                                       .arg(M)
                                       .arg(N)
                                       .arg(K)
                                       .arg(beta)
                                       .arg(scale_block_name(wb));
              QVERIFY2(std::memcmp(got.data(), want.data(), want.size() * 4) == 0,
                       qPrintable(what + ": f32 output differs"));
              // A BF16 output is the FP32 result rounded once (beta reads C widened).
              std::vector<bf16> cb(M * N);
              std::vector<float> cw(M * N);
              for (int64_t i = 0; i < M * N; ++i)
                cw[i] = bf16_to_float(cb[i] = float_to_bf16(c0[i]));
              cpu_sgemm_nt(M, N, K, va.data(), vb.data(), beta, cw.data(), path);
              cpu_gemm_nt(M, N, K, A, B, beta, cb.data(), true, path);
              for (int64_t i = 0; i < M * N; ++i)
                QVERIFY2(cb[i].bits == float_to_bf16(cw[i]).bits,
                         qPrintable(what + QString(": bf16 output %1 differs").arg(i)));
            }
          }
      }
    }
  }

  void wgradAccumulates() {
    Rng rng(5);
    const int64_t N = 24, K = 40, M = 300;  // dW[N,K] += dYᵀ[N,M] · Xᵀ[K,M]ᵀ
    auto dyt = random(rng, N * M), xt = random(rng, K * M);
    const auto a = quantize(*cpu_, dyt, N, M, ScaleBlock::row1x128);
    const auto b = quantize(*cpu_, xt, K, M, ScaleBlock::row1x128);
    std::vector<float> dw(N * K, 1.5f);
    cpu_->gemm_fp8(a.m, b.m, Matrix{dw.data(), N, K, DType::f32}, 1.0f);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < K; ++j) {
        double want = 1.5;
        for (int64_t k = 0; k < M; ++k) want += deq(a.m, i, k) * deq(b.m, j, k);
        // A sum of M + 1 FP32-rounded terms (and M rounded products): error ≤ (2M + 1)·u
        // times the sum of the terms' magnitudes (first order of the usual γ_n bound).
        double magnitude = 1.5;
        for (int64_t k = 0; k < M; ++k) magnitude += std::fabs(deq(a.m, i, k) * deq(b.m, j, k));
        const double bound = double(2 * M + 1) * kU32 * magnitude;
        QVERIFY2(std::fabs(dw[i * K + j] - want) <= bound,
                 qPrintable(QString("(%1,%2): |%3 - %4| > %5")
                                .arg(i)
                                .arg(j)
                                .arg(dw[i * K + j])
                                .arg(want)
                                .arg(bound)));
      }
  }

  void bf16GemmRoundsOutputOnce() {
    Rng rng(9);
    const int64_t M = 17, N = 33, K = 70;
    std::vector<bf16> a(M * K), b(N * K), c(M * N);
    for (auto& v : a) v = float_to_bf16(float(rng.normal()));
    for (auto& v : b) v = float_to_bf16(float(rng.normal()));
    cpu_->gemm(Matrix{a.data(), M, K, DType::bf16}, Matrix{b.data(), N, K, DType::bf16},
               Matrix{c.data(), M, N, DType::bf16}, 0.0f);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double want = 0, magnitude = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double t = double(bf16_to_float(a[i * K + k])) * bf16_to_float(b[j * K + k]);
          want += t;
          magnitude += std::fabs(t);
        }
        // FP32 accumulation (2K rounded operations, ≤ 2K·u·Σ|terms|), then one BF16 rounding
        // (BF16 keeps 8 significant bits: unit roundoff 2^-8) of that FP32 value.
        const double e32 = double(2 * K) * kU32 * magnitude;
        const double bound = 0x1p-8 * (std::fabs(want) + e32) + e32;
        QVERIFY2(std::fabs(bf16_to_float(c[i * N + j]) - want) <= bound,
                 qPrintable(QString("(%1,%2)").arg(i).arg(j)));
      }
  }

  void mismatchedShapesAreErrors() {
    std::vector<float> a(6), b(8), c(4);
    try {
      cpu_->gemm(Matrix{a.data(), 2, 3, DType::f32}, Matrix{b.data(), 2, 4, DType::f32},
                 Matrix{c.data(), 2, 2, DType::f32}, 0.0f);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("contracted sizes differ"), e.what());
    }
    QVERIFY_THROWS_EXCEPTION(
        Error, cpu_->gemm(Matrix{a.data(), 2, 3, DType::f32}, Matrix{a.data(), 2, 3, DType::f32},
                          Matrix{c.data(), 2, 2, DType::bf16}, 1.0f));
  }
};

QTEST_APPLESS_MAIN(TestGemmCpu)
#include "test_gemm_cpu.moc"
