#include "core/yaml.hpp"

#include <cctype>
#include <cstdlib>
#include <vector>

#include "core/error.hpp"

namespace fp8rl {
namespace {

struct Line {
  int number;        // 1-based
  int indent;        // leading spaces
  std::string text;  // without indent and comment, right-trimmed
};

std::string rtrim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' ');
  return b == std::string::npos ? "" : rtrim(s.substr(b));
}

// Removes a "#" comment that is not inside quotes.
std::string strip_comment(const std::string& s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || s[i - 1] == ' ')) {
      return s.substr(0, i);
    }
  }
  return s;
}

class Parser {
 public:
  Parser(const std::string& text, std::string source) : source_(std::move(source)) {
    int n = 0;
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string raw = text.substr(pos, end - pos);
      ++n;
      pos = end + 1;
      if (raw.find('\t') != std::string::npos && trim(strip_comment(raw)).size())
        fail(n, "tabs are not allowed for indentation");
      const std::string body = rtrim(strip_comment(raw));
      const std::string t = trim(body);
      if (t.empty() || t == "---") continue;
      lines_.push_back({n, static_cast<int>(body.find_first_not_of(' ')), t});
      if (end == text.size()) break;
    }
  }

  Json document() {
    if (lines_.empty()) return Json(Json::Object{});
    Json v = block(lines_[0].indent);
    if (i_ < lines_.size()) fail(lines_[i_].number, "unexpected indentation");
    return v;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(source_ + ":" + std::to_string(line) + ": " + what);
  }

  Json block(int indent) {
    if (lines_[i_].text.rfind("- ", 0) == 0 || lines_[i_].text == "-") return list(indent);
    return mapping(indent);
  }

  Json mapping(int indent) {
    Json::Object obj;
    while (i_ < lines_.size() && lines_[i_].indent == indent) {
      const Line& l = lines_[i_];
      if (l.text.rfind("- ", 0) == 0) fail(l.number, "a list item where a key was expected");
      const auto [key, rest] = split_key(l);
      if (obj.count(key)) fail(l.number, "duplicate key \"" + key + "\"");
      ++i_;
      if (!rest.empty()) {
        obj[key] = value(rest, l.number);
      } else if (i_ < lines_.size() && lines_[i_].indent > indent) {
        obj[key] = block(lines_[i_].indent);
      } else if (i_ < lines_.size() && lines_[i_].indent == indent &&
                 lines_[i_].text.rfind("- ", 0) == 0) {
        obj[key] = list(indent);  // "key:\n- a\n- b" at the same indentation
      } else {
        obj[key] = Json();
      }
    }
    if (i_ < lines_.size() && lines_[i_].indent > indent)
      fail(lines_[i_].number, "unexpected indentation");
    return Json(std::move(obj));
  }

  Json list(int indent) {
    Json::Array arr;
    while (i_ < lines_.size() && lines_[i_].indent == indent &&
           (lines_[i_].text.rfind("- ", 0) == 0 || lines_[i_].text == "-")) {
      Line l = lines_[i_];
      const std::string item = l.text == "-" ? "" : trim(l.text.substr(2));
      if (item.empty()) {
        ++i_;
        check_more(l.number, indent);
        arr.push_back(block(lines_[i_].indent));
      } else if (looks_like_key(item)) {
        // "- key: v" starts a mapping whose keys sit at the item's column.
        const int col = indent + 2 + static_cast<int>(l.text.substr(2).find_first_not_of(' '));
        lines_[i_] = Line{l.number, col, item};
        arr.push_back(mapping(col));
      } else {
        ++i_;
        arr.push_back(value(item, l.number));
      }
    }
    return Json(std::move(arr));
  }

  void check_more(int line, int indent) const {
    if (i_ >= lines_.size() || lines_[i_].indent <= indent) fail(line, "empty list item");
  }

  static bool looks_like_key(const std::string& s) {
    if (s.empty() || s[0] == '"' || s[0] == '\'' || s[0] == '[' || s[0] == '{') return false;
    const size_t c = s.find(':');
    return c != std::string::npos && (c + 1 == s.size() || s[c + 1] == ' ');
  }

  std::pair<std::string, std::string> split_key(const Line& l) const {
    if (!looks_like_key(l.text)) fail(l.number, "expected \"key: value\"");
    const size_t c = l.text.find(':');
    const std::string key = trim(l.text.substr(0, c));
    if (key.empty()) fail(l.number, "empty key");
    return {key, trim(l.text.substr(c + 1))};
  }

  Json value(const std::string& s, int line) const {
    if (s[0] == '[') {
      if (s.back() != ']') fail(line, "unterminated flow list");
      Json::Array arr;
      const std::string inner = trim(s.substr(1, s.size() - 2));
      if (inner.empty()) return Json(std::move(arr));
      size_t pos = 0;
      while (pos <= inner.size()) {
        size_t comma = inner.find(',', pos);
        if (comma == std::string::npos) comma = inner.size();
        const std::string item = trim(inner.substr(pos, comma - pos));
        if (item.empty()) fail(line, "empty item in flow list");
        arr.push_back(scalar(item, line));
        pos = comma + 1;
      }
      return Json(std::move(arr));
    }
    if (s[0] == '{' || s[0] == '&' || s[0] == '*' || s[0] == '|' || s[0] == '>')
      fail(line, "unsupported YAML syntax '" + s.substr(0, 1) + "'");
    return scalar(s, line);
  }

  Json scalar(const std::string& s, int line) const {
    if (s[0] == '"' || s[0] == '\'') {
      if (s.size() < 2 || s.back() != s[0]) fail(line, "unterminated quoted string");
      return Json(s.substr(1, s.size() - 2));
    }
    return yaml_scalar(s);
  }

  std::string source_;
  std::vector<Line> lines_;
  size_t i_ = 0;
};

}  // namespace

Json yaml_scalar(const std::string& s) {
  if (s == "true" || s == "True") return Json(true);
  if (s == "false" || s == "False") return Json(false);
  if (s == "null" || s == "~" || s.empty()) return Json();
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end && *end == '\0' &&
      (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-' || s[0] == '+' || s[0] == '.'))
    return Json(d);
  return Json(s);
}

Json parse_yaml(const std::string& text, const std::string& source) {
  return Parser(text, source).document();
}

}  // namespace fp8rl
