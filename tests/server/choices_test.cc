// Several choices of one prompt (OpenAI's n) and several prompts in one
// submission (scheduler.h, Job::choices / first_choice): the prompt is
// prefilled once and forked, each choice samples with seed + its index and
// gives exactly the tokens a job of one choice with that seed gives, the
// prompt's pages are held once, and cache_prompt: false reuses nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "scheduler_test_util.h"
#include "server/scheduler.h"

namespace tkv::server {
namespace {

using test::Outcome;

class ChoicesTest : public test::StoriesFixture<::testing::Test> {};

SchedulerOptions options() {
  SchedulerOptions o;
  o.context = 512;
  o.parallel = 8;
  o.prefill_chunk = 32;
  o.kv.page_tokens = 32;
  o.threads = 2;
  o.prefix_cache = false;
  o.whole_prompt_tokens = 0;  // every prompt on the grid (where the prefix cache serves it)
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", o.kv.k, o.kv.v));
  o.on_warning = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  return o;
}

Job sampled_job(std::vector<int32_t> prompt, uint64_t seed, int64_t max_tokens) {
  Job job;
  job.prompt = std::move(prompt);
  job.sampling.temperature = 1.0f;
  job.sampling.top_k = 0;
  job.sampling.top_p = 1.0f;
  job.sampling.min_p = 0.0f;
  job.sampling.repeat_penalty = 1.0f;
  job.sampling.seed = seed;
  job.max_tokens = max_tokens;
  return job;
}

// Every choice's events, by Event::choice, until each has its kDone.
std::map<int, Outcome> collect_choices(JobStream& stream, int choices) {
  std::map<int, Outcome> out;
  int done = 0;
  for (int waited = 0; done < choices && waited < 6000;) {
    std::optional<Event> e = stream.next(std::chrono::milliseconds(100));
    if (!e) {
      ++waited;
      continue;
    }
    Outcome& o = out[e->choice];
    if (e->kind == Event::Kind::kDone) {
      EXPECT_FALSE(o.finished) << "choice " << e->choice << " ended twice";
      o.done = std::move(*e);
      o.finished = true;
      ++done;
      continue;
    }
    o.text += e->text;
    for (const GeneratedToken& g : e->tokens) o.tokens.push_back(g.token);
  }
  EXPECT_EQ(done, choices);
  EXPECT_FALSE(stream.next(std::chrono::milliseconds(0)));  // nothing after the last kDone
  return out;
}

TEST_F(ChoicesTest, EachChoiceIsTheJobAloneWithItsSeed) {
  const std::vector<int32_t> prompt = this->prompt(70);
  constexpr uint64_t kSeed = 1234;
  constexpr int kChoices = 4;
  std::vector<Outcome> alone;
  {
    Scheduler s(*m_->model, *m_->tokenizer, options());
    for (int c = 0; c < kChoices; ++c) {
      alone.push_back(test::run_one(s, sampled_job(prompt, kSeed + uint64_t(c), 24)));
      ASSERT_EQ(alone.back().done.finish, JobFinish::kLength) << alone.back().done.error;
    }
  }
  // The seeds give different replies (else the test below proves little).
  EXPECT_NE(alone[0].tokens, alone[1].tokens);
  Scheduler s(*m_->model, *m_->tokenizer, options());
  Job job = sampled_job(prompt, kSeed, 24);
  job.choices = kChoices;
  const std::map<int, Outcome> got = collect_choices(*s.submit(job), kChoices);
  ASSERT_EQ(got.size(), size_t(kChoices));
  for (int c = 0; c < kChoices; ++c) {
    SCOPED_TRACE(c);
    const Outcome& o = got.at(c);
    EXPECT_EQ(o.done.finish, JobFinish::kLength) << o.done.error;
    EXPECT_EQ(o.tokens, alone[size_t(c)].tokens);
    EXPECT_EQ(o.text, alone[size_t(c)].text);
    EXPECT_EQ(o.done.prompt_tokens, int64_t(prompt.size()));
    EXPECT_EQ(o.done.completion_tokens, 24);
  }
  // The prompt counted once among the finished jobs' figures, and run
  // through the model once.
  EXPECT_EQ(s.stats().prompt_tokens, prompt.size());
  EXPECT_EQ(s.stats().prompt_tokens_prefilled, prompt.size());
  EXPECT_EQ(s.stats().completion_tokens, uint64_t(kChoices * 24));
}

TEST_F(ChoicesTest, SeveralPromptsNumberTheirChoicesInOrder) {
  const std::vector<int32_t> a = this->prompt(20), b = this->prompt(45, 9);
  constexpr uint64_t kSeed = 77;
  Scheduler s(*m_->model, *m_->tokenizer, options());
  std::vector<Job> jobs = {sampled_job(a, kSeed, 12), sampled_job(b, kSeed + 2, 12)};
  for (int i = 0; i < 2; ++i) {
    jobs[size_t(i)].choices = 2;
    jobs[size_t(i)].first_choice = 2 * i;
  }
  const std::map<int, Outcome> got = collect_choices(*s.submit(jobs), 4);
  ASSERT_EQ(got.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    const Outcome alone = test::run_one(s, sampled_job(k < 2 ? a : b, kSeed + uint64_t(k), 12));
    EXPECT_EQ(got.at(k).tokens, alone.tokens);
    EXPECT_EQ(got.at(k).done.prompt_tokens, int64_t(k < 2 ? a.size() : b.size()));
  }
}

TEST_F(ChoicesTest, ThePromptsPagesAreHeldOnce) {
  // A 400-token prompt (12 full pages of 32) and 4 short replies: the pool
  // holds the prompt's pages once, shared by the four sequences. Without
  // sinks and residual ring every token is in a page.
  const std::vector<int32_t> prompt = this->prompt(400);
  const auto peak_while_decoding = [&](int choices) {
    SchedulerOptions o = options();
    o.kv.sinks = 0;
    o.kv.residual = 0;
    std::mutex mu;
    SchedulerStats peak;
    Scheduler* self = nullptr;
    o.on_step = [&](const StepInfo& step) {
      if (step.decode_tokens < choices || !self) return;
      const SchedulerStats now = self->stats();
      const std::lock_guard<std::mutex> lock(mu);
      peak.kv_bytes_in_use = std::max(peak.kv_bytes_in_use, now.kv_bytes_in_use);
      peak.kv_shared_bytes = std::max(peak.kv_shared_bytes, now.kv_shared_bytes);
    };
    Scheduler s(*m_->model, *m_->tokenizer, o);
    self = &s;
    Job job = sampled_job(prompt, 5, 8);
    job.choices = choices;
    collect_choices(*s.submit(job), choices);
    const std::lock_guard<std::mutex> lock(mu);
    return peak;
  };
  const SchedulerStats one = peak_while_decoding(1), four = peak_while_decoding(4);
  ASSERT_GT(one.kv_bytes_in_use, 0u);
  EXPECT_EQ(one.kv_shared_bytes, 0u);
  // The shared bytes are the prompt's full pages (12 of 13 pages).
  EXPECT_GE(four.kv_shared_bytes, one.kv_bytes_in_use * 3 / 4);
  // Four sequences in well under twice one: each adds its sinks, ring and
  // last page only.
  EXPECT_LT(four.kv_bytes_in_use, one.kv_bytes_in_use * 2);
}

TEST_F(ChoicesTest, CachePromptFalseReusesNothing) {
  SchedulerOptions o = options();
  o.prefix_cache = true;
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const std::vector<int32_t> prompt = this->prompt(200);
  test::run_one(s, sampled_job(prompt, 1, 2));
  Job cold = sampled_job(prompt, 1, 2);
  cold.cache_prompt = false;
  const Outcome a = test::run_one(s, cold);
  EXPECT_EQ(a.done.cached_tokens, 0);
  const Outcome b = test::run_one(s, sampled_job(prompt, 1, 2));
  EXPECT_GT(b.done.cached_tokens, 0);
  EXPECT_EQ(a.tokens, b.tokens);  // a reuse gives the cold prefill's bits
}

TEST_F(ChoicesTest, AFailedAdmissionEndsEveryChoice) {
  SchedulerOptions o = options();
  o.budget_bytes = 64 * 1024;  // cannot hold the prompt
  Scheduler s(*m_->model, *m_->tokenizer, o);
  Job job = sampled_job(this->prompt(400), 1, 4);
  job.choices = 3;
  const std::map<int, Outcome> got = collect_choices(*s.submit(job), 3);
  ASSERT_EQ(got.size(), 3u);
  for (const auto& [c, o] : got) {
    EXPECT_EQ(o.done.finish, JobFinish::kError) << c;
    EXPECT_TRUE(o.done.budget_error) << c;
  }
}

}  // namespace
}  // namespace tkv::server
