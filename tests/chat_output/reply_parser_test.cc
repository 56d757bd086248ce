#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat_output/reply_syntax.h"
#include "chat_test_util.h"

namespace tkv::chat {
namespace {

using test::parse;
using test::syntax_of;

const ReplySyntax kHermes = syntax_of(ToolSyntax::kHermesJson);
const ReplySyntax kQwen3 = syntax_of(ToolSyntax::kHermesJson, "<think>", "</think>");
const ReplySyntax kQwenXml = syntax_of(ToolSyntax::kQwenXml, "<think>", "</think>");
const ReplySyntax kLlama = syntax_of(ToolSyntax::kLlama3Json);
const ReplySyntax kMistral = syntax_of(ToolSyntax::kMistral);
const ReplySyntax kHarmony = syntax_of(ToolSyntax::kHarmony);
const ReplySyntax kDeepSeek = syntax_of(ToolSyntax::kDeepSeekR1, "<think>", "</think>");
const ReplySyntax kGemma = syntax_of(ToolSyntax::kGemma4, "<|channel>thought", "<channel|>");

struct Case {
  const char* what;
  ReplySyntax syntax;
  std::string prompt, reply;
  bool tools;
};

// Replies of every family: calls, reasoning, content around them, unfinished
// and malformed calls, marker-like text, multi-byte characters.
std::vector<Case> cases() {
  return {
      {"hermes content then call", kHermes, "",
       "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
       true},
      {"hermes parallel", kHermes, "",
       "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
       "\"g\", \"arguments\": \"{\\\"x\\\": 2}\"}\n</tool_call>",
       true},
      {"hermes unfinished", kHermes, "", "Sure <tool_call>\n{\"name\": \"f\", \"argu", true},
      {"hermes bad arguments", kHermes, "",
       "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call> after", true},
      {"hermes no tools", kQwen3, "",
       "<think>\nA.\n</think>\n\n<tool_call>\n{\"name\": \"f\"}\n</tool_call>", false},
      {"qwen3 think then call", kQwen3, "",
       "<think>\nI should call f.\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": "
       "{\"q\": \"é ü 日本\"}}\n</tool_call>",
       true},
      {"marker-like text", kHermes, "", "a <tool b <tool_cal c </tool_call> d <", true},
      {"qwen xml", kQwenXml, "<think>\n",
       "plan\n</think>\n\n<tool_call>\n<function=f>\n<parameter=n>\n42\n</"
       "parameter>\n<parameter=s>\n"
       "two\nlines\n</parameter>\n<parameter=o>\n{\"k\": [1, null]}\n</parameter>\n</function>\n"
       "</tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>",
       true},
      {"qwen xml unfinished", kQwenXml, "", "<tool_call>\n<function=f>\n<parameter=n>\n4", true},
      {"llama call", kLlama, "", "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"}\"}}",
       true},
      {"llama escaped quote", kLlama, "\n",
       "{\"name\": \"f\", \"parameters\": {\"a\": \"q\\\"}\\\\\", \"b\": [\"]\"]}}", true},
      {"llama plain", kLlama, "", "  The answer is {not json", true},
      {"llama json not a call", kLlama, "", "{\"answer\": 4} done", true},
      {"mistral", kMistral, "",
       "Checking.[TOOL_CALLS]f[ARGS]{\"a\": {\"b\": \"]\"}}[TOOL_CALLS]g[CALL_ID]c1[ARGS]{}", true},
      {"mistral list", kMistral, "",
       "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", "
       "\"arguments\": "
       "{}}]",
       true},
      {"mistral unfinished", kMistral, "", "[TOOL_CALLS]f[ARGS]{\"a\": ", true},
      {"harmony reasoning and answer", kHarmony, "<|start|>assistant",
       "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>"
       "391<|return|>",
       true},
      {"harmony call", kHarmony, "<|start|>assistant",
       "<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary "
       "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>",
       true},
      {"harmony plain text", kHarmony, "", "Just text.", true},
      {"deepseek", kDeepSeek, "<think>\n",
       "ok\n</think>\n\nOn it.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n"
       "```json\n{\"a\": 1}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>g\n"
       "```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       true},
      {"gemma", kGemma, "",
       "<|channel>thought\nHmm.<channel|>Calling.<|tool_call>call:f{n:3,flag:true,l:[1,<|\"|>a, "
       "b<|\"|>],o:{k:null}}<tool_call|>",
       true},
      {"gemma unfinished", kGemma, "", "<|tool_call>call:f{n:<|\"|>x", true},
  };
}

// Fed whole, byte by byte or in any other pieces, a reply reads the same.
TEST(ReplyParser, PiecesReadLikeTheWhole) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.what);
    const ReplyDelta whole = parse(c.syntax, c.prompt, c.reply, c.tools);
    for (size_t chunk : {1, 2, 3, 4, 5, 8, 13}) {
      const ReplyDelta d = parse(c.syntax, c.prompt, c.reply, c.tools, chunk);
      EXPECT_EQ(d.content, whole.content) << "chunk " << chunk;
      EXPECT_EQ(d.reasoning, whole.reasoning) << "chunk " << chunk;
      ASSERT_EQ(d.calls.size(), whole.calls.size()) << "chunk " << chunk;
      for (size_t i = 0; i < d.calls.size(); ++i) {
        EXPECT_EQ(d.calls[i].name, whole.calls[i].name);
        EXPECT_EQ(d.calls[i].arguments, whole.calls[i].arguments);
      }
    }
  }
}

struct Want {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;
};

void expect_reads(const Case& c, const Want& want) {
  SCOPED_TRACE(c.what);
  const ReplyDelta d = parse(c.syntax, c.prompt, c.reply, c.tools, 1);
  EXPECT_EQ(d.content, want.content);
  EXPECT_EQ(d.reasoning, want.reasoning);
  ASSERT_EQ(d.calls.size(), want.calls.size());
  for (size_t i = 0; i < d.calls.size(); ++i) {
    EXPECT_EQ(d.calls[i].name, want.calls[i].first);
    EXPECT_EQ(d.calls[i].arguments, want.calls[i].second);
  }
}

TEST(ReplyParser, WhatEachReplyHolds) {
  const std::vector<Case> c = cases();
  const std::vector<Want> want = {
      {"Let me check.", "", {{"f", R"({"a":1})"}}},
      {"", "", {{"f", "{}"}, {"g", R"({"x":2})"}}},
      {"Sure <tool_call>\n{\"name\": \"f\", \"argu", "", {}},
      {"<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call> after", "", {}},
      {"<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "A.", {}},
      {"", "I should call f.", {{"f", R"({"q":"é ü 日本"})"}}},
      {"a <tool b <tool_cal c </tool_call> d <", "", {}},
      {"", "plan", {{"f", R"({"n":42,"s":"two\nlines","o":{"k":[1,null]}})"}, {"g", "{}"}}},
      {"<tool_call>\n<function=f>\n<parameter=n>\n4", "", {}},
      {"", "", {{"f", R"({"a":"}"})"}}},
      {"", "", {{"f", R"({"a":"q\"}\\","b":["]"]})"}}},
      {"The answer is {not json", "", {}},
      {"{\"answer\": 4} done", "", {}},
      {"Checking.", "", {{"f", R"({"a":{"b":"]"}})"}, {"g", "{}"}}},
      {"", "", {{"f", R"({"a":1})"}, {"g", "{}"}}},
      {"[TOOL_CALLS]f[ARGS]{\"a\": ", "", {}},
      {"391", "Think.", {}},
      {"", "Need it.", {{"get_weather", R"({"city":"Paris"})"}}},
      {"Just text.", "", {}},
      {"On it.", "ok", {{"f", R"({"a":1})"}, {"g", "{}"}}},
      {"Calling.", "Hmm.", {{"f", R"({"n":3,"flag":true,"l":[1,"a, b"],"o":{"k":null}})"}}},
      {"<|tool_call>call:f{n:<|\"|>x", "", {}},
  };
  ASSERT_EQ(c.size(), want.size());
  for (size_t i = 0; i < c.size(); ++i) expect_reads(c[i], want[i]);
}

// Only what may still become a marker waits: the rest comes out at once.
TEST(ReplyParser, HoldsBackOnlyWhatMayBeAMarker) {
  ReplyParser p(kHermes, "", true);
  EXPECT_EQ(p.feed("Hello").content, "Hello");
  EXPECT_EQ(p.feed(" <tool").content, "");
  EXPECT_EQ(p.feed("bar>").content, " <toolbar>");
  const std::string e_acute = "é";
  EXPECT_EQ(p.feed(e_acute.substr(0, 1)).content, "");  // half a character
  EXPECT_EQ(p.feed(e_acute.substr(1)).content, e_acute);
  const ReplyDelta call = p.feed("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(call.calls.size(), 1u);
  EXPECT_EQ(call.calls[0].name, "f");
  EXPECT_TRUE(p.finish().empty());
}

// A call as long as a file written through a tool, fed a few bytes at a
// time (the end of a call is searched for once over its text, not again
// from its start on every piece).
TEST(ReplyParser, LongCallsReadWhole) {
  std::string code;
  for (int i = 0; i < 20000; ++i) code += "if (a < b) { x = \"</param\"; }\n";
  const std::string xml = "<tool_call>\n<function=write>\n<parameter=text>\n" + code +
                          "\n</parameter>\n</function>\n</tool_call>";
  const ReplyDelta d = parse(kQwenXml, "", xml, true, 3);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(d.calls[0].arguments)["text"], code);
  const std::string json = "[TOOL_CALLS]write[ARGS]" + nlohmann::json{{"text", code}}.dump();
  const ReplyDelta m = parse(kMistral, "", json, true, 3);
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(m.calls[0].arguments)["text"], code);
}

TEST(ReplyParser, AnUnclosedReasoningEndsAsReasoning) {
  const ReplyDelta d = parse(kQwen3, "", "<think>\nstill thinking", true, 1);
  EXPECT_EQ(d.reasoning, "still thinking");
  EXPECT_EQ(d.content, "");
}

}  // namespace
}  // namespace tkv::chat
