// Tool calling on the request side of POST /v1/chat/completions: the
// `tools`, `tool_choice` and `parallel_tool_calls` fields and the tool
// turns of a conversation (an assistant message's `tool_calls`, a `tool`
// message's result), parsed and validated as the OpenAI API reference
// defines them. The tools reach the chat template as its `tools` variable
// (key order as sent); the messages' tool fields as the template expects
// them (tok::ChatMessage::fields).
//
//   tools         [{"type": "function", "function": {"name", "description",
//                   "parameters" (a JSON Schema object), "strict"}}]; names
//                   are 1-64 of a-z A-Z 0-9 _ - and unique
//   tool_choice   "auto" (the default), "none" (the tools are not offered),
//                 "required" (the reply is tool calls), or
//                 {"type": "function", "function": {"name": N}} (a call of N)
//   parallel_tool_calls  true (default): "required" allows several calls
//
// Parsers throw api_json::RequestError naming the field (messages[2].
// tool_calls[0].function.name, tools[1].function.parameters, ...).
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "server/api_request.h"

namespace tkv::server {

// tools / tool_choice / parallel_tool_calls of a chat body. `ordered` is the
// same body parsed keeping key order (the tools' schemas keep theirs).
void parse_tool_fields(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                       GenerationRequest& r);

// An assistant message's tool_calls and reasoning_content, or a tool
// message's tool_call_id and name, into `message.fields`; `param` names the
// message ("messages[3]").
void parse_message_tool_fields(const nlohmann::json& m, const std::string& param,
                               tok::ChatMessage& message);

// Another route's tool list (Responses, Anthropic Messages) in the chat
// form: tool i of `tools` (`ordered`: the same, key order kept) becomes
// {"type": "function", "function": convert(tool, "tools[i]")}; convert
// throws RequestError for a tool it refuses.
using ToolConverter = std::function<nlohmann::ordered_json(const nlohmann::ordered_json& tool,
                                                           const std::string& param)>;
nlohmann::ordered_json chat_tools(const nlohmann::json& tools,
                                  const nlohmann::ordered_json& ordered,
                                  const ToolConverter& convert);

// parse_tool_fields of `chat` (a route's tool fields in the chat form); an
// error names the field as the route spells it: `renames` (chat spelling,
// route spelling) replace in its param and message, in order.
void parse_chat_form_tools(
    const nlohmann::ordered_json& chat, GenerationRequest& r,
    std::initializer_list<std::pair<std::string_view, std::string_view>> renames);

}  // namespace tkv::server
