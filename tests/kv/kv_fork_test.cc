// fork / truncate / clear: forked sequences that diverge give exactly the
// outputs of independent sequences fed the same tokens, pages are shared
// until written (copy-on-write) and accounted as shared, truncate +
// re-append matches the reference under the truncated-ring rule, and a
// budget failure in fork, copy-on-write or begin_chunk changes nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "common/error.h"
#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv_test_harness.h"

namespace tkv::test {
namespace {

constexpr double kTolerance = 1e-4;
const kv::KvShape kShape{2, 4, 2, 64, 2048};

kv::KvConfig config_of(const char* kv, int sinks = -1, int residual = -1) {
  kv::KvConfig c = kv_config(kv, sinks, residual);
  c.page_tokens = 32;
  return c;
}

// Feeds tokens [from, from + n) of `in` (rows = positions) and appends every
// layer's outputs to *outs.
void feed(kv::KvCache& c, const RandomInputs& in, int64_t from, int n, ThreadPool& pool,
          std::vector<float>* outs = nullptr) {
  const auto& sh = c.shape();
  const int hd = sh.head_dim, n_kv = sh.n_kv_heads, nh = sh.n_heads;
  c.begin_chunk(n);
  for (int l = 0; l < sh.n_layers; ++l) {
    std::vector<float> out(size_t(n) * nh * hd);
    c.write(l, in.layers[l].k.data() + size_t(from) * n_kv * hd,
            in.layers[l].v.data() + size_t(from) * n_kv * hd, &pool);
    c.attend(l, in.q[l].data() + size_t(from) * nh * hd, out.data(), pool);
    if (outs) outs->insert(outs->end(), out.begin(), out.end());
  }
  c.end_chunk();
}

// Prefix [0, 150) then 40 single tokens, from `a` for the prefix and `b` after.
void prefix_then_decode(kv::KvCache& c, const RandomInputs& a, const RandomInputs& b,
                        ThreadPool& pool, std::vector<float>* outs) {
  feed(c, a, 0, 150, pool);
  for (int t = 150; t < 190; ++t) feed(c, b, t, 1, pool, outs);
}

class ForkTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ForkTest, DivergingForksEqualIndependentSequences) {
  const kv::KvConfig config = config_of(GetParam());
  RandomInputs x(kShape, 200, 1), y(kShape, 200, 2);
  ThreadPool pool(2);
  std::vector<float> expect_x, expect_y;
  {
    kv::KvCache c(kShape, config);
    prefix_then_decode(c, x, x, pool, &expect_x);
    kv::KvCache d(kShape, config);
    prefix_then_decode(d, x, y, pool, &expect_y);
  }
  auto shared = std::make_shared<kv::PagePool>();
  kv::KvCache a(kShape, config, shared);
  feed(a, x, 0, 150, pool);
  const uint64_t page_bytes = a.stats().page_bytes;
  ASSERT_GT(page_bytes, 0u);
  std::unique_ptr<kv::KvCache> b = a.fork();
  EXPECT_EQ(b->n_tokens(), 150);
  // Every page is shared, stored once.
  EXPECT_EQ(a.stats().shared_bytes, page_bytes);
  EXPECT_EQ(b->stats().shared_bytes, page_bytes);
  EXPECT_EQ(shared->stats().shared_bytes, page_bytes);
  EXPECT_EQ(shared->stats().bytes_in_use, page_bytes + a.stats().f16_bytes + b->stats().f16_bytes);
  EXPECT_EQ(a.stats().exclusive_bytes, a.stats().f16_bytes);
  // Diverge, interleaved: b writes first each step, so a reads its pages
  // after b has written (copy-on-write must leave a's bytes alone).
  std::vector<float> got_x, got_y;
  for (int t = 150; t < 190; ++t) {
    feed(*b, y, t, 1, pool, &got_y);
    feed(a, x, t, 1, pool, &got_x);
  }
  EXPECT_EQ(got_x, expect_x);
  EXPECT_EQ(got_y, expect_y);
  // The pages both still hold unchanged are shared; the rewritten ones are not.
  const uint64_t still_shared = a.stats().shared_bytes;
  EXPECT_LT(still_shared, a.stats().page_bytes);
  EXPECT_EQ(b->stats().shared_bytes, still_shared);
  b.reset();
  EXPECT_EQ(a.stats().shared_bytes, 0u);
  EXPECT_EQ(shared->stats().shared_bytes, 0u);
  EXPECT_EQ(shared->stats().bytes_in_use, a.stats().persistent_bytes);
}

INSTANTIATE_TEST_SUITE_P(Codecs, ForkTest,
                         ::testing::Values("f16", "k4v2", "q8_0", "k3v3", "q4_0h"));

TEST(ForkTest, NoResidualWindowSharesThePartialPageUntilWritten) {
  const kv::KvConfig config = config_of("k4v2", 0, 0);
  RandomInputs x(kShape, 120, 3), y(kShape, 120, 4);
  ThreadPool pool(2);
  kv::KvCache a(kShape, config);
  feed(a, x, 0, 80, pool);  // pages of 32: two full, one partial
  auto b = a.fork();
  EXPECT_EQ(a.pool()->stats().shared_pages, 2 * 3);  // 2 layers x 3 pages
  feed(*b, y, 80, 1, pool);                          // copies the partial page of each layer
  EXPECT_EQ(a.pool()->stats().shared_pages, 2 * 2);
  std::vector<float> got, expect;
  feed(a, x, 80, 1, pool, &got);
  kv::KvCache c(kShape, config);
  feed(c, x, 0, 80, pool);
  feed(c, x, 80, 1, pool, &expect);
  EXPECT_EQ(got, expect);
}

TEST(ForkTest, BudgetExhaustionInForkCopyOnWriteOrBeginChunkChangesNothing) {
  const kv::KvConfig config = config_of("f16", 0, 0);  // 32-token f16 pages: 16 KiB per layer
  RandomInputs x(kShape, 200, 5);
  ThreadPool pool(1);
  const uint64_t page = 2 * 32 * 64 * 2 * 2;  // K + V of 2 heads
  auto shared = std::make_shared<kv::PagePool>(7 * page);
  kv::KvCache a(kShape, config, shared);
  feed(a, x, 0, 80, pool);  // 3 pages per layer: 6 of 7
  const kv::PoolStats before = shared->stats();
  auto b = a.fork();  // no sinks or ring: nothing to allocate
  // The next token of either must first copy the shared partial page of both
  // layers: 2 pages, 1 left.
  EXPECT_THROW(b->begin_chunk(1), kv::KvBudgetExceeded);
  EXPECT_THROW(a.begin_chunk(1), kv::KvBudgetExceeded);
  EXPECT_THROW(a.begin_chunk(40), kv::KvBudgetExceeded);  // copies and fresh pages
  EXPECT_EQ(a.n_tokens(), 80);
  EXPECT_EQ(b->n_tokens(), 80);
  EXPECT_EQ(shared->stats().bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(shared->stats().shared_pages, 6);
  // Once b is gone a's pages are its own again: it writes in place.
  b.reset();
  EXPECT_EQ(shared->stats().shared_pages, 0);
  std::vector<float> got, expect;
  feed(a, x, 80, 16, pool, &got);  // fills the third page of each layer
  // A fresh page per layer: 2 more, 1 left.
  EXPECT_THROW(a.begin_chunk(1), kv::KvBudgetExceeded);
  EXPECT_EQ(a.n_tokens(), 96);
  EXPECT_EQ(shared->stats().bytes_in_use, 6 * page);
  kv::KvCache c(kShape, config);
  feed(c, x, 0, 80, pool);
  feed(c, x, 80, 16, pool, &expect);
  EXPECT_EQ(got, expect);

  // Fork itself refused (k4v2: sinks and ring come from the pool).
  const kv::KvConfig q = config_of("k4v2");
  kv::KvCache probe(kShape, q);
  const uint64_t f16_area = probe.stats().f16_bytes;
  auto tight = std::make_shared<kv::PagePool>(f16_area + f16_area / 2);
  kv::KvCache s(kShape, q, tight);
  feed(s, x, 0, 20, pool);
  const kv::KvStats st = s.stats();
  EXPECT_THROW(s.fork(), kv::KvBudgetExceeded);
  EXPECT_EQ(tight->stats().bytes_in_use, st.persistent_bytes);
  EXPECT_EQ(s.n_tokens(), 20);
}

// A shared prompt is stored once: 8 forks of a 1024-token prefix, each
// decoding its own 16 tokens, hold the prefix's pages once plus, per fork,
// its sinks and ring and the pages it wrote (the copied partial page and at
// most one fresh page per layer).
TEST(ForkTest, ForksOfALongPrefixStoreItOnce) {
  const kv::KvShape shape{2, 8, 2, 64, 2048};
  kv::KvConfig config;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", config.k, config.v));
  RandomInputs x(shape, 1024 + 16, 12);
  ThreadPool pool(2);
  auto shared = std::make_shared<kv::PagePool>();
  kv::KvCache base(shape, config, shared);
  feed(base, x, 0, 1024, pool);
  const kv::KvStats one = base.stats();
  std::vector<std::unique_ptr<kv::KvCache>> forks;
  for (int i = 0; i < 8; ++i) forks.push_back(base.fork());
  for (auto& f : forks)
    for (int t = 1024; t < 1040; ++t) feed(*f, x, t, 1, pool);
  const uint64_t page = one.page_bytes / uint64_t(one.pages_allocated);
  const uint64_t bound =
      one.persistent_bytes + 8 * (one.f16_bytes + 2 * uint64_t(shape.n_layers) * page);
  const uint64_t used = shared->stats().bytes_in_use;
  EXPECT_LE(used, bound);
  uint64_t independent = 0;
  for (auto& f : forks) independent += f->stats().persistent_bytes;
  EXPECT_GT(independent, bound);  // what the bound rules out
  std::printf("8 forks of a 1024-token k4v2 prefix: %llu bytes in the pool, %llu if independent\n",
              static_cast<unsigned long long>(used), static_cast<unsigned long long>(independent));
}

// Forks of one prefix decoding at the same time on their own threads (own
// ThreadPool, own AttentionScratch), sharing pages and copying on write
// concurrently, give what each gives alone.
TEST(ForkTest, ForksDecodeConcurrentlyOnTheirOwnThreads) {
  const kv::KvConfig config = config_of("k4v2", 2, 8);
  constexpr int kForks = 4;
  std::vector<RandomInputs> tails;
  for (int i = 0; i < kForks; ++i) tails.emplace_back(kShape, 140, 100 + i);
  RandomInputs x(kShape, 105, 13);
  ThreadPool pool(2);
  std::vector<std::vector<float>> expect(kForks), got(kForks);
  for (int i = 0; i < kForks; ++i) {
    kv::KvCache c(kShape, config);
    feed(c, x, 0, 100, pool);
    for (int t = 100; t < 140; ++t) feed(c, tails[size_t(i)], t, 1, pool, &expect[size_t(i)]);
  }
  kv::KvCache base(kShape, config);
  feed(base, x, 0, 100, pool);
  std::vector<std::unique_ptr<kv::KvCache>> forks;
  for (int i = 0; i < kForks; ++i) forks.push_back(base.fork());
  std::vector<std::thread> threads;
  for (int i = 0; i < kForks; ++i)
    threads.emplace_back([&, i] {
      ThreadPool own(2);
      kv::AttentionScratch scratch;
      kv::KvCache& c = *forks[size_t(i)];
      const auto& sh = c.shape();
      const auto& in = tails[size_t(i)];
      for (int t = 100; t < 140; ++t) {
        c.begin_chunk(1);
        for (int l = 0; l < sh.n_layers; ++l) {
          std::vector<float> out(size_t(sh.n_heads) * sh.head_dim);
          c.write(l, in.layers[l].k.data() + size_t(t) * sh.n_kv_heads * sh.head_dim,
                  in.layers[l].v.data() + size_t(t) * sh.n_kv_heads * sh.head_dim, &own);
          c.attend(l, in.q[l].data() + size_t(t) * sh.n_heads * sh.head_dim, out.data(), own,
                   scratch);
          got[size_t(i)].insert(got[size_t(i)].end(), out.begin(), out.end());
        }
        c.end_chunk();
      }
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < kForks; ++i) EXPECT_EQ(got[size_t(i)], expect[size_t(i)]) << "fork " << i;
  // The base, whose pages the forks shared, goes on like a fresh sequence.
  std::vector<float> base_out, fresh_out;
  kv::KvCache fresh(kShape, config);
  feed(fresh, x, 0, 100, pool);
  for (int t = 100; t < 105; ++t) {
    feed(base, x, t, 1, pool, &base_out);
    feed(fresh, x, t, 1, pool, &fresh_out);
  }
  EXPECT_EQ(base_out, fresh_out);
}

// Truncate + re-append against the reference under the truncated-ring rule.
struct TruncateCase {
  const char* kv;
  int sinks, residual;
  std::vector<int> chunks;
  std::vector<std::pair<size_t, int64_t>> truncations;
};

void PrintTo(const TruncateCase& c, std::ostream* os) {
  *os << c.kv << " S=" << c.sinks << " R=" << c.residual;
  for (auto [i, n] : c.truncations) *os << " [" << i << "]->" << n;
}

class TruncateTest : public ::testing::TestWithParam<TruncateCase> {};

TEST_P(TruncateTest, ReappendMatchesReference) {
  const auto& tc = GetParam();
  Scenario s;
  s.shape = kShape;
  s.config = config_of(tc.kv, tc.sinks, tc.residual);
  s.chunks = tc.chunks;
  s.truncations = tc.truncations;
  s.threads = 2;
  int64_t rows = 0;
  for (int n : s.chunks) rows += n;
  RandomInputs in(s.shape, rows, 31);
  const auto r = run_scenario(s, in);
  EXPECT_GT(r.queries, 0);
  EXPECT_LT(r.max_rel_error, kTolerance);
}

std::vector<TruncateCase> truncate_cases() {
  std::vector<TruncateCase> out;
  const std::vector<int> chunks = {100, 1, 1, 1, 50, 1, 1, 20, 1, 1, 1};
  for (const char* kv : {"f16", "k4v2", "q8_0", "k3v3", "q4_0h"}) {
    // Into the ring (n > S + encoded), into a page mid-way, at a page
    // boundary, below the sinks, to zero; twice in a row.
    out.push_back({kv, 3, 20, chunks, {{4, 95}}});
    out.push_back({kv, 3, 20, chunks, {{4, 50}}});
    out.push_back({kv, 3, 20, chunks, {{4, 3 + 64}}});
    out.push_back({kv, 3, 20, chunks, {{4, 2}}});
    out.push_back({kv, 3, 20, chunks, {{4, 0}}});
    out.push_back({kv, 3, 20, chunks, {{4, 60}, {7, 70}, {9, 40}}});
    out.push_back({kv, 0, 0, chunks, {{4, 45}, {8, 100}}});
    out.push_back({kv, 4, 64, chunks, {{5, 90}, {8, 20}}});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cases, TruncateTest, ::testing::ValuesIn(truncate_cases()));

TEST(TruncateTest, PagesBeyondTheTruncationGoBackAndStatsFollow) {
  const kv::KvConfig config = config_of("k4v2", 4, 16);
  RandomInputs x(kShape, 300, 8);
  ThreadPool pool(1);
  kv::KvCache a(kShape, config);
  feed(a, x, 0, 260, pool);  // 240 encoded: 8 pages of 32 per layer
  EXPECT_EQ(a.stats().pages_allocated, 2 * 8);
  a.truncate(100);  // 96 encoded: 3 pages
  EXPECT_EQ(a.n_tokens(), 100);
  EXPECT_EQ(a.stats().pages_allocated, 2 * 3);
  EXPECT_EQ(a.stats().tokens_kept, 100);
  EXPECT_EQ(a.pool()->stats().bytes_in_use, a.stats().persistent_bytes);
  a.truncate(100);  // no-op
  EXPECT_EQ(a.n_tokens(), 100);
  EXPECT_THROW(a.truncate(101), Error);
  EXPECT_THROW(a.truncate(-1), Error);
  a.clear();
  EXPECT_EQ(a.stats().pages_allocated, 0);
  EXPECT_EQ(a.n_tokens(), 0);
}

TEST(TruncateTest, ForkThenTruncateCopiesTheSharedPartialPage) {
  const kv::KvConfig config = config_of("k4v2", 0, 0);
  RandomInputs x(kShape, 200, 9), y(kShape, 200, 10);
  ThreadPool pool(2);
  kv::KvCache a(kShape, config);
  feed(a, x, 0, 128, pool);
  auto b = a.fork();
  b->truncate(70);  // the page holding [64, 96) is shared and partly stale in b
  std::vector<float> got_b, got_a;
  for (int t = 70; t < 80; ++t) feed(*b, y, t, 1, pool, &got_b);
  for (int t = 128; t < 130; ++t) feed(a, x, t, 1, pool, &got_a);
  kv::KvCache c(kShape, config), d(kShape, config);
  std::vector<float> expect_a, expect_b;
  feed(c, x, 0, 128, pool);
  for (int t = 128; t < 130; ++t) feed(c, x, t, 1, pool, &expect_a);
  feed(d, x, 0, 70, pool);
  for (int t = 70; t < 80; ++t) feed(d, y, t, 1, pool, &expect_b);
  EXPECT_EQ(got_a, expect_a);
  // Without a residual window truncate leaves nothing in the wrong form: b
  // equals a sequence that never held the dropped tokens (up to the
  // summation order of different chunkings).
  ASSERT_EQ(got_b.size(), expect_b.size());
  for (size_t i = 0; i < got_b.size(); ++i) EXPECT_NEAR(got_b[i], expect_b[i], 1e-5) << i;
}

TEST(TruncateTest, WindowPolicyRefusesToReachEvictedPositions) {
  kv::KvConfig config = config_of("k4v2", 4, 16);
  config.window = 64;
  RandomInputs x(kShape, 400, 11);
  ThreadPool pool(1);
  kv::KvCache a(kShape, config);
  for (int t = 0; t < 300; t += 20) feed(a, x, t, 20, pool);
  const kv::KvStats before = a.stats();
  ASSERT_GT(before.n_tokens - before.tokens_kept, 100);  // pages were evicted
  try {
    a.truncate(150);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("window"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.n_tokens(), 300);
  EXPECT_EQ(a.stats().pages_allocated, before.pages_allocated);
  a.truncate(295);  // its window is still held
  EXPECT_EQ(a.n_tokens(), 295);
}

}  // namespace
}  // namespace tkv::test
