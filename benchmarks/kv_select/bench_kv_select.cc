// Decode attention with query-aware page selection against dense, on one
// layer of the llama-3.2-1b attention shape (32 query heads over 8 KV heads
// of 64), k4v2, at long depths:
//
//   BM_SelectDecode/depth/select/threads   one decode step (begin_chunk,
//                                          write, attend, end_chunk)
//
// select = 0 is dense; 64 keeps one page besides the newest (almost only
// the bound pass: an upper bound of its cost); 2048 is the usual budget.
// Counter vs_dense: time / the dense step's at the same depth and threads.
//
// The cache is filled once per depth with selection on (prefill tiles read
// 2048 tokens, so the fill is O(depth), not O(depth^2); what is stored does
// not depend on attention), saved, and loaded into each configuration.
//
// Example: bench_kv_select --benchmark_filter='/32768/'
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "common/timer.h"
#include "kv/kv_cache.h"

namespace {

using tkv::ThreadPool;
using tkv::kv::KvCache;

constexpr int kKvHeads = 8, kGroup = 4, kHeadDim = 64, kFillChunk = 1024, kSteps = 16;
constexpr int kWarmup = 2;

ThreadPool& pool(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return *p;
}

tkv::kv::KvShape shape() {
  return {1, kKvHeads * kGroup, kKvHeads, kHeadDim, 1 << 20};
}

tkv::kv::KvConfig config(int select) {
  tkv::kv::KvConfig c;
  tkv::kv::parse_kv_shorthand("k4v2", c.k, c.v);
  c.select = select;
  c.select_dense_layers = 0;  // the one layer here selects
  return c;
}

struct Blocks {
  std::vector<float> k, v, q, out;
  explicit Blocks(int tokens) {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> n(0.0f, 1.0f);
    k.resize(size_t(tokens) * kKvHeads * kHeadDim);
    v.resize(k.size());
    q.resize(k.size() * kGroup);
    out.resize(q.size());
    for (auto* vec : {&k, &v, &q})
      for (float& x : *vec) x = n(rng);
  }
};

Blocks& blocks() {
  static Blocks b(kFillChunk);
  return b;
}

// A session file holding `depth` tokens (made once per depth).
std::string session_at(int64_t depth) {
  static std::map<int64_t, std::string> files;
  auto& path = files[depth];
  if (!path.empty()) return path;
  path = (std::filesystem::temp_directory_path() /
          ("bench_kv_select." + std::to_string(depth) + ".session"))
             .string();
  KvCache c(shape(), config(2048));
  Blocks& b = blocks();
  while (c.n_tokens() < depth) {
    const int n = int(std::min<int64_t>(kFillChunk, depth - c.n_tokens()));
    c.begin_chunk(n);
    c.write(0, b.k.data(), b.v.data(), &pool(2));
    c.attend(0, b.q.data(), b.out.data(), pool(2));
    c.end_chunk();
  }
  c.save(path, "bench");
  return path;
}

std::map<std::pair<int64_t, int>, double>& dense_seconds() {
  static std::map<std::pair<int64_t, int>, double> m;
  return m;
}

void BM_SelectDecode(benchmark::State& state) {
  const int64_t depth = state.range(0);
  const int select = int(state.range(1)), threads = int(state.range(2));
  KvCache c(shape(), config(select));
  c.load(session_at(depth), "bench");
  Blocks& b = blocks();
  ThreadPool& p = pool(threads);
  auto step = [&] {
    c.begin_chunk(1);
    c.write(0, b.k.data(), b.v.data());
    c.attend(0, b.q.data(), b.out.data(), p);
    c.end_chunk();
  };
  for (int i = 0; i < kWarmup; ++i) step();
  tkv::Stopwatch clock;
  for (auto _ : state) step();
  const double per_step = clock.seconds() / double(state.iterations());
  state.SetLabel(select ? "k4v2:sel" + std::to_string(select) : "k4v2");
  state.counters["summary_B"] = double(c.stats().summary_bytes);
  if (select == 0) dense_seconds()[{depth, threads}] = per_step;
  if (auto it = dense_seconds().find({depth, threads}); it != dense_seconds().end())
    state.counters["vs_dense"] = per_step / it->second;
}

void register_steps() {
  for (int64_t depth : {32768, 65536})
    for (int threads : {1, 2})
      for (int select : {0, 64, 2048})
        benchmark::RegisterBenchmark("BM_SelectDecode", BM_SelectDecode)
            ->Args({depth, select, threads})
            ->Iterations(kSteps)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  register_steps();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (int64_t depth : {32768, 65536})
    std::remove((std::filesystem::temp_directory_path() /
                 ("bench_kv_select." + std::to_string(depth) + ".session"))
                    .c_str());
  return 0;
}
