// The sampling filters, one function per step. The Sampler chains them in
// llama.cpp's order; they are separate so that tests can check each one.
//
// Semantics follow llama.cpp's samplers (src/llama-sampling.cpp):
//   repetition penalty: for each distinct token among the last N accepted,
//     logit / penalty if logit > 0, logit * penalty otherwise;
//   top-k: keep the k largest logits (k <= 0 or k >= size: keep all);
//   top-p: softmax, then keep the shortest prefix (by decreasing probability)
//     whose cumulative probability reaches p (p >= 1: keep all);
//   min-p: keep tokens whose logit >= max_logit + log(p), i.e. probability
//     >= p x the top probability (p <= 0: keep all);
//   temperature: logits / t (computed as (logit - max) / t: same softmax);
//   draw: softmax, then the first candidate whose cumulative probability
//     exceeds u x total, for u uniform in [0, 1).
// Every filter keeps at least one candidate. Ties in logit rank by token id
// (lower first) so that results never depend on the sort algorithm.
//
// Cost on a vocabulary of n tokens: top-k selects with a k-element heap in
// one pass (O(n), no copy of the vocabulary); top-p without a top-k before
// it buckets the weights by magnitude and sorts only the bucket where its cut
// falls; exp and max run vectorized (common/vec_math.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tkv::sample {

struct Candidate {
  int32_t id;
  float logit;
};

// True when a ranks before b: larger logit, or equal logit and lower id.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Candidates, the first `sorted` of which are the largest, in ranking order;
// the rest are in no particular order and none ranks before
// items[sorted - 1].
struct CandidateList {
  std::vector<Candidate> items;
  size_t sorted = 0;

  // (id, logits[id]) for every id, unsorted. The logits must have passed
  // check_logits().
  void assign(const float* logits, int n_vocab);
  // Makes the first min(k, size) candidates the sorted prefix, in
  // O(size + k log k).
  void sort_prefix(size_t k);
  size_t size() const { return items.size(); }
};

// Throws tkv::Error naming the first NaN or +inf logit, or when every logit
// is -inf; returns the largest logit.
float check_logits(const float* logits, int n_vocab);

// In place on a logits array. `recent` may hold duplicates, in any order;
// each id must be in [0, n_vocab).
void apply_repetition_penalty(float* logits, int n_vocab, std::span<const int32_t> recent,
                              float penalty);
// The k best candidates straight from the logits, sorted (k >= n: all, sorted).
void select_top_k(const float* logits, int n_vocab, int k, CandidateList& out);

void apply_top_k(CandidateList& c, int k);
void apply_top_p(CandidateList& c, float p);
void apply_min_p(CandidateList& c, float p);
void apply_temperature(CandidateList& c, float t);  // t > 0

// Probabilities of c.items (softmax), in the same order.
std::vector<double> probabilities(const CandidateList& c);
// Token chosen by u in [0, 1) (see the header comment).
int32_t draw(const CandidateList& c, double u);

}  // namespace tkv::sample
