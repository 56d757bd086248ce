// The request side of the OpenAI-compatible protocol: the bodies of
// POST /v1/chat/completions and POST /v1/completions parsed and validated
// into one typed GenerationRequest, or an ApiError that the front end sends
// back as an OpenAI error object (api_response.h, error_body).
//
// The rules follow the OpenAI API reference:
//   - a field sent as JSON null is the same as a field left out;
//   - wrong JSON types and values out of range are 400s whose message and
//     `param` name the field ("Invalid type for 'temperature': expected a
//     number, but got a string instead.");
//   - fields OpenAI defines that turbokv does not implement (echo,
//     functions, ...) are 400s naming the field, unless they carry their
//     "off" value (echo: false, best_of: 1, function_call: "none",
//     modalities: ["text"]);
//   - any other field is "Unrecognized request argument supplied: NAME"
//     (param NAME), as is an unknown key inside a message, a content part
//     or stream_options (param "messages[0].NAME", ...).
// Codes: invalid_json, invalid_type, invalid_value, missing_required_parameter,
// unknown_parameter, unsupported_parameter (a field), unsupported_value (a
// value of a known field: an image part, a tool type other than function).
// Tools, tool_choice and the tool turns of a conversation: api_tools.h.
// Extensions (llama-server's names): top_k (>= 0, 0 = off), min_p ([0, 1],
// 0 = off), repeat_penalty (> 0, 1 = off), repeat_last_n (>= -1) and
// cache_prompt (default true). Structured output: response_format and
// llama-server's grammar (structured_output.h).
//
// Parsing never throws and never reads outside the body, whatever the bytes
// (tests/fuzz/server_request_fuzz.cc); JSON nested deeper than
// kMaxJsonDepth is refused before it is built.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "grammar/grammar.h"
#include "sample/sampler.h"
#include "tokenizer/chat_template.h"

namespace tkv::server {

// An OpenAI error object: {"error": {"message", "type", "param", "code"}}.
// `type` follows the HTTP status (error_type_for_status); `param` names the
// request field at fault and `code` is a machine-readable reason, both
// empty (sent as null) when they do not apply.
struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;
  std::string code;
};

// OpenAI's error type for an HTTP status: 401 -> "authentication_error",
// 403 -> "permission_error", 404 -> "not_found_error", 429 ->
// "rate_limit_error", 5xx -> "server_error", anything else (400, 413, ...)
// -> "invalid_request_error".
std::string error_type_for_status(int status);

// An ApiError with the type that belongs to `status`. The message goes
// through tkv::escape_bytes: it may quote what the client sent (a field name,
// a role, a URL path), and must stay one printable UTF-8 line.
ApiError make_api_error(int status, const std::string& message, std::string param = {},
                        std::string code = {});

enum class Endpoint { kChatCompletions, kCompletions };

// tool_choice (api_tools.h): kAuto lets the model choose, kNone does not
// offer the tools, kRequired and kNamed make the reply tool calls.
enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

// One prompt of a completions request: text, or token ids as sent.
struct CompletionPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;  // as sent; empty when left out

  // Chat: the conversation, roles normalized to system / user / assistant
  // ("developer" becomes "system"); content parts joined with "\n".
  std::vector<tok::ChatMessage> messages;
  // Chat: more variables for the chat template (enable_thinking, ...).
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // Chat: the tools offered (OpenAI's form, key order as sent; empty when
  // none), tool_choice (its function's name when kNamed) and
  // parallel_tool_calls (api_tools.h).
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;
  bool parallel_tool_calls = true;

  // Completions: the prompts, one or more (a string, token ids as sent,
  // or an array of either); each id >= 0 (the front end checks them
  // against the vocabulary).
  std::vector<CompletionPrompt> prompts;

  // max_tokens (chat: max_completion_tokens wins when both are sent), >= 1.
  // Left out: generate until a stop or the end of the context, as
  // llama-server does (OpenAI's completions endpoint would stop at 16); the
  // front end caps any value by the context.
  std::optional<int32_t> max_tokens;

  double temperature = 1.0;  // [0, 2]; 0 is greedy
  double top_p = 1.0;        // (0, 1]
  int32_t top_k = 0;         // >= 0, 0 = off (extension)
  double min_p = 0.0;        // [0, 1], 0 = off (extension)
  std::optional<int64_t> seed;
  std::vector<std::string> stop;  // at most 4, none empty
  double presence_penalty = 0;    // [-2, 2]
  double frequency_penalty = 0;   // [-2, 2]
  double repeat_penalty = 1.0;    // > 0, 1 = off (extension)
  int32_t repeat_last_n = 64;     // >= -1: -1 every token, 0 off (extension)
  // logit_bias: token id -> [-100, 100], ids ascending (the front end
  // checks them against the vocabulary).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Choices per prompt, [1, kMaxChoices] (with the prompts: at most
  // kMaxChoices in all).
  int32_t n = 1;
  // Start from a cached prefix of the prompt when there is one (extension,
  // llama-server's name); false: prefill the whole prompt.
  bool cache_prompt = true;
  // Chat: "none", "minimal", "low", "medium", "high" or "xhigh"; empty
  // when not sent.
  std::string reasoning_effort;

  // Chat: logprobs (bool) and top_logprobs (0..20, only with logprobs).
  // Completions: logprobs N (0..5) sets logprobs = true, top_logprobs = N.
  bool logprobs = false;
  int32_t top_logprobs = 0;

  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage (needs stream)

  // The grammar the output must follow (response_format json_object /
  // json_schema, or grammar); null for free text.
  std::shared_ptr<const grammar::Grammar> grammar;
};

constexpr int kMaxJsonDepth = 64;
constexpr int kMaxStopStrings = 4;
constexpr int kMaxChatTopLogprobs = 20;
constexpr int kMaxCompletionLogprobs = 5;
constexpr int kMaxChoices = 128;  // n x prompts, as OpenAI's n
constexpr double kMaxLogitBias = 100;

// Parse and validate a request body. Never throws.
std::variant<GenerationRequest, ApiError> parse_chat_request(std::string_view body);
std::variant<GenerationRequest, ApiError> parse_completion_request(std::string_view body);

// The sampler settings a request asks for. `seed_if_unset` is used when the
// request has no seed (the front end passes a fresh random number). The
// repetition penalty is off unless the request sets repeat_penalty
// (OpenAI has none).
sample::SamplerConfig sampler_config(const GenerationRequest& request, uint64_t seed_if_unset);

}  // namespace tkv::server
