// `turbokv bench compare`: prefill and decode speed side by side with
// llama.cpp's llama-bench on one GGUF file (docs/BENCHMARKS.md).
//
// Each pair runs both engines on the same file, threads and prompt length,
// interleaved measurement by measurement (A B A B; which engine goes first
// alternates from pair to pair), so a load that comes and goes on a shared
// machine falls on both. Per metric (prefill tok/s at P, decode tok/s at
// depth 0 and at --depth) the report gives each engine's median and
// min-max over the pairs and the ratio turbokv / llama.cpp of every pair,
// with its median and min-max: single pairs prove little.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "bench/json.h"

namespace tkv::bench {

struct CompareOptions {
  std::string model, llama_bin, llama_args, kv = "f16", out_dir;
  int threads = 0;  // 0: physical cores
  int pairs = 5;
  int prompt_tokens = 512;
  int depth = 4096;  // 0: no deep decode point
  int gen_tokens = 32;
  bool quiet = false;
};

// Parses the flags after `bench compare`. Returns false for --help (printed).
// tkv::Error (one line) for a bad or missing flag.
bool parse_compare_flags(const std::vector<std::string>& args, CompareOptions& o);

// The three figures of one engine in one pair (tok/s); NaN: not measured.
struct EngineFigures {
  double prefill = NAN, decode = NAN, decode_deep = NAN;
};

// llama-bench's `-o json` output: one entry per test. Takes the prefill
// (n_prompt P, n_gen 0), decode (n_gen G at depth 0) and deep decode (n_gen
// G at depth D) entries' avg_ts into `f`, and build_commit into `commit`.
// tkv::Error when the text is not llama-bench's JSON.
void read_llama_bench_json(const std::string& text, int prompt_tokens, int gen_tokens, int depth,
                           EngineFigures& f, std::string& commit);

// One metric over the pairs: {"turbokv": Summary, "llama_cpp": Summary,
// "ratio": {"per_pair": [turbokv / llama.cpp or null], and its Summary}}.
// Pairs where either engine has no figure are left out of the ratio.
Json compare_metric(const std::vector<double>& turbokv, const std::vector<double>& llama_cpp);

// The section's summary from every pair's figures: {"prefill", "decode",
// "decode_deep"} (decode_deep only when depth > 0).
Json compare_summary(const std::vector<EngineFigures>& turbokv,
                     const std::vector<EngineFigures>& llama_cpp, bool deep);

// How the llama.cpp build was configured, from the CMakeCache.txt in the
// bin directory or its parent: {"cmake_cache": path or null, "options":
// {GGML_NATIVE, GGML_AVX2, GGML_AVX512*, GGML_CPU_REPACK, GGML_AMX_*,
// CMAKE_BUILD_TYPE: value}, "describe": one line}.
Json describe_llama_build(const std::string& bin_dir);

std::string compare_markdown(const Json& section);

// `bench compare ARGS`; cell_argv runs this binary's cells (bench_cli.h).
int compare_main(const std::vector<std::string>& args, const std::vector<std::string>& cell_argv);

}  // namespace tkv::bench
