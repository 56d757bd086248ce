// The continuous-batching scheduler (server/scheduler.h) on the real
// stories260K and tkv-test-23M models, the batch itself: batched greedy jobs
// equal each job alone and the single-session generation loop; how prefill
// chunks and layer parts share steps with decoding sequences
// (scheduler_queue_test.cc: admission, the queue, cancellation, drain).
#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

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
using test::small_options;
using test::start_decoding_stream;
using test::StepGate;

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

}  // namespace
}  // namespace tkv::server
