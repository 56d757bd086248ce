// Page selection through a real model: with a budget that covers every page
// (prefill and decode), greedy output equals the dense cache's token for
// token; a small budget still decodes (and reads fewer pages).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/test_util.h"
#include "common/thread_pool.h"
#include "common/vec_math.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

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

// On real text: decode reads 8 + 1 of the pages a query sees in every
// selecting layer; prefill tiles read the union of their queries' pages
// (the fraction is recorded, not asserted: it depends on the text).
TEST(PageSelectionModel, TkvTest23MReadsAFractionOfThePages) {
  TKV_REQUIRE_FIXTURE(path, "tkv-test-23M.gguf");
  TKV_REQUIRE_FIXTURE(text_path, "tkv-test-heldout.txt");
  const auto m = model::Model::load(path);
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(m->gguf());
  std::ifstream in(text_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<int32_t> ids = tokenizer.encode(text.str(), true, false);
  ASSERT_GT(ids.size(), 3000u);
  ids.resize(3000);
  kv::KvConfig c;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  c.select = 512;
  kv::KvCache cache(m->kv_shape(3100), c);
  ThreadPool pool(2);
  greedy(*m, cache, pool, std::vector<int32_t>(ids.begin(), ids.end() - 1), 1);
  const kv::KvStats prefill = cache.stats();
  m->eval_last(cache, std::span<const int32_t>(&ids.back(), 1), pool);
  const kv::KvStats decode = cache.stats();
  const double prefill_fraction =
      double(prefill.select_page_reads) / double(prefill.select_dense_page_reads);
  RecordProperty("prefill_page_fraction", std::to_string(prefill_fraction));
  EXPECT_LT(prefill_fraction, 1.0);
  // Decode at 2999: pages hold [4, 2936): 46 pages; 4 selecting layers x 2 KV heads.
  EXPECT_EQ(decode.select_dense_page_reads - prefill.select_dense_page_reads, 4 * 2 * 46);
  EXPECT_EQ(decode.select_page_reads - prefill.select_page_reads, 4 * 2 * 9);
}

}  // namespace
}  // namespace tkv::test
