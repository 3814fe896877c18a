// Op cases: quantize (1x128, 128x128), quantize_with_transpose, dequantize, transpose_fp8.
#include <cmath>
#include <limits>
#include <tuple>

#include "core/bf16.hpp"
#include "fp8/codec.hpp"
#include "op_case.hpp"

namespace fp8rl::optest {
namespace {

// Awkward shapes on purpose: partial blocks, one row, K not a multiple of 128, 128²+1, empty.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {1, 1}, {1, 128}, {3, 129}, {128, 128}, {257, 259}, {1, 16385}, {130, 300}, {64, 1024}, {0, 7}};

struct Host {
  std::vector<float> values;   // the input as floats (already rounded when the dtype is bf16)
  std::vector<uint8_t> bytes;  // the input in its dtype
};

Host make_input(std::vector<float> v, DType dt) {
  Host h;
  if (dt == DType::bf16) {
    h.bytes.resize(v.size() * 2);
    auto* p = reinterpret_cast<bf16*>(h.bytes.data());
    for (size_t i = 0; i < v.size(); ++i) {
      p[i] = float_to_bf16(v[i]);
      v[i] = bf16_to_float(p[i]);
    }
  } else {
    h.bytes.resize(v.size() * 4);
    std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
  }
  h.values = std::move(v);
  return h;
}

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;  // the full scale array (tile padding entries 1.0)
  QuantStats stats;
  bool guards_ok = true;
};

// Valid scale entries of a [rows, cols] matrix in a fixed order (padding excluded).
std::vector<float> valid_scales(const std::vector<float>& s, ScaleBlock b, int64_t rows,
                                int64_t cols) {
  std::vector<float> out;
  const int64_t rstep = b == ScaleBlock::row1x128 ? 1 : kBlock;
  for (int64_t r = 0; r < rows; r += rstep)
    for (int64_t c = 0; c < cols; c += kBlock) out.push_back(s[scale_index(b, rows, cols, r, c)]);
  return out;
}

// Padding entries of a tile scale array that do not hold 1.0 (fp8/format.hpp).
int64_t bad_tile_padding(const std::vector<float>& s, int64_t rows, int64_t cols) {
  int64_t bad = 0;
  const int64_t stride = tile_scale_stride(cols);
  for (int64_t rb = 0; rb < blocks_of(rows); ++rb)
    for (int64_t cb = blocks_of(cols); cb < stride; ++cb) bad += s[rb * stride + cb] != 1.0f;
  return bad;
}

Quantized run_quantize(Backend& be, const Host& in, DType dt, int64_t rows, int64_t cols,
                       ScaleBlock block, const QuantOptions& opt) {
  Guarded x(be, in.bytes.size()), codes(be, rows * cols),
      scales(be, scale_count(block, rows, cols) * 4);
  x.upload(in.bytes.data());
  Quantized q;
  be.quantize(Matrix{x.data(), rows, cols, dt},
              Fp8Matrix{static_cast<uint8_t*>(codes.data()), static_cast<float*>(scales.data()),
                        rows, cols, block, opt.format},
              opt, &q.stats);
  q.codes.resize(rows * cols);
  q.scales.resize(scale_count(block, rows, cols));
  q.guards_ok = codes.download(q.codes.data()) && scales.download(q.scales.data());
  return q;
}

// Independent reference for one element: the nearest code by brute force over the table,
// ties to the even code, saturating, NaN → 0x7f.
uint8_t brute_force_code(float v, Fp8Format f) {
  if (std::isnan(v)) return 0x7f;
  const float* t = fp8_table(f);
  const double a = std::fabs(static_cast<double>(v));
  int best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 0x80; ++c) {
    if (!std::isfinite(t[c])) continue;
    const double d = std::fabs(a - t[c]);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best_d = d;
      best = c;
    }
  }
  if (a > fp8_max(f)) best = float_to_fp8(fp8_max(f), f);  // saturate (also ±inf)
  return static_cast<uint8_t>(best | (std::signbit(v) ? 0x80 : 0));
}

// Independent reference quantization of a [rows, cols] matrix (scale formula written out).
Quantized reference_quantize(const std::vector<float>& x, int64_t rows, int64_t cols,
                             ScaleBlock block, const QuantOptions& opt) {
  Quantized q;
  q.codes.resize(rows * cols);
  q.scales.assign(scale_count(block, rows, cols), 0.0f);
  const int64_t rstep = block == ScaleBlock::row1x128 ? 1 : kBlock;
  for (int64_t r0 = 0; r0 < rows; r0 += rstep)
    for (int64_t c0 = 0; c0 < cols; c0 += kBlock) {
      const int64_t r1 = std::min(rows, r0 + rstep), c1 = std::min(cols, c0 + kBlock);
      double amax = 0;
      bool nan = false;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const float v = x[r * cols + c];
          nan |= std::isnan(v);
          amax = std::max(amax, std::fabs(static_cast<double>(v)));
        }
      const float fmax = fp8_max(opt.format);
      const bool degenerate = nan || !(amax > 0) || !std::isfinite(amax) ||
                              !std::isfinite(fmax / static_cast<float>(amax));
      float s = degenerate ? 1.0f : fmax / static_cast<float>(amax);
      if (opt.pow2_scales) s = std::exp2(std::floor(std::log2(s)));
      q.scales[scale_index(block, rows, cols, r0, c0)] = 1.0f / s;
      ++q.stats.blocks;
      q.stats.degenerate_blocks += degenerate;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) {
          const float v = x[r * cols + c];
          const float scaled = v * s;
          const uint8_t code = brute_force_code(scaled, opt.format);
          q.codes[r * cols + c] = code;
          ++q.stats.elements;
          if (!std::isnan(scaled) && std::fabs(scaled) > fp8_max(opt.format)) ++q.stats.saturated;
          if (std::isfinite(v)) {
            // Spec: the dequantized value is the FP32 product code · (1/s).
            const float d = fp8_table(opt.format)[code] * (1.0f / s);
            const double e = static_cast<double>(v) - static_cast<double>(d);
            q.stats.err_sq += e * e;
            q.stats.ref_sq += static_cast<double>(v) * v;
            if (v != 0 && (code & 0x7f) == 0) ++q.stats.flushed_to_zero;
          }
        }
    }
  return q;
}

bool close(double a, double b, double rel) {
  return std::fabs(a - b) <= rel * std::max({std::fabs(a), std::fabs(b), 1e-300});
}

// Compares two quantizations: codes and scales bit-exact, counts exact, error sums to `rel`.
Result compare(const Quantized& got, const Quantized& want, ScaleBlock block, int64_t rows,
               int64_t cols, double rel) {
  if (!got.guards_ok) return fail("wrote outside its output (guard bytes changed)");
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.codes.size(); ++i)
    if (got.codes[i] != want.codes[i]) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  if (bad)
    return fail(fmt("%lld code mismatches, first at %lld: got 0x%02x want 0x%02x", (long long)bad,
                    (long long)first, got.codes[first], want.codes[first]));
  const auto gs = valid_scales(got.scales, block, rows, cols),
             ws = valid_scales(want.scales, block, rows, cols);
  for (size_t i = 0; i < ws.size(); ++i)
    if (std::memcmp(&gs[i], &ws[i], 4) != 0)
      return fail(fmt("scale %zu differs: got %.9g want %.9g", i, gs[i], ws[i]));
  if (block == ScaleBlock::tile128x128)
    if (const int64_t pad = bad_tile_padding(got.scales, rows, cols))
      return fail(fmt("%lld padding entries of the tile scales are not 1.0", (long long)pad));
  const auto& g = got.stats;
  const auto& w = want.stats;
  if (g.elements != w.elements || g.blocks != w.blocks || g.saturated != w.saturated ||
      g.flushed_to_zero != w.flushed_to_zero || g.degenerate_blocks != w.degenerate_blocks)
    return fail(
        fmt("stats differ: elements %lld/%lld blocks %lld/%lld saturated %lld/%lld "
            "flushed %lld/%lld degenerate %lld/%lld",
            (long long)g.elements, (long long)w.elements, (long long)g.blocks, (long long)w.blocks,
            (long long)g.saturated, (long long)w.saturated, (long long)g.flushed_to_zero,
            (long long)w.flushed_to_zero, (long long)g.degenerate_blocks,
            (long long)w.degenerate_blocks));
  if (!close(g.err_sq, w.err_sq, rel) || !close(g.ref_sq, w.ref_sq, rel))
    return fail(fmt("error sums differ: err %.12g/%.12g ref %.12g/%.12g", g.err_sq, w.err_sq,
                    g.ref_sq, w.ref_sq));
  return pass(fmt("codes and scales bit-exact; rel. quant. error %.4f", g.relative_error()));
}

// Inputs with the awkward values a real run meets: all-zero, NaN, inf, tiny and huge blocks.
std::vector<float> special_values(Rng& rng, int64_t rows, int64_t cols) {
  auto v = random_matrix(rng, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float& x = v[r * cols + c];
      const int64_t kind = (r + c / kBlock) % 6;
      if (kind == 1) x = 0.0f;                      // all-zero block
      if (kind == 2 && c % 97 == 5) x = NAN;        // NaN in a block
      if (kind == 3 && c % 89 == 7) x = -INFINITY;  // inf in a block
      if (kind == 4) x *= 1e-30f;                   // tiny block (scale still finite)
      if (kind == 5 && c % 3 == 0) x *= 1e-12f;     // values flushed to zero
    }
  return v;
}

void add_quantize_case(Registry& reg, int64_t rows, int64_t cols, DType dt, ScaleBlock block,
                       QuantOptions opt, bool specials) {
  const std::string name = fmt("quantize %s %s %s %s%s%s", scale_block_name(block), dtype_name(dt),
                               fp8_format_name(opt.format), shape_str(rows, cols).c_str(),
                               opt.pow2_scales ? " pow2" : "", specials ? " specials" : "");
  reg.push_back({name, [=](Backend& ref, Backend& test, Rng& rng) {
                   const Host in = make_input(
                       specials ? special_values(rng, rows, cols) : random_matrix(rng, rows, cols),
                       dt);
                   const Quantized got = run_quantize(test, in, dt, rows, cols, block, opt);
                   if (&ref == &test)
                     return compare(got, reference_quantize(in.values, rows, cols, block, opt),
                                    block, rows, cols, 1e-9);
                   return compare(got, run_quantize(ref, in, dt, rows, cols, block, opt), block,
                                  rows, cols, 1e-6);
                 }});
}

void add_transpose_quantize_case(Registry& reg, int64_t rows, int64_t cols, DType dt) {
  reg.push_back(
      {fmt("quantize_with_transpose 1x128 %s %s", dtype_name(dt), shape_str(rows, cols).c_str()),
       [=](Backend& ref, Backend& test, Rng& rng) {
         // Every way of the CUDA tile kernels (with_tile_kernels).
         return with_tile_kernels(test, [&]() -> Result {
           const QuantOptions opt;
           const Host in = make_input(random_matrix(rng, rows, cols), dt);
           // Explicit transpose on the host: the reference for the transposed output.
           std::vector<float> xt(in.values.size());
           for (int64_t r = 0; r < rows; ++r)
             for (int64_t c = 0; c < cols; ++c) xt[c * rows + r] = in.values[r * cols + c];
           const Host in_t = make_input(xt, dt);
           Guarded x(test, in.bytes.size()), a(test, rows * cols),
               as(test, scale_count(ScaleBlock::row1x128, rows, cols) * 4), t(test, rows * cols),
               ts(test, scale_count(ScaleBlock::row1x128, cols, rows) * 4);
           x.upload(in.bytes.data());
           Quantized ga, gt;
           test.quantize_with_transpose(
               Matrix{x.data(), rows, cols, dt},
               Fp8Matrix{static_cast<uint8_t*>(a.data()), static_cast<float*>(as.data()), rows,
                         cols, ScaleBlock::row1x128, opt.format},
               Fp8Matrix{static_cast<uint8_t*>(t.data()), static_cast<float*>(ts.data()), cols,
                         rows, ScaleBlock::row1x128, opt.format},
               opt, &ga.stats, &gt.stats);
           ga.codes.resize(rows * cols);
           gt.codes.resize(rows * cols);
           ga.scales.resize(as.bytes() / 4);
           gt.scales.resize(ts.bytes() / 4);
           ga.guards_ok = a.download(ga.codes.data()) && as.download(ga.scales.data());
           gt.guards_ok = t.download(gt.codes.data()) && ts.download(gt.scales.data());
           const auto wa = run_quantize(ref, in, dt, rows, cols, ScaleBlock::row1x128, opt);
           const auto wt = run_quantize(ref, in_t, dt, cols, rows, ScaleBlock::row1x128, opt);
           Result r = compare(ga, wa, ScaleBlock::row1x128, rows, cols, 1e-6);
           if (r.outcome != Outcome::pass) return fail("along K: " + r.detail);
           r = compare(gt, wt, ScaleBlock::row1x128, cols, rows, 1e-6);
           if (r.outcome != Outcome::pass) return fail("transposed: " + r.detail);
           return pass("both operands bit-exact with the reference");
         });
       }});
}

void add_dequantize_case(Registry& reg, int64_t rows, int64_t cols, ScaleBlock block, DType out) {
  reg.push_back(
      {fmt("dequantize %s -> %s %s", scale_block_name(block), dtype_name(out),
           shape_str(rows, cols).c_str()),
       [=](Backend& ref, Backend& test, Rng& rng) {
         const QuantOptions opt;
         const Host in = make_input(random_matrix(rng, rows, cols), DType::f32);
         const Quantized q = run_quantize(ref, in, DType::f32, rows, cols, block, opt);
         Guarded codes(test, q.codes.size()), scales(test, q.scales.size() * 4),
             y(test, rows * cols * dtype_size(out));
         codes.upload(q.codes.data());
         scales.upload(q.scales.data());
         test.dequantize(
             Fp8Matrix{static_cast<uint8_t*>(codes.data()), static_cast<float*>(scales.data()),
                       rows, cols, block, opt.format},
             Matrix{y.data(), rows, cols, out});
         std::vector<uint8_t> got(y.bytes());
         if (!y.download(got.data())) return fail("wrote outside its output (guard bytes changed)");
         for (int64_t r = 0; r < rows; ++r)
           for (int64_t c = 0; c < cols; ++c) {
             const int64_t i = r * cols + c;
             // The product of two floats is exact in double: rounding it once is the spec.
             const float want = static_cast<float>(static_cast<double>(e4m3_to_float(q.codes[i])) *
                                                   q.scales[scale_index(block, rows, cols, r, c)]);
             float g;
             if (out == DType::f32) {
               std::memcpy(&g, &got[i * 4], 4);
               if (std::memcmp(&g, &want, 4) != 0)
                 return fail(fmt("element %lld: got %.9g want %.9g", (long long)i, g, want));
             } else {
               bf16 b;
               std::memcpy(&b, &got[i * 2], 2);
               if (b.bits != float_to_bf16(want).bits)
                 return fail(fmt("element %lld: got bf16 0x%04x want 0x%04x", (long long)i, b.bits,
                                 float_to_bf16(want).bits));
             }
           }
         return pass("every element bit-exact");
       }});
}

void add_transpose_fp8_case(Registry& reg, int64_t rows, int64_t cols) {
  reg.push_back(
      {fmt("transpose_fp8 128x128 %s", shape_str(rows, cols).c_str()),
       [=](Backend& ref, Backend& test, Rng& rng) {
         const QuantOptions opt;
         const Host in = make_input(random_matrix(rng, rows, cols), DType::f32);
         const Quantized q =
             run_quantize(ref, in, DType::f32, rows, cols, ScaleBlock::tile128x128, opt);
         Guarded codes(test, q.codes.size()), scales(test, q.scales.size() * 4),
             tc(test, q.codes.size()),
             ts(test, scale_count(ScaleBlock::tile128x128, cols, rows) * 4);
         codes.upload(q.codes.data());
         scales.upload(q.scales.data());
         test.transpose_fp8(
             Fp8Matrix{static_cast<uint8_t*>(codes.data()), static_cast<float*>(scales.data()),
                       rows, cols, ScaleBlock::tile128x128, opt.format},
             Fp8Matrix{static_cast<uint8_t*>(tc.data()), static_cast<float*>(ts.data()), cols, rows,
                       ScaleBlock::tile128x128, opt.format});
         std::vector<uint8_t> gc(tc.bytes());
         std::vector<float> gs(ts.bytes() / 4);
         if (!tc.download(gc.data()) || !ts.download(gs.data()))
           return fail("wrote outside its output (guard bytes changed)");
         if (const int64_t bad = bad_tile_padding(gs, cols, rows))
           return fail(
               fmt("%lld padding entries of the transposed scales are not 1.0", (long long)bad));
         for (int64_t r = 0; r < rows; ++r)
           for (int64_t c = 0; c < cols; ++c) {
             if (gc[c * rows + r] != q.codes[r * cols + c])
               return fail(fmt("code (%lld,%lld) not transposed", (long long)r, (long long)c));
             const float want = q.scales[scale_index(ScaleBlock::tile128x128, rows, cols, r, c)];
             const float got = gs[scale_index(ScaleBlock::tile128x128, cols, rows, c, r)];
             if (got != want)
               return fail(fmt("scale of tile (%lld,%lld) not transposed", (long long)(r / kBlock),
                               (long long)(c / kBlock)));
           }
         return pass("codes and tile scales transposed exactly");
       }});
}

// scale_log2_histogram over the scales a quantization made (specials: degenerate and tiny
// blocks too), into counts that already hold values, twice (it adds): against the bins of the
// valid scale entries counted on the host.
void add_scale_histogram_case(Registry& reg, int64_t rows, int64_t cols, ScaleBlock block, int lo,
                              int hi) {
  reg.push_back({fmt("scale_log2_histogram %s %s bins 2^%d..2^%d", scale_block_name(block),
                     shape_str(rows, cols).c_str(), lo, hi),
                 [=](Backend& ref, Backend& test, Rng& rng) {
                   const QuantOptions opt;
                   const Host in = make_input(special_values(rng, rows, cols), DType::f32);
                   const Quantized q = run_quantize(ref, in, DType::f32, rows, cols, block, opt);
                   const size_t nbins = static_cast<size_t>(hi - lo) + 2;
                   std::vector<int64_t> want(nbins);
                   for (size_t i = 0; i < nbins; ++i) want[i] = static_cast<int64_t>(i) * 1000 + 7;
                   Guarded scales(test, q.scales.size() * 4), counts(test, nbins * 8);
                   scales.upload(q.scales.data());
                   counts.upload(want.data());
                   for (float v : valid_scales(q.scales, block, rows, cols))
                     want[static_cast<size_t>(scale_log2_bin(v, lo, hi))] += 2;
                   const Fp8Matrix m{
                       nullptr, static_cast<float*>(scales.data()), rows, cols, block, opt.format};
                   for (int i = 0; i < 2; ++i)
                     test.scale_log2_histogram(m, lo, hi, static_cast<int64_t*>(counts.data()));
                   std::vector<int64_t> got(nbins);
                   if (!counts.download(got.data()))
                     return fail("wrote outside its counts (guard bytes changed)");
                   for (size_t i = 0; i < nbins; ++i)
                     if (got[i] != want[i])
                       return fail(fmt("bin %zu: got %lld want %lld", i, (long long)got[i],
                                       (long long)want[i]));
                   return pass("every bin exact");
                 }});
}

// QuantOptions::stats_sum: three quantizations (1x128, a 128x128 tile, and the along operand of
// quantize_with_transpose, with special values) summed in one record of the backend's memory,
// without host statistics, equal the sum of the reference's host statistics; the codes are
// those of a quantization without the sum.
void add_stats_sum_case(Registry& reg, int64_t rows, int64_t cols) {
  reg.push_back(
      {fmt("quantize stats_sum (1x128, 128x128, with transpose) %s", shape_str(rows, cols).c_str()),
       [=](Backend& ref, Backend& test, Rng& rng) {
         Guarded sum(test, sizeof(QuantStatsSum));
         const QuantStatsSum zero;
         sum.upload(&zero);
         QuantOptions opt;
         opt.stats_sum = static_cast<QuantStatsSum*>(sum.data());
         QuantStats want;
         for (ScaleBlock block : {ScaleBlock::row1x128, ScaleBlock::tile128x128}) {
           const Host in = make_input(random_matrix(rng, rows, cols), DType::bf16);
           Guarded x(test, in.bytes.size()), codes(test, rows * cols),
               scales(test, scale_count(block, rows, cols) * 4);
           x.upload(in.bytes.data());
           test.quantize(
               Matrix{x.data(), rows, cols, DType::bf16},
               Fp8Matrix{static_cast<uint8_t*>(codes.data()), static_cast<float*>(scales.data()),
                         rows, cols, block, opt.format},
               opt, nullptr);
           std::vector<uint8_t> got(rows * cols);
           if (!codes.download(got.data())) return fail("wrote outside its output");
           const Quantized r = run_quantize(ref, in, DType::bf16, rows, cols, block, {});
           if (got != r.codes) return fail("codes differ from a quantization without the sum");
           want += r.stats;
         }
         const Host in = make_input(special_values(rng, rows, cols), DType::f32);
         Guarded x(test, in.bytes.size()), a(test, rows * cols),
             as(test, scale_count(ScaleBlock::row1x128, rows, cols) * 4), t(test, rows * cols),
             ts(test, scale_count(ScaleBlock::row1x128, cols, rows) * 4);
         x.upload(in.bytes.data());
         test.quantize_with_transpose(
             Matrix{x.data(), rows, cols, DType::f32},
             Fp8Matrix{static_cast<uint8_t*>(a.data()), static_cast<float*>(as.data()), rows, cols,
                       ScaleBlock::row1x128, opt.format},
             Fp8Matrix{static_cast<uint8_t*>(t.data()), static_cast<float*>(ts.data()), cols, rows,
                       ScaleBlock::row1x128, opt.format},
             opt, nullptr, nullptr);
         want += run_quantize(ref, in, DType::f32, rows, cols, ScaleBlock::row1x128, {}).stats;
         QuantStatsSum got;
         if (!sum.download(&got)) return fail("wrote outside the sum's record");
         Quantized g, w;
         g.codes = w.codes = {};
         g.stats = got.stats();
         w.stats = want;
         const Result r = compare(g, w, ScaleBlock::row1x128, 0, 0, 1e-6);
         if (r.outcome != Outcome::pass) return fail("summed statistics: " + r.detail);
         return pass(fmt("%lld elements summed; rel. quant. error %.4f",
                         static_cast<long long>(got.elements), got.stats().relative_error()));
       }});
}

// equal_bytes (the layer audit's comparison of FP8 tiles and BF16 copies where they live) on
// `bytes` random bytes at byte offsets oa/ob into their buffers (unaligned starts take the byte
// path): equal copies, then one byte changed at the first, a middle and the last position.
void add_equal_bytes_case(Registry& reg, size_t bytes, size_t oa, size_t ob) {
  reg.push_back({fmt("equal_bytes %zu bytes, offsets %zu/%zu", bytes, oa, ob),
                 [=](Backend&, Backend& test, Rng& rng) {
                   std::vector<uint8_t> a(bytes + oa), b(bytes + ob);
                   for (size_t i = 0; i < bytes; ++i)
                     a[oa + i] = b[ob + i] = static_cast<uint8_t>(rng.next());
                   Guarded A(test, a.size()), B(test, b.size());
                   A.upload(a.data());
                   auto equal = [&]() {
                     B.upload(b.data());
                     return test.equal_bytes(static_cast<uint8_t*>(A.data()) + oa,
                                             static_cast<uint8_t*>(B.data()) + ob, bytes);
                   };
                   if (!equal()) return fail("equal bytes reported different");
                   for (size_t at : {size_t{0}, bytes / 2, bytes - 1}) {
                     b[ob + at] ^= static_cast<uint8_t>(1u << (at % 8));
                     if (equal()) return fail(fmt("a difference at byte %zu was not seen", at));
                     b[ob + at] ^= static_cast<uint8_t>(1u << (at % 8));
                   }
                   if (!test.equal_bytes(A.data(), A.data(), bytes))
                     return fail("a buffer differs from itself");
                   std::vector<uint8_t> back(a.size());
                   if (!A.download(back.data()) || back != a) return fail("changed its inputs");
                   return pass("equal and single-byte differences told apart");
                 }});
}

// The batched equal_bytes (one synchronisation for a layer's comparisons): pairs of awkward
// sizes and offsets, an empty one, a buffer against itself, and a difference in one pair only —
// each pair's answer must be its own, as the single-pair call gives it.
void add_equal_bytes_batch_case(Registry& reg) {
  reg.push_back({"equal_bytes batch: 6 pairs, one differing at a time",
                 [](Backend&, Backend& test, Rng& rng) {
                   const size_t sizes[] = {1, 4096, 4099, 0, 777, 50001};
                   const size_t offsets[] = {0, 0, 3, 0, 1, 5};
                   std::vector<std::vector<uint8_t>> a, b;
                   std::vector<Guarded> A, B;
                   for (size_t i = 0; i < std::size(sizes); ++i) {
                     a.emplace_back(sizes[i] + offsets[i]);
                     b.emplace_back(sizes[i] + 1);
                     for (size_t k = 0; k < sizes[i]; ++k)
                       a[i][offsets[i] + k] = b[i][1 + k] = static_cast<uint8_t>(rng.next());
                     A.emplace_back(test, a[i].size());
                     B.emplace_back(test, b[i].size());
                     A[i].upload(a[i].data());
                   }
                   auto compare = [&]() {
                     std::vector<Backend::BytesPair> pairs;
                     for (size_t i = 0; i < std::size(sizes); ++i) {
                       B[i].upload(b[i].data());
                       pairs.push_back({static_cast<uint8_t*>(A[i].data()) + offsets[i],
                                        static_cast<uint8_t*>(B[i].data()) + 1, sizes[i]});
                     }
                     pairs.push_back({A[1].data(), A[1].data(), sizes[1]});  // itself
                     return test.equal_bytes(pairs);
                   };
                   std::vector<bool> same = compare();
                   if (same != std::vector<bool>(std::size(sizes) + 1, true))
                     return fail("equal pairs reported different");
                   for (size_t i = 0; i < std::size(sizes); ++i) {
                     if (sizes[i] == 0) continue;
                     const size_t at = sizes[i] - 1;
                     b[i][1 + at] ^= 0x80;
                     same = compare();
                     b[i][1 + at] ^= 0x80;
                     for (size_t k = 0; k < same.size(); ++k)
                       if (same[k] != (k != i))
                         return fail(fmt("with pair %zu changed, pair %zu reported %s", i, k,
                                         same[k] ? "equal" : "different"));
                   }
                   return pass("each pair told apart in one call");
                 }});
}

}  // namespace

void add_quantize_cases(Registry& reg) {
  add_equal_bytes_batch_case(reg);
  for (auto [bytes, oa, ob] : std::vector<std::tuple<size_t, size_t, size_t>>{
           {1, 0, 0}, {4096, 0, 0}, {4099, 0, 0}, {1000003, 0, 0}, {777, 3, 0}, {50001, 1, 5}})
    add_equal_bytes_case(reg, bytes, oa, ob);
  for (auto [r, c] : kShapes) {
    add_quantize_case(reg, r, c, DType::f32, ScaleBlock::row1x128, {}, false);
    add_quantize_case(reg, r, c, DType::bf16, ScaleBlock::row1x128, {}, false);
    add_quantize_case(reg, r, c, DType::bf16, ScaleBlock::tile128x128, {}, false);
    add_quantize_case(reg, r, c, DType::f32, ScaleBlock::tile128x128, {Fp8Format::e4m3, true},
                      false);
    add_quantize_case(reg, r, c, DType::bf16, ScaleBlock::row1x128, {Fp8Format::e5m2, false},
                      false);
    add_transpose_quantize_case(reg, r, c, DType::bf16);
  }
  add_quantize_case(reg, 257, 515, DType::f32, ScaleBlock::row1x128, {}, true);
  add_quantize_case(reg, 257, 515, DType::f32, ScaleBlock::tile128x128, {}, true);
  add_quantize_case(reg, 257, 515, DType::bf16, ScaleBlock::row1x128, {Fp8Format::e4m3, true},
                    true);
  add_quantize_case(reg, 257, 515, DType::f32, ScaleBlock::row1x128, {Fp8Format::e5m2, false},
                    true);
  add_transpose_quantize_case(reg, 300, 257, DType::f32);
  // Whole tiles with edges both ways, rows a multiple of 8 (CUDA: from registers, edges staged).
  add_transpose_quantize_case(reg, 264, 1032, DType::bf16);
  add_transpose_quantize_case(reg, 136, 264, DType::f32);
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {257, 515}, {130, 1000}}) {
    add_scale_histogram_case(reg, r, c, ScaleBlock::row1x128, -32, 8);
    add_scale_histogram_case(reg, r, c, ScaleBlock::tile128x128, -32, 8);
  }
  add_scale_histogram_case(reg, 4099, 385, ScaleBlock::row1x128, -12, -7);  // under and overflow
  add_scale_histogram_case(reg, 0, 7, ScaleBlock::row1x128, -32, 8);
  add_stats_sum_case(reg, 1, 7);
  add_stats_sum_case(reg, 257, 515);
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {257, 259}, {130, 1000}}) {
    add_dequantize_case(reg, r, c, ScaleBlock::row1x128, DType::f32);
    add_dequantize_case(reg, r, c, ScaleBlock::tile128x128, DType::bf16);
    add_transpose_fp8_case(reg, r, c);
  }
}

}  // namespace fp8rl::optest
