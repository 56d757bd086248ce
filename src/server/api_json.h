// The JSON side of request parsing shared by every route's parser
// (api_request.cc, api_routes_request.cc): typed field access whose errors
// are OpenAI error objects naming the field, and the body parser with its
// depth limit. Parsers throw RequestError for the first problem; guarded()
// turns it (and anything else) into the ApiError the route answers.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_request.h"

namespace tkv::server::api_json {

using nlohmann::json;

struct RequestError {
  ApiError error;
};

// At most this many bytes of a client's name (a field, a parameter path)
// are quoted back in an error: a 6 MB key must not make an 11 MB answer.
constexpr size_t kQuotedBytes = 64;

// `text` cut to kQuotedBytes at a UTF-8 character boundary, "..." marking
// the cut.
std::string clipped(const std::string& text);

[[noreturn]] void reject(std::string message, const std::string& param, std::string code);
// "a string", "an integer", ... as OpenAI's messages name JSON types.
const char* json_type_name(const json& v);
[[noreturn]] void invalid_type(const std::string& param, const char* expected, const json& got);
[[noreturn]] void invalid_value(const std::string& param, const std::string& detail);
[[noreturn]] void missing(const std::string& param);
[[noreturn]] void unrecognized(const std::string& param);
[[noreturn]] void unsupported(const std::string& param, const std::string& why);

// Shortest decimal form of a number for messages ("2", "0.5").
std::string number_text(double v);

// The field's value, or nullptr when it is absent or null (the same thing
// in the OpenAI API).
const json* field(const json& object, const char* name);
bool as_bool(const json& v, const std::string& param);
double as_number(const json& v, const std::string& param);
const std::string& as_string(const json& v, const std::string& param);
// An integer in [lo, hi]. 3.0 counts as an integer (JSON does not tell them
// apart), 3.5 does not.
int64_t as_integer(const json& v, const std::string& param, int64_t lo, int64_t hi);
void check_range(const std::string& param, double v, double lo, double hi, bool lo_open);

// The field names of a route's body (Responses, Anthropic Messages):
// `handled` and `ignored` names pass; an `unsupported` one is a 400
// ending in why(name), unless null or off(name, value) (the "off" value a
// client sends for a feature it does not use); any other name is
// "Unrecognized request argument supplied: NAME".
struct RouteFields {
  std::span<const char*const> handled, ignored, unsupported;
  std::function<bool(const std::string& name, const json& value)> off;
  std::function<std::string(const std::string& name)> why;
};
void check_route_fields(const json& body, const RouteFields& fields);

// Parses the body into a JSON object, refusing nesting deeper than
// kMaxJsonDepth while it is built (so no later step recurses deeply).
json parse_body(std::string_view body);

// The sampling fields every generation route shares (api_request.cc):
// temperature, top_p, top_k, min_p, seed, presence_penalty,
// frequency_penalty, repeat_penalty, repeat_last_n, logit_bias, n,
// cache_prompt.
void parse_sampling(const json& body, GenerationRequest& r);

// Runs a parser; its RequestError, or any other exception, becomes the
// ApiError returned. Never throws.
template <typename T, typename F>
std::variant<T, ApiError> guarded(F&& parse) {
  try {
    return parse();
  } catch (const RequestError& e) {
    return e.error;
  } catch (const std::bad_alloc&) {
    return make_api_error(500, "Out of memory while reading the request.");
  } catch (const std::exception& e) {
    return make_api_error(500,
                          std::string("Internal error while reading the request: ") + e.what());
  } catch (...) {
    return make_api_error(500, "Internal error while reading the request.");
  }
}

}  // namespace tkv::server::api_json
