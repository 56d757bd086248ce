// Token sampling: logit bias, repetition / presence / frequency penalties,
// top-k, top-p, min-p, temperature and a seeded draw, in llama.cpp's order
// and with its semantics (see filters.h).
//
// The logits pass through one adjustment step before the filters
// (Sampler::adjust): the logit bias is added, then the repetition penalty
// divides (positive logits) or multiplies (the others) the logits of the
// distinct tokens among the last repeat_last_n accepted (prompt and reply,
// llama.cpp's penalty), then presence and frequency penalties subtract
// presence * [count > 0] + frequency * count, count being how often the
// token occurs in the reply (tokens passed to accept(), not
// accept_prompt(): OpenAI's definition, over generated tokens), and last a
// token constraint (set_constraint: a grammar) sets the logits of the tokens
// it forbids to -inf, so that no bias or penalty re-enables them.
//
// Determinism: the random source is std::mt19937_64 (its output sequence is
// fixed by the C++ standard) and the uniform number in [0, 1) is made here
// from the top 53 bits of one engine output, so the same seed gives the same
// tokens with any standard library (std::uniform_real_distribution and
// std::discrete_distribution are not specified exactly enough for that).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "sample/constraint.h"
#include "sample/filters.h"

namespace tkv::sample {

struct SamplerConfig {
  float temperature = 0.8f;     // >= 0; 0 means greedy (argmax after the penalty)
  int top_k = 40;               // >= 0; 0 turns it off
  float top_p = 0.95f;          // in (0, 1]; 1 turns it off
  float min_p = 0.05f;          // in [0, 1]; 0 turns it off
  float repeat_penalty = 1.0f;  // > 0; 1 turns it off
  int repeat_last_n = 64;       // >= -1; 0 turns it off, -1 means every accepted token
  float presence_penalty = 0;   // finite; subtracted from a token's logit once it is in the reply
  float frequency_penalty = 0;  // finite; subtracted once per occurrence in the reply
  // (token id, value) pairs added to the logits; ids >= 0 and distinct,
  // values finite (the server allows [-100, 100], OpenAI's range).
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;
};

// Throws tkv::Error ("sampler: <field> ... ") for a value out of range.
void validate(const SamplerConfig& config);

struct TokenProb {
  int32_t token;
  double p;
};

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config);  // validates the config

  // Picks the next token from n_vocab logits. Does not accept it: call
  // accept() with the token actually used (and for prompt tokens, so that the
  // repetition penalty sees them). Throws tkv::Error on n_vocab <= 0, a NaN
  // or +inf logit, all logits -inf, or an accepted token >= n_vocab.
  int32_t sample(const float* logits, int n_vocab);

  // Records a token of the reply: the repetition penalty's window and the
  // presence / frequency counts see it.
  void accept(int32_t token);
  // Records a token of the prompt: only the repetition penalty's window
  // sees it (presence and frequency count the reply alone).
  void accept_prompt(int32_t token);

  // Back to the state right after construction: empty history and counts,
  // RNG re-seeded. The constraint is kept as it is.
  void reset();

  // From now on, sample() and distribution() see only the tokens
  // `constraint` allows, and accept() (not accept_prompt()) passes each
  // token on to it (null: none). Set it after accepting the prompt's tokens.
  void set_constraint(std::shared_ptr<TokenConstraint> constraint) {
    constraint_ = std::move(constraint);
  }

  // The distribution sample() draws from for these logits: the tokens left
  // after the filters with their probabilities, most likely first. A greedy
  // sampler returns the one token it would pick with p = 1.
  std::vector<TokenProb> distribution(const float* logits, int n_vocab) const;

  const SamplerConfig& config() const { return config_; }

  // Uniform double in [0, 1) from one 64-bit engine output (top 53 bits).
  static double uniform_from_bits(uint64_t bits) { return double(bits >> 11) * 0x1.0p-53; }

 private:
  // Runs the filter chain into `c`. Returns the token for a greedy sampler,
  // -1 otherwise. `work` holds the adjusted logits when any adjustment applies.
  int32_t filter(const float* logits, int n_vocab, CandidateList& c,
                 std::vector<float>& work) const;
  // The logits after the bias, the penalties and the constraint's mask:
  // `logits` itself when none applies, else `work` filled with the adjusted
  // copy.
  const float* adjust(const float* logits, int n_vocab, std::vector<float>& work) const;
  bool adjusts() const;

  SamplerConfig config_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;  // the last repeat_last_n accepted tokens
  // How often each token occurs in the reply (presence / frequency penalty),
  // kept only when either penalty is on.
  std::map<int32_t, int32_t> reply_counts_;
  std::shared_ptr<TokenConstraint> constraint_;
  // Reused across calls: no allocation per token.
  CandidateList candidates_;
  std::vector<float> work_;
};

}  // namespace tkv::sample
