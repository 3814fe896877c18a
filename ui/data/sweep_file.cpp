#include "ui/data/sweep_file.hpp"

#include <cctype>
#include <set>

namespace fp8rl::ui {
namespace {

// A YAML scalar as the engine's subset reads it back as the same text: quoted when it holds
// something YAML would read otherwise.
std::string quoted(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_of(":#[]{},'\"&*!|>%@`") == std::string::npos &&
                     s.front() != ' ' && s.back() != ' ' && s.front() != '-';
  if (plain) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += "\\";
    out += c;
  }
  return out + "\"";
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

const std::vector<SweepVariant>& precisionVariants() {
  static const std::vector<SweepVariant> v = {
      {"bf16", "BF16", {{"precision.default", "bf16"}, {"precision.kv_cache", "bf16"}}},
      {"fp8", "FP8 (BF16 KV cache)", {{"precision.default", "fp8"}, {"precision.kv_cache", "bf16"}}},
      {"fp8+kv", "FP8 + FP8 KV cache", {{"precision.default", "fp8"}, {"precision.kv_cache", "fp8"}}},
  };
  return v;
}

size_t SweepDraft::runs() const {
  size_t n = std::max<size_t>(1, seeds.size());
  if (!variants.empty()) n *= variants.size();
  if (!extra_key.empty() && !extra_values.empty()) n *= extra_values.size();
  return n;
}

std::string SweepDraft::shape() const {
  std::string s = std::to_string(runs()) + (runs() == 1 ? " run" : " runs");
  std::string axes;
  const auto add = [&](const std::string& axis, size_t n) {
    axes += (axes.empty() ? "" : " × ") + axis + " (" + std::to_string(n) + ")";
  };
  if (!seeds.empty()) add("seed", seeds.size());
  if (!variants.empty()) add("precision", variants.size());
  if (!extra_key.empty() && !extra_values.empty()) add(extra_key, extra_values.size());
  return axes.empty() ? s : s + ": " + axes;
}

std::string SweepDraft::yaml() const {
  std::string y = "# Written by the studio's Sweep… form: `fp8rl sweep` runs it (docs/sweeps.md).\n";
  y += "name: " + quoted(name) + "\n";
  y += "config: " + quoted(config) + "\n";
  if (concurrency > 0) y += "concurrency: " + std::to_string(concurrency) + "\n";
  y += "axes:\n";
  if (!seeds.empty()) {
    y += "  seed: [";
    for (size_t i = 0; i < seeds.size(); ++i) y += (i ? ", " : "") + seeds[i];
    y += "]\n";
  }
  if (!variants.empty()) {
    y += "  precision:\n";
    for (const auto& v : variants) {
      y += "    " + quoted(v.label) + ":\n";
      for (const auto& [k, val] : v.settings) y += "      " + k + ": " + quoted(val) + "\n";
    }
  }
  if (!extra_key.empty() && !extra_values.empty()) {
    y += "  " + extra_key + ":\n";
    for (const auto& v : extra_values) y += "    - " + quoted(v) + "\n";
  }
  return y;
}

std::vector<std::string> parseSeedList(const std::string& text, std::string* error) {
  std::vector<std::string> out;
  std::set<long long> seen;
  std::string item;
  const auto flush = [&]() -> bool {
    const std::string t = trim(item);
    item.clear();
    if (t.empty()) return true;
    const size_t dash = t.find('-', 1);
    long long lo = 0, hi = 0;
    try {
      size_t used = 0;
      lo = std::stoll(dash == std::string::npos ? t : t.substr(0, dash), &used);
      hi = dash == std::string::npos ? lo : std::stoll(t.substr(dash + 1), &used);
    } catch (const std::exception&) {
      if (error) *error = "'" + t + "' is not a seed or a range of seeds (as 1-5)";
      return false;
    }
    if (lo < 0 || hi < lo || hi - lo > 10000) {
      if (error) *error = "'" + t + "' is not a range of seeds ≥ 0 (as 1-5)";
      return false;
    }
    for (long long s = lo; s <= hi; ++s)
      if (seen.insert(s).second) out.push_back(std::to_string(s));
    return true;
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == ';') {
      if (!flush()) return {};
    } else {
      item += c;
    }
  }
  if (!flush()) return {};
  if (out.empty() && error) *error = "no seeds";
  return out;
}

std::vector<std::string> parseValueList(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ",") {
    if (c == ',' || c == ' ' || c == ';') {
      const std::string t = trim(item);
      if (!t.empty()) out.push_back(t);
      item.clear();
    } else {
      item += c;
    }
  }
  return out;
}

std::string fileStemOf(const std::string& name) {
  std::string s;
  for (char c : name)
    s += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '-';
  return s.empty() ? "sweep" : s;
}

}  // namespace fp8rl::ui
