#include "server/route_responses.h"

#include <httplib.h>

#include <array>
#include <ctime>
#include <memory>
#include <utility>
#include <vector>

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
                                 "input",
                                 "instructions",
                                 "max_output_tokens",
                                 "temperature",
                                 "top_p",
                                 "top_k",
                                 "min_p",
                                 "seed",
                                 "stream",
                                 "reasoning",
                                 "text",
                                 "presence_penalty",
                                 "frequency_penalty",
                                 "repeat_penalty",
                                 "repeat_last_n",
                                 "logit_bias",
                                 "cache_prompt",
                                 "tools",
                                 "tool_choice",
                                 "parallel_tool_calls"};
constexpr std::array kIgnored = {"store",
                                 "metadata",
                                 "user",
                                 "include",
                                 "truncation",
                                 "service_tier",
                                 "prompt_cache_key",
                                 "safety_identifier"};
constexpr std::array kUnsupported = {"previous_response_id", "background", "conversation", "prompt",
                                     "max_tool_calls"};

// The "off" values clients send for features they do not use.
bool is_off(const std::string& name, const json& v) {
  if (name == "background") return v == false;
  return false;
}

void check_names(const json& body) {
  check_route_fields(body, {.handled = kHandled,
                            .ignored = kIgnored,
                            .unsupported = kUnsupported,
                            .off = is_off,
                            .why = [](const std::string&) -> std::string {
                              return " (each request stands alone: send the whole conversation).";
                            }});
}

// A message item's content: a string, or input_text / output_text parts.
std::string item_content(const json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) invalid_type(param, "a string or an array of content parts", v);
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = param + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) invalid_type(part, "an object", v[i]);
    const json* type = field(v[i], "type");
    if (!type) missing(part + ".type");
    const std::string& t = as_string(*type, part + ".type");
    if (t != "input_text" && t != "output_text" && t != "text")
      reject("Invalid value for '" + part + ".type': content of type '" + clipped(t) +
                 "' is not supported (turbokv serves text only).",
             part + ".type", "unsupported_value");
    const json* body = field(v[i], "text");
    if (!body) missing(part + ".text");
    if (i > 0) text += '\n';
    text += as_string(*body, part + ".text");
  }
  return text;
}

// A function_call item: the assistant's call, joined to the assistant
// message before it when that one has calls already (parallel calls).
void add_function_call(const json& item, const std::string& param, GenerationRequest& r) {
  for (const char* key : {"call_id", "name", "arguments"})
    if (!field(item, key)) missing(param + "." + key);
  Json call;
  call["id"] = as_string(item["call_id"], param + ".call_id");
  call["type"] = "function";
  call["function"] = {{"name", as_string(item["name"], param + ".name")},
                      {"arguments", as_string(item["arguments"], param + ".arguments")}};
  if (r.messages.empty() || r.messages.back().role != "assistant" ||
      !r.messages.back().fields.contains("tool_calls")) {
    tok::ChatMessage turn{.role = "assistant", .content = ""};
    turn.fields["tool_calls"] = Json::array();
    r.messages.push_back(std::move(turn));
  }
  r.messages.back().fields["tool_calls"].push_back(std::move(call));
}

void add_message_item(const json& item, const std::string& param, GenerationRequest& r) {
  const json* role = field(item, "role");
  if (!role) missing(param + ".role");
  std::string r_role = as_string(*role, param + ".role");
  if (r_role == "developer") r_role = "system";
  if (r_role != "system" && r_role != "user" && r_role != "assistant")
    invalid_value(param + ".role", "'" + clipped(r_role) +
                                       "' is not one of 'system', 'developer', 'user', "
                                       "'assistant'.");
  const json* content = field(item, "content");
  if (!content) missing(param + ".content");
  r.messages.push_back({.role = r_role, .content = item_content(*content, param + ".content")});
}

void parse_input(const json& body, GenerationRequest& r) {
  const json* v = field(body, "input");
  if (!v) missing("input");
  if (v->is_string()) {
    r.messages.push_back({.role = "user", .content = v->get<std::string>()});
    return;
  }
  if (!v->is_array()) invalid_type("input", "a string or an array of input items", *v);
  if (v->empty()) invalid_value("input", "expected at least one input item.");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& item = (*v)[i];
    const std::string param = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) invalid_type(param, "an object", item);
    const json* type = field(item, "type");
    const std::string t = type ? as_string(*type, param + ".type") : "message";
    if (t == "message") {
      add_message_item(item, param, r);
    } else if (t == "function_call") {
      add_function_call(item, param, r);
    } else if (t == "function_call_output") {
      for (const char* key : {"call_id", "output"})
        if (!field(item, key)) missing(param + "." + key);
      tok::ChatMessage result{.role = "tool",
                              .content = item_content(item["output"], param + ".output")};
      result.fields["tool_call_id"] = as_string(item["call_id"], param + ".call_id");
      r.messages.push_back(std::move(result));
    } else if (t != "reasoning") {  // a reasoning item the client echoes back: not rendered
      reject("Invalid value for '" + param + ".type': items of type '" + clipped(t) +
                 "' are not supported (message, function_call, function_call_output).",
             param + ".type", "unsupported_value");
    }
  }
}

// The Responses API's flat tools ({"type": "function", "name", ...}) and
// tool_choice ({"type": "function", "name"}) in the chat form api_tools.h
// reads.
void parse_tools(const json& body, std::string_view text, GenerationRequest& r) {
  if (!field(body, "tools") && !field(body, "tool_choice") && !field(body, "parallel_tool_calls"))
    return;
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text);
  nlohmann::ordered_json chat = nlohmann::ordered_json::object();
  if (const json* tools = field(body, "tools"))
    chat["tools"] =
        chat_tools(*tools, ordered["tools"], [](const auto& tool, const std::string& p) {
          if (tool.value("type", "") != "function")
            reject("Invalid value for '" + p + ".type': only function tools are supported.",
                   p + ".type", "unsupported_value");
          nlohmann::ordered_json fn = tool;
          fn.erase("type");
          return fn;
        });
  if (const json* choice = field(body, "tool_choice")) {
    if (choice->is_object() && choice->contains("name"))
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*choice)["name"]}}}};
    else
      chat["tool_choice"] = ordered["tool_choice"];
  }
  if (const json* p = field(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = *p;
  parse_chat_form_tools(chat, r, {{".function.", "."}});
}

void parse_options(const json& body, GenerationRequest& r) {
  if (const json* v = field(body, "model")) r.model = as_string(*v, "model");
  if (const json* v = field(body, "max_output_tokens"))
    r.max_tokens = int32_t(as_integer(*v, "max_output_tokens", 1, 1 << 30));
  if (const json* v = field(body, "stream")) r.stream = as_bool(*v, "stream");
  if (const json* v = field(body, "reasoning")) {
    if (!v->is_object()) invalid_type("reasoning", "an object", *v);
    if (const json* e = field(*v, "effort")) r.reasoning_effort = as_string(*e, "reasoning.effort");
  }
  if (const json* v = field(body, "text")) {
    if (!v->is_object()) invalid_type("text", "an object", *v);
    if (const json* f = field(*v, "format"); f && !(f->is_object() && (*f)["type"] == "text"))
      unsupported("text.format",
                  " (structured output is not implemented; {\"type\": \"text\"} is).");
  }
  parse_sampling(body, r);
}

GenerationRequest parse(std::string_view text) {
  const json body = parse_body(text);
  check_names(body);
  GenerationRequest r;
  r.endpoint = Endpoint::kChatCompletions;
  if (const json* v = field(body, "instructions"))
    r.messages.push_back({.role = "system", .content = as_string(*v, "instructions")});
  parse_input(body, r);
  parse_options(body, r);
  parse_tools(body, text, r);
  return r;
}

// ---- the response -----------------------------------------------------------

class ResponsesFormat : public ReplyFormat {
 public:
  ResponsesFormat(std::string id, std::string model, const GenerationRequest& request)
      : id_(std::move(id)),
        item_id_("msg_" + id_.substr(5)),
        model_(std::move(model)),
        request_(request),
        created_(int64_t(std::time(nullptr))) {}

  // Each event takes the next sequence number: appended one at a time.
  std::string open_choice(const ChoiceState&) override {
    Json item = message_item("in_progress", "");
    item["content"] = Json::array();
    std::string out = event("response.created", {{"response", in_progress()}});
    out += event("response.in_progress", {{"response", in_progress()}});
    out += event("response.output_item.added", {{"output_index", 0}, {"item", item}});
    out += event("response.content_part.added", part_event(text_part(""), "part"));
    return out;
  }
  std::string piece(const StreamPiece& p) override {
    text_ += p.text;
    std::string out;
    for (const ToolCallOut& call : p.calls) out += call_events(call);
    if (!p.text.empty()) {
      Json delta = part_event(p.text, "delta");
      delta["logprobs"] = Json::array();
      out += event("response.output_text.delta", std::move(delta));
    }
    if (p.finish_reason == FinishReason::kNone) return out;
    Json done = part_event(text_, "text");
    done["logprobs"] = Json::array();
    finish_ = p.finish_reason;
    out += event("response.output_text.done", std::move(done));
    out += event("response.content_part.done", part_event(text_part(text_), "part"));
    out += event("response.output_item.done",
                 {{"output_index", 0}, {"item", message_item("completed", text_)}});
    return out;
  }
  std::string close(const std::vector<ChoiceState>&, const Usage& usage) override {
    const bool cut = finish_ == FinishReason::kLength;
    Json output = Json::array({message_item("completed", text_)});
    for (const ToolCallOut& call : calls_) output.push_back(call_item(call, "completed"));
    return event(cut ? "response.incomplete" : "response.completed",
                 {{"response", response_json(cut ? "incomplete" : "completed", std::move(output),
                                             usage_of(usage))}});
  }
  std::string stream_error(const ApiError& e) override {
    Json r = response_json("failed", Json::array(), nullptr);
    r["error"] = {{"code", e.code.empty() ? "server_error" : e.code}, {"message", e.message}};
    return event("response.failed", {{"response", std::move(r)}});
  }
  Json whole(const std::vector<ChoiceState>& choices, const Usage& usage) override {
    const ChoiceState& c = choices.at(0);
    const bool cut = c.done_event.finish == JobFinish::kLength;
    Json output = Json::array();
    if (!c.text.empty() || c.calls.empty()) output.push_back(message_item("completed", c.text));
    for (const ToolCallOut& call : c.calls) output.push_back(call_item(call, "completed"));
    return response_json(cut ? "incomplete" : "completed", std::move(output), usage_of(usage));
  }
  bool reads_reply_syntax() const override { return true; }

 private:
  std::string event(const char* type, Json body) {
    Json j;
    j["type"] = type;
    for (auto& [k, v] : body.items()) j[k] = v;
    j["sequence_number"] = sequence_++;
    return std::string("event: ") + type + "\n" + sse_event(j);
  }
  Json in_progress() const { return response_json("in_progress", Json::array(), nullptr); }
  // {"type": "function_call", "id": "fc_...", "call_id", "name", "arguments", "status"}.
  static Json call_item(const ToolCallOut& call, const char* status) {
    Json item;
    item["id"] = "fc_" + call.id;
    item["type"] = "function_call";
    item["status"] = status;
    item["arguments"] = call.arguments;
    item["call_id"] = call.id;
    item["name"] = call.name;
    return item;
  }
  // A whole call streamed: its item added, its arguments in one delta, done.
  std::string call_events(const ToolCallOut& call) {
    calls_.push_back(call);
    const int index = int(calls_.size());  // the message item is output 0
    Json added = call_item(call, "in_progress");
    added["arguments"] = "";
    std::string out =
        event("response.output_item.added", {{"output_index", index}, {"item", added}});
    const Json ids = {{"item_id", "fc_" + call.id}, {"output_index", index}};
    Json delta = ids, done = ids;
    delta["delta"] = call.arguments;
    done["arguments"] = call.arguments;
    out += event("response.function_call_arguments.delta", std::move(delta));
    out += event("response.function_call_arguments.done", std::move(done));
    out += event("response.output_item.done",
                 {{"output_index", index}, {"item", call_item(call, "completed")}});
    return out;
  }
  static Json text_part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", Json::array()}};
  }
  Json part_event(Json value, const char* key) const {
    Json j;
    j["item_id"] = item_id_;
    j["output_index"] = 0;
    j["content_index"] = 0;
    j[key] = std::move(value);
    return j;
  }
  Json message_item(const char* status, const std::string& text) const {
    Json item;
    item["id"] = item_id_;
    item["type"] = "message";
    item["status"] = status;
    item["role"] = "assistant";
    item["content"] = Json::array({text_part(text)});
    return item;
  }
  static Json usage_of(const Usage& u) {
    return {{"input_tokens", u.prompt_tokens},
            {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
            {"output_tokens", u.completion_tokens},
            {"output_tokens_details", {{"reasoning_tokens", 0}}},
            {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  }
  Json response_json(const char* status, Json output, Json usage) const {
    Json j;
    j["id"] = id_;
    j["object"] = "response";
    j["created_at"] = created_;
    j["status"] = status;
    j["error"] = nullptr;
    j["incomplete_details"] =
        std::string(status) == "incomplete" ? Json{{"reason", "max_output_tokens"}} : Json(nullptr);
    j["instructions"] = nullptr;
    j["max_output_tokens"] = request_.max_tokens ? Json(*request_.max_tokens) : Json(nullptr);
    j["model"] = model_;
    j["output"] = std::move(output);
    j["parallel_tool_calls"] = request_.parallel_tool_calls;
    j["temperature"] = request_.temperature;
    j["tool_choice"] = tool_choice_json();
    Json tools = Json::array();
    for (const auto& t : request_.tools) {
      Json flat = {{"type", "function"}};
      for (const auto& [k, v] : t["function"].items()) flat[k] = v;
      tools.push_back(std::move(flat));
    }
    j["tools"] = std::move(tools);
    j["top_p"] = request_.top_p;
    j["usage"] = std::move(usage);
    return j;
  }

  std::string id_, item_id_, model_;
  GenerationRequest request_;
  int64_t created_;
  int64_t sequence_ = 0;
  Json tool_choice_json() const {
    switch (request_.tool_choice) {
      case ToolChoice::kNone:
        return "none";
      case ToolChoice::kRequired:
        return "required";
      case ToolChoice::kNamed:
        return {{"type", "function"}, {"name", request_.tool_choice_name}};
      case ToolChoice::kAuto:
        break;
    }
    return "auto";
  }

  std::string text_;
  std::vector<ToolCallOut> calls_;
  FinishReason finish_ = FinishReason::kNone;
};

}  // namespace

std::variant<GenerationRequest, ApiError> parse_responses_request(std::string_view body) {
  return guarded<GenerationRequest>([&] { return parse(body); });
}

void handle_responses(GenerationRoutes& routes, const std::string& body, httplib::Response& res,
                      bool close_delimited) {
  std::variant<GenerationRequest, ApiError> parsed = parse_responses_request(body);
  if (const ApiError* error = std::get_if<ApiError>(&parsed)) return send_api_error(res, *error);
  GenerationRequest& request = std::get<GenerationRequest>(parsed);
  warn_unread_effort(request, routes.model(), "reasoning.effort", res);
  const std::string id =
      str("resp_", response_id(Endpoint::kCompletions, routes.next_id()).substr(5));
  auto format = std::make_unique<ResponsesFormat>(id, routes.model().id, request);
  routes.serve(request, std::move(format), res, close_delimited);
}

}  // namespace tkv::server
