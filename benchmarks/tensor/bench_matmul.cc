// Weight-kernel benchmarks: matvec (decode) GB/s per type and llama-3.2-1b
// shape next to a STREAM-like read bandwidth measured in the same run, and
// matmul (prefill) GFLOP/s next to a measured FMA peak.
//
// Decode reads every weight once per token, so the honest figure is weight
// bytes / time with the weights coming from DRAM: each benchmark rotates
// through enough copies of its matrix (>= 1 GiB in all) that nothing is left
// in the (large, shared) L3 between two passes over the same copy.
//
//   build/benchmarks/tensor/bench_matmul --benchmark_filter='Matvec|Batch8|ReadBandwidth'
//   build/benchmarks/tensor/bench_matmul --benchmark_filter='Matvec(Batch8|RowBlocks8)/f16/ffn'
//   TURBOKV_SIMD=avx2 build/benchmarks/tensor/bench_matmul ...   (one SIMD target)
//   build/benchmarks/tensor/bench_matmul --benchmark_filter='Matmul|FmaPeak'
// On a shared machine add --benchmark_repetitions=5: the "_max" rows then
// hold the best GB/s and GFLOP/s of the repetitions (their time columns are
// the slowest run; read the counters).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "hwy/aligned_allocator.h"
#include "probes.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/gemm_amx.h"
#include "tensor/matmul.h"

namespace tkv {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kWorkingSet = static_cast<size_t>(1)
                               << 30;  // bytes of weights rotated per benchmark

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// --- STREAM-like read bandwidth ------------------------------------------

// STREAM-like read GB/s of the pool's threads summing a 512 MiB buffer with
// the best SIMD target (best of 3 passes). Each matvec benchmark measures it
// right after its own timed loop, with its own pool, so that both figures see
// the same machine state (this machine is shared with other jobs).
double read_bandwidth_now(ThreadPool& pool) {
  constexpr size_t kProbeBytes = size_t(512) << 20;
  constexpr size_t kFloats = kProbeBytes / 4;
  static const auto buf = [] {
    auto b = hwy::AllocateAligned<float>(kFloats);
    for (size_t i = 0; i < kFloats; ++i) b[i] = float(i & 1023);
    return b;
  }();
  double best = 0;
  volatile float sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    // 64 chunks of 8 MiB handed out dynamically, so every thread streams
    // until the buffer is done.
    constexpr int64_t kChunks = 64;
    std::vector<float> sums(kChunks);
    pool.run(kChunks, [&](int64_t c, int) {
      const size_t per = kFloats / kChunks;
      sums[static_cast<size_t>(c)] = bench::read_sum(buf.get() + static_cast<size_t>(c) * per, per);
    });
    const double s = seconds_since(t0);
    for (auto v : sums) sink = sink + v;
    best = std::max(best, double(kProbeBytes) / s / 1e9);
  }
  return best;
}

void BM_ReadBandwidth(benchmark::State& state) {
  ThreadPool pool(int(state.range(0)));
  double gbps = 0;
  for (auto _ : state) gbps = read_bandwidth_now(pool);
  state.counters["GBps"] = gbps;
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->Iterations(1)->Unit(benchmark::kMillisecond);

// Aggregate "max": with repetitions, the best figure a quiet moment allowed.
double max_of(const std::vector<double>& v) {
  return *std::max_element(v.begin(), v.end());
}

// --- weights ---------------------------------------------------------------

// Transparent huge pages over the whole 2 MiB pages of [p, p + n), before
// the first write, as a loaded model has them (common/mapped_file.h): with
// 4 KiB pages a matrix of hundreds of MiB streams through TLB misses that
// the engine's own weights do not take.
void advise_huge_pages(uint8_t* p, size_t n) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  const uintptr_t first = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(kHuge - 1);
  if (end > first) (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
#else
  (void)p, (void)n;
#endif
}

// A rows x cols matrix of `type` with realistic (quantized Gaussian) content:
// 64 distinct random rows repeated, since content does not change the speed.
// It starts 32 bytes past a cache line, where a mapped GGUF file puts its
// tensors: the format's default alignment is 32 bytes, and a data section
// at 32 mod 64 (the synthesized models' and many published files') puts
// every row piece across one more cache line than its size, which a
// kernel's prefetch must cover. Its memory is advised as huge pages.
struct WeightBytes {
  static constexpr size_t kOffset = 32;
  hwy::AlignedFreeUniquePtr<uint8_t[]> p;
  size_t size = 0;
  explicit WeightBytes(size_t n) : p(hwy::AllocateAligned<uint8_t>(n + kOffset)), size(n) {
    advise_huge_pages(p.get(), n + kOffset);
  }
  WeightBytes(const WeightBytes& o) : WeightBytes(o.size) { std::memcpy(data(), o.data(), size); }
  uint8_t* data() { return p.get() + kOffset; }
  const uint8_t* data() const { return p.get() + kOffset; }
};

WeightBytes make_matrix(DType type, int64_t rows, int64_t cols) {
  const size_t rb = row_bytes(type, cols);
  const int64_t distinct = std::min<int64_t>(rows, 64);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(cols));
  WeightBytes m(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < distinct; ++r) {
    for (auto& v : x) v = dist(rng);
    quantize_row(type, x.data(), m.data() + static_cast<size_t>(r) * rb, cols);
  }
  for (int64_t r = distinct; r < rows; ++r)
    std::memcpy(m.data() + static_cast<size_t>(r) * rb,
                m.data() + static_cast<size_t>(r % distinct) * rb, rb);
  return m;
}

// --- matvec ------------------------------------------------------------------

// How a benchmark with n > 1 tokens runs them.
enum class Batch {
  kMatmul,       // matmul, default kernel choice
  kMatvecBatch,  // matvec_batch: matvec's numbers per token (batched decode)
  kRowBlocks,    // matvec / matvec_batch on the matrix reordered into row blocks
};

// n = 1: matvec (decode); n > 1: n tokens through matmul (the default kernel
// choice: integer dot products up to kIntMatmulMaxTokens) or matvec_batch
// (what the batched decode of n sequences runs), weights streamed once for
// all of them.
void BM_Matvec(benchmark::State& state, DType type, int64_t rows, int64_t cols, int64_t n = 1,
               Batch batch = Batch::kMatmul) {
  const int threads = int(state.range(0));
  const auto base = make_matrix(type, rows, cols);
  const size_t bytes = base.size;
  const size_t copies = std::max<size_t>(2, (kWorkingSet + bytes - 1) / bytes);
  std::vector<WeightBytes> mats(copies, base);
  std::vector<WeightMatrix> ws;
  for (auto& m : mats) ws.push_back(make_weight(type, m.data(), rows, cols, "bench"));
  std::vector<float> x(static_cast<size_t>(cols * n)), y(static_cast<size_t>(rows * n));
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  ThreadPool pool(threads);
  if (batch == Batch::kRowBlocks) {
    // Measured whatever this CPU's default (kernel_config.h: row blocks by
    // default on AMD only, or for batches); TURBOKV_ROW_BLOCKS=0 still skips them.
    const KernelConfig before = kernel_config();
    set_kernel_decodes_batches(true);
    const bool reorder = row_blocks_pay_off(ws[0]);
    for (size_t i = 0; reorder && i < ws.size(); ++i)
      ws[i] = to_row_blocks(ws[i], mats[i].data(), pool);
    set_kernel_config(before);
    if (!reorder) {
      state.SkipWithError("no row blocks here (rows % 16, or TURBOKV_ROW_BLOCKS=0)");
      return;
    }
  }
  auto product = [&](const WeightMatrix& w) {
    if (n == 1)
      matvec(w, x.data(), y.data(), pool);
    else if (batch == Batch::kMatvecBatch || batch == Batch::kRowBlocks)
      matvec_batch(w, x.data(), n, y.data(), pool);
    else
      matmul(w, x.data(), n, y.data(), pool);
  };
  for (const auto& w : ws) product(w);  // warm-up, page-in
  size_t next = 0;
  double total = 0;
  int64_t passes = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    product(ws[next]);
    const double s = seconds_since(t0);
    state.SetIterationTime(s);
    total += s;
    ++passes;
    next = (next + 1) % ws.size();
    benchmark::DoNotOptimize(y.data());
  }
  const double gbps = double(bytes) * double(passes) / total / 1e9;
  const double read_bw = read_bandwidth_now(pool);
  state.counters["GBps"] = gbps;
  state.counters["read_bw_GBps"] = read_bw;
  state.counters["pct_of_read_bw"] = 100.0 * gbps / read_bw;
  state.counters["tokens_per_s"] = double(n) * double(passes) / total;
  state.counters["GFLOPs"] = 2.0 * double(rows * cols) * double(n) * double(passes) / total / 1e9;
  state.SetLabel(str(dtype_name(type), " ", rows, "x", cols, n > 1 ? str(" n=", n) : "", " ",
                     active_simd_target()));
}

// The llama-3.2-1b projections: q/o (2048x2048), k/v (512x2048), gate/up
// (8192x2048), down (2048x8192), and the 128256-token output matrix.
struct Shape {
  const char* name;
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{"attn_q", 2048, 2048},
                             {"attn_kv", 512, 2048},
                             {"ffn_up", 8192, 2048},
                             {"ffn_down", 2048, 8192},
                             {"output", 128256, 2048}};

// A weights-from-DRAM matvec row at 1 and 2 threads (manual time: the
// benchmark body times only the kernel), reporting the best repetition too.
template <class Fn>
void register_dram(const std::string& name, Fn fn) {
  benchmark::RegisterBenchmark(name.c_str(), fn)
      ->Arg(1)
      ->Arg(2)
      ->UseManualTime()
      ->MinTime(0.5)
      ->ComputeStatistics("max", max_of)
      ->Unit(benchmark::kMicrosecond);
}

void register_matvec() {
  const DType main_types[] = {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};
  for (DType t : main_types)
    for (const auto& s : kShapes)
      register_dram(str("Matvec/", dtype_name(t), "/", s.name),
                    [t, s](benchmark::State& st) { BM_Matvec(st, t, s.rows, s.cols); });
  // Every other supported type on one large shape.
  const DType other_types[] = {DType::F32,    DType::BF16,   DType::Q4_1, DType::Q5_0,
                               DType::Q5_1,   DType::Q2_K,   DType::Q3_K, DType::Q5_K,
                               DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};
  for (DType t : other_types)
    register_dram(str("Matvec/", dtype_name(t), "/ffn_up"),
                  [t](benchmark::State& st) { BM_Matvec(st, t, 8192, 2048); });
  // One gpt-oss expert matrix (2880 x 2880): MXFP4 next to the other 4-bit
  // types with 32-value blocks.
  for (DType t : {DType::MXFP4, DType::IQ4_NL, DType::Q4_0})
    register_dram(str("Matvec/", dtype_name(t), "/expert_2880"),
                  [t](benchmark::State& st) { BM_Matvec(st, t, 2880, 2880); });
  // Batched decode: 8 sequences' tokens against each weight, read once.
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::Q4_0, DType::F16})
    register_dram(str("Batch8/", dtype_name(t), "/ffn_up"),
                  [t](benchmark::State& st) { BM_Matvec(st, t, 8192, 2048, 8); });
  // The float weights' batched decode (matvec_batch), per llama-3.2-1b
  // shape: B sequences' tokens against each weight, read once per step.
  for (DType t : {DType::F16, DType::BF16})
    for (const auto& s : kShapes)
      for (const int64_t n : {8, 16})
        register_dram(str("MatvecBatch", n, "/", dtype_name(t), "/", s.name),
                      [t, s, n](benchmark::State& st) {
                        BM_Matvec(st, t, s.rows, s.cols, n, Batch::kMatvecBatch);
                      });
  // F16 held as row blocks (a model read into memory), 1, 8 and 16 tokens:
  // next to Matvec/f16 and MatvecBatch8/16 above.
  for (const auto& s : kShapes)
    for (const int64_t n : {1, 8, 16})
      register_dram(str("MatvecRowBlocks", n, "/f16/", s.name), [s, n](benchmark::State& st) {
        BM_Matvec(st, DType::F16, s.rows, s.cols, n, Batch::kRowBlocks);
      });
}

// Kernel ceiling: one thread, a 256 x 2048 matrix that stays in L2, so the
// figure is what the decoder can consume, not what memory can deliver. A
// type is memory-bound when this exceeds the per-core read bandwidth.
void BM_MatvecInCache(benchmark::State& state, DType type) {
  constexpr int64_t kRows = 256, kCols = 2048;
  const auto m = make_matrix(type, kRows, kCols);
  const WeightMatrix w = make_weight(type, m.data(), kRows, kCols, "bench");
  std::vector<float> x(kCols, 0.01f), y(kRows);
  ThreadPool pool(1);
  for (int i = 0; i < 10; ++i) matvec(w, x.data(), y.data(), pool);
  for (auto _ : state) {
    matvec(w, x.data(), y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GBps"] = benchmark::Counter(double(m.size) * double(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
  state.counters["Gvalues_per_s"] = benchmark::Counter(
      double(kRows * kCols) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(str(dtype_name(type), " ", active_simd_target()));
}

double fma_peak_gflops();

// The batched float kernel's compute ceiling: one thread, n tokens against a
// 64 x cols matrix that stays in L1/L2, GFLOP/s next to the FMA peak of one
// core (matvec_batch keeps matvec's two FMA chains per (row, token), so the
// f16/bf16 conversion of each weight vector is shared by the tokens of one
// register block only).
void BM_MatvecBatchInCache(benchmark::State& state, DType type) {
  const int64_t n = state.range(0), cols = state.range(1), rows = 64;
  const auto m = make_matrix(type, rows, cols);
  const WeightMatrix w = make_weight(type, m.data(), rows, cols, "bench");
  std::vector<float> x(static_cast<size_t>(n * cols), 0.01f), y(static_cast<size_t>(n * rows));
  ThreadPool pool(1);
  for (int i = 0; i < 10; ++i) matvec_batch(w, x.data(), n, y.data(), pool);
  for (auto _ : state) {
    matvec_batch(w, x.data(), n, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * double(rows * cols * n) * double(state.iterations());
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsRate);
  state.counters["fma_peak_GFLOPs"] = fma_peak_gflops();
  state.SetLabel(str(dtype_name(type), " n=", n, " ", active_simd_target()));
}

void register_in_cache() {
  for (DType t : {DType::F16, DType::BF16, DType::F32})
    benchmark::RegisterBenchmark(str("MatvecBatchInCache/", dtype_name(t)).c_str(),
                                 [t](benchmark::State& st) { BM_MatvecBatchInCache(st, t); })
        ->ArgsProduct({{1, 4, 8, 16, 64, 256}, {2048, 8192}})
        ->ArgNames({"n", "cols"})
        ->ComputeStatistics("max", max_of)
        ->Unit(benchmark::kMicrosecond);
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = dtype_traits(id);
    if (!tr || !tr->supported) continue;
    const DType t = tr->type;
    benchmark::RegisterBenchmark(str("MatvecInCache/", tr->name).c_str(),
                                 [t](benchmark::State& st) { BM_MatvecInCache(st, t); })
        ->ComputeStatistics("max", max_of)
        ->Unit(benchmark::kMicrosecond);
  }
}

// --- matmul ------------------------------------------------------------------

double fma_peak_gflops() {
  static double peak = 0;
  if (peak == 0) {
    bench::run_fma_chains(1 << 20);  // warm up the frequency
    const auto t0 = Clock::now();
    const double flops = bench::run_fma_chains(1 << 26);
    peak = flops / seconds_since(t0) / 1e9;
  }
  return peak;
}

void BM_FmaPeak(benchmark::State& state) {
  double g = 0;
  for (auto _ : state) g = fma_peak_gflops();
  state.counters["GFLOPs_per_core"] = g;
  state.SetLabel(active_simd_target());
}
BENCHMARK(BM_FmaPeak)->Iterations(1)->Unit(benchmark::kMillisecond);

// " AMX" where the prefill products of `type` run on AMX (F16 / BF16 weights;
// TURBOKV_AMX=0 turns it off), else nothing: for the benchmarks' labels.
const char* amx_tag(DType type) {
  return (type == DType::F16 || type == DType::BF16) && kernels::amx_gemm_active() ? " AMX" : "";
}

// Prefill: n tokens against one 2048x2048 matrix with the given kernel
// (kAuto: what matmul picks for n; kFloat / kInteger: one path forced).
void BM_Matmul(benchmark::State& state, DType type, int64_t rows, int64_t cols,
               MatmulKernel kernel) {
  const int64_t n = state.range(0);
  const int threads = int(state.range(1));
  const auto m = make_matrix(type, rows, cols);
  const WeightMatrix w = make_weight(type, m.data(), rows, cols, "bench");
  std::vector<float> x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n * rows));
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  ThreadPool pool(threads);
  matmul(w, x.data(), n, y.data(), pool, kernel);  // warm-up: scratch allocation
  double total = 0;
  int64_t passes = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    matmul(w, x.data(), n, y.data(), pool, kernel);
    const double s = seconds_since(t0);
    state.SetIterationTime(s);
    total += s;
    ++passes;
    benchmark::DoNotOptimize(y.data());
  }
  const double gflops =
      2.0 * double(rows) * double(cols) * double(n) * double(passes) / total / 1e9;
  state.counters["GFLOPs"] = gflops;
  state.counters["pct_of_fma_peak"] = 100.0 * gflops / (fma_peak_gflops() * threads);
  state.SetLabel(str(dtype_name(type), " ", rows, "x", cols, " n=", n, " ", active_simd_target(),
                     amx_tag(type)));
}

// Prefill of one llama-3.2-1b layer: its seven products (q, k, v, o, gate,
// up, down) at n tokens with the kernel matmul picks, so that the panel
// split of the tall (8192 x 2048), short (512 x 2048) and long (2048 x 8192)
// shapes is timed as a prefill runs them, not only the square one.
void BM_PrefillLayer(benchmark::State& state, DType type) {
  const int64_t n = state.range(0);
  const int threads = int(state.range(1));
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{2048, 2048}, {512, 2048},  {512, 2048}, {2048, 2048},
                          {8192, 2048}, {8192, 2048}, {2048, 8192}};
  std::vector<WeightBytes> mats;
  std::vector<WeightMatrix> ws;
  double flops = 0;
  for (const Shape& s : shapes) {
    mats.push_back(make_matrix(type, s.rows, s.cols));
    flops += 2.0 * double(s.rows) * double(s.cols) * double(n);
  }
  for (size_t i = 0; i < mats.size(); ++i)
    ws.push_back(make_weight(type, mats[i].data(), shapes[i].rows, shapes[i].cols, "bench"));
  std::vector<float> x(static_cast<size_t>(n * 8192)), y(static_cast<size_t>(n * 8192));
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  ThreadPool pool(threads);
  for (const auto& w : ws) matmul(w, x.data(), n, y.data(), pool);  // warm-up: scratch, page-in
  double total = 0;
  int64_t passes = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (const auto& w : ws) matmul(w, x.data(), n, y.data(), pool);
    const double s = seconds_since(t0);
    state.SetIterationTime(s);
    total += s;
    ++passes;
    benchmark::DoNotOptimize(y.data());
  }
  const double gflops = flops * double(passes) / total / 1e9;
  state.counters["GFLOPs"] = gflops;
  state.counters["pct_of_fma_peak"] = 100.0 * gflops / (fma_peak_gflops() * threads);
  state.counters["layers_per_s"] = double(passes) / total;
  state.SetLabel(str(dtype_name(type), " n=", n, " ", active_simd_target(), amx_tag(type)));
}

void register_matmul() {
  for (DType t : {DType::F16, DType::Q8_0, DType::Q4_K})
    benchmark::RegisterBenchmark(str("PrefillLayer/", dtype_name(t)).c_str(),
                                 [t](benchmark::State& st) { BM_PrefillLayer(st, t); })
        ->Args({512, 2})
        ->Args({128, 2})
        ->Args({1024, 2})
        ->Args({512, 1})
        ->ArgNames({"n", "threads"})
        ->UseManualTime()
        ->MinTime(1.0)
        ->ComputeStatistics("max", max_of)
        ->Unit(benchmark::kMillisecond);
  struct Variant {
    const char* name;
    MatmulKernel kernel;
    bool dot_instructions;  // VNNI / sdot where the CPU has them
  };
  // Matmul: what kAuto picks; MatmulFloat / MatmulInt: one path forced;
  // MatmulIntNoDot: the integer path without the dot-product instructions.
  const Variant variants[] = {{"", MatmulKernel::kAuto, true},
                              {"Float", MatmulKernel::kFloat, true},
                              {"Int", MatmulKernel::kInteger, true},
                              {"IntNoDot", MatmulKernel::kInteger, false}};
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = dtype_traits(id);
    if (!tr || !tr->supported) continue;
    const DType t = tr->type;
    const bool main_type = t == DType::F16 || t == DType::Q4_K || t == DType::Q8_0 ||
                           t == DType::Q4_0 || t == DType::Q6_K;
    const bool quantized = t != DType::F32 && t != DType::F16 && t != DType::BF16;
    for (const Variant& v : variants) {
      // The float types have one kernel; the forced variants are for the
      // quantized ones; the main types get every shape, the others n = 512.
      if (!quantized && v.kernel != MatmulKernel::kAuto) continue;
      if (!main_type && !quantized) continue;
      const MatmulKernel k = v.kernel;
      const bool dot = v.dot_instructions;
      auto* b =
          benchmark::RegisterBenchmark(str("Matmul", v.name, "/", tr->name, "/2048x2048").c_str(),
                                       [t, k, dot](benchmark::State& st) {
                                         const KernelConfig before = kernel_config();
                                         KernelConfig c = before;
                                         c.int_dot = dot;
                                         set_kernel_config(c);
                                         BM_Matmul(st, t, 2048, 2048, k);
                                         set_kernel_config(before);
                                       });
      if (main_type)
        b->ArgsProduct({{64, 512}, {1, 2}});
      else
        b->Args({512, 1});
      b->ArgNames({"n", "threads"})
          ->UseManualTime()
          ->MinTime(0.5)
          ->ComputeStatistics("max", max_of)
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace tkv

int main(int argc, char** argv) {
  tkv::register_matvec();
  tkv::register_in_cache();
  tkv::register_matmul();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
