// Time per sampled token at real vocabulary sizes (32K Llama-2, 128K
// Llama-3, 152K Qwen2), for the default chain (top-k 40), top-p without
// top-k (the incremental partial sort), greedy, and with a repetition penalty.
#include <benchmark/benchmark.h>

#include <random>

#include "sample/sampler.h"

namespace {

using tkv::sample::Sampler;
using tkv::sample::SamplerConfig;

std::vector<float> model_like_logits(size_t n) {
  // Roughly what a trained model produces: most logits near the bottom, a
  // long tail, a few high ones.
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.0f, 2.5f);
  std::vector<float> l(n);
  for (float& x : l) x = d(rng);
  for (int k = 0; k < 8; ++k) l[rng() % n] = 14.0f - float(k);
  return l;
}

void run(benchmark::State& state, SamplerConfig cfg) {
  const auto logits = model_like_logits(size_t(state.range(0)));
  Sampler s(cfg);
  for (int k = 0; k < 64; ++k) s.accept(int32_t(k * 997 % state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits.data(), int(logits.size())));
  state.SetItemsProcessed(state.iterations());
  state.counters["vocab"] = double(state.range(0));
}

void BM_DefaultChain(benchmark::State& state) {
  run(state, SamplerConfig{});
}

void BM_TopPOnly(benchmark::State& state) {
  SamplerConfig c;
  c.top_k = 0;
  c.min_p = 0;
  run(state, c);
}

void BM_NoFilters(benchmark::State& state) {
  SamplerConfig c;
  c.top_k = 0;
  c.top_p = 1;
  c.min_p = 0;
  c.temperature = 1;
  run(state, c);
}

void BM_Greedy(benchmark::State& state) {
  SamplerConfig c;
  c.temperature = 0;
  run(state, c);
}

void BM_DefaultWithRepeatPenalty(benchmark::State& state) {
  SamplerConfig c;
  c.repeat_penalty = 1.1f;
  run(state, c);
}

#define VOCABS Arg(32000)->Arg(128256)->Arg(151936)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_DefaultChain)->VOCABS;
BENCHMARK(BM_TopPOnly)->VOCABS;
BENCHMARK(BM_NoFilters)->VOCABS;
BENCHMARK(BM_Greedy)->VOCABS;
BENCHMARK(BM_DefaultWithRepeatPenalty)->VOCABS;

}  // namespace

BENCHMARK_MAIN();
