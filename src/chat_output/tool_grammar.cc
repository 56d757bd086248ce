// tool_call_gbnf: one grammar for "a call to one of these tools", per
// family. Each tool's arguments are compiled by json_schema_to_gbnf under
// the rule prefix "tI-" (Qwen XML: each parameter under "tI-pJ-"), and the
// rule sets are merged keeping each shared primitive once.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "chat_output/reply_syntax.h"
#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace tkv::chat {
namespace {

using grammar::gbnf_literal;
using Json = nlohmann::ordered_json;

class Rules {
 public:
  void add(const std::string& name, const std::string& body) {
    if (names_.insert(name).second) text_ += name + " ::= " + body + "\n";
  }
  // The rules of a grammar text, one "name ::= body" per line.
  void add_all(const std::string& gbnf) {
    size_t pos = 0;
    while (pos < gbnf.size()) {
      size_t eol = gbnf.find('\n', pos);
      if (eol == std::string::npos) eol = gbnf.size();
      const std::string line = gbnf.substr(pos, eol - pos);
      const size_t sep = line.find(" ::= ");
      TKV_CHECK(sep != std::string::npos);
      add(line.substr(0, sep), line.substr(sep + 5));
      pos = eol + 1;
    }
  }
  const std::string& text() const { return text_; }

 private:
  std::set<std::string> names_;
  std::string text_;
};

std::string prefix(size_t tool) {
  std::string p =
      std::to_string(tool);  // appended in steps: GCC 12 misreads "t" + ... (-Wrestrict)
  p.insert(0, 1, 't');
  p += '-';
  return p;
}

// The JSON arguments of tool `i` as a rule; {} or null means any object.
std::string json_arguments(Rules& rules, size_t i, const Json& schema) {
  const bool any = schema.is_null() || (schema.is_object() && schema.empty());
  rules.add_all(grammar::json_schema_to_gbnf(any ? Json{{"type", "object"}} : schema, prefix(i)));
  return prefix(i) + "root";
}

// `name` as the JSON string a call writes it as.
std::string json_name(const std::string& name) {
  return gbnf_literal(nlohmann::json(name).dump());
}

// A Qwen XML parameter's value: free text for strings (not containing "</",
// which keeps the closing tag unambiguous), the listed texts for a string
// enum, the JSON grammar otherwise.
std::string xml_value(Rules& rules, const std::string& pre, const Json& schema) {
  const bool object = schema.is_object();
  if (object && schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
    std::string alts;
    bool strings = true;
    for (const Json& v : schema["enum"]) {
      strings = strings && v.is_string();
      if (strings) alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.get<std::string>());
    }
    if (strings) return "( " + alts + " )";
  } else if (object && schema.contains("type") && schema["type"] == "string" &&
             !schema.contains("anyOf") && !schema.contains("oneOf")) {
    // A length bound is kept (without "<" at all, which keeps it simple).
    const auto bound = [&](const char* key, int64_t fallback) {
      return schema.contains(key) && schema[key].is_number_integer()
                 ? std::clamp<int64_t>(schema[key].get<int64_t>(), 0, grammar::kMaxRepeat)
                 : fallback;
    };
    if (!schema.contains("minLength") && !schema.contains("maxLength")) return "xml-text";
    const int64_t lo = bound("minLength", 0), hi = bound("maxLength", -1);
    return "[^<]{" + std::to_string(lo) + "," + (hi < 0 ? "" : std::to_string(std::max(lo, hi))) +
           "}";
  }
  rules.add_all(grammar::json_schema_to_gbnf(schema, pre));
  return pre + "root";
}

std::string qwen_parameters(Rules& rules, size_t i, const Json& schema) {
  rules.add("xml-text", R"(( [^<] | "<" [^/] )*)");
  if (!schema.is_object() || !schema.contains("properties") || !schema["properties"].is_object())
    return R"(( "<parameter=" [^>\n]+ ">\n" xml-text "\n</parameter>\n" )*)";
  std::set<std::string> required;
  if (schema.contains("required") && schema["required"].is_array())
    for (const Json& r : schema["required"])
      if (r.is_string()) required.insert(r.get<std::string>());
  std::string seq;
  size_t j = 0;
  for (const auto& [key, prop] : schema["properties"].items()) {
    const std::string value = xml_value(rules, prefix(i) + "p" + std::to_string(j++) + "-", prop);
    const std::string param = "( " + gbnf_literal("<parameter=" + key + ">\n") + " " + value +
                              " \"\\n</parameter>\\n\" )";
    seq += (seq.empty() ? "" : " ") + param + (required.count(key) ? "" : "?");
  }
  return seq.empty() ? "\"\"" : seq;
}

void add_gemma_values(Rules& rules) {
  rules.add("g-value", R"(g-str | g-dict | g-arr | g-num | "true" | "false" | "null")");
  rules.add("g-str", R"("<|\"|>" ( [^<] | "<" [^|] )* "<|\"|>")");
  rules.add("g-dict", R"("{" ( g-key ":" g-value ( "," g-key ":" g-value )* )? "}")");
  rules.add("g-key", R"([a-zA-Z0-9_]+)");
  rules.add("g-arr", R"("[" ( g-value ( "," g-value )* )? "]")");
  rules.add("g-num", R"("-"? [0-9]+ ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)");
}

// The rule of one call to `tool` (index i) in `syntax`.
std::string call_rule(Rules& rules, ToolSyntax syntax, size_t i, const ToolSpec& tool) {
  const std::string name = gbnf_literal(tool.name);
  switch (syntax) {
    case ToolSyntax::kHermesJson:
      return R"("<tool_call>\n{\"name\": " )" + json_name(tool.name) + R"( ", \"arguments\": " )" +
             json_arguments(rules, i, tool.parameters) + R"( "}\n</tool_call>")";
    case ToolSyntax::kQwenXml:
      return R"("<tool_call>\n<function=" )" + name + R"( ">\n" )" +
             qwen_parameters(rules, i, tool.parameters) + R"( "</function>\n</tool_call>")";
    case ToolSyntax::kLlama3Json:
      return R"("{\"name\": " )" + json_name(tool.name) + R"( ", \"parameters\": " )" +
             json_arguments(rules, i, tool.parameters) + R"( "}")";
    case ToolSyntax::kMistral:
      return R"("[TOOL_CALLS]" )" + name + R"( "[ARGS]" )" +
             json_arguments(rules, i, tool.parameters);
    case ToolSyntax::kHarmony:
      return R"("<|channel|>commentary to=functions." )" + name +
             R"( " <|constrain|>json<|message|>" )" + json_arguments(rules, i, tool.parameters) +
             R"( "<|call|>")";
    case ToolSyntax::kDeepSeekR1:
      return R"("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" )" + name + R"( "\n```json\n" )" +
             json_arguments(rules, i, tool.parameters) + R"( "\n```<｜tool▁call▁end｜>")";
    case ToolSyntax::kGemma4:
      add_gemma_values(rules);
      return R"("<|tool_call>call:" )" + name + R"( g-dict "<tool_call|>")";
    case ToolSyntax::kNone:
      break;
  }
  fail("tool call grammar: the chat template has no tool-call syntax");
}

// What separates parallel calls; nullopt where the format has one call per reply.
std::optional<std::string> separator(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kHermesJson:
    case ToolSyntax::kQwenXml:
    case ToolSyntax::kDeepSeekR1:
      return R"("\n")";
    case ToolSyntax::kMistral:
    case ToolSyntax::kGemma4:
      return R"("")";
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string tool_call_gbnf(ToolSyntax syntax, const std::vector<ToolSpec>& tools, bool parallel) {
  if (syntax == ToolSyntax::kNone)
    fail("tool call grammar: the chat template has no tool-call syntax");
  if (tools.empty()) fail("tool call grammar: no tools to call");
  Rules rules;
  std::string alts;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string rule = "call-" + std::to_string(i);
    rules.add(rule, call_rule(rules, syntax, i, tools[i]));
    alts += (alts.empty() ? "" : " | ") + rule;
  }
  const auto sep = separator(syntax);
  std::string calls = parallel && sep ? "call ( " + *sep + " call )*" : "call";
  if (syntax == ToolSyntax::kDeepSeekR1)
    calls = R"("<｜tool▁calls▁begin｜>" )" + calls + R"( "<｜tool▁calls▁end｜>")";
  return "root ::= " + calls + "\ncall ::= " + alts + "\n" + rules.text();
}

}  // namespace tkv::chat
