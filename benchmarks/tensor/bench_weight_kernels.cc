// Benchmarks of two weight-kernel pieces next to the code they replace or
// race, measured in one run so that their ratio holds on a shared machine:
//
//   QuantizeAct/<q8x32|q8x256>/<scalar|simd>/cols: one token's activation
//     quantization (the integer path's per-product step), Gvalues/s over CPU
//     time, in cache; simd is the Highway version of the active target.
//   Bf16Matmul/<vdpbf16ps|f32>/2048x2048/n/threads: BF16 weights' prefill
//     GEMM with AVX512-BF16 against the f32 GEMM on the same target (what
//     TURBOKV_BF16_DOT=1 / 0 choose), GFLOP/s over wall time.
//
//   build/dev/benchmarks/tensor/bench_weight_kernels --benchmark_repetitions=3
//   TURBOKV_SIMD=avx2 build/dev/benchmarks/tensor/bench_weight_kernels ...
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/act_blocks.h"
#include "tensor/kernels/kernels.h"
#include "tensor/matmul.h"

namespace tkv {
namespace {

using kernels::ActFormat;

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void BM_QuantizeAct(benchmark::State& state, ActFormat format, bool simd) {
  const int64_t cols = state.range(0);
  const auto x = gaussian(size_t(cols), 1);
  std::vector<uint8_t> out(kernels::act_row_bytes(format, cols));
  const auto fn = simd ? &kernels::quantize_act : &kernels::quantize_act_scalar;
  for (auto _ : state) {
    fn(format, x.data(), cols, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["Gvalues_per_s"] = benchmark::Counter(
      double(cols) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(simd ? active_simd_target() : "scalar");
}

void BM_Bf16Matmul(benchmark::State& state, bool native) {
  constexpr int64_t kRows = 2048, kCols = 2048;
  const int64_t n = state.range(0);
  const int threads = int(state.range(1));
  std::vector<uint16_t> wb(size_t(kRows * kCols));
  {
    const auto f = gaussian(wb.size(), 2);
    quantize_row(DType::BF16, f.data(), reinterpret_cast<uint8_t*>(wb.data()), int64_t(f.size()));
  }
  const WeightMatrix w = make_weight(DType::BF16, wb.data(), kRows, kCols, "bench");
  const auto x = gaussian(size_t(n * kCols), 3);
  std::vector<float> y(size_t(n * kRows));
  ThreadPool pool(threads);
  const KernelConfig before = kernel_config();
  KernelConfig config = before;
  config.bf16_dot = native ? KernelChoice::kOn : KernelChoice::kOff;
  set_kernel_config(config);
  if (native && !kernels::bf16_dot_gemm_active()) {
    set_kernel_config(before);
    state.SkipWithError("no AVX512-BF16 GEMM on this CPU / target");
    return;
  }
  matmul(w, x.data(), n, y.data(), pool, MatmulKernel::kFloat);  // scratch
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    matmul(w, x.data(), n, y.data(), pool, MatmulKernel::kFloat);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOPs"] =
      2.0 * double(kRows * kCols) * double(n) * double(state.iterations()) / total / 1e9;
  state.SetLabel(str(native ? "vdpbf16ps " : "f32 GEMM ", active_simd_target()));
  set_kernel_config(before);
}

void register_all() {
  for (const auto& [name, format] :
       {std::pair{"q8x32", ActFormat::kQ8x32}, std::pair{"q8x256", ActFormat::kQ8x256}})
    for (const bool simd : {false, true})
      benchmark::RegisterBenchmark(
          str("QuantizeAct/", name, "/", simd ? "simd" : "scalar").c_str(),
          [format = format, simd](benchmark::State& st) { BM_QuantizeAct(st, format, simd); })
          ->Arg(2048)
          ->Arg(8192);
  for (const bool native : {true, false})
    benchmark::RegisterBenchmark(
        str("Bf16Matmul/", native ? "vdpbf16ps" : "f32", "/2048x2048").c_str(),
        [native](benchmark::State& st) { BM_Bf16Matmul(st, native); })
        ->ArgsProduct({{64, 512}, {1, 2}})
        ->ArgNames({"n", "threads"})
        ->UseManualTime()
        ->MinTime(0.5)
        ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace tkv

int main(int argc, char** argv) {
  tkv::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
