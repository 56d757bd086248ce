// A sequence's recurrent states (KvShape::recurrent, kv/recurrent_state.h)
// without a model: zeroed at the start, pool-allocated under the budget,
// shared by a fork and copied by the first chunk that writes them
// (copy-on-write), all-or-nothing when the budget is short, saved and
// loaded with the session file, and no truncation but to the end or to 0.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv_test_harness.h"
#include "test_util.h"

namespace tkv::test {
namespace {

constexpr int64_t kStateA = 300, kStateB = 1000;
constexpr uint64_t kStateBytes = (kStateA + kStateB) * sizeof(float);

kv::KvShape hybrid_shape(std::vector<int64_t> recurrent = {kStateA, kStateB}) {
  kv::KvShape s{1, 4, 2, 64, 256};
  s.recurrent = std::move(recurrent);
  return s;
}

kv::KvConfig config() {
  kv::KvConfig c;  // f16 K and V, no sinks or residual: every token in a page
  c.page_tokens = 32;
  return c;
}

using States = std::vector<std::vector<float>>;

// (Pinned while read: with the pool's disk tier a state may be on disk.)
States states_of(kv::KvCache& c) {
  States out;
  for (size_t r = 0; r < c.shape().recurrent.size(); ++r) {
    const kv::PagePins pinned = c.pin_state(int(r));
    out.emplace_back(c.state(int(r)), c.state(int(r)) + c.shape().recurrent[r]);
  }
  return out;
}

// One chunk of n tokens of `in` from position `from` that also updates
// every recurrent state in place, as a model's recurrent layer does:
// s[i] = s[i] * 0.5 + step + i.
void chunk(kv::KvCache& c, const RandomInputs& in, ThreadPool& pool, int64_t from, int n,
           float step) {
  const kv::KvShape& s = c.shape();
  c.begin_chunk(n);
  for (size_t r = 0; r < s.recurrent.size(); ++r) {
    const kv::PagePins pinned = c.pin_state(int(r));
    float* st = c.state(int(r));
    for (int64_t i = 0; i < s.recurrent[r]; ++i) st[i] = st[i] * 0.5f + step + float(i);
  }
  const size_t kv_row = size_t(s.n_kv_heads) * s.head_dim, q_row = size_t(s.n_heads) * s.head_dim;
  std::vector<float> out(size_t(n) * q_row);
  c.write(0, in.layers[0].k.data() + size_t(from) * kv_row,
          in.layers[0].v.data() + size_t(from) * kv_row);
  c.attend(0, in.q[0].data() + size_t(from) * q_row, out.data(), pool);
  c.end_chunk();
}

bool all_zero(const States& s) {
  for (const auto& v : s)
    if (!std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; })) return false;
  return true;
}

TEST(RecurrentState, StartsZeroedAndIsCounted) {
  auto pool = std::make_shared<kv::PagePool>();
  kv::KvCache plain(kv::KvShape{1, 4, 2, 64, 256}, config(), pool);
  const uint64_t without = pool->stats().bytes_in_use;
  kv::KvCache c(hybrid_shape(), config(), pool);
  EXPECT_EQ(pool->stats().bytes_in_use, 2 * without + kStateBytes);
  const States s = states_of(c);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].size(), size_t(kStateA));
  EXPECT_TRUE(all_zero(s));
  const kv::KvStats st = c.stats();
  EXPECT_EQ(st.state_bytes, kStateBytes);
  EXPECT_EQ(st.persistent_bytes, st.page_bytes + st.f16_bytes + st.summary_bytes + kStateBytes);
  EXPECT_EQ(st.exclusive_bytes, st.persistent_bytes);
}

TEST(RecurrentState, ForkSharesUntilAChunkWrites) {
  ThreadPool pool(1);
  RandomInputs in(hybrid_shape(), 64, 1);
  kv::KvCache parent(hybrid_shape(), config());
  chunk(parent, in, pool, 0, 10, 1.0f);
  const States before = states_of(parent);
  const uint64_t page_bytes = parent.stats().page_bytes;
  ASSERT_GT(page_bytes, 0u);

  auto child = parent.fork();
  EXPECT_EQ(states_of(*child), before);
  EXPECT_EQ(child->state(1), parent.state(1)) << "shared, not copied";
  EXPECT_EQ(child->stats().shared_bytes, page_bytes + kStateBytes);
  EXPECT_EQ(parent.stats().shared_bytes, page_bytes + kStateBytes);
  EXPECT_EQ(parent.pool()->stats().shared_bytes, page_bytes + kStateBytes);

  chunk(*child, in, pool, 10, 3, 7.0f);
  EXPECT_NE(child->state(1), parent.state(1));
  EXPECT_EQ(states_of(parent), before) << "the child's writes reached the parent";
  EXPECT_NE(states_of(*child), before);
  EXPECT_EQ(child->stats().shared_bytes, 0u);
  EXPECT_EQ(parent.stats().shared_bytes, 0u);
  EXPECT_EQ(child->stats().state_bytes, kStateBytes);

  // The parent's own next chunk gives what an unforked sequence gives.
  kv::KvCache alone(hybrid_shape(), config());
  chunk(alone, in, pool, 0, 10, 1.0f);
  chunk(alone, in, pool, 10, 2, 3.0f);
  chunk(parent, in, pool, 10, 2, 3.0f);
  EXPECT_EQ(states_of(parent), states_of(alone));
}

TEST(RecurrentState, BudgetTooSmallForTheStatesChangesNothing) {
  auto small = std::make_shared<kv::PagePool>(kStateBytes - 64);
  EXPECT_THROW(kv::KvCache(hybrid_shape(), config(), small), kv::KvBudgetExceeded);
  EXPECT_EQ(small->stats().bytes_in_use, 0u) << "a failed constructor kept bytes";

  // Exactly what a sequence of 10 tokens and its fork hold, the tokens in
  // the f16 ring (no page): the fork's first chunk needs only copies of
  // the states, which do not fit; with room for them it runs.
  kv::KvConfig ring = config();
  ring.sinks = 4;
  ring.residual = 64;
  ThreadPool pool(1);
  RandomInputs in(hybrid_shape(), 64, 2);
  uint64_t needed = 0;
  {
    kv::KvCache trial(hybrid_shape(), ring);
    chunk(trial, in, pool, 0, 10, 1.0f);
    ASSERT_EQ(trial.stats().page_bytes, 0u);
    auto f = trial.fork();
    needed = trial.pool()->stats().bytes_reserved;
  }
  for (uint64_t spare : {uint64_t(0), kStateBytes}) {
    auto tight = std::make_shared<kv::PagePool>(needed + spare);
    kv::KvCache parent(hybrid_shape(), ring, tight);
    chunk(parent, in, pool, 0, 10, 1.0f);
    auto child = parent.fork();
    const States before = states_of(*child);
    if (spare > 0) {
      chunk(*child, in, pool, 10, 1, 2.0f);
      EXPECT_NE(child->state(0), parent.state(0));
      EXPECT_EQ(states_of(parent), before);
      continue;
    }
    const kv::KvStats child_stats = child->stats();
    const kv::PoolStats pool_stats = tight->stats();
    EXPECT_THROW(child->begin_chunk(1), kv::KvBudgetExceeded);
    EXPECT_EQ(child->n_tokens(), 10);
    EXPECT_EQ(child->state(0), parent.state(0)) << "still shared";
    EXPECT_EQ(states_of(*child), before);
    EXPECT_EQ(child->stats().shared_bytes, child_stats.shared_bytes);
    EXPECT_EQ(tight->stats().bytes_in_use, pool_stats.bytes_in_use);
    EXPECT_EQ(tight->stats().shared_bytes, pool_stats.shared_bytes);
  }
}

// clear() (truncate(0)) of a fork whose states are shared needs fresh
// zeroed states; when the budget cannot hold them the sequence must stay
// as it was (or be cleared completely), never half cleared.
TEST(RecurrentState, ClearOfAForkUnderAFullBudgetIsAllOrNothing) {
  ThreadPool pool(1);
  RandomInputs in(hybrid_shape(), 64, 3);
  uint64_t needed = 0;
  {
    kv::KvCache trial(hybrid_shape(), config());
    chunk(trial, in, pool, 0, 10, 1.0f);
    auto f = trial.fork();
    needed = trial.pool()->stats().bytes_reserved;
  }
  auto tight = std::make_shared<kv::PagePool>(needed);
  kv::KvCache parent(hybrid_shape(), config(), tight);
  chunk(parent, in, pool, 0, 10, 1.0f);
  auto child = parent.fork();
  const States before = states_of(*child);
  const kv::KvStats stats = child->stats();
  try {
    child->truncate(0);
    EXPECT_EQ(child->n_tokens(), 0);
    EXPECT_TRUE(all_zero(states_of(*child)));
  } catch (const kv::KvBudgetExceeded&) {
    EXPECT_EQ(child->n_tokens(), 10);
    EXPECT_EQ(child->stats().page_bytes, stats.page_bytes) << "pages dropped, tokens kept";
    EXPECT_EQ(states_of(*child), before);
  }
  EXPECT_EQ(states_of(parent), before);
  EXPECT_EQ(parent.n_tokens(), 10);
}

TEST(RecurrentState, SessionFileRoundTrip) {
  ThreadPool pool(1);
  RandomInputs in(hybrid_shape(), 64, 4);
  kv::KvCache saved(hybrid_shape(), config());
  chunk(saved, in, pool, 0, 10, 1.0f);
  chunk(saved, in, pool, 10, 5, 2.0f);
  const std::string path = temp_dir() + "/recurrent.session";
  saved.save(path, "model-a");

  // Loaded into a fork: the fork's own state is replaced, its parent's kept.
  kv::KvCache parent(hybrid_shape(), config());
  chunk(parent, in, pool, 0, 4, 9.0f);
  const States parent_before = states_of(parent);
  auto loaded = parent.fork();
  loaded->load(path, "model-a");
  EXPECT_EQ(loaded->n_tokens(), 15);
  EXPECT_EQ(states_of(*loaded), states_of(saved));
  EXPECT_EQ(states_of(parent), parent_before);
  EXPECT_EQ(loaded->stats().state_bytes, kStateBytes);

  // Both go on alike.
  chunk(saved, in, pool, 15, 1, 4.0f);
  chunk(*loaded, in, pool, 15, 1, 4.0f);
  EXPECT_EQ(states_of(*loaded), states_of(saved));
}

TEST(RecurrentState, SessionOfOtherRecurrentSizesIsRefused) {
  ThreadPool pool(1);
  RandomInputs in(hybrid_shape(), 64, 5);
  kv::KvCache saved(hybrid_shape(), config());
  chunk(saved, in, pool, 0, 10, 1.0f);
  const std::string path = temp_dir() + "/recurrent.session";
  saved.save(path, "model-a");
  for (const std::vector<int64_t>& other :
       {std::vector<int64_t>{kStateA, kStateB + 1}, std::vector<int64_t>{kStateA},
        std::vector<int64_t>{}}) {
    kv::KvCache c(hybrid_shape(other), config());
    chunk(c, in, pool, 0, 3, 5.0f);
    const States before = states_of(c);
    try {
      c.load(path, "model-a");
      ADD_FAILURE() << "loaded a session of states " << kStateA << "," << kStateB << " into "
                    << other.size() << " states";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(kStateB)), std::string::npos) << e.what();
    }
    EXPECT_EQ(c.n_tokens(), 3);
    EXPECT_EQ(states_of(c), before);
  }
}

// With the pool's disk tier, states no chunk is updating move to disk like
// pages when the budget needs their RAM (states of idle sequences and
// snapshots past it), and come back unchanged: read, updated by the next
// chunk, restored from a snapshot, saved to a session file.
TEST(RecurrentState, StatesMoveToTheDiskTierAndBackUnchanged) {
  const std::string dir = temp_dir() + "/state_spill_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<int64_t> big = {40000, 24000};  // 256 KB a sequence
  const uint64_t state_bytes = (40000 + 24000) * sizeof(float);
  constexpr int kSequences = 8;
  auto pool = std::make_shared<kv::PagePool>(3 * state_bytes, dir);
  ThreadPool threads(1);
  RandomInputs in(hybrid_shape(big), 64, 11);
  std::vector<std::unique_ptr<kv::KvCache>> seqs;
  std::vector<States> expected;
  for (int i = 0; i < kSequences; ++i) {
    seqs.push_back(std::make_unique<kv::KvCache>(hybrid_shape(big), config(), pool));
    chunk(*seqs.back(), in, threads, 0, 8, float(i + 1));
    seqs.back()->snapshot();
    expected.push_back(states_of(*seqs.back()));
  }
  EXPECT_GT(pool->stats().spilled_bytes, 0u) << "the states of 8 sequences exceed the budget";
  EXPECT_LE(pool->bytes_reserved(), 3 * state_bytes);
  for (int i = 0; i < kSequences; ++i) EXPECT_EQ(states_of(*seqs[size_t(i)]), expected[size_t(i)]);

  // The next chunk updates the state read back from disk; truncate goes
  // back to the snapshot (shared with the state until that chunk).
  kv::KvCache& first = *seqs[0];
  chunk(first, in, threads, 8, 4, 20.0f);
  EXPECT_NE(states_of(first), expected[0]);
  for (int i = 1; i < kSequences; ++i) states_of(*seqs[size_t(i)]);  // the first's to disk
  first.truncate(8);
  EXPECT_EQ(states_of(first), expected[0]);

  const std::string path = dir + "/spilled.session";
  seqs[3]->save(path, "model-a");
  kv::KvCache loaded(hybrid_shape(big), config(), pool);
  loaded.load(path, "model-a");
  EXPECT_EQ(states_of(loaded), expected[3]);
  EXPECT_GT(pool->stats().spill_reads, 0);
  seqs.clear();
  std::filesystem::remove_all(dir);
}

TEST(RecurrentState, TruncateOnlyToTheEndOrZero) {
  ThreadPool pool(1);
  RandomInputs in(hybrid_shape(), 64, 6);
  kv::KvCache c(hybrid_shape(), config());
  chunk(c, in, pool, 0, 10, 1.0f);
  EXPECT_TRUE(c.can_truncate(10));
  EXPECT_TRUE(c.can_truncate(0));
  EXPECT_FALSE(c.can_truncate(5));
  EXPECT_FALSE(c.can_truncate(11));
  EXPECT_FALSE(c.can_truncate(-1));
  const States before = states_of(c);
  EXPECT_THROW(c.truncate(5), Error);
  EXPECT_EQ(c.n_tokens(), 10);
  EXPECT_EQ(states_of(c), before);
  c.truncate(10);
  EXPECT_EQ(states_of(c), before);
  c.truncate(0);
  EXPECT_EQ(c.n_tokens(), 0);
  EXPECT_TRUE(all_zero(states_of(c)));
  EXPECT_EQ(c.stats().state_bytes, kStateBytes);

  // Without recurrent layers the same sequence may go back anywhere.
  kv::KvCache plain(kv::KvShape{1, 4, 2, 64, 256}, config());
  chunk(plain, in, pool, 0, 10, 1.0f);
  EXPECT_TRUE(plain.can_truncate(5));
}

}  // namespace
}  // namespace tkv::test
