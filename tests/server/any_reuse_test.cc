// Reuse that need not be exact (SchedulerOptions::exact_reuse false,
// `serve --prefix-reuse any`): a prompt that starts with the previous one
// reuses all of it, not only up to its last grid boundary, on a dense model
// (where the finished reply is kept too) and on a hybrid one (a checkpoint
// at the prompt's end, recurrent state included); the answer stays close to
// a cold prefill's. The rule's arithmetic first.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "model/synth.h"
#include "scheduler_test_util.h"
#include "server/prefix_index.h"
#include "server/scheduler.h"

namespace tkv::server {
namespace {

using test::greedy_job;
using test::Outcome;
using test::run_one;

TEST(ReuseRuleAny, ReusesToTheLastSharedTokenWhereverItIs) {
  const ReuseRule exact{.grid = 16, .truncatable = false};
  const ReuseRule any{.grid = 16, .truncatable = false, .exact = false};
  // A checkpoint at a prompt's end (129 tokens), the next prompt longer.
  EXPECT_EQ(exact.point(129, 129, 200), 0);  // not a grid boundary
  EXPECT_EQ(any.point(129, 129, 200), 129);
  // Held whole only: a state that cannot be cut serves no shorter prefix.
  EXPECT_EQ(any.point(129, 120, 200), 0);
  // The prompt's last token is always evaluated.
  EXPECT_EQ(any.point(129, 129, 129), 0);
  const ReuseRule any_cut{.grid = 16, .truncatable = true, .exact = false};
  EXPECT_EQ(any_cut.point(300, 130, 200), 130);
  EXPECT_EQ(any_cut.point(300, 250, 200), 199);
  const ReuseRule exact_cut{.grid = 16, .truncatable = true};
  EXPECT_EQ(exact_cut.point(300, 130, 200), 128);
}

SchedulerOptions any_options(bool exact) {
  SchedulerOptions o;
  o.context = 512;
  o.parallel = 2;
  o.prefill_chunk = 16;
  o.whole_prompt_tokens = 0;
  o.kv.page_tokens = 32;
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", o.kv.k, o.kv.v));
  o.threads = 2;
  o.exact_reuse = exact;
  o.on_warning = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  return o;
}

// The first reply token with the whole vocabulary's logprobs.
Job probe(const test::LoadedModel& m, std::vector<int32_t> ids) {
  Job job = greedy_job(std::move(ids), 1);
  job.top_logprobs = m.tokenizer->n_vocab();
  return job;
}

// Largest logprob difference over the vocabulary: close, not necessarily
// equal (the reused tail was computed in a shorter chunk, or decoded).
float max_logprob_gap(const Outcome& a, const Outcome& b) {
  EXPECT_EQ(a.generated.size(), 1u);
  EXPECT_EQ(b.generated.size(), 1u);
  if (a.generated.empty() || b.generated.empty()) return INFINITY;
  std::vector<float> pa(a.generated[0].top.size()), pb(pa.size());
  if (b.generated[0].top.size() != pa.size()) return INFINITY;
  for (size_t i = 0; i < pa.size(); ++i) {
    pa[size_t(a.generated[0].top[i].token)] = a.generated[0].top[i].logprob;
    pb[size_t(b.generated[0].top[i].token)] = b.generated[0].top[i].logprob;
  }
  float gap = 0;
  for (size_t i = 0; i < pa.size(); ++i) gap = std::max(gap, std::fabs(pa[i] - pb[i]));
  return gap;
}

// P (a length off the grid) is answered with a reply of `reply_len`
// tokens; Q = P + that reply + more text. Returns Q's outcome on a server
// of `exact` reuse and checks it against a cold prefill's.
Outcome next_turn(const test::LoadedModel& m, const std::vector<int32_t>& p,
                  const std::vector<int32_t>& more, bool exact, int64_t reply_len) {
  Scheduler s(*m.model, *m.tokenizer, any_options(exact));
  const Outcome first = run_one(s, greedy_job(p, reply_len));
  EXPECT_EQ(first.done.finish, JobFinish::kLength) << first.done.error;
  std::vector<int32_t> q = p;
  for (const GeneratedToken& t : first.generated) q.push_back(t.token);
  q.insert(q.end(), more.begin(), more.end());
  const Outcome warm = run_one(s, probe(m, q));

  SchedulerOptions cold_options = any_options(true);
  cold_options.prefix_cache = false;
  Scheduler cold_server(*m.model, *m.tokenizer, cold_options);
  const Outcome cold = run_one(cold_server, probe(m, q));
  EXPECT_LE(max_logprob_gap(warm, cold), exact ? 0.0f : 0.05f);
  return warm;
}

class AnyReuse : public test::StoriesFixture<::testing::Test> {};

// Dense: the finished sequence is kept, its last token (sampled at the
// limit) taken in, so the next turn reuses the prompt and the whole reply.
TEST_F(AnyReuse, NextTurnReusesThePromptAndTheReply) {
  const std::vector<int32_t> p = prompt(129), more = prompt(40, 300);
  const Outcome any = next_turn(*m_, p, more, false, 12);
  EXPECT_EQ(any.done.cached_tokens, int64_t(p.size()) + 12);
  const Outcome exact = next_turn(*m_, p, more, true, 12);
  EXPECT_EQ(exact.done.cached_tokens, 128);  // P's last grid boundary
}

// A reply that ends on its end-of-turn token takes it in before it is kept
// (one more step after the client was told): the next turn, which renders
// the token too, reuses the prompt, the reply and the token, and answers
// close to a cold prefill.
TEST_F(AnyReuse, AReplyEndingOnItsEndOfTurnTokenIsKeptWithIt) {
  const std::vector<int32_t> p = prompt(129), more = prompt(40, 300);
  const int32_t eos = m_->tokenizer->eos();
  ASSERT_GE(eos, 0);
  Scheduler s(*m_->model, *m_->tokenizer, any_options(false));
  Job first_job = greedy_job(p, 12);
  first_job.sampling.logit_bias = {{eos, 100.0f}};  // the reply is its end token
  const Outcome first = run_one(s, first_job);
  ASSERT_EQ(first.done.finish, JobFinish::kStop) << first.done.error;
  EXPECT_EQ(first.done.completion_tokens, 0);
  std::vector<int32_t> q = p;
  q.push_back(eos);
  q.insert(q.end(), more.begin(), more.end());
  // The job's place is free at once; the kept sequence arrives a step later.
  for (int waited = 0; s.stats().cached_prefixes == 0 && waited < 2000; ++waited)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const Outcome warm = run_one(s, probe(*m_, q));
  EXPECT_EQ(warm.done.cached_tokens, int64_t(p.size()) + 1);

  SchedulerOptions cold_options = any_options(true);
  cold_options.prefix_cache = false;
  Scheduler cold_server(*m_->model, *m_->tokenizer, cold_options);
  EXPECT_LE(max_logprob_gap(warm, run_one(cold_server, probe(*m_, q))), 0.05f);
}

// A reply that fills the context has no room for its last token: the
// sequence is kept without it, and the next turn reuses what it holds.
TEST_F(AnyReuse, AReplyThatFillsTheContextIsKeptAsItIs) {
  const std::vector<int32_t> p = prompt(500);
  Scheduler s(*m_->model, *m_->tokenizer, any_options(false));  // context 512
  const Outcome first = run_one(s, greedy_job(p, 100));
  ASSERT_EQ(first.done.finish, JobFinish::kLength) << first.done.error;
  ASSERT_EQ(first.generated.size(), 13u);  // the 13th sampled with no room to take it
  std::vector<int32_t> q = p;
  for (const GeneratedToken& t : first.generated) q.push_back(t.token);
  q.resize(q.size() - 2);  // room for the probe's reply
  const Outcome next = run_one(s, probe(*m_, q));
  EXPECT_EQ(next.done.finish, JobFinish::kLength) << next.done.error;
  EXPECT_EQ(next.done.cached_tokens, int64_t(q.size()) - 1);
}

// A turn that parts from the previous prompt inside it: the kept sequence
// is cut there (the prompt's end need not be a grid boundary).
TEST_F(AnyReuse, PromptPartingInsideTheLastOneReusesUpToThere) {
  const std::vector<int32_t> p = prompt(150);
  Scheduler s(*m_->model, *m_->tokenizer, any_options(false));
  run_one(s, greedy_job(p, 4));
  std::vector<int32_t> q(p.begin(), p.begin() + 137);
  const std::vector<int32_t> more = prompt(30, 400);
  q.insert(q.end(), more.begin(), more.end());
  EXPECT_EQ(run_one(s, probe(*m_, q)).done.cached_tokens, 137);
}

// tiny-qwen35 (three Gated DeltaNet layers, one full): the recurrent state
// is at the prompt's end in its checkpoint; the reply is not reused (a
// state cannot be cut back into it).
TEST(AnyReuseHybrid, NextTurnReusesTheWholePreviousPrompt) {
  model::SynthOptions o;
  o.type = "f32";
  const std::string path = tkv::test::temp_dir() + "/tiny-qwen35.gguf";
  model::write_synth_model(model::synth_preset("tiny-qwen35"), o, path);
  const test::LoadedModel m = test::load_model(path);
  const std::vector<int32_t> p = test::prompt_of(*m.tokenizer, test::story_text(), 129),
                             more = test::prompt_of(*m.tokenizer, test::story_text(), 40, 300);
  EXPECT_EQ(next_turn(m, p, more, false, 6).done.cached_tokens, int64_t(p.size()));
  EXPECT_EQ(next_turn(m, p, more, true, 6).done.cached_tokens, 128);

  // A hint off the grid (where a chat's generation prompt starts: the next
  // turn renders it otherwise) leaves a checkpoint there, its chunk cut.
  for (const bool exact : {false, true}) {
    Scheduler s(*m.model, *m.tokenizer, any_options(exact));
    Job first = greedy_job(p, 4);
    first.checkpoint_hints = {126};
    run_one(s, std::move(first));
    std::vector<int32_t> q(p.begin(), p.begin() + 126);
    q.insert(q.end(), more.begin(), more.end());
    EXPECT_EQ(run_one(s, probe(m, q)).done.cached_tokens, exact ? 112 : 126) << exact;
  }
}

}  // namespace
}  // namespace tkv::server
