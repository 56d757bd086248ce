// bench compare: its flags, llama-bench's JSON, the statistics over pairs,
// the llama.cpp build's description and the report section. The run
// itself (both engines, interleaved) is compare_run.cc.
#include "bench/compare.h"

#include <filesystem>
#include <fstream>

#include "bench/stats.h"
#include "bench/table.h"
#include "cli/flags.h"
#include "common/error.h"
#include "common/thread_pool.h"

namespace tkv::bench {

namespace fs = std::filesystem;

bool parse_compare_flags(const std::vector<std::string>& args, CompareOptions& o) {
  cli::FlagParser flags(
      "bench compare", "turbokv bench compare -m MODEL --llama-bin DIR [flags]",
      "Prefill and decode speed side by side with llama.cpp's llama-bench on one file:\n"
      "--pairs pairs, each running both engines on the same file, threads and prompt\n"
      "length, interleaved (which engine goes first alternates per pair). Reports each\n"
      "engine's median and min-max and the ratio turbokv / llama.cpp per pair.");
  flags.add_string({"-m", "--model"}, "PATH", "GGUF model file (both engines load it)", &o.model);
  flags.add_string({"--llama-bin"}, "DIR", "llama.cpp's build/bin (llama-bench)", &o.llama_bin);
  flags.add_string({"--llama-args"}, "ARGS",
                   "more llama-bench arguments, space-separated (e.g. --no-warmup)", &o.llama_args);
  flags.add_int({"-t", "--threads"}, "N", "threads of each engine (default: physical cores)",
                &o.threads, 1, 1024);
  flags.add_int({"--pairs"}, "N", "pairs of runs (default 5)", &o.pairs, 1, 1000);
  flags.add_int({"--prompt-tokens"}, "N", "prefill length P (default 512)", &o.prompt_tokens, 1,
                1 << 20);
  flags.add_int({"--depth"}, "N", "depth of the deep decode point (default 4096; 0 skips it)",
                &o.depth, 0, 1 << 22);
  flags.add_int({"--gen-tokens"}, "N", "decode tokens timed per point (default 32)", &o.gen_tokens,
                1, 1 << 16);
  flags.add_string({"--kv"}, "SPEC",
                   "turbokv's KV cache, one item of bench --kv (default f16, as llama.cpp's)",
                   &o.kv);
  flags.add_string({"--out"}, "DIR", "write report.json, report.md and compare_ratio.png there",
                   &o.out_dir);
  flags.add_bool({"-q", "--quiet"}, "no progress lines on stderr", &o.quiet);
  if (!flags.parse(args)) return false;
  if (o.model.empty()) fail("bench compare: -m MODEL is required");
  if (o.llama_bin.empty()) fail("bench compare: --llama-bin DIR is required");
  if (o.kv.find(',') != std::string::npos)
    fail("bench compare: --kv takes one configuration, not a list: ", o.kv);
  if (o.threads == 0) o.threads = physical_core_count();
  return true;
}

namespace {

double entry_ts(const Json& e) {
  if (!e.contains("avg_ts") || !e["avg_ts"].is_number())
    fail("llama-bench's JSON: a test without avg_ts");
  return e["avg_ts"].get<double>();
}

}  // namespace

void read_llama_bench_json(const std::string& text, int prompt_tokens, int gen_tokens, int depth,
                           EngineFigures& f, std::string& commit) {
  Json tests = Json::parse(text, nullptr, false);
  if (tests.is_discarded() || !tests.is_array())
    fail("llama-bench's output is not its JSON (-o json): ", text.substr(0, 120));
  for (const Json& e : tests) {
    if (!e.is_object() || !e.contains("n_prompt") || !e.contains("n_gen"))
      fail("llama-bench's JSON: a test without n_prompt / n_gen");
    const int p = e["n_prompt"].get<int>(), g = e["n_gen"].get<int>();
    const int d = e.value("n_depth", 0);
    if (e.contains("build_commit")) commit = e["build_commit"].get<std::string>();
    if (p == prompt_tokens && g == 0 && d == 0)
      f.prefill = entry_ts(e);
    else if (p == 0 && g == gen_tokens && d == 0)
      f.decode = entry_ts(e);
    else if (p == 0 && g == gen_tokens && d == depth && depth > 0)
      f.decode_deep = entry_ts(e);
  }
}

Json compare_metric(const std::vector<double>& turbokv, const std::vector<double>& llama_cpp) {
  const auto present = [](const std::vector<double>& v) {
    std::vector<double> out;
    for (const double x : v)
      if (!std::isnan(x)) out.push_back(x);
    return out;
  };
  Json per_pair = Json::array();
  std::vector<double> ratios;
  for (size_t i = 0; i < turbokv.size() && i < llama_cpp.size(); ++i) {
    if (std::isnan(turbokv[i]) || std::isnan(llama_cpp[i]) || llama_cpp[i] <= 0) {
      per_pair.push_back(nullptr);
      continue;
    }
    ratios.push_back(turbokv[i] / llama_cpp[i]);
    per_pair.push_back(ratios.back());
  }
  const auto samples = [](const std::vector<double>& v) {
    Json a = Json::array();
    for (const double x : v) a.push_back(std::isnan(x) ? Json(nullptr) : Json(x));
    return a;
  };
  Json t = to_json(summarize(present(turbokv))), l = to_json(summarize(present(llama_cpp)));
  t["per_pair"] = samples(turbokv);
  l["per_pair"] = samples(llama_cpp);
  Json r = to_json(summarize(ratios));
  r["per_pair"] = per_pair;
  return {{"turbokv", t}, {"llama_cpp", l}, {"ratio", r}};
}

Json compare_summary(const std::vector<EngineFigures>& turbokv,
                     const std::vector<EngineFigures>& llama_cpp, bool deep) {
  const auto column = [](const std::vector<EngineFigures>& v, double EngineFigures::*m) {
    std::vector<double> out;
    for (const auto& f : v) out.push_back(f.*m);
    return out;
  };
  Json s = {{"prefill", compare_metric(column(turbokv, &EngineFigures::prefill),
                                       column(llama_cpp, &EngineFigures::prefill))},
            {"decode", compare_metric(column(turbokv, &EngineFigures::decode),
                                      column(llama_cpp, &EngineFigures::decode))}};
  if (deep)
    s["decode_deep"] = compare_metric(column(turbokv, &EngineFigures::decode_deep),
                                      column(llama_cpp, &EngineFigures::decode_deep));
  return s;
}

Json describe_llama_build(const std::string& bin_dir) {
  static const char* kKeys[] = {"CMAKE_BUILD_TYPE", "GGML_NATIVE",      "GGML_AVX",
                                "GGML_AVX2",        "GGML_AVX512",      "GGML_AVX512_VNNI",
                                "GGML_AVX512_BF16", "GGML_AVX512_VBMI", "GGML_CPU_REPACK",
                                "GGML_AMX_TILE",    "GGML_AMX_INT8",    "GGML_AMX_BF16"};
  Json out = {{"cmake_cache", nullptr}, {"options", Json::object()}, {"describe", "unknown"}};
  for (const fs::path& p :
       {fs::path(bin_dir) / "CMakeCache.txt", fs::path(bin_dir).parent_path() / "CMakeCache.txt"}) {
    std::ifstream in(p);
    if (!in) continue;
    out["cmake_cache"] = p.string();
    // Lines are KEY:TYPE=VALUE.
    for (std::string line; std::getline(in, line);) {
      const size_t colon = line.find(':'), eq = line.find('=');
      if (colon == std::string::npos || eq == std::string::npos || eq < colon) continue;
      const std::string key = line.substr(0, colon);
      for (const char* k : kKeys)
        if (key == k) out["options"][key] = line.substr(eq + 1);
    }
    break;
  }
  const Json& o = out["options"];
  if (out["cmake_cache"].is_null()) return out;
  const auto v = [&](const char* k) { return o.value(k, std::string("unset")); };
  out["describe"] = "GGML_NATIVE=" + v("GGML_NATIVE") + " AVX2=" + v("GGML_AVX2") +
                    " AVX512=" + v("GGML_AVX512") + " repack=" + v("GGML_CPU_REPACK") +
                    " AMX(tile/int8/bf16)=" + v("GGML_AMX_TILE") + "/" + v("GGML_AMX_INT8") + "/" +
                    v("GGML_AMX_BF16") + " build type " + v("CMAKE_BUILD_TYPE");
  return out;
}

namespace {

std::string range_text(const Json& s, int digits) {
  if (s["n"].get<int>() == 0) return "-";
  return fmt_fixed(s["median"], digits) + " (" + fmt_fixed(s["min"], digits) + "-" +
         fmt_fixed(s["max"], digits) + ")";
}

std::string per_pair_text(const Json& per_pair) {
  std::string out;
  for (const Json& x : per_pair) {
    if (!out.empty()) out += ' ';
    out += x.is_null() ? std::string("-") : fmt_fixed(x, 2);
  }
  return out;
}

}  // namespace

std::string compare_markdown(const Json& section) {
  const Json& o = section["options"];
  const Json& llama = section["llama_cpp"];
  std::string md;
  md += "- llama.cpp: " + llama["llama_bench"].get<std::string>() + ", commit " +
        llama["build_commit"].get<std::string>() +
        "; build: " + llama["build"]["describe"].get<std::string>() + "\n";
  md += "- llama-bench arguments: `" + llama["arguments"].get<std::string>() + "`\n";
  md += "- turbokv: KV " + o["kv"].get<std::string>() + ", SIMD " +
        section["turbokv"]["simd"].get<std::string>() + "\n";
  md += "- pairs: " + std::to_string(section["pairs_done"].get<int>()) + " of " +
        std::to_string(o["pairs"].get<int>()) + ", threads " +
        std::to_string(o["threads"].get<int>()) +
        " (interleaved; the engine that goes first alternates per pair)\n\n";
  Table t({"metric", "turbokv tok/s: median (min-max)", "llama.cpp tok/s: median (min-max)",
           "turbokv / llama.cpp (higher is better): median (min-max)", "ratio per pair"});
  const std::string P = std::to_string(o["prompt_tokens"].get<int>());
  const std::string G = std::to_string(o["gen_tokens"].get<int>());
  const std::vector<std::pair<std::string, std::string>> metrics = {
      {"prefill", "prefill " + P + " tokens"},
      {"decode", "decode " + G + " tokens at depth 0"},
      {"decode_deep", "decode " + G + " tokens at depth " + std::to_string(o["depth"].get<int>())}};
  const Json& s = section["summary"];
  for (const auto& [key, label] : metrics) {
    if (!s.contains(key)) continue;
    const Json& m = s[key];
    t.add({label, range_text(m["turbokv"], 1), range_text(m["llama_cpp"], 1),
           range_text(m["ratio"], 3), per_pair_text(m["ratio"]["per_pair"])});
  }
  md += t.markdown();
  md +=
      "\nA pair's runs follow one another; on a shared machine the spread of the ratios,\n"
      "not one pair, says how far apart the engines are.\n";
  return md;
}

}  // namespace tkv::bench
