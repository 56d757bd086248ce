// The paged store and the fused attention driver against the reference:
// every codec pair, GQA ratios, head dims, thread counts, chunkings and
// policies; plus accounting, eviction, budget and persistence.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "common/error.h"
#include "kv/kv_cache.h"
#include "kv/page_pool.h"
#include "kv_test_harness.h"
#include "test_util.h"

namespace tkv::test {
namespace {

using kv::CodecSpec;
using kv::KvConfig;
using kv::KvShape;

constexpr double kTolerance = 1e-4;

CodecSpec codec(const char* name) {
  auto c = kv::parse_codec(name);
  EXPECT_TRUE(c.has_value()) << name;
  return c.value_or(CodecSpec{});
}

KvShape shape(int heads, int kv_heads, int hd, int layers = 2, int max_tokens = 4096) {
  return KvShape{layers, heads, kv_heads, hd, max_tokens};
}

const char* kCodecs[] = {"f32", "f16", "q8_0", "q8_0h", "q4_0", "q4_0h",
                         "tq1", "tq2", "tq3",  "tq4",   "tq4r"};

// Every K codec x every V codec, default policy, chunked prefill + decode.
class CodecPairTest : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(CodecPairTest, FusedMatchesReference) {
  const auto [kname, vname] = GetParam();
  Scenario s;
  s.shape = shape(4, 2, 64);
  s.config.k = codec(kname);
  s.config.v = codec(vname);
  s.config.sinks = 3;
  s.config.residual = 20;
  s.chunks = {37, 1, 1, 50, 1, 13, 1};
  s.threads = 2;
  RandomInputs in(s.shape, 104, 7);
  const auto r = run_scenario(s, in);
  EXPECT_EQ(r.queries, 104 * 2);
  EXPECT_LT(r.max_rel_error, kTolerance) << kname << "/" << vname;
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CodecPairTest,
                         ::testing::Combine(::testing::ValuesIn(kCodecs),
                                            ::testing::ValuesIn(kCodecs)));

// GQA ratios x thread counts x head dims for the main pairs, policy on and off.
struct GeometryCase {
  int heads, kv_heads, hd, threads;
  const char* kv;
  bool policy;
};

void PrintTo(const GeometryCase& g, std::ostream* os) {
  *os << g.kv << " heads " << g.heads << "/" << g.kv_heads << " hd " << g.hd << " threads "
      << g.threads << (g.policy ? " policy" : " no-policy");
}

class GeometryTest : public ::testing::TestWithParam<GeometryCase> {};

TEST_P(GeometryTest, FusedMatchesReference) {
  const auto& g = GetParam();
  Scenario s;
  s.shape = shape(g.heads, g.kv_heads, g.hd);
  ASSERT_TRUE(kv::parse_kv_shorthand(g.kv, s.config.k, s.config.v));
  if (!g.policy) s.config.sinks = s.config.residual = 0;
  s.chunks = {70, 1, 1, 1, 64, 1, 2};  // 140 tokens: not a multiple of the page
  s.threads = g.threads;
  RandomInputs in(s.shape, 140, 11 + g.hd);
  const auto r = run_scenario(s, in);
  EXPECT_LT(r.max_rel_error, kTolerance);
}

std::vector<GeometryCase> geometry_cases() {
  std::vector<GeometryCase> cases;
  for (const char* kv : {"f16", "k4v2", "q8_0"})
    for (int ratio : {1, 2, 4, 8})
      for (int threads : {1, 2, 3, 4})
        cases.push_back({2 * ratio, 2, 64, threads, kv, threads % 2 == 0});
  for (int hd : {8, 32, 96, 128, 256})
    for (const char* kv : {"f16", "k4v2", "k3v3", "q4_0h"})
      cases.push_back({4, 2, hd, 2, kv, true});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Geometry, GeometryTest, ::testing::ValuesIn(geometry_cases()));

// One KV head and many threads: the context is split across threads (split-K)
// and merged with log-sum-exp.
TEST(KvCacheTest, SplitKMatchesReference) {
  for (const char* kv : {"f16", "k4v2"}) {
    Scenario s;
    s.shape = shape(4, 1, 64, 1);
    ASSERT_TRUE(kv::parse_kv_shorthand(kv, s.config.k, s.config.v));
    s.chunks = {500};
    for (int i = 0; i < 8; ++i) s.chunks.push_back(1);
    s.threads = 4;
    RandomInputs in(s.shape, 508, 5);
    EXPECT_LT(run_scenario(s, in).max_rel_error, kTolerance) << kv;
  }
}

// Per-query policy semantics make the result independent of how the
// sequence was chunked (up to float summation order).
TEST(KvCacheTest, ChunkingDoesNotChangeResults) {
  KvShape sh = shape(4, 2, 64);
  RandomInputs in(sh, 200, 3);
  std::vector<std::vector<int>> chunkings = {{200}, {64, 64, 72}, {7, 100, 93}, {}};
  for (int i = 0; i < 200; ++i) chunkings.back().push_back(1);
  for (const char* kv : {"f16", "k4v2", "q4_0h"}) {
    std::vector<std::vector<float>> first;
    for (const auto& chunks : chunkings) {
      Scenario s;
      s.shape = sh;
      ASSERT_TRUE(kv::parse_kv_shorthand(kv, s.config.k, s.config.v));
      s.chunks = chunks;
      s.threads = 2;
      const auto r = run_scenario(s, in, /*check=*/false);
      if (first.empty()) {
        first = r.outputs;
        continue;
      }
      for (int l = 0; l < sh.n_layers; ++l) {
        ASSERT_EQ(first[l].size(), r.outputs[l].size());
        double err = 0;
        for (size_t i = 0; i < first[l].size(); ++i)
          err = std::max(err, double(std::fabs(first[l][i] - r.outputs[l][i])));
        EXPECT_LT(err, 1e-5) << kv << " layer " << l;
      }
    }
  }
}

// A layer left open for more readers (a model's KV-shared layers: layer 0
// read again after layer 1 was written and attended) gives its second
// reader exactly what its first saw, and the last reader's commit leaves
// the cache as one read would: the next chunks' outputs are the bits of a
// cache read once per layer.
TEST(KvCacheTest, AnOpenLayerGivesLaterReadersWhatTheFirstSaw) {
  const KvShape sh = shape(4, 2, 64);
  RandomInputs in(sh, 300, 9);
  ThreadPool pool(2);
  for (const char* kv : {"k4v2", "f16"}) {
    kv::KvCache once(sh, kv_config(kv, 4, 32)), twice(sh, kv_config(kv, 4, 32));
    int64_t pos = 0;
    for (const int n : {100, 37, 1, 1, 70, 1}) {
      std::vector<float> want;
      feed_chunk(once, in, pool, pos, n, &want);
      std::vector<float> first(size_t(n) * 4 * 64), again(first.size()), other(first.size());
      const size_t kw = 2 * 64, qw = 4 * 64;
      twice.begin_chunk(n);
      twice.write(0, in.layers[0].k.data() + pos * kw, in.layers[0].v.data() + pos * kw);
      twice.attend(0, in.q[0].data() + pos * qw, first.data(), pool, {.more_readers = true});
      twice.write(1, in.layers[1].k.data() + pos * kw, in.layers[1].v.data() + pos * kw);
      twice.attend(1, in.q[1].data() + pos * qw, other.data(), pool);
      twice.attend(0, in.q[0].data() + pos * qw, again.data(), pool);
      twice.end_chunk();
      EXPECT_EQ(again, first) << kv << " chunk at " << pos;
      const std::vector<float> got_0(want.begin(), want.begin() + ptrdiff_t(first.size()));
      const std::vector<float> got_1(want.begin() + ptrdiff_t(first.size()), want.end());
      EXPECT_EQ(first, got_0) << kv << " chunk at " << pos;
      EXPECT_EQ(other, got_1) << kv << " chunk at " << pos;
      pos += n;
    }
  }
}

TEST(KvCacheTest, WindowPolicyKeepsSinksPlusWindowAndFlatMemory) {
  Scenario s;
  s.shape = shape(4, 2, 64);
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", s.config.k, s.config.v));
  s.config.sinks = 4;
  s.config.residual = 16;
  s.config.window = 100;
  s.chunks = {150};
  for (int i = 0; i < 40; ++i) s.chunks.push_back(1);
  s.chunks.push_back(60);
  s.threads = 2;
  RandomInputs in(s.shape, 250, 9);
  EXPECT_LT(run_scenario(s, in).max_rel_error, kTolerance);

  // Memory: once the window is full, persistent bytes stop growing.
  kv::KvCache cache(s.shape, s.config);
  ThreadPool pool(1);
  std::vector<float> k(2 * 64), v(2 * 64), q(4 * 64, 0.1f), out(4 * 64);
  uint64_t max_early = 0, max_late = 0;
  for (int t = 0; t < 1200; ++t) {
    for (int i = 0; i < 128; ++i) k[i] = v[i] = float((t * 31 + i) % 17) / 17.0f;
    cache.begin_chunk(1);
    for (int l = 0; l < 2; ++l) {
      cache.write(l, k.data(), v.data());
      cache.attend(l, q.data(), out.data(), pool);
    }
    cache.end_chunk();
    const auto st = cache.stats();
    if (t + 1 >= 104) {
      EXPECT_EQ(st.tokens_kept, 104);
    }
    // Sinks + residual + at most ceil(W / P) + 1 pages, whatever the length.
    EXPECT_LE(st.pages_allocated, 2 * ((100 + 63) / 64 + 1));
    if (t + 1 >= 200 && t + 1 < 400) max_early = std::max(max_early, st.persistent_bytes);
    if (t + 1 >= 400) max_late = std::max(max_late, st.persistent_bytes);
  }
  EXPECT_EQ(cache.n_tokens(), 1200);
  EXPECT_GT(max_early, 0u);
  EXPECT_EQ(max_late, max_early);
}

TEST(KvCacheTest, ResidualMigratesAsTokensAge) {
  KvConfig c;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  c.sinks = 4;
  c.residual = 64;
  kv::KvCache cache(shape(4, 2, 128, 1), c);
  ThreadPool pool(1);
  std::vector<float> k(2 * 128, 0.5f), v(2 * 128, 0.25f), q(4 * 128, 0.1f), out(4 * 128);
  auto step = [&] {
    cache.begin_chunk(1);
    cache.write(0, k.data(), v.data());
    cache.attend(0, q.data(), out.data(), pool);
    cache.end_chunk();
  };
  for (int i = 0; i < 68; ++i) step();  // 4 sinks + 64 residual: nothing encoded yet
  EXPECT_EQ(cache.stats().pages_allocated, 0);
  step();  // the 69th token pushes the oldest residual token into the first page
  EXPECT_EQ(cache.stats().pages_allocated, 1);
  for (int i = 0; i < 64; ++i) step();  // 65 encoded tokens: two pages
  EXPECT_EQ(cache.stats().pages_allocated, 2);
  // Exactly the layout predicts: K tq4 66 B + V tq2 34 B per token per head at d=128.
  const auto st = cache.stats();
  EXPECT_DOUBLE_EQ(st.k_bytes_per_token_head + st.v_bytes_per_token_head, 100.0);
  EXPECT_EQ(st.page_bytes, 2u * 2 * 64 * 100);
  EXPECT_EQ(st.f16_bytes, 2u * 2 * 128 * 2 * (16 + 64));  // sinks rounded up to 16 slots
}

TEST(KvCacheTest, LayerOverrideUsesItsCodec) {
  Scenario s;
  s.shape = shape(4, 2, 64, 3);
  ASSERT_TRUE(kv::parse_kv_shorthand("k2v2", s.config.k, s.config.v));
  s.config.overrides = kv::parse_layer_overrides("0,-1:k8v4");
  s.chunks = {90, 1, 1};
  s.threads = 2;
  RandomInputs in(s.shape, 92, 4);
  EXPECT_LT(run_scenario(s, in).max_rel_error, kTolerance);
  EXPECT_EQ(s.config.k_for(2, 3).name(), "q8_0h");
  EXPECT_EQ(s.config.k_for(1, 3).name(), "tq2");
  EXPECT_EQ(s.config.v_for(0, 3).name(), "tq4");
}

TEST(KvCacheTest, OutlierChannelKeysStayAccurate) {
  Scenario s;
  s.shape = shape(4, 2, 128, 1);
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", s.config.k, s.config.v));
  s.chunks = {120, 1, 1};
  RandomInputs in(s.shape, 122, 12, /*outlier=*/100.0f);
  EXPECT_LT(run_scenario(s, in).max_rel_error, kTolerance);
}

TEST(KvCacheTest, ScratchDoesNotGrowWithContext) {
  KvConfig c;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  kv::KvCache cache(shape(8, 2, 64, 1, 8192), c);
  ThreadPool pool(2);
  std::vector<float> k(64 * 2 * 64, 0.3f), v(64 * 2 * 64, 0.2f), q(64 * 8 * 64, 0.1f),
      out(64 * 8 * 64);
  uint64_t peak_at_1k = 0;
  for (int t = 0; t < 4096; t += 64) {
    cache.begin_chunk(64);
    cache.write(0, k.data(), v.data());
    cache.attend(0, q.data(), out.data(), pool);
    cache.end_chunk();
    if (t + 64 == 1024) peak_at_1k = cache.stats().peak_scratch_bytes;
  }
  EXPECT_GT(peak_at_1k, 0u);
  EXPECT_EQ(cache.stats().peak_scratch_bytes, peak_at_1k);
}

TEST(KvCacheTest, BudgetExceededLeavesCacheUsable) {
  KvConfig c;
  c.budget_bytes = 300 * 1024;
  kv::KvCache cache(shape(4, 2, 64, 1), c);  // f16: 64 tokens x 2 heads x 256 B = 32 KiB per page
  ThreadPool pool(1);
  std::vector<float> k(64 * 2 * 64, 1.0f), v(64 * 2 * 64, 1.0f), q(64 * 4 * 64, 0.f),
      out(64 * 4 * 64);
  int64_t written = 0;
  bool thrown = false;
  for (int i = 0; i < 20 && !thrown; ++i) {
    try {
      cache.begin_chunk(64);
    } catch (const kv::KvBudgetExceeded& e) {
      thrown = true;
      EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos);
      break;
    }
    cache.write(0, k.data(), v.data());
    cache.attend(0, q.data(), out.data(), pool);
    cache.end_chunk();
    written += 64;
  }
  EXPECT_TRUE(thrown);
  EXPECT_EQ(cache.n_tokens(), written);
  EXPECT_LE(cache.stats().persistent_bytes, c.budget_bytes);
  // After the failure the sequence can go on (e.g. after clear()).
  cache.clear();
  cache.begin_chunk(64);
  cache.write(0, k.data(), v.data());
  cache.attend(0, q.data(), out.data(), pool);
  cache.end_chunk();
  EXPECT_EQ(cache.n_tokens(), 64);
}

TEST(KvCacheTest, RoomIsTheContextLeftUnlessAWindowBoundsMemory) {
  kv::KvCache cache(shape(4, 2, 64, 1, 100), KvConfig{});
  EXPECT_EQ(cache.room(), 100);
  cache.begin_chunk(30);
  std::vector<float> k(30 * 2 * 64, 0.5f), q(30 * 4 * 64, 0.1f), out(q.size());
  ThreadPool pool(1);
  cache.write(0, k.data(), k.data());
  cache.attend(0, q.data(), out.data(), pool);
  cache.end_chunk();
  EXPECT_EQ(cache.room(), 70);
  EXPECT_THROW(cache.begin_chunk(71), Error);
  KvConfig w;
  w.window = 50;
  EXPECT_EQ(kv::KvCache(shape(4, 2, 64, 1, 100), w).room(), std::numeric_limits<int64_t>::max());
}

TEST(KvCacheTest, ContextLimitIsAClearError) {
  kv::KvCache cache(shape(4, 2, 64, 1, 100), KvConfig{});
  try {
    cache.begin_chunk(101);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "context full: 0 + 101 tokens, the context holds 100 (a window policy lets a "
                 "sequence run past it)");
  }
}

// The cache speaks of its own configuration; the command line adds its flag
// names (cli/common_flags.cc).
std::string construction_error(const KvShape& s, const KvConfig& c) {
  try {
    kv::KvCache cache(s, c);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string override_error(const char* text) {
  try {
    kv::parse_layer_overrides(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(KvCacheTest, BadConfigurationsAreRejected) {
  KvConfig c;
  c.page_tokens = 24;
  EXPECT_EQ(construction_error(shape(4, 2, 64), c),
            "KV cache: page size 24: must be a multiple of 16 in [16, 4096]");
  c = KvConfig{};
  c.overrides = kv::parse_layer_overrides("5:k4v4");
  EXPECT_EQ(construction_error(shape(4, 2, 64), c),
            "KV cache: layer override for layer 5: the model has 2 layers");
  c = KvConfig{};
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", c.k, c.v));
  c.window = 32;  // not larger than the default residual (64)
  EXPECT_EQ(construction_error(shape(4, 2, 64), c),
            "KV cache: window 32 must be larger than the residual window (64 tokens)");
  c = KvConfig{};
  c.sinks = 2000;
  EXPECT_EQ(construction_error(shape(4, 2, 64), c), "KV cache: 2000 sinks: at most 1024");
  EXPECT_THROW(kv::KvCache(shape(6, 4, 64), KvConfig{}), Error);  // 6 % 4 != 0
  EXPECT_EQ(override_error("0:k5v2"),
            "layer override '0:k5v2': unknown codec pair 'k5v2' (use e.g. f16, q8_0, k8v4, k4v2)");
  EXPECT_EQ(override_error("x:k4v2"), "layer override 'x:k4v2': 'x' is not a layer index");
  EXPECT_EQ(override_error("0"), "layer override '0': expected LAYERS:CODECS, e.g. 0,-1:k8v4");
}

TEST(KvConfigTest, Shorthands) {
  CodecSpec k, v;
  ASSERT_TRUE(kv::parse_kv_shorthand("k4v2", k, v));
  EXPECT_EQ(k.name(), "tq4");
  EXPECT_EQ(v.name(), "tq2");
  ASSERT_TRUE(kv::parse_kv_shorthand("k8v8", k, v));
  EXPECT_EQ(k.name(), "q8_0h");
  ASSERT_TRUE(kv::parse_kv_shorthand("q4_0", k, v));
  EXPECT_EQ(v.name(), "q4_0");
  EXPECT_FALSE(kv::parse_kv_shorthand("k5v2", k, v));
  EXPECT_FALSE(kv::parse_kv_shorthand("k4", k, v));
  EXPECT_FALSE(kv::parse_kv_shorthand("bogus", k, v));
  KvConfig c;
  EXPECT_EQ(c.effective_sinks(), 0);
  c.k = k;
  EXPECT_EQ(c.effective_sinks(), 4);
  EXPECT_EQ(c.effective_residual(), 64);
  c.sinks = 0;
  EXPECT_EQ(c.effective_sinks(), 0);
}

}  // namespace
}  // namespace tkv::test
