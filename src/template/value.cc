#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace tkv::tmpl {

namespace {
thread_local uint64_t bytes_made = 0;
}  // namespace

void fail_render(std::string message) {
  throw RenderFailure{std::move(message), false};
}

const Value* Args::get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : keywords)
    if (k == name) return &v;
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  v.i_ = b ? 1 : 0;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  bytes_made += v.s_->size();
  return v;
}

namespace {

int nested(int child_depth) {
  if (child_depth + 1 > kMaxNesting)
    fail_render("ValueError: values nested deeper than " + std::to_string(kMaxNesting) + " levels");
  return child_depth + 1;
}

// Repr, comparison and JSON recurse; a namespace may hold itself.
struct RecursionGuard {
  RecursionGuard() {
    if (++level > kMaxNesting + 8)
      fail_render("RecursionError: the value is nested too deeply (or contains itself)");
  }
  ~RecursionGuard() { --level; }
  static thread_local int level;
};
thread_local int RecursionGuard::level = 0;

}  // namespace

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  int depth = 0;
  for (const Value& i : items) depth = std::max(depth, i.depth());
  v.list_ = std::make_shared<List>(List{std::move(items), tuple, nested(depth)});
  return v;
}

int Value::depth() const {
  if (kind_ == Kind::kList) return list_->depth;
  if (kind_ == Kind::kDict || kind_ == Kind::kNamespace) return dict_->depth;
  return 0;
}

Value Value::dict() {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>();
  return v;
}

Value Value::name_space() {
  Value v = dict();
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::callable(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::undefined(std::string name) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxNesting)
    fail_render("ValueError: values nested deeper than " + std::to_string(kMaxNesting) + " levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      return u > uint64_t(INT64_MAX) ? number(double(u)) : integer(int64_t(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = dict();
      // JSON keys are unique: no lookup per key.
      for (const auto& [k, e] : j.items()) {
        Value v = from_json(e, depth + 1);
        d.dict_->depth = std::max(d.dict_->depth, nested(v.depth()));
        d.dict_->items.emplace_back(string(k), std::move(v));
      }
      return d;
    }
    default:
      return none();  // binary / discarded: not produced by the JSON parser
  }
}

const std::string& Value::str() const {
  static const std::string kEmpty;
  return s_ ? *s_ : kEmpty;
}

uint64_t string_bytes_made() {
  return bytes_made;
}

int64_t Value::as_int() const {
  if (kind_ != Kind::kFloat) return i_;
  if (std::isnan(f_)) return 0;
  return int64_t(std::clamp(f_, -9.2e18, 9.2e18));
}

const std::vector<Value>& Value::items() const {
  return list_->items;
}
const Dict& Value::dict_ref() const {
  return *dict_;
}
Dict& Value::mutable_dict() const {
  return *dict_;
}
const Callable& Value::callable_ref() const {
  return *fn_;
}
bool Value::is_tuple() const {
  return kind_ == Kind::kList && list_->tuple;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !str().empty();
    case Kind::kList:
      return !list_->items.empty();
    case Kind::kDict:
      return !dict_->items.empty();
    default:
      return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return list_->tuple ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    default:
      return "function";
  }
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-d.ddde+XX"
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string sign = sci[0] == '-' ? "-" : "";
  std::string digits;
  for (size_t i = sign.size(); i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  if (exp < -4 || exp >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    return out + eb;
  }
  std::string out = sign;
  if (exp < 0) {
    out += "0.";
    out.append(size_t(-exp - 1), '0');
    out += digits;
  } else if (digits.size() <= size_t(exp) + 1) {
    out += digits;
    out.append(size_t(exp) + 1 - digits.size(), '0');
    out += ".0";
  } else {
    out.append(digits, 0, size_t(exp) + 1);
    out += '.';
    out.append(digits, size_t(exp) + 1);
  }
  return out;
}

std::string python_string_repr(std::string_view s) {
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (const char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", u);
      out += b;
    } else {
      out += c;
    }
  }
  out += q;
  return out;
}

std::string Value::repr() const {
  const RecursionGuard guard;
  switch (kind_) {
    case Kind::kString:
      return python_string_repr(str());
    case Kind::kList: {
      std::string out = list_->tuple ? "(" : "[";
      for (size_t i = 0; i < list_->items.size(); ++i) {
        if (i) out += ", ";
        out += list_->items[i].repr();
      }
      if (list_->tuple && list_->items.size() == 1) out += ",";
      return out + (list_->tuple ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    default:
      return to_string();
  }
}

std::string Value::to_string() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return format_float(f_);
    case Kind::kString:
      return str();
    case Kind::kCallable:
      return "<function " + fn_->name + ">";
    default:
      return repr();
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equal(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.str() == key) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  depth = std::max(depth, nested(std::max(key.depth(), value.depth())));
  for (auto& [k, v] : items) {
    if (equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool equal(const Value& a, const Value& b) {
  const RecursionGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.dict_ref();
      const Dict& y = b.dict_ref();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    }
    default:
      return &a.dict_ref() == &b.dict_ref();
  }
}

bool less(const Value& a, const Value& b) {
  const RecursionGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::kFloat || b.kind() == Kind::kFloat) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail_render("TypeError: '<' not supported between instances of '" + a.type_name() + "' and '" +
              b.type_name() + "'");
}

size_t utf8_char_bytes(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_bytes(s, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); i += utf8_char_bytes(s, i)) ++count;
  return count;
}

size_t utf8_offset(std::string_view s, size_t k) {
  size_t i = 0;
  for (; i < s.size() && k > 0; --k) i += utf8_char_bytes(s, i);
  return i;
}

namespace {

void json_escape_code_point(std::string& out, uint32_t cp) {
  char b[16];
  if (cp > 0xFFFF) {
    cp -= 0x10000;
    std::snprintf(b, sizeof b, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
  } else {
    std::snprintf(b, sizeof b, "\\u%04x", cp);
  }
  out += b;
}

// A multi-byte UTF-8 character as \uXXXX (ensure_ascii); bytes that are not
// UTF-8 pass as they are.
void json_non_ascii(std::string& out, std::string_view c) {
  const unsigned char u = static_cast<unsigned char>(c[0]);
  if (c.size() == 1) {
    out += c;
    return;
  }
  uint32_t cp = c.size() == 2 ? (u & 0x1F) : c.size() == 3 ? (u & 0x0F) : (u & 0x07);
  for (size_t i = 1; i < c.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(c[i]) & 0x3F);
  json_escape_code_point(out, cp);
}

// One ASCII byte of a JSON string, escaped as json.dumps does.
void json_ascii(std::string& out, char c) {
  switch (c) {
    case '"':
      out += "\\\"";
      return;
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    case '\b':
      out += "\\b";
      return;
    case '\f':
      out += "\\f";
      return;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        json_escape_code_point(out, static_cast<unsigned char>(c));
      } else {
        out += c;
      }
  }
}

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const size_t n = ensure_ascii ? utf8_char_bytes(s, i) : 1;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      json_ascii(out, s[i]);
    } else if (ensure_ascii) {
      json_non_ascii(out, s.substr(i, n));
    } else {
      out += s[i];
    }
    i += n;
  }
  out += '"';
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int level);

void json_newline(std::string& out, const JsonOptions& o, int level) {
  out += '\n';
  for (int i = 0; i < level; ++i) out += o.indent;
}

void json_list(std::string& out, const std::vector<Value>& items, const JsonOptions& o, int level) {
  if (items.empty()) {
    out += "[]";
    return;
  }
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += o.item_separator;
    if (o.pretty) json_newline(out, o, level + 1);
    json_value(out, items[i], o, level + 1);
  }
  if (o.pretty) json_newline(out, o, level);
  out += ']';
}

std::string json_key(const Value& k) {
  if (k.is_string()) return k.str();
  if (k.kind() == Kind::kBool) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_number()) return k.to_string();
  fail_render("TypeError: keys must be str, int, float, bool or None, not " + k.type_name());
}

void json_dict(std::string& out, const Dict& d, const JsonOptions& o, int level) {
  if (d.items.empty()) {
    out += "{}";
    return;
  }
  std::vector<const std::pair<Value, Value>*> order;
  for (const auto& p : d.items) order.push_back(&p);
  if (o.sort_keys)
    std::stable_sort(order.begin(), order.end(),
                     [](const auto* x, const auto* y) { return less(x->first, y->first); });
  out += '{';
  for (size_t i = 0; i < order.size(); ++i) {
    if (i) out += o.item_separator;
    if (o.pretty) json_newline(out, o, level + 1);
    json_string(out, json_key(order[i]->first), o.ensure_ascii);
    out += o.key_separator;
    json_value(out, order[i]->second, o, level + 1);
  }
  if (o.pretty) json_newline(out, o, level);
  out += '}';
}

void json_value(std::string& out, const Value& v, const JsonOptions& o, int level) {
  const RecursionGuard guard;
  (void)level;
  switch (v.kind()) {
    case Kind::kNone:
      out += "null";
      return;
    case Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case Kind::kInt:
      out += v.to_string();
      return;
    case Kind::kFloat: {
      const double f = v.as_double();
      out += std::isnan(f)   ? "NaN"
             : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity")
                             : format_float(f);
      return;
    }
    case Kind::kString:
      json_string(out, v.str(), o.ensure_ascii);
      return;
    case Kind::kList:
      json_list(out, v.items(), o, level);
      return;
    case Kind::kDict:
      json_dict(out, v.dict_ref(), o, level);
      return;
    default:
      fail_render("TypeError: Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_value(out, v, options, 0);
  return out;
}

}  // namespace tkv::tmpl
