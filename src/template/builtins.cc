// Tests (x is defined), methods of strings, dicts and lists, and the
// globals Hugging Face's environment defines.
#include <cmath>
#include <ctime>
#include <set>

#include "template/renderer.h"
#include "template/text.h"

namespace tkv::tmpl {

namespace {

const std::string& want_string(const Value* v, const char* what) {
  if (!v || !v->is_string()) fail_render(std::string("TypeError: ") + what + " must be a string");
  return v->str();
}

int64_t want_int(const Value* v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (v->kind() != Kind::kInt && v->kind() != Kind::kBool)
    fail_render("TypeError: an integer is required");
  return v->as_int();
}

Value strings(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  for (const std::string& p : parts) out.push_back(Value::string(p));
  return Value::list(std::move(out));
}

bool affix(const std::string& s, const Value* arg, bool prefix) {
  if (!arg) fail_render("TypeError: startswith/endswith takes one argument");
  std::vector<Value> options = arg->is_tuple() ? arg->items() : std::vector<Value>{*arg};
  for (const Value& o : options) {
    const std::string& a = want_string(&o, "the affix");
    if (a.size() <= s.size() && (prefix ? s.compare(0, a.size(), a) == 0
                                        : s.compare(s.size() - a.size(), a.size(), a) == 0))
      return true;
  }
  return false;
}

Value string_method(const std::string& s, const std::string& name, const Args& a) {
  const Value* a0 = a.get(0, "");
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool given = a0 && !a0->is_none();
    return Value::string(text::strip(s, given ? want_string(a0, "strip's argument") : "",
                                     name != "rstrip", name != "lstrip", given));
  }
  if (name == "split" || name == "rsplit") {
    const Value* sep = a.get(0, "sep");
    const bool given = sep && !sep->is_none();
    const std::string sep_s = given ? want_string(sep, "the separator") : "";
    if (given && sep_s.empty()) fail_render("ValueError: empty separator");
    const int64_t max = want_int(a.get(1, "maxsplit"), -1);
    return strings(name == "split" ? text::split(s, sep_s, given, max)
                                   : text::rsplit(s, sep_s, given, max));
  }
  if (name == "splitlines")
    return strings(text::split(text::replace(s, "\r\n", "\n", -1), "\n", true, -1));
  if (name == "startswith" || name == "endswith")
    return Value::boolean(affix(s, a0, name == "startswith"));
  if (name == "upper") return Value::string(text::upper(s));
  if (name == "lower") return Value::string(text::lower(s));
  if (name == "title") return Value::string(text::title(s));
  if (name == "capitalize") return Value::string(text::capitalize(s));
  if (name == "replace")
    return Value::string(text::replace(s, want_string(a0, "replace's argument"),
                                       want_string(a.get(1, ""), "replace's argument"),
                                       want_int(a.get(2, "count"), -1)));
  if (name == "find" || name == "rfind")
    return Value::integer(text::find(s, want_string(a0, "find's argument"), name == "rfind"));
  if (name == "count") return Value::integer(text::count(s, want_string(a0, "count's argument")));
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string& x = want_string(a0, "the affix");
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0)
      return Value::string(s.substr(x.size()));
    if (name == "removesuffix" && x.size() <= s.size() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value::string(s.substr(0, s.size() - x.size()));
    return Value::string(s);
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& v : iterate_value(a0 ? *a0 : Value())) {
      if (!first) out += s;
      first = false;
      out += want_string(&v, "join's items");
    }
    return Value::string(std::move(out));
  }
  auto all = [&](auto pred) {
    if (s.empty()) return Value::boolean(false);
    for (unsigned char c : s)
      if (!pred(c)) return Value::boolean(false);
    return Value::boolean(true);
  };
  if (name == "isdigit") return all([](unsigned char c) { return std::isdigit(c) != 0; });
  if (name == "isalpha") return all([](unsigned char c) { return std::isalpha(c) != 0; });
  if (name == "isalnum") return all([](unsigned char c) { return std::isalnum(c) != 0; });
  if (name == "isspace") return all([](unsigned char c) { return text::is_space(char(c)); });
  if (name == "islower") return Value::boolean(text::lower(s) == s && text::upper(s) != s);
  if (name == "isupper") return Value::boolean(text::upper(s) == s && text::lower(s) != s);
  fail_render("'str object' has no attribute '" + name + "'");
}

Value dict_method(const Value& d, const std::string& name, const Args& a) {
  if (name == "get") {
    const Value* key = a.get(0, "key");
    if (!key) fail_render("TypeError: get expected at least 1 argument");
    if (const Value* v = d.dict_ref().find(*key)) return *v;
    const Value* dflt = a.get(1, "default");
    return dflt ? *dflt : Value::none();
  }
  std::vector<Value> out;
  for (const auto& [k, v] : d.dict_ref().items) {
    if (name == "keys") out.push_back(k);
    if (name == "values") out.push_back(v);
    if (name == "items") out.push_back(Value::list({k, v}, true));
  }
  return Value::list(std::move(out));
}

const std::set<std::string>& string_methods() {
  static const std::set<std::string> m = {
      "strip",    "lstrip",  "rstrip",  "split",        "rsplit",       "splitlines", "startswith",
      "endswith", "upper",   "lower",   "title",        "capitalize",   "replace",    "find",
      "rfind",    "count",   "join",    "removeprefix", "removesuffix", "isdigit",    "isalpha",
      "isalnum",  "isspace", "islower", "isupper"};
  return m;
}

}  // namespace

Value method(const Value& obj, const std::string& name) {
  static const std::set<std::string> kUnsafe = {"append", "extend",     "insert", "pop",
                                                "remove", "clear",      "sort",   "reverse",
                                                "update", "setdefault", "popitem"};
  if ((obj.is_list() || obj.is_dict()) && kUnsafe.count(name))
    fail_render("SecurityError: access to attribute '" + name + "' of '" + obj.type_name() +
                "' object is unsafe.");
  if (obj.is_string() && string_methods().count(name)) {
    return Value::callable(
        name, [obj, name](Renderer&, const Args& a) { return string_method(obj.str(), name, a); });
  }
  if (obj.is_dict() && (name == "get" || name == "items" || name == "keys" || name == "values")) {
    return Value::callable(
        name, [obj, name](Renderer&, const Args& a) { return dict_method(obj, name, a); });
  }
  return Value();
}

bool known_test(const std::string& name) {
  static const std::set<std::string> kTests = {
      "defined", "undefined",   "none",        "boolean", "true",     "false",    "integer",
      "float",   "number",      "string",      "mapping", "iterable", "sequence", "callable",
      "odd",     "even",        "divisibleby", "lower",   "upper",    "escaped",  "eq",
      "equalto", "==",          "ne",          "!=",      "lt",       "lessthan", "<",
      "gt",      "greaterthan", ">",           "le",      "<=",       "ge",       ">=",
      "in",      "sameas"};
  return kTests.count(name) != 0;
}

bool apply_test(Renderer& r, const std::string& name, const Value& v, const Args& a) {
  const Value* a0 = a.get(0, "");
  const Kind k = v.kind();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return k == Kind::kBool;
  if (name == "true") return k == Kind::kBool && v.as_bool();
  if (name == "false") return k == Kind::kBool && !v.as_bool();
  if (name == "integer") return k == Kind::kInt;
  if (name == "float") return k == Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return k == Kind::kDict;
  if (name == "iterable")
    return k == Kind::kUndefined || k == Kind::kString || k == Kind::kList || k == Kind::kDict;
  if (name == "sequence") return k == Kind::kString || k == Kind::kList || k == Kind::kDict;
  if (name == "callable") return k == Kind::kCallable;
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (k != Kind::kInt && k != Kind::kBool)
      fail_render("TypeError: the '" + name + "' test needs an integer");
    if (name == "divisibleby") {
      const int64_t d = want_int(a0, 1);
      if (d == 0) fail_render("ZeroDivisionError: integer division or modulo by zero");
      return v.as_int() % d == 0;
    }
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "lower") return v.is_string() && text::lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && text::upper(v.str()) == v.str();
  if (name == "escaped") return false;
  if (!a0) fail_render("TypeError: the '" + name + "' test needs an argument");
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, *a0);
  if (name == "ne" || name == "!=") return !equal(v, *a0);
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, *a0);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(*a0, v);
  if (name == "le" || name == "<=") return !less(*a0, v);
  if (name == "ge" || name == ">=") return !less(v, *a0);
  if (name == "in") return contains(*a0, v);
  if (name == "sameas") {
    if (v.kind() != a0->kind()) return false;
    if (k == Kind::kList || k == Kind::kDict || k == Kind::kNamespace)
      return &v.items() == &a0->items();
    return equal(v, *a0);
  }
  (void)r;
  fail_render("TemplateAssertionError: no test named '" + name + "'");
}

namespace {

Value range(const Args& a) {
  if (a.positional.empty() || a.positional.size() > 3)
    fail_render("TypeError: range expected 1 to 3 arguments");
  int64_t start = 0, stop = 0, step = 1;
  if (a.positional.size() == 1) {
    stop = want_int(&a.positional[0], 0);
  } else {
    start = want_int(&a.positional[0], 0);
    stop = want_int(&a.positional[1], 0);
    if (a.positional.size() == 3) step = want_int(&a.positional[2], 1);
  }
  if (step == 0) fail_render("ValueError: range() arg 3 must not be zero");
  constexpr int64_t kMaxRange = 100000;  // Jinja's sandbox limit
  const double n = std::max(0.0, std::ceil((double(stop) - double(start)) / double(step)));
  if (n > kMaxRange)
    fail_render(
        "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    out.push_back(Value::integer(i));
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return Value::list(std::move(out));
}

Value with_attributes(Value target, const Args& a) {
  for (const Value& p : a.positional) {
    if (!p.is_dict()) fail_render("TypeError: expected a mapping");
    for (const auto& [k, v] : p.dict_ref().items) target.mutable_dict().set(k, v);
  }
  for (const auto& [k, v] : a.keywords) target.mutable_dict().set(Value::string(k), v);
  return target;
}

std::string strftime_now(Renderer& r, const std::string& fmt) {
  std::tm tm{};
  if (r.options().now) {
    tm = *r.options().now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &tm);
  }
  if (fmt.size() > 1000) fail_render("ValueError: strftime format too long");
  std::string buf(fmt.size() * 16 + 64, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  buf.resize(n);
  return buf;
}

}  // namespace

void add_globals(Frame& g) {
  g.set("range", Value::callable("range", [](Renderer&, const Args& a) { return range(a); }));
  g.set("namespace", Value::callable("namespace", [](Renderer& r, const Args& a) {
          return with_attributes(r.make_namespace(), a);
        }));
  g.set("dict", Value::callable("dict", [](Renderer&, const Args& a) {
          return with_attributes(Value::dict(), a);
        }));
  g.set("raise_exception",
        Value::callable("raise_exception", [](Renderer&, const Args& a) -> Value {
          const Value* m = a.get(0, "message");
          throw RenderFailure{m ? m->to_string() : std::string(), true};
        }));
  g.set("strftime_now", Value::callable("strftime_now", [](Renderer& r, const Args& a) {
          return Value::string(
              strftime_now(r, want_string(a.get(0, "format"), "strftime_now's format")));
        }));
}

}  // namespace tkv::tmpl
