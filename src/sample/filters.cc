#include "sample/filters.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace tkv::sample {

namespace {

// max over the candidates (the first one when a prefix is sorted).
float max_logit(const CandidateList& c) {
  if (c.sorted > 0) return c.items[0].logit;
  float m = -std::numeric_limits<float>::infinity();
  for (const Candidate& x : c.items) m = std::max(m, x.logit);
  return m;
}

// Top-p grows its sorted prefix geometrically from this size: most of the
// probability of a trained model sits in a few dozen tokens.
constexpr size_t kTopPFirstPrefix = 64;

}  // namespace

void CandidateList::assign(const float* logits, int n_vocab) {
  items.resize(size_t(n_vocab));
  sorted = 0;
  bool any_finite = false;
  for (int i = 0; i < n_vocab; ++i) {
    const float x = logits[i];
    if (std::isnan(x) || x == std::numeric_limits<float>::infinity())
      fail("sampler: logit of token ", i, " is ", x);
    any_finite |= x != -std::numeric_limits<float>::infinity();
    items[size_t(i)] = {int32_t(i), x};
  }
  if (!any_finite) fail("sampler: every logit is -inf");
}

void CandidateList::sort_prefix(size_t k) {
  k = std::min(k, items.size());
  if (k <= sorted) return;
  const auto first = items.begin() + std::ptrdiff_t(sorted);
  const auto kth = items.begin() + std::ptrdiff_t(k);
  // Everything after the current prefix ranks below it, so only that part
  // needs partitioning, then the new slice sorting.
  if (kth != items.end()) std::nth_element(first, kth - 1, items.end(), ranks_before);
  std::sort(first, kth, ranks_before);
  sorted = k;
}

void apply_repetition_penalty(CandidateList& c, std::span<const int32_t> recent, float penalty) {
  if (penalty == 1.0f || recent.empty()) return;
  // Each distinct token is penalized once, however often it occurred.
  std::vector<int32_t> ids(recent.begin(), recent.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int32_t id : ids) {
    TKV_CHECK(id >= 0 && size_t(id) < c.items.size() && c.items[size_t(id)].id == id);
    float& l = c.items[size_t(id)].logit;
    l = l > 0 ? l / penalty : l * penalty;
  }
  c.sorted = 0;
}

void apply_top_k(CandidateList& c, int k) {
  if (k <= 0 || size_t(k) >= c.size()) return;
  c.sort_prefix(size_t(k));
  c.items.resize(size_t(k));
}

void apply_top_p(CandidateList& c, float p) {
  if (p >= 1.0f) return;
  // Softmax denominator over every candidate, then walk a growing sorted
  // prefix until it holds probability p.
  const double m = max_logit(c);
  double total = 0;
  for (const Candidate& x : c.items) total += std::exp(double(x.logit) - m);
  const double target = double(p) * total;
  double cum = 0;
  size_t done = 0;
  for (size_t prefix = std::max(c.sorted, kTopPFirstPrefix);; prefix *= 4) {
    c.sort_prefix(prefix);
    for (; done < c.sorted; ++done) {
      cum += std::exp(double(c.items[done].logit) - m);
      if (cum >= target) {
        c.items.resize(done + 1);
        c.sorted = done + 1;
        return;
      }
    }
    if (c.sorted == c.size()) return;  // rounding: p not reached, keep all
  }
}

void apply_min_p(CandidateList& c, float p) {
  if (p <= 0.0f) return;
  const float threshold = max_logit(c) + std::log(p);
  size_t kept = 0, kept_sorted = 0;
  for (size_t i = 0; i < c.items.size(); ++i) {
    if (c.items[i].logit >= threshold) {
      if (i < c.sorted) ++kept_sorted;
      c.items[kept++] = c.items[i];
    }
  }
  // The maximum always passes (log p <= 0), so kept >= 1. Removed prefix
  // entries are the prefix's smallest, so the kept ones stay a sorted prefix.
  c.items.resize(kept);
  c.sorted = kept_sorted;
}

void apply_temperature(CandidateList& c, float t) {
  TKV_CHECK(t > 0);
  // (logit - max) / t rather than logit / t: the same softmax, but a tiny t
  // cannot overflow to +inf (values stay <= 0; -inf means probability 0).
  // Order-preserving, so a sorted prefix stays sorted.
  const float m = max_logit(c);
  for (Candidate& x : c.items) x.logit = (x.logit - m) / t;
}

size_t argmax(const CandidateList& c) {
  TKV_CHECK(!c.items.empty());
  if (c.sorted > 0) return 0;
  size_t best = 0;
  for (size_t i = 1; i < c.items.size(); ++i)
    if (ranks_before(c.items[i], c.items[best])) best = i;
  return best;
}

std::vector<double> probabilities(const CandidateList& c) {
  const double m = max_logit(c);
  std::vector<double> p(c.items.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += p[i] = std::exp(double(c.items[i].logit) - m);
  for (double& x : p) x /= total;
  return p;
}

int32_t draw(const CandidateList& c, double u) {
  TKV_CHECK(!c.items.empty() && u >= 0 && u < 1);
  const double m = max_logit(c);
  double total = 0;
  for (const Candidate& x : c.items) total += std::exp(double(x.logit) - m);
  const double target = u * total;
  double cum = 0;
  for (const Candidate& x : c.items) {
    cum += std::exp(double(x.logit) - m);
    if (cum > target) return x.id;
  }
  // Rounding left target at the very top: the last candidate with mass.
  for (size_t i = c.items.size(); i-- > 0;)
    if (c.items[i].logit != -std::numeric_limits<float>::infinity()) return c.items[i].id;
  return c.items.back().id;
}

}  // namespace tkv::sample
