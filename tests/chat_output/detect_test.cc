#include <gtest/gtest.h>

#include <string>

#include "chat_output/reply_syntax.h"
#include "chat_test_util.h"

namespace tkv::chat {
namespace {

using test::read_file;
using test::templates_dir;

struct Expected {
  const char* stem;
  ToolSyntax tools;
  const char* reasoning_open;
};

const Expected kTemplates[] = {
    {"Qwen-Qwen2.5-7B-Instruct", ToolSyntax::kHermesJson, ""},
    {"Qwen-Qwen3-0.6B", ToolSyntax::kHermesJson, "<think>"},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", ToolSyntax::kHermesJson, ""},
    {"ibm-granite-granite-4.0", ToolSyntax::kHermesJson, ""},
    {"Qwen3-Coder", ToolSyntax::kQwenXml, ""},
    {"Qwen3.5-4B", ToolSyntax::kQwenXml, "<think>"},
    {"meta-llama-Llama-3.1-8B-Instruct", ToolSyntax::kLlama3Json, ""},
    {"meta-llama-Llama-3.2-3B-Instruct", ToolSyntax::kLlama3Json, ""},
    {"meta-llama-Llama-3.3-70B-Instruct", ToolSyntax::kLlama3Json, ""},
    {"Mistral-Small-3.2-24B-Instruct-2506", ToolSyntax::kMistral, ""},
    {"openai-gpt-oss-120b", ToolSyntax::kHarmony, ""},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", ToolSyntax::kDeepSeekR1, "<think>"},
    {"google-gemma-4-31B-it", ToolSyntax::kGemma4, "<|channel>thought"},
    {"google-gemma-2-2b-it", ToolSyntax::kNone, ""},
    {"microsoft-Phi-3.5-mini-instruct", ToolSyntax::kNone, ""},
};

TEST(DetectReplySyntax, EverySharedTemplate) {
  const std::string dir = templates_dir();
  if (dir.empty()) TKV_MISSING_FIXTURE << "chat-template fixtures not found (set TURBOKV_SHARED)";
  for (const Expected& e : kTemplates) {
    SCOPED_TRACE(e.stem);
    const std::string source = read_file(dir + "/templates/" + e.stem + ".jinja");
    ASSERT_FALSE(source.empty());
    const ReplySyntax s = detect_reply_syntax(source);
    EXPECT_EQ(syntax_name(s.tools), std::string(syntax_name(e.tools)));
    EXPECT_EQ(s.reasoning_open, e.reasoning_open);
    EXPECT_EQ(s.reasoning_close.empty(), std::string(e.reasoning_open).empty());
    const bool special = e.tools == ToolSyntax::kHarmony || e.tools == ToolSyntax::kGemma4 ||
                         e.tools == ToolSyntax::kMistral;
    EXPECT_EQ(s.needs_special_tokens, special);
  }
}

TEST(DetectReplySyntax, PlainTextHasNoSyntax) {
  const ReplySyntax s = detect_reply_syntax("{{ messages[0].content }}");
  EXPECT_EQ(s.tools, ToolSyntax::kNone);
  EXPECT_TRUE(s.reasoning_open.empty());
  EXPECT_FALSE(s.needs_special_tokens);
}

TEST(DetectReplySyntax, Names) {
  EXPECT_STREQ(syntax_name(ToolSyntax::kNone), "none");
  EXPECT_STREQ(syntax_name(ToolSyntax::kHermesJson), "hermes");
  EXPECT_STREQ(syntax_name(ToolSyntax::kQwenXml), "qwen-xml");
  EXPECT_STREQ(syntax_name(ToolSyntax::kLlama3Json), "llama3");
  EXPECT_STREQ(syntax_name(ToolSyntax::kMistral), "mistral");
  EXPECT_STREQ(syntax_name(ToolSyntax::kHarmony), "harmony");
  EXPECT_STREQ(syntax_name(ToolSyntax::kDeepSeekR1), "deepseek-r1");
  EXPECT_STREQ(syntax_name(ToolSyntax::kGemma4), "gemma4");
}

// Where the rendered generation prompt leaves the reply: inside reasoning
// when the template opens it for the model, in content when it closes it.
TEST(DetectReplySyntax, GenerationPromptDecidesWhereTheReplyStarts) {
  const std::string dir = templates_dir();
  if (dir.empty()) TKV_MISSING_FIXTURE << "chat-template fixtures not found (set TURBOKV_SHARED)";
  struct Case {
    const char* stem;
    const char* rendering;
    const char* reply;
    const char* reasoning;
    const char* content;
  };
  const Case cases[] = {
      {"Qwen3.5-4B", "09b-thinking-enabled", "17 * 23 is...\n</think>\n\n391", "17 * 23 is...",
       "391"},
      {"Qwen3.5-4B", "09a-thinking-disabled", "391", "", "391"},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "09b-thinking-enabled", "Hmm.\n</think>\n\n391",
       "Hmm.", "391"},
      {"Qwen-Qwen3-0.6B", "09b-thinking-enabled", "<think>\nHmm.\n</think>\n\n391", "Hmm.", "391"},
      {"Qwen-Qwen3-0.6B", "09a-thinking-disabled", "391", "", "391"},
      {"google-gemma-4-31B-it", "09b-thinking-enabled", "<|channel>thought\nHmm.<channel|>391",
       "Hmm.", "391"},
      {"google-gemma-4-31B-it", "09a-thinking-disabled", "391", "", "391"},
      {"openai-gpt-oss-120b", "09b-thinking-enabled",
       "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final<|message|>391",
       "Hmm.", "391"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.stem) + " " + c.rendering);
    const ReplySyntax s = detect_reply_syntax(read_file(dir + "/templates/" + c.stem + ".jinja"));
    const std::string prompt = read_file(dir + "/expected/" + c.stem + "/" + c.rendering + ".txt");
    ASSERT_FALSE(prompt.empty());
    for (size_t chunk : {0, 1, 3}) {
      const ReplyDelta d = test::parse(s, prompt, c.reply, true, chunk);
      EXPECT_EQ(d.reasoning, c.reasoning);
      EXPECT_EQ(d.content, c.content);
      EXPECT_TRUE(d.calls.empty());
    }
  }
}

}  // namespace
}  // namespace tkv::chat
