#include "sample/filters.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "common/vec_math.h"

namespace tkv::sample {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float max_logit(const CandidateList& c) {
  if (c.sorted > 0) return c.items[0].logit;
  float m = kNegInf;
  for (const Candidate& x : c.items) m = std::max(m, x.logit);
  return m;
}

// Per-thread scratch for candidate weights: no allocation per sampled token
// once it has grown to the vocabulary size.
std::vector<float>& weight_scratch(size_t n) {
  thread_local std::vector<float> w;
  if (w.size() < n) w.resize(n);
  return w;
}

// w[i] = exp(items[i].logit - max); returns their sum.
double candidate_weights(const CandidateList& c, float max, float* w) {
  for (size_t i = 0; i < c.items.size(); ++i) w[i] = c.items[i].logit;
  return exp_weights(w, c.items.size(), max, 1.0f, w);
}

// Up to this many candidates top-p simply sorts them all.
constexpr size_t kTopPSortAll = 4096;

// Weight buckets for top-p: the top 12 bits of a weight's float encoding
// (8 exponent bits + 4 mantissa bits) order weights in [0, 1] monotonically
// in 16 buckets per power of two.
constexpr int kBucketShift = 19;
constexpr size_t kBuckets = (std::bit_cast<uint32_t>(1.0f) >> kBucketShift) + 1;
inline uint32_t bucket_of(float w) {
  return std::bit_cast<uint32_t>(w) >> kBucketShift;
}

// Top-p over a sorted prefix: keeps the shortest prefix reaching p.
void top_p_sorted(CandidateList& c, float p) {
  c.sort_prefix(c.size());
  std::vector<float>& w = weight_scratch(c.size());
  const double target = double(p) * candidate_weights(c, c.items[0].logit, w.data());
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += w[i];
    if (cum >= target) {
      c.items.resize(i + 1);
      c.sorted = i + 1;
      return;
    }
  }
}

// Top-p over a large unsorted list: whole buckets above the cut are kept
// unsorted, only the bucket holding the cut is sorted.
void top_p_bucketed(CandidateList& c, float p) {
  std::vector<float>& w = weight_scratch(c.size());
  const double target = double(p) * candidate_weights(c, max_logit(c), w.data());
  std::array<double, kBuckets> mass{};
  for (size_t i = 0; i < c.size(); ++i) mass[bucket_of(w[i])] += w[i];
  double cum = 0;  // mass of the buckets above the cut
  size_t cut = kBuckets;
  for (size_t b = kBuckets; b-- > 0;) {
    if (cum + mass[b] >= target) {
      cut = b;
      break;
    }
    cum += mass[b];
  }
  if (cut == kBuckets) return;  // rounding: p not reached, keep all

  struct Weighted {
    Candidate c;
    float w;
  };
  std::vector<Weighted> boundary;
  size_t kept = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const uint32_t b = bucket_of(w[i]);
    if (b == cut) boundary.push_back({c.items[i], w[i]});
    if (b > cut) c.items[kept++] = c.items[i];
  }
  std::sort(boundary.begin(), boundary.end(),
            [](const Weighted& a, const Weighted& b) { return ranks_before(a.c, b.c); });
  c.items.resize(kept);
  for (const Weighted& x : boundary) {
    c.items.push_back(x.c);
    cum += x.w;
    if (cum >= target) break;
  }
  c.sorted = 0;
}

}  // namespace

float check_logits(const float* logits, int n_vocab) {
  const MaxScan s = scan_max(logits, size_t(n_vocab));
  if (s.has_nan_or_inf) {
    for (int i = 0; i < n_vocab; ++i)
      if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity())
        fail("sampler: logit of token ", i, " is ", logits[i]);
  }
  if (s.max == kNegInf) fail("sampler: every logit is -inf");
  return s.max;
}

void CandidateList::assign(const float* logits, int n_vocab) {
  items.resize(size_t(n_vocab));
  for (int i = 0; i < n_vocab; ++i) items[size_t(i)] = {int32_t(i), logits[i]};
  sorted = 0;
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

void apply_repetition_penalty(float* logits, int n_vocab, std::span<const int32_t> recent,
                              float penalty) {
  if (penalty == 1.0f || recent.empty()) return;
  // Each distinct token is penalized once, however often it occurred.
  std::vector<int32_t> ids(recent.begin(), recent.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int32_t id : ids) {
    TKV_CHECK(id >= 0 && id < n_vocab);
    float& l = logits[id];
    l = l > 0 ? l / penalty : l * penalty;
  }
}

void select_top_k(const float* logits, int n_vocab, int k, CandidateList& out) {
  auto& heap = out.items;
  heap.clear();
  if (k <= 0 || k >= n_vocab) {
    out.assign(logits, n_vocab);
    out.sort_prefix(out.size());
    return;
  }
  // A heap of the k best so far whose front is the worst of them. A later
  // token has a higher id, so it displaces the front only with a strictly
  // larger logit: one comparison per token in the common case.
  for (int i = 0; i < k; ++i) {
    heap.push_back({int32_t(i), logits[i]});
    std::push_heap(heap.begin(), heap.end(), ranks_before);
  }
  for (int i = k; i < n_vocab; ++i) {
    if (logits[i] > heap.front().logit) {
      std::pop_heap(heap.begin(), heap.end(), ranks_before);
      heap.back() = {int32_t(i), logits[i]};
      std::push_heap(heap.begin(), heap.end(), ranks_before);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), ranks_before);
  out.sorted = heap.size();
}

void apply_top_k(CandidateList& c, int k) {
  if (k <= 0 || size_t(k) >= c.size()) return;
  c.sort_prefix(size_t(k));
  c.items.resize(size_t(k));
}

void apply_top_p(CandidateList& c, float p) {
  if (p >= 1.0f || c.size() <= 1) return;
  if (c.size() <= kTopPSortAll || c.sorted == c.size())
    top_p_sorted(c, p);
  else
    top_p_bucketed(c, p);
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

std::vector<double> probabilities(const CandidateList& c) {
  std::vector<float>& w = weight_scratch(c.size());
  const double total = candidate_weights(c, max_logit(c), w.data());
  std::vector<double> p(c.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = w[i] / total;
  return p;
}

int32_t draw(const CandidateList& c, double u) {
  TKV_CHECK(!c.items.empty() && u >= 0 && u < 1);
  std::vector<float>& w = weight_scratch(c.size());
  const double target = u * candidate_weights(c, max_logit(c), w.data());
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += w[i];
    if (cum > target) return c.items[i].id;
  }
  // Rounding left the target at the very top: the last candidate with weight.
  for (size_t i = c.size(); i-- > 0;)
    if (w[i] > 0) return c.items[i].id;
  return c.items[0].id;
}

}  // namespace tkv::sample
