// Verifiable rewards for maths datasets (GSM8K, MATH and their kin): the final answer of a
// response or a reference solution, normalised, and whether two answers are the same.
//
// A final answer is the content of the last \boxed{…} (or \fbox{…}), else what follows the last
// "####" on its line (GSM8K's convention), else none. Normalisation removes what does not change
// the value: spaces, $ … $, \left / \right, spacing commands, \text{…} wrappers (units), a
// trailing period, degrees and percent signs, thousands separators in numbers, "x =" in front;
// \dfrac and \tfrac read as \frac. Two answers match when their normal forms are equal, or when
// both are numbers (integers, decimals, a/b, \frac{a}{b}, with a sign) of the same value.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fp8rl {

// The final answer of text (see above), or nullopt when it has none.
std::optional<std::string> final_answer(std::string_view text);
// The answer in normal form.
std::string normalize_answer(std::string_view answer);
// The value of an answer that is a number (after normalisation), or nullopt.
std::optional<double> answer_value(std::string_view answer);
// Whether a given answer matches the reference answer (both already extracted).
bool answers_match(std::string_view given, std::string_view reference);

}  // namespace fp8rl
