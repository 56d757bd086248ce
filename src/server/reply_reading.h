// How the replies of a chat request are read and, when the request says
// so, constrained: the chat template's reply syntax (chat_output/
// reply_syntax.h) splits each reply into content, reasoning_content and
// tool_calls, and tool_choice "required" or a named function makes the
// reply tool calls by grammar (the calls are always well-formed and their
// arguments follow the tools' schemas).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "chat_output/reply_syntax.h"
#include "grammar/grammar.h"
#include "server/api_request.h"
#include "tokenizer/chat_template.h"

namespace tkv::server {

struct ReplyReading {
  chat::ReplySyntax syntax;
  // Tool calls are parsed: the request offers tools (tool_choice not
  // "none") and the template has a tool-call syntax.
  bool parse_tools = false;
  // The grammar of tool_choice "required" / a named function; null
  // otherwise.
  std::shared_ptr<const grammar::Grammar> grammar;
  // What the request asks that the template cannot give (sent as
  // X-Turbokv-Warning); empty when nothing.
  std::string warning;

  // Whether replies go through a ReplyParser at all (tools, or reasoning
  // markers in the template).
  bool active() const;
  // A parser for one reply to `prompt` (the rendered chat prompt).
  std::unique_ptr<chat::ReplyParser> parser(std::string_view prompt) const;
};

// The reading of `request`'s replies under `chat_template`, or the 400 of a
// request the template cannot serve (tool_choice "required" with a
// template that has no tool-call syntax, a tool schema the grammar compiler
// does not support, "required" together with a response_format).
// `prompt`: the rendered prompt (a reply that starts inside an open
// reasoning section closes it before its calls).
std::variant<ReplyReading, ApiError> reply_reading(const GenerationRequest& request,
                                                   const tok::ChatTemplate& chat_template,
                                                   std::string_view prompt);

// A fresh tool-call id: "call_" and 24 letters and digits, or 9 letters and
// digits for the Mistral syntax (its template refuses any other length).
std::string tool_call_id(chat::ToolSyntax syntax);

}  // namespace tkv::server
