#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "chat_output/reply_syntax.h"
#include "chat_test_util.h"
#include "common/error.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace tkv::chat {
namespace {

using Json = nlohmann::ordered_json;

std::vector<ToolSpec> tools() {
  return {
      {"get_weather", Json::parse(R"({"type": "object", "properties": {
          "city": {"type": "string"},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
          "required": ["city"]})")},
      {"search_web", Json::parse(R"({"type": "object", "properties": {
          "query": {"type": "string"}, "max_results": {"type": "integer"}},
          "required": ["query"]})")},
  };
}

struct Family {
  ToolSyntax syntax;
  std::string good;    // a call of get_weather
  std::string second;  // a call of search_web
  std::string sep;     // between parallel calls; "-": the format has one call per reply
  std::vector<std::string> bad;
};

std::vector<Family> families() {
  const std::string hermes_w =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>";
  const std::string hermes_s =
      "<tool_call>\n{\"name\": \"search_web\", \"arguments\": {\"query\": \"x\", \"max_results\": "
      "3}}\n</tool_call>";
  const std::string xml_w =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco, CA\n</parameter>\n"
      "<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>";
  const std::string xml_s =
      "<tool_call>\n<function=search_web>\n<parameter=query>\nx < y\n</parameter>\n"
      "<parameter=max_results>\n3\n</parameter>\n</function>\n</tool_call>";
  return {
      {ToolSyntax::kHermesJson,
       hermes_w,
       hermes_s,
       "\n",
       {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"delete_all\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"search_web\", \"arguments\": {\"query\": \"x\", "
        "\"max_results\": \"3\"}}\n</tool_call>"}},
      {ToolSyntax::kQwenXml,
       xml_w,
       xml_s,
       "\n",
       {"<tool_call>\n<function=get_weather>\n<parameter=unit>\ncelsius\n</parameter>\n</function>"
        "\n</tool_call>",
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=unit>\nkelvin\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=search_web>\n<parameter=query>\nx\n</parameter>\n"
        "<parameter=max_results>\nthree\n</parameter>\n</function>\n</tool_call>"}},
      {ToolSyntax::kLlama3Json,
       "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
       "{\"name\": \"search_web\", \"parameters\": {\"query\": \"x\"}}",
       "-",
       {"{\"name\": \"get_weather\", \"parameters\": {\"town\": \"Oslo\"}}",
        "{\"name\": \"get_weather\"}"}},
      {ToolSyntax::kMistral,
       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}",
       "[TOOL_CALLS]search_web[ARGS]{\"query\": \"x\"}",
       "",
       {"[TOOL_CALLS]get_weather[ARGS]{}", "get_weather[ARGS]{\"city\": \"Oslo\"}"}},
      {ToolSyntax::kHarmony,
       "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
       "\"Oslo\"}",
       "<|channel|>commentary to=functions.search_web <|constrain|>json<|message|>{\"query\": "
       "\"x\"}",
       "-",
       {"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>",
        "<|channel|>final<|message|>Oslo<|return|>"}},
      {ToolSyntax::kDeepSeekR1,
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
       "{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search_web\n```json\n"
       "{\"query\": \"x\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "deepseek",
       {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        "{\"unit\": \"celsius\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"}},
      {ToolSyntax::kGemma4,
       "<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>}<tool_call|>",
       "<|tool_call>call:search_web{query:<|\"|>x<|\"|>,max_results:3}<tool_call|>",
       "",
       {"<|tool_call>call:delete_all{}<tool_call|>",
        "<|tool_call>call:get_weather{city:Oslo}<tool_call|>"}},
  };
}

bool accepts(const std::string& gbnf, const std::string& text) {
  return grammar::matches(std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf)),
                          text);
}

// Two calls as the format writes them in one reply.
std::string two_calls(const Family& f) {
  if (f.sep != "deepseek") return f.good + f.sep + f.second;
  const std::string begin = "<｜tool▁calls▁begin｜>", end = "<｜tool▁calls▁end｜>";
  return f.good.substr(0, f.good.size() - end.size()) + "\n" + f.second.substr(begin.size());
}

TEST(ToolCallGbnf, AcceptsWellFormedCallsAndRejectsOthers) {
  for (const Family& f : families()) {
    SCOPED_TRACE(syntax_name(f.syntax));
    const std::string one = tool_call_gbnf(f.syntax, tools(), false);
    EXPECT_TRUE(accepts(one, f.good)) << one;
    EXPECT_TRUE(accepts(one, f.second));
    for (const std::string& bad : f.bad) EXPECT_FALSE(accepts(one, bad)) << bad;
    EXPECT_FALSE(accepts(one, "")) << "an empty reply";
    EXPECT_FALSE(accepts(one, two_calls(f))) << "two calls without parallel";
    const std::string many = tool_call_gbnf(f.syntax, tools(), true);
    EXPECT_TRUE(accepts(many, f.good));
    EXPECT_EQ(accepts(many, two_calls(f)), f.sep != "-") << two_calls(f);
  }
}

// What the grammar lets through, the parser reads as the calls it is.
TEST(ToolCallGbnf, WhatItAcceptsParsesAsCalls) {
  for (const Family& f : families()) {
    SCOPED_TRACE(syntax_name(f.syntax));
    const ReplyDelta d = test::parse(test::syntax_of(f.syntax), "", f.good, true, 1);
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.calls.size(), 1u);
    EXPECT_EQ(d.calls[0].name, "get_weather");
    EXPECT_NE(d.calls[0].arguments.find("\"city\""), std::string::npos);
  }
}

TEST(ToolCallGbnf, ErrorsAreOneLine) {
  auto error = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const tkv::Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error([] { tool_call_gbnf(ToolSyntax::kNone, tools(), false); }), "");
  EXPECT_NE(error([] { tool_call_gbnf(ToolSyntax::kHermesJson, {}, false); }), "");
  const std::vector<ToolSpec> bad = {{"f", Json::parse(R"({"type": "object", "if": {}})")}};
  EXPECT_NE(error([&] { tool_call_gbnf(ToolSyntax::kHermesJson, bad, false); }).find("json schema"),
            std::string::npos);
}

TEST(ToolCallGbnf, EmptyParametersMeanAnyObject) {
  const std::vector<ToolSpec> any = {{"f", Json::object()}};
  const std::string g = tool_call_gbnf(ToolSyntax::kHermesJson, any, false);
  EXPECT_TRUE(
      accepts(g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1]}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"f\", \"arguments\": 1}\n</tool_call>"));
  const std::string x = tool_call_gbnf(ToolSyntax::kQwenXml, any, false);
  EXPECT_TRUE(accepts(x,
                      "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n"
                      "</tool_call>"));
}

}  // namespace
}  // namespace tkv::chat
