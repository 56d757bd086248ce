// Each family's calls exactly as the shared templates render them in an
// assistant turn (05a: one call, 06: two in parallel), read back.
#include <gtest/gtest.h>

#include <string>

#include "chat_output/reply_syntax.h"
#include "chat_test_util.h"

namespace tkv::chat {
namespace {

using test::read_file;
using test::templates_dir;

constexpr const char* kParis = R"({"city":"Paris","unit":"celsius"})";
constexpr const char* kTokyo = R"({"city":"Tokyo"})";
constexpr const char* kOslo = R"({"city":"Oslo","unit":"celsius"})";

struct Rendered {
  const char* stem;
  const char* rendering;
  const char* turn_start;              // what the template writes before the assistant's text
  const char* turn_end;                // and after it
  std::vector<const char*> arguments;  // of get_weather, in order
};

// The assistant's text in a rendering: after `start` (the first one after
// the user's question) up to `end`.
std::string assistant_turn(const std::string& text, const Rendered& r) {
  const bool parallel = std::string(r.rendering).find("06") == 0;
  const std::string question =
      parallel ? "Compare the weather in Tokyo and Oslo." : "What's the weather in Paris?";
  const size_t q = text.find(question);
  if (q == std::string::npos) return "";
  const size_t start = text.find(r.turn_start, q);
  if (start == std::string::npos) return "";
  const size_t from = start + std::string(r.turn_start).size();
  const size_t end = text.find(r.turn_end, from);
  if (end == std::string::npos) return "";
  return text.substr(from, end - from);
}

const std::vector<Rendered>& renderings() {
  static const std::vector<Rendered> r = {
      {"Qwen-Qwen2.5-7B-Instruct",
       "05a-tool-call-args-object",
       "<|im_start|>assistant\n",
       "<|im_end|>",
       {kParis}},
      {"Qwen-Qwen2.5-7B-Instruct",
       "06-parallel-tool-calls",
       "<|im_start|>assistant\n",
       "<|im_end|>",
       {kTokyo, kOslo}},
      {"Qwen-Qwen3-0.6B",
       "06-parallel-tool-calls",
       "<|im_start|>assistant\n",
       "<|im_end|>",
       {kTokyo, kOslo}},
      {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
       "05a-tool-call-args-object",
       "<|im_start|>assistant\n",
       "<|im_end|>",
       {kParis}},
      {"ibm-granite-granite-4.0",
       "05a-tool-call-args-object",
       "<|start_of_role|>assistant<|end_of_role|>",
       "<|end_of_text|>",
       {kParis}},
      {"Qwen3-Coder",
       "05a-tool-call-args-object",
       "<|im_start|>assistant\n",
       "<|im_end|>",
       {kParis}},
      {"Qwen3-Coder",
       "06-parallel-tool-calls",
       "<|im_start|>assistant\n",
       "<|im_end|>",
       {kTokyo, kOslo}},
      {"Qwen3.5-4B",
       "06-parallel-tool-calls",
       "<|im_start|>assistant\n",
       "<|im_end|>",
       {kTokyo, kOslo}},
      {"meta-llama-Llama-3.1-8B-Instruct",
       "05a-tool-call-args-object",
       "<|start_header_id|>assistant<|end_header_id|>\n\n",
       "<|eot_id|>",
       {kParis}},
      {"meta-llama-Llama-3.3-70B-Instruct",
       "05a-tool-call-args-object",
       "<|start_header_id|>assistant<|end_header_id|>\n\n",
       "<|eot_id|>",
       {kParis}},
      {"Mistral-Small-3.2-24B-Instruct-2506",
       "06-parallel-tool-calls",
       "[/INST]",
       "</s>",
       {kTokyo, kOslo}},
      {"openai-gpt-oss-120b",
       "06-parallel-tool-calls",
       "<|start|>assistant",
       "<|start|>functions",
       {kTokyo}},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
       "05a-tool-call-args-object",
       "<｜Assistant｜>",
       "<｜end▁of▁sentence｜>",
       {kParis}},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
       "06-parallel-tool-calls",
       "<｜Assistant｜>",
       "<｜end▁of▁sentence｜>",
       {kTokyo, kOslo}},
      {"google-gemma-4-31B-it",
       "05a-tool-call-args-object",
       "<|turn>model\n",
       "<|tool_response>",
       {kParis}},
      {"google-gemma-4-31B-it",
       "06-parallel-tool-calls",
       "<|turn>model\n",
       "<|tool_response>",
       {kTokyo, kOslo}},
  };
  return r;
}

TEST(RenderedCalls, EveryFamilyReadsItsOwnRendering) {
  const std::string dir = templates_dir();
  if (dir.empty()) TKV_MISSING_FIXTURE << "chat-template fixtures not found (set TURBOKV_SHARED)";
  for (const Rendered& r : renderings()) {
    SCOPED_TRACE(std::string(r.stem) + " " + r.rendering);
    const ReplySyntax s = detect_reply_syntax(read_file(dir + "/templates/" + r.stem + ".jinja"));
    const std::string turn =
        assistant_turn(read_file(dir + "/expected/" + r.stem + "/" + r.rendering + ".txt"), r);
    ASSERT_FALSE(turn.empty());
    for (size_t chunk : {0, 1, 2, 7}) {
      const ReplyDelta d = test::parse(s, "", turn, true, chunk);
      EXPECT_EQ(d.content, "");
      EXPECT_EQ(d.reasoning, "");
      ASSERT_EQ(d.calls.size(), r.arguments.size()) << "chunk " << chunk;
      for (size_t i = 0; i < d.calls.size(); ++i) {
        EXPECT_EQ(d.calls[i].name, "get_weather");
        EXPECT_EQ(d.calls[i].arguments, r.arguments[i]);
      }
    }
    // Without tools in the request, the same text is content.
    const ReplyDelta plain = test::parse(s, "", turn, false, 1);
    EXPECT_TRUE(plain.calls.empty());
    EXPECT_NE(plain.content.find("get_weather"), std::string::npos);
  }
}

}  // namespace
}  // namespace tkv::chat
