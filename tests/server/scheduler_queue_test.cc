// The continuous-batching scheduler (server/scheduler.h) on the real
// stories260K model, the parts around the batch: admission order under the
// KV budget, logprobs, stop strings, cancellation, the bounded queue, drain,
// and prompts over the budget (refused, or served through a spill
// directory).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "common/fault_points.h"
#include "scheduler_test_util.h"
#include "server/scheduler.h"

namespace tkv::server {
namespace {

using test::collect;
using test::greedy_job;
using test::HoldOnce;
using test::LoadedModel;
using test::Outcome;
using test::prompt_of;
using test::run_one;
using test::small_options;
using test::StepGate;

class SchedulerTest : public test::StoriesFixture<::testing::Test> {};

// The tests of who holds a place: one place in the batch, one in the queue.
SchedulerOptions one_place_and_one_queued() {
  SchedulerOptions o = small_options("f16");
  o.parallel = 1;
  o.queue_capacity = 1;
  return o;
}

// A job of an 8-token prompt and 4 tokens.
Job short_job(const LoadedModel& m) {
  return greedy_job(prompt_of(*m.tokenizer, test::story_text(), 8), 4);
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
  SchedulerOptions o = one_place_and_one_queued();
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
  const Job job = short_job(*m_);
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
  SchedulerOptions o = one_place_and_one_queued();
  HoldOnce admitting;
  o.on_admit = admitting.hook();
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const Job job = short_job(*m_);
  std::vector<std::shared_ptr<JobStream>> accepted = {s.submit(job)};
  admitting.wait_held();
  EXPECT_EQ(s.stats().queued, 0);
  accepted.push_back(s.submit(job));
  EXPECT_THROW(s.submit(job), QueueFull);
  admitting.release();
  for (auto& a : accepted) EXPECT_EQ(collect(*a).done.finish, JobFinish::kLength);
}

TEST_F(SchedulerTest, AFinishedJobsPlaceIsFreeWhenItsClientHearsItEnded) {
  SchedulerOptions o = one_place_and_one_queued();
  // The worker is held just after the first job's last event, before its
  // step is over: what a client sending its next request at once meets.
  HoldOnce finished;
  o.on_finish = finished.hook();
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const Job job = short_job(*m_);
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
