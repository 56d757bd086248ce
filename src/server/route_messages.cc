#include "server/route_messages.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <memory>
#include <utility>

#include "common/error.h"
#include "server/api_json.h"
#include "server/api_response.h"
#include "server/api_tools.h"
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
                                 "min_p",
                                 "tools",
                                 "tool_choice"};
constexpr std::array kIgnored = {"metadata", "service_tier"};
constexpr std::array kUnsupported = {"thinking", "container", "mcp_servers"};

// The "off" values clients send for features they do not use.
bool is_off(const std::string& name, const json& v) {
  if (name == "mcp_servers") return v.is_array() && v.empty();
  if (name == "thinking") return v.is_object() && v.contains("type") && v["type"] == "disabled";
  return false;
}

void check_names(const json& body) {
  check_route_fields(body, {.handled = kHandled,
                            .ignored = kIgnored,
                            .unsupported = kUnsupported,
                            .off = is_off,
                            .why = [](const std::string& name) -> std::string {
                              return name == "thinking"
                                         ? " (extended thinking is not implemented)."
                                         : " (server-side tools are not implemented).";
                            }});
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

const json& block_type_checked(const json& b, const std::string& param, std::string& type) {
  if (!b.is_object()) invalid_type(param, "an object", b);
  const json* t = field(b, "type");
  if (!t) missing(param + ".type");
  type = as_string(*t, param + ".type");
  return b;
}

std::string text_block(const json& b, const std::string& param) {
  const json* text = field(b, "text");
  if (!text) missing(param + ".text");
  return as_string(*text, param + ".text");
}

[[noreturn]] void unsupported_block(const std::string& type, const std::string& param) {
  reject("Invalid value for '" + param + ".type': content blocks of type '" + clipped(type) +
             "' are not supported here (text, tool_use, tool_result).",
         param + ".type", "unsupported_value");
}

// system: a string or text blocks.
std::string system_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) invalid_type("system", "a string or an array of content blocks", v);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string param = "system[" + std::to_string(i) + "]";
    std::string t;
    block_type_checked(v[i], param, t);
    if (t != "text") unsupported_block(t, param);
    if (i > 0) text += '\n';
    text += text_block(v[i], param);
  }
  return text;
}

// An assistant turn: its text blocks joined, its tool_use blocks as the
// turn's tool calls (input as the arguments' JSON text).
tok::ChatMessage assistant_turn(const json& v, const std::string& param) {
  tok::ChatMessage m{.role = "assistant", .content = ""};
  if (v.is_string()) {
    m.content = v.get<std::string>();
    return m;
  }
  if (!v.is_array()) invalid_type(param, "a string or an array of content blocks", v);
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    std::string t;
    const json& b = block_type_checked(v[i], p, t);
    if (t == "text") {
      if (!m.content.empty()) m.content += '\n';
      m.content += text_block(b, p);
    } else if (t == "tool_use") {
      for (const char* key : {"id", "name"})
        if (!field(b, key)) missing(p + "." + key);
      const json* input = field(b, "input");
      if (input && !input->is_object()) invalid_type(p + ".input", "an object", *input);
      Json call;
      call["id"] = as_string(b["id"], p + ".id");
      call["type"] = "function";
      call["function"] = {{"name", as_string(b["name"], p + ".name")},
                          {"arguments", input ? input->dump() : std::string("{}")}};
      if (!m.fields.contains("tool_calls")) m.fields["tool_calls"] = Json::array();
      m.fields["tool_calls"].push_back(std::move(call));
    } else if (t != "thinking" && t != "redacted_thinking") {  // earlier thinking: not rendered
      unsupported_block(t, p);
    }
  }
  return m;
}

// A user turn: each tool_result block a tool message (first, as the results
// answer the calls before), the text blocks one user message after them.
void user_turn(const json& v, const std::string& param, GenerationRequest& r) {
  if (v.is_string()) {
    r.messages.push_back({.role = "user", .content = v.get<std::string>()});
    return;
  }
  if (!v.is_array()) invalid_type(param, "a string or an array of content blocks", v);
  std::string text;
  bool has_text = false;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    std::string t;
    const json& b = block_type_checked(v[i], p, t);
    if (t == "text") {
      if (has_text) text += '\n';
      text += text_block(b, p);
      has_text = true;
    } else if (t == "tool_result") {
      const json* id = field(b, "tool_use_id");
      if (!id) missing(p + ".tool_use_id");
      const bool error = b.contains("is_error") && b["is_error"] == true;
      tok::ChatMessage result{.role = "tool", .content = error ? "Error: " : ""};
      result.content += tool_result_text(b, p);
      result.fields["tool_call_id"] = as_string(*id, p + ".tool_use_id");
      r.messages.push_back(std::move(result));
    } else {
      unsupported_block(t, p);
    }
  }
  if (has_text) r.messages.push_back({.role = "user", .content = text});
}

void parse_messages(const json& body, GenerationRequest& r) {
  if (const json* s = field(body, "system"))
    r.messages.push_back({.role = "system", .content = system_text(*s)});
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
    if (rl == "assistant")
      r.messages.push_back(assistant_turn(*content, param + ".content"));
    else
      user_turn(*content, param + ".content", r);
  }
}

// tool_choice {type: auto | any | tool | none, name,
// disable_parallel_tool_use} in the chat form.
void chat_tool_choice(const json& choice, nlohmann::ordered_json& chat) {
  if (!choice.is_object()) invalid_type("tool_choice", "an object", choice);
  const json* type = field(choice, "type");
  if (!type) missing("tool_choice.type");
  const std::string& t = as_string(*type, "tool_choice.type");
  if (t == "any") {
    chat["tool_choice"] = "required";
  } else if (t == "auto" || t == "none") {
    chat["tool_choice"] = t;
  } else if (t == "tool") {
    const json* name = field(choice, "name");
    if (!name) missing("tool_choice.name");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    invalid_value("tool_choice.type",
                  "'" + clipped(t) + "' is not one of 'auto', 'any', 'tool', 'none'.");
  }
  if (const json* d = field(choice, "disable_parallel_tool_use"))
    chat["parallel_tool_calls"] = !as_bool(*d, "tool_choice.disable_parallel_tool_use");
}

// tools [{name, description, input_schema}] and tool_choice in the chat
// form api_tools.h reads.
void parse_tools(const json& body, std::string_view text, GenerationRequest& r) {
  const json* tools = field(body, "tools");
  const json* choice = field(body, "tool_choice");
  if (!tools && !choice) return;
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  nlohmann::ordered_json chat = nlohmann::ordered_json::object();
  if (tools)
    chat["tools"] =
        chat_tools(*tools, ordered["tools"], [](const auto& tool, const std::string& p) {
          if (tool.contains("type") && tool["type"] != "custom")
            reject("Invalid value for '" + p +
                       ".type': server tools are not supported (custom tools with an input_schema "
                       "are).",
                   p + ".type", "unsupported_value");
          nlohmann::ordered_json fn = nlohmann::ordered_json::object();
          for (const auto& [k, v] : tool.items()) {
            if (k == "input_schema")
              fn["parameters"] = v;
            else if (k == "name" || k == "description")
              fn[k] = v;
            else if (k != "type" && k != "cache_control")
              unrecognized(p + "." + k);
          }
          return fn;
        });
  if (choice) chat_tool_choice(*choice, chat);
  parse_chat_form_tools(chat, r, {{".function.parameters", ".input_schema"}, {".function.", "."}});
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
  parse_tools(body, text, r);
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
    std::string out;
    if (!p.text.empty())
      out += event("content_block_delta",
                   {{"index", 0}, {"delta", {{"type", "text_delta"}, {"text", p.text}}}});
    // Blocks stream one after another: the text block ends before a call's.
    for (const ToolCallOut& call : p.calls) {
      if (blocks_ == 1) out += event("content_block_stop", {{"index", 0}});
      Json start = tool_use_block(call);
      start["input"] = Json::object();
      out += event("content_block_start", {{"index", blocks_}, {"content_block", start}});
      out += event("content_block_delta",
                   {{"index", blocks_},
                    {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
      out += event("content_block_stop", {{"index", blocks_}});
      ++blocks_;
    }
    return out;
  }
  std::string close(const std::vector<ChoiceState>& choices, const Usage& usage) override {
    const ChoiceState& c = choices.at(0);
    const std::string text_stop = blocks_ == 1 ? event("content_block_stop", {{"index", 0}}) : "";
    return text_stop +
           event("message_delta",
                 {{"delta",
                   {{"stop_reason", stop_reason(c)}, {"stop_sequence", stop_of(c.done_event)}}},
                  {"usage", {{"output_tokens", usage.completion_tokens}}}}) +
           event("message_stop", Json::object());
  }
  std::string stream_error(const ApiError& e) override {
    return event("error", anthropic_error(e));
  }
  Json whole(const std::vector<ChoiceState>& choices, const Usage& usage) override {
    const ChoiceState& c = choices.at(0);
    Json content = Json::array();
    if (!c.text.empty() || c.calls.empty()) content.push_back({{"type", "text"}, {"text", c.text}});
    for (const ToolCallOut& call : c.calls) content.push_back(tool_use_block(call));
    Json j = message_json(std::move(content), stop_reason(c), stop_of(c.done_event));
    j["usage"] = {{"input_tokens", usage.prompt_tokens},
                  {"output_tokens", usage.completion_tokens},
                  {"cache_read_input_tokens", usage.cached_tokens},
                  {"cache_creation_input_tokens", 0}};
    return j;
  }
  bool reads_reply_syntax() const override { return true; }
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
  Json stop_reason(const ChoiceState& c) const {
    const Event& done = c.done_event;
    if (done.finish == JobFinish::kLength) return "max_tokens";
    if (!c.calls.empty()) return "tool_use";
    return stop_of(done).is_null() ? "end_turn" : "stop_sequence";
  }
  // {"type": "tool_use", "id", "name", "input"} (input: the arguments' object).
  static Json tool_use_block(const ToolCallOut& call) {
    Json input = Json::parse(call.arguments, nullptr, false);
    if (!input.is_object()) input = Json::object();
    return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", input}};
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
  int blocks_ = 1;  // content blocks streamed (the text block is 0)
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
