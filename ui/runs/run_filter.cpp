#include "ui/runs/run_filter.hpp"

#include <algorithm>
#include <cctype>

#include "ui/runs/config_text.hpp"

namespace fp8rl::ui {
namespace {

char lower(char c) {
  return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

std::string lowered(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

bool equalNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// needle is lower case.
bool containsNoCase(std::string_view hay, std::string_view needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(),
                     [](char h, char n) { return lower(h) == n; }) != hay.end();
}

// Splits at whitespace outside double quotes; the quotes themselves are dropped.
std::vector<std::string> splitTerms(std::string_view text) {
  std::vector<std::string> terms;
  std::string current;
  bool quoted = false, any = false;
  for (char c : text) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (any) terms.push_back(std::move(current));
      current.clear();
      any = false;
    } else {
      current += c;
      any = true;
    }
  }
  if (quoted) throw RunFilterError("unclosed quote: \"" + current + " needs a closing \"");
  if (any) terms.push_back(std::move(current));
  return terms;
}

RunFilter::Term parseTerm(const std::string& t) {
  RunFilter::Term term;
  const size_t at = t.find_first_of("=:<>");
  if (at == std::string::npos) {
    term.value = lowered(t);
    return term;
  }
  size_t after = at + 1;
  switch (t[at]) {
    case '<':
    case '>': {
      const bool or_equal = after < t.size() && t[after] == '=';
      if (or_equal) ++after;
      term.op = t[at] == '<' ? (or_equal ? RunFilter::Op::kLessEqual : RunFilter::Op::kLess)
                             : (or_equal ? RunFilter::Op::kGreaterEqual : RunFilter::Op::kGreater);
      break;
    }
    default:
      term.op = RunFilter::Op::kEqual;
  }
  term.key = lowered(t.substr(0, at));
  term.value = t.substr(after);
  term.number = parseNumber(term.value);
  const std::string op = t.substr(at, after - at);
  if (term.key.empty())
    throw RunFilterError("'" + t + "' has no key before '" + op + "' (write key" + op + "value)");
  if (term.op != RunFilter::Op::kEqual && term.value.empty())
    throw RunFilterError("'" + t + "' needs a number after '" + op + "'");
  if (term.op != RunFilter::Op::kEqual && !term.number)
    throw RunFilterError("'" + t + "': " + op + " compares numbers, and '" + term.value +
                         "' is not a number");
  return term;
}

bool valueMatches(const RunFilter::Term& t, std::string_view value) {
  const std::optional<double> v = parseNumber(value);
  switch (t.op) {
    case RunFilter::Op::kLess:
      return v && *v < *t.number;
    case RunFilter::Op::kLessEqual:
      return v && *v <= *t.number;
    case RunFilter::Op::kGreater:
      return v && *v > *t.number;
    case RunFilter::Op::kGreaterEqual:
      return v && *v >= *t.number;
    default:
      if (v && t.number) return *v == *t.number;
      return equalNoCase(value, t.value);
  }
}

// key equals want, or ends in ".want" (any case).
bool keyMatches(std::string_view key, std::string_view want) {
  if (equalNoCase(key, want)) return true;
  return key.size() > want.size() && key[key.size() - want.size() - 1] == '.' &&
         equalNoCase(key.substr(key.size() - want.size()), want);
}

// A run's own column standing in for a key its configuration lacks; nullopt when none.
std::optional<bool> columnMatches(const RunFilterSubject& r, const RunFilter::Term& t) {
  if (t.key == "status") return valueMatches(t, r.status);
  if (t.key == "preset") return valueMatches(t, r.preset);
  if (t.key == "id") return valueMatches(t, std::to_string(r.id));
  if (t.key == "step") return r.step && valueMatches(t, std::to_string(*r.step));
  if (t.key == "tags" || t.key == "tag") return containsNoCase(r.tags, lowered(t.value));
  if (t.key == "notes") return containsNoCase(r.notes, lowered(t.value));
  return std::nullopt;
}

bool configMatches(const RunFilterSubject& r, const RunFilter::Term& t) {
  bool config_has_key = false;
  for (std::string_view line : split(r.config, '\n')) {
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0 || !keyMatches(line.substr(0, eq), t.key)) continue;
    config_has_key = true;
    const std::string_view value = line.substr(eq + 1);
    if (valueMatches(t, value)) return true;
    // A list matches when one of its items does.
    if (value.find(',') == std::string_view::npos) continue;
    for (std::string_view item : split(value, ','))
      if (valueMatches(t, item)) return true;
  }
  if (config_has_key) return false;
  return columnMatches(r, t).value_or(false);
}

bool textMatches(const RunFilterSubject& r, std::string_view text) {
  for (std::string_view s : {r.name, r.preset, r.precision, r.tags, r.notes, r.status})
    if (containsNoCase(s, text)) return true;
  return false;
}

}  // namespace

RunFilter RunFilter::parse(std::string_view text) {
  RunFilter f;
  for (const std::string& t : splitTerms(text))
    if (!t.empty()) f.terms_.push_back(parseTerm(t));
  return f;
}

bool RunFilter::matches(const RunFilterSubject& run) const {
  if (!status_.empty() && run.status != status_) return false;
  for (const Term& t : terms_) {
    if (!(t.op == Op::kText ? textMatches(run, t.value) : configMatches(run, t))) return false;
  }
  return true;
}

const std::vector<std::string>& RunFilter::runKeys() {
  static const std::vector<std::string> keys = {"status", "preset", "id", "step", "tags", "notes"};
  return keys;
}

}  // namespace fp8rl::ui
