// Forward-pass benchmarks: decode ms/token and prefill tok/s through the real
// KvCache, and the element-wise ops at real widths.
//
// The model is a synthesized one (written once to $TMPDIR), chosen with
//   TKV_BENCH_LIKE=llama-3.2-1b  (default tiny)   TKV_BENCH_LAYERS=N
//   TKV_BENCH_TYPE=f16|q8_0|q4_K|...  (default f16)
// or an existing file with TKV_BENCH_MODEL=path.gguf. Examples:
//   build/benchmarks/model/bench_model --benchmark_filter=Decode
//   TKV_BENCH_LIKE=llama-3.2-1b build/benchmarks/model/bench_model
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "common/vec_math.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/ops.h"
#include "model/synth.h"

namespace {

using tkv::ThreadPool;
using tkv::model::Model;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

const Model& bench_model() {
  static std::unique_ptr<Model> model = [] {
    std::string path = env_or("TKV_BENCH_MODEL", "");
    if (path.empty()) {
      const std::string like = env_or("TKV_BENCH_LIKE", "tiny");
      const std::string type = env_or("TKV_BENCH_TYPE", "f16");
      const int layers = std::atoi(env_or("TKV_BENCH_LAYERS", "0").c_str());
      path = (std::filesystem::temp_directory_path() /
              ("tkv-bench-" + like + "-" + type + "-L" + std::to_string(layers) + ".gguf"))
                 .string();
      if (!std::filesystem::exists(path)) {
        tkv::model::SynthOptions opts;
        opts.type = type;
        opts.layers = layers;
        ThreadPool pool(tkv::physical_core_count());
        opts.pool = &pool;
        tkv::model::synth(like, path, opts);
      }
    }
    auto m = Model::load(path);
    m->fault_in_weights();
    return m;
  }();
  return *model;
}

std::vector<int32_t> random_tokens(int n, int vocab) {
  std::mt19937 rng(1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
  return t;
}

// Decode one token at a time after a prefill of `depth` tokens. Args: threads, depth.
void BM_Decode(benchmark::State& state) {
  const Model& m = bench_model();
  ThreadPool pool(int(state.range(0)));
  const int depth = int(state.range(1));
  tkv::kv::KvCache cache(m.kv_shape(depth + 4096), tkv::kv::KvConfig{});
  const auto prompt = random_tokens(depth + 1, m.config().n_vocab);
  m.eval_last(cache, prompt, pool);
  int32_t token = 1;
  for (auto _ : state) {
    if (cache.n_tokens() + 1 > cache.shape().max_tokens) {
      state.PauseTiming();
      cache.clear();
      m.eval_last(cache, prompt, pool);
      state.ResumeTiming();
    }
    auto logits = m.eval_last(cache, std::span<const int32_t>(&token, 1), pool);
    token = int32_t(tkv::argmax(logits.data(), int64_t(logits.size())));
  }
  state.counters["tok/s"] =
      benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] = benchmark::Counter(
      double(state.iterations()) * double(m.weight_bytes()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Decode)
    ->ArgsProduct({{1, 2}, {0, 1024}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A 512-token prompt in chunks of 512. Args: threads.
void BM_Prefill512(benchmark::State& state) {
  const Model& m = bench_model();
  ThreadPool pool(int(state.range(0)));
  tkv::kv::KvCache cache(m.kv_shape(512), tkv::kv::KvConfig{});
  const auto prompt = random_tokens(512, m.config().n_vocab);
  for (auto _ : state) {
    cache.clear();
    m.eval_last(cache, prompt, pool);
  }
  state.counters["tok/s"] =
      benchmark::Counter(512.0 * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Prefill512)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RmsNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> x(static_cast<size_t>(n), 0.5f), w(static_cast<size_t>(n), 1.0f),
      y(static_cast<size_t>(n));
  for (auto _ : state) {
    tkv::model::ops::rmsnorm(x.data(), w.data(), y.data(), n, 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 12);
}
BENCHMARK(BM_RmsNorm)->Arg(2048)->Arg(8192);

void BM_SiluMul(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<float> g(static_cast<size_t>(n), 0.5f), u(static_cast<size_t>(n), 1.0f);
  for (auto _ : state) {
    tkv::model::ops::silu_mul(g.data(), u.data(), n);
    benchmark::DoNotOptimize(g.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * 12);
}
BENCHMARK(BM_SiluMul)->Arg(8192)->Arg(14336);

}  // namespace

BENCHMARK_MAIN();
