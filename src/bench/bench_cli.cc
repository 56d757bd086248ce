#include "bench/bench_cli.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include "bench/args.h"
#include "bench/cell.h"
#include "bench/child_process.h"
#include "bench/kernel_protocol.h"
#include "bench/memory_protocol.h"
#include "bench/quality_protocol.h"
#include "bench/recall_protocol.h"
#include "bench/report.h"
#include "bench/speed_protocol.h"
#include "bench/units.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "common/thread_pool.h"

namespace tkv::bench {

namespace {

const char* kDefaultKv = "f16,k8v8,q8_0,q4_0h,k4v4,k4v2,k3v2";
const char* kDefaultRecallKv = "f16,k8v8,q4_0h,k4v4,k4v2,k3v2,k4v2:w1024";
const char* kDefaultMultiTurnKv = "f16,k4v2";

using Flag = Args::Flag;

std::vector<Flag> common_flags() {
  return {
      {{"--model", "-m"}, true, "GGUF model (required except for kernel)"},
      {{"--threads", "-t"}, true, "LIST  threads (speed/kernel: each; others: the first)"},
      {{"--ubatch", "-ub"}, true, "N  prefill chunk size (default 512)"},
      {{"--kv"}, true, "LIST  KV configurations: CODECS[:POLICY], e.g. f16,k4v2,tq4/tq2:s4+r64"},
      {{"--kv-sinks"}, true, "N  sinks for items without a policy (default 4 when quantized)"},
      {{"--kv-residual"}, true, "N  residual f16 tokens (default 64 when quantized)"},
      {{"--kv-window"}, true, "W  window policy for items without one (0 = none)"},
      {{"--kv-page"}, true, "N  tokens per page (default 64)"},
      {{"--kv-layer-override"}, true, "SPEC  per-layer codecs, e.g. 0,-1:k8v4"},
      {{"--mem-limit"}, true, "SIZE  memory limit per cell (e.g. 16G): over it = OOM row"},
      {{"--cell-timeout"}, true, "S  kill a cell after S seconds (0 = never)"},
      {{"--out", "-o"}, true, "DIR  write report.json, report.md and PNG plots there"},
      {{"--quiet", "-q"}, false, "no progress bar"},
      {{"--help", "-h"}, false, "this help"},
  };
}

std::vector<Flag> protocol_flags(const std::string& sub) {
  std::vector<Flag> f;
  const bool all = sub == "all";
  if (sub == "memory" || sub == "speed" || all)
    f.push_back(
        {{"--ctx", "-c"}, true, "LIST  contexts (memory; speed: time to first token), e.g. 4k,8k"});
  if (sub == "memory" || all)
    f.push_back({{"--decode-tokens"}, true, "N  tokens decoded after the prefill (4)"});
  if (sub == "speed" || all)
    f.push_back(
        {{"--depths"}, true, "LIST  decode depths (default 0,1k,4k,16k,32k capped by --ctx)"});
  if (sub == "speed" || sub == "kernel" || all) {
    f.push_back({{"--warmup"}, true, "N  untimed steps before timing"});
    f.push_back({{"--steps"}, true, "N  timed steps per depth (>= 3)"});
  }
  if (sub == "recall" || all) {
    if (!all)
      f.push_back({{"--ctx", "-c"}, true, "N  prompt tokens (default min(3200, trained - 64))"});
    f.push_back({{"--recall-ctx"}, true, "N  prompt tokens of the recall protocol"});
    f.push_back({{"--facts"}, true, "N  facts per prompt (5)"});
    f.push_back(
        {{"--fact-depths"}, true, "LIST  depths of the facts in [0,1] (default evenly spread)"});
    f.push_back({{"--seeds"}, true, "LIST  seeds (1,2,3)"});
    f.push_back({{"--filler"}, true, "FILE  filler text (default tkv-test-heldout.txt)"});
    f.push_back({{"--fact-template"}, true, "TEXT  with {name} and {code}"});
    f.push_back({{"--question-template"}, true, "TEXT  with {name}"});
    f.push_back({{"--chat"}, true, "NAME|auto  wrap prompts in a chat template (instruct models)"});
    f.push_back({{"--answer-tokens"}, true, "N  greedy tokens per answer (8; chat 32)"});
    f.push_back({{"--keep-prompts"}, false, "store every document's text in report.json"});
    f.push_back({{"--no-multi-turn"}, false, "skip the multi-turn window variant"});
    f.push_back({{"--turns"}, true, "N  turns of the multi-turn variant (6)"});
    f.push_back({{"--multi-turn-window"}, true, "W  window cap the conversation outgrows (1024)"});
    f.push_back(
        {{"--multi-turn-kv"}, true, "LIST  configurations of the multi-turn variant (f16,k4v2)"});
  }
  if (sub == "quality" || all) {
    f.push_back({{"--text", "-f"}, true, "FILE  text (default tkv-test-heldout.txt)"});
    f.push_back({{"--window-tokens"}, true, "N  tokens per window (1024)"});
    f.push_back({{"--windows"}, true, "N  windows (4)"});
    f.push_back({{"--baseline"}, true, "f16|f32  reference cache for KL (f16)"});
  }
  if (sub == "kernel" || all) {
    f.push_back({{"--head-dims"}, true, "LIST  head dims (64,128)"});
    f.push_back({{"--kv-heads"}, true, "N  KV heads (8)"});
    f.push_back({{"--gqa"}, true, "N  query heads per KV head (4)"});
    f.push_back({{"--fill-ubatch"}, true, "N  chunk size of the cache fill (1024)"});
    if (!all) f.push_back({{"--depths"}, true, "LIST  depths (1k,4k,16k,32k,64k)"});
  }
  if (all) {
    f.push_back({{"--recall-kv"}, true, "LIST  recall configurations"});
    f.push_back({{"--quality-kv"}, true, "LIST  quality configurations (issue 3's table)"});
    f.push_back({{"--kernel-kv"}, true, "LIST  kernel configurations"});
    f.push_back({{"--kernel-depths"}, true, "LIST  kernel depths (1k,4k,16k,32k)"});
    f.push_back({{"--kernel-threads"}, true, "LIST  kernel threads (1,2)"});
    f.push_back(
        {{"--skip"}, true, "LIST  protocols to leave out (memory,speed,recall,quality,kernel)"});
  }
  return f;
}

std::string synopsis(const std::string& sub) {
  if (sub == "kernel") return "turbokv bench kernel [--kv LIST] [--depths LIST] [flags]";
  if (sub == "all") return "turbokv bench all -m MODEL --out DIR [flags]";
  return "turbokv bench " + sub + " -m MODEL [--kv LIST] [flags]";
}

kv::KvConfig kv_defaults(const Args& a) {
  kv::KvConfig c;
  c.sinks = a.get_int("--kv-sinks", -1, 0, 1024);
  c.residual = a.get_int("--kv-residual", -1, 0, 65536);
  c.window = a.get_int("--kv-window", 0, 0, 1 << 30);
  c.page_tokens = a.get_int("--kv-page", 64, 16, 4096);
  if (const auto o = a.get("--kv-layer-override")) c.overrides = kv::parse_layer_overrides(*o);
  return c;
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string arg;
  while (std::getline(in, arg, '\0')) out.push_back(arg);
  return out;
}

// Default token counts, capped at the model's trained context (never empty).
std::vector<int64_t> capped(std::vector<int64_t> v, int64_t cap) {
  std::vector<int64_t> out;
  for (auto x : v)
    if (x <= cap) out.push_back(x);
  if (out.empty()) out.push_back(cap);
  return out;
}

bool any_failed(const Json& section) {
  for (const auto& r : section["rows"]) {
    const std::string s = r.value("status", std::string());
    if (s == "failed" || s == "timeout") return true;
  }
  if (section.contains("multi_turn"))
    for (const auto& r : section["multi_turn"]) {
      const std::string s = r.value("status", std::string());
      if (s == "failed" || s == "timeout") return true;
    }
  return false;
}

void require_readable(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  if (!in) fail(flag, " ", path, ": cannot read the file");
}

struct Section {
  std::string name;
  std::vector<PlannedCell> cells;
  std::function<Json(std::vector<Json>)> summarize;
};

int run_bench(const std::string& sub, const std::vector<std::string>& args,
              const std::vector<std::string>& cell_argv) {
  std::vector<Flag> flags = common_flags();
  for (auto& f : protocol_flags(sub)) flags.push_back(std::move(f));
  Args a("bench " + sub, flags);
  a.parse(args);
  if (a.has("--help")) {
    std::cout << a.help(synopsis(sub));
    return 0;
  }
  const bool all = sub == "all";
  auto on = [&](const std::string& p) {
    if (!all) return sub == p;
    if (const auto skip = a.get("--skip"))
      for (const auto& s : split_list(*skip, "--skip"))
        if (s == p) return false;
    return true;
  };

  CommonOptions o;
  const std::vector<int> threads = a.has("--threads")
                                       ? parse_ints(*a.get("--threads"), "--threads", 1, 1024)
                                       : std::vector<int>{physical_core_count()};
  o.threads = threads.front();
  o.ubatch = a.get_int("--ubatch", 512, 1, 1 << 20);
  o.mem_limit = a.has("--mem-limit") ? parse_bytes(*a.get("--mem-limit")) : 0;
  o.cell_timeout = a.get_double("--cell-timeout", 0, 0, 1e7);
  o.out_dir = a.get_or("--out", all ? "report-bench" : "");  // /report*/ is git-ignored
  o.quiet = a.has("--quiet");
  const kv::KvConfig defaults = kv_defaults(a);

  ModelInfo info;
  const bool need_model = on("memory") || on("speed") || on("recall") || on("quality");
  if (need_model) {
    if (!a.has("--model")) fail("bench ", sub, ": -m MODEL is required");
    o.model = *a.get("--model");
    info = probe_model(o.model);
  }
  const int64_t trained = info.n_ctx_train > 0 ? info.n_ctx_train : 4096;

  std::vector<Section> sections;
  auto with_kv = [&](const std::string& list) {
    CommonOptions c = o;
    c.kv = parse_bench_kv_list(list, defaults);
    return c;
  };
  if (on("memory")) {
    auto m = std::make_shared<MemoryOptions>();
    m->ctx =
        a.has("--ctx") ? parse_token_counts(*a.get("--ctx"), "--ctx") : capped(m->ctx, trained);
    m->decode_tokens = a.get_int("--decode-tokens", 4, 0, 1 << 20);
    const CommonOptions c = with_kv(a.get_or("--kv", kDefaultKv));
    sections.push_back({"memory", plan_memory(c, *m, info), [m](std::vector<Json> rows) {
                          return summarize_memory(*m, std::move(rows));
                        }});
  }
  if (on("speed")) {
    auto s = std::make_shared<SpeedOptions>();
    s->ctx =
        a.has("--ctx") ? parse_token_counts(*a.get("--ctx"), "--ctx") : capped(s->ctx, trained);
    const int64_t max_ctx = *std::max_element(s->ctx.begin(), s->ctx.end());
    s->depths = a.has("--depths") ? parse_token_counts(*a.get("--depths"), "--depths")
                                  : capped(s->depths, max_ctx);
    s->threads = threads;
    s->warmup = a.get_int("--warmup", 2, 0, 1000);
    s->steps = a.get_int("--steps", 5, 3, 100000);
    const CommonOptions c = with_kv(a.get_or("--kv", kDefaultKv));
    sections.push_back({"speed", plan_speed(c, *s, info), [s](std::vector<Json> rows) {
                          return summarize_speed(*s, std::move(rows));
                        }});
  }
  if (on("recall")) {
    auto r = std::make_shared<RecallOptions>();
    if (a.has("--recall-ctx"))
      r->ctx = parse_token_count(*a.get("--recall-ctx"), "--recall-ctx");
    else if (!all && a.has("--ctx"))
      r->ctx = parse_token_count(*a.get("--ctx"), "--ctx");
    r->facts = a.get_int("--facts", 5, 1, 64);
    if (a.has("--fact-depths"))
      r->depths = parse_fractions(*a.get("--fact-depths"), "--fact-depths", 0, 1);
    if (a.has("--seeds")) r->seeds = parse_ints(*a.get("--seeds"), "--seeds", 0, 1 << 30);
    r->filler_file = a.get_or("--filler", "");
    r->templates.fact = a.get_or("--fact-template", r->templates.fact);
    if (a.has("--question-template")) {
      r->templates.question = *a.get("--question-template");
      r->question_template_set = true;
    }
    if (r->templates.fact.find("{name}") == std::string::npos ||
        r->templates.fact.find("{code}") == std::string::npos)
      fail("--fact-template must contain {name} and {code}");
    if (r->templates.question.find("{name}") == std::string::npos)
      fail("--question-template must contain {name}");
    r->chat = a.get_or("--chat", "");
    r->answer_tokens = a.get_int("--answer-tokens", 0, 1, 512);
    r->keep_prompts = a.has("--keep-prompts");
    r->multi_turn = !a.has("--no-multi-turn");
    r->turns = a.get_int("--turns", 6, 2, 1000);
    r->multi_turn_window = a.get_int("--multi-turn-window", 1024, 16, 1 << 30);
    finalize_recall_options(*r, info);
    require_readable(r->filler_file, "--filler");
    if (r->ctx > trained)
      std::fprintf(stderr, "bench recall: warning: --ctx %lld is beyond the model's trained %lld\n",
                   (long long)r->ctx, (long long)trained);
    const std::string list =
        all ? a.get_or("--recall-kv", kDefaultRecallKv) : a.get_or("--kv", kDefaultRecallKv);
    CommonOptions c = with_kv(list);
    std::vector<PlannedCell> cells;
    {
      RecallOptions single = *r;
      single.multi_turn = false;
      cells = plan_recall(c, single, info);
    }
    if (r->multi_turn) {
      RecallOptions mt = *r;
      CommonOptions cm = with_kv(a.get_or("--multi-turn-kv", kDefaultMultiTurnKv));
      std::vector<PlannedCell> m = plan_recall(cm, mt, info);
      for (auto& cell : m)
        if (cell.identity.value("multi_turn", false)) cells.push_back(std::move(cell));
    }
    sections.push_back({"recall", std::move(cells), [r](std::vector<Json> rows) {
                          return summarize_recall(*r, std::move(rows));
                        }});
  }
  if (on("quality")) {
    auto q = std::make_shared<QualityOptions>();
    q->text_file = a.get_or("--text", default_heldout_text());
    q->window_tokens =
        a.get_int("--window-tokens", int(std::min<int64_t>(1024, trained)), 4, 1 << 24);
    q->windows = a.get_int("--windows", 4, 1, 1 << 20);
    q->baseline = a.get_or("--baseline", "f16");
    if (q->baseline != "f16" && q->baseline != "f32")
      fail("--baseline ", q->baseline, ": use f16 or f32");
    require_readable(q->text_file, "--text");
    const std::string list = all ? a.get_or("--quality-kv", default_quality_kv_list())
                                 : a.get_or("--kv", default_quality_kv_list());
    const CommonOptions c = with_kv(list);
    sections.push_back({"quality", plan_quality(c, *q, info), [q](std::vector<Json> rows) {
                          return summarize_quality(*q, std::move(rows));
                        }});
  }
  if (on("kernel")) {
    auto k = std::make_shared<KernelOptions>();
    if (all) {
      k->depths = a.has("--kernel-depths")
                      ? parse_token_counts(*a.get("--kernel-depths"), "--kernel-depths")
                      : std::vector<int64_t>{1024, 4096, 16384, 32768};
      if (a.has("--kernel-threads"))
        k->threads = parse_ints(*a.get("--kernel-threads"), "--kernel-threads", 1, 1024);
    } else {
      if (a.has("--depths")) k->depths = parse_token_counts(*a.get("--depths"), "--depths");
      if (a.has("--threads")) k->threads = threads;
    }
    if (a.has("--head-dims"))
      k->head_dims = parse_ints(*a.get("--head-dims"), "--head-dims", 8, 1024);
    k->kv_heads = a.get_int("--kv-heads", 8, 1, 1024);
    k->gqa = a.get_int("--gqa", 4, 1, 64);
    k->warmup = a.get_int("--warmup", 3, 0, 1000);
    k->steps = a.get_int("--steps", 9, 3, 100000);
    k->fill_ubatch = a.get_int("--fill-ubatch", 1024, 1, 1 << 20);
    const std::string list = all ? a.get_or("--kernel-kv", default_kernel_kv_list())
                                 : a.get_or("--kv", default_kernel_kv_list());
    const CommonOptions c = with_kv(list);
    sections.push_back({"kernel", plan_kernel(c, *k), [k](std::vector<Json> rows) {
                          return summarize_kernel(*k, std::move(rows));
                        }});
  }

  CellRunner runner(cell_argv, o.mem_limit, o.cell_timeout);
  ReportHeader h;
  h.command_line = own_command_line();
  h.threads = o.threads;
  h.model = need_model ? to_json(info) : Json(nullptr);
  h.mem_limit = runner.describe();
  Json report = make_report(h);
  if (o.mem_limit > 0)
    std::fprintf(stderr, "bench: memory limit %s per cell via %s%s%s\n",
                 format_bytes(o.mem_limit).c_str(), limit_method_name(runner.limit().method()),
                 runner.limit().fallback_reason().empty() ? "" : ": ",
                 runner.limit().fallback_reason().c_str());

  double cost = 0;
  int n_cells = 0;
  for (const auto& s : sections) {
    cost += total_cost(s.cells);
    n_cells += int(s.cells.size());
  }
  bool failed = false;
  {
    Progress progress(cost, n_cells, !o.quiet);
    for (auto& s : sections) {
      report[s.name] = s.summarize(execute_cells(s.cells, runner, progress));
      failed = failed || any_failed(report[s.name]);
    }
  }
  for (const auto& s : sections)
    std::cout << "\n## " << s.name << "\n\n" << section_markdown(s.name, report[s.name]);
  std::cout.flush();
  if (!o.out_dir.empty())
    std::fprintf(stderr, "bench: %s\n", write_report(report, o.out_dir).c_str());
  return failed ? 1 : 0;
}

}  // namespace

int bench_main(const std::vector<std::string>& args, std::vector<std::string> cell_argv) {
  static const char* kUsage =
      "Usage: turbokv bench SUBCOMMAND [flags]   (turbokv bench SUBCOMMAND --help for its flags)\n"
      "  memory   peak RSS, model, KV and scratch bytes per KV configuration and context\n"
      "  speed    prefill tok/s, time to first token, decode ms/token by depth\n"
      "  recall   planted facts at controlled depths, exact-match answers; multi-turn window\n"
      "  quality  perplexity and KL divergence vs an f16 cache through the real cache path\n"
      "  kernel   decode attention alone (one layer, synthetic K/V/Q) by codec and depth\n"
      "  all      all five on a model: report.json, report.md and PNG plots in --out\n";
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    if (args.empty()) fail("bench: no subcommand given");
    return 0;
  }
  const std::string sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "cell") {
    if (rest.size() != 2 || rest[0] != "--request")
      fail("bench cell: usage: bench cell --request JSON");
    return cell_main(rest[1]);
  }
  if (sub != "memory" && sub != "speed" && sub != "recall" && sub != "quality" && sub != "kernel" &&
      sub != "all")
    fail("bench: unknown subcommand '", sub, "' (memory, speed, recall, quality, kernel, all)");
  if (cell_argv.empty()) cell_argv = {self_executable(), "bench", "cell"};
  return run_bench(sub, rest, cell_argv);
}

}  // namespace tkv::bench
