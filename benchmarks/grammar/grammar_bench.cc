// The cost of grammar-constrained sampling per generated token on a real
// 128K vocabulary (llama-bpe, Llama 3: 128256 tokens; a synthetic one of the
// same size when the fixture is absent), for a realistic JSON schema:
//   BM_GrammarDocument    mask + accept for every token of a document, from
//                         a fresh constraint (cold caches): mean, p99 and
//                         max per token as counters (microseconds of the
//                         thread's CPU time, cpu_*, and of wall time, wall_*);
//   BM_GrammarMaskCold    one mask at a point of the output (start, inside a
//                         string with or without maxLength, between keys,
//                         inside a number, after a colon), nothing cached;
//   BM_GrammarTrieBuild   the vocabulary trie (once per vocabulary).
// Run: TURBOKV_MODELS=../shared/models build/release/benchmarks/grammar/grammar_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace tkv::grammar;

constexpr const char* kSchema = R"({"type":"object","properties":{
  "id":{"type":"string","format":"uuid"},
  "name":{"type":"string","maxLength":80},
  "email":{"type":"string"},
  "age":{"type":"integer"},
  "score":{"type":"number"},
  "active":{"type":"boolean"},
  "role":{"enum":["admin","editor","viewer"]},
  "address":{"type":"object","properties":{
     "street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
     "required":["street","city","zip"],"additionalProperties":false},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":8},
  "notes":{"type":["string","null"]}},
 "required":["id","name","email","age","score","active","role","address","tags","notes"],
 "additionalProperties":false})";

constexpr const char* kDocument =
    R"({"id": "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c", "name": "Ada Lovelace", "email": "ada@example.org", "age": 36, "score": 98.25, "active": true, "role": "editor", "address": {"street": "12 St James's Square", "city": "London", "zip": "10001"}, "tags": ["mathematics", "analytical engine", "poetry"], "notes": "Wrote the first published algorithm intended for a machine; corresponded with Babbage about Bernoulli numbers."})";

struct Setup {
  std::vector<std::string> vocab;
  std::shared_ptr<const TokenTrie> trie;
  std::shared_ptr<const Grammar> grammar;
  std::vector<int32_t> doc;  // the document's tokens
  int32_t end = 0;
  std::string source;
};

// A synthetic 128256-token vocabulary: every byte, then random lowercase
// words with and without a leading space, then JSON punctuation pieces.
std::vector<std::string> synthetic_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, char(b));
  for (const char* p :
       {"\":", "\", \"", "\": \"", "{\"", "\"}", "\"]", "[\"", ", ", "\": ", "\",", "},"})
    v.emplace_back(p);
  std::mt19937 rng(1);
  while (v.size() < 128255) {
    std::string w = (rng() & 1) ? " " : "";
    const int n = 2 + int(rng() % 8);
    for (int i = 0; i < n; ++i) w += char('a' + rng() % 26);
    v.push_back(w);
  }
  v.emplace_back("");  // the end token
  return v;
}

// Greedy longest match (the synthetic vocabulary has no tokenizer).
std::vector<int32_t> longest_match(const std::vector<std::string>& vocab, const std::string& text) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < text.size();) {
    int32_t best = -1;
    for (size_t t = 0; t < vocab.size(); ++t) {
      const std::string& w = vocab[t];
      if (!w.empty() && text.compare(i, w.size(), w) == 0 &&
          (best < 0 || w.size() > vocab[size_t(best)].size()))
        best = int32_t(t);
    }
    out.push_back(best);
    i += vocab[size_t(best)].size();
  }
  return out;
}

const Setup& setup() {
  static const Setup s = [] {
    Setup s;
    const char* env = std::getenv("TURBOKV_MODELS");
    const std::filesystem::path path =
        std::filesystem::path(env ? env : "../shared/models") / "vocab/ggml-vocab-llama-bpe.gguf";
    if (std::filesystem::exists(path)) {
      const auto tok = tkv::tok::Tokenizer::from_gguf(tkv::gguf::GgufFile::open(path.string()));
      for (int32_t t = 0; t < tok.n_vocab(); ++t) s.vocab.push_back(tok.token_to_piece(t));
      s.doc = tok.encode(kDocument, false, false);
      s.end = tok.eos();
      s.source = "llama-bpe";
    } else {
      s.vocab = synthetic_vocab();
      s.doc = longest_match(s.vocab, kDocument);
      s.end = int32_t(s.vocab.size() - 1);
      s.source = "synthetic";
    }
    s.trie = std::make_shared<const TokenTrie>(s.vocab);
    s.grammar = std::make_shared<const Grammar>(
        parse_gbnf(json_schema_to_gbnf(nlohmann::ordered_json::parse(kSchema))));
    return s;
  }();
  return s;
}

// CPU time of this thread, in microseconds: per-token figures that a
// loaded machine does not inflate the way it does wall time.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) * 1e-3;
}

void set_per_token_counters(benchmark::State& state, const std::string& prefix,
                            std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  state.counters[prefix + "mean_us"] = sum / double(us.size());
  state.counters[prefix + "p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  state.counters[prefix + "max_us"] = us.back();
}

void BM_GrammarDocument(benchmark::State& state) {
  const Setup& s = setup();
  std::vector<float> logits(s.vocab.size());
  std::vector<double> wall, cpu;
  for (auto _ : state) {
    GrammarConstraint c(s.grammar, s.trie, {s.end});
    for (int32_t t : s.doc) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = thread_cpu_us();
      c.mask(logits.data(), int(logits.size()));
      c.accept(t);
      cpu.push_back(thread_cpu_us() - c0);
      wall.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tokens"] = double(s.doc.size());
  set_per_token_counters(state, "cpu_", cpu);
  set_per_token_counters(state, "wall_", wall);
  state.SetLabel(s.source + " vocab " + std::to_string(s.vocab.size()));
}
BENCHMARK(BM_GrammarDocument)->Unit(benchmark::kMillisecond);

// Points of the document: the bytes before them.
const char* kPoints[] = {
    "",
    R"({"id": "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c", "name": "Ada Lo)",
    R"({"id": "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c", "name": "Ada Lovelace", )",
    R"({"id": "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c", "name": "Ada Lovelace", "email": "ada@example.org", "age": 3)",
    R"({"id": "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c", "name": "Ada Lovelace", "email": "ada@example.org", "age": 36, "score": 98.25, "active": true, "role": "editor", "address": {"street": "12 St James's Square", "city": "London", "zip": "10001"}, "tags": ["mathematics", "analytical engine", "poetry"], "notes":)",
    R"({"id": "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c", "name": "Ada Lovelace", "email": "ada@exa)"};
const char* kPointNames[] = {"start",         "inside a string of maxLength 80",
                             "between keys",  "inside a number",
                             "after a colon", "inside a string"};

void BM_GrammarMaskCold(benchmark::State& state) {
  const Setup& s = setup();
  const std::string prefix = kPoints[state.range(0)];
  size_t allowed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto c = std::make_unique<GrammarConstraint>(s.grammar, s.trie, std::vector<int32_t>{s.end});
    // The prefix byte by byte, through the single-byte tokens.
    for (char ch : prefix) {
      const std::string one(1, ch);
      int32_t t = 0;
      while (s.vocab[size_t(t)] != one) ++t;
      c->accept(t);
    }
    state.ResumeTiming();
    const std::vector<uint64_t>& bits = c->allowed();
    allowed = 0;
    for (uint64_t w : bits) allowed += size_t(__builtin_popcountll(w));
  }
  state.counters["allowed"] = double(allowed);
  state.SetLabel(kPointNames[state.range(0)]);
}
BENCHMARK(BM_GrammarMaskCold)->DenseRange(0, 5)->Unit(benchmark::kMillisecond);

void BM_GrammarTrieBuild(benchmark::State& state) {
  const Setup& s = setup();
  for (auto _ : state) {
    TokenTrie trie(s.vocab);
    benchmark::DoNotOptimize(trie.node_count());
  }
}
BENCHMARK(BM_GrammarTrieBuild)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
