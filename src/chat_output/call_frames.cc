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

size_t json_value_end(std::string_view text, size_t from) {
  size_t i = from;
  while (i < text.size() && is_space(text[i])) ++i;
  if (i == text.size()) return kIncomplete;
  if (text[i] != '{' && text[i] != '[') return kNotJson;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return kIncomplete;
}

namespace {

// A call that ends where its JSON value ends, the value starting at `from`.
std::optional<CallEnd> json_call_end(std::string_view body, size_t from) {
  const size_t end = json_value_end(body, from);
  if (end == kIncomplete) return std::nullopt;
  if (end == kNotJson) return CallEnd{from, from};
  return CallEnd{end, end};
}

// Harmony: a call message ends at <|call|>, or at the end of any message.
std::optional<CallEnd> harmony_call_end(std::string_view body) {
  size_t best = std::string_view::npos, len = 0;
  for (std::string_view closer : {"<|call|>", "<|end|>", "<|return|>"}) {
    const size_t at = body.find(closer);
    if (at < best) best = at, len = closer.size();
  }
  if (best == std::string_view::npos) return std::nullopt;
  return CallEnd{best, best + len};
}

// Mistral: NAME[ARGS]{...} (NAME[CALL_ID]ID[ARGS]{...} as the template
// renders history), or the older [{"name": ..., "arguments": ...}] list.
std::optional<CallEnd> mistral_call_end(std::string_view body) {
  const std::string_view lead = trim(body);
  if (!lead.empty() && (lead.front() == '[' || lead.front() == '{')) return json_call_end(body, 0);
  const size_t args = body.find("[ARGS]");
  if (args == std::string_view::npos) return std::nullopt;
  return json_call_end(body, args + 6);
}

}  // namespace

std::optional<CallEnd> find_call_end(ToolSyntax syntax, std::string_view body) {
  if (syntax == ToolSyntax::kHarmony) return harmony_call_end(body);
  if (syntax == ToolSyntax::kMistral) return mistral_call_end(body);
  if (syntax == ToolSyntax::kLlama3Json) return json_call_end(body, 0);
  const std::string close = call_frame(syntax).close;
  const size_t at = body.find(close);
  if (at == std::string_view::npos) return std::nullopt;
  return CallEnd{at, at + close.size()};
}

}  // namespace tkv::chat::detail
