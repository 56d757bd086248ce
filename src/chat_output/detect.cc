#include <string_view>

#include "chat_output/reply_syntax.h"

namespace tkv::chat {
namespace {

bool has(std::string_view text, std::string_view marker) {
  return text.find(marker) != std::string_view::npos;
}

// The tool-call family, by the markers the template writes. Order matters:
// Qwen XML templates also write <tool_call>, Hermes 3 is a Llama 3 template
// that writes <tool_call>.
ToolSyntax detect_tools(std::string_view t) {
  if (has(t, "<|channel|>") && has(t, "<|start|>") && has(t, "<|message|>"))
    return ToolSyntax::kHarmony;
  if (has(t, "<tool_call>") && has(t, "<function=") && has(t, "<parameter="))
    return ToolSyntax::kQwenXml;
  if (has(t, "<tool_call>")) return ToolSyntax::kHermesJson;
  if (has(t, "<|tool_call>")) return ToolSyntax::kGemma4;
  if (has(t, "[TOOL_CALLS]")) return ToolSyntax::kMistral;
  if (has(t, "tool▁calls▁begin")) return ToolSyntax::kDeepSeekR1;
  if (has(t, "<|start_header_id|>") && (has(t, "<|python_tag|>") || has(t, "\"parameters\"")))
    return ToolSyntax::kLlama3Json;
  return ToolSyntax::kNone;
}

}  // namespace

const char* syntax_name(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kNone:
      return "none";
    case ToolSyntax::kHermesJson:
      return "hermes";
    case ToolSyntax::kQwenXml:
      return "qwen-xml";
    case ToolSyntax::kLlama3Json:
      return "llama3";
    case ToolSyntax::kMistral:
      return "mistral";
    case ToolSyntax::kHarmony:
      return "harmony";
    case ToolSyntax::kDeepSeekR1:
      return "deepseek-r1";
    case ToolSyntax::kGemma4:
      return "gemma4";
  }
  return "none";
}

ReplySyntax detect_reply_syntax(std::string_view template_source) {
  ReplySyntax s;
  s.tools = detect_tools(template_source);
  // [TOOL_CALLS] is a control token of Mistral's tokenizer, as harmony's
  // and Gemma 4's markers are of theirs.
  if (s.tools == ToolSyntax::kHarmony || s.tools == ToolSyntax::kMistral) {
    s.needs_special_tokens = true;
  } else if (s.tools == ToolSyntax::kGemma4 || has(template_source, "<|channel>")) {
    s.needs_special_tokens = true;
    if (has(template_source, "<|channel>")) {
      s.reasoning_open = "<|channel>thought";
      s.reasoning_close = "<channel|>";
    }
  } else if (has(template_source, "<think>") && has(template_source, "</think>")) {
    s.reasoning_open = "<think>";
    s.reasoning_close = "</think>";
  }
  return s;
}

}  // namespace tkv::chat
