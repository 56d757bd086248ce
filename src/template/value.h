// The template language's values, with Python's semantics as Jinja2 gives
// them: truthiness, equality (1 == 1.0 == True), printing (True, None,
// 1.0, repr() of lists and dicts), Undefined that prints as "".
//
// Lists, tuples, dicts and namespaces are shared by reference, as Python
// objects are; the template cannot modify lists or dicts (Hugging Face
// renders in an immutable sandbox), only namespace attributes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tkv::tmpl {

// A failure while rendering. `raised` marks the template's own
// raise_exception(message); anything else is a Python-style error
// ("TypeError: ...").
struct RenderFailure {
  std::string message;
  bool raised = false;
};
[[noreturn]] void fail_render(std::string message);

enum class Kind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kNamespace,
  kCallable
};

class Value;
// Containers nest at most this deep (a deeper value is an error where it
// is built): printing, comparing and freeing values recurse over them.
constexpr int kMaxNesting = 256;

struct List {
  std::vector<Value> items;
  bool tuple = false;
  int depth = 1;  // 1 + the deepest item's
};
struct Dict;
class Renderer;

struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
  // The keyword `name`, or positional `index` when not given by name; null when neither.
  const Value* get(size_t index, std::string_view name) const;
};
using Function = std::function<Value(Renderer&, const Args&)>;
struct Callable {
  std::string name;
  Function fn;
};

class Value {
 public:
  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict();
  static Value name_space();
  static Value callable(std::string name, Function fn);
  static Value undefined(std::string name);
  // Containers nested deeper than kMaxNesting are an error (RenderFailure).
  static Value from_json(const nlohmann::ordered_json& j, int depth = 0);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_mapping_like() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  bool as_bool() const { return b_; }
  int64_t as_int() const;  // a float truncated (and clamped to int64)
  double as_double() const { return kind_ == Kind::kFloat ? f_ : double(i_); }
  const std::string& str() const;           // String; Undefined: its name
  const std::vector<Value>& items() const;  // List
  const Dict& dict_ref() const;             // Dict, Namespace
  Dict& mutable_dict() const;               // Namespace attributes
  const Callable& callable_ref() const;
  bool is_tuple() const;
  int depth() const;  // containers: their nesting; others 0

  bool truthy() const;
  std::string to_string() const;  // Python str(); Undefined is ""
  std::string repr() const;       // Python repr()
  std::string type_name() const;  // Python's: 'str', 'NoneType', ...

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;  // shared: copying a value is cheap
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Callable> fn_;
};

// Insertion-ordered, as Python's dict.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;  // 1 + the deepest key's or value's
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

bool equal(const Value& a, const Value& b);
// Python's <: numbers, strings, lists/tuples elementwise; other pairs are a TypeError.
bool less(const Value& a, const Value& b);
// Python's float repr: shortest round trip, "1.0", "1e+16", "1e-05".
std::string format_float(double f);
std::string python_string_repr(std::string_view s);

struct JsonOptions {
  bool pretty = false;  // one item per line, each level indented by `indent`
  std::string indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;  // non-ASCII as \uXXXX (surrogate pairs past U+FFFF)
};
// Python's json.dumps(value, ...) with these options.
std::string to_json(const Value& v, const JsonOptions& options);

// Bytes of every string value made on this thread so far: the renderer
// counts building text as work (RenderLimits::max_steps).
uint64_t string_bytes_made();

// Code points of UTF-8 text (invalid bytes count as one each).
std::vector<std::string_view> utf8_chars(std::string_view s);
// The bytes of the character at byte i, its number of characters, the byte
// offset of character k (s.size() past the end): utf8_chars' reading,
// without the vector.
size_t utf8_char_bytes(std::string_view s, size_t i);
size_t utf8_length(std::string_view s);
size_t utf8_offset(std::string_view s, size_t k);

}  // namespace tkv::tmpl
