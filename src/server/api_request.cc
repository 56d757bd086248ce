#include "server/api_request.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <new>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/escape.h"

namespace tkv::server {

namespace {

using nlohmann::json;

// The parsers below report the first problem by throwing it; the public
// functions catch it (and anything else) and return it, so no exception
// ever leaves this file.
struct RequestError {
  ApiError error;
};

// At most this many bytes of a client's name (a field, a parameter path)
// are quoted back in an error: a 6 MB key must not make an 11 MB answer.
constexpr size_t kQuotedBytes = 64;

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

struct TooDeep {};

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

// ---- which fields exist -----------------------------------------------------

enum class FieldKind { kHandled, kIgnored, kUnsupported };

struct FieldRule {
  std::string_view name;
  FieldKind kind;
};

// Fields both endpoints share. top_k and min_p are extensions.
constexpr FieldRule kCommonFields[] = {
    {"model", FieldKind::kHandled},
    {"max_tokens", FieldKind::kHandled},
    {"temperature", FieldKind::kHandled},
    {"top_p", FieldKind::kHandled},
    {"top_k", FieldKind::kHandled},
    {"min_p", FieldKind::kHandled},
    {"seed", FieldKind::kHandled},
    {"stop", FieldKind::kHandled},
    {"presence_penalty", FieldKind::kHandled},
    {"frequency_penalty", FieldKind::kHandled},
    {"n", FieldKind::kHandled},
    {"logprobs", FieldKind::kHandled},
    {"stream", FieldKind::kHandled},
    {"stream_options", FieldKind::kHandled},
    {"logit_bias", FieldKind::kUnsupported},
    // Accepted and ignored: they do not change what is generated.
    {"user", FieldKind::kIgnored},
    {"metadata", FieldKind::kIgnored},
    {"store", FieldKind::kIgnored},
    {"service_tier", FieldKind::kIgnored},
    {"prompt_cache_key", FieldKind::kIgnored},
    {"safety_identifier", FieldKind::kIgnored},
};

constexpr FieldRule kChatFields[] = {
    {"messages", FieldKind::kHandled},
    {"max_completion_tokens", FieldKind::kHandled},
    {"top_logprobs", FieldKind::kHandled},
    {"chat_template_kwargs", FieldKind::kHandled},
    {"tools", FieldKind::kUnsupported},
    {"tool_choice", FieldKind::kUnsupported},
    {"functions", FieldKind::kUnsupported},
    {"function_call", FieldKind::kUnsupported},
    {"parallel_tool_calls", FieldKind::kUnsupported},
    {"response_format", FieldKind::kUnsupported},
    {"audio", FieldKind::kUnsupported},
    {"modalities", FieldKind::kUnsupported},
    {"prediction", FieldKind::kUnsupported},
    {"reasoning_effort", FieldKind::kUnsupported},
    {"verbosity", FieldKind::kUnsupported},
    {"web_search_options", FieldKind::kUnsupported},
};

constexpr FieldRule kCompletionFields[] = {
    {"prompt", FieldKind::kHandled},
    {"suffix", FieldKind::kUnsupported},
    {"echo", FieldKind::kUnsupported},
    {"best_of", FieldKind::kUnsupported},
};

template <size_t N>
const FieldRule* find_rule(const FieldRule (&rules)[N], std::string_view name) {
  for (const FieldRule& r : rules)
    if (r.name == name) return &r;
  return nullptr;
}

// True when an unsupported field carries the value that means "off", which
// clients sometimes send explicitly.
bool is_off_value(std::string_view name, const json& v) {
  if (name == "tools" || name == "functions") return v.is_array() && v.empty();
  if (name == "tool_choice" || name == "function_call") return v == "none";
  if (name == "logit_bias") return v.is_object() && v.empty();
  if (name == "response_format")
    return v.is_object() && v.size() == 1 && v.contains("type") && v["type"] == "text";
  if (name == "modalities") return v.is_array() && v.size() == 1 && v[0] == "text";
  if (name == "echo") return v == false;
  if (name == "suffix") return v.is_string() && v.get_ref<const std::string&>().empty();
  if (name == "best_of") return v.is_number() && v.get<double>() == 1.0;
  return false;
}

std::string unsupported_reason(std::string_view name) {
  if (name == "tools" || name == "tool_choice" || name == "functions" || name == "function_call" ||
      name == "parallel_tool_calls")
    return " (tool and function calling are not implemented).";
  if (name == "response_format") return " (structured output is not implemented).";
  if (name == "logit_bias") return " (an empty object is accepted).";
  if (name == "echo") return " (false is accepted).";
  if (name == "best_of") return " (1 is accepted).";
  if (name == "audio" || name == "modalities") return " (text is the only modality).";
  return ".";
}

// Rejects the first field (in key order) that is unknown, or unsupported
// with a value other than its "off" value.
template <size_t N>
void check_field_names(const json& body, const FieldRule (&own)[N]) {
  for (const auto& [name, value] : body.items()) {
    const FieldRule* rule = find_rule(own, name);
    if (rule == nullptr) rule = find_rule(kCommonFields, name);
    if (rule == nullptr) unrecognized(name);
    if (rule->kind == FieldKind::kUnsupported && !value.is_null() && !is_off_value(name, value))
      unsupported(name, unsupported_reason(name));
  }
}

// ---- field parsers ----------------------------------------------------------

void parse_ignored_fields(const json& body) {
  for (const char* name : {"user", "service_tier", "prompt_cache_key", "safety_identifier"})
    if (const json* v = field(body, name)) as_string(*v, name);
  if (const json* v = field(body, "metadata"); v && !v->is_object())
    invalid_type("metadata", "an object", *v);
  if (const json* v = field(body, "store")) as_bool(*v, "store");
}

std::vector<std::string> parse_stop(const json& v) {
  std::vector<std::string> stop;
  if (v.is_string()) {
    if (v.get_ref<const std::string&>().empty())
      invalid_value("stop", "stop strings must not be empty.");
    stop.push_back(v.get<std::string>());
    return stop;
  }
  if (!v.is_array()) invalid_type("stop", "a string or an array of strings", v);
  if (v.size() > size_t(kMaxStopStrings))
    invalid_value("stop", "at most " + std::to_string(kMaxStopStrings) + " stop strings, got " +
                              std::to_string(v.size()) + ".");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string param = "stop[" + std::to_string(i) + "]";
    const std::string& s = as_string(v[i], param);
    if (s.empty()) invalid_value(param, "stop strings must not be empty.");
    stop.push_back(s);
  }
  return stop;
}

// Penalties are accepted only as 0: turbokv samples without them.
void parse_penalty(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return;
  const double p = as_number(*v, name);
  check_range(name, p, -2.0, 2.0, false);
  if (p != 0.0)
    reject(std::string("Unsupported value: '") + name +
               "' must be 0 (turbokv does not implement presence or frequency penalties).",
           name, "unsupported_value");
}

void parse_stream(const json& body, GenerationRequest& r) {
  if (const json* v = field(body, "stream")) r.stream = as_bool(*v, "stream");
  const json* opts = field(body, "stream_options");
  if (!opts) return;
  if (!opts->is_object()) invalid_type("stream_options", "an object", *opts);
  if (!r.stream)
    reject("Invalid value for 'stream_options': only allowed when 'stream' is true.",
           "stream_options", "invalid_value");
  for (const auto& [name, value] : opts->items()) {
    const std::string param = "stream_options." + name;
    if (name == "include_usage") {
      if (!value.is_null()) r.include_usage = as_bool(value, param);
    } else if (name == "include_obfuscation") {
      if (!value.is_null()) as_bool(value, param);  // nothing to obfuscate
    } else {
      unrecognized(param);
    }
  }
}

// The fields both endpoints share (logprobs differs and is parsed apart).
void parse_common(const json& body, GenerationRequest& r) {
  if (const json* v = field(body, "model")) r.model = as_string(*v, "model");
  if (const json* v = field(body, "max_tokens"))
    r.max_tokens = int32_t(as_integer(*v, "max_tokens", 1, std::numeric_limits<int32_t>::max()));
  if (const json* v = field(body, "temperature")) {
    r.temperature = as_number(*v, "temperature");
    check_range("temperature", r.temperature, 0.0, 2.0, false);
  }
  if (const json* v = field(body, "top_p")) {
    r.top_p = as_number(*v, "top_p");
    check_range("top_p", r.top_p, 0.0, 1.0, true);
  }
  if (const json* v = field(body, "top_k"))
    r.top_k = int32_t(as_integer(*v, "top_k", 0, std::numeric_limits<int32_t>::max()));
  if (const json* v = field(body, "min_p")) {
    r.min_p = as_number(*v, "min_p");
    check_range("min_p", r.min_p, 0.0, 1.0, false);
  }
  if (const json* v = field(body, "seed"))
    r.seed = as_integer(*v, "seed", std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max());
  if (const json* v = field(body, "stop")) r.stop = parse_stop(*v);
  parse_penalty(body, "presence_penalty");
  parse_penalty(body, "frequency_penalty");
  if (const json* v = field(body, "n");
      v && as_integer(*v, "n", std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()) != 1)
    reject("Invalid value for 'n': turbokv returns one choice per request, so n must be 1.", "n",
           "unsupported_value");
  parse_stream(body, r);
  parse_ignored_fields(body);
}

// A message's content: a string, or an array of text parts joined by "\n".
std::string parse_content(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) invalid_type(param, "a string or an array of content parts", v);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part_param = param + "[" + std::to_string(i) + "]";
    const json& part = v[i];
    if (!part.is_object()) invalid_type(part_param, "an object", part);
    const json* type = field(part, "type");
    if (!type) missing(part_param + ".type");
    const std::string& t = as_string(*type, part_param + ".type");
    if (t != "text")
      reject("Invalid value for '" + part_param + ".type': content parts of type '" + clipped(t) +
                 "' are not supported (turbokv serves text only; use 'text').",
             part_param + ".type", "unsupported_value");
    for (const auto& [name, value] : part.items())
      if (name != "type" && name != "text") unrecognized(part_param + "." + name);
    const json* part_text = field(part, "text");
    if (!part_text) missing(part_param + ".text");
    if (i > 0) text += '\n';
    text += as_string(*part_text, part_param + ".text");
  }
  return text;
}

tok::ChatMessage parse_message(const json& m, const std::string& param) {
  if (!m.is_object()) invalid_type(param, "an object", m);
  const json* role_v = field(m, "role");
  if (!role_v) missing(param + ".role");
  std::string role = as_string(*role_v, param + ".role");
  if (role == "developer") role = "system";
  if (role == "tool" || role == "function")
    reject("Invalid value for '" + param + ".role': '" + clipped(role) +
               "' messages are not supported (turbokv does not implement tool calls).",
           param + ".role", "unsupported_value");
  if (role != "system" && role != "user" && role != "assistant")
    invalid_value(
        param + ".role",
        "'" + clipped(role) + "' is not one of 'system', 'developer', 'user', 'assistant'.");
  for (const auto& [name, value] : m.items()) {
    if (name == "role" || name == "content" || name == "name" || name == "refusal") continue;
    if (name == "tool_calls" || name == "function_call" || name == "tool_call_id" ||
        name == "audio") {
      if (value.is_null() || (value.is_array() && value.empty())) continue;
      unsupported(param + "." + name, " (tool and function calling are not implemented).");
    }
    unrecognized(param + "." + name);
  }
  if (const json* v = field(m, "name")) as_string(*v, param + ".name");
  tok::ChatMessage message;
  message.role = std::move(role);
  const json* content = field(m, "content");
  if (content) {
    message.content = parse_content(*content, param + ".content");
  } else if (message.role != "assistant") {
    missing(param + ".content");  // only an assistant turn may come without text
  }
  return message;
}

void parse_messages(const json& body, GenerationRequest& r) {
  const json* v = field(body, "messages");
  if (!v) missing("messages");
  if (!v->is_array()) invalid_type("messages", "an array", *v);
  if (v->empty()) invalid_value("messages", "expected at least one message.");
  r.messages.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i)
    r.messages.push_back(parse_message((*v)[i], "messages[" + std::to_string(i) + "]"));
}

std::vector<int32_t> parse_token_ids(const json& v, const std::string& param) {
  if (v.empty()) invalid_value(param, "expected at least one token id.");
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    ids.push_back(int32_t(as_integer(v[i], param + "[" + std::to_string(i) + "]", 0,
                                     std::numeric_limits<int32_t>::max())));
  return ids;
}

// prompt: a string, [string], [token ids] or [[token ids]]. Batches of
// prompts would need n > 1 choices, which turbokv does not return.
void parse_prompt(const json& body, GenerationRequest& r) {
  const json* v = field(body, "prompt");
  if (!v) missing("prompt");
  constexpr const char* kExpected = "a string, an array of one string, or an array of token ids";
  if (v->is_string()) {
    r.prompt = v->get<std::string>();
    return;
  }
  if (!v->is_array()) invalid_type("prompt", kExpected, *v);
  if (v->empty()) invalid_value("prompt", "expected a non-empty prompt.");
  const json& first = (*v)[0];
  if (first.is_number()) {
    r.prompt_tokens = parse_token_ids(*v, "prompt");
    r.prompt_is_tokens = true;
    return;
  }
  if (!first.is_string() && !first.is_array()) invalid_type("prompt[0]", kExpected, first);
  if (v->size() != 1)
    invalid_value("prompt", "turbokv completes one prompt per request, got " +
                                std::to_string(v->size()) + ".");
  if (first.is_string()) {
    r.prompt = first.get<std::string>();
  } else {
    r.prompt_tokens = parse_token_ids(first, "prompt[0]");
    r.prompt_is_tokens = true;
  }
}

void parse_chat_fields(const json& body, GenerationRequest& r) {
  parse_messages(body, r);
  if (const json* v = field(body, "chat_template_kwargs")) {
    if (!v->is_object()) invalid_type("chat_template_kwargs", "an object", *v);
    r.chat_template_kwargs = nlohmann::ordered_json::parse(v->dump());
  }
  if (const json* v = field(body, "max_completion_tokens"))
    r.max_tokens =
        int32_t(as_integer(*v, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max()));
  if (const json* v = field(body, "logprobs")) r.logprobs = as_bool(*v, "logprobs");
  if (const json* v = field(body, "top_logprobs")) {
    r.top_logprobs = int32_t(as_integer(*v, "top_logprobs", 0, kMaxChatTopLogprobs));
    if (!r.logprobs)
      reject(
          "Invalid value for 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is set.",
          "top_logprobs", "invalid_value");
  }
}

void parse_completion_fields(const json& body, GenerationRequest& r) {
  parse_prompt(body, r);
  if (const json* v = field(body, "logprobs")) {
    r.logprobs = true;
    r.top_logprobs = int32_t(as_integer(*v, "logprobs", 0, kMaxCompletionLogprobs));
  }
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

template <typename ParseFields>
std::variant<GenerationRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint,
                                                        ParseFields parse_fields) {
  try {
    const json doc = parse_body(body);
    if (endpoint == Endpoint::kChatCompletions)
      check_field_names(doc, kChatFields);
    else
      check_field_names(doc, kCompletionFields);
    GenerationRequest r;
    r.endpoint = endpoint;
    parse_common(doc, r);
    parse_fields(doc, r);
    return r;
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

}  // namespace

std::string error_type_for_status(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 && status <= 599 ? "server_error" : "invalid_request_error";
  }
}

ApiError make_api_error(int status, const std::string& message, std::string param,
                        std::string code) {
  ApiError e;
  e.status = status;
  e.type = error_type_for_status(status);
  e.message = escape_bytes(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::variant<GenerationRequest, ApiError> parse_chat_request(std::string_view body) {
  return parse_request(body, Endpoint::kChatCompletions, parse_chat_fields);
}

std::variant<GenerationRequest, ApiError> parse_completion_request(std::string_view body) {
  return parse_request(body, Endpoint::kCompletions, parse_completion_fields);
}

sample::SamplerConfig sampler_config(const GenerationRequest& request, uint64_t seed_if_unset) {
  sample::SamplerConfig c;
  c.temperature = float(request.temperature);
  c.top_k = request.top_k;
  // A top_p too small for a float still means "only the most likely token".
  c.top_p = std::max(float(request.top_p), std::numeric_limits<float>::min());
  c.min_p = float(request.min_p);
  c.repeat_penalty = 1.0f;  // OpenAI has no repetition penalty
  c.repeat_last_n = 0;
  // Negative seeds map onto the upper half of uint64 (two's complement).
  c.seed = request.seed ? uint64_t(*request.seed) : seed_if_unset;
  return c;
}

}  // namespace tkv::server
