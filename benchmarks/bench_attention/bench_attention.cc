// Decode attention through the whole driver -- KvCache::begin_chunk / write
// / attend / end_chunk on one layer, with the configuration's policy (f16
// sinks and residual included) -- per KV configuration, head_dim, depth and
// thread count; 8 KV heads, GQA 4 (issue 3, item 6). `turbokv bench kernel`
// measures the same in fresh processes for reports; this is the quick loop
// for kernel work.
//
//   BM_Copy/threads                   STREAM-like copy, bytes read + written
//   BM_DecodeStep/cfg/hd/depth/thr    one decode step of one layer
//   BM_PrefillChunk/cfg/hd/depth/thr  one 512-token prefill chunk of one layer after
//                                     `depth` tokens (the causal attention of a long prompt)
//
// Counters: GFLOP_per_s (prefill: 4 * head_dim flops per query head and
// visible key, the QK and PV products; the attend() call alone is timed),
// kv_B_per_tok (bytes of K/V one step reads), GB_per_s (those
// bytes / time), copy_frac (GB_per_s / copy bandwidth of the same thread
// count, measured in this run: run BM_Copy first, it is registered first),
// vs_f16 (time / f16's at the same hd, depth, threads).
//
// The cache of each (configuration, head_dim) is filled once, chunk by
// chunk through the public protocol (so the fill pays causal attention:
// O(depth^2), minutes at 32K) and grows across the depths, which run in
// ascending order. Each benchmark runs a fixed 16 steps after 2 untimed ones.
//
// BM_PrefillChunk's cache is filled by KvCache::fill_synthetic (no attention)
// and truncated back to `depth` after each chunk.
//
// Example: build-bench/benchmarks/bench_attention/bench_attention --benchmark_filter='Copy|/32768/'
//          TURBOKV_SIMD is not read here: the best target of the CPU runs.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/kernel_protocol.h"
#include "bench/kv_configs.h"
#include "cli/kv_spec.h"
#include "common/thread_pool.h"
#include "common/timer.h"
#include "kv/kv_cache.h"

namespace {

using tkv::ThreadPool;
using tkv::kv::KvCache;

constexpr int kKvHeads = 8, kGroup = 4, kFillChunk = 1024, kSteps = 16, kWarmup = 2;
const std::vector<std::string> kConfigs = {"f16", "q8_0", "q4_0h", "k8v8", "k4v4", "k4v2", "k3v2"};
const std::vector<int64_t> kDepths = {1024, 4096, 16384, 32768};

ThreadPool& pool(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

std::map<int, double>& copy_gbps() {
  static std::map<int, double> m;
  return m;
}
std::map<std::tuple<int, int64_t, int>, double>& f16_seconds() {
  static std::map<std::tuple<int, int64_t, int>, double> m;
  return m;
}

// Gaussian K/V/Q for one fill chunk (reused: content does not change the work).
struct Blocks {
  std::vector<float> k, v, q, out;
  Blocks(int tokens, int hd) {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> n(0.0f, 1.0f);
    k.resize(size_t(tokens) * kKvHeads * hd);
    v.resize(k.size());
    q.resize(k.size() * kGroup);
    out.resize(q.size());
    for (auto* vec : {&k, &v, &q})
      for (float& x : *vec) x = n(rng);
  }
};

struct Fixture {
  int config = -1, hd = 0;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Blocks> blocks;
};

// The cache of (config, hd), grown to at least `depth` tokens.
KvCache& cache_at(int config, int hd, int64_t depth, Blocks*& blocks) {
  static Fixture f;
  if (f.config != config || f.hd != hd || f.cache->n_tokens() > depth + kSteps * 64) {
    f.cache.reset();  // free the previous one first
    tkv::kv::KvShape shape{1, kKvHeads * kGroup, kKvHeads, hd, int(kDepths.back() + 100000)};
    f.cache = std::make_unique<KvCache>(
        shape, tkv::cli::parse_kv_spec(kConfigs[size_t(config)], {}).config);
    f.blocks = std::make_unique<Blocks>(kFillChunk, hd);
    f.config = config;
    f.hd = hd;
  }
  KvCache& c = *f.cache;
  while (c.n_tokens() < depth) {
    const int n = int(std::min<int64_t>(kFillChunk, depth - c.n_tokens()));
    c.begin_chunk(n);
    c.write(0, f.blocks->k.data(), f.blocks->v.data());
    c.attend(0, f.blocks->q.data(), f.blocks->out.data(), pool(2));
    c.end_chunk();
  }
  blocks = f.blocks.get();
  return c;
}

void BM_Copy(benchmark::State& state) {
  const int threads = int(state.range(0));
  double best = 0;
  for (auto _ : state)
    best = std::max(best, tkv::bench::measure_copy_bandwidth(threads, size_t(256) << 20, 3));
  copy_gbps()[threads] = best;
  state.counters["GB_per_s"] = best;
}

void BM_DecodeStep(benchmark::State& state) {
  const int config = int(state.range(0)), hd = int(state.range(1)), threads = int(state.range(3));
  const int64_t depth = state.range(2);
  Blocks* b = nullptr;
  KvCache& c = cache_at(config, hd, depth, b);
  ThreadPool& p = pool(threads);
  auto step = [&] {
    c.begin_chunk(1);
    c.write(0, b->k.data(), b->v.data());
    c.attend(0, b->q.data(), b->out.data(), p);
    c.end_chunk();
  };
  for (int i = 0; i < kWarmup; ++i) step();
  tkv::Stopwatch clock;
  for (auto _ : state) step();
  const double per_step = clock.seconds() / double(state.iterations());
  const tkv::kv::KvStats st = c.stats();
  const double bytes = double(st.persistent_bytes);  // one layer: everything a step reads
  state.SetLabel(kConfigs[size_t(config)]);
  state.counters["kv_B_per_tok"] = bytes;
  state.counters["GB_per_s"] = bytes / per_step / 1e9;
  if (copy_gbps().count(threads))
    state.counters["copy_frac"] = bytes / per_step / 1e9 / copy_gbps()[threads];
  if (kConfigs[size_t(config)] == "f16") f16_seconds()[{hd, depth, threads}] = per_step;
  if (auto it = f16_seconds().find({hd, depth, threads}); it != f16_seconds().end())
    state.counters["vs_f16"] = per_step / it->second;
}

constexpr int kPrefillChunk = 512;
const std::vector<std::string> kPrefillConfigs = {"f16", "k4v2"};

void BM_PrefillChunk(benchmark::State& state) {
  const int config = int(state.range(0)), hd = int(state.range(1)), threads = int(state.range(3));
  const int64_t depth = state.range(2);
  tkv::kv::KvShape shape{1, kKvHeads * kGroup, kKvHeads, hd, int(depth + kPrefillChunk + 64)};
  KvCache c(shape, tkv::cli::parse_kv_spec(kPrefillConfigs[size_t(config)], {}).config);
  ThreadPool& p = pool(threads);
  c.fill_synthetic(depth, 7, &p);
  Blocks b(kPrefillChunk, hd);
  for (auto _ : state) {
    c.begin_chunk(kPrefillChunk);
    c.write(0, b.k.data(), b.v.data());
    tkv::Stopwatch clock;
    c.attend(0, b.q.data(), b.out.data(), p);
    state.SetIterationTime(clock.seconds());
    c.end_chunk();
    c.truncate(depth);
  }
  // Query heads x visible keys (depth + i + 1 for the chunk's i-th query).
  const double pairs =
      double(kKvHeads * kGroup) *
      (double(kPrefillChunk) * double(depth) + double(kPrefillChunk) * (kPrefillChunk + 1) / 2.0);
  state.SetLabel(kPrefillConfigs[size_t(config)]);
  state.counters["GFLOP_per_s"] = benchmark::Counter(
      4.0 * hd * pairs * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Copy)->Arg(1)->Arg(2)->Iterations(1)->UseRealTime();

void register_steps() {
  for (int cfg = 0; cfg < int(kConfigs.size()); ++cfg)
    for (int hd : {64, 128})
      for (int64_t depth : kDepths)
        for (int threads : {1, 2})
          benchmark::RegisterBenchmark("BM_DecodeStep", BM_DecodeStep)
              ->Args({cfg, hd, depth, threads})
              ->Iterations(kSteps)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
  for (int cfg = 0; cfg < int(kPrefillConfigs.size()); ++cfg)
    for (int64_t depth : {4096, 16384})
      for (int threads : {1, 2})
        benchmark::RegisterBenchmark("BM_PrefillChunk", BM_PrefillChunk)
            ->Args({cfg, 128, depth, threads})
            ->Iterations(3)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_steps();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
