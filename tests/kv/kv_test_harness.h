// Drives a KvCache through a sequence of chunks with random K/V/Q and checks
// every query's output against the reference attention.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "reference_attention.h"

namespace tkv::test {

struct Scenario {
  kv::KvShape shape;
  kv::KvConfig config;
  std::vector<int> chunks;  // tokens per chunk, in order
  // (i, n): truncate the sequence to n tokens before chunk i. Tokens written
  // after a truncation take the next unused input rows, so that re-appended
  // positions get new content.
  std::vector<std::pair<size_t, int64_t>> truncations;
  int threads = 1;
  uint64_t seed = 1;
  // Per layer: learned sink logits (n_heads each) passed to attend(); an
  // empty list or an empty entry = none.
  std::vector<std::vector<float>> sinks;
  float softcap = 0.0f;  // attend()'s score soft-cap, every layer
};

struct ScenarioResult {
  double max_rel_error = 0;  // max over queries of ||out - ref||_inf / ||ref||_inf
  int64_t queries = 0;
  std::vector<std::vector<float>> outputs;  // per layer: all positions' outputs, concatenated
};

// Generates inputs: keys/values N(0,1) (plus, when `outlier` > 0, channel 3
// of every key scaled by it), queries N(0, 1).
class RandomInputs {
 public:
  RandomInputs(const kv::KvShape& shape, int64_t n_tokens, uint64_t seed, float outlier = 0);
  std::vector<LayerInputs> layers;
  std::vector<std::vector<float>> q;  // per layer: [pos][n_heads][hd]
};

// Feeds tokens [from, from + n) of `in` to `cache` as one chunk (every
// layer written, then attended with its queries); appends each layer's
// outputs, in layer order, to `outs` when given.
void feed_chunk(kv::KvCache& cache, const RandomInputs& in, ThreadPool& pool, int64_t from, int n,
                std::vector<float>* outs = nullptr);

// A KvConfig of the `--kv` shorthand `kv` (a gtest failure when it is not
// one) with these sinks and residual (-1: the defaults).
kv::KvConfig kv_config(const char* kv, int sinks = -1, int residual = -1);

// Runs the scenario; when `check` is set, compares with the reference.
// `in` needs as many rows as tokens are written in all.
ScenarioResult run_scenario(const Scenario& s, const RandomInputs& in, bool check = true);

}  // namespace tkv::test
