#include "server/route_messages.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <memory>
#include <utility>

#include "common/error.h"
#include "server/api_json.h"
#include "server/api_response.h"
#include "server/http_exchange.h"
#include "server/http_generation.h"

namespace tkv::server {
namespace {

using namespace api_json;

// ---- the request ------------------------------------------------------------

constexpr std::array kHandled = {"model",
                                 "max_tokens",
                                 "messages",
                                 "system",
                                 "temperature",
                                 "top_p",
                                 "top_k",
                                 "stop_sequences",
                                 "stream",
                                 "seed",
                                 "presence_penalty",
                                 "frequency_penalty",
                                 "repeat_penalty",
                                 "repeat_last_n",
                                 "logit_bias",
                                 "cache_prompt",
                                 "min_p"};
constexpr std::array kIgnored = {"metadata", "service_tier"};
constexpr std::array kUnsupported = {"tools", "tool_choice", "thinking", "container",
                                     "mcp_servers"};

template <size_t N>
bool one_of(const std::array<const char*, N>& names, const std::string& name) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

bool is_off(const std::string& name, const json& v) {
  if (name == "tools" || name == "mcp_servers") return v.is_array() && v.empty();
  if (name == "tool_choice")
    return v.is_object() && v.contains("type") && (v["type"] == "none" || v["type"] == "auto");
  if (name == "thinking") return v.is_object() && v.contains("type") && v["type"] == "disabled";
  return false;
}

void check_names(const json& body) {
  for (const auto& [name, value] : body.items()) {
    if (one_of(kHandled, name) || one_of(kIgnored, name)) continue;
    if (!one_of(kUnsupported, name)) unrecognized(name);
    if (!value.is_null() && !is_off(name, value))
      unsupported(name, name == "thinking" ? " (extended thinking is not implemented)."
                                           : " (tool calling is not implemented).");
  }
}

// A tool_result's content: a string, or text blocks.
std::string tool_result_text(const json& block, const std::string& param) {
  const json* c = field(block, "content");
  if (!c) return {};
  if (c->is_string()) return c->get<std::string>();
  if (!c->is_array()) invalid_type(param + ".content", "a string or an array of blocks", *c);
  std::string text;
  for (size_t i = 0; i < c->size(); ++i) {
    const json& b = (*c)[i];
    const std::string p = param + ".content[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || b["type"] != "text")
      reject("Invalid value for '" + p + "': tool results of text only are supported.", p,
             "unsupported_value");
    const json* t = field(b, "text");
    if (!t) missing(p + ".text");
    if (i > 0) text += '\n';
    text += as_string(*t, p + ".text");
  }
  return text;
}

// One content block as the text the template renders. Tool blocks become
// text the model can read: turbokv has no tool-calling template support.
std::string block_text(const json& b, const std::string& param) {
  if (!b.is_object()) invalid_type(param, "an object", b);
  const json* type = field(b, "type");
  if (!type) missing(param + ".type");
  const std::string& t = as_string(*type, param + ".type");
  if (t == "text") {
    const json* text = field(b, "text");
    if (!text) missing(param + ".text");
    return as_string(*text, param + ".text");
  }
  if (t == "tool_use") {
    const json* name = field(b, "name");
    if (!name) missing(param + ".name");
    const json* input = field(b, "input");
    return "[tool call " + as_string(*name, param + ".name") + ": " +
           (input ? input->dump() : std::string("{}")) + "]";
  }
  if (t == "tool_result") {
    const bool error = b.contains("is_error") && b["is_error"] == true;
    return std::string(error ? "[tool error: " : "[tool result: ") + tool_result_text(b, param) +
           "]";
  }
  reject("Invalid value for '" + param + ".type': content blocks of type '" + clipped(t) +
             "' are not supported (turbokv serves text only).",
         param + ".type", "unsupported_value");
}

std::string content_text(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) invalid_type(param, "a string or an array of content blocks", v);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) text += '\n';
    text += block_text(v[i], param + "[" + std::to_string(i) + "]");
  }
  return text;
}

void parse_messages(const json& body, GenerationRequest& r) {
  if (const json* s = field(body, "system"))
    r.messages.push_back({.role = "system", .content = content_text(*s, "system")});
  const json* v = field(body, "messages");
  if (!v) missing("messages");
  if (!v->is_array()) invalid_type("messages", "an array", *v);
  if (v->empty()) invalid_value("messages", "expected at least one message.");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) invalid_type(param, "an object", m);
    for (const auto& [name, value] : m.items())
      if (name != "role" && name != "content") unrecognized(param + "." + name);
    const json* role = field(m, "role");
    if (!role) missing(param + ".role");
    const std::string& rl = as_string(*role, param + ".role");
    if (rl != "user" && rl != "assistant")
      invalid_value(param + ".role", "'" + clipped(rl) + "' is not one of 'user', 'assistant'.");
    const json* content = field(m, "content");
    if (!content) missing(param + ".content");
    r.messages.push_back({.role = rl, .content = content_text(*content, param + ".content")});
  }
}

GenerationRequest parse(std::string_view text, bool count_only) {
  const json body = parse_body(text);
  check_names(body);
  GenerationRequest r;
  r.endpoint = Endpoint::kChatCompletions;
  if (const json* v = field(body, "model")) r.model = as_string(*v, "model");
  if (!count_only && !field(body, "model")) missing("model");
  if (const json* v = field(body, "max_tokens"))
    r.max_tokens = int32_t(as_integer(*v, "max_tokens", 1, 1 << 30));
  else if (!count_only)
    missing("max_tokens");
  parse_messages(body, r);
  if (const json* v = field(body, "stop_sequences")) {
    if (!v->is_array()) invalid_type("stop_sequences", "an array of strings", *v);
    for (size_t i = 0; i < v->size(); ++i) {
      const std::string p = "stop_sequences[" + std::to_string(i) + "]";
      const std::string& s = as_string((*v)[i], p);
      if (s.empty()) invalid_value(p, "stop sequences must not be empty.");
      r.stop.push_back(s);
    }
  }
  if (const json* v = field(body, "stream")) r.stream = as_bool(*v, "stream");
  if (const json* v = field(body, "metadata"); v && !v->is_object())
    invalid_type("metadata", "an object", *v);
  parse_sampling(body, r);
  return r;
}

// ---- the response -----------------------------------------------------------

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

Json anthropic_error(const ApiError& e) {
  return {{"type", "error"},
          {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}};
}

class MessagesFormat : public ReplyFormat {
 public:
  MessagesFormat(std::string id, std::string model, std::vector<std::string> stops)
      : id_(std::move(id)), model_(std::move(model)), stops_(std::move(stops)) {}

  void prepared(int64_t prompt_tokens) override { prompt_tokens_ = prompt_tokens; }
  std::string open_choice(const ChoiceState&) override {
    Json message = message_json(Json::array(), nullptr, nullptr);
    message["usage"] = {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}};
    return event("message_start", {{"message", std::move(message)}}) +
           event("content_block_start",
                 {{"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}}) +
           event("ping", Json::object());
  }
  std::string piece(const StreamPiece& p) override {
    if (p.text.empty()) return {};
    return event("content_block_delta",
                 {{"index", 0}, {"delta", {{"type", "text_delta"}, {"text", p.text}}}});
  }
  std::string close(const std::vector<ChoiceState>& choices, const Usage& usage) override {
    const Event& done = choices.at(0).done_event;
    return event("content_block_stop", {{"index", 0}}) +
           event("message_delta",
                 {{"delta", {{"stop_reason", stop_reason(done)}, {"stop_sequence", stop_of(done)}}},
                  {"usage", {{"output_tokens", usage.completion_tokens}}}}) +
           event("message_stop", Json::object());
  }
  std::string stream_error(const ApiError& e) override {
    return event("error", anthropic_error(e));
  }
  Json whole(const std::vector<ChoiceState>& choices, const Usage& usage) override {
    const ChoiceState& c = choices.at(0);
    Json content = Json::array({{{"type", "text"}, {"text", c.text}}});
    Json j = message_json(std::move(content), stop_reason(c.done_event), stop_of(c.done_event));
    j["usage"] = {{"input_tokens", usage.prompt_tokens},
                  {"output_tokens", usage.completion_tokens},
                  {"cache_read_input_tokens", usage.cached_tokens},
                  {"cache_creation_input_tokens", 0}};
    return j;
  }
  Json error(const ApiError& e) override { return anthropic_error(e); }

 private:
  static std::string event(const char* type, Json body) {
    Json j;
    j["type"] = type;
    for (auto& [k, v] : body.items()) j[k] = v;
    return std::string("event: ") + type + "\n" + sse_event(j);
  }
  // A stop string of the request's (not the template's end-of-turn ones).
  Json stop_of(const Event& done) const {
    if (std::find(stops_.begin(), stops_.end(), done.stop_string) == stops_.end()) return nullptr;
    return done.stop_string;
  }
  Json stop_reason(const Event& done) const {
    if (done.finish == JobFinish::kLength) return "max_tokens";
    return stop_of(done).is_null() ? "end_turn" : "stop_sequence";
  }
  Json message_json(Json content, Json stop_reason, Json stop_sequence) const {
    Json j;
    j["id"] = id_;
    j["type"] = "message";
    j["role"] = "assistant";
    j["model"] = model_;
    j["content"] = std::move(content);
    j["stop_reason"] = std::move(stop_reason);
    j["stop_sequence"] = std::move(stop_sequence);
    return j;
  }

  std::string id_, model_;
  std::vector<std::string> stops_;
  int64_t prompt_tokens_ = 0;
};

void send_anthropic_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(to_json_text(anthropic_error(e)), "application/json");
}

}  // namespace

std::string anthropic_error_text(const ApiError& error) {
  return to_json_text(anthropic_error(error));
}

std::variant<GenerationRequest, ApiError> parse_messages_request(std::string_view body,
                                                                 bool count_only) {
  return guarded<GenerationRequest>([&] { return parse(body, count_only); });
}

void handle_messages(GenerationRoutes& routes, const std::string& body, httplib::Response& res,
                     bool close_delimited) {
  std::variant<GenerationRequest, ApiError> parsed = parse_messages_request(body);
  if (const ApiError* error = std::get_if<ApiError>(&parsed))
    return send_anthropic_error(res, *error);
  const GenerationRequest& request = std::get<GenerationRequest>(parsed);
  const std::string id = "msg_" + response_id(Endpoint::kCompletions, routes.next_id()).substr(5);
  routes.serve(request, std::make_unique<MessagesFormat>(id, routes.model().id, request.stop), res,
               close_delimited);
}

void handle_count_tokens(GenerationRoutes& routes, const std::string& body,
                         httplib::Response& res) {
  std::variant<GenerationRequest, ApiError> parsed = parse_messages_request(body, true);
  if (const ApiError* error = std::get_if<ApiError>(&parsed))
    return send_anthropic_error(res, *error);
  std::variant<int64_t, ApiError> n =
      routes.count_prompt_tokens(std::get<GenerationRequest>(parsed));
  if (const ApiError* error = std::get_if<ApiError>(&n)) return send_anthropic_error(res, *error);
  res.set_content(to_json_text(Json{{"input_tokens", std::get<int64_t>(n)}}), "application/json");
}

}  // namespace tkv::server
