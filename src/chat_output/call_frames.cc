#include <algorithm>
#include <initializer_list>

#include "chat_output/call_parse.h"

namespace tkv::chat::detail {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

CallFrame call_frame(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kHermesJson:
    case ToolSyntax::kQwenXml:
      return {"<tool_call>", "</tool_call>"};
    case ToolSyntax::kLlama3Json:
      return {"<|python_tag|>", ""};
    case ToolSyntax::kMistral:
      return {"[TOOL_CALLS]", ""};
    case ToolSyntax::kHarmony:
      return {"", "<|call|>"};
    case ToolSyntax::kDeepSeekR1:
      return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"};
    case ToolSyntax::kGemma4:
      return {"<|tool_call>", "<tool_call|>"};
    case ToolSyntax::kNone:
      break;
  }
  return {};
}

namespace {

constexpr size_t npos = std::string_view::npos;

// The end of the JSON object or array at scan.json_at (after whitespace),
// continuing where the last look stopped: the index past its last byte,
// npos while the text stops first. A call whose JSON is not an object or
// array ends where it should have started (and reads as no call).
size_t json_end(std::string_view text, CallScan& scan) {
  size_t i = std::max(scan.json_pos, scan.json_at);
  if (scan.depth == 0) {
    while (i < text.size() && is_space(text[i])) ++i;
    scan.json_pos = i;
    if (i == text.size()) return npos;
    if (text[i] != '{' && text[i] != '[') return scan.json_at;
  }
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (scan.in_string) {
      if (scan.escaped) {
        scan.escaped = false;
      } else if (c == '\\') {
        scan.escaped = true;
      } else if (c == '"') {
        scan.in_string = false;
      }
    } else if (c == '"') {
      scan.in_string = true;
    } else if (c == '{' || c == '[') {
      ++scan.depth;
    } else if ((c == '}' || c == ']') && --scan.depth == 0) {
      return i + 1;
    }
  }
  scan.json_pos = i;
  return npos;
}

std::optional<CallEnd> json_call_end(std::string_view body, CallScan& scan) {
  const size_t end = json_end(body, scan);
  if (end == npos) return std::nullopt;
  return CallEnd{end, end};
}

// The first of `closers` in `body`, searching only what the last look could
// not rule out.
std::optional<CallEnd> closer_end(std::string_view body, CallScan& scan,
                                  std::initializer_list<std::string_view> closers) {
  size_t best = npos, len = 0, longest = 0;
  for (std::string_view closer : closers) {
    const size_t at = body.find(closer, scan.searched);
    if (at < best) best = at, len = closer.size();
    longest = std::max(longest, closer.size());
  }
  if (best != npos) return CallEnd{best, best + len};
  scan.searched = body.size() >= longest ? body.size() - longest + 1 : 0;
  return std::nullopt;
}

// Mistral: NAME[ARGS]{...} (NAME[CALL_ID]ID[ARGS]{...} as the template
// renders history), or the older [{"name": ..., "arguments": ...}] list.
std::optional<CallEnd> mistral_call_end(std::string_view body, CallScan& scan) {
  if (scan.json_at == npos) {
    const std::string_view lead = trim(body);
    if (!lead.empty() && (lead.front() == '[' || lead.front() == '{')) {
      scan.json_at = 0;
    } else {
      const auto args = closer_end(body, scan, {"[ARGS]"});
      if (!args) return std::nullopt;
      scan.json_at = args->consumed;
    }
  }
  return json_call_end(body, scan);
}

}  // namespace

std::optional<CallEnd> find_call_end(ToolSyntax syntax, std::string_view body, CallScan& scan) {
  switch (syntax) {
    case ToolSyntax::kHarmony:  // a call message ends at <|call|>, or where any message ends
      return closer_end(body, scan, {"<|call|>", "<|end|>", "<|return|>"});
    case ToolSyntax::kMistral:
      return mistral_call_end(body, scan);
    case ToolSyntax::kLlama3Json:
      scan.json_at = 0;
      return json_call_end(body, scan);
    default:
      break;
  }
  const std::string close = call_frame(syntax).close;
  return closer_end(body, scan, {close});
}

}  // namespace tkv::chat::detail
