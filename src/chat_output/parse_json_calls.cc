// The families whose calls carry JSON arguments: Hermes, Llama 3, Mistral,
// DeepSeek R1, harmony.
#include <algorithm>
#include <string>

#include "chat_output/call_parse.h"

namespace tkv::chat::detail {
namespace {

using Json = nlohmann::ordered_json;

std::optional<Json> parse_json(std::string_view text) {
  Json v = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

// {"name": N, "arguments": {...}} ("parameters" too, as Llama 3 writes it).
std::optional<ToolCall> named_call(const Json& v) {
  if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) return std::nullopt;
  ToolCall call{v["name"].get<std::string>(), "{}"};
  for (const char* key : {"arguments", "parameters"}) {
    if (!v.contains(key)) continue;
    const auto args = arguments_text(v[key]);
    if (!args) return std::nullopt;
    call.arguments = *args;
    break;
  }
  return call;
}

std::optional<std::vector<ToolCall>> one(std::optional<ToolCall> call) {
  if (!call) return std::nullopt;
  return std::vector<ToolCall>{std::move(*call)};
}

// <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
std::optional<ToolCall> parse_hermes(std::string_view body) {
  const auto v = parse_json(trim(body));
  if (!v) return std::nullopt;
  return named_call(*v);
}

// [TOOL_CALLS]NAME[ARGS]{...} or [TOOL_CALLS][{"name": ..., "arguments": ...}, ...]
std::optional<std::vector<ToolCall>> parse_mistral(std::string_view body) {
  const std::string_view lead = trim(body);
  if (!lead.empty() && (lead.front() == '[' || lead.front() == '{')) {
    const auto v = parse_json(lead);
    if (!v) return std::nullopt;
    if (v->is_object()) return one(named_call(*v));
    std::vector<ToolCall> calls;
    for (const Json& item : *v) {
      auto call = named_call(item);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    if (calls.empty()) return std::nullopt;
    return calls;
  }
  const size_t args = body.find("[ARGS]");
  if (args == std::string_view::npos) return std::nullopt;
  std::string_view name = body.substr(0, args);
  name = name.substr(0, name.find("[CALL_ID]"));
  name = trim(name);
  const auto v = parse_json(trim(body.substr(args + 6)));
  if (name.empty() || !v) return std::nullopt;
  const auto text = arguments_text(*v);
  if (!text) return std::nullopt;
  return std::vector<ToolCall>{{std::string(name), *text}};
}

bool eat(std::string_view& text, std::string_view prefix) {
  text = trim(text);
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>,
// one or more, inside the calls block.
std::optional<std::vector<ToolCall>> parse_deepseek(std::string_view body) {
  static constexpr std::string_view kBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>",
                                    kEnd = "<｜tool▁call▁end｜>";
  std::vector<ToolCall> calls;
  while (!trim(body).empty()) {
    if (!eat(body, kBegin)) return std::nullopt;
    const size_t sep = body.find(kSep);
    if (sep == std::string_view::npos) return std::nullopt;
    body.remove_prefix(sep + kSep.size());
    const size_t eol = body.find('\n');
    const size_t end = body.find(kEnd);
    if (eol == std::string_view::npos || end == std::string_view::npos || eol > end)
      return std::nullopt;
    const std::string name(trim(body.substr(0, eol)));
    std::string_view args = trim(body.substr(eol, end - eol));
    body.remove_prefix(end + kEnd.size());
    if (eat(args, "```json") || eat(args, "```")) {
      args = trim(args);
      if (args.size() < 3 || args.substr(args.size() - 3) != "```") return std::nullopt;
      args.remove_suffix(3);
    }
    const auto v = parse_json(trim(args));
    const auto text = v ? arguments_text(*v) : std::nullopt;
    if (name.empty() || !text) return std::nullopt;
    calls.push_back({name, *text});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

}  // namespace

std::optional<std::string> arguments_text(const Json& value) {
  // Strings read from a reply may hold invalid UTF-8: written as U+FFFD.
  const auto compact = [](const Json& object) {
    return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  if (value.is_object()) return compact(value);
  if (value.is_string()) {
    const auto inner = parse_json(value.get_ref<const std::string&>());
    if (inner && inner->is_object()) return compact(*inner);
  }
  return std::nullopt;
}

std::optional<ToolCall> parse_harmony_call(std::string_view header, std::string_view body) {
  const size_t to = header.find("to=functions.");
  if (to == std::string_view::npos) return std::nullopt;
  std::string_view name = header.substr(to + 13);
  name = name.substr(0, std::min(name.find(' '), name.find('<')));
  const auto v = parse_json(trim(body));
  const auto text = v ? arguments_text(*v) : std::nullopt;
  if (name.empty() || !text) return std::nullopt;
  return ToolCall{std::string(name), *text};
}

std::optional<std::vector<ToolCall>> parse_calls(ToolSyntax syntax, std::string_view body) {
  switch (syntax) {
    case ToolSyntax::kHermesJson:
      return one(parse_hermes(body));
    case ToolSyntax::kLlama3Json:
      return one(parse_hermes(body));
    case ToolSyntax::kQwenXml:
      return one(parse_qwen_xml_call(body));
    case ToolSyntax::kMistral:
      return parse_mistral(body);
    case ToolSyntax::kDeepSeekR1:
      return parse_deepseek(body);
    case ToolSyntax::kGemma4:
      return one(parse_gemma4_call(body));
    case ToolSyntax::kHarmony:
    case ToolSyntax::kNone:
      break;
  }
  return std::nullopt;
}

}  // namespace tkv::chat::detail
