// The sampling filters, one function per step, over a candidate list. The
// Sampler chains them in llama.cpp's order; they are separate so that tests
// can check each one, and so that a different chain is easy to build.
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
//   draw: softmax, then the first token whose cumulative probability exceeds
//     u x total for u uniform in [0, 1).
// Every filter keeps at least one candidate. Ties in logit are ordered by
// token id (lower first) so that results never depend on the sort algorithm.
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

// Candidates, the first `sorted` of which are the largest, in decreasing
// order (logit, then lower id); the rest are in no particular order and none
// is larger than candidates[sorted - 1].
struct CandidateList {
  std::vector<Candidate> items;
  size_t sorted = 0;

  // Fills items with (id, logits[id]) for every id; throws tkv::Error for a
  // NaN or +Inf logit, or when every logit is -Inf.
  void assign(const float* logits, int n_vocab);
  // Makes the first min(k, size) candidates the sorted prefix. Costs
  // O(size + k log k) rather than a full sort.
  void sort_prefix(size_t k);
  size_t size() const { return items.size(); }
};

// True when a ranks before b: larger logit, or equal logit and lower id.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// `recent` may hold duplicates and ids in any order; every id must be a valid
// index (items must still be in id order, i.e. straight from assign()).
void apply_repetition_penalty(CandidateList& c, std::span<const int32_t> recent, float penalty);
void apply_top_k(CandidateList& c, int k);
void apply_top_p(CandidateList& c, float p);
void apply_min_p(CandidateList& c, float p);
void apply_temperature(CandidateList& c, float t);  // t > 0
// Index into c.items of the largest candidate.
size_t argmax(const CandidateList& c);
// Probabilities of c.items (softmax, in double), in the same order.
std::vector<double> probabilities(const CandidateList& c);
// Token chosen by u in [0, 1) (see the header comment).
int32_t draw(const CandidateList& c, double u);

}  // namespace tkv::sample
