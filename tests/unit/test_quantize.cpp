// Block quantization on the CPU reference: hand-computed scales and codes, layouts, statistics,
// degenerate blocks, power-of-2 scales, the transposed pass, the vector encoder against the
// scalar one, and input errors.
#include <QtTest>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend_registry.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "fp8/codec.hpp"

using namespace fp8rl;

namespace {

struct Q {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  QuantStats stats;
};

Q quantize(Backend& be, std::vector<float> x, int64_t rows, int64_t cols, ScaleBlock block,
           QuantOptions opt = {}) {
  Q q;
  q.codes.assign(static_cast<size_t>(rows * cols), 0);
  q.scales.assign(static_cast<size_t>(scale_count(block, rows, cols)), -1.0f);
  be.quantize(Matrix{x.data(), rows, cols, DType::f32},
              Fp8Matrix{q.codes.data(), q.scales.data(), rows, cols, block, opt.format}, opt,
              &q.stats);
  return q;
}

}  // namespace

class TestQuantize : public QObject {
  Q_OBJECT
  std::unique_ptr<Backend> cpu_ = make_cpu_backend();

 private slots:
  void handComputedBlock() {
    // amax 4 → s = 448/4 = 112; 1 → 112 (code 0x67 = 1.75·2^6), -4 → -448 (0xfe), 0.5 → 56.
    const auto q = quantize(*cpu_, {1.0f, -4.0f, 0.5f, 0.0f}, 1, 4, ScaleBlock::row1x128);
    QCOMPARE(q.scales[0], 1.0f / (448.0f / 4.0f));  // stored as 1/s
    QCOMPARE(e4m3_to_float(q.codes[0]), 112.0f);
    QCOMPARE(q.codes[1], uint8_t{0xfe});
    QCOMPARE(e4m3_to_float(q.codes[2]), 56.0f);
    QCOMPARE(q.codes[3], uint8_t{0});
    QCOMPARE(q.stats.blocks, int64_t{1});
    QCOMPARE(q.stats.elements, int64_t{4});
    QCOMPARE(q.stats.saturated, int64_t{0});
    QCOMPARE(q.stats.flushed_to_zero, int64_t{0});
    QCOMPARE(q.stats.relative_error(), 0.0);  // all four values are exact on the grid
  }

  void pow2ScalesRoundDown() {
    // amax 3 → s = 149.33 → 128 with power-of-2 scales; dequant scale 1/128 exactly.
    const auto q =
        quantize(*cpu_, {3.0f, 1.0f}, 1, 2, ScaleBlock::row1x128, {Fp8Format::e4m3, true});
    QCOMPARE(q.scales[0], 1.0f / 128.0f);
    QCOMPARE(e4m3_to_float(q.codes[0]) * q.scales[0], 3.0f);
  }

  void rowLayoutIsRowsContiguous() {
    // [3, 200]: two blocks per row; block (r, cb) scale at cb*3 + r (cuBLASLt VEC128).
    std::vector<float> x(600);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 200; ++c) x[r * 200 + c] = c < 128 ? float(r + 1) : float(10 * (r + 1));
    const auto q = quantize(*cpu_, x, 3, 200, ScaleBlock::row1x128);
    for (int r = 0; r < 3; ++r) {
      QCOMPARE(q.scales[0 * 3 + r], 1.0f / (448.0f / float(r + 1)));
      QCOMPARE(q.scales[1 * 3 + r], 1.0f / (448.0f / float(10 * (r + 1))));
    }
    QCOMPARE(q.stats.blocks, int64_t{6});
  }

  void tileLayoutPadsToFour() {
    // [130, 260]: 2x3 tiles; the row stride of the scale grid is 4 (cuBLASLt needs the padding).
    QCOMPARE(tile_scale_stride(260), int64_t{4});
    QCOMPARE(scale_count(ScaleBlock::tile128x128, 130, 260), int64_t{8});
    std::vector<float> x(130 * 260);
    for (int r = 0; r < 130; ++r)
      for (int c = 0; c < 260; ++c) x[r * 260 + c] = float(1 + (r / 128) * 3 + c / 128);
    const auto q = quantize(*cpu_, x, 130, 260, ScaleBlock::tile128x128);
    for (int rb = 0; rb < 2; ++rb)
      for (int cb = 0; cb < 3; ++cb)
        QCOMPARE(q.scales[rb * 4 + cb], 1.0f / (448.0f / float(1 + rb * 3 + cb)));
    // Padding entries hold 1.0 (they start as -1 in the helper's buffer).
    QCOMPARE(q.scales[3], 1.0f);
    QCOMPARE(q.scales[7], 1.0f);
    QCOMPARE(q.stats.blocks, int64_t{6});
  }

  void degenerateBlocksUseScaleOneAndAreCounted() {
    std::vector<float> x = {0, 0, 0, 0, 1, NAN, 2, 3, INFINITY, 1, 2, 3};
    const auto q = quantize(*cpu_, x, 3, 4, ScaleBlock::row1x128);
    QCOMPARE(q.stats.degenerate_blocks, int64_t{3});
    for (int r = 0; r < 3; ++r) QCOMPARE(q.scales[r], 1.0f);
    QCOMPARE(q.codes[5], uint8_t{0x7f});  // NaN kept
    QCOMPARE(q.codes[8], uint8_t{0x7e});  // inf saturates
    QCOMPARE(q.stats.saturated, int64_t{1});
  }

  void flushedToZeroIsCounted() {
    // With amax 448 (s = 1), 2^-11 is below half the smallest subnormal 2^-9: flushed.
    const auto q =
        quantize(*cpu_, {448.0f, 0x1p-11f, -0x1p-12f, 0x1p-9f}, 1, 4, ScaleBlock::row1x128);
    QCOMPARE(q.stats.flushed_to_zero, int64_t{2});
    QCOMPARE(q.codes[2], uint8_t{0x80});  // sign kept
    QCOMPARE(q.codes[3], uint8_t{0x01});
  }

  void relativeErrorMatchesDefinition() {
    std::vector<float> x(1000);
    for (int i = 0; i < 1000; ++i) x[i] = std::sin(float(i)) * 3.0f;
    const auto q = quantize(*cpu_, x, 4, 250, ScaleBlock::row1x128);
    double err = 0, ref = 0;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 250; ++c) {
        const double d = double(e4m3_to_float(q.codes[r * 250 + c])) *
                         q.scales[scale_index(ScaleBlock::row1x128, 4, 250, r, c)];
        err += (x[r * 250 + c] - d) * (x[r * 250 + c] - d);
        ref += double(x[r * 250 + c]) * x[r * 250 + c];
      }
    QVERIFY(std::fabs(q.stats.relative_error() - std::sqrt(err / ref)) < 1e-6);
    // E4M3 keeps 3 mantissa bits: the relative error of a whole block is below 2^-4.
    QVERIFY(q.stats.relative_error() < 0.0625);
    QVERIFY(q.stats.relative_error() > 0.005);
  }

  void transposedPassEqualsExplicitTranspose() {
    const int64_t M = 130, K = 257;
    std::vector<float> x(M * K), xt(M * K);
    for (int64_t i = 0; i < M * K; ++i) x[i] = std::cos(float(i) * 0.37f) * float(1 + i % 17);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < K; ++c) xt[c * M + r] = x[r * K + c];
    std::vector<uint8_t> a(M * K), t(M * K);
    std::vector<float> as(scale_count(ScaleBlock::row1x128, M, K)),
        ts(scale_count(ScaleBlock::row1x128, K, M));
    QuantStats sa, st;
    cpu_->quantize_with_transpose(Matrix{x.data(), M, K, DType::f32},
                                  Fp8Matrix{a.data(), as.data(), M, K},
                                  Fp8Matrix{t.data(), ts.data(), K, M}, {}, &sa, &st);
    const auto wa = quantize(*cpu_, x, M, K, ScaleBlock::row1x128);
    const auto wt = quantize(*cpu_, xt, K, M, ScaleBlock::row1x128);
    QVERIFY(a == wa.codes);
    QVERIFY(as == wa.scales);
    QVERIFY(t == wt.codes);
    QVERIFY(ts == wt.scales);
    QCOMPARE(st.blocks, K * blocks_of(M));
  }

  void dequantizeInverts() {
    std::vector<float> x = {1.0f, -4.0f, 0.5f, 2.0f};
    const auto q = quantize(*cpu_, x, 1, 4, ScaleBlock::row1x128);
    std::vector<float> y(4);
    Q copy = q;
    cpu_->dequantize(Fp8Matrix{copy.codes.data(), copy.scales.data(), 1, 4},
                     Matrix{y.data(), 1, 4, DType::f32});
    QCOMPARE(y[0], 1.0f);
    QCOMPARE(y[1], -4.0f);
    QCOMPARE(y[3], 2.0f);  // 2·112 = 224 = 1.75·2^7 is on the E4M3 grid
  }

  // The quantizer encodes runs of values in vector lanes: each code must be the scalar
  // encoder's for that element (x · s with the block's scale), for both formats, over values
  // from every binade, subnormal results, ±0, ±inf, NaN, with and without statistics, in
  // runs that are not a multiple of the lane count. (FP8RL_CPU_GEMM picks the lanes' path;
  // cpu_matrix runs this under each.)
  void vectorCodesEqualTheScalarEncoder() {
    Rng rng(23);
    const int64_t rows = 9, cols = 300;
    std::vector<float> x(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < x.size(); ++i) {
      const int kind = static_cast<int>(i % 11);
      const float r = static_cast<float>(rng.normal());
      x[i] = kind == 0   ? r * std::ldexp(1.0f, static_cast<int>(rng.next() % 60) - 40)
             : kind == 1 ? 0.0f
             : kind == 2 ? -0.0f
             : kind == 3 ? r * 1e-6f
                         : r;
    }
    x[17] = INFINITY;   // row 0: a degenerate block (scale 1)
    x[cols + 5] = NAN;  // row 1 too
    for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2})
      for (bool stats : {false, true}) {
        QuantOptions opt;
        opt.format = f;
        std::vector<uint8_t> codes(x.size());
        std::vector<float> scales(
            static_cast<size_t>(scale_count(ScaleBlock::row1x128, rows, cols)));
        QuantStats st;
        cpu_->quantize(Matrix{x.data(), rows, cols, DType::f32},
                       Fp8Matrix{codes.data(), scales.data(), rows, cols, ScaleBlock::row1x128, f},
                       opt, stats ? &st : nullptr);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
            const int64_t c1 = std::min(cols, c0 + kBlock);
            float amax = 0;
            bool nan = false;
            for (int64_t c = c0; c < c1; ++c) {
              nan |= std::isnan(x[r * cols + c]);
              amax = std::max(amax, std::fabs(x[r * cols + c]));
            }
            const float s = block_scale(nan ? NAN : amax, f, false, nullptr);
            for (int64_t c = c0; c < c1; ++c)
              QVERIFY2(codes[r * cols + c] == float_to_fp8(x[r * cols + c] * s, f),
                       qPrintable(QString("%1 (%2, %3)").arg(fp8_format_name(f)).arg(r).arg(c)));
          }
        if (!stats) continue;
        // The statistics, written plainly in their documented order: per block, element k's
        // squares in lane k % 8, the lanes added in order; blocks in order within a row, rows
        // in order.
        QuantStats want;
        double err_rows = 0, ref_rows = 0;
        for (int64_t r = 0; r < rows; ++r) {
          double err_row = 0, ref_row = 0;
          for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
            const int64_t c1 = std::min(cols, c0 + kBlock);
            const float inv =
                scales[static_cast<size_t>(scale_index(ScaleBlock::row1x128, rows, cols, r, c0))];
            double err[8] = {}, ref[8] = {};
            for (int64_t c = c0; c < c1; ++c) {
              const float v = x[r * cols + c];
              if (!std::isfinite(v)) continue;
              const double e = double(v) - double(fp8_table(f)[codes[r * cols + c]] * inv);
              err[(c - c0) % 8] += e * e;
              ref[(c - c0) % 8] += double(v) * double(v);
            }
            for (int l = 0; l < 8; ++l) {
              err_row += err[l];
              ref_row += ref[l];
            }
          }
          err_rows += err_row;
          ref_rows += ref_row;
        }
        QVERIFY2(std::memcmp(&err_rows, &st.err_sq, 8) == 0 &&
                     std::memcmp(&ref_rows, &st.ref_sq, 8) == 0,
                 qPrintable(QString("%1: error sums %2 / %3, want %4 / %5")
                                .arg(fp8_format_name(f))
                                .arg(st.err_sq, 0, 'g', 17)
                                .arg(st.ref_sq, 0, 'g', 17)
                                .arg(err_rows, 0, 'g', 17)
                                .arg(ref_rows, 0, 'g', 17)));
      }
  }

  void badShapesAreErrors() {
    std::vector<float> x(6);
    std::vector<uint8_t> c(6);
    std::vector<float> s(6);
    try {
      cpu_->quantize(Matrix{x.data(), 2, 3, DType::f32}, Fp8Matrix{c.data(), s.data(), 3, 2}, {},
                     nullptr);
      QFAIL("no error");
    } catch (const Error& e) {
      QVERIFY2(QString(e.what()).contains("[2, 3]"), e.what());
    }
  }
};

QTEST_APPLESS_MAIN(TestQuantize)
#include "test_quantize.moc"
