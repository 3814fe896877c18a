// A small JSON value with a strict parser (errors name line and column) and a writer. Used for
// config.json, safetensors headers and, later, the worker protocol. Numbers are doubles;
// integers up to 2^53 round-trip exactly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace fp8rl {

class Json {
 public:
  using Array = std::vector<Json>;
  using Object = std::map<std::string, Json>;

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : v_(b) {}
  Json(double d) : v_(d) {}
  Json(int v) : v_(static_cast<double>(v)) {}
  Json(int64_t v) : v_(static_cast<double>(v)) {}
  Json(const char* s) : v_(std::string(s)) {}
  Json(std::string s) : v_(std::move(s)) {}
  Json(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  Json(Object o) : v_(std::make_shared<Object>(std::move(o))) {}
  // Value semantics: copies are deep (arrays and objects are not shared).
  Json(const Json& o);
  Json& operator=(const Json& o);
  Json(Json&&) noexcept = default;
  Json& operator=(Json&&) noexcept = default;

  // Parses text; throws Error("json: <what> at line L, column C") on malformed input.
  static Json parse(const std::string& text);
  // Serializes; indent < 0 writes one line.
  std::string dump(int indent = -1) const;

  bool is_null() const { return v_.index() == 0; }
  bool is_bool() const { return v_.index() == 1; }
  bool is_number() const { return v_.index() == 2; }
  bool is_string() const { return v_.index() == 3; }
  bool is_array() const { return v_.index() == 4; }
  bool is_object() const { return v_.index() == 5; }

  // Typed access; throws Error naming `what` (e.g. the key) and the actual type on mismatch.
  bool as_bool(const std::string& what = "value") const;
  double as_number(const std::string& what = "value") const;
  int64_t as_int(const std::string& what = "value") const;  // must be integral
  const std::string& as_string(const std::string& what = "value") const;
  const Array& as_array(const std::string& what = "value") const;
  const Object& as_object(const std::string& what = "value") const;
  Array& as_array(const std::string& what = "value");
  Object& as_object(const std::string& what = "value");

  // Object helpers: contains(key); at(key) throws "missing key"; operator[] inserts.
  bool contains(const std::string& key) const;
  const Json& at(const std::string& key) const;
  Json& operator[](const std::string& key);

  const char* type_name() const;

 private:
  std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      v_;
};

}  // namespace fp8rl
