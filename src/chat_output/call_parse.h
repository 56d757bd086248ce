// Internals of reply parsing: where calls start and end in each family's
// text and how their bodies read as ToolCalls.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat_output/reply_syntax.h"

namespace tkv::chat::detail {

// The text that opens a call (or, DeepSeek R1, the block of calls) and the
// one that closes it. `close` empty: the call ends where its JSON ends.
struct CallFrame {
  std::string open, close;
};
CallFrame call_frame(ToolSyntax syntax);

// Where the call whose text (after its opener) starts `body` ends: `body`
// bytes are the call, `consumed` bytes with the closer. nullopt: not known
// until more text comes. `scan` carries the search over from the last call
// with a shorter `body` (the same call, less of it); a new call starts with
// a fresh CallScan.
struct CallEnd {
  size_t body = 0, consumed = 0;
};
std::optional<CallEnd> find_call_end(ToolSyntax syntax, std::string_view body, CallScan& scan);

// The calls a call's body holds; nullopt when it is not a well-formed call.
std::optional<std::vector<ToolCall>> parse_calls(ToolSyntax syntax, std::string_view body);
// Harmony: a call to functions.NAME (NAME from the message header).
std::optional<ToolCall> parse_harmony_call(std::string_view header, std::string_view body);

// Parse-side helpers shared by the families.
std::optional<ToolCall> parse_qwen_xml_call(std::string_view body);
std::optional<ToolCall> parse_gemma4_call(std::string_view body);
// An arguments value as compact object text (keys in the order written;
// invalid UTF-8 written as U+FFFD): an object, or a string that holds one.
// nullopt otherwise.
std::optional<std::string> arguments_text(const nlohmann::ordered_json& value);
std::string_view trim(std::string_view text);
bool is_space(char c);

}  // namespace tkv::chat::detail
