// What a chat model's reply looks like, as its chat template implies: where
// its reasoning goes and how it writes tool calls. The server reads a
// reply through a ReplyParser to split it into content, reasoning_content
// and tool_calls (OpenAI's message fields), and constrains replies that
// must be tool calls (tool_choice "required" or a named function) with
// tool_call_gbnf().
//
// Families (the syntax each template teaches its model):
//   kHermesJson  <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>
//                (Qwen2.5, Qwen3, Hermes 3, Granite 4)
//   kQwenXml     <tool_call>\n<function=N>\n<parameter=P>\nV\n</parameter>\n
//                </function>\n</tool_call>  (Qwen3-Coder, Qwen3.5)
//   kLlama3Json  {"name": N, "parameters": {...}}  (Llama 3.1-3.3)
//   kMistral     [TOOL_CALLS]N[ARGS]{...}  (Mistral Small 3.2)
//   kHarmony     <|channel|>commentary to=functions.N <|constrain|>json
//                <|message|>{...}<|call|>  (gpt-oss; analysis = reasoning)
//   kDeepSeekR1  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
//                \n```json\n{...}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//   kGemma4      <|tool_call>call:N{key:<|"|>text<|"|>,...}<tool_call|>
// Reasoning: <think>...</think> (Qwen3, Qwen3.5, DeepSeek R1), harmony's
// analysis channel, Gemma 4's <|channel>thought...<channel|>.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tkv::chat {

enum class ToolSyntax {
  kNone,  // the template has no tool calls
  kHermesJson,
  kQwenXml,
  kLlama3Json,
  kMistral,
  kHarmony,
  kDeepSeekR1,
  kGemma4,
};

// "none", "hermes", "qwen-xml", "llama3", "mistral", "harmony",
// "deepseek-r1", "gemma4".
const char* syntax_name(ToolSyntax syntax);

struct ReplySyntax {
  ToolSyntax tools = ToolSyntax::kNone;
  // The texts that open and close a reasoning section ("<think>",
  // "</think>"); empty when the template has none (harmony's channels are
  // handled by kHarmony itself).
  std::string reasoning_open, reasoning_close;
  // Whether the markers are special tokens that only appear in the text
  // when special tokens are rendered (harmony, Gemma 4): the server then
  // decodes the reply with render_special.
  bool needs_special_tokens = false;
};

// The syntax a chat template's source implies (recognized by the markers
// the template writes). kNone and no reasoning markers for anything else.
ReplySyntax detect_reply_syntax(std::string_view template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as compact text ("{}" when none)
};

// What a stretch of reply text holds.
struct ReplyDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> calls;  // whole calls only, in order
  bool empty() const { return content.empty() && reasoning.empty() && calls.empty(); }
  // Appends what `later` holds (the text after this one's).
  void append(ReplyDelta&& later) {
    content += later.content;
    reasoning += later.reasoning;
    for (ToolCall& c : later.calls) calls.push_back(std::move(c));
  }
};

namespace detail {
// How far the search for the end of a call got, so that a long call (a file
// written through a tool) is scanned once, not again on every feed.
struct CallScan {
  size_t searched = 0;  // bytes searched for the closing marker (or Mistral's [ARGS])
  size_t json_at = std::string::npos;  // where the call's JSON starts, once known
  size_t json_pos = 0;                 // the JSON scanned so far: up to here,
  int depth = 0;                       // this deep in objects and arrays,
  bool in_string = false, escaped = false;
};
}  // namespace detail

// Reads a reply as it is generated. Text that may still turn out to be a
// marker (a prefix of "<tool_call>" at the end of what came so far, with
// the whitespace before it) or half a UTF-8 character is held back until
// the next feed() tells; a call is returned once it is whole. Whitespace
// around markers is dropped (docs/TOOL_CALLS.md). Fed whole or in pieces,
// a reply reads the same.
class ReplyParser {
 public:
  // `prompt`: the rendered prompt; when it ends inside an open reasoning
  // section (Qwen3.5 and DeepSeek R1 templates open "<think>" for the
  // model) the reply starts as reasoning. `parse_tools`: false when the
  // request has no tools (tool syntax is then plain content).
  ReplyParser(ReplySyntax syntax, std::string_view prompt, bool parse_tools);

  // Appends generated text; returns what is now certain.
  ReplyDelta feed(std::string_view text);
  // The end of the reply: everything still held. A call left unfinished
  // (or one whose arguments are not a JSON object) is returned as content,
  // as it was written.
  ReplyDelta finish();

 private:
  enum class Mode {
    kStart,          // Llama 3: the reply may be a bare JSON call
    kContent,        // content, watching for reasoning and call openers
    kReasoning,      // inside a reasoning section
    kCall,           // inside a call: held until it is whole
    kHarmonyHeader,  // harmony: a message header, up to <|message|>
  };
  // One step over buffer_ in the current mode; false when nothing more can
  // be decided until more text comes (or, `final`, everything is out).
  bool step(bool final, ReplyDelta& out);
  bool start_step(bool final);
  bool text_step(bool final, ReplyDelta& out);
  bool call_step(bool final, ReplyDelta& out);
  bool harmony_header_step(bool final);
  void on_marker(const std::string& marker, const std::string& space);
  // Appends text to a field, dropping leading whitespace after a marker.
  void emit(std::string& field, std::string_view text);

  ReplySyntax syntax_;
  bool parse_tools_;
  std::string buffer_;  // text not yet returned
  Mode mode_ = Mode::kContent;
  bool skip_space_ = true;  // drop whitespace before the next text
  std::string call_open_;   // the text that opened the call in progress
  detail::CallScan call_scan_;
  std::string harmony_header_;  // harmony: the header of the message in progress
};

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema (object); {} = any object
};

// The GBNF grammar of a reply made of tool calls to `tools` in `syntax`:
// exactly one call, or (`parallel`) one or more; each call's arguments
// follow its tool's schema (json_schema.h, the same subset and the same
// 400-worthy tkv::Error for an unsupported keyword). `opening`: text the
// reply writes before its calls (the close of a reasoning section the
// prompt opened). tkv::Error when `syntax` has no tool calls (kNone) or
// `tools` is empty.
std::string tool_call_gbnf(ToolSyntax syntax, const std::vector<ToolSpec>& tools, bool parallel,
                           std::string_view opening = {});

}  // namespace tkv::chat
