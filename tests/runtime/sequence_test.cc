// The sequence object (runtime/sequence.h) driven in steps, as the server's
// scheduler drives it, against feed(); and the reply's rules (reply.h) in
// their order, on the real stories260K model.
#include "runtime/sequence.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/thread_pool.h"
#include "model/context.h"
#include "runtime/reply.h"
#include "runtime_fixture.h"
#include "test_util.h"

namespace tkv::runtime {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Logits whose greedy choice is `token`.
std::vector<float> peaked(int n_vocab, int32_t token) {
  std::vector<float> logits(size_t(n_vocab), 0.0f);
  logits[size_t(token)] = 10.0f;
  return logits;
}

sample::Sampler greedy() {
  sample::SamplerConfig c;
  c.temperature = 0;
  return sample::Sampler(c);
}

TEST(Sequence, APromptQueuedAndRunInLayerPartsGivesTheLogitsOfFeed) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  ModelFixture f = load_model_fixture(path, 256, "Once upon a time there was");
  f.session->feed(f.prompt);

  Sequence stepped(*f.model, *f.tokenizer, 256, kv::KvConfig{}, 1, 64);
  stepped.queue(f.prompt);
  ThreadPool pool(1);
  model::ExecutionContext ctx;
  const int n_layers = f.model->config().n_layers;
  ASSERT_GE(n_layers, 2);
  const int64_t n = int64_t(f.prompt.size());
  bool ready = false;
  for (int stop = 1; !ready; ++stop) {
    ASSERT_LE(stop, n_layers);
    const model::BatchItem item = stepped.next_item(n, stop);
    EXPECT_EQ(item.logits, stop == n_layers ? model::Logits::kLast : model::Logits::kNone);
    const model::BatchItem items[1] = {item};
    const std::vector<model::ItemStatus> status = f.model->eval_batch(ctx, items, pool);
    ASSERT_TRUE(status[0].ok()) << status[0].message;
    ready = stepped.accept(item, status[0], ctx.logits(0));
    // Mid-chunk: nothing joined the sequence yet, the layers done are kept.
    if (!ready) {
      EXPECT_EQ(stepped.chunk_layers_done(), stop);
      EXPECT_TRUE(stepped.tokens().empty());
      EXPECT_EQ(int64_t(stepped.queued().size()), n);
    }
  }
  EXPECT_EQ(stepped.chunk_layers_done(), 0);
  EXPECT_TRUE(stepped.queued().empty());
  EXPECT_EQ(stepped.tokens(), f.session->tokens());
  EXPECT_TRUE(same_bits(stepped.logits(), f.session->logits()));
}

TEST(Sequence, AForkSharesTheTokensButNotTheQueueSamplerOrReply) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  ModelFixture f = load_model_fixture(path, 256, "Once upon a time");
  f.session->feed(f.prompt);
  const int32_t next[1] = {f.prompt.back()};
  f.session->queue(next);
  f.session->set_sampler(sample::SamplerConfig{});
  f.session->start_reply({}, {});
  const std::unique_ptr<Sequence> fork = f.session->fork();
  EXPECT_EQ(fork->tokens(), f.session->tokens());
  EXPECT_TRUE(fork->queued().empty());
  EXPECT_TRUE(fork->logits().empty());
  EXPECT_EQ(f.session->queued().size(), 1u);
}

TEST(ReplyRules, TheLimitIsCheckedBeforeSampling) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const ModelFixture f = load_model_fixture(path, 0);
  ReplyRules rules(*f.tokenizer, {.max_tokens = 0, .stop_at_eog = true, .stop_tokens = {}});
  sample::Sampler sampler = greedy();
  const ReplyStep s = rules.step(sampler, peaked(f.tokenizer->n_vocab(), 7), 100, {});
  ASSERT_TRUE(s.stop.has_value());
  EXPECT_EQ(*s.stop, StopReason::kLength);
  EXPECT_EQ(s.token, -1);
  EXPECT_FALSE(s.counted);
}

TEST(ReplyRules, AStopTokenEndsTheReplyUncounted) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const ModelFixture f = load_model_fixture(path, 0);
  ReplyRules rules(*f.tokenizer, {.max_tokens = 5, .stop_at_eog = true, .stop_tokens = {7}});
  sample::Sampler sampler = greedy();
  bool looked = false;
  const ReplyStep s = rules.step(sampler, peaked(f.tokenizer->n_vocab(), 7), 100,
                                 [&](int32_t) -> std::optional<StopReason> {
                                   looked = true;
                                   return std::nullopt;
                                 });
  ASSERT_TRUE(s.stop.has_value());
  EXPECT_EQ(*s.stop, StopReason::kEndOfText);
  EXPECT_EQ(s.token, 7);
  EXPECT_FALSE(s.counted);
  EXPECT_FALSE(looked);
  EXPECT_EQ(rules.generated(), 0);
  // With stop_at_eog off the same token is an ordinary one.
  ReplyRules ignoring(*f.tokenizer, {.max_tokens = 5, .stop_at_eog = false, .stop_tokens = {7}});
  const ReplyStep t = ignoring.step(sampler, peaked(f.tokenizer->n_vocab(), 7), 100, {});
  EXPECT_FALSE(t.stop.has_value());
  EXPECT_TRUE(t.counted);
}

TEST(ReplyRules, TheCallersLookComesBeforeTheLimitAndTheContext) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const ModelFixture f = load_model_fixture(path, 0);
  const int n_vocab = f.tokenizer->n_vocab();
  sample::Sampler sampler = greedy();
  // The last token allowed, with no room left, and a stop string: the stop
  // string is the reason.
  ReplyRules rules(*f.tokenizer, {.max_tokens = 1, .stop_at_eog = true, .stop_tokens = {}});
  const ReplyStep a = rules.step(sampler, peaked(n_vocab, 9), 0, [](int32_t) {
    return std::optional<StopReason>(StopReason::kStopString);
  });
  EXPECT_EQ(a.stop, StopReason::kStopString);
  EXPECT_TRUE(a.counted);
  // Then the limit, before a full context.
  ReplyRules limited(*f.tokenizer, {.max_tokens = 1, .stop_at_eog = true, .stop_tokens = {}});
  EXPECT_EQ(limited.step(sampler, peaked(n_vocab, 9), 0, {}).stop, StopReason::kLength);
  // No limit and no room: the context is full.
  ReplyRules open(*f.tokenizer, {.max_tokens = -1, .stop_at_eog = true, .stop_tokens = {}});
  const ReplyStep c = open.step(sampler, peaked(n_vocab, 9), 0, {});
  EXPECT_EQ(c.stop, StopReason::kContextFull);
  EXPECT_EQ(c.token, 9);
  // Room left: the reply goes on.
  EXPECT_FALSE(open.step(sampler, peaked(n_vocab, 9), 1, {}).stop.has_value());
  EXPECT_EQ(open.generated(), 2);
}

}  // namespace
}  // namespace tkv::runtime
