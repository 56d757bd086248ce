// The prefix cache (server/prefix_cache.h, prefix_index.h) and its disk
// tier (server/cache_dir.h) on stories260K: the hash-chain index, LRU
// order, reuse through the scheduler (cached_tokens, the same greedy text
// as a cold run), session files across two schedulers, corrupt and
// half-written files never used, an unwritable directory, and a KV budget
// exhausted mid-batch.
#include "server/prefix_cache.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/fault_points.h"
#include "scheduler_test_util.h"
#include "server/prefix_index.h"
#include "server/scheduler.h"

extern char** environ;

namespace tkv::server {
namespace {

namespace fs = std::filesystem;
using test::greedy_job;
using test::LoadedModel;
using test::Outcome;
using test::prompt_of;
using test::run_one;

// Candidates are every entry sharing a block with the prompt, those sharing
// the most blocks first: a checkpoint that cannot be cut (a recurrent
// state) serves only where the prompt holds all of it, so the shallower
// ones must be there too when the deepest part from the prompt inside
// their last block.
TEST(PrefixIndex, CandidatesAreTheSharersDeepestFirst) {
  PrefixIndex index(4);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int32_t> b = {1, 2, 3, 4, 9, 9, 9, 9};
  const std::vector<int32_t> c = {1, 2, 3, 4, 5, 6};  // one whole block, filed with a's first
  const std::vector<int32_t> short_one = {1, 2, 3};   // no whole block: not filed
  index.add(10, a);
  index.add(20, b);
  index.add(25, c);
  index.add(30, short_one);
  EXPECT_EQ(index.candidates(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 0}),
            (std::vector<uint64_t>{10, 20, 25}));
  EXPECT_EQ(index.candidates(std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 0}),
            (std::vector<uint64_t>{10, 20, 25}));
  EXPECT_EQ(index.candidates(std::vector<int32_t>{1, 2, 3, 4, 9, 9, 9, 9, 1}),
            (std::vector<uint64_t>{20, 10, 25}));
  EXPECT_TRUE(index.candidates(std::vector<int32_t>{2, 2, 3, 4}).empty());
  index.remove(10, a);
  EXPECT_EQ(index.candidates(a), (std::vector<uint64_t>{20, 25}));
  EXPECT_EQ(common_prefix(a, b), 4);
  EXPECT_EQ(common_prefix(a, std::vector<int32_t>{1, 2}), 2);
}

SchedulerOptions cache_options(const std::string& dir = {}) {
  SchedulerOptions o;
  o.context = 512;
  o.parallel = 4;
  o.prefill_chunk = 32;
  o.prefill_tokens_per_step = 32;
  o.whole_prompt_tokens = 0;  // every prompt on the grid: the short ones are reused too
  o.kv.page_tokens = 32;
  o.threads = 2;
  o.cache_dir = dir;
  o.on_warning = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  return o;
}

class PrefixCacheTest : public test::StoriesFixture<::testing::Test> {
 protected:
  // The greedy reply to `job` with no cache at all.
  Outcome cold(const Job& job) const {
    SchedulerOptions o = cache_options();
    o.prefix_cache = false;
    Scheduler s(*m_->model, *m_->tokenizer, o);
    return run_one(s, job);
  }
  static std::vector<std::string> files_in(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    return names;
  }
  // The stats once the background writer has filed `n` prefixes (a bound
  // of a minute: a hang).
  static SchedulerStats wait_for_disk_prefixes(const Scheduler& s, int n) {
    for (int i = 0; i < 6000 && s.stats().disk_prefixes != n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return s.stats();
  }
  static bool has_temporary_file(const std::string& dir) {
    for (const std::string& name : files_in(dir))
      if (name.find(".tmp.") != std::string::npos) return true;
    return false;
  }
};

TEST_F(PrefixCacheTest, EvictsTheLeastRecentlyUsedEntryFirst) {
  auto pool = std::make_shared<kv::PagePool>(0);
  ThreadPool threads(1);
  kv::KvConfig kv;
  kv.page_tokens = 32;
  auto session_of = [&](const std::vector<int32_t>& ids) {
    auto s =
        std::make_unique<runtime::Sequence>(*m_->model, *m_->tokenizer, 512, kv, pool, threads, 32);
    s->feed(ids);
    return s;
  };
  PrefixCache cache(32, ReuseRule{.grid = 32, .truncatable = true}, 8, nullptr);
  const std::vector<int32_t> a = prompt(70, 1), b = prompt(70, 2), c = prompt(70, 3);
  cache.insert(session_of(a));
  cache.insert(session_of(b));
  cache.insert(session_of(c));
  EXPECT_EQ(cache.size(), 3);
  const auto none = [] { return std::unique_ptr<runtime::Sequence>(); };
  // A hit refreshes a: the order from old to new is now b, c, a.
  const PrefixCache::Hit hit = cache.find(a, none);
  ASSERT_NE(hit.session, nullptr);
  EXPECT_EQ(hit.reuse, 64);  // min(70 in common, 69) on the grid of 32
  EXPECT_EQ(hit.session->tokens(), a);
  EXPECT_TRUE(cache.evict_lru());
  EXPECT_EQ(cache.find(b, none).session, nullptr);
  EXPECT_NE(cache.find(c, none).session, nullptr);  // c is now the newest
  EXPECT_TRUE(cache.evict_lru());                   // a
  EXPECT_EQ(cache.find(a, none).session, nullptr);
  EXPECT_NE(cache.find(c, none).session, nullptr);
  EXPECT_TRUE(cache.evict_lru());
  EXPECT_FALSE(cache.evict_lru());
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(pool->bytes_in_use(), 0u);
}

TEST_F(PrefixCacheTest, EntryThatExtendsAnotherReplacesIt) {
  auto pool = std::make_shared<kv::PagePool>(0);
  ThreadPool threads(1);
  kv::KvConfig kv;
  kv.page_tokens = 32;
  PrefixCache cache(32, ReuseRule{.grid = 32, .truncatable = true}, 8, nullptr);
  const std::vector<int32_t> longer = prompt(100);
  const std::vector<int32_t> shorter(longer.begin(), longer.begin() + 64);
  for (const auto* ids : {&shorter, &longer}) {
    auto s =
        std::make_unique<runtime::Sequence>(*m_->model, *m_->tokenizer, 512, kv, pool, threads, 32);
    s->feed(*ids);
    cache.insert(std::move(s));
  }
  EXPECT_EQ(cache.size(), 1);
}

// The second job's prompt shares 130 tokens with the first's: it forks the
// first's pages, prefills from 128 (the grid) and says so; on f16 its reply
// is bit-identical to a cold run's.
TEST_F(PrefixCacheTest, SharedPrefixIsReusedAndGivesTheColdText) {
  Scheduler s(*m_->model, *m_->tokenizer, cache_options());
  const std::vector<int32_t> first = prompt(150);
  std::vector<int32_t> second(first.begin(), first.begin() + 130);
  for (int32_t id : prompt(50, 40)) second.push_back(id);
  const Outcome a = run_one(s, greedy_job(first, 8));
  EXPECT_EQ(a.done.cached_tokens, 0);
  const Outcome b = run_one(s, greedy_job(second, 24));
  EXPECT_EQ(b.done.cached_tokens, 128);
  EXPECT_EQ(b.done.prompt_tokens, 180);
  const Outcome b_cold = cold(greedy_job(second, 24));
  EXPECT_EQ(b.tokens, b_cold.tokens);
  EXPECT_EQ(b.text, b_cold.text);
  // The same prompt again: everything but the last token's grid cell.
  const Outcome again = run_one(s, greedy_job(first, 8));
  EXPECT_EQ(again.done.cached_tokens, 128);  // (150 - 1) / 32 * 32
  EXPECT_EQ(again.tokens, a.tokens);
  const SchedulerStats st = s.stats();
  EXPECT_EQ(st.prefix_hits, 2u);
  EXPECT_EQ(st.prefix_tokens_reused, 256u);
  EXPECT_GE(st.cached_prefixes, 1);
}

TEST_F(PrefixCacheTest, QuantizedPoolReusesToo) {
  SchedulerOptions o = cache_options();
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", o.kv.k, o.kv.v));
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const std::vector<int32_t> p = prompt(200);
  run_one(s, greedy_job(p, 8));
  const Outcome again = run_one(s, greedy_job(p, 8));
  EXPECT_EQ(again.done.cached_tokens, 192);
  EXPECT_EQ(again.done.finish, JobFinish::kLength);
  EXPECT_EQ(again.done.completion_tokens, 8);
}

TEST_F(PrefixCacheTest, WindowPolicyIsNeverCached) {
  SchedulerOptions o = cache_options();
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", o.kv.k, o.kv.v));
  o.kv.window = 128;
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const std::vector<int32_t> p = prompt(200);
  run_one(s, greedy_job(p, 4));
  EXPECT_EQ(run_one(s, greedy_job(p, 4)).done.cached_tokens, 0);
  EXPECT_EQ(s.stats().cached_prefixes, 0);
}

TEST_F(PrefixCacheTest, PrefixesSurviveARestartThroughTheCacheDir) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  const Job job = greedy_job(prompt(150), 8);
  Outcome first;
  {
    Scheduler s(*m_->model, *m_->tokenizer, cache_options(dir));
    first = run_one(s, job);
    s.drain(std::chrono::seconds(0));
    EXPECT_EQ(s.stats().disk_prefixes, 1);
  }
  Scheduler s(*m_->model, *m_->tokenizer, cache_options(dir));
  EXPECT_EQ(s.stats().disk_prefixes, 1);
  EXPECT_EQ(s.stats().cached_prefixes, 0);  // indexed, not loaded
  const Outcome again = run_one(s, job);
  EXPECT_EQ(again.done.cached_tokens, 128);
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(s.stats().disk_loads, 1u);
}

// Beyond max_cached_prefixes the least recently used prefix goes to the
// cache dir, and comes back from there when its prompt returns.
TEST_F(PrefixCacheTest, EvictedPrefixIsWrittenToDiskAndReadBack) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  SchedulerOptions o = cache_options(dir);
  o.max_cached_prefixes = 2;
  Scheduler s(*m_->model, *m_->tokenizer, o);
  std::vector<Outcome> first;
  for (size_t i = 0; i < 3; ++i) first.push_back(run_one(s, greedy_job(prompt(100, 10 * i), 6)));
  SchedulerStats st = wait_for_disk_prefixes(s, 1);  // the first job's (written in the background)
  EXPECT_EQ(st.cached_prefixes, 2);
  EXPECT_EQ(st.disk_prefixes, 1);
  const Outcome again = run_one(s, greedy_job(prompt(100, 0), 6));
  EXPECT_EQ(again.done.cached_tokens, 96);
  EXPECT_EQ(again.tokens, first[0].tokens);
  st = s.stats();
  EXPECT_EQ(st.disk_loads, 1u);
  EXPECT_EQ(st.cached_prefixes, 2);  // read back, and another one out
}

// Evicted prefixes are written by a background writer: while one write is
// paused (FaultPoints::cache_write_pause_ms, past its first 4 KiB), the
// job whose arrival evicted it has ended and a whole other job runs to its
// end; a lookup of the prefix being written waits for its file and reuses
// it; drain waits for the writer.
TEST_F(PrefixCacheTest, StreamsGoOnWhileACacheWriteIsPaused) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  SchedulerOptions o = cache_options(dir);
  o.max_cached_prefixes = 1;
  const Job a = greedy_job(prompt(100, 0), 6);
  FaultPoints pause;
  pause.cache_write_pause_ms = 5000;
  set_fault_points(pause);
  {
    Scheduler s(*m_->model, *m_->tokenizer, o);
    const Outcome first = run_one(s, a);
    // b's prefix takes a's place in memory: a's goes to disk, paused.
    EXPECT_EQ(run_one(s, greedy_job(prompt(100, 10), 6)).done.finish, JobFinish::kLength);
    for (int i = 0; i < 3000 && !has_temporary_file(dir); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_TRUE(has_temporary_file(dir)) << "the write of the evicted prefix did not start";
    // The writer read the fault points before it made its file: it pauses all the same.
    set_fault_points({});
    const Outcome other = run_one(s, greedy_job(prompt(20, 30), 20));
    EXPECT_EQ(other.done.finish, JobFinish::kLength);
    EXPECT_EQ(other.tokens.size(), 20u);
    EXPECT_TRUE(has_temporary_file(dir)) << "the job waited for the cache write";
    EXPECT_EQ(s.stats().disk_prefixes, 0);  // not filed before it is complete
    // a's prompt again: its prefix is on its way to disk; the lookup waits.
    const Outcome again = run_one(s, a);
    EXPECT_EQ(again.done.cached_tokens, 96);
    EXPECT_EQ(again.tokens, first.tokens);
    EXPECT_EQ(s.stats().disk_loads, 1u);
    s.drain(std::chrono::seconds(0));
    EXPECT_FALSE(has_temporary_file(dir));
  }
  set_fault_points({});
}

// The cache dir keeps at most cache_dir_max_bytes: the oldest files go.
TEST_F(PrefixCacheTest, CacheDirDropsItsOldestFilesBeyondItsBound) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  SchedulerOptions o = cache_options(dir);
  o.max_cached_prefixes = 1;
  o.cache_dir_max_bytes = 100 * 1024;  // one file of 100 tokens (640 bytes each) and its metadata
  Scheduler s(*m_->model, *m_->tokenizer, o);
  std::vector<Outcome> first;
  for (size_t i = 0; i < 3; ++i) first.push_back(run_one(s, greedy_job(prompt(100, 10 * i), 6)));
  // Job 0's prefix went to disk when job 1's came, then made room for job 1's
  // (written in the background).
  SchedulerStats st = wait_for_disk_prefixes(s, 1);
  EXPECT_EQ(st.cached_prefixes, 1);
  EXPECT_EQ(st.disk_prefixes, 1);
  EXPECT_LE(st.disk_bytes, o.cache_dir_max_bytes);
  const Outcome second = run_one(s, greedy_job(prompt(100, 10), 6));
  EXPECT_EQ(second.done.cached_tokens, 96);
  EXPECT_EQ(second.tokens, first[1].tokens);
  EXPECT_EQ(s.stats().disk_loads, 1u);
  EXPECT_EQ(run_one(s, greedy_job(prompt(100, 0), 6)).done.cached_tokens, 0);
}

// A file whose bytes changed after it was written fails its checksum: it is
// deleted with one warning and the job runs cold.
TEST_F(PrefixCacheTest, CorruptFileIsSkippedWithOneWarningAndDeleted) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  const Job job = greedy_job(prompt(150), 8);
  Outcome first;
  {
    Scheduler s(*m_->model, *m_->tokenizer, cache_options(dir));
    first = run_one(s, job);
  }  // the destructor drains: the prefix is written
  const std::vector<std::string> names = files_in(dir);
  ASSERT_EQ(names.size(), 1u);
  const std::string file = dir + "/" + names[0];
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const std::streamoff middle = f.tellg() / 2;
    f.seekg(middle);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x5a);
    f.seekp(middle);
    f.write(&c, 1);
  }
  std::vector<std::string> warnings;
  SchedulerOptions o = cache_options(dir);
  o.on_warning = [&](const std::string& m) { warnings.push_back(m); };
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const Outcome again = run_one(s, job);
  EXPECT_EQ(again.done.cached_tokens, 0);
  EXPECT_EQ(again.tokens, first.tokens);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("checksum"), std::string::npos) << warnings[0];
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(PrefixCacheTest, TruncatedFileIsDroppedAtStartup) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  {
    Scheduler s(*m_->model, *m_->tokenizer, cache_options(dir));
    run_one(s, greedy_job(prompt(150), 8));
  }
  const std::vector<std::string> names = files_in(dir);
  ASSERT_EQ(names.size(), 1u);
  const std::string file = dir + "/" + names[0];
  fs::resize_file(file, fs::file_size(file) / 3);
  std::vector<std::string> warnings;
  SchedulerOptions o = cache_options(dir);
  o.on_warning = [&](const std::string& m) { warnings.push_back(m); };
  Scheduler s(*m_->model, *m_->tokenizer, o);
  EXPECT_EQ(s.stats().disk_prefixes, 0);
  EXPECT_EQ(warnings.size(), 1u);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_EQ(run_one(s, greedy_job(prompt(150), 8)).done.cached_tokens, 0);
}

// Run by KilledInTheMiddleOfACacheWrite in a child process (never alone):
// writes a prefix to TKV_TEST_CACHE_DIR with its cache writes paused
// (FaultPoints::cache_write_pause_ms), where the parent kills it.
TEST_F(PrefixCacheTest, DISABLED_ChildWritesACacheFileUntilKilled) {
  const char* dir = std::getenv("TKV_TEST_CACHE_DIR");
  ASSERT_NE(dir, nullptr);
  FaultPoints pause;
  pause.cache_write_pause_ms = 600000;
  set_fault_points(pause);
  Scheduler s(*m_->model, *m_->tokenizer, cache_options(dir));
  run_one(s, greedy_job(prompt(150), 8));
  s.drain(std::chrono::seconds(0));  // pauses in the writer
}

TEST_F(PrefixCacheTest, KilledInTheMiddleOfACacheWriteLeavesNothingToLoad) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  fs::create_directories(dir);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  env_strings.push_back("TKV_TEST_CACHE_DIR=" + dir);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string self = fs::read_symlink("/proc/self/exe");
  std::string filter = "--gtest_filter=PrefixCacheTest.DISABLED_ChildWritesACacheFileUntilKilled";
  std::string also = "--gtest_also_run_disabled_tests";
  char* argv[] = {self.data(), filter.data(), also.data(), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, envp.data()), 0);
  // Wait (up to 10 minutes) for the writer's temporary file, then kill -9.
  bool writing = false;
  for (int i = 0; i < 60000 && !writing; ++i) {
    for (const std::string& name : files_in(dir))
      if (name.find(".tmp.") != std::string::npos) writing = true;
    if (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(writing) << "the child never started writing";
  for (const std::string& name : files_in(dir))
    EXPECT_FALSE(name.ends_with(".tkvs")) << "a finished file appeared: " << name;

  // The restart finds no entry and removes the debris silently.
  Scheduler s(*m_->model, *m_->tokenizer, cache_options(dir));
  EXPECT_EQ(s.stats().disk_prefixes, 0);
  EXPECT_TRUE(files_in(dir).empty());
  const Outcome out = run_one(s, greedy_job(prompt(150), 8));
  EXPECT_EQ(out.done.cached_tokens, 0);
  EXPECT_EQ(out.done.finish, JobFinish::kLength);
}

TEST_F(PrefixCacheTest, UnwritableCacheDirWarnsOnceAndServingGoesOn) {
  const std::string dir = tkv::test::temp_dir() + "/cache";
  std::vector<std::string> warnings;
  SchedulerOptions o = cache_options(dir);
  o.on_warning = [&](const std::string& m) { warnings.push_back(m); };
  FaultPoints fail;
  fail.cache_write_fail = true;
  set_fault_points(fail);
  {
    Scheduler s(*m_->model, *m_->tokenizer, o);
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(run_one(s, greedy_job(prompt(100, 10 * i), 4)).done.finish, JobFinish::kLength);
    s.drain(std::chrono::seconds(0));  // three writes fail
    EXPECT_EQ(s.stats().disk_prefixes, 0);
  }
  set_fault_points({});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cannot write"), std::string::npos) << warnings[0];
  EXPECT_TRUE(files_in(dir).empty());
}

// Two jobs forked from one cached prefix outgrow the pool together (the
// admission's estimate counts the cached prefix as evictable, but both
// forks hold its pages): evicting it frees nothing, so one job fails with
// a budget error and the other finishes with the text it has alone.
TEST_F(PrefixCacheTest, BudgetExhaustedMidBatchFailsOneJobAndTheOtherGoesOn) {
  SchedulerOptions o = cache_options();
  // stories260K f16: 640 bytes a token, 20480 a page of 32 tokens. Each job
  // is estimated at 8 pages beyond the shared 3; the pool holds 17.
  o.budget_bytes = 17 * 20480;
  o.parallel = 2;
  // The first job's first step waits until both are queued, so that they
  // run side by side however the threads are scheduled.
  test::StepGate gate;
  gate.attach(o);
  Scheduler s(*m_->model, *m_->tokenizer, o);
  const std::vector<int32_t> shared = prompt(96);
  std::vector<Job> jobs;
  for (size_t i = 0; i < 2; ++i) {
    std::vector<int32_t> p = shared;
    for (int32_t id : prompt(41, 20 + 30 * i)) p.push_back(id);
    p.erase(p.begin() + 96);  // the second part's BOS
    jobs.push_back(greedy_job(p, 200));
  }
  // A prompt of 97 tokens leaves its checkpoint at 96, the grid boundary
  // before its last token.
  run_one(s, greedy_job({jobs[0].prompt.begin(), jobs[0].prompt.begin() + 97}, 1));
  gate.close();
  auto a = s.submit(jobs[0]);
  auto b = s.submit(jobs[1]);
  gate.open();
  const Outcome out[2] = {test::collect(*a), test::collect(*b)};
  int failed = 0;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].done.cached_tokens, 96) << i;
    if (out[i].done.finish == JobFinish::kError) {
      ++failed;
      EXPECT_TRUE(out[i].done.budget_error) << out[i].done.error;
      EXPECT_NE(out[i].done.error.find("budget"), std::string::npos) << out[i].done.error;
    } else {
      EXPECT_EQ(out[i].done.finish, JobFinish::kLength);
      EXPECT_EQ(out[i].done.completion_tokens, 200);
      EXPECT_EQ(out[i].tokens, cold(jobs[size_t(i)]).tokens) << i;
    }
  }
  EXPECT_EQ(failed, 1);
}

}  // namespace
}  // namespace tkv::server
