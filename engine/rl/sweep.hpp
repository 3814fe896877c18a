// Sweeps (docs/sweeps.md): a YAML file naming a base configuration (a preset or a config file,
// with `key=value` overrides, as `fp8rl train` takes them) and axes — seeds, precision variants,
// any configuration key — expanded as a product, or a list of points (or both: each listed
// point with every combination of the axes). Every point's configuration is built and
// validated by the run configuration's own rules before anything starts; a bad file is one
// error naming the key (and the axis value) it is about.
//
//   name: demo-precision
//   preset: demo                 # or   config: my.yaml   (relative to this file)
//   set: [grpo.steps=400]        # overrides for every point
//   axes:
//     seed: [1, 2, 3, 4, 5]      # a configuration key and its values
//     precision:                 # a named axis: value → the settings it makes
//       bf16: {precision.default: bf16}   (block form: one "key: value" per line)
//       fp8: …
//   replicate: seed              # the axis of repeats (default: seed, when an axis has it)
//   concurrency: 1               # runs at once (default: what the cores allow)
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json.hpp"
#include "rl/run_config.hpp"

namespace fp8rl {

// One axis of a sweep: its name and, per value, a label and the settings it makes.
struct SweepAxis {
  std::string name;  // a configuration key ("seed", "optimizer.lr") or a variant name
  bool variant = false;  // named values, each a mapping of settings; else values of `name`
  struct Value {
    std::string label;                              // "3", "0.001", "fp8"
    std::vector<std::pair<std::string, Json>> settings;  // dotted key → value
  };
  std::vector<Value> values;
};

// One point of an expanded sweep: a run to make.
struct SweepPointSpec {
  int64_t index = 0;
  std::string name;  // the run's name: "<sweep> axis=label …"
  std::vector<std::pair<std::string, std::string>> axis_values;  // axis → label, axis order
  std::vector<std::string> sets;  // the point's own overrides, as `--set` text
  RunConfig config;               // validated

  // {"axis": "label", …}
  Json axis_json() const;
};

struct SweepSpec {
  std::string name;
  std::string source;       // the file ("" for text)
  std::string preset;       // the base: a preset …
  std::string config_file;  // … or a configuration file (absolute, or as given)
  std::vector<std::string> sets;
  std::vector<SweepAxis> points;  // `points:` as one axis per key, taken together (not crossed)
  size_t point_count = 0;         // how many listed points (0: no `points:`)
  std::vector<SweepAxis> axes;    // crossed with each other and with the points
  std::string replicate;          // the axis of repeats, "" for none
  int64_t concurrency = 0;        // 0: not given
  Json doc;                       // the file as read

  // Parses a sweep's YAML text; source names the file in errors and anchors a relative
  // `config:`. Throws Error("sweep file SOURCE: …") naming the key on a bad file.
  static SweepSpec parse(const std::string& text, const std::string& source);
  static SweepSpec load(const std::string& path);

  // The axis names in expansion order: the replicate axis first (slowest), then the listed
  // points' keys, then the other axes.
  std::vector<std::string> axis_names() const;
  // Every point, each configuration built and validated. Throws Error naming the point's axis
  // values and the key on the first configuration the run configuration refuses.
  std::vector<SweepPointSpec> expand() const;
  // The same sweep gives the same hash (its name and every point's configuration).
  static std::string hash(const std::string& name, const std::vector<SweepPointSpec>& points);
};

// A Json value as a sweep shows it: numbers shortest ("0.001", "3"), strings bare, lists in
// flow form ("[a, b]").
std::string sweep_value_text(const Json& v);

}  // namespace fp8rl
