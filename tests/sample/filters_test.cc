// The filter building blocks on their own: the partial sort's invariant,
// min-p's bookkeeping of the sorted prefix, and the draw's use of u.
#include "sample/filters.h"

#include <gtest/gtest.h>

#include <algorithm>
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

TEST(SampleFilters, TopPWithoutTopKOnALargeVocabularySortsOnlyWhatItNeeds) {
  // A peaked distribution over 128K tokens: top-p 0.9 needs a handful of
  // tokens, so the sorted prefix stays far below the vocabulary size.
  std::vector<float> logits(128256, 0.0f);
  for (int i = 0; i < 10; ++i) logits[size_t(i) * 1000] = 20.0f - float(i);
  CandidateList c;
  c.assign(logits.data(), int(logits.size()));
  apply_top_p(c, 0.9f);
  EXPECT_LE(c.size(), 10u);
  EXPECT_GE(c.size(), 1u);
  EXPECT_EQ(c.items[0].id, 0);
  EXPECT_EQ(c.sorted, c.size());
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
  EXPECT_EQ(c.items[argmax(c)].logit, 0.0f);  // temperature shifts the max to 0
}

}  // namespace
}  // namespace tkv::sample
