// One page pool shared by many sequences: refcounts, shared-byte accounting,
// one global budget, a system allocation failure told apart from a budget
// overrun, and sequences allocating from several threads at once.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv_test_harness.h"

#ifdef __SANITIZE_ADDRESS__
// The allocation-failure test asks for more than exists: under ASan that must
// come back as a null pointer (as from the C library), not abort the test.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}
#endif

namespace tkv::test {
namespace {

TEST(PagePoolTest, RefcountsAndSharedBytes) {
  kv::PagePool pool;
  uint8_t* a = pool.allocate(1000);
  uint8_t* b = pool.allocate(500);
  EXPECT_EQ(pool.refcount(a), 1);
  EXPECT_EQ(pool.stats().bytes_in_use, 1500u);
  EXPECT_EQ(pool.stats().shared_bytes, 0u);
  pool.retain(a);
  pool.retain(a);
  EXPECT_EQ(pool.refcount(a), 3);
  EXPECT_EQ(pool.stats().shared_bytes, 1000u);
  EXPECT_EQ(pool.stats().shared_pages, 1);
  EXPECT_EQ(pool.stats().pages, 2);
  pool.release(a, 1000);
  EXPECT_EQ(pool.stats().shared_bytes, 1000u);
  pool.release(a, 1000);
  EXPECT_EQ(pool.stats().shared_bytes, 0u);
  EXPECT_EQ(pool.stats().bytes_in_use, 1500u);
  pool.release(a, 1000);
  EXPECT_EQ(pool.refcount(a), 0);
  EXPECT_EQ(pool.stats().bytes_in_use, 500u);
  EXPECT_EQ(pool.stats().bytes_reserved, 1500u);  // free-listed
  // The free-listed bytes come back for the same size.
  EXPECT_EQ(pool.allocate(1000), a);
  pool.release(a, 1000);
  pool.release(b, 500);
  pool.trim();
  EXPECT_EQ(pool.stats().bytes_reserved, 0u);
}

TEST(PagePoolTest, SystemAllocationFailureIsNotABudgetOverrun) {
  kv::PagePool pool;  // unlimited budget: only the system can refuse
  try {
    pool.allocate(size_t(1) << 62);
    FAIL() << "expected KvOutOfMemory";
  } catch (const kv::KvBudgetExceeded&) {
    FAIL() << "reported as a budget overrun";
  } catch (const kv::KvOutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pool.stats().bytes_reserved, 0u);
  EXPECT_EQ(pool.stats().pages, 0);
}

kv::KvShape small_shape() {
  return kv::KvShape{1, 4, 2, 64, 4096};
}

// Feeds n tokens of constant data; returns false when the budget refused.
bool feed(kv::KvCache& c, int n, ThreadPool& tp) {
  const auto& sh = c.shape();
  std::vector<float> k(size_t(n) * sh.n_kv_heads * sh.head_dim, 0.5f),
      v = k, q(size_t(n) * sh.n_heads * sh.head_dim, 0.1f), out(q.size());
  try {
    c.begin_chunk(n);
  } catch (const kv::KvBudgetExceeded&) {
    return false;
  }
  for (int l = 0; l < sh.n_layers; ++l) {
    c.write(l, k.data(), v.data());
    c.attend(l, q.data(), out.data(), tp);
  }
  c.end_chunk();
  return true;
}

TEST(PagePoolTest, OneBudgetForEverySequence) {
  // f16, 2 KV heads x 64 dims: a 64-token page is 32 KiB; 5 pages fit.
  auto pool = std::make_shared<kv::PagePool>(5 * 32 * 1024);
  kv::KvConfig config;
  config.budget_bytes = 1;  // ignored: the pool has the budget
  kv::KvCache a(small_shape(), config, pool), b(small_shape(), config, pool);
  ThreadPool tp(1);
  EXPECT_TRUE(feed(a, 192, tp));  // 3 pages
  EXPECT_TRUE(feed(b, 128, tp));  // 2 pages
  EXPECT_FALSE(feed(b, 64, tp));  // the pool is full, whichever sequence asks
  EXPECT_FALSE(feed(a, 1, tp));
  EXPECT_EQ(a.n_tokens(), 192);
  EXPECT_EQ(b.n_tokens(), 128);
  EXPECT_EQ(pool->stats().bytes_in_use, a.stats().persistent_bytes + b.stats().persistent_bytes);
  EXPECT_EQ(a.stats().exclusive_bytes, a.stats().persistent_bytes);
  EXPECT_EQ(a.stats().shared_bytes, 0u);
  a.clear();  // its pages go back to the shared pool: b can grow
  EXPECT_TRUE(feed(b, 64, tp));
  EXPECT_EQ(b.n_tokens(), 192);
}

TEST(PagePoolTest, ThreadsAllocateFromOnePoolAtOnce) {
  constexpr uint64_t kBudget = 64 * 4096;
  kv::PagePool pool(kBudget);
  std::atomic<int64_t> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<uint8_t*, size_t>> held;
      for (int i = 0; i < 4000; ++i) {
        if (held.empty() || rng() % 3 != 0) {
          const size_t bytes = 1024 * (1 + rng() % 4);
          try {
            uint8_t* p = pool.allocate(bytes);
            p[0] = p[bytes - 1] = uint8_t(t);  // the bytes are ours
            held.emplace_back(p, bytes);
            if (rng() % 4 == 0) {  // a second holder, dropped at once
              pool.retain(p);
              pool.release(p, bytes);
            }
          } catch (const kv::KvBudgetExceeded&) {
            ++refused;
          }
        } else {
          const size_t k = rng() % held.size();
          EXPECT_EQ(held[k].first[0], uint8_t(t));
          pool.release(held[k].first, held[k].second);
          held.erase(held.begin() + std::ptrdiff_t(k));
        }
        EXPECT_LE(pool.bytes_reserved(), kBudget);
      }
      for (auto& [p, bytes] : held) pool.release(p, bytes);
    });
  for (auto& th : threads) th.join();
  EXPECT_GT(refused.load(), 0);  // the budget was reached, concurrently
  EXPECT_EQ(pool.stats().bytes_in_use, 0u);
  EXPECT_EQ(pool.stats().pages, 0);
  EXPECT_EQ(pool.stats().shared_bytes, 0u);
}

TEST(PagePoolTest, SequencesOnThreadsShareOnePool) {
  auto pool = std::make_shared<kv::PagePool>();
  kv::KvConfig config;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", config.k, config.v));
  std::vector<std::thread> threads;
  std::vector<uint64_t> bytes(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      ThreadPool tp(1);
      kv::KvCache c(small_shape(), config, pool);
      for (int i = 0; i < 10; ++i) ASSERT_TRUE(feed(c, 40 + t, tp));
      bytes[t] = c.stats().persistent_bytes;
      c.clear();
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_GT(bytes[t], 0u);
  EXPECT_EQ(pool->stats().bytes_in_use, 0u);
}

}  // namespace
}  // namespace tkv::test
