// The filter building blocks on their own: the partial sort's invariant,
// min-p's bookkeeping of the sorted prefix, and the draw's use of u.
#include "sample/filters.h"

#include "common/error.h"
#include "common/vec_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>

namespace tkv::sample {
namespace {

std::vector<float> tied_logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> l(n);
  for (float& x : l) x = float(int(rng() % 50)) * 0.25f;  // many ties
  return l;
}

std::vector<Candidate> fully_sorted(const std::vector<float>& l) {
  std::vector<Candidate> c;
  for (size_t i = 0; i < l.size(); ++i) c.push_back({int32_t(i), l[i]});
  std::sort(c.begin(), c.end(), ranks_before);
  return c;
}

void expect_prefix_equal(const CandidateList& c, const std::vector<Candidate>& want, size_t k) {
  ASSERT_GE(c.sorted, k);
  for (size_t i = 0; i < k; ++i) {
    ASSERT_EQ(c.items[i].id, want[i].id) << i;
    ASSERT_EQ(c.items[i].logit, want[i].logit) << i;
  }
}

TEST(SampleFilters, SortPrefixGrowsIncrementallyAndMatchesAFullSort) {
  const auto logits = tied_logits(5000, 1);
  const auto want = fully_sorted(logits);
  CandidateList c;
  c.assign(logits.data(), int(logits.size()));
  EXPECT_EQ(c.sorted, 0u);
  for (size_t k : {1u, 7u, 64u, 63u, 500u, 4999u, 5000u, 9000u}) {
    c.sort_prefix(k);
    EXPECT_EQ(c.sorted, std::max<size_t>(std::min<size_t>(k, 5000), c.sorted));
    expect_prefix_equal(c, want, std::min<size_t>(k, 5000));
    // Nothing after the prefix ranks before its last element.
    for (size_t i = c.sorted; i < c.size(); ++i)
      ASSERT_FALSE(ranks_before(c.items[i], c.items[c.sorted - 1]));
  }
  EXPECT_EQ(c.size(), 5000u);  // a permutation: nothing lost
}

TEST(SampleFilters, TopKThenMinPKeepAConsistentSortedPrefix) {
  const auto logits = tied_logits(1000, 2);
  CandidateList c;
  c.assign(logits.data(), 1000);
  apply_top_k(c, 100);
  EXPECT_EQ(c.size(), 100u);
  EXPECT_EQ(c.sorted, 100u);
  apply_min_p(c, 0.3f);
  const float threshold = c.items[0].logit + std::log(0.3f);
  EXPECT_EQ(c.sorted, c.size());
  for (const Candidate& x : c.items) EXPECT_GE(x.logit, threshold);
  const auto want = fully_sorted(logits);
  size_t expected = 0;
  while (expected < 100 && want[expected].logit >= threshold) ++expected;
  EXPECT_EQ(c.size(), expected);
}

TEST(SampleFilters, MinPOnUnsortedCandidates) {
  const std::vector<float> logits = {0.0f, 3.0f, 1.0f, 2.9f, -5.0f};
  CandidateList c;
  c.assign(logits.data(), 5);
  apply_min_p(c, 0.5f);  // keep logit >= 3 + log 0.5 = 2.307
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.items[0].id, 1);
  EXPECT_EQ(c.items[1].id, 3);
  EXPECT_EQ(c.sorted, 0u);
}

TEST(SampleFilters, TopPOnALargeVocabularyKeepsOnlyThePeak) {
  // A peaked distribution over 128K tokens: top-p 0.9 keeps the first few of
  // the ten peaks (e^20, e^19, ...), whatever path it takes.
  std::vector<float> logits(128256, 0.0f);
  for (int i = 0; i < 10; ++i) logits[size_t(i) * 1000] = 20.0f - float(i);
  CandidateList c;
  c.assign(logits.data(), int(logits.size()));
  apply_top_p(c, 0.9f);
  // p(top) = 1 / (1 + e^-1 + e^-2 + ...) = 0.632; two peaks reach 0.865, three 0.95.
  std::vector<int32_t> ids;
  for (const Candidate& x : c.items) ids.push_back(x.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1000, 2000}));
}

TEST(SampleFilters, DrawMapsUToCumulativeProbability) {
  const std::vector<float> logits = {std::log(0.25f), std::log(0.5f), std::log(0.25f)};
  CandidateList c;
  c.assign(logits.data(), 3);
  EXPECT_EQ(draw(c, 0.0), 0);
  EXPECT_EQ(draw(c, 0.2499), 0);
  EXPECT_EQ(draw(c, 0.2501), 1);
  EXPECT_EQ(draw(c, 0.7499), 1);
  EXPECT_EQ(draw(c, 0.7501), 2);
  EXPECT_EQ(draw(c, 1.0 - 0x1.0p-53), 2);
  // Zero-probability candidates at either end are never chosen.
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> masked = {ninf, 1.0f, ninf};
  c.assign(masked.data(), 3);
  EXPECT_EQ(draw(c, 0.0), 1);
  EXPECT_EQ(draw(c, 1.0 - 0x1.0p-53), 1);
}

TEST(SampleFilters, ProbabilitiesSumToOne) {
  const auto logits = tied_logits(300, 3);
  CandidateList c;
  c.assign(logits.data(), 300);
  apply_temperature(c, 0.5f);
  double sum = 0;
  for (double p : probabilities(c)) sum += p;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  float top = -1;
  for (const Candidate& x : c.items) top = std::max(top, x.logit);
  EXPECT_EQ(top, 0.0f);  // temperature shifts the max to 0
}

TEST(SampleFilters, SelectTopKMatchesAFullSortWithTies) {
  const auto logits = tied_logits(1000, 4);
  const auto want = fully_sorted(logits);
  for (int k : {1, 5, 40, 999, 1000, 2000, 0}) {
    SCOPED_TRACE(k);
    CandidateList c;
    select_top_k(logits.data(), 1000, k, c);
    const size_t n = k <= 0 ? 1000 : std::min(k, 1000);
    ASSERT_EQ(c.size(), n);
    EXPECT_EQ(c.sorted, n);
    expect_prefix_equal(c, want, n);
  }
}

std::vector<int32_t> sorted_ids(const CandidateList& c) {
  std::vector<int32_t> ids;
  for (const Candidate& x : c.items) ids.push_back(x.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(SampleFilters, BucketedTopPKeepsTheSameTokensAsASortedWalk) {
  // Large unsorted lists take the bucketed path; a fully sorted copy takes
  // the plain walk. Flat, peaked and tied logits; p from tiny to nearly 1.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 24; ++trial) {
    const size_t n = 5000 + rng() % 60000;
    std::vector<float> logits(n);
    std::normal_distribution<float> d(0.0f, std::array{0.05f, 1.0f, 4.0f}[trial % 3]);
    for (float& x : logits) x = d(rng);
    if (trial % 4 == 3)
      for (float& x : logits) x = std::round(x * 4) / 4;  // ties across bucket edges
    const float p = std::array{0.01f, 0.3f, 0.9f, 0.95f, 0.999f, 0.99999f}[trial % 6];
    SCOPED_TRACE(testing::Message() << "n=" << n << " p=" << p << " trial " << trial);
    CandidateList bucketed, walked;
    bucketed.assign(logits.data(), int(n));
    walked.assign(logits.data(), int(n));
    walked.sort_prefix(n);
    apply_top_p(bucketed, p);
    apply_top_p(walked, p);
    EXPECT_EQ(sorted_ids(bucketed), sorted_ids(walked));
    EXPECT_GE(bucketed.size(), 1u);
  }
}

TEST(SampleFilters, CheckLogits) {
  std::vector<float> l = {0, 1, 2};
  EXPECT_EQ(check_logits(l.data(), 3), 2.0f);
  l[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(check_logits(l.data(), 3), Error);
  // NaN anywhere, including the vector tail.
  std::vector<float> long_l(1003, 0.5f);
  long_l[1002] = std::numeric_limits<float>::infinity();
  try {
    check_logits(long_l.data(), 1003);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "sampler: logit of token 1002 is inf");
  }
  long_l[1002] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(check_logits(long_l.data(), 1003), 0.5f);
}

TEST(SampleFilters, RepetitionPenaltyAndArgmax) {
  std::vector<float> l = {3.0f, -2.0f, 0.0f, 3.0f, 1.0f};
  EXPECT_EQ(argmax(l.data(), 5), 0);  // tie: lower id
  const std::vector<int32_t> recent = {0, 1, 1, 2, 0};
  apply_repetition_penalty(l.data(), 5, recent, 2.0f);
  EXPECT_EQ(l, (std::vector<float>{1.5f, -4.0f, 0.0f, 3.0f, 1.0f}));
  EXPECT_EQ(argmax(l.data(), 5), 3);
}

}  // namespace
}  // namespace tkv::sample
