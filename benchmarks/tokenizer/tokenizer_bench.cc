// Tokenizer throughput on ~400 KB of English technical text (the held-out
// filler of the tkv-test model): encode with the 128K-token Llama-3 BPE
// vocabulary, Qwen2's 152K vocabulary, and the 32K Llama-2 SPM vocabulary;
// decode of the result; tokenizer construction from the GGUF file; and
// match_encoding of a long ChatML conversation's earlier turns beside the
// whole conversation's ids (what the server does per chat request), set
// beside encoding those turns and comparing.
//
//   build/benchmarks/tokenizer/tokenizer_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/atomic_file.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

using tkv::tok::Tokenizer;

std::string fixture(const char* rel) {
  const char* env = std::getenv("TURBOKV_MODELS");
  const std::filesystem::path p = std::filesystem::path(env ? env : "../shared/models") / rel;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

std::string str_turn(const char* role, const std::string& content) {
  return std::string("<|im_start|>") + role + "\n" + content + "<|im_end|>\n";
}

// About 400 KB: the held-out text, repeated as needed.
std::string sample_text() {
  const std::string path = fixture("tkv-test-heldout.txt");
  if (path.empty()) return {};
  const std::string base = tkv::read_file(path);
  std::string text;
  while (text.size() < 400 * 1000) text += base;
  text.resize(400 * 1000);
  return text;
}

void BM_Encode(benchmark::State& state, const char* vocab) {
  const std::string path = fixture(vocab);
  const std::string text = sample_text();
  if (path.empty() || text.empty()) {
    state.SkipWithError("fixture not found (set TURBOKV_MODELS)");
    return;
  }
  const Tokenizer tok = Tokenizer::from_gguf(tkv::gguf::GgufFile::open(path));
  size_t n_tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, true, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(n_tokens);
}
BENCHMARK_CAPTURE(BM_Encode, llama_bpe_128k, "vocab/ggml-vocab-llama-bpe.gguf")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, qwen2_152k, "vocab/ggml-vocab-qwen2.gguf")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, llama_spm_32k, "vocab/ggml-vocab-llama-spm.gguf")
    ->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state, const char* vocab) {
  const std::string path = fixture(vocab);
  const std::string text = sample_text();
  if (path.empty() || text.empty()) {
    state.SkipWithError("fixture not found (set TURBOKV_MODELS)");
    return;
  }
  const Tokenizer tok = Tokenizer::from_gguf(tkv::gguf::GgufFile::open(path));
  const auto ids = tok.encode(text, false, false);
  for (auto _ : state) benchmark::DoNotOptimize(tok.decode(ids));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}
BENCHMARK_CAPTURE(BM_Decode, llama_bpe_128k, "vocab/ggml-vocab-llama-bpe.gguf")
    ->Unit(benchmark::kMillisecond);

// A ChatML conversation of about 400 KB (turns of the held-out text), and
// its rendering without the last turn.
std::pair<std::string, std::string> conversation() {
  const std::string text = sample_text();
  if (text.empty()) return {};
  std::string chat = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n", earlier;
  for (size_t at = 0, turn = 0; at < text.size(); at += 2000, ++turn) {
    earlier = chat;
    chat += str_turn(turn % 2 ? "assistant" : "user", text.substr(at, 2000));
  }
  return {chat, earlier};
}

// earlier's encoding against the conversation's ids: by match_encoding
// (range(0) = 1) or by encoding it and comparing (0).
void BM_MatchEarlierTurns(benchmark::State& state) {
  const std::string path = fixture("vocab/ggml-vocab-qwen2.gguf");
  const auto [chat, earlier] = conversation();
  if (path.empty() || chat.empty()) {
    state.SkipWithError("fixture not found (set TURBOKV_MODELS)");
    return;
  }
  const Tokenizer tok = Tokenizer::from_gguf(tkv::gguf::GgufFile::open(path));
  const std::vector<int32_t> ids = tok.encode(chat, false, true);
  size_t common = 0;
  for (auto _ : state) {
    if (state.range(0)) {
      common = tok.match_encoding(ids, earlier, true).common;
    } else {
      const std::vector<int32_t> e = tok.encode(earlier, false, true);
      common = size_t(std::mismatch(e.begin(), e.end(), ids.begin(), ids.end()).first - e.begin());
    }
    benchmark::DoNotOptimize(common);
  }
  state.counters["common_tokens"] = double(common);
  state.counters["tokens"] = double(ids.size());
}
BENCHMARK(BM_MatchEarlierTurns)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_Load(benchmark::State& state, const char* vocab) {
  const std::string path = fixture(vocab);
  if (path.empty()) {
    state.SkipWithError("fixture not found (set TURBOKV_MODELS)");
    return;
  }
  const tkv::gguf::GgufFile file = tkv::gguf::GgufFile::open(path);
  for (auto _ : state) benchmark::DoNotOptimize(Tokenizer::from_gguf(file).n_vocab());
}
BENCHMARK_CAPTURE(BM_Load, llama_bpe_128k, "vocab/ggml-vocab-llama-bpe.gguf")
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
