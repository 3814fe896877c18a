#include "model/weight_audit.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "core/bf16.hpp"
#include "fp8/codec.hpp"

namespace fp8rl {

namespace {

struct HostFp8 {
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;
  int64_t rows = 0, cols = 0;
  ScaleBlock block = ScaleBlock::tile128x128;
  Fp8Format format = Fp8Format::e4m3;

  bool operator==(const HostFp8& o) const {
    return rows == o.rows && cols == o.cols && format == o.format && codes == o.codes &&
           scale_inv.size() == o.scale_inv.size() &&
           std::memcmp(scale_inv.data(), o.scale_inv.data(), scale_inv.size() * 4) == 0;
  }
  float value(int64_t r, int64_t c) const {
    return fp8_to_float(codes[static_cast<size_t>(r * cols + c)], format) *
           scale_inv[static_cast<size_t>(scale_index(block, rows, cols, r, c))];
  }
};

HostFp8 download(Backend& be, const Fp8Matrix& q) {
  HostFp8 h;
  h.rows = q.rows;
  h.cols = q.cols;
  h.block = q.block;
  h.format = q.format;
  h.codes.resize(static_cast<size_t>(q.rows * q.cols));
  h.scale_inv.resize(static_cast<size_t>(scale_count(q.block, q.rows, q.cols)));
  be.download(h.codes.data(), q.codes, h.codes.size());
  be.download(h.scale_inv.data(), q.scale_inv, h.scale_inv.size() * 4);
  return h;
}

// The FP32 values [rows, cols] of FP8 tiles.
std::vector<float> dequantize(const HostFp8& h) {
  std::vector<float> v(static_cast<size_t>(h.rows * h.cols));
  for (int64_t r = 0; r < h.rows; ++r)
    for (int64_t c = 0; c < h.cols; ++c) v[static_cast<size_t>(r * h.cols + c)] = h.value(r, c);
  return v;
}

// The weights one side computes with, as FP32 values [out, in], plus the raw form that must
// match bit for bit (FP8 tiles of W and Wᵀ, or BF16 bits).
struct Side {
  Precision precision;
  std::vector<float> values;
  std::vector<HostFp8> tiles;
  std::vector<uint16_t> bf16_bits;
};

Side generator_side(Backend& be, const Linear& lin) {
  Side s{lin.precision(), {}, {}, {}};
  const int64_t N = lin.out_features(), K = lin.in_features();
  if (s.precision == Precision::fp8) {
    s.tiles.push_back(download(be, *lin.fp8_weight()));
    s.tiles.push_back(download(be, lin.fp8_weight_transposed()->q));
    s.values = dequantize(s.tiles[0]);
    return s;
  }
  s.values.resize(static_cast<size_t>(N * K));
  if (s.precision == Precision::bf16) {
    s.bf16_bits.resize(s.values.size());
    be.download(s.bf16_bits.data(), lin.bf16_weight()->data, s.bf16_bits.size() * 2);
    for (size_t i = 0; i < s.values.size(); ++i) s.values[i] = bf16_to_float(bf16{s.bf16_bits[i]});
  } else {
    be.download(s.values.data(), lin.weight().master.buf.data(), s.values.size() * 4);
  }
  return s;
}

// The trainer's FP8 tiles of W and Wᵀ, made in backend memory from the master (or copied from
// a checkpoint's tiles while they are in use).
std::pair<Fp8Tensor, Fp8Tensor> trainer_tiles(Backend& be, const Linear& lin,
                                              const QuantOptions& qopt) {
  const int64_t N = lin.out_features(), K = lin.in_features();
  Fp8Tensor w = Fp8Tensor::make(be, N, K, ScaleBlock::tile128x128, qopt.format);
  const Fp8Tensor* given = lin.given_fp8_weight();
  if (given && given->q.format == qopt.format) {
    be.copy(w.q.codes, given->q.codes, static_cast<size_t>(N * K));
    be.copy(w.q.scale_inv, given->q.scale_inv,
            static_cast<size_t>(scale_count(ScaleBlock::tile128x128, N, K)) * 4);
  } else {
    be.quantize(lin.weight().master.m(), w.q, qopt, nullptr);
  }
  Fp8Tensor wt = Fp8Tensor::make(be, K, N, ScaleBlock::tile128x128, qopt.format);
  be.transpose_fp8(w.q, wt.q);
  return {std::move(w), std::move(wt)};
}

// The byte ranges that must hold the same bits for the generator to compute with exactly the
// trainer's weights in precision p — the FP8 tiles of W and Wᵀ, or the BF16 copy against the
// master rounded on the backend (bit-exact with the host's rounding); FP32 reads the master
// itself — with the trainer-side copies they point into. nullopt when the precisions differ
// or a compute copy is missing: a mismatch without comparing.
struct Comparison {
  std::vector<Backend::BytesPair> pairs;
  std::vector<Fp8Tensor> fp8;  // the trainer's tiles, alive until compared
  std::optional<Tensor> bf16;
};

void add_tiles(Comparison& c, const Fp8Matrix& a, const Fp8Matrix& b) {
  c.pairs.push_back({a.codes, b.codes, static_cast<size_t>(a.rows * a.cols)});
  c.pairs.push_back(
      {a.scale_inv, b.scale_inv, static_cast<size_t>(scale_count(a.block, a.rows, a.cols)) * 4});
}

std::optional<Comparison> comparison_on_backend(Backend& be, const Linear& lin, Precision p,
                                                const QuantOptions& qopt) {
  if (lin.precision() != p) return std::nullopt;
  Comparison c;
  switch (p) {
    case Precision::fp32:
      return c;
    case Precision::bf16: {
      const Matrix* g = lin.bf16_weight();
      if (!g) return std::nullopt;
      const Matrix master = lin.weight().master.m();
      c.bf16 = Tensor::make(be, master.rows, master.cols, DType::bf16);
      be.convert(master, c.bf16->m());
      c.pairs.push_back(
          {g->data, c.bf16->buf.data(), static_cast<size_t>(master.rows * master.cols) * 2});
      return c;
    }
    case Precision::fp8: {
      const Fp8Matrix* g = lin.fp8_weight();
      const Fp8Tensor* gt = lin.fp8_weight_transposed();
      if (!g || !gt) return std::nullopt;
      auto [w, wt] = trainer_tiles(be, lin, qopt);
      const bool shaped = g->rows == w.q.rows && g->cols == w.q.cols && g->format == w.q.format &&
                          g->block == w.q.block && gt->q.rows == wt.q.rows &&
                          gt->q.cols == wt.q.cols && gt->q.format == wt.q.format &&
                          gt->q.block == wt.q.block;
      if (!shaped) return std::nullopt;
      add_tiles(c, *g, w.q);
      add_tiles(c, gt->q, wt.q);
      c.fp8.push_back(std::move(w));
      c.fp8.push_back(std::move(wt));
      return c;
    }
  }
  return std::nullopt;
}

Side trainer_side(Backend& be, const Linear& lin, Precision p, const QuantOptions& qopt) {
  Side s{p, {}, {}, {}};
  const int64_t N = lin.out_features(), K = lin.in_features();
  if (p == Precision::fp8) {
    const auto [w, wt] = trainer_tiles(be, lin, qopt);
    s.tiles.push_back(download(be, w.q));
    s.tiles.push_back(download(be, wt.q));
    s.values = dequantize(s.tiles[0]);
    return s;
  }
  // BF16 and FP32 start from the master (only FP8 does not need it on the host).
  s.values.resize(static_cast<size_t>(N * K));
  be.download(s.values.data(), lin.weight().master.buf.data(), s.values.size() * 4);
  if (p == Precision::bf16) {
    s.bf16_bits.resize(s.values.size());
    for (size_t i = 0; i < s.values.size(); ++i) {
      s.bf16_bits[i] = float_to_bf16(s.values[i]).bits;
      s.values[i] = bf16_to_float(bf16{s.bf16_bits[i]});
    }
  }
  return s;
}

}  // namespace

std::vector<AuditRow> audit_weights(DecoderModel& model, const PrecisionMap& trainer_map,
                                    const QuantOptions& trainer_qopt) {
  Backend& be = model.backend();
  std::vector<AuditRow> rows;
  const std::vector<LinearSlot> slots = model.linear_slots();
  for (size_t first = 0; first < slots.size();) {
    // One layer at a time: its linears' bits compared in one synchronisation, the trainer's
    // copies of one layer alive at once.
    size_t end = first;
    while (end < slots.size() && slots[end].layer == slots[first].layer) ++end;
    std::vector<std::optional<Comparison>> comparisons;
    std::vector<Backend::BytesPair> pairs;
    for (size_t i = first; i < end; ++i) {
      comparisons.push_back(comparison_on_backend(be, model.linear(slots[i]),
                                                  trainer_map.get(slots[i]), trainer_qopt));
      if (comparisons.back())
        pairs.insert(pairs.end(), comparisons.back()->pairs.begin(),
                     comparisons.back()->pairs.end());
    }
    const std::vector<bool> same = be.equal_bytes(pairs);
    size_t at = 0;
    for (size_t i = first; i < end; ++i) {
      const LinearSlot& s = slots[i];
      const Linear& lin = model.linear(s);
      const Precision want = trainer_map.get(s);
      const std::optional<Comparison>& c = comparisons[i - first];
      bool equal = c.has_value();
      if (c) {
        for (size_t k = 0; k < c->pairs.size(); ++k) equal = equal && same[at + k];
        at += c->pairs.size();
      }
      AuditRow row;
      row.layer = s.layer;
      // "q", "router", "e5.up": the linear within its layer.
      row.module = s.name().substr(s.name().find('.') + 1);
      // The usual case, decided without copying the weights out of the backend: the same bits
      // on both sides, so no difference to measure.
      if (equal) {
        row.generator_precision = row.trainer_precision = precision_name(want);
        row.max_abs_diff = 0;
        row.ok = true;
        rows.push_back(std::move(row));
        continue;
      }
      // A mismatch: both sides on the host, for the size of the difference.
      const Side g = generator_side(be, lin);
      const Side t = trainer_side(be, lin, want, trainer_qopt);
      row.generator_precision = precision_name(g.precision);
      row.trainer_precision = precision_name(t.precision);
      double diff = 0;
      for (size_t k = 0; k < g.values.size(); ++k) {
        const double d = std::fabs(double(g.values[k]) - double(t.values[k]));
        if (std::isnan(d)) {  // NaN is the largest difference there is: it must show
          diff = d;
          break;
        }
        diff = std::max(diff, d);
      }
      row.max_abs_diff = diff;
      row.ok = g.precision == t.precision && g.tiles == t.tiles && g.bf16_bits == t.bf16_bits &&
               (g.precision != Precision::fp32 || diff == 0);
      rows.push_back(std::move(row));
    }
    first = end;
  }
  return rows;
}

}  // namespace fp8rl
