// Attention scratch owned by the caller: the same results as the cache's own
// scratch, its bytes accounted by the caller, and independent sequences
// attending at the same time from different threads.
#include <gtest/gtest.h>

#include <thread>

#include "kv/attention_scratch.h"
#include "kv/kv_cache.h"
#include "kv_test_harness.h"

namespace tkv::test {
namespace {

struct Feed {
  kv::KvShape shape{2, 8, 2, 64, 2048};
  RandomInputs in{shape, 300, 17};

  // Feeds [from, from + n) and returns every layer's outputs, concatenated.
  std::vector<float> chunk(kv::KvCache& c, int64_t from, int n, ThreadPool& pool,
                           kv::AttentionScratch* scratch) {
    const int hd = shape.head_dim, n_kv = shape.n_kv_heads, nh = shape.n_heads;
    std::vector<float> all;
    c.begin_chunk(n);
    for (int l = 0; l < shape.n_layers; ++l) {
      std::vector<float> out(size_t(n) * nh * hd);
      c.write(l, in.layers[l].k.data() + size_t(from) * n_kv * hd,
              in.layers[l].v.data() + size_t(from) * n_kv * hd);
      const float* q = in.q[l].data() + size_t(from) * nh * hd;
      if (scratch)
        c.attend(l, q, out.data(), pool, *scratch);
      else
        c.attend(l, q, out.data(), pool);
      all.insert(all.end(), out.begin(), out.end());
    }
    c.end_chunk();
    return all;
  }
};

kv::KvConfig k4v2() {
  kv::KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  return c;
}

TEST(AttentionScratchTest, CallerScratchGivesIdenticalResultsAndIsAccountedByTheCaller) {
  Feed f;
  ThreadPool pool(3);
  kv::KvCache own(f.shape, k4v2()), ext(f.shape, k4v2());
  kv::AttentionScratch scratch;
  EXPECT_EQ(scratch.bytes(), 0u);
  for (int64_t pos = 0; pos < 300;) {
    const int n = pos == 0 ? 250 : 1;
    EXPECT_EQ(f.chunk(own, pos, n, pool, nullptr), f.chunk(ext, pos, n, pool, &scratch)) << pos;
    pos += n;
  }
  EXPECT_GT(scratch.bytes(), 0u);
  EXPECT_GE(scratch.peak_bytes(), scratch.bytes());
  // The cache that used its own scratch reports it; the other one holds only
  // the chunk's f16 tokens.
  EXPECT_EQ(own.stats().scratch_bytes, ext.stats().scratch_bytes + scratch.bytes());
  const uint64_t peak = scratch.peak_bytes();
  scratch.release();
  EXPECT_EQ(scratch.bytes(), 0u);
  EXPECT_EQ(scratch.peak_bytes(), peak);
  scratch.reset_peak();
  EXPECT_EQ(scratch.peak_bytes(), 0u);
}

TEST(AttentionScratchTest, SequencesOnDifferentThreadsEachWithItsOwnScratch) {
  Feed f;
  ThreadPool serial_pool(2);
  std::vector<float> expect;
  {
    kv::KvCache c(f.shape, k4v2());
    kv::AttentionScratch s;
    expect = f.chunk(c, 0, 200, serial_pool, &s);
    for (int t = 200; t < 230; ++t) {
      const auto o = f.chunk(c, t, 1, serial_pool, &s);
      expect.insert(expect.end(), o.begin(), o.end());
    }
  }
  constexpr int kSequences = 3;
  std::vector<std::vector<float>> got(kSequences);
  std::vector<std::thread> threads;
  for (int i = 0; i < kSequences; ++i)
    threads.emplace_back([&, i] {
      ThreadPool pool(2);
      kv::KvCache c(f.shape, k4v2());
      kv::AttentionScratch s;
      got[i] = f.chunk(c, 0, 200, pool, &s);
      for (int t = 200; t < 230; ++t) {
        const auto o = f.chunk(c, t, 1, pool, &s);
        got[i].insert(got[i].end(), o.begin(), o.end());
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kSequences; ++i) EXPECT_EQ(got[i], expect) << "sequence " << i;
}

}  // namespace
}  // namespace tkv::test
