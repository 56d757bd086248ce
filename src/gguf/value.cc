// gguf::Value: type names, constructors, conversions and printing.
#include <charconv>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/escape.h"
#include "gguf/gguf.h"

namespace tkv::gguf {

namespace {

bool is_unsigned_type(ValueType t) {
  return t == ValueType::UINT8 || t == ValueType::UINT16 || t == ValueType::UINT32 ||
         t == ValueType::UINT64;
}
bool is_signed_type(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
         t == ValueType::INT64;
}

uint64_t unsigned_max(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
      return std::numeric_limits<uint8_t>::max();
    case ValueType::UINT16:
      return std::numeric_limits<uint16_t>::max();
    case ValueType::UINT32:
      return std::numeric_limits<uint32_t>::max();
    default:
      return std::numeric_limits<uint64_t>::max();
  }
}
std::pair<int64_t, int64_t> signed_range(ValueType t) {
  switch (t) {
    case ValueType::INT8:
      return {INT8_MIN, INT8_MAX};
    case ValueType::INT16:
      return {INT16_MIN, INT16_MAX};
    case ValueType::INT32:
      return {INT32_MIN, INT32_MAX};
    default:
      return {INT64_MIN, INT64_MAX};
  }
}

void check_uint(ValueType t, uint64_t v) {
  if (!is_unsigned_type(t)) fail("gguf value: ", value_type_name(t), " is not an unsigned type");
  if (v > unsigned_max(t)) fail("gguf value: ", v, " does not fit in ", value_type_name(t));
}
void check_int(ValueType t, int64_t v) {
  if (!is_signed_type(t)) fail("gguf value: ", value_type_name(t), " is not a signed type");
  const auto [lo, hi] = signed_range(t);
  if (v < lo || v > hi) fail("gguf value: ", v, " does not fit in ", value_type_name(t));
}
void check_float_type(ValueType t) {
  if (!is_float_type(t)) fail("gguf value: ", value_type_name(t), " is not a float type");
}

// Shortest text that reads back as the same float32 / float64.
std::string format_float(double v, ValueType t) {
  char buf[64];
  std::to_chars_result r = t == ValueType::FLOAT32
                               ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v))
                               : std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string quote(const std::string& s) {
  // Appended piecewise: "\"" + std::string trips GCC 12's false -Wrestrict.
  std::string out(1, '"');
  out += escape(s);
  out += '"';
  return out;
}

}  // namespace

std::string escape(std::string_view s) {
  return escape_bytes(s);
}

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
      return "uint8";
    case ValueType::INT8:
      return "int8";
    case ValueType::UINT16:
      return "uint16";
    case ValueType::INT16:
      return "int16";
    case ValueType::UINT32:
      return "uint32";
    case ValueType::INT32:
      return "int32";
    case ValueType::FLOAT32:
      return "float32";
    case ValueType::BOOL:
      return "bool";
    case ValueType::STRING:
      return "string";
    case ValueType::ARRAY:
      return "array";
    case ValueType::UINT64:
      return "uint64";
    case ValueType::INT64:
      return "int64";
    case ValueType::FLOAT64:
      return "float64";
  }
  return "unknown";
}

bool is_integer_type(ValueType t) {
  return is_unsigned_type(t) || is_signed_type(t);
}
bool is_float_type(ValueType t) {
  return t == ValueType::FLOAT32 || t == ValueType::FLOAT64;
}

std::string value_type_string(const Value& v) {
  if (!v.is_array()) return std::string(value_type_name(v.type));
  if (v.elem_type == ValueType::ARRAY) {
    // Arrays of arrays may mix inner types; show the first one's.
    return "array[" + (v.arrays.empty() ? std::string("array") : value_type_string(v.arrays[0])) +
           "]";
  }
  return tkv::str("array[", value_type_name(v.elem_type), "]");
}

size_t Value::array_size() const {
  if (!is_array()) return 0;
  if (is_unsigned_type(elem_type)) return uints.size();
  if (is_signed_type(elem_type)) return ints.size();
  switch (elem_type) {
    case ValueType::FLOAT32:
    case ValueType::FLOAT64:
      return floats.size();
    case ValueType::BOOL:
      return bools.size();
    case ValueType::STRING:
      return strings.size();
    case ValueType::ARRAY:
      return arrays.size();
    default:
      return 0;
  }
}

std::optional<int64_t> Value::as_int() const {
  if (is_signed_type(type)) return i;
  if (is_unsigned_type(type)) {
    if (u > uint64_t(INT64_MAX)) return std::nullopt;
    return int64_t(u);
  }
  return std::nullopt;
}

std::optional<double> Value::as_float() const {
  if (is_float_type(type)) return f;
  if (is_signed_type(type)) return double(i);
  if (is_unsigned_type(type)) return double(u);
  return std::nullopt;
}

std::string Value::to_string(size_t max_elems) const {
  if (is_unsigned_type(type)) return std::to_string(u);
  if (is_signed_type(type)) return std::to_string(i);
  if (is_float_type(type)) return format_float(f, type);
  if (type == ValueType::BOOL) return b ? "true" : "false";
  if (type == ValueType::STRING) return quote(str);
  if (type != ValueType::ARRAY) return "?";

  const size_t n = array_size();
  const size_t shown = std::min(n, max_elems);
  std::string out = "[";
  for (size_t k = 0; k < shown; ++k) {
    if (k) out += ", ";
    if (is_unsigned_type(elem_type)) {
      out += std::to_string(uints[k]);
    } else if (is_signed_type(elem_type)) {
      out += std::to_string(ints[k]);
    } else if (is_float_type(elem_type)) {
      out += format_float(floats[k], elem_type);
    } else if (elem_type == ValueType::BOOL) {
      out += bools[k] ? "true" : "false";
    } else if (elem_type == ValueType::STRING) {
      out += quote(strings[k]);
    } else if (elem_type == ValueType::ARRAY) {
      out += arrays[k].to_string(max_elems);
    }
  }
  if (shown < n) out += tkv::str(shown ? ", " : "", "... (", n, " total)");
  return out + "]";
}

Value Value::make_u32(uint32_t v) {
  return make_uint(ValueType::UINT32, v);
}
Value Value::make_i32(int32_t v) {
  return make_int(ValueType::INT32, v);
}
Value Value::make_u64(uint64_t v) {
  return make_uint(ValueType::UINT64, v);
}
Value Value::make_f32(float v) {
  return make_float(ValueType::FLOAT32, v);
}

Value Value::make_bool(bool v) {
  Value r;
  r.type = ValueType::BOOL;
  r.b = v;
  return r;
}

Value Value::make_string(std::string v) {
  Value r;
  r.type = ValueType::STRING;
  r.str = std::move(v);
  return r;
}

Value Value::make_strings(std::vector<std::string> v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::STRING;
  r.strings = std::move(v);
  return r;
}

Value Value::make_f32s(const std::vector<float>& v) {
  return make_floats(ValueType::FLOAT32, std::vector<double>(v.begin(), v.end()));
}

Value Value::make_i32s(const std::vector<int32_t>& v) {
  return make_ints(ValueType::INT32, std::vector<int64_t>(v.begin(), v.end()));
}

Value Value::make_uint(ValueType t, uint64_t v) {
  check_uint(t, v);
  Value r;
  r.type = t;
  r.u = v;
  return r;
}

Value Value::make_int(ValueType t, int64_t v) {
  check_int(t, v);
  Value r;
  r.type = t;
  r.i = v;
  return r;
}

Value Value::make_float(ValueType t, double v) {
  check_float_type(t);
  Value r;
  r.type = t;
  // A FLOAT32 holds exactly what the file will hold.
  r.f = t == ValueType::FLOAT32 ? double(static_cast<float>(v)) : v;
  return r;
}

Value Value::make_uints(ValueType elem, std::vector<uint64_t> v) {
  for (uint64_t x : v) check_uint(elem, x);
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = elem;
  r.uints = std::move(v);
  return r;
}

Value Value::make_ints(ValueType elem, std::vector<int64_t> v) {
  for (int64_t x : v) check_int(elem, x);
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = elem;
  r.ints = std::move(v);
  return r;
}

Value Value::make_floats(ValueType elem, std::vector<double> v) {
  check_float_type(elem);
  if (elem == ValueType::FLOAT32)
    for (double& x : v) x = double(static_cast<float>(x));
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = elem;
  r.floats = std::move(v);
  return r;
}

Value Value::make_bools(const std::vector<bool>& v) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::BOOL;
  r.bools.assign(v.begin(), v.end());
  return r;
}

Value Value::make_arrays(std::vector<Value> v) {
  for (const Value& x : v)
    if (!x.is_array())
      fail("gguf value: element of an array of arrays is a ", value_type_name(x.type));
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = ValueType::ARRAY;
  r.arrays = std::move(v);
  return r;
}

}  // namespace tkv::gguf
