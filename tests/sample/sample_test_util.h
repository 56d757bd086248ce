// What the sampler's tests share: a config with every filter off and
// seeded random logits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "sample/sampler.h"

namespace tkv::sample {

// All filters off, temperature 1: the plain softmax distribution.
inline SamplerConfig plain(uint64_t seed = 1) {
  SamplerConfig c;
  c.temperature = 1.0f;
  c.top_k = 0;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.repeat_penalty = 1.0f;
  c.seed = seed;
  return c;
}

// n logits drawn from N(0, scale) (test data only: the generator's
// portability does not matter).
inline std::vector<float> random_logits(size_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> l(n);
  for (float& x : l) x = d(rng);
  return l;
}

}  // namespace tkv::sample
