// What the run view says about a run's layer audit and its sampled tokens, as plain text and
// numbers (no Qt): the widgets only display it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "contract/step_record.hpp"
#include "core/json.hpp"

namespace fp8rl::ui {

struct RunData;

// The latest audit in one line: "audit: N mismatches (step S)" when a row is not ok, "audit OK ·
// step S" when all are, "" when the run has no audit.
std::string auditBadgeText(const RunData& run);
// The rows of the latest audit that are not ok.
int64_t auditMismatches(const RunData& run);
// One audit row: "L3.down gen fp8 / trainer bf16, max |Δ| 0.125".
std::string auditRowText(const AuditRow& row);
// The first max_rows mismatched rows, a line each, then "… and N more" when there are more;
// "" when every row is ok.
std::string auditMismatchList(const RunData& run, size_t max_rows = 10);

// Whether a run's configuration turns the KL penalty off (grpo.kl_beta 0, or absent: its
// default), so that the engine never computes the KL to a reference policy; false when the
// configuration has no grpo section (not known).
bool klToReferenceOff(const Json& config);

// The colour of a token whose trainer and generator log-probs differ by diff = p − g:
// white at 0, towards red for positive and blue for negative diffs, saturating at |diff| =
// scale; grey when diff is not finite.
struct Rgb {
  int r = 255, g = 255, b = 255;
  bool operator==(const Rgb&) const = default;
};
inline constexpr double kLogprobDiffScale = 0.05;
Rgb logprobDiffColor(double diff, double scale = kLogprobDiffScale);
// "cba" → "'c' +0.0123": a token as quoted text with its diff (3 significant digits, signed).
std::string tokenText(const std::string& token, double diff);

}  // namespace fp8rl::ui
