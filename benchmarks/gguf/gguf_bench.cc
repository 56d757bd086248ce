// Parse time of GGUF files: the Llama-3 vocabulary (128K tokens, 280K merges,
// the largest metadata a model loader sees) from the shared fixtures, and a
// synthetic file with many tensor infos (a 70B-like tensor count).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>

#include "common/atomic_file.h"
#include "gguf/gguf.h"

namespace {

using tkv::gguf::GgufFile;
using tkv::gguf::GgufWriter;

std::string fixture(const char* rel) {
  const char* env = std::getenv("TURBOKV_MODELS");
  const std::filesystem::path p = std::filesystem::path(env ? env : "../shared/models") / rel;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

void BM_ParseVocab(benchmark::State& state, const char* rel) {
  const std::string path = fixture(rel);
  if (path.empty()) {
    state.SkipWithError("fixture not found (set TURBOKV_MODELS)");
    return;
  }
  const std::string bytes = tkv::read_file(path);
  for (auto _ : state) {
    const GgufFile f =
        GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
    benchmark::DoNotOptimize(f.metadata().size());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes.size()));
}
BENCHMARK_CAPTURE(BM_ParseVocab, llama_bpe, "vocab/ggml-vocab-llama-bpe.gguf")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ParseVocab, llama_spm, "vocab/ggml-vocab-llama-spm.gguf")
    ->Unit(benchmark::kMillisecond);

void BM_ParseManyTensors(benchmark::State& state) {
  GgufWriter w;
  const int n = int(state.range(0));
  for (int i = 0; i < n; ++i)
    w.add_tensor("blk." + std::to_string(i / 9) + ".t" + std::to_string(i % 9), tkv::DType::F32,
                 {8}, [](uint8_t* d, size_t k) { std::fill(d, d + k, 0); });
  const auto bytes = w.to_bytes();
  for (auto _ : state) {
    const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "synthetic");
    benchmark::DoNotOptimize(f.tensors().size());
  }
  state.counters["tensors"] = n;
}
BENCHMARK(BM_ParseManyTensors)->Arg(291)->Arg(723)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
