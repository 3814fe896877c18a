#include "tblog/tb_event.hpp"

#include <bit>
#include <cfloat>
#include <cmath>

#include "core/bf16.hpp"
#include "core/error.hpp"
#include "tblog/proto_wire.hpp"

namespace fp8rl::tblog {
namespace {

using proto::Field;
using proto::Reader;
using proto::WireType;

// types.proto's DataType numbers.
enum DataType : uint64_t {
  kFloat = 1,
  kDouble = 2,
  kInt32 = 3,
  kUint8 = 4,
  kInt16 = 5,
  kInt8 = 6,
  kString = 7,
  kInt64 = 9,
  kBool = 10,
  kBfloat16 = 14,
  kHalf = 19,
  kUint32 = 22,
  kUint64 = 23,
};

// SummaryMetadata.DataClass.
constexpr uint64_t kDataClassScalar = 1;
constexpr uint64_t kDataClassTensor = 2;

double half_to_double(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int frac = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(frac, -24);
  else if (exp == 31)
    v = frac ? std::nan("") : INFINITY;
  else
    v = std::ldexp(frac + 1024, exp - 25);
  return sign ? -v : v;
}

uint64_t load_le(const char* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// A TensorProto's dtype, shape and elements (numbers as doubles; strings for DT_STRING).
struct Tensor {
  uint64_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<double> numbers;
  std::vector<std::string> strings;
};

std::vector<int64_t> read_shape(std::string_view msg) {
  std::vector<int64_t> dims;
  Reader r(msg, "TensorShapeProto");
  Field f;
  while (r.next(&f)) {
    if (f.number != 2 || f.type != WireType::kBytes) continue;  // dim
    Reader d(f.bytes, "TensorShapeProto.Dim");
    Field g;
    int64_t size = 0;
    while (d.next(&g))
      if (g.number == 1 && g.type == WireType::kVarint) size = g.as_int64();
    dims.push_back(size);
  }
  return dims;
}

double element_from_content(uint64_t dtype, const char* p) {
  switch (dtype) {
    case kFloat:
      return std::bit_cast<float>(static_cast<uint32_t>(load_le(p, 4)));
    case kDouble:
      return std::bit_cast<double>(load_le(p, 8));
    case kInt32:
      return static_cast<int32_t>(load_le(p, 4));
    case kUint8:
      return static_cast<uint8_t>(load_le(p, 1));
    case kInt16:
      return static_cast<int16_t>(load_le(p, 2));
    case kInt8:
      return static_cast<int8_t>(load_le(p, 1));
    case kInt64:
      return static_cast<double>(static_cast<int64_t>(load_le(p, 8)));
    case kBool:
      return load_le(p, 1) != 0;
    case kBfloat16:
      return bf16_to_float(bf16{static_cast<uint16_t>(load_le(p, 2))});
    case kHalf:
      return half_to_double(static_cast<uint16_t>(load_le(p, 2)));
    case kUint32:
      return static_cast<double>(static_cast<uint32_t>(load_le(p, 4)));
    case kUint64:
      return static_cast<double>(load_le(p, 8));
    default:
      return std::nan("");
  }
}

size_t element_size(uint64_t dtype) {
  switch (dtype) {
    case kDouble:
    case kInt64:
    case kUint64:
      return 8;
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    case kInt16:
    case kBfloat16:
    case kHalf:
      return 2;
    case kUint8:
    case kInt8:
    case kBool:
      return 1;
    default:
      return 0;
  }
}

Tensor read_tensor(std::string_view msg) {
  constexpr const char* kWhat = "TensorProto";
  Tensor t;
  Reader r(msg, kWhat);
  Field f;
  std::string_view content;
  std::vector<float> floats;
  std::vector<uint64_t> ints;
  while (r.next(&f)) {
    switch (f.number) {
      case 1:
        t.dtype = f.varint;
        break;
      case 2:
        if (f.type == WireType::kBytes) t.shape = read_shape(f.bytes);
        break;
      case 4:
        if (f.type == WireType::kBytes) content = f.bytes;
        break;
      case 5:
        proto::append_floats(f, floats, kWhat);
        break;
      case 6:
        proto::append_doubles(f, t.numbers, kWhat);
        break;
      case 7:   // int_val
      case 10:  // int64_val
      case 11:  // bool_val
      case 13:  // half_val (half and bfloat16 bits)
      case 16:  // uint32_val
      case 17:  // uint64_val
        proto::append_varints(f, ints, kWhat);
        break;
      case 8:
        if (f.type == WireType::kBytes) t.strings.emplace_back(f.bytes);
        break;
      default:
        break;
    }
  }
  for (float x : floats) t.numbers.push_back(x);
  for (uint64_t v : ints) {
    switch (t.dtype) {
      case kHalf:
        t.numbers.push_back(half_to_double(static_cast<uint16_t>(v)));
        break;
      case kBfloat16:
        t.numbers.push_back(bf16_to_float(bf16{static_cast<uint16_t>(v)}));
        break;
      case kInt32:
      case kInt16:
      case kInt8:
        t.numbers.push_back(static_cast<int32_t>(v));
        break;
      case kBool:
        t.numbers.push_back(v != 0);
        break;
      case kUint64:
      case kUint32:
      case kUint8:
        t.numbers.push_back(static_cast<double>(v));
        break;
      default:
        t.numbers.push_back(static_cast<double>(static_cast<int64_t>(v)));
        break;
    }
  }
  if (!content.empty() && t.dtype != kString) {
    const size_t size = element_size(t.dtype);
    if (size == 0 || content.size() % size != 0)
      throw Error("TensorProto: tensor_content of " + std::to_string(content.size()) +
                  " bytes for data type " + std::to_string(t.dtype));
    for (size_t i = 0; i < content.size(); i += size)
      t.numbers.push_back(element_from_content(t.dtype, content.data() + i));
  }
  return t;
}

// A HistogramProto.
Histogram read_histogram(std::string_view msg) {
  constexpr const char* kWhat = "HistogramProto";
  double min = 0;
  std::vector<double> limits, buckets;
  Reader r(msg, kWhat);
  Field f;
  while (r.next(&f)) {
    if (f.number == 1 && f.type == WireType::kFixed64) min = f.as_double();
    if (f.number == 6) proto::append_doubles(f, limits, kWhat);
    if (f.number == 7) proto::append_doubles(f, buckets, kWhat);
  }
  return histogram_from_buckets(min, limits, buckets);
}

// google.protobuf.Value (struct.proto) as JSON.
Json read_struct_value(std::string_view msg, int depth);

Json read_struct(std::string_view msg, int depth) {
  Json::Object o;
  Reader r(msg, "google.protobuf.Struct");
  Field f;
  while (r.next(&f)) {
    if (f.number != 1 || f.type != WireType::kBytes) continue;  // fields map entry
    Reader e(f.bytes, "google.protobuf.Struct entry");
    Field g;
    std::string key;
    Json value;
    while (e.next(&g)) {
      if (g.number == 1 && g.type == WireType::kBytes) key = std::string(g.bytes);
      if (g.number == 2 && g.type == WireType::kBytes) value = read_struct_value(g.bytes, depth);
    }
    o[key] = std::move(value);
  }
  return Json(std::move(o));
}

Json read_struct_value(std::string_view msg, int depth) {
  if (depth > 32) throw Error("google.protobuf.Value: nested more than 32 deep");
  Reader r(msg, "google.protobuf.Value");
  Field f;
  Json v;
  while (r.next(&f)) {
    switch (f.number) {
      case 2:
        if (f.type == WireType::kFixed64) v = f.as_double();
        break;
      case 3:
        if (f.type == WireType::kBytes) v = std::string(f.bytes);
        break;
      case 4:
        v = f.as_bool();
        break;
      case 5:
        if (f.type == WireType::kBytes) v = read_struct(f.bytes, depth + 1);
        break;
      case 6:
        if (f.type == WireType::kBytes) {
          Json::Array a;
          Reader l(f.bytes, "google.protobuf.ListValue");
          Field g;
          while (l.next(&g))
            if (g.number == 1 && g.type == WireType::kBytes)
              a.push_back(read_struct_value(g.bytes, depth + 1));
          v = Json(std::move(a));
        }
        break;
      default:
        break;
    }
  }
  return v;
}

// HParamsPluginData's session_start_info hparams, or null.
Json read_hparams(std::string_view content) {
  Reader r(content, "HParamsPluginData");
  Field f;
  while (r.next(&f)) {
    if (f.number != 3 || f.type != WireType::kBytes) continue;
    Json::Object hparams;
    Reader s(f.bytes, "SessionStartInfo");
    Field g;
    while (s.next(&g)) {
      if (g.number != 1 || g.type != WireType::kBytes) continue;
      Reader e(g.bytes, "SessionStartInfo.hparams entry");
      Field h;
      std::string key;
      Json value;
      while (e.next(&h)) {
        if (h.number == 1 && h.type == WireType::kBytes) key = std::string(h.bytes);
        if (h.number == 2 && h.type == WireType::kBytes) value = read_struct_value(h.bytes, 0);
      }
      hparams[key] = std::move(value);
    }
    return Json(std::move(hparams));
  }
  return Json();
}

// One Summary.Value into out (kind kOther when nothing is kept).
TbValue read_value(std::string_view msg, std::map<std::string, std::string>& plugins) {
  TbValue v;
  std::string node_name, plugin;
  std::string_view plugin_content, tensor, histo;
  bool simple = false;
  float simple_value = 0;
  Reader r(msg, "Summary.Value");
  Field f;
  while (r.next(&f)) {
    switch (f.number) {
      case 1:
        if (f.type == WireType::kBytes) v.tag = std::string(f.bytes);
        break;
      case 2:
        if (f.type == WireType::kFixed32) simple = true, simple_value = f.as_float();
        break;
      case 5:
        if (f.type == WireType::kBytes) histo = f.bytes;
        break;
      case 7:
        if (f.type == WireType::kBytes) node_name = std::string(f.bytes);
        break;
      case 8:
        if (f.type == WireType::kBytes) tensor = f.bytes;
        break;
      case 9:
        if (f.type == WireType::kBytes) {
          Reader m(f.bytes, "SummaryMetadata");
          Field g;
          while (m.next(&g)) {
            if (g.number != 1 || g.type != WireType::kBytes) continue;
            Reader p(g.bytes, "SummaryMetadata.PluginData");
            Field h;
            while (p.next(&h)) {
              if (h.number == 1 && h.type == WireType::kBytes) plugin = std::string(h.bytes);
              if (h.number == 2 && h.type == WireType::kBytes) plugin_content = h.bytes;
            }
          }
        }
        break;
      default:
        break;
    }
  }
  if (v.tag.empty()) v.tag = node_name;
  if (plugin.empty()) {
    if (auto it = plugins.find(v.tag); it != plugins.end()) plugin = it->second;
  } else {
    plugins[v.tag] = plugin;
  }
  if (plugin == "hparams") {
    v.hparams = read_hparams(plugin_content);
    if (v.hparams.is_object()) v.kind = TbValue::Kind::kHparams;
    return v;
  }
  if (simple) {
    v.kind = TbValue::Kind::kScalar;
    v.scalar = simple_value;
    return v;
  }
  if (!histo.empty()) {
    v.hist = read_histogram(histo);
    if (v.hist.edges.size() >= 2) v.kind = TbValue::Kind::kHistogram;
    return v;
  }
  if (tensor.data() == nullptr) return v;
  Tensor t = read_tensor(tensor);
  if (plugin == "text" || (plugin.empty() && t.dtype == kString)) {
    for (size_t i = 0; i < t.strings.size(); ++i) v.text += (i ? "\n" : "") + t.strings[i];
    v.kind = TbValue::Kind::kText;
    return v;
  }
  if (plugin == "histograms") {
    // [k, 3]: (left edge, right edge, count) per bucket.
    if (t.shape.size() == 2 && t.shape[1] == 3 && t.shape[0] > 0 &&
        t.numbers.size() == static_cast<size_t>(t.shape[0]) * 3) {
      const size_t k = static_cast<size_t>(t.shape[0]);
      v.hist.counts.push_back(0);
      for (size_t i = 0; i < k; ++i) {
        v.hist.edges.push_back(t.numbers[3 * i]);
        v.hist.counts.push_back(std::llround(t.numbers[3 * i + 2]));
      }
      v.hist.edges.push_back(t.numbers[3 * k - 2]);
      v.hist.counts.push_back(0);
      v.kind = TbValue::Kind::kHistogram;
    }
    return v;
  }
  const bool one = t.numbers.size() == 1 && t.strings.empty();
  if (one && (plugin == "scalars" || (plugin.empty() && t.shape.empty()))) {
    v.kind = TbValue::Kind::kScalar;
    v.scalar = t.numbers[0];
  }
  return v;
}

void put_tensor_metadata(proto::Writer& value, const char* plugin, uint64_t data_class) {
  proto::Writer data;
  data.bytes(1, plugin);
  proto::Writer meta;
  meta.bytes(1, data.data());
  meta.varint(4, data_class);
  value.bytes(9, meta.data());
}

std::string event_with(double wall_time, int64_t step, const std::string& summary) {
  proto::Writer e;
  e.f64(1, wall_time);
  e.int64(2, step);
  e.bytes(5, summary);
  return e.take();
}

}  // namespace

Histogram histogram_from_buckets(double min, const std::vector<double>& limits,
                                 const std::vector<double>& buckets) {
  Histogram h;
  const size_t n = std::min(limits.size(), buckets.size());
  if (n == 0) return h;
  const auto count = [&](size_t i) { return std::llround(buckets[i]); };
  if (n >= 3 && limits[n - 1] >= DBL_MAX) {
    h.edges.assign(limits.begin(), limits.begin() + static_cast<std::ptrdiff_t>(n - 1));
    for (size_t i = 0; i < n; ++i) h.counts.push_back(count(i));
  } else if (n >= 2) {
    h.edges.assign(limits.begin(), limits.begin() + static_cast<std::ptrdiff_t>(n));
    for (size_t i = 0; i < n; ++i) h.counts.push_back(count(i));
    h.counts.push_back(0);
  } else {
    h.edges = {std::min(min, limits[0]), limits[0]};
    h.counts = {0, count(0), 0};
  }
  return h;
}

TbEvent decode_event(std::string_view record, std::map<std::string, std::string>& plugins) {
  TbEvent ev;
  Reader r(record, "Event");
  Field f;
  while (r.next(&f)) {
    switch (f.number) {
      case 1:
        if (f.type == WireType::kFixed64) ev.wall_time = f.as_double();
        break;
      case 2:
        if (f.type == WireType::kVarint) ev.step = f.as_int64();
        break;
      case 3:
        if (f.type == WireType::kBytes) ev.file_version = std::string(f.bytes);
        break;
      case 5:
        if (f.type == WireType::kBytes) {
          Reader s(f.bytes, "Summary");
          Field g;
          while (s.next(&g)) {
            if (g.number != 1 || g.type != WireType::kBytes) continue;
            TbValue v = read_value(g.bytes, plugins);
            if (v.kind == TbValue::Kind::kOther)
              ++ev.skipped;
            else
              ev.values.push_back(std::move(v));
          }
        }
        break;
      case 4:  // graph_def
      case 8:  // tagged_run_metadata
      case 9:  // meta_graph_def
        ++ev.skipped;
        break;
      default:  // log_message, session_log, source_metadata
        break;
    }
  }
  return ev;
}

std::string encode_file_version(double wall_time) {
  proto::Writer e;
  e.f64(1, wall_time);
  e.bytes(3, "brain.Event:2");
  return e.take();
}

std::string encode_scalars(double wall_time, int64_t step,
                           const std::vector<std::pair<std::string, double>>& scalars) {
  proto::Writer summary;
  for (const auto& [tag, value] : scalars) {
    proto::Writer tensor;
    tensor.varint(1, kDouble);
    tensor.bytes(2, "");  // shape []
    tensor.packed_doubles(6, {value});
    proto::Writer v;
    v.bytes(1, tag);
    put_tensor_metadata(v, "scalars", kDataClassScalar);
    v.bytes(8, tensor.data());
    summary.bytes(1, v.data());
  }
  return event_with(wall_time, step, summary.data());
}

std::string encode_simple_value(double wall_time, int64_t step, const std::string& tag,
                                float value) {
  proto::Writer v;
  v.bytes(1, tag);
  v.f32(2, value);
  proto::Writer summary;
  summary.bytes(1, v.data());
  return event_with(wall_time, step, summary.data());
}

std::string encode_histogram(double wall_time, int64_t step, const std::string& tag,
                             const Histogram& h) {
  check(h.edges.size() >= 2 && h.counts.size() == h.edges.size() + 1,
        "encode_histogram('" + tag + "'): " + std::to_string(h.edges.size()) + " edges and " +
            std::to_string(h.counts.size()) + " counts");
  std::vector<double> limits = h.edges, buckets;
  limits.push_back(DBL_MAX);
  double num = 0;
  for (int64_t c : h.counts)
    buckets.push_back(static_cast<double>(c)), num += static_cast<double>(c);
  proto::Writer histo;
  histo.f64(1, h.edges.front());
  histo.f64(2, h.edges.back());
  histo.f64(3, num);
  histo.packed_doubles(6, limits);
  histo.packed_doubles(7, buckets);
  proto::Writer v;
  v.bytes(1, tag);
  v.bytes(5, histo.data());
  proto::Writer summary;
  summary.bytes(1, v.data());
  return event_with(wall_time, step, summary.data());
}

std::string encode_text(double wall_time, int64_t step, const std::string& tag,
                        const std::string& text) {
  proto::Writer tensor;
  tensor.varint(1, kString);
  tensor.bytes(2, "");
  tensor.bytes(8, text);
  proto::Writer v;
  v.bytes(1, tag);
  put_tensor_metadata(v, "text", kDataClassTensor);
  v.bytes(8, tensor.data());
  proto::Writer summary;
  summary.bytes(1, v.data());
  return event_with(wall_time, step, summary.data());
}

}  // namespace fp8rl::tblog
