// Jinja2's filters, with Hugging Face's tojson (Python's json.dumps).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "template/renderer.h"
#include "template/text.h"

namespace tkv::tmpl {

namespace {

using FilterFn = Value (*)(Renderer&, const Value&, const Args&);

bool flag(const Value* v, bool dflt) {
  return v ? v->truthy() : dflt;
}

std::string str_arg(const Value* v, const std::string& dflt) {
  if (!v || v->is_none()) return dflt;
  return v->to_string();
}

// Value of `attribute` (dotted: "a.b", or an index) of an item.
Value attribute(Renderer& r, const Value& item, const std::string& path) {
  Value cur = item;
  for (std::string_view part : text::split(path, ".", true, -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    cur = digits ? r.getitem(cur, Value::integer(std::atoll(std::string(part).c_str())))
                 : r.getitem(cur, Value::string(std::string(part)));
    if (cur.is_undefined()) break;
  }
  return cur;
}

Value tojson(Renderer& r, const Value& v, const Args& a) {
  // Hugging Face's signature: tojson(x, ensure_ascii=False, indent=None,
  // separators=None, sort_keys=False).
  JsonOptions o;
  o.ensure_ascii = flag(a.get(0, "ensure_ascii"), false);
  const Value* indent = a.get(1, "indent");
  if (indent && !indent->is_none()) {
    o.pretty = true;
    o.indent = indent->is_string()
                   ? indent->str()
                   : std::string(size_t(std::clamp<int64_t>(indent->as_int(), 0, 64)), ' ');
    o.item_separator = ",";
  }
  if (const Value* sep = a.get(2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->items().size() != 2)
      fail_render("ValueError: separators must be a pair of strings");
    o.item_separator = sep->items()[0].to_string();
    o.key_separator = sep->items()[1].to_string();
  }
  o.sort_keys = flag(a.get(3, "sort_keys"), false);
  std::string out = to_json(v, o);
  r.check_size(out.size());
  return Value::string(std::move(out));
}

Value length(Renderer&, const Value& v, const Args&) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return Value::integer(0);
    case Kind::kString:
      return Value::integer(int64_t(utf8_length(v.str())));
    case Kind::kList:
      return Value::integer(int64_t(v.items().size()));
    case Kind::kDict:
      return Value::integer(int64_t(v.dict_ref().items.size()));
    default:
      fail_render("TypeError: object of type '" + v.type_name() + "' has no len()");
  }
}

Value default_filter(Renderer&, const Value& v, const Args& a) {
  const Value* d = a.get(0, "default_value");
  const bool boolean = flag(a.get(1, "boolean"), false);
  if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value::string("");
  return v;
}

Value join(Renderer& r, const Value& v, const Args& a) {
  const std::string sep = str_arg(a.get(0, "d"), "");
  const Value* attr = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate_value(v)) {
    if (!first) out += sep;
    first = false;
    out += (attr ? attribute(r, item, attr->to_string()) : item).to_string();
    r.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value items(Renderer&, const Value& v, const Args&) {
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) fail_render("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict_ref().items) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::string(text::lower(v.str()));
  return v;
}

Value dictsort(Renderer& r, const Value& v, const Args& a) {
  if (!v.is_dict()) fail_render("TypeError: dictsort needs a mapping, not " + v.type_name());
  const bool cs = flag(a.get(0, "case_sensitive"), false);
  const std::string by = str_arg(a.get(1, "by"), "key");
  const bool reverse = flag(a.get(2, "reverse"), false);
  std::vector<Value> out = items(r, v, {}).items();
  const size_t pos = by == "value" ? 1 : 0;
  std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
    return less(sort_key(x.items()[pos], cs), sort_key(y.items()[pos], cs));
  });
  if (reverse) std::reverse(out.begin(), out.end());
  return Value::list(std::move(out));
}

Value sort(Renderer& r, const Value& v, const Args& a) {
  const bool reverse = flag(a.get(0, "reverse"), false);
  const bool cs = flag(a.get(1, "case_sensitive"), false);
  const Value* attr = a.get(2, "attribute");
  if (attr && attr->is_none()) attr = nullptr;
  std::vector<Value> out = iterate_value(v);
  auto key = [&](const Value& x) {
    return sort_key(attr ? attribute(r, x, attr->to_string()) : x, cs);
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const Value& x, const Value& y) { return less(key(x), key(y)); });
  if (reverse) std::reverse(out.begin(), out.end());
  return Value::list(std::move(out));
}

Value unique(Renderer& r, const Value& v, const Args& a) {
  const bool cs = flag(a.get(0, "case_sensitive"), false);
  const Value* attr = a.get(1, "attribute");
  std::vector<Value> out, seen;
  for (const Value& x : iterate_value(v)) {
    Value k = sort_key(attr ? attribute(r, x, attr->to_string()) : x, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) {
      seen.push_back(std::move(k));
      out.push_back(x);
    }
  }
  return Value::list(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value select(Renderer& r, const Value& v, const Args& a, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (a.positional.empty()) fail_render("TypeError: selectattr needs an attribute name");
    attr = a.positional[next++].to_string();
  }
  const bool has_test = next < a.positional.size();
  const std::string test = has_test ? a.positional[next++].to_string() : "";
  Args test_args;
  test_args.positional.assign(a.positional.begin() + long(next), a.positional.end());
  std::vector<Value> out;
  for (const Value& x : iterate_value(v)) {
    r.step();
    const Value probe = by_attr ? attribute(r, x, attr) : x;
    const bool pass = has_test ? apply_test(r, test, probe, test_args) : probe.truthy();
    if (pass == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value map(Renderer& r, const Value& v, const Args& a) {
  std::vector<Value> out;
  const Value* attr = a.get(99, "attribute");
  if (attr) {
    const Value* dflt = a.get(99, "default");
    for (const Value& x : iterate_value(v)) {
      Value y = attribute(r, x, attr->to_string());
      out.push_back(y.is_undefined() && dflt ? *dflt : y);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) fail_render("TypeError: map needs a filter name or attribute=");
  const std::string filter = a.positional[0].to_string();
  Args rest;
  rest.positional.assign(a.positional.begin() + 1, a.positional.end());
  rest.keywords = a.keywords;
  for (const Value& x : iterate_value(v)) {
    r.step();
    out.push_back(apply_filter(r, filter, x, rest));
  }
  return Value::list(std::move(out));
}

Value first_last(const Value& v, bool first) {
  if (v.is_list()) {
    if (v.items().empty()) return Value::undefined("No first item, sequence was empty.");
    return first ? v.items().front() : v.items().back();
  }
  std::vector<Value> all = iterate_value(v);
  if (all.empty()) return Value::undefined("No first item, sequence was empty.");
  return first ? all.front() : all.back();
}

Value to_int(Renderer&, const Value& v, const Args& a) {
  const Value* d = a.get(0, "default");
  const Value dflt = d ? *d : Value::integer(0);
  if (v.kind() == Kind::kInt || v.kind() == Kind::kBool) return Value::integer(v.as_int());
  if (v.kind() == Kind::kFloat)
    return std::fabs(v.as_double()) < 9e18 ? Value::integer(int64_t(v.as_double())) : dflt;
  if (!v.is_string()) return dflt;
  const std::string s = text::strip(v.str(), "", true, true, false);
  char* end = nullptr;
  errno = 0;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value::integer(i);
  const double f = std::strtod(s.c_str(), &end);
  if (!s.empty() && end == s.c_str() + s.size() && std::fabs(f) < 9e18)
    return Value::integer(int64_t(f));
  return dflt;
}

Value to_float(Renderer&, const Value& v, const Args& a) {
  const Value* d = a.get(0, "default");
  const Value dflt = d ? *d : Value::number(0.0);
  if (v.is_number()) return Value::number(v.as_double());
  if (!v.is_string()) return dflt;
  const std::string s = text::strip(v.str(), "", true, true, false);
  char* end = nullptr;
  const double f = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() ? Value::number(f) : dflt;
}

Value round_filter(Renderer&, const Value& v, const Args& a) {
  if (!v.is_number()) fail_render("TypeError: round needs a number");
  const int64_t p =
      std::clamp<int64_t>(a.get(0, "precision") ? a.get(0, "precision")->as_int() : 0, -20, 20);
  const std::string method = str_arg(a.get(1, "method"), "common");
  const double m = std::pow(10.0, double(p));
  const double x = v.as_double() * m;
  double y = 0;
  if (method == "common") {
    y = std::nearbyint(x);  // round half to even, as Python's round()
  } else if (method == "ceil") {
    y = std::ceil(x);
  } else if (method == "floor") {
    y = std::floor(x);
  } else {
    fail_render("FilterArgumentError: method must be common, ceil or floor");
  }
  return Value::number(y / m);
}

Value indent(Renderer& r, const Value& v, const Args& a) {
  const Value* w = a.get(0, "width");
  const std::string pad =
      w && w->is_string()
          ? w->str()
          : std::string(size_t(std::clamp<int64_t>(w ? w->as_int() : 4, 0, 1000)), ' ');
  const bool first = flag(a.get(1, "first"), false);
  const bool blank = flag(a.get(2, "blank"), false);
  const std::vector<std::string> lines = text::split(v.to_string(), "\n", true, -1);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out += "\n";
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += pad;
    out += lines[i];
    r.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value batch(Renderer& r, const Value& v, const Args& a) {
  const int64_t n = a.get(0, "linecount") ? a.get(0, "linecount")->as_int() : 1;
  if (n <= 0) fail_render("ValueError: batch size must be positive");
  const Value* fill = a.get(1, "fill_with");
  std::vector<Value> out, cur;
  for (const Value& x : iterate_value(v)) {
    r.step();
    cur.push_back(x);
    if (int64_t(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    while (fill && int64_t(cur.size()) < n) cur.push_back(*fill);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

// Python's "%s" % args for %s, %d, %i, %r and %%.
Value format(Renderer& r, const Value& v, const Args& a) {
  const std::string& f = v.to_string();
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) fail_render("ValueError: incomplete format");
    if (f[i] == '%') {
      out += '%';
      continue;
    }
    if (next >= a.positional.size())
      fail_render("TypeError: not enough arguments for format string");
    const Value& x = a.positional[next++];
    if (f[i] == 's')
      out += x.to_string();
    else if (f[i] == 'r')
      out += x.repr();
    else if (f[i] == 'd' || f[i] == 'i')
      out += std::to_string(x.is_number() ? x.as_int() : 0);
    else
      fail_render(std::string("ValueError: unsupported format character '") + f[i] + "'");
    r.check_size(out.size());
  }
  return Value::string(std::move(out));
}

Value escape(Renderer&, const Value& v, const Args&) {
  std::string out;
  for (char c : v.to_string()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value::string(std::move(out));
}

Value sum(Renderer& r, const Value& v, const Args& a) {
  const Value* attr = a.get(0, "attribute");
  Value total = a.get(1, "start") ? *a.get(1, "start") : Value::integer(0);
  for (const Value& x : iterate_value(v))
    total = binary_op(r, "+", total, attr ? attribute(r, x, attr->to_string()) : x);
  return total;
}

Value min_max(Renderer& r, const Value& v, const Args& a, bool max) {
  std::vector<Value> all =
      sort(r, v,
           Args{{Value::boolean(false),
                 a.get(0, "case_sensitive") ? *a.get(0, "case_sensitive") : Value::boolean(false),
                 a.get(1, "attribute") ? *a.get(1, "attribute") : Value::none()},
                {}})
          .items();
  if (all.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  return max ? all.back() : all.front();
}

Value trim(Renderer&, const Value& v, const Args& a) {
  const Value* c = a.get(0, "chars");
  const bool given = c && !c->is_none();
  return Value::string(text::strip(v.to_string(), given ? c->to_string() : "", true, true, given));
}

Value replace(Renderer& r, const Value& v, const Args& a) {
  std::string out =
      text::replace(v.to_string(), str_arg(a.get(0, "old"), ""), str_arg(a.get(1, "new"), ""),
                    a.get(2, "count") ? a.get(2, "count")->as_int() : -1);
  r.check_size(out.size());
  return Value::string(std::move(out));
}

Value abs_filter(Renderer&, const Value& v, const Args&) {
  if (!v.is_number()) fail_render("TypeError: bad operand type for abs(): '" + v.type_name() + "'");
  if (v.kind() == Kind::kFloat) return Value::number(std::fabs(v.as_double()));
  if (v.as_int() == INT64_MIN) fail_render("OverflowError: integer result out of range");
  return Value::integer(std::llabs(v.as_int()));
}

Value reverse(Renderer&, const Value& v, const Args&) {
  std::vector<Value> all = iterate_value(v);
  std::reverse(all.begin(), all.end());
  if (!v.is_string()) return Value::list(std::move(all));
  std::string out;
  for (const Value& c : all) out += c.str();
  return Value::string(std::move(out));
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> f = {
      {"tojson", tojson},
      {"length", length},
      {"count", length},
      {"default", default_filter},
      {"d", default_filter},
      {"join", join},
      {"items", items},
      {"dictsort", dictsort},
      {"sort", sort},
      {"unique", unique},
      {"map", map},
      {"int", to_int},
      {"float", to_float},
      {"round", round_filter},
      {"indent", indent},
      {"batch", batch},
      {"format", format},
      {"escape", escape},
      {"e", escape},
      {"sum", sum},
      {"select",
       [](Renderer& r, const Value& v, const Args& a) { return select(r, v, a, false, true); }},
      {"reject",
       [](Renderer& r, const Value& v, const Args& a) { return select(r, v, a, false, false); }},
      {"selectattr",
       [](Renderer& r, const Value& v, const Args& a) { return select(r, v, a, true, true); }},
      {"rejectattr",
       [](Renderer& r, const Value& v, const Args& a) { return select(r, v, a, true, false); }},
      {"min", [](Renderer& r, const Value& v, const Args& a) { return min_max(r, v, a, false); }},
      {"max", [](Renderer& r, const Value& v, const Args& a) { return min_max(r, v, a, true); }},
      {"first", [](Renderer&, const Value& v, const Args&) { return first_last(v, true); }},
      {"last", [](Renderer&, const Value& v, const Args&) { return first_last(v, false); }},
      {"list",
       [](Renderer&, const Value& v, const Args&) { return Value::list(iterate_value(v)); }},
      {"safe", [](Renderer&, const Value& v, const Args&) { return v; }},
      {"string",
       [](Renderer&, const Value& v, const Args&) { return Value::string(v.to_string()); }},
      {"upper", [](Renderer&, const Value& v,
                   const Args&) { return Value::string(text::upper(v.to_string())); }},
      {"lower", [](Renderer&, const Value& v,
                   const Args&) { return Value::string(text::lower(v.to_string())); }},
      {"capitalize", [](Renderer&, const Value& v,
                        const Args&) { return Value::string(text::capitalize(v.to_string())); }},
      {"title", [](Renderer&, const Value& v,
                   const Args&) { return Value::string(text::title(v.to_string())); }},
      {"trim", trim},
      {"replace", replace},
      {"abs", abs_filter},
      {"reverse", reverse},
      {"attr", [](Renderer& r, const Value& v,
                  const Args& a) { return r.getattr(v, str_arg(a.get(0, "name"), "")); }},
      {"wordcount",
       [](Renderer&, const Value& v, const Args&) {
         return Value::integer(int64_t(text::split(v.to_string(), "", false, -1).size()));
       }},
  };
  return f;
}

}  // namespace

bool known_filter(const std::string& name) {
  return filters().count(name) != 0;
}

Value apply_filter(Renderer& r, const std::string& name, const Value& v, const Args& args) {
  const auto& f = filters();
  const auto it = f.find(name);
  if (it == f.end()) fail_render("TemplateAssertionError: no filter named '" + name + "'");
  r.step();
  return it->second(r, v, args);
}

}  // namespace tkv::tmpl
