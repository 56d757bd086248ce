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
  rules.add("g-num", R"("-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?)");
}

std::string gemma_value(Rules& rules, const Json& schema);

// A Gemma 4 object's properties from `k` on, in the schema's order; `first`:
// no property written yet (no comma before the next).
std::string gemma_properties(Rules& rules, const std::vector<std::pair<std::string, Json>>& props,
                             const std::set<std::string>& required, size_t k, bool first) {
  if (k == props.size()) return "\"\"";
  const auto& [key, prop] = props[k];
  const std::string entry = (first ? "" : "\",\" ") + gbnf_literal(key + ":") + " " +
                            gemma_value(rules, prop) + " " +
                            gemma_properties(rules, props, required, k + 1, false);
  if (required.count(key)) return "( " + entry + " )";
  return "( " + entry + " | " + gemma_properties(rules, props, required, k + 1, first) + " )";
}

// A value in Gemma 4's call syntax that follows `schema` where it is one of
// the common shapes (string with bounds or enum, integer, number, boolean,
// object with properties, array); any value otherwise.
std::string gemma_value(Rules& rules, const Json& schema) {
  if (!schema.is_object()) return "g-value";
  const std::string quote = R"("<|\"|>")";
  if (schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
    std::string alts;
    for (const Json& v : schema["enum"]) {
      if (!v.is_string()) return "g-value";
      alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.get<std::string>());
    }
    return "( " + quote + " ( " + alts + " ) " + quote + " )";
  }
  const std::string type = schema.contains("type") && schema["type"].is_string()
                               ? schema["type"].get<std::string>()
                               : "";
  if (type == "string") {
    if (!schema.contains("minLength") && !schema.contains("maxLength")) return "g-str";
    const auto bound = [&](const char* k, int64_t fallback) {
      return schema.contains(k) && schema[k].is_number_integer()
                 ? std::clamp<int64_t>(schema[k].get<int64_t>(), 0, grammar::kMaxRepeat)
                 : fallback;
    };
    const int64_t lo = bound("minLength", 0), hi = bound("maxLength", -1);
    return "( " + quote + " [^<]{" + std::to_string(lo) + "," +
           (hi < 0 ? "" : std::to_string(std::max(lo, hi))) + "} " + quote + " )";
  }
  if (type == "integer") return R"(( "-"? ( "0" | [1-9] [0-9]{0,15} ) ))";
  if (type == "number") return "g-num";
  if (type == "boolean") return R"(( "true" | "false" ))";
  if (type == "array" && schema.contains("items")) {
    const std::string item = gemma_value(rules, schema["items"]);
    return "( \"[\" ( " + item + " ( \",\" " + item + " )* )? \"]\" )";
  }
  if (type == "object" && schema.contains("properties") && schema["properties"].is_object()) {
    std::vector<std::pair<std::string, Json>> props;
    for (const auto& [k, v] : schema["properties"].items()) props.emplace_back(k, v);
    std::set<std::string> required;
    if (schema.contains("required") && schema["required"].is_array())
      for (const Json& r : schema["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    return "( \"{\" " + gemma_properties(rules, props, required, 0, true) + " \"}\" )";
  }
  if (type == "object") return "g-dict";
  return "g-value";
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
             R"( " <|constrain|>json<|message|>" )" + json_arguments(rules, i, tool.parameters);
    case ToolSyntax::kDeepSeekR1:
      return R"("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" )" + name + R"( "\n```json\n" )" +
             json_arguments(rules, i, tool.parameters) + R"( "\n```<｜tool▁call▁end｜>")";
    case ToolSyntax::kGemma4:
      add_gemma_values(rules);
      return R"("<|tool_call>call:" )" + name + " " +
             (tool.parameters.empty() ? std::string("g-dict")
                                      : gemma_value(rules, tool.parameters)) +
             R"( "<tool_call|>")";
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

std::string tool_call_gbnf(ToolSyntax syntax, const std::vector<ToolSpec>& tools, bool parallel,
                           std::string_view opening) {
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
  if (!opening.empty()) calls = gbnf_literal(std::string(opening)) + " " + calls;
  return "root ::= " + calls + "\ncall ::= " + alts + "\n" + rules.text();
}

}  // namespace tkv::chat
