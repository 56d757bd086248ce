// A cached prefix never changes an answer (server/prefix_cache.h): a prompt
// that reuses a cached prefix, from memory or from the cache dir, gets the
// logits a cold prefill gives it, bit for bit, whatever the cached sequence
// did after that point, on stories260K and on a Gemma 3 model whose window
// layers see 16 tokens (their history kept, or only their windows); and a
// KV budget within a page of a cached prefix's size answers every request
// (it once spun forever reading the prefix back from disk).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "model/synth.h"
#include "scheduler_test_util.h"
#include "server/scheduler.h"

namespace tkv::server {
namespace {

using test::greedy_job;
using test::Outcome;
using test::prompt_of;
using test::run_one;

struct KvCase {
  const char* name;
  const char* kv;  // shorthand; "f16" keeps no residual ring
  int sinks = -1;
  int select = 0;
  bool swa_window_only = false;  // window layers keep only their windows
};

// Pages of 32 tokens on a prefill grid of 16: with 4 sinks no reuse point
// is a page boundary, without sinks every other one is.
SchedulerOptions options(const KvCase& c, const std::string& dir = {}) {
  SchedulerOptions o;
  o.context = 512;
  o.parallel = 2;
  o.prefill_chunk = 16;
  o.prefill_tokens_per_step = 16;
  o.whole_prompt_tokens = 0;
  o.kv.page_tokens = 32;
  EXPECT_TRUE(kv::parse_kv_shorthand(c.kv, o.kv.k, o.kv.v)) << c.kv;
  o.kv.sinks = c.sinks;
  o.kv.select = c.select;
  o.kv.swa_window_only = c.swa_window_only;
  o.threads = 2;
  o.cache_dir = dir;
  o.on_warning = [](const std::string& m) { ADD_FAILURE() << "unexpected warning: " << m; };
  return o;
}

// The first tokens of a greedy reply with every token's logprob: equal
// logprobs over the whole vocabulary are equal logits.
Job probe(const test::LoadedModel& m, std::vector<int32_t> ids) {
  Job job = greedy_job(std::move(ids), 3);
  job.top_logprobs = m.tokenizer->n_vocab();
  return job;
}

void expect_same_bits(const Outcome& got, const Outcome& cold, const std::string& what) {
  ASSERT_EQ(got.generated.size(), cold.generated.size()) << what;
  for (size_t t = 0; t < got.generated.size(); ++t) {
    const GeneratedToken &a = got.generated[t], &b = cold.generated[t];
    ASSERT_EQ(a.token, b.token) << what << " token " << t;
    ASSERT_EQ(a.top.size(), b.top.size()) << what;
    for (size_t i = 0; i < a.top.size(); ++i) {
      ASSERT_EQ(a.top[i].token, b.top[i].token) << what << " token " << t << " rank " << i;
      ASSERT_EQ(a.top[i].logprob, b.top[i].logprob) << what << " token " << t << " rank " << i;
    }
  }
}

using PromptFn = std::function<std::vector<int32_t>(size_t n, size_t offset)>;

// P is served first and decodes 60 tokens past its prompt (its residual
// ring moves on); Q = P + other text reuses P's checkpoint at P's last grid
// boundary from memory; after a restart Q reuses its own checkpoint from
// the cache dir. With a
// truncatable cache (f16) a prompt that parts from P earlier reuses a
// truncated checkpoint too.
void reused_prefix_gives_cold_bits(const test::LoadedModel& m, const KvCase& c,
                                   const PromptFn& prompt) {
  const auto probe = [&](std::vector<int32_t> ids) {
    return tkv::server::probe(m, std::move(ids));
  };
  const std::unique_ptr<model::Model>& m_model = m.model;
  for (const size_t p_len : {129u, 145u}) {
    const std::string what = std::string(c.name) + ", P of " + std::to_string(p_len);
    const std::vector<int32_t> p = prompt(p_len, 0);
    std::vector<int32_t> q = p;
    for (int32_t id : prompt(60, 40)) q.push_back(id);
    const int64_t reuse = int64_t(p_len - 1) / 16 * 16;
    SchedulerOptions cold_options = options(c);
    cold_options.prefix_cache = false;
    Scheduler cold_server(*m_model, *m.tokenizer, cold_options);
    const Outcome cold = run_one(cold_server, probe(q));
    ASSERT_EQ(cold.done.finish, JobFinish::kLength) << cold.done.error;

    const std::string dir = tkv::test::temp_dir() + "/cache";
    {
      Scheduler s(*m_model, *m.tokenizer, options(c, dir));
      EXPECT_EQ(run_one(s, greedy_job(p, 60)).done.completion_tokens, 60) << what;
      const Outcome warm = run_one(s, probe(q));
      EXPECT_EQ(warm.done.cached_tokens, reuse) << what;
      expect_same_bits(warm, cold, what + ", from memory");
      s.drain(std::chrono::seconds(0));
    }
    Scheduler s(*m_model, *m.tokenizer, options(c, dir));
    const Outcome restarted = run_one(s, probe(q));
    // Q left its own checkpoint at its last grid boundary.
    EXPECT_EQ(restarted.done.cached_tokens, int64_t(q.size() - 1) / 16 * 16) << what;
    EXPECT_EQ(s.stats().disk_loads, 1u) << what;
    expect_same_bits(restarted, cold, what + ", from the cache dir");

    // Parting from P 20 tokens before its end.
    std::vector<int32_t> r(p.begin(), p.end() - 20);
    for (int32_t id : prompt(40, 80)) r.push_back(id);
    const Outcome r_cold = run_one(cold_server, probe(r));
    const Outcome r_warm = run_one(s, probe(r));
    const bool truncatable = std::string(c.kv) == "f16" && !c.swa_window_only &&
                             m_model->kv_shape(512).recurrent.empty();
    EXPECT_EQ(r_warm.done.cached_tokens, truncatable ? int64_t(p_len - 20) / 16 * 16 : 0) << what;
    expect_same_bits(r_warm, r_cold, what + ", parting earlier");
  }
}

class ExactReuse : public test::StoriesFixture<::testing::TestWithParam<KvCase>> {};

TEST_P(ExactReuse, ReusedPrefixGivesTheColdLogitsBitForBit) {
  reused_prefix_gives_cold_bits(*m_, GetParam(),
                                [&](size_t n, size_t offset) { return prompt(n, offset); });
}

// A synthesized model (f32 weights) of `preset`, loaded once per suite.
template <const char* Preset>
class SynthFixture : public ::testing::TestWithParam<KvCase> {
 protected:
  static void SetUpTestSuite() {
    model::SynthOptions o;
    o.type = "f32";
    const std::string path = tkv::test::temp_dir() + "/" + Preset + ".gguf";
    model::write_synth_model(model::synth_preset(Preset), o, path);
    m_ = new test::LoadedModel(test::load_model(path));
  }
  static void TearDownTestSuite() {
    delete m_;
    m_ = nullptr;
  }
  void reuse_gives_cold_bits() {
    reused_prefix_gives_cold_bits(*m_, GetParam(), [&](size_t n, size_t offset) {
      return test::prompt_of(*m_->tokenizer, test::story_text(), n, offset);
    });
  }
  static inline test::LoadedModel* m_ = nullptr;
};

// tiny-gemma3 (five window layers of six) with 16-token windows: prompts
// of 129-205 tokens span a dozen windows.
constexpr char kTinyGemma3[] = "tiny-gemma3";
class ExactReuseWindow : public SynthFixture<kTinyGemma3> {};

TEST_P(ExactReuseWindow, ReusedPrefixGivesTheColdLogitsBitForBit) {
  reuse_gives_cold_bits();
}

// tiny-gemma4-e: layers 4-7 read layers 2 and 3's K/V, and every layer
// takes an input of its own: reuse, forks and the cache dir hold only the
// layers with K/V.
constexpr char kTinyGemma4E[] = "tiny-gemma4-e";
class ExactReuseSharedKv : public SynthFixture<kTinyGemma4E> {};

TEST_P(ExactReuseSharedKv, ReusedPrefixGivesTheColdLogitsBitForBit) {
  reuse_gives_cold_bits();
}

// tiny-qwen35 (three Gated DeltaNet layers, one full): the recurrent state
// comes with each checkpoint (a fork), from memory and from the cache dir.
constexpr char kTinyQwen35[] = "tiny-qwen35";
class ExactReuseHybrid : public SynthFixture<kTinyQwen35> {};

TEST_P(ExactReuseHybrid, ReusedPrefixGivesTheColdLogitsBitForBit) {
  reuse_gives_cold_bits();
}

// A hybrid checkpoint cannot be cut: a prompt that parts from the deepest
// one inside it reuses a shallower one (filed under fewer blocks), with a
// cold prefill's bits. Pages of 32: A[:48] holds one whole block, A[:80]
// two; the last prompt shares A's first 70 tokens.
TEST_P(ExactReuseHybrid, PromptPartingInsideTheDeepestCheckpointReusesAShallowerOne) {
  const std::vector<int32_t> a = test::prompt_of(*m_->tokenizer, test::story_text(), 200, 0);
  const std::vector<int32_t> other = test::prompt_of(*m_->tokenizer, test::story_text(), 50, 400);
  std::vector<int32_t> last(a.begin(), a.begin() + 70);
  last.insert(last.end(), other.begin(), other.end());
  SchedulerOptions cold_options = options(GetParam());
  cold_options.prefix_cache = false;
  Scheduler cold_server(*m_->model, *m_->tokenizer, cold_options);
  const Outcome cold = run_one(cold_server, probe(*m_, last));
  Scheduler s(*m_->model, *m_->tokenizer, options(GetParam()));
  run_one(s, greedy_job(std::vector<int32_t>(a.begin(), a.begin() + 56), 2));
  EXPECT_EQ(
      run_one(s, greedy_job(std::vector<int32_t>(a.begin(), a.begin() + 90), 2)).done.cached_tokens,
      48);
  const Outcome warm = run_one(s, probe(*m_, last));
  EXPECT_EQ(warm.done.cached_tokens, 48);
  expect_same_bits(warm, cold, "parting inside the deepest checkpoint");
}

INSTANTIATE_TEST_SUITE_P(Policies, ExactReuseHybrid,
                         ::testing::Values(KvCase{"k4v2", "k4v2"}, KvCase{"f16", "f16"}),
                         [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Policies, ExactReuseSharedKv,
                         ::testing::Values(KvCase{"k4v2", "k4v2"}, KvCase{"f16", "f16"},
                                           KvCase{"k4v2_window_only", "k4v2", -1, 0, true}),
                         [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Policies, ExactReuseWindow,
                         ::testing::Values(KvCase{"k4v2", "k4v2"}, KvCase{"f16", "f16"},
                                           KvCase{"f16_window_only", "f16", -1, 0, true},
                                           KvCase{"k4v2_window_only", "k4v2", -1, 0, true}),
                         [](const auto& info) { return std::string(info.param.name); });

INSTANTIATE_TEST_SUITE_P(Policies, ExactReuse,
                         ::testing::Values(KvCase{"k4v2", "k4v2"},
                                           KvCase{"k4v2_no_sinks", "k4v2", 0},
                                           KvCase{"k4v2_select", "k4v2", -1, 64},
                                           KvCase{"f16", "f16"}),
                         [](const auto& info) { return std::string(info.param.name); });

// A job's checkpoint hint (where a chat's last message starts) leaves a
// checkpoint at the grid boundary before it: a prompt parting there on its
// first visit reuses it, with a cold prefill's bits, also for a cache that
// cannot cut a checkpoint shorter.
TEST_F(ExactReuse, HintsLeaveCheckpointsWherePromptsPart) {
  for (const KvCase& c : {KvCase{"k4v2", "k4v2"}, KvCase{"f16", "f16"}}) {
    const std::vector<int32_t> p = prompt(300);
    std::vector<int32_t> q(p.begin(), p.begin() + 150);
    for (int32_t id : prompt(80, 60)) q.push_back(id);
    SchedulerOptions cold_options = options(c);
    cold_options.prefix_cache = false;
    Scheduler cold_server(*m_->model, *m_->tokenizer, cold_options);
    const Outcome cold = run_one(cold_server, probe(*m_, q));
    Scheduler s(*m_->model, *m_->tokenizer, options(c));
    Job first = greedy_job(p, 4);
    first.checkpoint_hints = {150};
    run_one(s, std::move(first));
    const Outcome warm = run_one(s, probe(*m_, q));
    EXPECT_EQ(warm.done.cached_tokens, 144) << c.name;  // the grid boundary at or before 150
    expect_same_bits(warm, cold, std::string(c.name) + ", parting at a hint");
  }
}

// A budget a little over one cached prefix: four prompts leave their
// checkpoints, and six prompts that start with them are each answered,
// reused or refused. In memory (a budget for two prefixes, so that a job
// can leave its checkpoint beside its own sequence) and after a restart
// over the cache dir (a budget for one: reading a file back fits, the
// sequence forked from it does not, and reading it back again after
// evicting it once spun forever).
TEST_F(ExactReuse, BudgetWithinAPageOfACachedPrefixAnswersEveryRequest) {
  const KvCase c{"k4v2", "k4v2"};
  std::vector<std::vector<int32_t>> firsts;
  for (size_t i = 0; i < 4; ++i) firsts.push_back(prompt(300, 7 * i));
  uint64_t prefix_bytes = 0;
  {
    Scheduler probe_server(*m_->model, *m_->tokenizer, options(c));
    run_one(probe_server, greedy_job(firsts[0], 1));
    prefix_bytes = probe_server.stats().kv_bytes_in_use;  // the checkpoint alone
  }
  ASSERT_GT(prefix_bytes, 0u);
  for (const bool restart : {false, true}) {
    const std::string dir = tkv::test::temp_dir() + "/cache";
    SchedulerOptions o = options(c, restart ? dir : std::string());
    o.on_warning = [](const std::string&) {};
    o.budget_bytes = (restart ? 1 : 3) * prefix_bytes + prefix_bytes / 20;
    std::unique_ptr<Scheduler> s;
    if (restart) {
      SchedulerOptions unbounded = o;
      unbounded.budget_bytes = 0;
      Scheduler first(*m_->model, *m_->tokenizer, unbounded);
      for (const auto& ids : firsts) run_one(first, greedy_job(ids, 4));
      first.drain(std::chrono::seconds(0));
      ASSERT_EQ(first.stats().disk_prefixes, 4);
    }
    s = std::make_unique<Scheduler>(*m_->model, *m_->tokenizer, o);
    if (!restart)
      for (const auto& ids : firsts) run_one(*s, greedy_job(ids, 4));
    int64_t reused = 0;
    for (size_t i = 0; i < 6; ++i) {
      // In memory the budget keeps the newest prefixes only.
      std::vector<int32_t> ids = firsts[restart ? i % 4 : 3];
      for (int32_t id : prompt(30, 50 + i)) ids.push_back(id);
      const Outcome out = run_one(*s, greedy_job(ids, 4));
      ASSERT_TRUE(out.finished) << (restart ? "after a restart" : "in memory") << ", job " << i;
      if (out.done.finish == JobFinish::kError) {
        EXPECT_TRUE(out.done.budget_error) << out.done.error;
      }
      reused += out.done.cached_tokens;
    }
    EXPECT_GT(reused, 0) << (restart ? "after a restart" : "in memory");
    s->drain(std::chrono::seconds(0));
  }
}

}  // namespace
}  // namespace tkv::server
