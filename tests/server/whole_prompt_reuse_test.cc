// A prompt prefilled whole (at most whole_prompt_tokens, off the grid) is
// kept whole with its last logits (prefix_cache.h): the same prompt again
// reuses every token (cached_tokens = its length), prefills nothing and
// gives the cold prefill's bits: the same tokens and logprobs, bit for bit.
// A prompt that only starts with it reuses nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "scheduler_test_util.h"
#include "server/prefix_cache.h"
#include "server/scheduler.h"

namespace tkv::server {
namespace {

using test::Outcome;

class WholePromptReuseTest : public test::StoriesFixture<::testing::TestWithParam<const char*>> {};

SchedulerOptions options(const char* kv) {
  SchedulerOptions o;
  o.context = 256;
  o.parallel = 4;
  o.threads = 2;
  o.prefix_cache = true;  // whole_prompt_tokens: the default (256)
  EXPECT_TRUE(kv::parse_kv_shorthand(kv, o.kv.k, o.kv.v));
  o.on_warning = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  return o;
}

Job logged_job(std::vector<int32_t> prompt) {
  Job job = test::greedy_job(std::move(prompt), 8);
  job.top_logprobs = 5;
  return job;
}

void expect_same_bits(const Outcome& a, const Outcome& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.generated.size(), b.generated.size());
  for (size_t i = 0; i < a.generated.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a.generated[i].logprob, &b.generated[i].logprob, sizeof(float)), 0) << i;
    ASSERT_EQ(a.generated[i].top.size(), b.generated[i].top.size());
    for (size_t k = 0; k < a.generated[i].top.size(); ++k) {
      EXPECT_EQ(a.generated[i].top[k].token, b.generated[i].top[k].token);
      EXPECT_EQ(std::memcmp(&a.generated[i].top[k].logprob, &b.generated[i].top[k].logprob,
                            sizeof(float)),
                0);
    }
  }
}

TEST_P(WholePromptReuseTest, ARepeatedShortPromptReusesAllOfIt) {
  const std::vector<int32_t> prompt = this->prompt(19);
  Scheduler s(*m_->model, *m_->tokenizer, options(GetParam()));
  const Outcome cold = test::run_one(s, logged_job(prompt));
  ASSERT_EQ(cold.done.finish, JobFinish::kLength) << cold.done.error;
  EXPECT_EQ(cold.done.cached_tokens, 0);
  EXPECT_EQ(s.stats().cached_prefixes, 1);
  const Outcome warm = test::run_one(s, logged_job(prompt));
  EXPECT_EQ(warm.done.cached_tokens, 19);
  expect_same_bits(cold, warm);
  EXPECT_EQ(s.stats().prefix_hits, 1u);
  EXPECT_EQ(s.stats().prefix_tokens_reused, 19u);
  EXPECT_EQ(s.stats().prompt_tokens_prefilled, 19u);  // the cold run's alone
  // cache_prompt: false prefills it again, to the same bits.
  Job again = logged_job(prompt);
  again.cache_prompt = false;
  const Outcome refilled = test::run_one(s, again);
  EXPECT_EQ(refilled.done.cached_tokens, 0);
  expect_same_bits(cold, refilled);
  EXPECT_EQ(s.stats().prompt_tokens_prefilled, 38u);
}

TEST_P(WholePromptReuseTest, APromptThatOnlyStartsWithItIsPrefilledCold) {
  const std::vector<int32_t> prompt = this->prompt(19);
  std::vector<int32_t> longer = prompt;
  longer.push_back(prompt[5]);
  Scheduler s(*m_->model, *m_->tokenizer, options(GetParam()));
  test::run_one(s, logged_job(prompt));
  const Outcome warm = test::run_one(s, logged_job(longer));
  EXPECT_EQ(warm.done.cached_tokens, 0);
  Scheduler fresh(*m_->model, *m_->tokenizer, options(GetParam()));
  expect_same_bits(test::run_one(fresh, logged_job(longer)), warm);
}

TEST_P(WholePromptReuseTest, SeveralChoicesFromAReusedPrompt) {
  const std::vector<int32_t> prompt = this->prompt(30, 3);
  Job job = logged_job(prompt);
  job.sampling.temperature = 1.0f;
  job.sampling.top_k = 0;
  job.sampling.top_p = 1.0f;
  job.sampling.min_p = 0.0f;
  job.sampling.seed = 21;
  Scheduler s(*m_->model, *m_->tokenizer, options(GetParam()));
  const Outcome cold = test::run_one(s, job);  // choice 0's seed
  job.choices = 2;
  const std::shared_ptr<JobStream> stream = s.submit(job);
  std::vector<Outcome> got(2);
  for (int done = 0; done < 2;) {
    std::optional<Event> e = stream->next(std::chrono::milliseconds(100));
    if (!e) continue;
    Outcome& o = got.at(size_t(e->choice));
    if (e->kind == Event::Kind::kDone) {
      o.done = *e;
      ++done;
      continue;
    }
    for (const GeneratedToken& g : e->tokens) {
      o.tokens.push_back(g.token);
      o.generated.push_back(g);
    }
  }
  EXPECT_EQ(got[0].done.cached_tokens, 30);
  expect_same_bits(cold, got[0]);
  EXPECT_EQ(got[1].done.finish, JobFinish::kLength);
}

TEST_P(WholePromptReuseTest, WholeEntriesAreBounded) {
  // Their logits live outside the budget: at most kMaxWholeEntries, the
  // least recently used dropped first.
  Scheduler s(*m_->model, *m_->tokenizer, options(GetParam()));
  const int n = int(PrefixCache::kMaxWholeEntries) + 3;
  for (int i = 0; i < n; ++i) {
    Job job = test::greedy_job(this->prompt(12, size_t(i)), 1);
    test::run_one(s, job);
  }
  EXPECT_EQ(s.stats().cached_prefixes, int(PrefixCache::kMaxWholeEntries));
  // The newest is still there, the first one is not.
  EXPECT_EQ(
      test::run_one(s, test::greedy_job(this->prompt(12, size_t(n - 1)), 1)).done.cached_tokens,
      12);
  EXPECT_EQ(test::run_one(s, test::greedy_job(this->prompt(12, 0), 1)).done.cached_tokens, 0);
}

INSTANTIATE_TEST_SUITE_P(Codecs, WholePromptReuseTest, ::testing::Values("k4v2", "f16"));

}  // namespace
}  // namespace tkv::server
