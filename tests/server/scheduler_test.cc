// The continuous-batching scheduler (server/scheduler.h) on the real
// stories260K and tkv-test-23M models: batched greedy jobs equal each job
// alone and the single-session generation loop, logprobs, stop strings,
// cancellation, the bounded queue, the KV budget and drain.
#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/fault_points.h"
#include "runtime/generation.h"
#include "scheduler_test_util.h"

namespace tkv::server {
namespace {

using test::collect;
using test::greedy_job;
using test::HoldOnce;
using test::LoadedModel;
using test::Outcome;
using test::prompt_of;
using test::run_beside_a_decoding_stream;
using test::run_one;
using test::start_decoding_stream;
using test::StepGate;

SchedulerOptions small_options(const std::string& kv) {
  SchedulerOptions o;
  o.context = 512;
  o.parallel = 8;
  o.prefill_chunk = 32;
  o.prefill_tokens_per_step = 32;
  o.whole_prompt_tokens = 0;  // every prompt on the grid unless a test says otherwise
  o.kv.page_tokens = 32;
  o.threads = 2;
  o.prefix_cache = false;
  EXPECT_TRUE(kv::parse_kv_shorthand(kv, o.kv.k, o.kv.v)) << kv;
  o.on_warning = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  return o;
}

// The same job through one Sequence: prefill in chunks of the
// scheduler's grid (a prompt of at most whole_prompt_tokens: one chunk),
// then runtime::generate_text (what `turbokv run` does).
Outcome single_session(const LoadedModel& m, const SchedulerOptions& o, const Job& job) {
  const int64_t n = int64_t(job.prompt.size());
  const int ubatch = n <= o.whole_prompt_tokens ? int(n) : o.prefill_chunk;
  runtime::Sequence session(*m.model, *m.tokenizer, o.context, o.kv, o.threads, ubatch);
  session.feed(job.prompt);
  session.set_sampler(job.sampling);
  for (int32_t id : job.prompt) session.sampler().accept(id);
  runtime::GenerateOptions g;
  g.max_tokens = job.max_tokens;
  Outcome out;
  runtime::generate(session, g, [&](int32_t id) {
    out.tokens.push_back(id);
    return true;
  });
  tok::StreamDecoder text_decoder(*m.tokenizer, tok::StreamDecoder::Start::kTextStart);
  for (int32_t id : job.prompt) text_decoder.push(id);
  for (int32_t id : out.tokens) out.text += text_decoder.push(id);
  out.text += text_decoder.flush();
  return out;
}

class SchedulerTest : public test::StoriesFixture<::testing::Test> {};

// Eight greedy jobs of different prompt lengths (one chunk, several, a
// partial last chunk) run at once give exactly the tokens each gives alone,
// which are the single-session loop's; with one scheduler per codec, all
// running at the same time on the one model.
void expect_batch_equals_alone(const LoadedModel& m, const std::vector<std::string>& kvs,
                               const std::string& text, const std::vector<size_t>& lengths,
                               int64_t max_tokens, int whole_prompt_tokens = 0) {
  const auto options = [&](const std::string& kv) {
    SchedulerOptions o = small_options(kv);
    o.whole_prompt_tokens = whole_prompt_tokens;
    return o;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < lengths.size(); ++i)
    jobs.push_back(greedy_job(prompt_of(*m.tokenizer, text, lengths[i], 7 * i), max_tokens));
  std::vector<std::vector<Outcome>> alone(kvs.size());
  for (size_t k = 0; k < kvs.size(); ++k) {
    const SchedulerOptions o = options(kvs[k]);
    for (const Job& job : jobs) {
      Scheduler s(*m.model, *m.tokenizer, o);
      alone[k].push_back(run_one(s, job));
      ASSERT_TRUE(alone[k].back().finished);
      ASSERT_EQ(alone[k].back().done.finish, JobFinish::kLength) << alone[k].back().done.error;
      const Outcome reference = single_session(m, o, job);
      EXPECT_EQ(alone[k].back().tokens, reference.tokens)
          << kvs[k] << ", prompt of " << job.prompt.size();
      EXPECT_EQ(alone[k].back().text, reference.text) << kvs[k];
    }
  }
  std::vector<std::unique_ptr<Scheduler>> schedulers;
  std::vector<std::vector<std::shared_ptr<JobStream>>> streams(kvs.size());
  for (const std::string& kv : kvs)
    schedulers.push_back(std::make_unique<Scheduler>(*m.model, *m.tokenizer, options(kv)));
  for (size_t k = 0; k < kvs.size(); ++k)
    for (const Job& job : jobs) streams[k].push_back(schedulers[k]->submit(job));
  for (size_t k = 0; k < kvs.size(); ++k)
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Outcome together = collect(*streams[k][i]);
      EXPECT_EQ(together.tokens, alone[k][i].tokens)
          << kvs[k] << ", job " << i << ", " << lengths[i] << " tokens";
      EXPECT_EQ(together.text, alone[k][i].text) << kvs[k] << ", job " << i;
      EXPECT_EQ(together.done.prompt_tokens, int64_t(lengths[i]));
      EXPECT_EQ(together.done.completion_tokens, max_tokens);
      EXPECT_EQ(together.done.cached_tokens, 0);
    }
}

TEST_F(SchedulerTest, EightConcurrentGreedyJobsEqualEachAloneF16AndK4V2) {
  expect_batch_equals_alone(*m_, {"f16", "k4v2"}, test::story_text(),
                            {5, 17, 32, 33, 70, 131, 200, 96}, 40);
}

// Prompts of up to 100 tokens as one chunk each (past the 16-token decode
// kernels: the prefill GEMM), longer ones on the 32-token grid, mixed in
// one batch: each job's tokens are those it gives alone, which are the
// single session's with the whole prompt in one chunk.
TEST_F(SchedulerTest, ShortPromptsAsOneChunkEqualEachAlone) {
  expect_batch_equals_alone(*m_, {"f16", "k4v2"}, test::story_text(),
                            {5, 17, 40, 100, 101, 131, 200, 96}, 30, 100);
}

TEST(SchedulerModel23M, EightConcurrentGreedyJobsEqualEachAlone) {
  TKV_REQUIRE_FIXTURE(path, "tkv-test-23M.gguf");
  const LoadedModel m = test::load_model(path);
  expect_batch_equals_alone(m, {"f16", "k4v2"}, test::heldout_text(),
                            {9, 40, 64, 100, 150, 33, 250, 70}, 12);
}

// A long prompt is prefilled a chunk per step next to the decoding
// streams: they keep getting tokens while it prefills.
TEST_F(SchedulerTest, LongPromptDoesNotFreezeDecodingStreams) {
  SchedulerOptions o = small_options("f16");
  Scheduler s(*m_->model, *m_->tokenizer, o);
  std::mutex mu;
  std::vector<char> log;  // 'a': a token of the decoding stream; 'b': the long job's first
  std::shared_ptr<JobStream> a = start_decoding_stream(s, *m_->tokenizer, 300);
  std::thread reader([&] {
    while (true) {
      std::optional<Event> e = a->next(std::chrono::milliseconds(100));
      if (!e) continue;
      if (e->kind == Event::Kind::kDone) return;
      const std::lock_guard<std::mutex> lock(mu);
      log.insert(log.end(), e->tokens.size(), 'a');
    }
  });
  // 480 tokens: 15 chunks of 32, one per step.
  std::shared_ptr<JobStream> b =
      s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 480, 5), 4));
  size_t a_before = 0;
  {
    const std::lock_guard<std::mutex> lock(mu);
    a_before = log.size();
  }
  std::optional<Event> b_first;
  while (!b_first) b_first = b->next(std::chrono::milliseconds(100));
  size_t a_during = 0;
  {
    const std::lock_guard<std::mutex> lock(mu);
    a_during = log.size() - a_before;
  }
  collect(*b);
  a->cancel();
  reader.join();
  // One decode token per step of the 15-chunk prefill, give or take the
  // reader's wakeups; a frozen stream would have none.
  EXPECT_GE(a_during, 8u);
}

// The steps a scheduler ran, as its on_step hook saw them.
struct StepLog {
  std::mutex mu;
  std::vector<StepInfo> steps;
  void attach(SchedulerOptions& o) {
    o.on_step = [this](const StepInfo& s) {
      const std::lock_guard<std::mutex> lock(mu);
      steps.push_back(s);
    };
  }
  std::vector<StepInfo> snapshot() {
    const std::lock_guard<std::mutex> lock(mu);
    return steps;
  }
};

// A job run alone, then beside a decoding stream, each on a fresh
// scheduler of the same options: both outcomes and the steps of each run
// (`log` attached to `o`).
struct AloneAndBeside {
  Outcome alone, beside;
  std::vector<StepInfo> alone_steps, beside_steps;
};
AloneAndBeside run_alone_and_beside_a_stream(const LoadedModel& m, const SchedulerOptions& o,
                                             StepLog& log, const Job& job) {
  AloneAndBeside r;
  {
    Scheduler s(*m.model, *m.tokenizer, o);
    r.alone = run_one(s, job);
  }
  r.alone_steps = log.snapshot();
  log.steps.clear();
  {
    Scheduler s(*m.model, *m.tokenizer, o);
    r.beside = run_beside_a_decoding_stream(s, *m.tokenizer, job);
  }
  r.beside_steps = log.snapshot();
  return r;
}

// While a stream decodes, two long prompts arriving together get one whole
// chunk a step with `prefill_tokens_per_step` 0, one after the other; with
// `prefill_tokens_per_step` set, at most that many tokens' work through
// every layer a step, the chunks over it in layer parts, and with two
// chunks' worth both prompts share a step. Returns the most prompts a step
// had.
int prefill_cap_while_decoding(const LoadedModel& m, int per_step) {
  SchedulerOptions o = small_options("f16");
  o.prefill_tokens_per_step = per_step;
  StepLog log;
  log.attach(o);
  Scheduler s(*m.model, *m.tokenizer, o);
  std::shared_ptr<JobStream> a = start_decoding_stream(s, *m.tokenizer, 400);
  std::shared_ptr<JobStream> b =
      s.submit(greedy_job(prompt_of(*m.tokenizer, test::story_text(), 200, 3), 2));
  std::shared_ptr<JobStream> c =
      s.submit(greedy_job(prompt_of(*m.tokenizer, test::story_text(), 200, 9), 2));
  EXPECT_EQ(collect(*b).done.finish, JobFinish::kLength);
  EXPECT_EQ(collect(*c).done.finish, JobFinish::kLength);
  a->cancel();
  collect(*a);
  const double budget =
      double(per_step == 0 ? o.prefill_chunk : per_step) * double(m.model->config().n_layers);
  int most_chunks = 0, split = 0;
  for (const StepInfo& step : log.snapshot()) {
    if (step.decode_tokens == 0) continue;
    EXPECT_LE(step.prefill_work, budget + 1e-9);
    most_chunks = std::max(most_chunks, step.prefill_chunks);
    split += step.split_chunks;
  }
  // With 0 chunks run whole; by work, the 32-token chunks at depth cost
  // more than 32 tokens' work at depth 0 and run in parts.
  EXPECT_EQ(split > 0, per_step > 0);
  return most_chunks;
}

TEST_F(SchedulerTest, WithPrefillStepZeroAStepTakesOneWholePrefillChunkWhileOthersDecode) {
  EXPECT_EQ(prefill_cap_while_decoding(*m_, 0), 1);
}

TEST_F(SchedulerTest, APrefillBudgetOfTwoChunksLetsTwoPromptsShareAStep) {
  EXPECT_EQ(prefill_cap_while_decoding(*m_, 64), 2);
}

// While a stream decodes, a chunk over the step's budget runs in layer
// parts (here one layer a step: two never fit), a step's work within the
// budget unless its one layer alone is over it; the job's greedy tokens
// are those it gives alone, prefilled in whole chunks.
void expect_layer_parts_while_decoding(const LoadedModel& m, int per_step) {
  SchedulerOptions o = small_options("f16");  // a grid of 32 tokens
  o.prefill_tokens_per_step = per_step;
  const int64_t n_layers = m.model->config().n_layers;
  ASSERT_GE(n_layers, 2);
  ASSERT_LT(per_step * n_layers, 2 * o.prefill_chunk);
  StepLog log;
  log.attach(o);
  const AloneAndBeside run = run_alone_and_beside_a_stream(
      m, o, log, greedy_job(prompt_of(*m.tokenizer, test::story_text(), 200, 3), 12));
  for (const StepInfo& step : run.alone_steps) EXPECT_EQ(step.split_chunks, 0);  // nothing decoded
  ASSERT_TRUE(run.beside.finished);
  EXPECT_EQ(run.beside.tokens, run.alone.tokens);
  int parts = 0, over_budget = 0;
  for (const StepInfo& step : run.beside_steps) {
    if (step.decode_tokens == 0 || step.prefill_chunks == 0) continue;
    EXPECT_EQ(step.prefill_chunks, 1);
    if (step.prefill_tokens != o.prefill_chunk) continue;  // the last, 8-token chunk
    EXPECT_EQ(step.split_chunks, 1);
    // One layer: within the budget, or over it only as the step's one
    // layer (a step always moves the prefill on).
    EXPECT_EQ(step.prefill_token_layers, o.prefill_chunk);
    over_budget += step.prefill_work > double(per_step * n_layers) + 1e-9;
    ++parts;
  }
  EXPECT_EQ(parts, 6 * n_layers);  // six full chunks, a layer a step
  // A budget under one 32-token layer: every part is over it.
  if (per_step * n_layers < o.prefill_chunk) {
    EXPECT_EQ(over_budget, parts);
  }
}

TEST_F(SchedulerTest, AChunkOverTheBudgetRunsInLayerPartsWhileOthersDecode) {
  expect_layer_parts_while_decoding(*m_, 8);
}

TEST_F(SchedulerTest, AChunkOverABudgetUnderOneLayerStillRunsALayerAStep) {
  expect_layer_parts_while_decoding(*m_, 1);
}

// Under a budget below one layer the step's first chunk takes its one layer
// over the budget; a second prompt admitting beside it waits for a later
// step (it gets no layers, not a range ending before it starts), and both
// prompts finish.
TEST_F(SchedulerTest, UnderABudgetBelowOneLayerASecondPromptWaitsItsTurn) {
  SchedulerOptions o = small_options("f16");
  o.prefill_tokens_per_step = 1;
  StepLog log;
  log.attach(o);
  Scheduler s(*m_->model, *m_->tokenizer, o);
  std::shared_ptr<JobStream> a = start_decoding_stream(s, *m_->tokenizer, 400);
  std::shared_ptr<JobStream> b =
      s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 100, 3), 2));
  std::shared_ptr<JobStream> c =
      s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 100, 9), 2));
  for (JobStream* job : {b.get(), c.get()}) {
    const Outcome r = collect(*job);
    EXPECT_EQ(r.done.finish, JobFinish::kLength) << r.done.error;
    EXPECT_TRUE(r.done.error.empty()) << r.done.error;
  }
  a->cancel();
  collect(*a);
  for (const StepInfo& step : log.snapshot()) {
    if (step.decode_tokens > 0) {
      EXPECT_LE(step.prefill_chunks, 1);
    }
  }
}

// A chunk over the budget (by work) runs in parts of equal size: with a
// budget just under its layers but one, not all its layers but one and
// then one, but half and half (sizes differing by one layer at most), and
// the job's greedy tokens stay those it gives alone.
TEST_F(SchedulerTest, AChunkOverTheBudgetRunsInPartsOfEqualSize) {
  SchedulerOptions o = small_options("f16");  // a grid of 32 tokens
  const int n_layers = m_->model->config().n_layers;
  ASSERT_GE(n_layers, 3);
  // All the layers but one of a chunk at depth 0, and half of one more.
  o.prefill_tokens_per_step = o.prefill_chunk * (2 * n_layers - 1) / (2 * n_layers);
  ASSERT_LT(o.prefill_tokens_per_step * n_layers, o.prefill_chunk * n_layers);
  StepLog log;
  log.attach(o);
  const AloneAndBeside run = run_alone_and_beside_a_stream(
      *m_, o, log, greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 200, 3), 12));
  ASSERT_TRUE(run.beside.finished);
  EXPECT_EQ(run.beside.tokens, run.alone.tokens);
  // Each full chunk's parts, in layers, in the order they ran.
  std::vector<std::vector<int64_t>> chunks;
  int64_t layers_done = 0;
  for (const StepInfo& step : run.beside_steps) {
    if (step.decode_tokens == 0 || step.prefill_tokens != o.prefill_chunk) continue;
    if (layers_done == 0) chunks.emplace_back();
    const int64_t layers = step.prefill_token_layers / o.prefill_chunk;
    chunks.back().push_back(layers);
    layers_done = (layers_done + layers) % n_layers;
  }
  ASSERT_GE(chunks.size(), 4u);
  for (const std::vector<int64_t>& parts : chunks) {
    ASSERT_GE(parts.size(), 2u);  // none fits the budget whole
    const auto [least, most] = std::minmax_element(parts.begin(), parts.end());
    EXPECT_LE(*most - *least, 1) << "parts of " << parts.size();
  }
}

// With nothing decoding, every admitting prompt's next chunk is in the
// step, whatever the per-step cap.
TEST_F(SchedulerTest, WithNothingDecodingEveryAdmittingPromptGetsAChunkAStep) {
  SchedulerOptions o = small_options("f16");
  StepLog log;
  log.attach(o);
  Scheduler s(*m_->model, *m_->tokenizer, o);
  std::vector<std::shared_ptr<JobStream>> jobs;
  for (size_t i = 0; i < 3; ++i)
    jobs.push_back(s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 300, i), 1)));
  for (auto& j : jobs) EXPECT_EQ(collect(*j).done.finish, JobFinish::kLength);
  int most_chunks = 0;
  for (const StepInfo& step : log.snapshot())
    if (step.decode_tokens == 0) most_chunks = std::max(most_chunks, step.prefill_chunks);
  EXPECT_EQ(most_chunks, 3);
}

// A short prompt (whole_prompt_tokens) is one chunk: alone, one step
// prefills it whole; while another job decodes, that chunk (over the grid
// chunk's work of the default budget) runs in layer parts, each step's
// work within one grid chunk's through every layer (one layer at least),
// and the job's greedy tokens are those it gives alone.
TEST_F(SchedulerTest, AShortPromptIsOneChunkInLayerPartsWhileOthersDecode) {
  SchedulerOptions o = small_options("f16");  // a grid of 32 tokens
  o.prefill_tokens_per_step = 0;
  o.whole_prompt_tokens = 100;
  const int n_layers = m_->model->config().n_layers;
  StepLog log;
  log.attach(o);
  const AloneAndBeside run = run_alone_and_beside_a_stream(
      *m_, o, log, greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 90, 3), 12));
  ASSERT_TRUE(run.alone.finished);
  ASSERT_FALSE(run.alone_steps.empty());
  EXPECT_EQ(run.alone_steps.front().prefill_tokens, 90);  // the whole prompt, one step
  EXPECT_EQ(run.alone_steps.front().split_chunks, 0);
  ASSERT_TRUE(run.beside.finished);
  EXPECT_EQ(run.beside.tokens, run.alone.tokens);
  int64_t token_layers = 0;
  int split = 0;
  for (const StepInfo& step : run.beside_steps) {
    if (step.decode_tokens == 0 || step.prefill_chunks == 0) continue;
    EXPECT_EQ(step.prefill_tokens, 90);
    EXPECT_LE(step.prefill_token_layers,
              std::max<int64_t>(int64_t(o.prefill_chunk) * n_layers, 90));
    token_layers += step.prefill_token_layers;
    split += step.split_chunks;
  }
  EXPECT_EQ(token_layers, 90 * n_layers);  // the one chunk, every layer once
  EXPECT_GT(split, 0);
}

// With none decoding, short prompts' whole chunks share a step only while
// its prefill rows stay within kWholePromptRowsPerStep; all finish.
TEST_F(SchedulerTest, ABurstOfShortPromptsSharesStepsWithinTheRowCap) {
  SchedulerOptions o = small_options("f16");
  o.whole_prompt_tokens = 300;
  StepLog log;
  log.attach(o);
  Scheduler s(*m_->model, *m_->tokenizer, o);
  std::vector<std::shared_ptr<JobStream>> jobs;
  for (size_t i = 0; i < 8; ++i)  // 8 x 300 rows: more than the cap
    jobs.push_back(s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 300, i), 2)));
  for (auto& j : jobs) EXPECT_EQ(collect(*j).done.finish, JobFinish::kLength);
  int most_chunks = 0;
  for (const StepInfo& step : log.snapshot()) {
    if (step.decode_tokens > 0) continue;
    EXPECT_LE(step.prefill_tokens, kWholePromptRowsPerStep);
    most_chunks = std::max(most_chunks, step.prefill_chunks);
  }
  EXPECT_GE(most_chunks, 2);
}

// A running job R holds most of the budget (its estimate: the whole
// 512-token context). Queued behind it: B, whose 270 planned tokens do not
// fit next to R, then small jobs that do. With `max_overtakes` = N, the
// first N small ones start at once next to R, the rest wait behind B until
// it fits (R cancelled); every job finishes. Returns the sequences of the
// first step after they were all queued.
int running_after_queueing(const LoadedModel& m, int max_overtakes, int small_jobs) {
  SchedulerOptions o = small_options("f16");
  // stories260K f16: 640 bytes a token, 20 KiB a 32-token page. R plans
  // 16 pages, B 9, each small job 1: R and B do not fit, R and 4 small do.
  o.budget_bytes = 24 * 20 * 1024;
  o.max_overtakes = max_overtakes;
  StepGate gate;
  gate.attach(o);
  Scheduler s(*m.model, *m.tokenizer, o);
  gate.close();
  std::shared_ptr<JobStream> r =
      s.submit(greedy_job(prompt_of(*m.tokenizer, test::story_text(), 10), -1));
  gate.wait_held();  // R admitted, its first step waiting
  std::shared_ptr<JobStream> big =
      s.submit(greedy_job(prompt_of(*m.tokenizer, test::story_text(), 20, 3), 250));
  std::vector<std::shared_ptr<JobStream>> small;
  for (int i = 0; i < small_jobs; ++i)
    small.push_back(
        s.submit(greedy_job(prompt_of(*m.tokenizer, test::story_text(), 10, 5 + size_t(i)), 10)));
  const StepInfo step = gate.step_and_record();
  r->cancel();
  gate.open();
  EXPECT_EQ(collect(*big).done.finish, JobFinish::kLength);
  for (auto& j : small) EXPECT_EQ(collect(*j).done.finish, JobFinish::kLength);
  EXPECT_EQ(collect(*r).done.finish, JobFinish::kCancelled);
  return step.decode_tokens + step.prefill_chunks;
}

TEST_F(SchedulerTest, SmallJobsGoAheadOfOneThatDoesNotFitTheBudgetYet) {
  EXPECT_EQ(running_after_queueing(*m_, 8, 3), 4);  // R and the three small ones
}

TEST_F(SchedulerTest, AJobPassedMaxOvertakesTimesHoldsTheRestBack) {
  EXPECT_EQ(running_after_queueing(*m_, 2, 4), 3);  // R and two small ones
}

TEST_F(SchedulerTest, WithNoOvertakesAdmissionIsFirstComeFirstServed) {
  EXPECT_EQ(running_after_queueing(*m_, 0, 2), 1);  // R alone
}

TEST_F(SchedulerTest, LogprobsAreTheModelsLogSoftmax) {
  SchedulerOptions o = small_options("f16");
  Scheduler s(*m_->model, *m_->tokenizer, o);
  Job job = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 20), 10);
  job.top_logprobs = 3;
  const Outcome out = run_one(s, job);
  ASSERT_EQ(out.generated.size(), 10u);
  for (const GeneratedToken& g : out.generated) {
    ASSERT_EQ(g.top.size(), 3u);
    // Greedy picks the most likely token.
    EXPECT_EQ(g.top[0].token, g.token);
    EXPECT_FLOAT_EQ(g.top[0].logprob, g.logprob);
    EXPECT_LE(g.logprob, 0.0f);
    EXPECT_GE(g.top[0].logprob, g.top[1].logprob);
    EXPECT_GE(g.top[1].logprob, g.top[2].logprob);
    double mass = 0;
    for (const TopToken& t : g.top) mass += std::exp(double(t.logprob));
    EXPECT_LE(mass, 1.0 + 1e-6);
  }
  // Without the request, no logprobs.
  job.top_logprobs = -1;
  const Outcome plain = run_one(s, job);
  EXPECT_EQ(plain.tokens, out.tokens);
  for (const GeneratedToken& g : plain.generated) EXPECT_TRUE(g.top.empty());
}

TEST_F(SchedulerTest, StopStringEndsTheReplyAndIsNotShown) {
  Scheduler s(*m_->model, *m_->tokenizer, small_options("f16"));
  const Job job = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 12), 60);
  const Outcome full = run_one(s, job);
  ASSERT_GT(full.text.size(), 40u);
  Job stopped = job;
  const std::string stop = full.text.substr(20, 6);
  stopped.stops = {stop};
  const Outcome out = run_one(s, stopped);
  EXPECT_EQ(out.done.finish, JobFinish::kStop);
  EXPECT_EQ(out.done.stop_string, stop);
  EXPECT_EQ(out.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_LT(out.done.completion_tokens, full.done.completion_tokens);
}

TEST_F(SchedulerTest, CancelledJobEndsAndFreesItsPages) {
  SchedulerOptions o = small_options("f16");
  Scheduler s(*m_->model, *m_->tokenizer, o);
  std::shared_ptr<JobStream> stream =
      s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 40), 400));
  test::wait_first_event(*stream);
  stream->cancel();
  const Outcome rest = collect(*stream);
  EXPECT_EQ(rest.done.finish, JobFinish::kCancelled);
  EXPECT_LT(rest.done.completion_tokens, 400);
  // Freed at the step after the cancel (the figures follow the step).
  SchedulerStats st = s.stats();
  for (int i = 0; i < 1000 && (st.kv_bytes_in_use != 0 || st.active != 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    st = s.stats();
  }
  EXPECT_EQ(st.active, 0);
  EXPECT_EQ(st.kv_bytes_in_use, 0u);
}

TEST_F(SchedulerTest, FullQueueIsRefusedWithQueueFull) {
  SchedulerOptions o = small_options("f16");
  o.parallel = 1;
  o.queue_capacity = 1;
  Scheduler s(*m_->model, *m_->tokenizer, o);
  // A job that runs until cancelled (stop tokens cannot end it: nothing but
  // max_tokens, which the context caps), so the worker is busy with it.
  Job running = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 8), -1);
  std::shared_ptr<JobStream> a = s.submit(running);
  while (s.stats().active == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::shared_ptr<JobStream> b = s.submit(running);  // waits in the queue
  EXPECT_THROW(s.submit(running), QueueFull);
  b->cancel();
  a->cancel();
  EXPECT_EQ(collect(*a).done.finish, JobFinish::kCancelled);
  EXPECT_EQ(collect(*b).done.finish, JobFinish::kCancelled);
}

// Jobs that arrive while places in the running batch are free are about
// to start, not waiting beyond `parallel`: with 3 places and a queue of 1,
// one job running (the worker held in its step), three more are accepted
// (two places, one in the queue) and a fifth is refused.
TEST_F(SchedulerTest, FreePlacesInTheBatchDoNotCountAgainstTheQueue) {
  SchedulerOptions o = small_options("f16");
  o.parallel = 3;
  o.queue_capacity = 1;
  StepGate gate;
  gate.attach(o);
  Scheduler s(*m_->model, *m_->tokenizer, o);
  gate.close();
  const Job job = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 8), 4);
  std::vector<std::shared_ptr<JobStream>> accepted = {s.submit(job)};
  gate.wait_held();  // the first job admitted, its step waiting
  for (int i = 0; i < 3; ++i) accepted.push_back(s.submit(job));
  EXPECT_THROW(s.submit(job), QueueFull);
  gate.open();
  for (auto& a : accepted) EXPECT_EQ(collect(*a).done.finish, JobFinish::kLength);
}

// A job the worker is starting (off the queue, not yet running) still
// holds its place: with one place and a queue of 1, the worker held in the
// first job's admission, a second job is queued and a third refused.
TEST_F(SchedulerTest, AJobBeingAdmittedStillHoldsItsPlace) {
  SchedulerOptions o = small_options("f16");
  o.parallel = 1;
  o.queue_capacity = 1;
  HoldOnce admitting;
  o.on_admit = admitting.hook();
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const Job job = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 8), 4);
  std::vector<std::shared_ptr<JobStream>> accepted = {s.submit(job)};
  admitting.wait_held();
  EXPECT_EQ(s.stats().queued, 0);
  accepted.push_back(s.submit(job));
  EXPECT_THROW(s.submit(job), QueueFull);
  admitting.release();
  for (auto& a : accepted) EXPECT_EQ(collect(*a).done.finish, JobFinish::kLength);
}

TEST_F(SchedulerTest, AFinishedJobsPlaceIsFreeWhenItsClientHearsItEnded) {
  SchedulerOptions o = small_options("f16");
  o.parallel = 1;
  o.queue_capacity = 1;
  // The worker is held just after the first job's last event, before its
  // step is over: what a client sending its next request at once meets.
  HoldOnce finished;
  o.on_finish = finished.hook();
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const Job job = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 8), 4);
  const std::shared_ptr<JobStream> first = s.submit(job);
  finished.wait_held();
  EXPECT_EQ(collect(*first).done.finish, JobFinish::kLength);
  EXPECT_EQ(s.stats().active, 0);
  // One to take the free place, one to wait in the queue; a third is over.
  std::vector<std::shared_ptr<JobStream>> accepted;
  int refused = 0;
  for (int i = 0; i < 3; ++i) {
    try {
      accepted.push_back(s.submit(job));
    } catch (const QueueFull&) {
      ++refused;
    }
  }
  finished.release();
  EXPECT_EQ(accepted.size(), 2u);
  EXPECT_EQ(refused, 1);
  for (auto& a : accepted) EXPECT_EQ(collect(*a).done.finish, JobFinish::kLength);
}

TEST_F(SchedulerTest, BadJobsAreRefusedAtSubmit) {
  Scheduler s(*m_->model, *m_->tokenizer, small_options("f16"));
  EXPECT_THROW(s.submit(greedy_job({}, 4)), Error);
  EXPECT_THROW(s.submit(greedy_job({1, 99999}, 4)), Error);
  EXPECT_THROW(s.submit(greedy_job(std::vector<int32_t>(513, 1), 4)), Error);
  Job empty_stop = greedy_job({1, 2, 3}, 4);
  empty_stop.stops = {""};
  EXPECT_THROW(s.submit(empty_stop), Error);
  Job bad_sampler = greedy_job({1, 2, 3}, 4);
  bad_sampler.sampling.top_p = 2;
  EXPECT_THROW(s.submit(bad_sampler), Error);
  try {
    s.submit(greedy_job(std::vector<int32_t>(600, 1), 4));
  } catch (const QueueFull&) {
    ADD_FAILURE() << "a prompt over the context is not a full queue";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("600 tokens"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
}

TEST_F(SchedulerTest, DrainFinishesRunningJobsCancelsQueuedOnesAndRefusesNewOnes) {
  SchedulerOptions o = small_options("f16");
  o.parallel = 1;
  // The worker is held in the running job's first step until the drain has
  // begun, so the job is still running when the second one is queued and
  // when the drain starts, however the threads are scheduled.
  StepGate gate;
  gate.attach(o);
  Scheduler s(*m_->model, *m_->tokenizer, o);
  gate.close();
  std::shared_ptr<JobStream> running =
      s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 20), 30));
  gate.wait_held();
  std::shared_ptr<JobStream> queued =
      s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 20, 3), 30));
  std::thread releaser([&] {
    while (s.stats().accepting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    gate.open();
  });
  s.drain(std::chrono::seconds(600));
  releaser.join();
  // The running job had its grace: it finished whole.
  const Outcome out = collect(*running);
  EXPECT_EQ(out.done.finish, JobFinish::kLength);
  EXPECT_EQ(out.done.completion_tokens, 30);
  const Outcome never = collect(*queued);
  EXPECT_EQ(never.done.finish, JobFinish::kCancelled);
  EXPECT_EQ(never.done.completion_tokens, 0);
  EXPECT_THROW(s.submit(greedy_job({1, 2, 3}, 4)), NotAccepting);
  s.drain(std::chrono::seconds(0));  // idempotent
}

TEST_F(SchedulerTest, DrainPastItsGraceCancelsRunningJobs) {
  Scheduler s(*m_->model, *m_->tokenizer, small_options("f16"));
  std::shared_ptr<JobStream> running =
      s.submit(greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 20), -1));
  test::wait_first_event(*running);
  s.drain(std::chrono::milliseconds(0));
  const Outcome out = collect(*running);
  EXPECT_EQ(out.done.finish, JobFinish::kCancelled);
}

// A prompt the budget can never hold fails at once, naming the budget.
TEST_F(SchedulerTest, PromptOverTheBudgetFailsWithABudgetError) {
  SchedulerOptions o = small_options("f16");
  o.budget_bytes = 64 * 1024;  // stories260K f16: 640 bytes a token, 100 tokens
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const Outcome out = run_one(s, greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 300), 4));
  EXPECT_EQ(out.done.finish, JobFinish::kError);
  EXPECT_TRUE(out.done.budget_error);
  EXPECT_NE(out.done.error.find("budget"), std::string::npos) << out.done.error;
  // The scheduler goes on.
  const Outcome small =
      run_one(s, greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 20), 4));
  EXPECT_EQ(small.done.finish, JobFinish::kLength) << small.done.error;
}

// With the pool's disk tier (spill_dir) a prompt three times the budget is
// served, with the text it gets without any budget; the checkpoint it
// leaves in the prefix cache gives way before its own pages spill, and so
// does the second one's.
TEST_F(SchedulerTest, ASpillDirServesAPromptBiggerThanTheBudgetWithTheSameText) {
  const Job first = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 300), 8);
  const Job second = greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 300, 11), 8);
  Outcome reference[2];
  {
    Scheduler s(*m_->model, *m_->tokenizer, small_options("f16"));
    reference[0] = run_one(s, first);
    reference[1] = run_one(s, second);
  }
  SchedulerOptions o = small_options("f16");
  o.budget_bytes = 64 * 1024;  // stories260K f16: 640 bytes a token, 100 tokens
  o.spill_dir = tkv::test::temp_dir() + "/spill";
  std::filesystem::create_directories(o.spill_dir);
  o.prefix_cache = true;
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const Outcome a = run_one(s, first);
  ASSERT_EQ(a.done.finish, JobFinish::kLength) << a.done.error;
  EXPECT_EQ(a.tokens, reference[0].tokens);
  EXPECT_EQ(a.text, reference[0].text);
  EXPECT_EQ(s.stats().prefix_evictions, 1u);
  const Outcome b = run_one(s, second);
  ASSERT_EQ(b.done.finish, JobFinish::kLength) << b.done.error;
  EXPECT_EQ(b.tokens, reference[1].tokens);
  EXPECT_EQ(s.stats().prefix_evictions, 2u);
}

// A page write to the disk tier that fails (FaultPoints::spill_write_fail_at:
// the N-th write of the page file, as on a full disk) ends the job whose
// step it hit, with an error naming the disk tier; the other job running
// with it finishes with its unbudgeted text.
TEST_F(SchedulerTest, ADiskTierFailureEndsOnlyTheJobItHit) {
  const Job jobs[2] = {greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 300), 8),
                       greedy_job(prompt_of(*m_->tokenizer, test::story_text(), 300, 11), 8)};
  Outcome reference[2];
  {
    Scheduler s(*m_->model, *m_->tokenizer, small_options("f16"));
    for (int i = 0; i < 2; ++i) reference[i] = run_one(s, jobs[i]);
  }
  SchedulerOptions o = small_options("f16");
  o.budget_bytes = 64 * 1024;
  o.spill_dir = tkv::test::temp_dir() + "/spill";
  std::filesystem::create_directories(o.spill_dir);
  // The worker starts no job before both are queued, so that it starts
  // them in one admission and they run together however the threads are
  // scheduled (a step apart, the first could finish and leave the failing
  // write to its cached prefix, which is no job). Held in the first step
  // instead, it could have taken the first job alone.
  std::atomic<bool> both_queued{false};
  o.on_admit = [&] {
    while (!both_queued.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  FaultPoints faults;
  faults.spill_write_fail_at = 20;
  set_fault_points(faults);  // read when the page file is made
  Scheduler s(*m_->model, *m_->tokenizer, o);
  set_fault_points({});
  std::shared_ptr<JobStream> streams[2] = {s.submit(jobs[0]), s.submit(jobs[1])};
  both_queued = true;
  int failed = 0;
  for (int i = 0; i < 2; ++i) {
    const Outcome out = collect(*streams[i]);
    if (out.done.finish == JobFinish::kError) {
      ++failed;
      EXPECT_NE(out.done.error.find("disk tier failed"), std::string::npos) << out.done.error;
      EXPECT_NE(out.done.error.find("fault point: spill write"), std::string::npos)
          << out.done.error;
      EXPECT_FALSE(out.done.budget_error);
    } else {
      EXPECT_EQ(out.done.finish, JobFinish::kLength) << out.done.error;
      EXPECT_EQ(out.tokens, reference[i].tokens) << i;
    }
  }
  EXPECT_EQ(failed, 1);
  // The server goes on.
  EXPECT_EQ(run_one(s, jobs[0]).tokens, reference[0].tokens);
}

// A spill directory without a budget is refused.
TEST_F(SchedulerTest, ASpillDirNeedsABudget) {
  SchedulerOptions o = small_options("f16");
  o.spill_dir = tkv::test::temp_dir();
  EXPECT_THROW(Scheduler(*m_->model, *m_->tokenizer, o), Error);
}

}  // namespace
}  // namespace tkv::server
