#include "ui/data/run_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "contract/settings.hpp"
#include "ui/data/run_data.hpp"

namespace fp8rl::ui {

namespace {

std::string number(double v, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

int64_t auditMismatches(const RunData& run) {
  return std::count_if(run.audit.begin(), run.audit.end(), [](const AuditRow& a) { return !a.ok; });
}

std::string auditBadgeText(const RunData& run) {
  if (run.audit.empty()) return "";
  const std::string step = std::to_string(run.audit_step);
  const int64_t bad = auditMismatches(run);
  if (bad == 0) return "audit OK · step " + step;
  return "audit: " + std::to_string(bad) + (bad == 1 ? " mismatch" : " mismatches") + " (step " +
         step + ")";
}

std::string auditRowText(const AuditRow& row) {
  return "L" + std::to_string(row.layer) + "." + row.module + " gen " + row.generator_precision +
         " / trainer " + row.trainer_precision + ", max |Δ| " + number(row.max_abs_diff, "%.3g");
}

std::string auditMismatchList(const RunData& run, size_t max_rows) {
  std::string out;
  size_t shown = 0;
  for (const AuditRow& a : run.audit) {
    if (a.ok) continue;
    if (shown++ < max_rows) out += (out.empty() ? "" : "\n") + auditRowText(a);
  }
  if (shown > max_rows) out += "\n… and " + std::to_string(shown - max_rows) + " more";
  return out;
}

bool klToReferenceOff(const Json& config) {
  // No grpo section: not one of our configurations (an imported run's): nothing to say.
  if (!config.is_object() || !config.contains("grpo")) return false;
  const Json* beta = find_setting_value(config, setting_key::kKlBeta);
  return !beta || (beta->is_number() && beta->as_number() == 0);  // absent: the default, 0
}

Rgb logprobDiffColor(double diff, double scale) {
  if (!std::isfinite(diff)) return {0xcc, 0xcc, 0xcc};
  // Pale ends keep black text readable on the most saturated token.
  const double t = std::clamp(std::abs(diff) / scale, 0.0, 1.0);
  const Rgb end = diff > 0 ? Rgb{0xf0, 0x5a, 0x4b} : Rgb{0x4b, 0x82, 0xf0};
  auto mix = [t](int to) { return static_cast<int>(std::lround(255 + t * (to - 255))); };
  return {mix(end.r), mix(end.g), mix(end.b)};
}

std::string tokenText(const std::string& token, double diff) {
  return "'" + token + "' " + number(diff, "%+.3g");
}

}  // namespace fp8rl::ui
