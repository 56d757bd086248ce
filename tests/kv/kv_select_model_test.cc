// Page selection through a real model: with a budget that covers every page
// (prefill and decode), greedy output equals the dense cache's token for
// token; a small budget still decodes (and reads fewer pages).
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "common/thread_pool.h"
#include "common/vec_math.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace tkv::test {
namespace {

// Greedy ids after `prompt`, `steps` tokens.
std::vector<int32_t> greedy(const model::Model& m, kv::KvCache& cache, ThreadPool& pool,
                            const std::vector<int32_t>& prompt, int steps) {
  std::vector<int32_t> out;
  std::vector<float> logits = m.eval_last(cache, prompt, pool, 128);
  for (int i = 0; i < steps; ++i) {
    out.push_back(int32_t(tkv::argmax(logits.data(), int64_t(logits.size()))));
    if (i + 1 < steps) logits = m.eval_last(cache, std::span<const int32_t>(&out.back(), 1), pool);
  }
  return out;
}

std::vector<int32_t> run(const std::string& path, const std::vector<int32_t>& prompt, int steps,
                         int select, int page) {
  const auto m = model::Model::load(path);
  kv::KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  c.page_tokens = page;
  c.select = select;
  kv::KvCache cache(m->kv_shape(int(prompt.size()) + steps + 8), c);
  ThreadPool pool(2);
  return greedy(*m, cache, pool, prompt, steps);
}

std::vector<int32_t> prompt_of(int n, int vocab) {
  std::vector<int32_t> ids{1};
  for (int i = 1; i < n; ++i) ids.push_back(int32_t(2 + (i * 37 + i / 7) % (vocab - 2)));
  return ids;
}

TEST(PageSelectionModel, Stories260KGreedyWithCoveringBudgetEqualsDense) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  const auto prompt = prompt_of(300, 512);
  const auto dense = run(path, prompt, 100, 0, 16);
  EXPECT_EQ(run(path, prompt, 100, 1 << 20, 16), dense);
  EXPECT_EQ(run(path, prompt, 100, 64, 16).size(), dense.size());
}

TEST(PageSelectionModel, TkvTest23MGreedyWithCoveringBudgetEqualsDense) {
  TKV_REQUIRE_FIXTURE(path, "tkv-test-23M.gguf");
  const auto prompt = prompt_of(700, 4096);
  EXPECT_EQ(run(path, prompt, 24, 1 << 20, 64), run(path, prompt, 24, 0, 64));
}

}  // namespace
}  // namespace tkv::test
