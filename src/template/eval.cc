// Expressions: names, attributes and subscripts, operators, calls.
#include <cmath>
#include <limits>

#include "template/renderer.h"

namespace tkv::tmpl {

namespace {

std::string undefined_attr(const Value& obj, const std::string& name) {
  if (obj.is_none()) return str("'None' has no attribute '", name, "'");
  return str("'", obj.type_name(), " object' has no attribute '", name, "'");
}

// Python's slice indices for a sequence of n elements.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop,
                                  const Value& step) {
  int64_t st = step.is_undefined() || step.is_none() ? 1 : step.as_int();
  if (st == 0) fail_render("ValueError: slice step cannot be zero");
  // A step longer than the sequence takes one element: the same slice,
  // without overflowing the index.
  st = std::clamp<int64_t>(st, -n - 1, n + 1);
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t a = clamp(start, st > 0 ? 0 : n - 1);
  const int64_t b = clamp(stop, st > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) out.push_back(size_t(i));
  return out;
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  for (const Value* v : {&start, &stop, &step})
    if (!v->is_undefined() && !v->is_none() && v->kind() != Kind::kInt && v->kind() != Kind::kBool)
      fail_render("TypeError: slice indices must be integers or None");
  if (obj.is_string()) {
    const std::string& s = obj.str();
    const int64_t n = int64_t(utf8_length(s));
    const bool forward = step.is_undefined() || step.is_none() || step.as_int() == 1;
    if (forward) {  // one run of characters: no table of them
      const std::vector<size_t> at = slice_indices(n, start, stop, Value());
      if (at.empty()) return Value::string("");
      const size_t from = utf8_offset(s, at.front());
      const size_t to =
          from + utf8_offset(std::string_view(s).substr(from), at.back() - at.front() + 1);
      return Value::string(s.substr(from, to - from));
    }
    const auto chars = utf8_chars(s);
    std::string out;
    for (size_t i : slice_indices(n, start, stop, step)) out += chars[i];
    return Value::string(std::move(out));
  }
  if (obj.is_list()) {
    std::vector<Value> out;
    for (size_t i : slice_indices(int64_t(obj.items().size()), start, stop, step))
      out.push_back(obj.items()[i]);
    return Value::list(std::move(out), obj.is_tuple());
  }
  if (obj.is_undefined()) fail_render("UndefinedError: " + obj.str());
  fail_render("TypeError: '" + obj.type_name() + "' object is not subscriptable");
}

}  // namespace

Value Renderer::getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      fail_render("UndefinedError: " + obj.str());
    case Kind::kDict: {
      Value m = method(obj, name);
      if (!m.is_undefined()) return m;
      if (const Value* v = obj.dict_ref().find(name)) return *v;
      break;
    }
    case Kind::kNamespace:
      if (const Value* v = obj.dict_ref().find(name)) return *v;
      break;
    case Kind::kString:
    case Kind::kList: {
      Value m = method(obj, name);
      if (!m.is_undefined()) return m;
      break;
    }
    default:
      break;
  }
  return Value::undefined(undefined_attr(obj, name));
}

Value Renderer::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::kUndefined:
      fail_render("UndefinedError: " + obj.str());
    case Kind::kDict:
      if (const Value* v = obj.dict_ref().find(key)) return *v;
      break;
    case Kind::kList:
    case Kind::kString:
      if (key.kind() == Kind::kInt || key.kind() == Kind::kBool) {
        if (obj.is_list()) {
          const int64_t n = int64_t(obj.items().size());
          int64_t i = key.as_int();
          if (i < 0) i += n;
          if (i >= 0 && i < n) return obj.items()[size_t(i)];
        } else {
          const std::string& s = obj.str();
          int64_t i = key.as_int();
          if (i < 0) i += int64_t(utf8_length(s));
          const size_t at = i >= 0 ? utf8_offset(s, size_t(i)) : s.size();
          if (at < s.size()) return Value::string(s.substr(at, utf8_char_bytes(s, at)));
        }
        return Value::undefined(obj.type_name() + " object has no element " + key.to_string());
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return getattr(obj, key.str());
  return Value::undefined(undefined_attr(obj, key.to_string()));
}

Value Renderer::eval(const Expr& e, const std::shared_ptr<Frame>& frame) {
  DepthGuard guard(*this);
  switch (e.k) {
    case Expr::K::kLiteral:
      return e.value;
    case Expr::K::kName: {
      if (const Value* v = frame->lookup(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::K::kList:
    case Expr::K::kTuple: {
      std::vector<Value> items;
      for (const ExprPtr& a : e.args) items.push_back(eval(*a, frame));
      return Value::list(std::move(items), e.k == Expr::K::kTuple);
    }
    case Expr::K::kDict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2)
        d.mutable_dict().set(eval(*e.args[i], frame), eval(*e.args[i + 1], frame));
      return d;
    }
    case Expr::K::kAttr:
      return getattr(eval(*e.args[0], frame), e.name);
    case Expr::K::kItem:
      return getitem(eval(*e.args[0], frame), eval(*e.args[1], frame));
    case Expr::K::kSlice: {
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.args[size_t(i) + 1]) parts[i] = eval(*e.args[size_t(i) + 1], frame);
      return slice(eval(*e.args[0], frame), parts[0], parts[1], parts[2]);
    }
    case Expr::K::kCall:
      return eval_call(e, frame);
    case Expr::K::kFilter: {
      const Value v = e.args[0] ? eval(*e.args[0], frame) : block_input_;
      const Args a = eval_args(e, 1, frame);
      line_ = e.line;
      return apply_filter(*this, e.name, v, a);
    }
    case Expr::K::kTest: {
      const Value v = eval(*e.args[0], frame);
      const Args a = eval_args(e, 1, frame);
      line_ = e.line;
      return Value::boolean(apply_test(*this, e.name, v, a) != e.negated);
    }
    case Expr::K::kUnary: {
      const Value v = eval(*e.args[0], frame);
      if (e.name == "not") return Value::boolean(!v.truthy());
      if (!v.is_number())
        fail_render("TypeError: bad operand type for unary " + e.name + ": '" + v.type_name() +
                    "'");
      if (e.name == "+") return v.kind() == Kind::kBool ? Value::integer(v.as_int()) : v;
      if (v.kind() == Kind::kFloat) return Value::number(-v.as_double());
      if (v.as_int() == std::numeric_limits<int64_t>::min())
        fail_render("OverflowError: integer overflow");
      return Value::integer(-v.as_int());
    }
    case Expr::K::kBinary:
      return eval_binary(e, frame);
    case Expr::K::kCond: {
      if (eval(*e.args[1], frame).truthy()) return eval(*e.args[0], frame);
      return e.args[2] ? eval(*e.args[2], frame)
                       : Value::undefined("the condition was false and there is no else");
    }
  }
  return Value();
}

Value Renderer::eval_binary(const Expr& e, const std::shared_ptr<Frame>& frame) {
  Value a = eval(*e.args[0], frame);
  if (e.name == "and") return a.truthy() ? eval(*e.args[1], frame) : a;
  if (e.name == "or") return a.truthy() ? a : eval(*e.args[1], frame);
  const Value b = eval(*e.args[1], frame);
  line_ = e.line;
  if (e.name == "==") return Value::boolean(equal(a, b));
  if (e.name == "!=") return Value::boolean(!equal(a, b));
  if (e.name == "<") return Value::boolean(less(a, b));
  if (e.name == ">") return Value::boolean(less(b, a));
  if (e.name == "<=") return Value::boolean(!less(b, a));
  if (e.name == ">=") return Value::boolean(!less(a, b));
  if (e.name == "in") return Value::boolean(contains(b, a));
  if (e.name == "not in") return Value::boolean(!contains(b, a));
  return binary_op(*this, e.name, a, b);
}

Value Renderer::eval_call(const Expr& e, const std::shared_ptr<Frame>& frame) {
  const Value callee = eval(*e.args[0], frame);
  const Args a = eval_args(e, 1, frame);
  line_ = e.line;
  return call(callee, a);
}

std::vector<Value> iterate_value(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
      return v.items();
    case Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict_ref().items) keys.push_back(k);
      return keys;
    }
    case Kind::kString: {
      constexpr size_t kMaxChars = 1 << 20;  // a Value each: bounds the memory
      if (utf8_length(v.str()) > kMaxChars)
        fail_render("the template iterates over a string of more than " +
                    std::to_string(kMaxChars) + " characters");
      std::vector<Value> chars;
      for (std::string_view c : utf8_chars(v.str())) chars.push_back(Value::string(std::string(c)));
      return chars;
    }
    default:
      fail_render("TypeError: '" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;
    case Kind::kString:
      if (!item.is_string())
        fail_render("TypeError: 'in <string>' requires string as left operand, not " +
                    item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kList:
      for (const Value& v : container.items())
        if (equal(v, item)) return true;
      return false;
    case Kind::kDict:
      return container.dict_ref().find(item) != nullptr;
    default:
      fail_render("TypeError: argument of type '" + container.type_name() + "' is not iterable");
  }
}

namespace {

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined())
    fail_render("UndefinedError: " + (a.is_undefined() ? a.str() : b.str()));
  fail_render("TypeError: unsupported operand type(s) for " + op + ": '" + a.type_name() +
              "' and '" + b.type_name() + "'");
}

Value repeat(Renderer& r, const Value& seq, int64_t n) {
  const bool empty = seq.is_string() ? seq.str().empty() : seq.items().empty();
  if (n <= 0 || empty) return seq.is_string() ? Value::string("") : Value::list({}, seq.is_tuple());
  if (seq.is_string()) {
    r.check_size(seq.str().size() * size_t(std::min<int64_t>(n, INT32_MAX)));
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  r.check_size(seq.items().size() * size_t(std::min<int64_t>(n, INT32_MAX)) * 16);
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.is_tuple());
}

Value int_op(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
  if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
  if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
  if (op == "//" || op == "%") {
    if (y == 0) fail_render("ZeroDivisionError: integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1)
      fail_render("OverflowError: integer overflow");
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
    r = op == "//" ? q : m;
  }
  if (op == "**") {
    if (y < 0) return Value::number(std::pow(double(x), double(y)));
    if (x == 0 || x == 1) return Value::integer(y == 0 ? 1 : x);
    if (x == -1) return Value::integer(y % 2 ? -1 : 1);
    r = 1;
    for (int64_t i = 0; i < y && !overflow; ++i) overflow = __builtin_mul_overflow(r, x, &r);
  }
  if (overflow) fail_render("OverflowError: integer result out of range");
  return Value::integer(r);
}

Value float_op(const std::string& op, double x, double y) {
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "**") return Value::number(std::pow(x, y));
  if (y == 0) fail_render("ZeroDivisionError: float division by zero");
  if (op == "/") return Value::number(x / y);
  const double q = std::floor(x / y);
  if (op == "//") return Value::number(q);
  double m = std::fmod(x, y);
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value::number(m);
}

}  // namespace

Value binary_op(Renderer& r, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.to_string() + b.to_string();
    r.check_size(s.size());
    return Value::string(std::move(s));
  }
  if (a.is_number() && b.is_number()) {
    if (op == "/") return float_op(op, a.as_double(), b.as_double());
    if (a.kind() != Kind::kFloat && b.kind() != Kind::kFloat) {
      if (op == "**" && b.as_int() > 64 && (a.as_int() > 1 || a.as_int() < -1))
        fail_render("OverflowError: integer result out of range");
      return int_op(op, a.as_int(), b.as_int());
    }
    return float_op(op, a.as_double(), b.as_double());
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    r.check_size(a.str().size() + b.str().size());
    return Value::string(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    std::vector<Value> out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out));
  }
  if (op == "*" && (a.is_string() || a.is_list()) &&
      (b.kind() == Kind::kInt || b.kind() == Kind::kBool))
    return repeat(r, a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) &&
      (a.kind() == Kind::kInt || a.kind() == Kind::kBool))
    return repeat(r, b, a.as_int());
  if (op == "%" && a.is_string())
    return apply_filter(r, "format", a, Args{b.is_tuple() ? b.items() : std::vector<Value>{b}, {}});
  bad_operands(op, a, b);
}

}  // namespace tkv::tmpl
