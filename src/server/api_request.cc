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
#include "server/api_json.h"
#include "server/api_tools.h"
#include "server/structured_output.h"

namespace tkv::server {

namespace {

using nlohmann::json;
using namespace api_json;

// ---- which fields exist -----------------------------------------------------

enum class FieldKind { kHandled, kIgnored, kUnsupported };

struct FieldRule {
  std::string_view name;
  FieldKind kind;
};

// Fields both endpoints share. top_k, min_p, repeat_penalty, repeat_last_n
// and cache_prompt are extensions (llama-server's).
constexpr FieldRule kCommonFields[] = {
    {"model", FieldKind::kHandled},
    {"response_format", FieldKind::kHandled},  // structured_output.h
    {"grammar", FieldKind::kHandled},
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
    {"logit_bias", FieldKind::kHandled},
    {"repeat_penalty", FieldKind::kHandled},
    {"repeat_last_n", FieldKind::kHandled},
    {"cache_prompt", FieldKind::kHandled},
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
    {"reasoning_effort", FieldKind::kHandled},
    {"tools", FieldKind::kHandled},  // api_tools.h
    {"tool_choice", FieldKind::kHandled},
    {"parallel_tool_calls", FieldKind::kHandled},
    {"functions", FieldKind::kUnsupported},
    {"function_call", FieldKind::kUnsupported},
    {"audio", FieldKind::kUnsupported},
    {"modalities", FieldKind::kUnsupported},
    {"prediction", FieldKind::kUnsupported},
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
  if (name == "functions") return v.is_array() && v.empty();
  if (name == "function_call") return v == "none";
  if (name == "modalities") return v.is_array() && v.size() == 1 && v[0] == "text";
  if (name == "echo") return v == false;
  if (name == "suffix") return v.is_string() && v.get_ref<const std::string&>().empty();
  if (name == "best_of") return v.is_number() && v.get<double>() == 1.0;
  return false;
}

std::string unsupported_reason(std::string_view name) {
  if (name == "functions" || name == "function_call")
    return " (deprecated by OpenAI: use 'tools' and 'tool_choice').";
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

// A number in [lo, hi] (lo excluded when lo_open), or `fallback` when absent.
double number_in(const json& body, const char* name, double lo, double hi, bool lo_open,
                 double fallback) {
  const json* v = field(body, name);
  if (!v) return fallback;
  const double x = as_number(*v, name);
  check_range(name, x, lo, hi, lo_open);
  return x;
}

// {"token id": bias}: ids as decimal strings, biases in [-100, 100]
// (OpenAI's form); returned by ascending id.
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& v) {
  if (!v.is_object()) invalid_type("logit_bias", "an object", v);
  std::vector<std::pair<int32_t, float>> bias;
  bias.reserve(v.size());
  for (const auto& [key, value] : v.items()) {
    const std::string param = "logit_bias." + key;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    const int64_t id = digits ? std::stoll(key) : -1;
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      invalid_value(
          "logit_bias",
          "keys must be token ids (non-negative integers as strings), got '" + clipped(key) + "'.");
    const double b = as_number(value, param);
    check_range(param, b, -kMaxLogitBias, kMaxLogitBias, false);
    bias.emplace_back(int32_t(id), float(b));
  }
  std::sort(bias.begin(), bias.end());
  for (size_t i = 1; i < bias.size(); ++i)
    if (bias[i].first == bias[i - 1].first)
      invalid_value("logit_bias", "token " + std::to_string(bias[i].first) + " is named twice.");
  return bias;
}

// Sampling beyond temperature and the filters: penalties, bias, choices.
void parse_sampling_extras(const json& body, GenerationRequest& r) {
  r.presence_penalty = number_in(body, "presence_penalty", -2.0, 2.0, false, 0.0);
  r.frequency_penalty = number_in(body, "frequency_penalty", -2.0, 2.0, false, 0.0);
  r.repeat_penalty = number_in(body, "repeat_penalty", 0.0, 1e6, true, 1.0);
  if (const json* v = field(body, "repeat_last_n"))
    r.repeat_last_n =
        int32_t(as_integer(*v, "repeat_last_n", -1, std::numeric_limits<int32_t>::max()));
  if (const json* v = field(body, "logit_bias")) r.logit_bias = parse_logit_bias(*v);
  if (const json* v = field(body, "n")) r.n = int32_t(as_integer(*v, "n", 1, kMaxChoices));
  if (const json* v = field(body, "cache_prompt")) r.cache_prompt = as_bool(*v, "cache_prompt");
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
  parse_sampling(body, r);
  if (const json* v = field(body, "stop")) r.stop = parse_stop(*v);
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
  if (role == "function")
    reject("Invalid value for '" + param +
               ".role': 'function' messages are deprecated by OpenAI and not supported (use "
               "'tool' messages).",
           param + ".role", "unsupported_value");
  if (role != "system" && role != "user" && role != "assistant" && role != "tool")
    invalid_value(param + ".role", "'" + clipped(role) +
                                       "' is not one of 'system', 'developer', 'user', "
                                       "'assistant', 'tool'.");
  for (const auto& [name, value] : m.items()) {
    if (name == "role" || name == "content" || name == "name" || name == "refusal" ||
        name == "tool_calls" || name == "tool_call_id" || name == "reasoning_content")
      continue;
    if (name == "function_call" || name == "audio") {
      if (value.is_null()) continue;
      unsupported(param + "." + name, name == "audio" ? " (text is the only modality)."
                                                      : " (deprecated: use 'tool_calls').");
    }
    unrecognized(param + "." + name);
  }
  if (const json* v = field(m, "name")) as_string(*v, param + ".name");
  tok::ChatMessage message;
  message.role = std::move(role);
  parse_message_tool_fields(m, param, message);
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

// prompt: a string, [token ids], or an array of strings and token-id
// arrays (several prompts: each its own choices, OpenAI's batch form).
void parse_prompt(const json& body, GenerationRequest& r) {
  const json* v = field(body, "prompt");
  if (!v) missing("prompt");
  constexpr const char* kExpected =
      "a string, an array of token ids, or an array of strings or token-id arrays";
  if (v->is_string()) {
    r.prompts.push_back({.text = v->get<std::string>(), .tokens = {}, .is_tokens = false});
    return;
  }
  if (!v->is_array()) invalid_type("prompt", kExpected, *v);
  if (v->empty()) invalid_value("prompt", "expected a non-empty prompt.");
  if ((*v)[0].is_number()) {
    r.prompts.push_back({.text = {}, .tokens = parse_token_ids(*v, "prompt"), .is_tokens = true});
    return;
  }
  if (v->size() > size_t(kMaxChoices))
    invalid_value("prompt", "at most " + std::to_string(kMaxChoices) + " prompts, got " +
                                std::to_string(v->size()) + ".");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& p = (*v)[i];
    const std::string param = "prompt[" + std::to_string(i) + "]";
    if (p.is_string())
      r.prompts.push_back({.text = p.get<std::string>(), .tokens = {}, .is_tokens = false});
    else if (p.is_array())
      r.prompts.push_back({.text = {}, .tokens = parse_token_ids(p, param), .is_tokens = true});
    else
      invalid_type(param, "a string or an array of token ids", p);
  }
}

void parse_chat_fields(const json& body, std::string_view raw, GenerationRequest& r) {
  parse_messages(body, r);
  if (field(body, "tools") || field(body, "tool_choice") || field(body, "parallel_tool_calls"))
    parse_tool_fields(body, nlohmann::ordered_json::parse(raw), r);
  if (const json* v = field(body, "chat_template_kwargs")) {
    if (!v->is_object()) invalid_type("chat_template_kwargs", "an object", *v);
    r.chat_template_kwargs = nlohmann::ordered_json::parse(v->dump());
  }
  if (const json* v = field(body, "max_completion_tokens"))
    r.max_tokens =
        int32_t(as_integer(*v, "max_completion_tokens", 1, std::numeric_limits<int32_t>::max()));
  if (const json* v = field(body, "logprobs")) r.logprobs = as_bool(*v, "logprobs");
  if (const json* v = field(body, "reasoning_effort")) {
    r.reasoning_effort = as_string(*v, "reasoning_effort");
    constexpr std::string_view kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh"};
    if (std::find(std::begin(kEfforts), std::end(kEfforts), r.reasoning_effort) ==
        std::end(kEfforts))
      invalid_value("reasoning_effort", "'" + clipped(r.reasoning_effort) +
                                            "' is not one of 'none', 'minimal', 'low', 'medium', "
                                            "'high', 'xhigh'.");
  }
  if (const json* v = field(body, "top_logprobs")) {
    r.top_logprobs = int32_t(as_integer(*v, "top_logprobs", 0, kMaxChatTopLogprobs));
    if (!r.logprobs)
      reject(
          "Invalid value for 'top_logprobs': 'logprobs' must be true when 'top_logprobs' is set.",
          "top_logprobs", "invalid_value");
  }
}

void parse_completion_fields(const json& body, std::string_view, GenerationRequest& r) {
  parse_prompt(body, r);
  if (int64_t(r.prompts.size()) * r.n > kMaxChoices)
    invalid_value("n", "n x the number of prompts must be at most " + std::to_string(kMaxChoices) +
                           ", got " + std::to_string(r.n) + " x " +
                           std::to_string(r.prompts.size()) + ".");
  if (const json* v = field(body, "logprobs")) {
    r.logprobs = true;
    r.top_logprobs = int32_t(as_integer(*v, "logprobs", 0, kMaxCompletionLogprobs));
  }
}

template <typename ParseFields>
std::variant<GenerationRequest, ApiError> parse_request(std::string_view body, Endpoint endpoint,
                                                        ParseFields parse_fields) {
  return guarded<GenerationRequest>([&] {
    const json doc = parse_body(body);
    if (endpoint == Endpoint::kChatCompletions)
      check_field_names(doc, kChatFields);
    else
      check_field_names(doc, kCompletionFields);
    GenerationRequest r;
    r.endpoint = endpoint;
    parse_common(doc, r);
    parse_fields(doc, body, r);
    auto grammar = output_grammar(doc, body);
    if (const ApiError* e = std::get_if<ApiError>(&grammar)) throw RequestError{*e};
    r.grammar = std::get<0>(std::move(grammar));
    return r;
  });
}

}  // namespace

namespace api_json {

void parse_sampling(const json& body, GenerationRequest& r) {
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
  parse_sampling_extras(body, r);
}

}  // namespace api_json

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
  c.repeat_penalty = float(request.repeat_penalty);
  c.repeat_last_n = request.repeat_penalty == 1.0 ? 0 : request.repeat_last_n;
  c.presence_penalty = float(request.presence_penalty);
  c.frequency_penalty = float(request.frequency_penalty);
  c.logit_bias = request.logit_bias;
  // Negative seeds map onto the upper half of uint64 (two's complement).
  c.seed = request.seed ? uint64_t(*request.seed) : seed_if_unset;
  return c;
}

}  // namespace tkv::server
