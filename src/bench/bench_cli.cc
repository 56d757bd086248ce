#include "bench/bench_cli.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include "bench/args.h"
#include "bench/batch_protocol.h"
#include "bench/bench_run.h"
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
      {{"--model", "-m"}, "PATH", "GGUF model file (required except for kernel)", "model"},
      {{"--threads", "-t"},
       "LIST",
       "worker threads; speed and kernel run each, the others the first\n"
       "(default: physical cores)",
       "compute"},
      {{"--ubatch", "-ub"}, "N", "tokens per prefill chunk (default 512)", "compute"},
      {{"--kv"},
       "LIST",
       "KV configurations CODECS[:POLICY], e.g. f16,k4v2,tq4/tq2:s4+r64;\n"
       "in `bench all` every protocol runs them unless its own list is given",
       "KV cache"},
      {{"--kv-sinks"},
       "N",
       "sinks for configurations without a policy (default 4 when quantized)",
       "KV cache"},
      {{"--kv-residual"},
       "N",
       "residual f16 tokens for configurations without a policy (default 64 when quantized)",
       "KV cache"},
      {{"--kv-window"}, "W", "window for configurations without a policy (0 = none)", "KV cache"},
      {{"--kv-page"}, "N", "tokens per page (default 64)", "KV cache"},
      {{"--kv-layer-override"}, "SPEC", "per-layer codecs, e.g. 0,-1:k8v4", "KV cache"},
      {{"--mem-limit"},
       "SIZE",
       "memory limit per cell, e.g. 16G; a cell over it is an oom row",
       "run"},
      {{"--cell-timeout"},
       "S",
       "stop a cell after S seconds: a timeout row (default 0 = never)",
       "run"},
      {{"--out", "-o"},
       "DIR",
       "write report.json, report.md and PNG plots there, updated after every cell",
       "run"},
      {{"--quiet", "-q"}, "", "no progress bar", "run"},
  };
}

// A subcommand accepts the flags that `bench all` passes to its protocol, so
// a command line of `bench all` narrows to one protocol by changing the
// subcommand.
std::vector<Flag> protocol_flags(const std::string& sub) {
  std::vector<Flag> f;
  const bool all = sub == "all";
  if (all)  // listed right after the common "run" flags
    f.push_back(
        {{"--skip"}, "LIST", "protocols to leave out (memory,speed,recall,quality,kernel)", "run"});
  if (sub == "memory" || sub == "speed" || all)
    f.push_back({{"--ctx", "-c"},
                 "LIST",
                 "contexts, e.g. 4k,8k (memory: each; speed: time to first token)",
                 all ? "memory and speed" : sub});
  if (sub == "memory" || all)
    f.push_back({{"--decode-tokens"},
                 "N",
                 "tokens decoded after the prefill (default 4)",
                 all ? "memory" : sub});
  if (sub == "speed" || all)
    f.push_back({{"--depths"},
                 "LIST",
                 "decode depths (default 0,1k,4k,16k,32k capped by --ctx)",
                 all ? "speed" : sub});
  if (sub == "speed" || sub == "kernel" || all) {
    const std::string s = all ? "speed and kernel" : sub;
    f.push_back({{"--warmup"}, "N", "untimed steps before timing (default speed 2, kernel 3)", s});
    f.push_back({{"--steps"}, "N", "timed steps per depth, >= 3 (default speed 5, kernel 9)", s});
  }
  if (sub == "batch") {
    f.push_back({{"--batch"}, "LIST", "batch sizes (default 1,2,4,8,16)", sub});
    f.push_back({{"--depth"}, "N", "tokens each sequence is prefilled to first (default 0)", sub});
    f.push_back({{"--warmup"}, "N", "untimed decode steps per batch size (default 2)", sub});
    f.push_back({{"--steps"}, "N", "timed decode steps per batch size, >= 3 (default 5)", sub});
    f.push_back({{"--kv-budget"},
                 "SIZE",
                 "pool budget of the capacity count, 0 = skip it (default 1G)",
                 sub});
    f.push_back(
        {{"--fit-tokens"}, "N", "tokens per sequence of the capacity count (default 4096)", sub});
  }
  if (sub == "recall" || all) {
    const std::string s = "recall";
    f.push_back(
        {{"--recall-kv"},
         "LIST",
         "recall configurations (default: --kv, else " + std::string(kDefaultRecallKv) + ")",
         s});
    if (!all)
      f.push_back({{"--ctx", "-c"}, "N", "prompt tokens (default min(3200, trained - 64))", s});
    f.push_back({{"--recall-ctx"},
                 "N",
                 "prompt tokens" +
                     std::string(all ? " (default min(3200, trained - 64))" : " (same as --ctx)"),
                 s});
    f.push_back({{"--facts"}, "N", "facts per prompt (default 5)", s});
    f.push_back(
        {{"--fact-depths"}, "LIST", "depths of the facts in [0,1] (default evenly spread)", s});
    f.push_back({{"--seeds"}, "LIST", "seeds (default 1,2,3)", s});
    f.push_back({{"--filler"},
                 "FILE",
                 std::string("filler text (default ") + kHeldoutText +
                     " in $TURBOKV_MODELS, else next to the model)",
                 s});
    f.push_back({{"--fact-template"}, "TEXT", "fact sentence, with {name} and {code}", s});
    f.push_back({{"--question-template"}, "TEXT", "question, with {name}", s});
    f.push_back({{"--chat"}, "NAME|auto", "wrap prompts in a chat template (instruct models)", s});
    f.push_back({{"--answer-tokens"}, "N", "greedy tokens per answer (default 8; chat 32)", s});
    f.push_back({{"--keep-prompts"}, "", "store every document's text in report.json", s});
    f.push_back({{"--no-multi-turn"}, "", "skip the multi-turn window variant", s});
    f.push_back({{"--turns"}, "N", "turns of the multi-turn variant (default 6)", s});
    f.push_back(
        {{"--multi-turn-window"}, "W", "window cap the conversation outgrows (default 1024)", s});
    f.push_back({{"--multi-turn-kv"},
                 "LIST",
                 "configurations of the multi-turn variant (default: --kv, else " +
                     std::string(kDefaultMultiTurnKv) + ")",
                 s});
  }
  if (sub == "quality" || all) {
    const std::string s = "quality";
    f.push_back({{"--quality-kv"},
                 "LIST",
                 "quality configurations (default: --kv, else " + default_quality_kv_list() + ")",
                 s});
    f.push_back({{"--text", "-f"},
                 "FILE",
                 std::string("text to score (default ") + kHeldoutText +
                     " in $TURBOKV_MODELS, else next to the model)",
                 s});
    f.push_back({{"--window-tokens"}, "N", "tokens per window (default 1024)", s});
    f.push_back({{"--windows"}, "N", "windows (default 4)", s});
    f.push_back({{"--baseline"}, "f16|f32", "reference cache for KL (default f16)", s});
  }
  if (sub == "kernel" || all) {
    const std::string s = "kernel";
    f.push_back({{"--kernel-kv"},
                 "LIST",
                 "kernel configurations (default: --kv, else " + default_kernel_kv_list() + ")",
                 s});
    f.push_back({{"--kernel-depths"}, "LIST", "depths (default 1k,4k,16k,32k)", s});
    if (!all) f.push_back({{"--depths"}, "LIST", "depths (same as --kernel-depths)", s});
    f.push_back({{"--kernel-threads"},
                 "LIST",
                 all ? "threads (default 1,2)" : "threads (default --threads, else 1,2)",
                 s});
    f.push_back({{"--head-dims"}, "LIST", "head dims (default 64,128)", s});
    f.push_back({{"--kv-heads"}, "N", "KV heads (default 8)", s});
    f.push_back({{"--gqa"}, "N", "query heads per KV head (default 4)", s});
    f.push_back({{"--fill-ubatch"}, "N", "chunk size of the cache fill (default 1024)", s});
  }
  return f;
}

std::string synopsis(const std::string& sub) {
  if (sub == "kernel") return "turbokv bench kernel [--kv LIST] [--depths LIST] [flags]";
  if (sub == "all") return "turbokv bench all -m MODEL [--kv LIST] [--out DIR] [flags]";
  return "turbokv bench " + sub + " -m MODEL [--kv LIST] [flags]";
}

constexpr const char* kExitStatus =
    "Exit status: 0 when every cell gave a result (ok, or oom / timeout rows: a\n"
    "limit reached), 1 when a cell failed, 2 for bad input, 130 / 143 when\n"
    "interrupted by SIGINT / SIGTERM (the report keeps the finished cells and\n"
    "marks the rest \"not run\").";

std::string description(const std::string& sub) {
  std::string d;
  if (sub == "memory")
    d = "Peak RSS, model, KV and scratch bytes per KV configuration and context: a\n"
        "prefill to the context, then --decode-tokens decode steps.";
  if (sub == "speed")
    d = "Prefill tokens/s and time to first token per context, and decode ms/token\n"
        "by depth, per KV configuration and thread count.";
  if (sub == "batch")
    d = "Aggregate decode tok/s of B sequences decoding together (one batched forward\n"
        "per step) for each --batch size, per KV configuration; and how many\n"
        "--fit-tokens sequences one pool of --kv-budget holds, allocated until it\n"
        "refuses one.";
  if (sub == "recall")
    d = "Facts planted at controlled depths of a filler text, then one question per\n"
        "fact; exact-match answers per configuration, plus a multi-turn\n"
        "conversation that grows past a window cap.";
  if (sub == "quality")
    d = "Perplexity of a text and KL divergence / top-1 agreement against an f16 (or\n"
        "f32) cache, through the real cache path.";
  if (sub == "kernel")
    d = "Decode attention alone: one layer with synthetic K/V/Q, by codec, head dim,\n"
        "threads and depth, next to the machine's copy bandwidth.";
  if (sub == "all")
    d = "Runs memory, speed, recall, quality and kernel on one model and writes\n"
        "report.json, report.md and PNG plots to --out (default report-bench).\n"
        "--kv restricts every protocol; --recall-kv, --quality-kv and --kernel-kv\n"
        "override it for one.";
  d += "\n\nEach cell runs in a child process of this binary; with --out the report\n"
       "is rewritten after every cell.\n\n";
  return d + kExitStatus;
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

void require_readable(const std::string& path, const std::string& flag) {
  std::ifstream in(path);
  std::error_code ec;
  if (!in || std::filesystem::is_directory(path, ec))
    fail(flag, " ", path, ": cannot read the file");
}

// The text file of `flag`: as given, else kHeldoutText in $TURBOKV_MODELS or
// next to the model.
std::string text_file(const Args& a, const std::string& flag, const std::string& model,
                      const std::string& command) {
  if (const auto v = a.get(flag)) {
    require_readable(*v, flag);
    return *v;
  }
  const std::string found = find_heldout_text(model);
  if (found.empty())
    fail(command, ": no ", kHeldoutText, " in $TURBOKV_MODELS or next to the model; pass ", flag,
         " FILE, or set TURBOKV_MODELS to the folder that holds it");
  return found;
}

// The first of `flags` that was given, else `fallback`.
std::string first_of(const Args& a, std::initializer_list<const char*> flags,
                     const std::string& fallback) {
  for (const char* f : flags)
    if (const auto v = a.get(f)) return *v;
  return fallback;
}

int run_bench(const std::string& sub, const std::vector<std::string>& args,
              const std::vector<std::string>& cell_argv) {
  std::vector<Flag> flags = common_flags();
  for (auto& f : protocol_flags(sub)) flags.push_back(std::move(f));
  const std::string command = "bench " + sub;
  Args a(command, flags);
  if (!a.parse(args)) {
    std::cout << a.help(synopsis(sub), description(sub));
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
  const bool need_model =
      on("memory") || on("speed") || on("batch") || on("recall") || on("quality");
  if (need_model) {
    if (!a.has("--model")) fail(command, ": -m MODEL is required");
    o.model = *a.get("--model");
    info = probe_model(o.model);
  }
  const int64_t trained = info.n_ctx_train > 0 ? info.n_ctx_train : 4096;

  std::vector<Section> sections;
  // --kv applies to every protocol; a protocol's own list overrides it.
  auto with_kv = [&](std::initializer_list<const char*> flags, const std::string& fallback) {
    CommonOptions c = o;
    c.kv = parse_bench_kv_list(first_of(a, flags, fallback), defaults);
    return c;
  };
  if (on("memory")) {
    auto m = std::make_shared<MemoryOptions>();
    m->ctx =
        a.has("--ctx") ? parse_token_counts(*a.get("--ctx"), "--ctx") : capped(m->ctx, trained);
    m->decode_tokens = a.get_int("--decode-tokens", 4, 0, 1 << 20);
    const CommonOptions c = with_kv({"--kv"}, kDefaultKv);
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
    const CommonOptions c = with_kv({"--kv"}, kDefaultKv);
    sections.push_back({"speed", plan_speed(c, *s, info), [s](std::vector<Json> rows) {
                          return summarize_speed(*s, std::move(rows));
                        }});
  }
  if (sub == "batch") {
    auto b = std::make_shared<BatchOptions>();
    if (a.has("--batch")) b->batch = parse_ints(*a.get("--batch"), "--batch", 1, 4096);
    if (a.has("--depth")) b->depth = parse_token_count(*a.get("--depth"), "--depth");
    b->warmup = a.get_int("--warmup", 2, 0, 1000);
    b->steps = a.get_int("--steps", 5, 3, 100000);
    if (const auto v = a.get("--kv-budget")) {
      try {
        b->fit_budget = parse_bytes(*v);
      } catch (const Error& e) {
        fail("--kv-budget: ", e.what());
      }
    }
    if (a.has("--fit-tokens"))
      b->fit_tokens = parse_token_count(*a.get("--fit-tokens"), "--fit-tokens");
    const CommonOptions c = with_kv({"--kv"}, "f16,k4v2");
    sections.push_back({"batch", plan_batch(c, *b, info), [b](std::vector<Json> rows) {
                          return summarize_batch(*b, std::move(rows));
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
    r->filler_file = text_file(a, "--filler", o.model, command);
    if (r->ctx > trained)
      std::fprintf(stderr, "bench recall: warning: --ctx %lld is beyond the model's trained %lld\n",
                   (long long)r->ctx, (long long)trained);
    CommonOptions c = with_kv({"--recall-kv", "--kv"}, kDefaultRecallKv);
    std::vector<PlannedCell> cells;
    {
      RecallOptions single = *r;
      single.multi_turn = false;
      cells = plan_recall(c, single, info);
    }
    if (r->multi_turn) {
      RecallOptions mt = *r;
      CommonOptions cm = with_kv({"--multi-turn-kv", "--kv"}, kDefaultMultiTurnKv);
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
    q->window_tokens =
        a.get_int("--window-tokens", int(std::min<int64_t>(1024, trained)), 4, 1 << 24);
    q->windows = a.get_int("--windows", 4, 1, 1 << 20);
    q->baseline = a.get_or("--baseline", "f16");
    if (q->baseline != "f16" && q->baseline != "f32")
      fail("--baseline ", q->baseline, ": use f16 or f32");
    q->text_file = text_file(a, "--text", o.model, command);
    const CommonOptions c = with_kv({"--quality-kv", "--kv"}, default_quality_kv_list());
    sections.push_back({"quality", plan_quality(c, *q, info), [q](std::vector<Json> rows) {
                          return summarize_quality(*q, std::move(rows));
                        }});
  }
  if (on("kernel")) {
    auto k = std::make_shared<KernelOptions>();
    // `bench all` runs fewer depths by default: 64K dominates a kernel run.
    if (all) k->depths = {1024, 4096, 16384, 32768};
    // In `bench all`, --depths is speed's.
    const char* depth_flag = a.has("--kernel-depths")    ? "--kernel-depths"
                             : !all && a.has("--depths") ? "--depths"
                                                         : nullptr;
    if (depth_flag) k->depths = parse_token_counts(*a.get(depth_flag), depth_flag);
    if (a.has("--kernel-threads"))
      k->threads = parse_ints(*a.get("--kernel-threads"), "--kernel-threads", 1, 1024);
    else if (!all && a.has("--threads"))
      k->threads = threads;
    if (a.has("--head-dims"))
      k->head_dims = parse_ints(*a.get("--head-dims"), "--head-dims", 8, 1024);
    k->kv_heads = a.get_int("--kv-heads", 8, 1, 1024);
    k->gqa = a.get_int("--gqa", 4, 1, 64);
    k->warmup = a.get_int("--warmup", 3, 0, 1000);
    k->steps = a.get_int("--steps", 9, 3, 100000);
    k->fill_ubatch = a.get_int("--fill-ubatch", 1024, 1, 1 << 20);
    const CommonOptions c = with_kv({"--kernel-kv", "--kv"}, default_kernel_kv_list());
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
  if (o.mem_limit > 0)
    std::fprintf(stderr, "bench: memory limit %s per cell via %s%s%s\n",
                 format_bytes(o.mem_limit).c_str(), limit_method_name(runner.limit().method()),
                 runner.limit().fallback_reason().empty() ? "" : ": ",
                 runner.limit().fallback_reason().c_str());
  return execute_run(sections, runner, make_report(h), o.out_dir, o.quiet);
}

}  // namespace

int bench_main(const std::vector<std::string>& args, std::vector<std::string> cell_argv) {
  static const std::string kUsage =
      std::string(
          "usage: turbokv bench SUBCOMMAND [flags]\n"
          "\n"
          "Benchmarks of the engine and its KV cache. Each measurement (a cell) runs\n"
          "in a child process of this binary; --out writes report.json, report.md\n"
          "and PNG plots, rewritten after every cell.\n"
          "\n") +
      kExitStatus +
      "\n"
      "\n"
      "subcommands:\n"
      "  memory        peak RSS, model, KV and scratch bytes per KV configuration and context\n"
      "  speed         prefill tok/s, time to first token, decode ms/token by depth\n"
      "  batch         aggregate decode tok/s of B sequences together; sequences per pool budget\n"
      "  recall        planted facts at controlled depths, exact-match answers; multi-turn window\n"
      "  quality       perplexity and KL divergence vs an f16 cache through the real cache path\n"
      "  kernel        decode attention alone (one layer, synthetic K/V/Q) by codec and depth\n"
      "  all           all five on a model: report.json, report.md and PNG plots in --out\n"
      "\n"
      "`turbokv bench SUBCOMMAND --help` shows a subcommand's flags; docs/BENCHMARKS.md\n"
      "describes the protocols.\n";
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
  if (sub != "memory" && sub != "speed" && sub != "batch" && sub != "recall" && sub != "quality" &&
      sub != "kernel" && sub != "all")
    fail("bench: unknown subcommand '", sub,
         "' (memory, speed, batch, recall, quality, kernel, all)");
  if (cell_argv.empty()) cell_argv = {self_executable(), "bench", "cell"};
  return run_bench(sub, rest, cell_argv);
}

}  // namespace tkv::bench
