#include "core/json.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace fp8rl {
namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  Json document() {
    Json v = value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error("json: " + what + " at line " + std::to_string(line) + ", column " +
                std::to_string(col));
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) == 0) {
      i_ += n;
      return true;
    }
    return false;
  }

  Json value(int depth) {
    if (depth > 256) fail("nesting deeper than 256");
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of input");
    const char c = s_[i_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Json(string());
    if (literal("true")) return Json(true);
    if (literal("false")) return Json(false);
    if (literal("null")) return Json();
    if (c == '-' || (c >= '0' && c <= '9')) return Json(number());
    fail(std::string("unexpected character '") + c + "'");
  }

  Json object(int depth) {
    expect('{');
    Json::Object o;
    if (eat('}')) return Json(std::move(o));
    do {
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
      std::string key = string();
      expect(':');
      if (o.count(key)) fail("duplicate key \"" + key + "\"");
      o.emplace(std::move(key), value(depth + 1));
    } while (eat(','));
    expect('}');
    return Json(std::move(o));
  }

  Json array(int depth) {
    expect('[');
    Json::Array a;
    if (eat(']')) return Json(std::move(a));
    do {
      a.push_back(value(depth + 1));
    } while (eat(','));
    expect(']');
    return Json(std::move(a));
  }

  double number() {
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      const size_t d0 = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == d0) fail("malformed number");
    };
    digits();
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      digits();
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    const double v = std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
    if (!std::isfinite(v)) fail("number out of range");
    return v;
  }

  uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<uint32_t>(h - 'A' + 10);
      else
        fail("bad hex digit in \\u escape");
    }
    return v;
  }

  std::string string() {
    ++i_;  // opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {
            if (!literal("\\u")) fail("unpaired surrogate");
            const uint32_t lo = hex4();
            if (lo < 0xdc00 || lo >= 0xe000) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("unknown escape \\") + e);
      }
    }
    return out;
  }

  const std::string& s_;
  size_t i_ = 0;
};

void dump_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void dump_value(std::string& out, const Json& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lvl), ' ');
  };
  if (v.is_null()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_number()) {
    const double d = v.as_number();
    char buf[32];
    if (d == std::floor(d) && std::fabs(d) < 9007199254740992.0)
      std::snprintf(buf, sizeof buf, "%.0f", d);
    else
      std::snprintf(buf, sizeof buf, "%.17g", d);
    out += buf;
  } else if (v.is_string()) {
    dump_string(out, v.as_string());
  } else if (v.is_array()) {
    const auto& a = v.as_array();
    out += '[';
    for (size_t k = 0; k < a.size(); ++k) {
      if (k) out += ',';
      newline(level + 1);
      dump_value(out, a[k], indent, level + 1);
    }
    if (!a.empty()) newline(level);
    out += ']';
  } else {
    const auto& o = v.as_object();
    out += '{';
    bool first = true;
    for (const auto& [k, x] : o) {
      if (!first) out += ',';
      first = false;
      newline(level + 1);
      dump_string(out, k);
      out += indent < 0 ? ":" : ": ";
      dump_value(out, x, indent, level + 1);
    }
    if (!o.empty()) newline(level);
    out += '}';
  }
}

}  // namespace

Json::Json(const Json& o) : v_(o.v_) {
  if (is_array()) v_ = std::make_shared<Array>(o.as_array());
  if (is_object()) v_ = std::make_shared<Object>(o.as_object());
}

Json& Json::operator=(const Json& o) {
  if (this != &o) *this = Json(o);
  return *this;
}

Json Json::parse(const std::string& text) {
  return Parser(text).document();
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_value(out, *this, indent, 0);
  return out;
}

const char* Json::type_name() const {
  static const char* names[] = {"null", "boolean", "number", "string", "array", "object"};
  return names[v_.index()];
}

namespace {
[[noreturn]] void type_error(const std::string& what, const char* want, const char* got) {
  throw Error(what + " must be " + want + ", got " + got);
}
}  // namespace

bool Json::as_bool(const std::string& what) const {
  if (!is_bool()) type_error(what, "a boolean", type_name());
  return std::get<bool>(v_);
}
double Json::as_number(const std::string& what) const {
  if (!is_number()) type_error(what, "a number", type_name());
  return std::get<double>(v_);
}
int64_t Json::as_int(const std::string& what) const {
  const double d = as_number(what);
  if (d != std::floor(d) || std::fabs(d) > 9007199254740992.0)
    throw Error(what + " must be an integer, got " + dump());
  return static_cast<int64_t>(d);
}
const std::string& Json::as_string(const std::string& what) const {
  if (!is_string()) type_error(what, "a string", type_name());
  return std::get<std::string>(v_);
}
const Json::Array& Json::as_array(const std::string& what) const {
  if (!is_array()) type_error(what, "an array", type_name());
  return *std::get<std::shared_ptr<Array>>(v_);
}
const Json::Object& Json::as_object(const std::string& what) const {
  if (!is_object()) type_error(what, "an object", type_name());
  return *std::get<std::shared_ptr<Object>>(v_);
}
Json::Array& Json::as_array(const std::string& what) {
  if (!is_array()) type_error(what, "an array", type_name());
  return *std::get<std::shared_ptr<Array>>(v_);
}
Json::Object& Json::as_object(const std::string& what) {
  if (is_null()) v_ = std::make_shared<Object>();
  if (!is_object()) type_error(what, "an object", type_name());
  return *std::get<std::shared_ptr<Object>>(v_);
}
bool Json::contains(const std::string& key) const {
  return is_object() && as_object().count(key) > 0;
}
const Json& Json::at(const std::string& key) const {
  const auto& o = as_object();
  auto it = o.find(key);
  if (it == o.end()) throw Error("missing key \"" + key + "\"");
  return it->second;
}
Json& Json::operator[](const std::string& key) {
  return as_object()[key];
}

}  // namespace fp8rl
