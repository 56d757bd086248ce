// KvCache::fill_synthetic: deep sequences without a prefill hold what the
// chunk protocol would store (pages, summaries, ring), the same for a seed
// however the fill is split, and attention runs over them as over any other.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "kv/kv_cache.h"

namespace tkv::test {
namespace {

kv::KvShape small_shape() {
  kv::KvShape s;
  s.n_layers = 3;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.max_tokens = 4096;
  return s;
}

kv::KvConfig k4v2(int select = 0) {
  kv::KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  c.select = select;
  c.select_dense_layers = 1;
  return c;
}

// One decode token (fixed K/V/Q) through every layer; the outputs, concatenated.
std::vector<float> decode_step(kv::KvCache& cache, ThreadPool& pool) {
  const kv::KvShape& s = cache.shape();
  std::vector<float> k(size_t(s.n_kv_heads) * s.head_dim), v(k.size());
  std::vector<float> q(size_t(s.n_heads) * s.head_dim), out(q.size()), all;
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = float(i % 7) * 0.25f - 0.5f;
    v[i] = float(i % 5) * 0.5f - 1.0f;
  }
  for (size_t i = 0; i < q.size(); ++i) q[i] = float(i % 11) * 0.2f - 1.0f;
  cache.begin_chunk(1);
  for (int l = 0; l < s.n_layers; ++l) {
    cache.write(l, k.data(), v.data(), &pool);
    cache.attend(l, q.data(), out.data(), pool);
    all.insert(all.end(), out.begin(), out.end());
  }
  cache.end_chunk();
  return all;
}

TEST(SyntheticFillTest, FillsPagesSummariesAndRing) {
  ThreadPool pool(2);
  kv::KvCache cache(small_shape(), k4v2(512));
  cache.fill_synthetic(2000, 7, &pool);
  EXPECT_EQ(cache.n_tokens(), 2000);
  const kv::KvStats st = cache.stats();
  // 2000 - 4 sinks - 64 residual = 1932 encoded positions: 31 pages per layer.
  EXPECT_EQ(st.pages_allocated, 3 * 31);
  EXPECT_GT(st.summary_bytes, 0u);
  // A decode step over it selects (the layers past the first read 8 of 31 pages).
  const std::vector<float> out = decode_step(cache, pool);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  const kv::KvStats after = cache.stats();
  EXPECT_GT(after.select_page_reads, 0);
  EXPECT_LT(after.select_page_reads, after.select_dense_page_reads);
}

TEST(SyntheticFillTest, SameSeedSameSequenceHoweverSplit) {
  ThreadPool pool(2);
  kv::KvCache whole(small_shape(), k4v2()), split(small_shape(), k4v2()),
      other(small_shape(), k4v2());
  whole.fill_synthetic(1300, 42, &pool);
  split.fill_synthetic(700, 42, nullptr);  // chunk boundaries and threads differ
  split.fill_synthetic(600, 42, &pool);
  other.fill_synthetic(1300, 43, &pool);
  const std::vector<float> a = decode_step(whole, pool), b = decode_step(split, pool);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, decode_step(other, pool));
}

TEST(SyntheticFillTest, PastTheContextIsAnErrorBeforeAnythingChanges) {
  kv::KvCache cache(small_shape(), k4v2());
  cache.fill_synthetic(4000, 1);
  EXPECT_THROW(cache.fill_synthetic(200, 1), Error);
  EXPECT_EQ(cache.n_tokens(), 4000);
}

}  // namespace
}  // namespace tkv::test
