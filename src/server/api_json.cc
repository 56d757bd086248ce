#include "server/api_json.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace tkv::server::api_json {

namespace {
struct TooDeep {};
}  // namespace

// `text` cut to kQuotedBytes at a UTF-8 character boundary, "..." marking
// the cut.
std::string clipped(const std::string& text) {
  if (text.size() <= kQuotedBytes) return text;
  size_t end = kQuotedBytes;
  while (end > 0 && (uint8_t(text[end]) & 0xC0) == 0x80) --end;  // not inside a character
  return text.substr(0, end) + "...";
}

[[noreturn]] void reject(std::string message, const std::string& param, std::string code) {
  throw RequestError{make_api_error(400, std::move(message), clipped(param), std::move(code))};
}

// "a string", "an integer", ... as OpenAI's messages name JSON types.
const char* json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unknown value";
  }
}

[[noreturn]] void invalid_type(const std::string& param, const char* expected, const json& got) {
  reject("Invalid type for '" + clipped(param) + "': expected " + expected + ", but got " +
             json_type_name(got) + " instead.",
         param, "invalid_type");
}

[[noreturn]] void invalid_value(const std::string& param, const std::string& detail) {
  reject("Invalid value for '" + clipped(param) + "': " + detail, param, "invalid_value");
}

[[noreturn]] void missing(const std::string& param) {
  reject("Missing required parameter: '" + clipped(param) + "'.", param,
         "missing_required_parameter");
}

[[noreturn]] void unrecognized(const std::string& param) {
  reject("Unrecognized request argument supplied: " + clipped(param), param, "unknown_parameter");
}

[[noreturn]] void unsupported(const std::string& param, const std::string& why) {
  reject("Unsupported parameter: '" + clipped(param) + "' is not supported by turbokv" + why, param,
         "unsupported_parameter");
}

// Shortest decimal form of a number for messages ("2", "0.5").
std::string number_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "infinity" : "-infinity";
  json j = v;
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) j = int64_t(v);
  return j.dump();
}

// The field's value, or nullptr when it is absent or null (the same thing
// in the OpenAI API).
const json* field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

bool as_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) invalid_type(param, "a boolean", v);
  return v.get<bool>();
}

double as_number(const json& v, const std::string& param) {
  if (!v.is_number()) invalid_type(param, "a number", v);
  return v.get<double>();
}

const std::string& as_string(const json& v, const std::string& param) {
  if (!v.is_string()) invalid_type(param, "a string", v);
  return v.get_ref<const std::string&>();
}

// An integer in [lo, hi]. 3.0 counts as an integer (JSON does not tell them
// apart), 3.5 does not.
int64_t as_integer(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  int64_t n = 0;
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    n = v.get<int64_t>();
  } else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(hi)) invalid_value(param, "must be at most " + std::to_string(hi) + ".");
    n = int64_t(u);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d != std::floor(d)) invalid_type(param, "an integer", v);
    // 2^63 is exactly representable; anything at or beyond it is out of range.
    if (d < double(lo) || d >= 9223372036854775808.0 || d > double(hi))
      invalid_value(param, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                               ", got " + number_text(d) + ".");
    n = int64_t(d);
  } else {
    invalid_type(param, "an integer", v);
  }
  if (n < lo || n > hi)
    invalid_value(param, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                             ", got " + std::to_string(n) + ".");
  return n;
}

void check_range(const std::string& param, double v, double lo, double hi, bool lo_open) {
  if (!(lo_open ? v > lo : v >= lo) || !(v <= hi))
    invalid_value(param, std::string("must be ") + (lo_open ? "greater than " : "between ") +
                             number_text(lo) + (lo_open ? " and at most " : " and ") +
                             number_text(hi) + ", got " + number_text(v) + ".");
}

// Parses the body into a JSON object, refusing nesting deeper than
// kMaxJsonDepth while it is built (so no later step recurses deeply).
json parse_body(std::string_view body) {
  const size_t start = body.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos)
    reject("The request body is empty; expected a JSON object.", "", "invalid_json");
  json doc;
  try {
    doc = json::parse(
        body.begin(), body.end(),
        [](int depth, json::parse_event_t, json&) {
          if (depth > kMaxJsonDepth) throw TooDeep{};
          return true;
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const TooDeep&) {
    reject("Invalid JSON body: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels.",
           "", "invalid_json");
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ...",
    // or out_of_range.406 "number overflow parsing '1e999'".
    std::string what = e.what();
    if (const size_t p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);
    if (what.size() > 240) what = what.substr(0, 240) + "...";
    reject("Invalid JSON body: " + what, "", "invalid_json");
  }
  if (!doc.is_object())
    reject(std::string("The request body must be a JSON object, got ") + json_type_name(doc) + ".",
           "", "invalid_json");
  return doc;
}

void check_route_fields(const json& body, const RouteFields& fields) {
  const auto listed = [](std::span<const char* const> names, const std::string& name) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
  };
  for (const auto& [name, value] : body.items()) {
    if (listed(fields.handled, name) || listed(fields.ignored, name)) continue;
    if (!listed(fields.unsupported, name)) unrecognized(name);
    if (!value.is_null() && !fields.off(name, value)) unsupported(name, fields.why(name));
  }
}

}  // namespace tkv::server::api_json
