// E4M3/E5M2 and BF16 codecs, bit for bit against NVIDIA's host conversions in cuda_fp8.h and
// cuda_bf16.h (the reference: the same functions describe what the GPU's cvt instructions do).
#include <QtTest>

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <bit>
#include <cmath>
#include <vector>

#include "core/bf16.hpp"
#include "core/rng.hpp"
#include "fp8/codec.hpp"

namespace {

__nv_fp8_interpretation_t interp(fp8rl::Fp8Format f) {
  return f == fp8rl::Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2;
}

uint8_t nvidia_encode(float x, fp8rl::Fp8Format f) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, interp(f));
}

float nvidia_decode(uint8_t code, fp8rl::Fp8Format f) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(code, interp(f));
  return __half2float(__half(h));
}

// Counts and reports mismatches of our encoder against NVIDIA's over a set of floats.
int mismatches(const std::vector<float>& xs, fp8rl::Fp8Format f) {
  int bad = 0;
  for (float x : xs) {
    const uint8_t ours = fp8rl::float_to_fp8(x, f), theirs = nvidia_encode(x, f);
    if (ours != theirs && bad++ < 5)
      qWarning("%s: x=%.9g (0x%08x): ours 0x%02x, cuda_fp8.h 0x%02x", fp8rl::fp8_format_name(f), x,
               std::bit_cast<uint32_t>(x), ours, theirs);
  }
  return bad;
}

const fp8rl::Fp8Format kFormats[] = {fp8rl::Fp8Format::e4m3, fp8rl::Fp8Format::e5m2};

}  // namespace

class TestCodec : public QObject {
  Q_OBJECT
 private slots:
  void everyBf16Value() {
    std::vector<float> xs;
    for (uint32_t b = 0; b < 65536; ++b)
      xs.push_back(fp8rl::bf16_to_float(fp8rl::bf16{uint16_t(b)}));
    for (auto f : kFormats) QCOMPARE(mismatches(xs, f), 0);
  }

  void everyCodeDecodesAndRoundTrips() {
    for (auto f : kFormats) {
      for (int c = 0; c < 256; ++c) {
        const float ours = fp8rl::fp8_to_float(uint8_t(c), f),
                    theirs = nvidia_decode(uint8_t(c), f);
        if (std::isnan(theirs)) {
          QVERIFY2(std::isnan(ours), qPrintable(QString("code 0x%1").arg(c, 2, 16)));
          continue;
        }
        QCOMPARE(std::bit_cast<uint32_t>(ours), std::bit_cast<uint32_t>(theirs));
        if (std::isfinite(ours)) QCOMPARE(int(fp8rl::float_to_fp8(ours, f)), c);
      }
    }
  }

  void midpointsAndTheirNeighbours() {
    for (auto f : kFormats) {
      std::vector<float> xs;
      for (int c = 0; c < 0x7f; ++c) {
        const float a = fp8rl::fp8_to_float(uint8_t(c), f),
                    b = fp8rl::fp8_to_float(uint8_t(c + 1), f);
        if (!std::isfinite(a) || !std::isfinite(b)) continue;
        const float mid = (a + b) / 2;  // exact: one more mantissa bit than the format has
        for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), a, b})
          for (float s : {1.0f, -1.0f}) xs.push_back(s * x);
      }
      // Around and beyond the largest finite value (saturation).
      const float mx = fp8rl::fp8_max(f);
      for (float x : {mx, std::nextafter(mx, INFINITY), mx * 1.0625f, mx * 1.07f, mx * 2, 1e30f})
        for (float s : {1.0f, -1.0f}) xs.push_back(s * x);
      QCOMPARE(mismatches(xs, f), 0);
    }
  }

  void specials() {
    std::vector<float> xs = {0.0f,
                             -0.0f,
                             INFINITY,
                             -INFINITY,
                             NAN,
                             -NAN,
                             std::bit_cast<float>(0x7fc00001u),
                             std::bit_cast<float>(0xffc00000u),
                             0x1p-9f,
                             0x1p-10f,
                             std::nextafter(0x1p-10f, 1.0f),
                             0x1p-16f,
                             0x1p-17f,
                             3e-39f /* float subnormal */,
                             0.3f,
                             1.0625f,
                             448.0f,
                             464.0f,
                             57344.0f,
                             61440.0f};
    for (auto f : kFormats) QCOMPARE(mismatches(xs, f), 0);
    // Facts from the recipe notes.
    QCOMPARE(fp8rl::e4m3_to_float(fp8rl::float_to_e4m3(0.3f)), 0.3125f);
    QCOMPARE(fp8rl::e4m3_to_float(fp8rl::float_to_e4m3(1.0625f)), 1.0f);
    QCOMPARE(fp8rl::float_to_e4m3(0x1p-10f), uint8_t{0});
    QCOMPARE(fp8rl::float_to_e4m3(INFINITY), uint8_t{0x7e});
    QCOMPARE(fp8rl::float_to_e4m3(NAN), uint8_t{0x7f});
  }

  void randomFloats() {
    fp8rl::Rng rng(7);
    std::vector<float> xs;
    for (int i = 0; i < 1000000; ++i) {
      // Mostly values in the formats' ranges, some arbitrary bit patterns.
      if (i % 4 == 0)
        xs.push_back(std::bit_cast<float>(uint32_t(rng.next())));
      else
        xs.push_back(float(rng.normal() * std::exp2(rng.uniform() * 40 - 20)));
    }
    for (auto f : kFormats) QCOMPARE(mismatches(xs, f), 0);
  }

  void bf16MatchesCuda() {
    fp8rl::Rng rng(11);
    int bad = 0;
    for (int i = 0; i < 1000000; ++i) {
      const float x = std::bit_cast<float>(uint32_t(rng.next()));
      const __nv_bfloat16_raw theirs = __nv_bfloat16_raw(__float2bfloat16_rn(x));
      const uint16_t ours = fp8rl::float_to_bf16(x).bits;
      if (std::isnan(x)) {
        bad += !std::isnan(fp8rl::bf16_to_float(fp8rl::bf16{ours}));
      } else if (ours != theirs.x && bad++ < 5) {
        qWarning("bf16: x=%.9g ours 0x%04x cuda 0x%04x", x, ours, theirs.x);
      }
    }
    QCOMPARE(bad, 0);
  }
};

QTEST_APPLESS_MAIN(TestCodec)
#include "test_codec.moc"
