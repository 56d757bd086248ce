// bench compare's run: per pair, the prefill measurement of both engines,
// then the decode measurement of both, the engine that goes first
// alternating from pair to pair. llama.cpp is llama-bench from --llama-bin
// (one invocation per measurement, -r 1, its own warm-up run first);
// turbokv is the speed protocol's cell in a child process of this binary
// (one per measurement, an untimed prefill and decode step first as
// llama-bench's warm-up). report.json / report.md are rewritten after each
// pair.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "bench/agree.h"
#include "bench/cell.h"
#include "bench/child_process.h"
#include "bench/compare.h"
#include "bench/kv_configs.h"
#include "bench/options.h"
#include "bench/report.h"
#include "common/error.h"
#include "tensor/matmul.h"

namespace tkv::bench {

namespace fs = std::filesystem;

namespace {

enum class Measure { kPrefill, kDecode };

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

// The llama-bench arguments after the binary: prefill of P tokens alone, or
// decode of G tokens at depth 0 (and at --depth) alone.
std::vector<std::string> llama_args(const CompareOptions& o, Measure m) {
  std::vector<std::string> a = {"-m", o.model, "-t",  std::to_string(o.threads), "-r", "1", "-fa",
                                "1",  "-o",    "json"};
  if (m == Measure::kPrefill) {
    a.insert(a.end(), {"-p", std::to_string(o.prompt_tokens), "-n", "0"});
  } else {
    const std::string depths = o.depth > 0 ? "0," + std::to_string(o.depth) : "0";
    a.insert(a.end(), {"-p", "0", "-n", std::to_string(o.gen_tokens), "-d", depths});
  }
  for (const std::string& w : split_words(o.llama_args)) a.push_back(w);
  return a;
}

// The last few lines of a child's stderr, joined with " | ".
std::string stderr_tail(const std::string& err) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    if (end == std::string::npos) end = err.size();
    if (end > start) lines.push_back(err.substr(start, end - start));
    start = end + 1;
  }
  std::string out;
  for (size_t i = lines.size() > 4 ? lines.size() - 4 : 0; i < lines.size(); ++i) {
    if (!out.empty()) out += " | ";
    out += lines[i];
  }
  return out.empty() ? "(no stderr)" : out;
}

void run_llama(const std::string& bin, const CompareOptions& o, Measure m, EngineFigures& f,
               std::string& commit) {
  std::vector<std::string> argv = {bin};
  const std::vector<std::string> args = llama_args(o, m);
  argv.insert(argv.end(), args.begin(), args.end());
  const ChildResult r = run_child(argv, {});
  if (r.exec_failed) fail("bench compare: cannot start ", bin, ": ", r.err);
  if (r.exit_code != 0)
    fail("bench compare: llama-bench failed (",
         r.term_signal ? "signal " + std::to_string(r.term_signal)
                       : "exit status " + std::to_string(r.exit_code),
         "): ", stderr_tail(r.err));
  read_llama_bench_json(r.out, o.prompt_tokens, o.gen_tokens, o.depth, f, commit);
  const bool missing = m == Measure::kPrefill
                           ? std::isnan(f.prefill)
                           : std::isnan(f.decode) || (o.depth > 0 && std::isnan(f.decode_deep));
  if (missing)
    fail("bench compare: llama-bench's JSON lacks a test it was asked for: ", join(args));
}

// The speed protocol's cell for one measurement.
Json turbokv_request(const CompareOptions& o, const BenchKv& kv, Measure m) {
  CommonOptions c;
  c.model = o.model;
  c.threads = o.threads;
  Json r = request_base(c, "speed");
  r["kv"] = bench_kv_to_json(kv);
  r["fill"] = "prefill";
  r["warmup"] = 1;
  r["steps"] = o.gen_tokens;
  if (m == Measure::kPrefill) {
    r["ctx"] = {o.prompt_tokens};
    r["depths"] = Json::array();
    r["prefill_warmup"] = true;
  } else {
    r["ctx"] = Json::array();
    r["depths"] = o.depth > 0 ? Json::array({0, o.depth}) : Json::array({0});
  }
  return r;
}

// Decode tok/s as llama-bench counts it: tokens over their total time.
double decode_tok_per_s(const Json& point) {
  double ms = 0;
  for (const Json& x : point.at("samples_ms")) ms += x.get<double>();
  return ms > 0 ? double(point["samples_ms"].size()) * 1e3 / ms : NAN;
}

void run_turbokv(CellRunner& runner, const CompareOptions& o, const BenchKv& kv, Measure m,
                 EngineFigures& f) {
  const Json r = runner.run(turbokv_request(o, kv, m));
  if (!result_ok(r))
    fail("bench compare: turbokv's ", m == Measure::kPrefill ? "prefill" : "decode", " cell ",
         r.value("status", std::string("failed")), ": ", r.value("reason", std::string()));
  if (m == Measure::kPrefill) {
    f.prefill = r.at("prefill").at(0).at("tok_per_s").get<double>();
    return;
  }
  for (const Json& d : r.at("decode"))
    (d.at("depth").get<int64_t>() == 0 ? f.decode : f.decode_deep) = decode_tok_per_s(d);
}

std::string what(const CompareOptions& o, Measure m) {
  if (m == Measure::kPrefill) return "prefill " + std::to_string(o.prompt_tokens);
  return "decode " + std::to_string(o.gen_tokens) + " at depth 0" +
         (o.depth > 0 ? ", " + std::to_string(o.depth) : "");
}

std::string figures_text(const EngineFigures& f, Measure m) {
  char line[96];
  if (m == Measure::kPrefill)
    std::snprintf(line, sizeof line, "%.1f tok/s", f.prefill);
  else if (std::isnan(f.decode_deep))
    std::snprintf(line, sizeof line, "%.1f tok/s", f.decode);
  else
    std::snprintf(line, sizeof line, "%.1f, %.1f tok/s", f.decode, f.decode_deep);
  return line;
}

Json figures_json(const EngineFigures& f) {
  const auto v = [](double x) { return std::isnan(x) ? Json(nullptr) : Json(x); };
  return {{"prefill_tok_per_s", v(f.prefill)},
          {"decode_tok_per_s", v(f.decode)},
          {"decode_deep_tok_per_s", v(f.decode_deep)}};
}

std::string simd_description() {
  const char* env = std::getenv("TURBOKV_SIMD");
  const std::string active = active_simd_target();
  return env && *env ? "TURBOKV_SIMD=" + std::string(env) + " (" + active + ")"
                     : active + " (run-time dispatch; TURBOKV_SIMD unset)";
}

struct Run {
  CompareOptions o;
  std::string llama_bench;
  BenchKv kv;
  std::vector<EngineFigures> turbokv, llama;
  std::vector<std::string> order;
  std::string llama_commit = "unknown";
};

Json section_of(const Run& run) {
  const CompareOptions& o = run.o;
  Json pairs = Json::array();
  for (size_t i = 0; i < run.turbokv.size(); ++i)
    pairs.push_back({{"pair", int(i) + 1},
                     {"first", run.order[i]},
                     {"turbokv", figures_json(run.turbokv[i])},
                     {"llama_cpp", figures_json(run.llama[i])}});
  return {{"options",
           {{"pairs", o.pairs},
            {"threads", o.threads},
            {"prompt_tokens", o.prompt_tokens},
            {"depth", o.depth},
            {"gen_tokens", o.gen_tokens},
            {"kv", o.kv},
            {"llama_args", o.llama_args}}},
          {"llama_cpp",
           {{"llama_bench", run.llama_bench},
            {"build_commit", run.llama_commit},
            {"build", describe_llama_build(o.llama_bin)},
            {"arguments", join(llama_args(o, Measure::kPrefill)) + "; " +
                              join(llama_args(o, Measure::kDecode))}}},
          {"turbokv", {{"simd", simd_description()}, {"kv_describe", run.kv.config.describe()}}},
          {"pairs_done", int(run.turbokv.size())},
          {"pairs", pairs},
          {"summary", compare_summary(run.turbokv, run.llama, o.depth > 0)}};
}

// One pair: each measurement by both engines, `llama_first` deciding the order.
void run_pair(Run& run, CellRunner& runner, int index) {
  const CompareOptions& o = run.o;
  const bool llama_first = index % 2 == 0;
  EngineFigures t, l;
  for (const Measure m : {Measure::kPrefill, Measure::kDecode})
    for (int k = 0; k < 2; ++k) {
      const bool llama_now = (k == 0) == llama_first;
      if (!o.quiet)
        std::fprintf(stderr, "pair %d/%d: %s %s ...\n", index + 1, o.pairs,
                     llama_now ? "llama.cpp" : "turbokv", what(o, m).c_str());
      if (llama_now)
        run_llama(run.llama_bench, o, m, l, run.llama_commit);
      else
        run_turbokv(runner, o, run.kv, m, t);
      if (!o.quiet)
        std::fprintf(stderr, "pair %d/%d: %s %s: %s\n", index + 1, o.pairs,
                     llama_now ? "llama.cpp" : "turbokv", what(o, m).c_str(),
                     figures_text(llama_now ? l : t, m).c_str());
    }
  run.turbokv.push_back(t);
  run.llama.push_back(l);
  run.order.push_back(llama_first ? "llama.cpp" : "turbokv");
}

}  // namespace

int compare_main(const std::vector<std::string>& args, const std::vector<std::string>& cell_argv) {
  Run run;
  if (!parse_compare_flags(args, run.o)) return 0;
  const CompareOptions& o = run.o;
  run.llama_bench = (fs::path(o.llama_bin) / "llama-bench").string();
  if (::access(run.llama_bench.c_str(), X_OK) != 0)
    fail("bench compare: --llama-bin: no executable llama-bench in ", o.llama_bin);
  run.kv = parse_bench_kv_list(o.kv).at(0);
  const ModelInfo info = probe_model(o.model);
  simd_description();  // a TURBOKV_SIMD this CPU lacks fails here, before any run

  ReportHeader h;
  h.command_line = {"turbokv", "bench", "compare"};
  h.command_line.insert(h.command_line.end(), args.begin(), args.end());
  h.threads = o.threads;
  h.model = to_json(info);
  Json report = make_report(h);
  CellRunner runner(cell_argv, 0, 0);
  // Written before the first pair too: an unwritable --out fails before any work.
  std::string written;
  const auto write = [&] {
    if (o.out_dir.empty()) return;
    report["compare"] = section_of(run);
    written = write_report(report, o.out_dir);
  };
  write();
  for (int i = 0; i < o.pairs; ++i) {
    run_pair(run, runner, i);
    write();
  }
  if (!o.quiet && !written.empty()) std::fprintf(stderr, "compare: %s\n", written.c_str());
  std::printf("%s", compare_markdown(section_of(run)).c_str());
  return 0;
}

}  // namespace tkv::bench
