#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "common/vec_math.h"

namespace tkv::sample {

void validate(const SamplerConfig& c) {
  if (!(c.temperature >= 0) || std::isinf(c.temperature))
    fail("sampler: temperature ", c.temperature, " must be a finite number >= 0");
  if (c.top_k < 0) fail("sampler: top_k ", c.top_k, " must be >= 0 (0 turns it off)");
  if (!(c.top_p > 0 && c.top_p <= 1))
    fail("sampler: top_p ", c.top_p, " must be in (0, 1] (1 turns it off)");
  if (!(c.min_p >= 0 && c.min_p <= 1))
    fail("sampler: min_p ", c.min_p, " must be in [0, 1] (0 turns it off)");
  if (!(c.repeat_penalty > 0) || std::isinf(c.repeat_penalty))
    fail("sampler: repeat_penalty ", c.repeat_penalty, " must be a finite number > 0");
  if (c.repeat_last_n < -1)
    fail("sampler: repeat_last_n ", c.repeat_last_n, " must be >= -1 (-1: all, 0: off)");
  if (!std::isfinite(c.presence_penalty))
    fail("sampler: presence_penalty ", c.presence_penalty, " must be a finite number");
  if (!std::isfinite(c.frequency_penalty))
    fail("sampler: frequency_penalty ", c.frequency_penalty, " must be a finite number");
  std::vector<int32_t> ids;
  ids.reserve(c.logit_bias.size());
  for (const auto& [id, value] : c.logit_bias) {
    if (id < 0) fail("sampler: logit_bias token id ", id, " must be >= 0");
    if (!std::isfinite(value))
      fail("sampler: logit_bias for token ", id, " must be a finite number");
    ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  if (const auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end())
    fail("sampler: logit_bias names token ", *twice, " twice");
}

Sampler::Sampler(const SamplerConfig& config) : config_(config), rng_(config.seed) {
  validate(config_);
}

void Sampler::accept(int32_t token) {
  accept_prompt(token);
  if (constraint_) constraint_->accept(token);
  if (config_.presence_penalty != 0 || config_.frequency_penalty != 0) ++reply_counts_[token];
}

void Sampler::accept_prompt(int32_t token) {
  if (token < 0) fail("sampler: cannot accept negative token id ", token);
  if (config_.repeat_last_n == 0) return;
  history_.push_back(token);
  if (config_.repeat_last_n > 0 && history_.size() > size_t(config_.repeat_last_n))
    history_.pop_front();
}

void Sampler::reset() {
  history_.clear();
  reply_counts_.clear();
  rng_.seed(config_.seed);
}

bool Sampler::adjusts() const {
  return !config_.logit_bias.empty() || (config_.repeat_penalty != 1.0f && !history_.empty()) ||
         !reply_counts_.empty() || constraint_ != nullptr;
}

const float* Sampler::adjust(const float* logits, int n_vocab, std::vector<float>& work) const {
  if (!adjusts()) return logits;
  work.assign(logits, logits + n_vocab);
  for (const auto& [id, value] : config_.logit_bias) {
    if (id >= n_vocab)
      fail("sampler: logit_bias token ", id, " is outside the vocabulary of ", n_vocab);
    work[size_t(id)] += value;
  }
  if (config_.repeat_penalty != 1.0f && !history_.empty()) {
    const std::vector<int32_t> recent(history_.begin(), history_.end());
    for (int32_t t : recent)
      if (t >= n_vocab)
        fail("sampler: accepted token ", t, " is outside the vocabulary of ", n_vocab);
    apply_repetition_penalty(work.data(), n_vocab, recent, config_.repeat_penalty);
  }
  for (const auto& [id, count] : reply_counts_) {
    if (id >= n_vocab)
      fail("sampler: accepted token ", id, " is outside the vocabulary of ", n_vocab);
    work[size_t(id)] -= config_.presence_penalty + config_.frequency_penalty * float(count);
  }
  // The constraint's mask comes last, so no bias or penalty can lift a
  // token it forbids back above -inf.
  if (constraint_) constraint_->mask(work.data(), n_vocab);
  // A bias of -inf or a huge penalty may leave every logit -inf (alone or
  // with the mask): the filters below need one candidate.
  check_logits(work.data(), n_vocab);
  return work.data();
}

int32_t Sampler::filter(const float* logits, int n_vocab, CandidateList& c,
                        std::vector<float>& work) const {
  if (n_vocab <= 0) fail("sampler: vocabulary size ", n_vocab, " must be positive");
  if (!logits) fail("sampler: no logits");
  check_logits(logits, n_vocab);
  logits = adjust(logits, n_vocab, work);
  // Greedy: the filters below never remove the top candidate, so skip them.
  if (config_.temperature <= 0) return int32_t(argmax(logits, n_vocab));
  if (config_.top_k > 0)
    select_top_k(logits, n_vocab, config_.top_k, c);
  else
    c.assign(logits, n_vocab);
  apply_top_p(c, config_.top_p);
  apply_min_p(c, config_.min_p);
  apply_temperature(c, config_.temperature);
  return -1;
}

int32_t Sampler::sample(const float* logits, int n_vocab) {
  const int32_t greedy = filter(logits, n_vocab, candidates_, work_);
  if (greedy >= 0) return greedy;
  return draw(candidates_, uniform_from_bits(rng_()));
}

std::vector<TokenProb> Sampler::distribution(const float* logits, int n_vocab) const {
  CandidateList c;
  std::vector<float> work;
  const int32_t greedy = filter(logits, n_vocab, c, work);
  if (greedy >= 0) return {{greedy, 1.0}};
  const std::vector<double> p = probabilities(c);
  std::vector<TokenProb> out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = {c.items[i].id, p[i]};
  std::sort(out.begin(), out.end(), [](const TokenProb& a, const TokenProb& b) {
    return a.p > b.p || (a.p == b.p && a.token < b.token);
  });
  return out;
}

}  // namespace tkv::sample
