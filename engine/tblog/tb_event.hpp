// TensorBoard's Event and Summary protocol buffers (tensorflow/core/util/event.proto,
// framework/summary.proto, tensor.proto, tensor_shape.proto, types.proto, and the hparams
// plugin's plugin_data.proto), decoded into what a run records — scalars, histograms, text,
// hyperparameters — and encoded back for our own runs.
//
// Scalars come three ways: Summary.Value.simple_value (a float: TensorFlow 1, PyTorch's
// add_scalar), or a one-element tensor with the "scalars" plugin (TensorFlow 2, PyTorch's
// new_style; float, double, half, bfloat16 or integer). Histograms: HistogramProto, or a [k, 3]
// tensor of (left, right, count) with the "histograms" plugin. Text: a string tensor with the
// "text" plugin. TensorFlow 2 writes a tag's plugin metadata with its first value only, so the
// decoder is given the plugins seen so far, by tag.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "contract/histogram.hpp"
#include "core/json.hpp"

namespace fp8rl::tblog {

struct TbValue {
  enum class Kind { kScalar, kHistogram, kText, kHparams, kOther };
  std::string tag;
  Kind kind = Kind::kOther;
  double scalar = 0;  // kScalar (a float32 simple_value widened exactly)
  Histogram hist;     // kHistogram (contract/histogram.hpp: under- and overflow bins)
  std::string text;   // kText (string tensor elements joined by newlines)
  Json hparams;       // kHparams: the session's hyperparameters, an object (null otherwise)
};

struct TbEvent {
  double wall_time = 0;  // unix seconds
  int64_t step = 0;
  std::string file_version;  // "brain.Event:2" in a file's first record; "" otherwise
  std::vector<TbValue> values;
  int64_t skipped = 0;  // values of kinds not kept (images, audio, graphs, other plugins)
};

// Decodes one record's Event. plugins: tag → plugin name, read and extended. Throws
// fp8rl::Error naming the message that is malformed.
TbEvent decode_event(std::string_view record, std::map<std::string, std::string>& plugins);

// Converts a HistogramProto's buckets to our histogram. limits[i] is the right edge of bucket
// i. TensorFlow ends the limits with DBL_MAX (its buckets then run from −∞ to limits[0] and
// from limits[n−2] up): bucket 0 is the underflow and the last one the overflow. Otherwise
// (numpy-style limits, PyTorch's add_histogram) the first bucket starts at `min`, and the
// histogram gets empty under- and overflow bins around them.
Histogram histogram_from_buckets(double min, const std::vector<double>& limits,
                                 const std::vector<double>& buckets);

// The encoders, each returning a serialized Event. The first record of a file:
std::string encode_file_version(double wall_time);
// A scalar as a DT_DOUBLE tensor of shape [] with the "scalars" plugin (exact: no float
// rounding), the plugin metadata on every value.
std::string encode_scalars(double wall_time, int64_t step,
                           const std::vector<std::pair<std::string, double>>& scalars);
// A scalar as TensorFlow 1 and PyTorch's add_scalar write it: simple_value, a float.
std::string encode_simple_value(double wall_time, int64_t step, const std::string& tag,
                                float value);
// A histogram as HistogramProto: limits = edges then DBL_MAX, buckets = counts (underflow
// first), min/max the first and last edge, num the total.
std::string encode_histogram(double wall_time, int64_t step, const std::string& tag,
                             const Histogram& h);
// Text with the "text" plugin (a string tensor of shape []).
std::string encode_text(double wall_time, int64_t step, const std::string& tag,
                        const std::string& text);

}  // namespace fp8rl::tblog
