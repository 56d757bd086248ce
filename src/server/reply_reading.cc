#include "server/reply_reading.h"

#include <random>
#include <vector>

#include "common/error.h"
#include "grammar/gbnf.h"

namespace tkv::server {
namespace {

// Whether a reply to `prompt` starts inside a reasoning section the
// template opened for the model (Qwen3.5, DeepSeek R1: "...<think>\n").
bool starts_in_reasoning(const chat::ReplySyntax& syntax, std::string_view prompt) {
  if (syntax.reasoning_open.empty()) return false;
  while (!prompt.empty() && (prompt.back() == '\n' || prompt.back() == ' '))
    prompt.remove_suffix(1);
  return prompt.ends_with(syntax.reasoning_open);
}

// The tools a required / named choice may call, with their schemas.
std::vector<chat::ToolSpec> callable_tools(const GenerationRequest& request) {
  std::vector<chat::ToolSpec> tools;
  for (const auto& tool : request.tools) {
    const auto& fn = tool["function"];
    const std::string name = fn["name"].get<std::string>();
    if (request.tool_choice == ToolChoice::kNamed && name != request.tool_choice_name) continue;
    chat::ToolSpec spec;
    spec.name = name;
    spec.parameters = fn.contains("parameters") && fn["parameters"].is_object()
                          ? fn["parameters"]
                          : nlohmann::ordered_json::object();
    tools.push_back(std::move(spec));
  }
  return tools;
}

// The grammar of the calls; a reply that starts inside reasoning first
// closes it (the template's own closing, as it writes an empty section).
std::shared_ptr<const grammar::Grammar> calls_grammar(const GenerationRequest& request,
                                                      const chat::ReplySyntax& syntax,
                                                      std::string_view prompt) {
  const std::string opening =
      starts_in_reasoning(syntax, prompt) ? "\n" + syntax.reasoning_close + "\n\n" : "";
  return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(chat::tool_call_gbnf(
      syntax.tools, callable_tools(request), request.parallel_tool_calls, opening)));
}

}  // namespace

bool ReplyReading::active() const {
  return parse_tools || !syntax.reasoning_open.empty() ||
         syntax.tools == chat::ToolSyntax::kHarmony;
}

std::unique_ptr<chat::ReplyParser> ReplyReading::parser(std::string_view prompt) const {
  return std::make_unique<chat::ReplyParser>(syntax, prompt, parse_tools);
}

std::variant<ReplyReading, ApiError> reply_reading(const GenerationRequest& request,
                                                   const tok::ChatTemplate& chat_template,
                                                   std::string_view prompt) {
  ReplyReading r;
  r.syntax = chat::detect_reply_syntax(chat_template.source());
  const bool offered = !request.tools.empty() && request.tool_choice != ToolChoice::kNone;
  const bool has_calls = r.syntax.tools != chat::ToolSyntax::kNone;
  r.parse_tools = offered && has_calls;
  const bool must_call =
      request.tool_choice == ToolChoice::kRequired || request.tool_choice == ToolChoice::kNamed;
  if (offered && !has_calls) {
    if (must_call)
      return make_api_error(
          400,
          str("Invalid value for 'tool_choice': the chat template (", chat_template.name(),
              ") has no tool-call syntax turbokv reads, so calls cannot be required."),
          "tool_choice");
    r.warning = str("tools are given to the chat template (", chat_template.name(),
                    "), but it has no tool-call syntax turbokv reads: replies are plain content");
  }
  if (!r.parse_tools || !must_call) return r;
  if (request.grammar)
    return make_api_error(400,
                          "Invalid value for 'tool_choice': a reply cannot be both tool calls "
                          "('required' or a named function) and a 'response_format' or "
                          "'grammar'.",
                          "tool_choice");
  try {
    r.grammar = calls_grammar(request, r.syntax, prompt);
  } catch (const Error& e) {
    return make_api_error(400, str("Invalid value for 'tools': ", e.what()), "tools");
  }
  return r;
}

std::string tool_call_id(chat::ToolSyntax syntax) {
  static constexpr char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const bool mistral = syntax == chat::ToolSyntax::kMistral;
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

}  // namespace tkv::server
