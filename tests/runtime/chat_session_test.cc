// ChatSession in process: what each turn feeds, for templates of different
// shapes, on the real stories260K model.
#include "runtime/chat_session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "model/model.h"
#include "runtime_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {
namespace {

using Fixture = ModelFixture;

Fixture load(const std::string& path) {
  return load_model_fixture(path, 512);
}

sample::SamplerConfig greedy() {
  sample::SamplerConfig s;
  s.temperature = 0;
  return s;
}

auto ignore = [](const std::string&) {};

TEST(ChatSession, FirstTurnIsTheWholeRenderedConversation) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  ChatSession chat(*f.session, tok::ChatTemplate::by_name("chatml"), greedy(), "Be kind.", {});
  EXPECT_EQ(chat.render_delta("Hi"),
            "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  const ChatReply r = chat.respond("Hi", 5, nullptr, ignore);
  EXPECT_FALSE(r.no_room);
  EXPECT_EQ(r.generation.n_generated, 5);
  // BOS + the rendered text, then the 4 generated tokens that were fed back.
  EXPECT_EQ(f.session->tokens().size(), size_t(r.prompt_tokens + 4));
  EXPECT_EQ(f.session->tokens()[0], f.tokenizer->bos());
  ASSERT_EQ(chat.messages().size(), 3u);
  EXPECT_EQ(chat.messages()[2].role, "assistant");
  EXPECT_EQ(chat.messages()[2].content, r.text);
}

TEST(ChatSession, LaterTurnsFeedOnlyWhatFollowsThePreviousReply) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  // llama3 trims message text: the sentinel still finds the reply's end.
  ChatSession chat(*f.session, tok::ChatTemplate::by_name("llama3"), greedy(), "", {});
  chat.respond("Hello", 6, nullptr, ignore);
  EXPECT_EQ(chat.render_delta("Again"),
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  ChatSession chatml(*f.session, tok::ChatTemplate::by_name("chatml"), greedy(), "", {});
  chatml.respond("Hello", 6, nullptr, ignore);
  EXPECT_EQ(chatml.render_delta("Again"),
            "<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n");
  const size_t before = f.session->tokens().size();
  const std::vector<int32_t> delta = f.tokenizer->encode(chatml.render_delta("Again"), false, true);
  const ChatReply r = chatml.respond("Again", 3, nullptr, ignore);
  // Exactly the delta was fed after the history, then the reply: nothing of
  // the history was fed again.
  ASSERT_EQ(r.prompt_tokens, int64_t(delta.size()));
  ASSERT_EQ(f.session->tokens().size(), before + delta.size() + size_t(r.generation.n_decoded));
  EXPECT_TRUE(std::equal(delta.begin(), delta.end(), f.session->tokens().begin() + before));
}

TEST(ChatSession, TurnThatDoesNotFitFeedsNothing) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  ChatSession chat(*f.session, tok::ChatTemplate::by_name("chatml"), greedy(), "", {});
  const ChatReply r = chat.respond(std::string(3000, 'a'), 4, nullptr, ignore);
  EXPECT_TRUE(r.no_room);
  EXPECT_TRUE(f.session->tokens().empty());
  EXPECT_TRUE(chat.messages().empty());
}

TEST(ChatSession, InterruptStopsBeforeTheFirstToken) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  ChatSession chat(*f.session, tok::ChatTemplate::by_name("chatml"), greedy(), "", {});
  std::atomic<bool> interrupt{true};
  const ChatReply r = chat.respond("Hi", -1, &interrupt, ignore);
  EXPECT_EQ(r.generation.reason, StopReason::kInterrupted);
  EXPECT_EQ(r.generation.n_generated, 0);
  EXPECT_EQ(r.text, "");
}

TEST(ChatSession, StopStringCutsTheShownText) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  ChatSession plain(*f.session, tok::ChatTemplate::by_name("chatml"), greedy(), "", {});
  const std::string full = plain.respond("Tell me a story", 40, nullptr, ignore).text;
  const size_t at = full.find(' ', 3);
  ASSERT_NE(at, std::string::npos) << full;
  const std::string stop = full.substr(at, 3);
  ChatSession stopped(*f.session, tok::ChatTemplate::by_name("chatml"), greedy(), "", {stop});
  std::string shown;
  const ChatReply r =
      stopped.respond("Tell me a story", 40, nullptr, [&](const std::string& t) { shown += t; });
  EXPECT_EQ(r.generation.reason, StopReason::kStopString);
  EXPECT_EQ(r.stop_string, stop);
  EXPECT_EQ(shown, full.substr(0, full.find(stop)));
  EXPECT_EQ(r.text, shown);
}

}  // namespace
}  // namespace tkv::runtime
