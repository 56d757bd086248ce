// Query-aware page selection (KvConfig::select): the page summaries bound
// q.k over the keys as every codec decodes them; a budget that covers every
// page is dense attention bit for bit; selection is deterministic, reads the
// page that matters, and survives save/load, fork and truncate; KvStats
// counts the summaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

#include "kv/codec/codec.h"
#include "kv/kv_cache.h"
#include "kv/page_summary.h"
#include "kv_test_harness.h"
#include "test_util.h"

namespace tkv::test {
namespace {

using kv::KvConfig;
using kv::KvShape;

const char* kCodecs[] = {"f32", "f16", "q8_0", "q8_0h", "q4_0", "q4_0h",
                         "tq1", "tq2", "tq3",  "tq4",   "tq4r"};

KvConfig config_of(const char* kv, int select, int sinks = -1, int residual = -1) {
  KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand(kv, c.k, c.v)) << kv;
  c.select = select;
  c.select_dense_layers = 0;  // every layer selects
  c.sinks = sinks;
  c.residual = residual;
  return c;
}

// Every layer's outputs of feeding rows [from, from + n) of `in` in chunks of `chunk`.
std::vector<float> feed(kv::KvCache& cache, const RandomInputs& in, ThreadPool& pool, int64_t from,
                        int n, int chunk) {
  std::vector<float> outs;
  for (int done = 0; done < n; done += chunk)
    feed_chunk(cache, in, pool, from + done, std::min(chunk, n - done), &outs);
  return outs;
}

// Feeds a `prompt`-row prefill, then one decode row; the cache's stats
// before and after that decode step.
std::pair<kv::KvStats, kv::KvStats> prompt_then_one_step(kv::KvCache& cache, const RandomInputs& in,
                                                         int prompt) {
  ThreadPool pool(2);
  feed(cache, in, pool, 0, prompt, prompt);
  const kv::KvStats before = cache.stats();
  feed(cache, in, pool, prompt, 1, 1);
  return {before, cache.stats()};
}

class BoundTest : public ::testing::TestWithParam<const char*> {};

// The bound covers q.k for every key as decode() gives it and as the fused
// kernel scores it (the rotated domain of rotating codecs), for random keys
// with an outlier channel, every fill level of a page and random queries.
TEST_P(BoundTest, BoundsEveryDecodedAndScoredKey) {
  for (const int hd : {64, 128, 80}) {
    const auto spec = kv::parse_codec(GetParam());
    ASSERT_TRUE(spec.has_value());
    if (spec->kind == kv::CodecKind::TQ && (hd & (hd - 1)) != 0) continue;
    auto rotation = std::make_shared<const kv::Rotation>(hd, 99);
    const auto codec = kv::make_codec(*spec, hd, rotation);
    constexpr int kPage = 64;
    std::vector<uint8_t> page(codec->page_bytes(kPage));
    std::mt19937_64 rng(uint64_t(hd) * 31 + 5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(hd), dec(hd), work(hd), prepared(codec->prepared_query_floats());
    std::vector<uint8_t> summary(kv::summary_head_bytes(hd));
    std::vector<float> scores(kPage);
    for (int t = 0; t < kPage; ++t) {
      for (auto& v : x) v = normal(rng) * (t % 3 == 0 ? 4.0f : 1.0f);
      x[size_t(t) % hd] *= 20.0f;  // an outlier channel
      codec->encode(x.data(), page.data(), kPage, t);
    }
    for (const int filled : {1, 17, 64}) {
      kv::summarize_keys(*codec, page.data(), kPage, filled, summary.data(), work.data());
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<float> q(hd);
        for (auto& v : q) v = normal(rng) * (trial % 2 ? 3.0f : 0.3f);
        const float bound = kv::summary_bound(q.data(), summary.data(), hd);
        codec->prepare_queries(q.data(), 1, prepared.data());
        codec->score(prepared.data(), 1, page.data(), kPage, 0, filled, scores.data(), kPage);
        for (int t = 0; t < filled; ++t) {
          codec->decode(page.data(), kPage, t, dec.data());
          double dot = 0, mag = 0;
          for (int c = 0; c < hd; ++c) {
            dot += double(q[size_t(c)]) * dec[size_t(c)];
            mag += std::fabs(double(q[size_t(c)]) * dec[size_t(c)]);
          }
          // Float evaluation of the bound and the scores rounds: 1e-5 of the magnitude.
          const double slack = 1e-5 * mag + 1e-6;
          EXPECT_GE(double(bound) + slack, dot) << GetParam() << " hd " << hd << " slot " << t;
          EXPECT_GE(double(bound) + slack, double(scores[size_t(t)]))
              << GetParam() << " hd " << hd << " slot " << t;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, BoundTest, ::testing::ValuesIn(kCodecs));

// The bound is not vacuous: it is the maximum itself for a page of one key.
// The decode step's one-call bound pass gives each page exactly the bits of
// the per-page bound, for GQA groups that fit its registers and for ones
// that take the per-page fallback.
TEST(PageSummaryTest, BoundsOfManyPagesEqualEachPagesBound) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int hd : {64, 128, 40})
    for (const int G : {1, 4, 8}) {
      constexpr int kPages = 37;
      std::vector<std::vector<uint8_t>> summaries(kPages);
      std::vector<const uint8_t*> ptrs;
      for (auto& s : summaries) {
        std::vector<float> keys(size_t(5 * hd));
        for (auto& v : keys) v = normal(rng) * 2.0f;
        s.resize(kv::summary_head_bytes(hd));
        kv::summarize_vectors(keys.data(), 5, hd, s.data());
        ptrs.push_back(s.data());
      }
      std::vector<float> q(size_t(G * hd)), out(kPages);
      for (auto& v : q) v = normal(rng);
      kv::summary_bounds_max(q.data(), G, ptrs.data(), kPages, hd, out.data());
      for (int i = 0; i < kPages; ++i) {
        const float one = kv::summary_bound_max(q.data(), G, ptrs[size_t(i)], hd);
        EXPECT_EQ(std::memcmp(&one, &out[size_t(i)], sizeof one), 0)
            << "hd " << hd << " G " << G << " page " << i << ": " << one << " vs "
            << out[size_t(i)];
      }
    }
}

TEST(PageSummaryTest, SingleKeyBoundIsNearTheDot) {
  const int hd = 64;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(hd), q(hd);
  for (auto& v : k) v = normal(rng);
  for (auto& v : q) v = normal(rng);
  std::vector<uint8_t> summary(kv::summary_head_bytes(hd));
  kv::summarize_vectors(k.data(), 1, hd, summary.data());
  double dot = 0, absmax = 0, qabs = 0;
  for (int c = 0; c < hd; ++c) {
    dot += double(q[size_t(c)]) * k[size_t(c)];
    absmax = std::max(absmax, double(std::fabs(k[size_t(c)])));
    qabs += std::fabs(q[size_t(c)]);
  }
  const double bound = kv::summary_bound(q.data(), summary.data(), hd);
  EXPECT_GE(bound, dot);
  EXPECT_LE(bound, dot + qabs * absmax / 126.0 + 1e-5);  // one quantization step per channel
}

class DenseEqualityTest : public ::testing::TestWithParam<const char*> {};

// A budget covering every page is dense attention, bit for bit, through
// chunked prefill and decode, with GQA, a window policy and several threads.
TEST_P(DenseEqualityTest, BudgetCoveringEveryPageIsDenseBitExact) {
  for (const int window : {0, 256}) {
    Scenario s;
    s.shape = KvShape{2, 8, 2, 64, 4096};
    s.config = config_of(GetParam(), 0);
    s.config.window = window;
    s.chunks = {100, 1, 1, 190, 1, 64, 1, 1, 33, 1};
    s.threads = 2;
    RandomInputs in(s.shape, 400, 11);
    const auto dense = run_scenario(s, in, /*check=*/false);
    s.config.select = 1 << 20;
    const auto selected = run_scenario(s, in, /*check=*/false);
    for (int l = 0; l < s.shape.n_layers; ++l) {
      ASSERT_EQ(dense.outputs[size_t(l)].size(), selected.outputs[size_t(l)].size());
      EXPECT_EQ(0, std::memcmp(dense.outputs[size_t(l)].data(), selected.outputs[size_t(l)].data(),
                               dense.outputs[size_t(l)].size() * sizeof(float)))
          << GetParam() << " window " << window << " layer " << l;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SomeCodecs, DenseEqualityTest,
                         ::testing::Values("f16", "k4v2", "q8_0", "q4_0h", "tq3"));

// A small budget changes the result (it is really selecting), the same
// input selects the same pages (bit-identical outputs on every run), and
// dense prefill leaves a prompt's outputs dense.
TEST(PageSelectionTest, DeterministicAndReallySelecting) {
  Scenario s;
  s.shape = KvShape{2, 4, 2, 64, 4096};
  s.config = config_of("k4v2", 128);
  s.chunks = {500, 1, 1, 1, 1};
  s.threads = 2;
  RandomInputs in(s.shape, 600, 5);
  const auto a = run_scenario(s, in, false);
  const auto b = run_scenario(s, in, false);
  {  // decode reads 2 + 1 of the 7 pages a query sees (KvStats counts them)
    kv::KvCache cache(s.shape, s.config);
    const auto [before, after] = prompt_then_one_step(cache, in, 500);
    EXPECT_EQ(after.select_dense_page_reads - before.select_dense_page_reads, 2 * 2 * 7);
    EXPECT_EQ(after.select_page_reads - before.select_page_reads, 2 * 2 * 3);
    // Prefill tiles read the union of their 32 queries' pages: with random
    // queries that is every page here.
    EXPECT_LE(before.select_page_reads, before.select_dense_page_reads);
    EXPECT_GT(before.select_dense_page_reads, 0);
  }
  s.config.select = 0;
  const auto dense = run_scenario(s, in, false);
  s.config.select = 128;
  s.config.select_prefill = false;
  const auto dense_prefill = run_scenario(s, in, false);
  for (int l = 0; l < s.shape.n_layers; ++l) {
    const auto& x = a.outputs[size_t(l)];
    EXPECT_EQ(0, std::memcmp(x.data(), b.outputs[size_t(l)].data(), x.size() * sizeof(float)));
    EXPECT_NE(0, std::memcmp(x.data(), dense.outputs[size_t(l)].data(), x.size() * sizeof(float)));
    // The prompt (first 500 positions) is dense with dense prefill, decode is not.
    const size_t prompt = size_t(500) * 4 * 64;
    EXPECT_EQ(0, std::memcmp(dense_prefill.outputs[size_t(l)].data(),
                             dense.outputs[size_t(l)].data(), prompt * sizeof(float)));
    EXPECT_EQ(0, std::memcmp(dense_prefill.outputs[size_t(l)].data() + prompt, x.data() + prompt,
                             (x.size() - prompt) * sizeof(float)));
  }
}

// One key far out in the query's direction, in an old page: a budget of one
// page (plus the newest) finds it, so the output is close to dense, where a
// wrong page would miss the value it carries.
TEST(PageSelectionTest, FindsThePageHoldingTheMatchingKey) {
  const KvShape sh{1, 4, 2, 64, 4096};
  const int n_prompt = 700, planted = 150;  // page (150 - 4) / 64 = 2 of 10
  RandomInputs in(sh, n_prompt + 1, 9);
  auto& L = in.layers[0];
  const int hd = 64, n_kv = 2, nh = 4;
  for (auto& x : L.k) x *= 0.1f;
  for (int h = 0; h < n_kv; ++h) {
    const float* q = in.q[0].data() + (size_t(n_prompt) * nh + size_t(h) * 2) * hd;
    float* k = L.k.data() + (size_t(planted) * n_kv + h) * hd;
    for (int c = 0; c < hd; ++c) k[c] = 3.0f * q[c];
    float* v = L.v.data() + (size_t(planted) * n_kv + h) * hd;
    for (int c = 0; c < hd; ++c) v[c] = 50.0f;
  }
  ThreadPool pool(2);
  std::vector<std::vector<float>> last;
  for (const int select : {0, 64}) {
    kv::KvCache cache(sh, config_of("k8v4", select));
    feed(cache, in, pool, 0, n_prompt, 256);
    last.push_back(feed(cache, in, pool, n_prompt, 1, 1));
  }
  // Head 0 of each group: the planted value dominates both.
  for (int h : {0, 2}) {
    const float* d = last[0].data() + size_t(h) * hd;
    const float* s = last[1].data() + size_t(h) * hd;
    EXPECT_GT(d[0], 40.0f);
    for (int c = 0; c < hd; ++c) EXPECT_NEAR(s[c], d[c], 0.05f * std::fabs(d[c]) + 0.05f);
  }
}

// Summaries survive save/load, fork and truncate: each continues exactly
// like the sequence it came from (bit-identical outputs under selection).
TEST(PageSelectionTest, SummariesSurviveSaveLoadForkAndTruncate) {
  const KvShape sh{2, 4, 2, 64, 4096};
  RandomInputs in(sh, 900, 21);
  ThreadPool pool(2);
  const KvConfig config = config_of("k4v2", 192);
  kv::KvCache a(sh, config);
  feed(a, in, pool, 0, 600, 128);

  const std::string path = (std::filesystem::path(::testing::TempDir()) / "sel.session").string();
  a.save(path, "fp");
  kv::KvCache loaded(sh, config);
  loaded.load(path, "fp");
  EXPECT_EQ(loaded.stats().summary_bytes, a.stats().summary_bytes);
  auto forked = a.fork();
  const auto from_a = feed(a, in, pool, 600, 20, 1);
  EXPECT_EQ(feed(loaded, in, pool, 600, 20, 1), from_a);
  EXPECT_EQ(feed(*forked, in, pool, 600, 20, 1), from_a);
  // A session saved dense loads with selection (summaries are recomputed).
  kv::KvCache dense(sh, config_of("k4v2", 0));
  feed(dense, in, pool, 0, 600, 128);
  dense.save(path, "fp");
  kv::KvCache dense_loaded(sh, config);
  dense_loaded.load(path, "fp");
  kv::KvCache fresh(sh, config);
  feed(fresh, in, pool, 0, 600, 128);
  EXPECT_EQ(feed(dense_loaded, in, pool, 600, 5, 1), feed(fresh, in, pool, 600, 5, 1));

  // Truncate (no f16 residual: a truncated and re-appended sequence holds
  // exactly what a fresh one does), then go on: as if the cut never happened.
  const KvConfig plain = config_of("k4v2", 192, 0, 0);
  kv::KvCache cut(sh, plain), straight(sh, plain);
  feed(cut, in, pool, 0, 600, 128);
  cut.truncate(430);
  feed(straight, in, pool, 0, 430, 128);
  EXPECT_EQ(cut.stats().summary_bytes, straight.stats().summary_bytes);
  EXPECT_EQ(feed(cut, in, pool, 700, 3, 1), feed(straight, in, pool, 700, 3, 1));
  EXPECT_EQ(feed(cut, in, pool, 703, 150, 50), feed(straight, in, pool, 703, 150, 50));
  std::filesystem::remove(path);
}

// KvStats counts the summaries (and only with selection); at head_dim 128
// a k4v2 page's summary is at most 8% of the page.
TEST(PageSelectionTest, StatsCountSummaries) {
  const KvShape sh{2, 8, 4, 128, 4096};
  RandomInputs in(sh, 1000, 2);
  ThreadPool pool(2);
  kv::KvCache dense(sh, config_of("k4v2", 0)), sel(sh, config_of("k4v2", 256));
  feed(dense, in, pool, 0, 1000, 256);
  feed(sel, in, pool, 0, 1000, 256);
  const kv::KvStats d = dense.stats(), s = sel.stats();
  EXPECT_EQ(d.summary_bytes, 0u);
  EXPECT_EQ(s.pages_allocated, d.pages_allocated);
  EXPECT_EQ(s.summary_bytes, uint64_t(s.pages_allocated) * 4 * kv::summary_head_bytes(128));
  EXPECT_EQ(s.persistent_bytes, d.persistent_bytes + s.summary_bytes);
  EXPECT_EQ(s.page_bytes, d.page_bytes);
  const double per_page = double(s.summary_bytes) / double(s.page_bytes);
  RecordProperty("summary_fraction_k4v2_hd128", std::to_string(per_page));
  EXPECT_LE(per_page, 0.08);
  // Layers that read every page keep no summaries.
  KvConfig first_dense = config_of("k4v2", 256);
  first_dense.select_dense_layers = 1;
  kv::KvCache half(sh, first_dense);
  feed(half, in, pool, 0, 1000, 256);
  EXPECT_EQ(half.stats().summary_bytes, s.summary_bytes / 2);
}

// The first select_dense_layers layers attend densely: with one layer of
// two dense, its outputs are the dense cache's bit for bit, the other's not.
TEST(PageSelectionTest, DenseLayersReadEveryPage) {
  Scenario s;
  s.shape = KvShape{2, 4, 2, 64, 4096};
  s.config = config_of("k4v2", 0);
  s.chunks = {400, 1, 1};
  RandomInputs in(s.shape, 500, 8);
  const auto dense = run_scenario(s, in, false);
  s.config.select = 64;
  s.config.select_dense_layers = 1;
  const auto sel = run_scenario(s, in, false);
  const auto& d0 = dense.outputs[0];
  EXPECT_EQ(0, std::memcmp(d0.data(), sel.outputs[0].data(), d0.size() * sizeof(float)));
  EXPECT_NE(0,
            std::memcmp(dense.outputs[1].data(), sel.outputs[1].data(), d0.size() * sizeof(float)));
}

// A budget under one page keeps only each query's newest page: a decode
// step reads one page per KV head and layer of the seven a query sees.
TEST(PageSelectionTest, BudgetUnderOnePageReadsTheNewestOnly) {
  const KvShape sh{2, 4, 2, 64, 4096};
  RandomInputs in(sh, 501, 4);
  kv::KvCache cache(sh, config_of("k4v2", 32));
  const auto [before, after] = prompt_then_one_step(cache, in, 500);
  EXPECT_EQ(after.select_dense_page_reads - before.select_dense_page_reads, 2 * 2 * 7);
  EXPECT_EQ(after.select_page_reads - before.select_page_reads, 2 * 2 * 1);
}

TEST(PageSelectionTest, NegativeSelectionIsRefused) {
  KvConfig c = config_of("k4v2", -1);
  EXPECT_THROW(kv::KvCache(KvShape{1, 2, 1, 64, 128}, c), Error);
}

}  // namespace
}  // namespace tkv::test
