// One mixture-of-experts FFN layer (model/moe.h: router, routing, every
// chosen expert's gate, up and down products, the weighted sum) at real
// shapes, for 1, 8 and 512 rows: the figure to set beside llama.cpp's
// `test-backend-ops perf -o MUL_MAT_ID` for the same shapes and types (one
// of its MUL_MAT_ID cases is one of the three expert products; a layer is
// about three of them).
//
//   build/release/benchmarks/model/bench_moe --benchmark_filter=qwen3
//   TKV_BENCH_THREADS=2 (default: physical cores)
//
// Weights are random (uniform, variance 1 / fan_in), quantized once per
// shape and type at start-up; rows are random unit-scale activations, so
// the router spreads them over the experts as a real model's does.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "common/thread_pool.h"
#include "model/moe.h"

namespace {

using tkv::DType;
using tkv::ThreadPool;
using tkv::WeightMatrix;
using tkv::model::MoeScratch;
using tkv::model::MoeSpec;
using tkv::model::MoeWeights;

int threads() {
  const char* v = std::getenv("TKV_BENCH_THREADS");
  return v && *v ? std::atoi(v) : tkv::physical_core_count();
}

ThreadPool& pool() {
  static ThreadPool p(threads());
  return p;
}

// n matrices of rows x cols of `type`, random, one buffer.
struct Experts {
  std::vector<uint8_t> bytes;
  std::vector<WeightMatrix> mats;
  Experts(DType type, int n, int64_t rows, int64_t cols, uint64_t seed) {
    const size_t row_bytes = tkv::row_bytes(type, cols);
    bytes.resize(size_t(n) * size_t(rows) * row_bytes);
    pool().parallel_for(int64_t(n) * rows, 64, [&](int64_t b, int64_t e, int) {
      std::vector<float> row(static_cast<size_t>(cols));
      const float a = std::sqrt(3.0f / float(cols));
      for (int64_t r = b; r < e; ++r) {
        std::mt19937 rng(uint32_t(seed * 1000003u + uint64_t(r)));
        std::uniform_real_distribution<float> d(-a, a);
        for (float& v : row) v = d(rng);
        tkv::quantize_row(type, row.data(), bytes.data() + size_t(r) * row_bytes, cols);
      }
    });
    for (int i = 0; i < n; ++i)
      mats.push_back(
          tkv::make_weight(type, bytes.data() + size_t(i) * size_t(rows) * row_bytes, rows, cols));
  }
};

// A layer of `n` experts (n_used chosen) of width G over embedding E.
struct Layer {
  MoeSpec spec;
  std::vector<float> router_values;
  std::unique_ptr<Experts> gate, up, down;
  MoeWeights w;
  Layer(DType type, int n, int n_used, int E, int G) {
    spec.n_experts = n;
    spec.n_used = n_used;
    spec.n_ff = G;
    spec.normalize = true;
    router_values.resize(size_t(n) * size_t(E));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-std::sqrt(3.0f / float(E)),
                                            std::sqrt(3.0f / float(E)));
    for (float& v : router_values) v = d(rng);
    w.router = tkv::make_weight(DType::F32, router_values.data(), n, E);
    gate = std::make_unique<Experts>(type, n, G, E, 1);
    up = std::make_unique<Experts>(type, n, G, E, 2);
    down = std::make_unique<Experts>(type, n, E, G, 3);
    w.gate = gate->mats;
    w.up = up->mats;
    w.down = down->mats;
  }
};

const Layer& layer(const std::string& name, DType type) {
  static std::map<std::string, std::unique_ptr<Layer>> layers;
  auto& l = layers[name + "/" + std::string(tkv::dtype_name(type))];
  if (!l) {
    if (name == "qwen3-30b-a3b") l = std::make_unique<Layer>(type, 128, 8, 2048, 768);
    if (name == "gpt-oss-20b") l = std::make_unique<Layer>(type, 32, 4, 2880, 2880);
    // Fewer chosen experts than threads (top-2 on many cores, or this on
    // two): each expert's products cut by rows over the threads.
    if (name == "qwen3-30b-a3b-top1") l = std::make_unique<Layer>(type, 128, 1, 2048, 768);
  }
  return *l;
}

// rows: 1 (one decoding sequence), 8 (eight together), 512 (a prefill
// chunk, on the GEMM rows as the forward pass gives them).
void BM_MoeLayer(benchmark::State& state, const std::string& name, DType type) {
  if (!tkv::traits(type).supported) return state.SkipWithError("type not supported");
  const Layer& L = layer(name, type);
  const int rows = int(state.range(0));
  const int64_t E = L.w.router.cols;
  std::vector<float> h(size_t(rows) * size_t(E)), y(h.size(), 0.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& v : h) v = d(rng);
  MoeScratch scratch;
  const int exact = rows <= 16 ? rows : 0;
  for (auto _ : state) {
    tkv::model::moe_ffn(L.spec, L.w, h.data(), nullptr, exact, rows, 512, y.data(), scratch,
                        pool());
    benchmark::ClobberMemory();
  }
  state.counters["rows/s"] =
      benchmark::Counter(double(rows) * double(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(name + " " + std::string(tkv::dtype_name(type)) + ", " +
                 std::to_string(threads()) + " threads");
}

void register_all() {
  for (DType t : {DType::Q4_K, DType::Q8_0})
    benchmark::RegisterBenchmark(("qwen3-30b-a3b/" + std::string(tkv::dtype_name(t))).c_str(),
                                 BM_MoeLayer, "qwen3-30b-a3b", t)
        ->Arg(1)
        ->Arg(8)
        ->Arg(512)
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("qwen3-30b-a3b-top1/q4_K", BM_MoeLayer, "qwen3-30b-a3b-top1",
                               DType::Q4_K)
      ->Arg(1)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("gpt-oss-20b/mxfp4", BM_MoeLayer, "gpt-oss-20b", DType::MXFP4)
      ->Arg(1)
      ->Arg(8)
      ->Arg(512)
      ->Unit(benchmark::kMillisecond);
}

const int registered = (register_all(), 0);

}  // namespace

BENCHMARK_MAIN();
