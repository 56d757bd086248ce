// bench compare: its flags and refusals, the statistics over pairs on
// canned figures, llama-bench's JSON, the llama.cpp build's description,
// and an end-to-end run on stories260K against a local llama.cpp build
// (skipped where there is none: CI has no llama.cpp).
#include "bench/compare.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "bench/report.h"
#include "bench_test_util.h"
#include "common/error.h"
#include "test_util.h"

namespace tkv::bench {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLlamaBin = "/work/peers/llamacpp/build-noamx/bin";

std::string flag_error(std::vector<std::string> args) {
  CompareOptions o;
  try {
    parse_compare_flags(args, o);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(BenchCompare, ParsesFlagsWithDefaults) {
  CompareOptions o;
  ASSERT_TRUE(parse_compare_flags({"-m", "x.gguf", "--llama-bin", "/d"}, o));
  EXPECT_EQ(o.pairs, 5);
  EXPECT_EQ(o.prompt_tokens, 512);
  EXPECT_EQ(o.depth, 4096);
  EXPECT_EQ(o.gen_tokens, 32);
  EXPECT_EQ(o.kv, "f16");
  EXPECT_GT(o.threads, 0);  // physical cores

  CompareOptions p;
  ASSERT_TRUE(parse_compare_flags({"-m",
                                   "x.gguf",
                                   "--llama-bin",
                                   "/d",
                                   "-t",
                                   "3",
                                   "--pairs",
                                   "2",
                                   "--prompt-tokens",
                                   "64",
                                   "--depth",
                                   "0",
                                   "--gen-tokens",
                                   "8",
                                   "--kv",
                                   "q8_0",
                                   "--llama-args",
                                   "--no-warmup",
                                   "--out",
                                   "o"},
                                  p));
  EXPECT_EQ(p.threads, 3);
  EXPECT_EQ(p.pairs, 2);
  EXPECT_EQ(p.prompt_tokens, 64);
  EXPECT_EQ(p.depth, 0);
  EXPECT_EQ(p.gen_tokens, 8);
  EXPECT_EQ(p.kv, "q8_0");
  EXPECT_EQ(p.llama_args, "--no-warmup");
  EXPECT_EQ(p.out_dir, "o");
}

TEST(BenchCompare, RefusesBadFlagsInOneLine) {
  EXPECT_EQ(flag_error({"--llama-bin", "/d"}), "bench compare: -m MODEL is required");
  EXPECT_EQ(flag_error({"-m", "x.gguf"}), "bench compare: --llama-bin DIR is required");
  EXPECT_NE(flag_error({"-m", "x", "--llama-bin", "d", "--pairs", "0"}).find("--pairs"),
            std::string::npos);
  EXPECT_NE(flag_error({"-m", "x", "--llama-bin", "d", "--depth", "-1"}).find("--depth"),
            std::string::npos);
  EXPECT_NE(flag_error({"-m", "x", "--llama-bin", "d", "--gen-tokens", "x"}).find("--gen-tokens"),
            std::string::npos);
  EXPECT_NE(flag_error({"-m", "x", "--llama-bin", "d", "--kv", "f16,k4v2"}).find("one config"),
            std::string::npos);
  EXPECT_NE(flag_error({"-m", "x", "--llama-bin", "d", "--bogus"}).find("--bogus"),
            std::string::npos);
}

TEST(BenchCompare, MissingLlamaBenchIsAClearError) {
  const std::string dir = ::tkv::test::temp_dir() + "/no-llama";
  fs::create_directories(dir);
  try {
    compare_main({"-m", "x.gguf", "--llama-bin", dir}, {"unused"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "bench compare: --llama-bin: no executable llama-bench in " + dir);
  }
}

TEST(BenchCompare, MediansSpreadsAndRatiosPerPair) {
  const double nan = NAN;
  // Pair 3 has no llama.cpp figure: out of the ratio, null in per_pair.
  const Json m = compare_metric({100, 300, 50, 200}, {50, 100, nan, 400});
  EXPECT_EQ(m["turbokv"]["n"], 4);
  EXPECT_DOUBLE_EQ(m["turbokv"]["median"].get<double>(), 150);
  EXPECT_DOUBLE_EQ(m["turbokv"]["min"].get<double>(), 50);
  EXPECT_DOUBLE_EQ(m["turbokv"]["max"].get<double>(), 300);
  EXPECT_EQ(m["llama_cpp"]["n"], 3);
  EXPECT_DOUBLE_EQ(m["llama_cpp"]["median"].get<double>(), 100);
  EXPECT_TRUE(m["llama_cpp"]["per_pair"][2].is_null());
  const Json& r = m["ratio"];
  ASSERT_EQ(r["per_pair"].size(), 4u);
  EXPECT_DOUBLE_EQ(r["per_pair"][0].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["per_pair"][1].get<double>(), 3.0);
  EXPECT_TRUE(r["per_pair"][2].is_null());
  EXPECT_DOUBLE_EQ(r["per_pair"][3].get<double>(), 0.5);
  EXPECT_EQ(r["n"], 3);
  EXPECT_DOUBLE_EQ(r["median"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["min"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r["max"].get<double>(), 3.0);

  EngineFigures t, l;
  t.prefill = 10;
  t.decode = 4;
  l.prefill = 20;
  l.decode = 2;
  const Json s = compare_summary({t}, {l}, false);
  EXPECT_DOUBLE_EQ(s["prefill"]["ratio"]["median"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["decode"]["ratio"]["median"].get<double>(), 2.0);
  EXPECT_FALSE(s.contains("decode_deep"));
}

// The shape llama-bench -o json prints (fields cut to those read, plus a few
// it prints that must be ignored).
constexpr const char* kLlamaJson = R"([
  {"build_commit": "80fb11a", "build_number": 1, "n_threads": 2, "type_k": "f16",
   "n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ns": 18379968, "avg_ts": 1741.025882,
   "samples_ts": [1741.03]},
  {"build_commit": "80fb11a", "n_prompt": 0, "n_gen": 32, "n_depth": 0, "avg_ts": 12786.415712},
  {"build_commit": "80fb11a", "n_prompt": 0, "n_gen": 32, "n_depth": 4096, "avg_ts": 4067.239605}
])";

TEST(BenchCompare, ReadsLlamaBenchJson) {
  EngineFigures f;
  std::string commit;
  read_llama_bench_json(kLlamaJson, 512, 32, 4096, f, commit);
  EXPECT_DOUBLE_EQ(f.prefill, 1741.025882);
  EXPECT_DOUBLE_EQ(f.decode, 12786.415712);
  EXPECT_DOUBLE_EQ(f.decode_deep, 4067.239605);
  EXPECT_EQ(commit, "80fb11a");

  // Tests of other sizes are not ours.
  EngineFigures g;
  read_llama_bench_json(kLlamaJson, 128, 32, 0, g, commit);
  EXPECT_TRUE(std::isnan(g.prefill));
  EXPECT_TRUE(std::isnan(g.decode_deep));
  EXPECT_DOUBLE_EQ(g.decode, 12786.415712);

  EXPECT_THROW(read_llama_bench_json("| model | size |", 512, 32, 0, g, commit), Error);
  EXPECT_THROW(read_llama_bench_json(R"([{"n_prompt": 512, "n_gen": 0}])", 512, 32, 0, g, commit),
               Error);
}

TEST(BenchCompare, DescribesTheLlamaBuildFromItsCMakeCache) {
  const std::string root = ::tkv::test::temp_dir() + "/llama-build";
  fs::create_directories(root + "/bin");
  std::ofstream(root + "/CMakeCache.txt") << "// comment\n"
                                             "GGML_NATIVE:BOOL=OFF\n"
                                             "GGML_AVX2:BOOL=ON\n"
                                             "GGML_AVX512:BOOL=ON\n"
                                             "GGML_CPU_REPACK:BOOL=ON\n"
                                             "GGML_AMX_TILE:BOOL=OFF\n"
                                             "GGML_AMX_INT8:BOOL=OFF\n"
                                             "GGML_AMX_BF16:BOOL=OFF\n"
                                             "CMAKE_BUILD_TYPE:STRING=Release\n"
                                             "OTHER:BOOL=ON\n";
  const Json b = describe_llama_build(root + "/bin");
  EXPECT_EQ(b["cmake_cache"], root + "/CMakeCache.txt");
  EXPECT_EQ(b["options"]["GGML_CPU_REPACK"], "ON");
  EXPECT_FALSE(b["options"].contains("OTHER"));
  EXPECT_EQ(b["describe"],
            "GGML_NATIVE=OFF AVX2=ON AVX512=ON repack=ON AMX(tile/int8/bf16)=OFF/OFF/OFF build "
            "type Release");
  EXPECT_EQ(describe_llama_build(root + "/nowhere/bin")["describe"], "unknown");
}

TEST(BenchCompare, RunsBothEnginesOnStories260K) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  if (::access((std::string(kLlamaBin) + "/llama-bench").c_str(), X_OK) != 0)
    GTEST_SKIP() << "no llama-bench in " << kLlamaBin;
  const std::string out = ::tkv::test::temp_dir() + "/compare-report";
  const ChildResult r = test::run_bench({"compare", "-m", model, "--llama-bin", kLlamaBin, "-t",
                                         "1", "--pairs", "2", "--prompt-tokens", "32",
                                         "--gen-tokens", "4", "--depth", "64", "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("pair 1/2: llama.cpp prefill 32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pair 2/2: turbokv prefill 32"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("turbokv / llama.cpp"), std::string::npos) << r.out;
  const Json report = test::read_json_file(out + "/report.json");
  const Json& c = report.at("compare");
  EXPECT_EQ(c["pairs_done"], 2);
  EXPECT_EQ(c["pairs"][0]["first"], "llama.cpp");
  EXPECT_EQ(c["pairs"][1]["first"], "turbokv");
  EXPECT_NE(c["llama_cpp"]["build_commit"], "unknown");
  for (const char* metric : {"prefill", "decode", "decode_deep"}) {
    const Json& m = c["summary"].at(metric);
    EXPECT_EQ(m["turbokv"]["n"], 2) << metric;
    EXPECT_EQ(m["llama_cpp"]["n"], 2) << metric;
    EXPECT_EQ(m["ratio"]["n"], 2) << metric;
    EXPECT_GT(m["ratio"]["min"].get<double>(), 0) << metric;
    EXPECT_LE(m["ratio"]["min"].get<double>(), m["ratio"]["median"].get<double>()) << metric;
  }
  const std::string md = test::read_text_file(out + "/report.md");
  EXPECT_NE(md.find("- command: `turbokv bench compare"), std::string::npos) << md;
  EXPECT_NE(md.find("decode 4 tokens at depth 64"), std::string::npos) << md;
}

TEST(BenchCompare, LlamaBenchFailureShowsItsStderr) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  if (::access((std::string(kLlamaBin) + "/llama-bench").c_str(), X_OK) != 0)
    GTEST_SKIP() << "no llama-bench in " << kLlamaBin;
  const ChildResult r =
      test::run_bench({"compare", "-m", model, "--llama-bin", kLlamaBin, "-t", "1", "--pairs", "1",
                       "--prompt-tokens", "8", "--gen-tokens", "2", "--depth", "0", "--llama-args",
                       "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("bench compare: llama-bench failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no-such-flag"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tkv::bench
