// The C API (include/turbokv/turbokv.h) in process, on stories260K: status
// codes and messages instead of exceptions, buffer sizes, fork and truncate,
// cancel from the callback, sessions, the pool budget.
#include "turbokv/turbokv.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

struct EngineHandle {
  tkv_engine* engine = nullptr;
  ~EngineHandle() { tkv_engine_free(engine); }
};

std::vector<int32_t> tokenize(tkv_engine* engine, const std::string& text) {
  size_t n = 0;
  EXPECT_EQ(tkv_tokenize(engine, text.data(), text.size(), true, true, nullptr, 0, &n),
            TKV_ERR_BUFFER_TOO_SMALL);
  std::vector<int32_t> ids(n);
  EXPECT_EQ(tkv_tokenize(engine, text.data(), text.size(), true, true, ids.data(), n, &n), TKV_OK);
  return ids;
}

struct Collected {
  std::string text;
  int calls = 0;
  int cancel_after = -1;
};

bool collect(const char* text, size_t len, void* user) {
  auto* c = static_cast<Collected*>(user);
  c->text.append(text, len);
  return ++c->calls != c->cancel_after;
}

std::string greedy(tkv_sequence* seq, int64_t n, tkv_generate_result* result = nullptr,
                   int cancel_after = -1) {
  tkv_generate_params p = tkv_generate_default_params();
  p.max_tokens = n;
  p.sampling.temperature = 0;
  Collected c;
  c.cancel_after = cancel_after;
  EXPECT_EQ(tkv_generate(seq, &p, collect, &c, result), TKV_OK) << tkv_last_error();
  return c.text;
}

TEST(CApi, ErrorsAreStatusCodesWithAMessage) {
  EXPECT_EQ(tkv_abi_version(), TKV_ABI_VERSION);
  tkv_engine* engine = nullptr;
  EXPECT_EQ(tkv_engine_load("/nonexistent/model.gguf", nullptr, &engine), TKV_ERR_FILE);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(tkv_last_error()).find("/nonexistent/model.gguf"), std::string::npos)
      << tkv_last_error();
  EXPECT_EQ(tkv_engine_load(nullptr, nullptr, &engine), TKV_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(tkv_status_name(TKV_ERR_BUDGET), "KV budget exceeded");
}

TEST(CApi, ForkTruncateAndCancel) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  EngineHandle h;
  tkv_engine_params params = tkv_engine_default_params();
  params.threads = 1;
  params.kv_cache_type = "k4v2";
  ASSERT_EQ(tkv_engine_load(path.c_str(), &params, &h.engine), TKV_OK) << tkv_last_error();
  const std::vector<int32_t> prompt = tokenize(h.engine, "Once upon a time");
  tkv_sequence* a = nullptr;
  ASSERT_EQ(tkv_sequence_new(h.engine, &a), TKV_OK);
  // Both sequences reach the last prompt token the same way: the prompt
  // minus its last token, a fork, then the last token in each.
  ASSERT_EQ(tkv_eval(a, prompt.data(), prompt.size() - 1, nullptr), TKV_OK);
  tkv_sequence* b = nullptr;
  ASSERT_EQ(tkv_sequence_fork(a, &b), TKV_OK);
  EXPECT_EQ(tkv_sequence_length(b), int64_t(prompt.size()) - 1);
  const float* logits = nullptr;
  ASSERT_EQ(tkv_eval(a, &prompt.back(), 1, &logits), TKV_OK);
  ASSERT_NE(logits, nullptr);
  ASSERT_EQ(tkv_eval(b, &prompt.back(), 1, nullptr), TKV_OK);
  const std::string from_a = greedy(a, 12);
  EXPECT_EQ(greedy(b, 12), from_a);
  EXPECT_FALSE(from_a.empty());
  // Cancel after the second piece of text.
  ASSERT_EQ(tkv_sequence_truncate(b, int64_t(prompt.size()) - 1), TKV_OK);
  ASSERT_EQ(tkv_eval(b, &prompt.back(), 1, nullptr), TKV_OK);
  tkv_generate_result r{};
  greedy(b, 12, &r, 2);
  EXPECT_EQ(r.reason, TKV_STOP_CANCELLED);
  EXPECT_EQ(tkv_sequence_truncate(b, 100000), TKV_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tkv_eval(b, nullptr, 1, nullptr), TKV_ERR_INVALID_ARGUMENT);
  tkv_sequence_free(b);
  tkv_sequence_free(a);
}

TEST(CApi, SessionRoundTripAndRefusedLoad) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  EngineHandle h;
  tkv_engine_params params = tkv_engine_default_params();
  params.threads = 1;
  ASSERT_EQ(tkv_engine_load(path.c_str(), &params, &h.engine), TKV_OK) << tkv_last_error();
  const std::vector<int32_t> prompt = tokenize(h.engine, "Once upon a time there was");
  tkv_sequence* a = nullptr;
  ASSERT_EQ(tkv_sequence_new(h.engine, &a), TKV_OK);
  ASSERT_EQ(tkv_eval(a, prompt.data(), prompt.size() - 1, nullptr), TKV_OK);
  const std::string file = tkv::test::temp_dir() + "/c_api.session";
  ASSERT_EQ(tkv_session_save(a, file.c_str()), TKV_OK) << tkv_last_error();
  tkv_sequence* b = nullptr;
  ASSERT_EQ(tkv_sequence_new(h.engine, &b), TKV_OK);
  ASSERT_EQ(tkv_session_load(b, file.c_str()), TKV_OK) << tkv_last_error();
  EXPECT_EQ(tkv_sequence_length(b), int64_t(prompt.size()) - 1);
  ASSERT_EQ(tkv_eval(a, &prompt.back(), 1, nullptr), TKV_OK);
  ASSERT_EQ(tkv_eval(b, &prompt.back(), 1, nullptr), TKV_OK);
  EXPECT_EQ(greedy(b, 10), greedy(a, 10));
  const int64_t before = tkv_sequence_length(b);
  EXPECT_EQ(tkv_session_load(b, "/nonexistent.session"), TKV_ERR_FILE);
  EXPECT_NE(std::string(tkv_last_error()).find("does not exist"), std::string::npos);
  EXPECT_EQ(tkv_sequence_length(b), before);
  tkv_sequence_free(b);
  tkv_sequence_free(a);
}

TEST(CApi, PoolBudgetIsSharedBySequences) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  EngineHandle h;
  tkv_engine_params params = tkv_engine_default_params();
  params.threads = 1;
  params.kv_budget_bytes = 200 << 10;
  ASSERT_EQ(tkv_engine_load(path.c_str(), &params, &h.engine), TKV_OK) << tkv_last_error();
  const std::vector<int32_t> prompt = tokenize(h.engine, "Once upon a time there was a girl");
  std::vector<tkv_sequence*> seqs;
  tkv_status st = TKV_OK;
  for (int i = 0; i < 1000 && st == TKV_OK; ++i) {
    tkv_sequence* s = nullptr;
    st = tkv_sequence_new(h.engine, &s);
    if (st == TKV_OK) {
      seqs.push_back(s);
      st = tkv_eval(s, prompt.data(), prompt.size(), nullptr);
    }
  }
  EXPECT_EQ(st, TKV_ERR_BUDGET) << tkv_last_error();
  EXPECT_GT(seqs.size(), 1u);
  uint64_t used = 0, budget = 0;
  ASSERT_EQ(tkv_pool_usage(h.engine, &used, &budget), TKV_OK);
  EXPECT_EQ(budget, uint64_t(200 << 10));
  EXPECT_LE(used, budget);
  for (tkv_sequence* s : seqs) tkv_sequence_free(s);
  ASSERT_EQ(tkv_pool_usage(h.engine, &used, nullptr), TKV_OK);
  EXPECT_EQ(used, 0u);
}

TEST(CApi, BatchGivesEachSequenceTheLogitsItGetsAlone) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  EngineHandle h;
  tkv_engine_params params = tkv_engine_default_params();
  params.threads = 1;
  params.context = 64;
  params.ubatch = 4;  // the longer prompts take several rounds
  params.kv_cache_type = "k4v2";
  ASSERT_EQ(tkv_engine_load(path.c_str(), &params, &h.engine), TKV_OK) << tkv_last_error();
  const std::vector<std::vector<int32_t>> prompts = {
      tokenize(h.engine, "Once upon a time"), tokenize(h.engine, "The dog"),
      tokenize(h.engine, "Lily and Ben went to the park to play with a big red ball")};
  const int32_t n_vocab = tkv_n_vocab(h.engine);
  std::vector<tkv_sequence*> alone, batched;
  std::vector<tkv_batch_item> items;
  for (const auto& p : prompts) {
    tkv_sequence* a = nullptr;
    tkv_sequence* b = nullptr;
    ASSERT_EQ(tkv_sequence_new(h.engine, &a), TKV_OK);
    ASSERT_EQ(tkv_sequence_new(h.engine, &b), TKV_OK);
    ASSERT_EQ(tkv_eval(a, p.data(), p.size(), nullptr), TKV_OK);
    alone.push_back(a);
    batched.push_back(b);
    items.push_back({b, p.data(), p.size(), TKV_ERR_INTERNAL});
  }
  // One more item that does not fit the context: refused alone.
  const std::vector<int32_t> too_long(100, prompts[0].back());
  tkv_sequence* c = nullptr;
  ASSERT_EQ(tkv_sequence_new(h.engine, &c), TKV_OK);
  items.push_back({c, too_long.data(), too_long.size(), TKV_OK});
  ASSERT_EQ(tkv_eval_batch(h.engine, items.data(), items.size()), TKV_OK) << tkv_last_error();
  EXPECT_EQ(items.back().status, TKV_ERR_CONTEXT_FULL);
  EXPECT_EQ(tkv_sequence_length(c), 0);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(items[i].status, TKV_OK);
    EXPECT_EQ(tkv_sequence_length(batched[i]), int64_t(prompts[i].size()));
    const float* la = nullptr;
    const float* lb = nullptr;
    ASSERT_EQ(tkv_sequence_logits(alone[i], &la), TKV_OK);
    ASSERT_EQ(tkv_sequence_logits(batched[i], &lb), TKV_OK);
    ASSERT_TRUE(la && lb);
    EXPECT_EQ(std::memcmp(la, lb, size_t(n_vocab) * sizeof(float)), 0) << "bit-identical";
  }
  // A decode step for all three at once, then the same alone.
  std::vector<int32_t> next(prompts.size(), prompts[0].front());
  for (size_t i = 0; i < prompts.size(); ++i) {
    items[i] = {batched[i], &next[i], 1, TKV_ERR_INTERNAL};
    ASSERT_EQ(tkv_eval(alone[i], &next[i], 1, nullptr), TKV_OK);
  }
  ASSERT_EQ(tkv_eval_batch(h.engine, items.data(), prompts.size()), TKV_OK);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const float* la = nullptr;
    const float* lb = nullptr;
    tkv_sequence_logits(alone[i], &la);
    tkv_sequence_logits(batched[i], &lb);
    ASSERT_TRUE(la && lb);
    EXPECT_EQ(std::memcmp(la, lb, size_t(n_vocab) * sizeof(float)), 0) << i;
  }
  for (auto* s : alone) tkv_sequence_free(s);
  for (auto* s : batched) tkv_sequence_free(s);
  tkv_sequence_free(c);
}

}  // namespace
