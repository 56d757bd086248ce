#include "bench/bench_cli.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include "bench/agree.h"
#include "bench/batch_protocol.h"
#include "bench/bench_run.h"
#include "bench/cell.h"
#include "bench/child_process.h"
#include "bench/compare.h"
#include "bench/kernel_protocol.h"
#include "bench/memory_protocol.h"
#include "bench/quality_protocol.h"
#include "bench/recall_protocol.h"
#include "bench/report.h"
#include "bench/serve_client.h"
#include "bench/serve_protocol.h"
#include "bench/speed_protocol.h"
#include "bench/spill_dir.h"
#include "bench/units.h"
#include "cli/common_flags.h"
#include "cli/flags.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "common/thread_pool.h"
#include "model/model.h"

namespace tkv::bench {

namespace {

const char* kDefaultKv = "f16,k8v8,q8_0,q4_0h,k4v4,k4v2,k3v2";
const char* kDefaultRecallKv = "f16,k8v8,q4_0h,k4v4,k4v2,k3v2,k4v2:w1024";
const char* kDefaultMultiTurnKv = "f16,k4v2";

// Every flag of every bench subcommand. The model, -ub and KV flags are the
// shared groups of the other commands (cli/common_flags.h); -t, -c and the
// depths take lists here.
struct BenchFlags {
  cli::ModelFlags model;
  cli::ContextFlags context;  // -ub only: bench's -c is a list
  cli::KvFlags kv;            // the list form: --kv LIST
  std::string threads, mem_limit, out;
  float cell_timeout = 0;
  bool quiet = false;
  // memory, speed, batch
  std::string skip, ctx, depths, batch, depth, fit_tokens, fill = "prefill";
  int decode_tokens = 4;
  int warmup = -1, steps = -1;  // -1: the protocol's default
  // recall
  std::string recall_kv, recall_ctx, fact_depths, seeds, filler, fact_template, question_template,
      chat, multi_turn_kv;
  int facts = 5, answer_tokens = 0, turns = 6, multi_turn_window = 1024;
  bool keep_prompts = false, no_multi_turn = false;
  // quality
  std::string quality_kv, text, baseline = "f16";
  int window_tokens = 0, windows = 4;  // window_tokens 0: min(1024, trained)
  // kernel
  std::string kernel_kv, kernel_depths, kernel_threads, head_dims;
  int kv_heads = 8, gqa = 4, fill_ubatch = 1024;
  // serve
  std::string clients, prompt_tokens, gen_tokens, shared_prefix, long_prompt, url;
  int prefill_step = 0;   // serve's --prefill-step (given or not)
  int prefill_whole = 0;  // serve's --prefill-whole (given or not)
  bool capacity = false;
  int capacity_max = 512;
};

// The help sections of a subcommand's flags: a group of flags starts a
// section only when its title differs from the current one, so that the
// flags of one protocol stay together.
class HelpSections {
 public:
  explicit HelpSections(cli::FlagParser& flags) : flags_(flags) {}
  void enter(const std::string& title) {
    if (title != current_) flags_.section(title);
    current_ = title;
  }
  // A shared flag group (cli/common_flags.h) started section `title` itself.
  void opened(const std::string& title) { current_ = title; }

 private:
  cli::FlagParser& flags_;
  std::string current_;
};

// The flags of every subcommand: the model, compute, KV cache and run
// sections.
void declare_run_flags(bool all, BenchFlags& f, cli::FlagParser& flags, HelpSections& sec) {
  f.model.add_to(flags);
  flags.set_help("-m", "GGUF model file (required except for kernel)");
  sec.opened("model");
  sec.enter("compute");
  flags.add_string({"-t", "--threads"}, "LIST",
                   "worker threads; speed and kernel run each, the others the first\n"
                   "(default: physical cores)",
                   &f.threads);
  f.context.add_ubatch_to(flags);
  f.kv.add_to(flags, cli::KvFlags::Form::kList);
  sec.opened("KV cache");
  sec.enter("run");
  flags.add_string({"--mem-limit"}, "SIZE",
                   "memory limit per cell, e.g. 16G; a cell over it is an oom row", &f.mem_limit);
  flags.add_float({"--cell-timeout"}, "S",
                  "stop a cell after S seconds: a timeout row (default 0 = never)", &f.cell_timeout,
                  0, 1e7);
  flags.add_string({"-o", "--out"}, "DIR",
                   "write report.json, report.md and PNG plots there, updated after every cell",
                   &f.out);
  flags.add_bool({"-q", "--quiet"}, "no progress bar", &f.quiet);
  if (all)
    flags.add_string({"--skip"}, "LIST",
                     "protocols to leave out (memory,speed,recall,quality,kernel)", &f.skip);
}

// The flags of memory and speed, and those speed shares with kernel.
void declare_memory_speed_flags(const std::string& sub, BenchFlags& f, cli::FlagParser& flags,
                                HelpSections& sec) {
  const bool all = sub == "all";
  if (sub == "memory" || sub == "speed" || all) {
    sec.enter(all ? "memory and speed" : sub);
    flags.add_string({"-c", "--ctx"}, "LIST",
                     "contexts, e.g. 4k,8k (memory: each; speed: time to first token)", &f.ctx);
    flags.add_string({"--fill"}, "prefill|synthetic",
                     "how the cache reaches each context: the model's prefill (default), or\n"
                     "synthetic K/V written straight into the cache (deep contexts in seconds;\n"
                     "no prefill figures)",
                     &f.fill);
  }
  if (sub == "memory" || all) {
    sec.enter(all ? "memory" : sub);
    flags.add_int({"--decode-tokens"}, "N", "tokens decoded after the prefill (default 4)",
                  &f.decode_tokens, 0, 1 << 20);
  }
  if (sub == "speed" || all) {
    sec.enter(all ? "speed" : sub);
    flags.add_string({"--depths"}, "LIST",
                     "decode depths (default 0,1k,4k,16k,32k capped by --ctx)", &f.depths);
  }
  if (sub == "speed" || sub == "kernel" || all) {
    sec.enter(all ? "speed and kernel" : sub);
    flags.add_int({"--warmup"}, "N", "untimed steps before timing (default speed 2, kernel 3)",
                  &f.warmup, 0, 1000);
    flags.add_int({"--steps"}, "N", "timed steps per depth, >= 3 (default speed 5, kernel 9)",
                  &f.steps, 3, 100000);
  }
}

void declare_batch_flags(const std::string& sub, BenchFlags& f, cli::FlagParser& flags,
                         HelpSections& sec) {
  sec.enter(sub);
  flags.add_string({"--batch"}, "LIST", "batch sizes (default 1,2,4,8,16)", &f.batch);
  flags.add_string({"--depth"}, "N", "tokens each sequence is prefilled to first (default 0)",
                   &f.depth);
  flags.add_int({"--warmup"}, "N", "untimed decode steps per batch size (default 2)", &f.warmup, 0,
                1000);
  flags.add_int({"--steps"}, "N", "timed decode steps per batch size, >= 3 (default 5)", &f.steps,
                3, 100000);
  flags.add_string({"--fit-tokens"}, "N",
                   "tokens per sequence of the capacity count (default 4096)", &f.fit_tokens);
  // The capacity count's pool, not the decode cells' (they run unbudgeted).
  flags.set_help("--kv-budget", "pool budget of the capacity count, 0 = skip it (default 1G)");
}

void declare_serve_flags(const std::string& sub, BenchFlags& f, cli::FlagParser& flags,
                         HelpSections& sec) {
  sec.enter(sub);
  flags.add_string({"--clients"}, "LIST", "concurrent clients, one cell each (default 1,8)",
                   &f.clients);
  flags.add_string({"--prompt-tokens"}, "N", "prompt tokens per request (default 128)",
                   &f.prompt_tokens);
  flags.add_string({"--gen-tokens"}, "N", "tokens generated per request (default 64)",
                   &f.gen_tokens);
  flags.add_string({"--shared-prefix"}, "T",
                   "the first T prompt tokens are the same for every client (default 0)",
                   &f.shared_prefix);
  flags.add_string({"--long-prompt"}, "N",
                   "one more client sends an N-token prompt once the others stream: its\n"
                   "TTFT and their inter-token latency during its prefill (default off)",
                   &f.long_prompt);
  flags.add_string({"--url"}, "URL",
                   "drive this running OpenAI-compatible server (http://HOST:PORT) instead\n"
                   "of starting turbokv serve; -m gives the vocabulary size",
                   &f.url);
  flags.add_bool({"--capacity"},
                 "instead: distinct --prompt-tokens prompts (max_tokens 1), one at a time,\n"
                 "until a cached prefix is evicted: the most the --kv-budget holds",
                 &f.capacity);
  flags.add_int({"--capacity-max"}, "N", "requests of --capacity at most (default 512)",
                &f.capacity_max, 1, 1 << 20);
  flags.set_help("--kv-budget", "the server's pool budget (default: serve's, 1G)");
  flags.add_int({"--prefill-step"}, "N",
                "the server's prefill work per step while others decode (default: serve's;\n"
                "0: one -ub chunk a step, whole)",
                &f.prefill_step, 0, 1 << 20);
  flags.add_int({"--prefill-whole"}, "N",
                "the server's longest prompt prefilled as one chunk (default: serve's)",
                &f.prefill_whole, 0, 1 << 20);
  flags.set_help("-ub", "the server's prefill chunk, the grid (default: serve's)");
}

void declare_recall_flags(bool all, BenchFlags& f, cli::FlagParser& flags, HelpSections& sec) {
  sec.enter("recall");
  flags.add_string(
      {"--recall-kv"}, "LIST",
      "recall configurations (default: --kv, else " + std::string(kDefaultRecallKv) + ")",
      &f.recall_kv);
  if (!all)
    flags.add_string({"-c", "--ctx"}, "N", "prompt tokens (default min(3200, trained - 64))",
                     &f.ctx);
  flags.add_string({"--recall-ctx"}, "N",
                   "prompt tokens" +
                       std::string(all ? " (default min(3200, trained - 64))" : " (same as --ctx)"),
                   &f.recall_ctx);
  flags.add_int({"--facts"}, "N", "facts per prompt (default 5)", &f.facts, 1, 64);
  flags.add_string({"--fact-depths"}, "LIST",
                   "depths of the facts in [0,1] (default evenly spread)", &f.fact_depths);
  flags.add_string({"--seeds"}, "LIST", "seeds (default 1,2,3)", &f.seeds);
  flags.add_string({"--filler"}, "FILE",
                   std::string("filler text (default ") + kHeldoutText +
                       " in $TURBOKV_MODELS, else next to the model)",
                   &f.filler);
  flags.add_string({"--fact-template"}, "TEXT", "fact sentence, with {name} and {code}",
                   &f.fact_template);
  flags.add_string({"--question-template"}, "TEXT", "question, with {name}", &f.question_template);
  flags.add_string({"--chat"}, "NAME|auto", "wrap prompts in a chat template (instruct models)",
                   &f.chat);
  flags.add_int({"--answer-tokens"}, "N", "greedy tokens per answer (default 8; chat 32)",
                &f.answer_tokens, 1, 512);
  flags.add_bool({"--keep-prompts"}, "store every document's text in report.json", &f.keep_prompts);
  flags.add_bool({"--no-multi-turn"}, "skip the multi-turn window variant", &f.no_multi_turn);
  flags.add_int({"--turns"}, "N", "turns of the multi-turn variant (default 6)", &f.turns, 2, 1000);
  flags.add_int({"--multi-turn-window"}, "W", "window cap the conversation outgrows (default 1024)",
                &f.multi_turn_window, 16, 1 << 30);
  flags.add_string({"--multi-turn-kv"}, "LIST",
                   "configurations of the multi-turn variant (default: --kv, else " +
                       std::string(kDefaultMultiTurnKv) + ")",
                   &f.multi_turn_kv);
}

void declare_quality_flags(BenchFlags& f, cli::FlagParser& flags, HelpSections& sec) {
  sec.enter("quality");
  flags.add_string({"--quality-kv"}, "LIST",
                   "quality configurations (default: --kv, else " + default_quality_kv_list() + ")",
                   &f.quality_kv);
  flags.add_string({"-f", "--text"}, "FILE",
                   std::string("text to score (default ") + kHeldoutText +
                       " in $TURBOKV_MODELS, else next to the model)",
                   &f.text);
  flags.add_int({"--window-tokens"}, "N", "tokens per window (default 1024)", &f.window_tokens, 4,
                1 << 24);
  flags.add_int({"--windows"}, "N", "windows (default 4)", &f.windows, 1, 1 << 20);
  flags.add_string({"--baseline"}, "f16|f32", "reference cache for KL (default f16)", &f.baseline);
}

void declare_kernel_flags(bool all, BenchFlags& f, cli::FlagParser& flags, HelpSections& sec) {
  sec.enter("kernel");
  flags.add_string({"--kernel-kv"}, "LIST",
                   "kernel configurations (default: --kv, else " + default_kernel_kv_list() + ")",
                   &f.kernel_kv);
  flags.add_string({"--kernel-depths"}, "LIST", "depths (default 1k,4k,16k,32k)", &f.kernel_depths);
  if (!all) flags.add_string({"--depths"}, "LIST", "depths (same as --kernel-depths)", &f.depths);
  flags.add_string({"--kernel-threads"}, "LIST",
                   all ? "threads (default 1,2)" : "threads (default --threads, else 1,2)",
                   &f.kernel_threads);
  flags.add_string({"--head-dims"}, "LIST", "head dims (default 64,128)", &f.head_dims);
  flags.add_int({"--kv-heads"}, "N", "KV heads (default 8)", &f.kv_heads, 1, 1024);
  flags.add_int({"--gqa"}, "N", "query heads per KV head (default 4)", &f.gqa, 1, 64);
  flags.add_int({"--fill-ubatch"}, "N", "chunk size of the cache fill (default 1024)",
                &f.fill_ubatch, 1, 1 << 20);
}

// A subcommand accepts the flags that `bench all` passes to its protocol, so
// a command line of `bench all` narrows to one protocol by changing the
// subcommand.
void declare_flags(const std::string& sub, BenchFlags& f, cli::FlagParser& flags) {
  const bool all = sub == "all";
  HelpSections sec(flags);
  declare_run_flags(all, f, flags, sec);
  declare_memory_speed_flags(sub, f, flags, sec);
  if (sub == "batch") declare_batch_flags(sub, f, flags, sec);
  if (sub == "serve") declare_serve_flags(sub, f, flags, sec);
  if (sub == "recall" || all) declare_recall_flags(all, f, flags, sec);
  if (sub == "quality" || all) declare_quality_flags(f, flags, sec);
  if (sub == "kernel" || all) declare_kernel_flags(all, f, flags, sec);
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
  if (sub == "serve")
    d = "A live `turbokv serve` (this binary, port 0, --parallel N) driven by N\n"
        "concurrent streaming /v1/completions clients (greedy) per KV configuration\n"
        "and --clients count: aggregate and decode-phase generated tok/s, time to\n"
        "first token and inter-token latency p50/p99, the server's peak RSS and KV\n"
        "bytes, and the largest N whose requests all succeeded within --kv-budget.\n"
        "--long-prompt N: the others' latency while one more client's N-token prompt\n"
        "prefills. --url URL: drive a running server (llama-server, ...) instead.";
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

std::string fill_mode(const std::string& fill) {
  if (fill != "prefill" && fill != "synthetic") fail("--fill ", fill, ": use prefill or synthetic");
  return fill;
}

// Budget items spill to a directory under $TMPDIR (else /tmp): says where,
// and when that is tmpfs (RAM), before anything runs.
void note_spill_place() {
  const SpillPlace p = probe_spill_place();
  if (!p.error.empty())
    fail("budget items: ", p.error, " (set TMPDIR to a writable directory on disk)");
  if (p.on_tmpfs)
    std::fprintf(stderr,
                 "bench: note: budget items spill under %s, which is tmpfs (RAM): spilled pages "
                 "still take RAM; set TMPDIR to a directory on disk\n",
                 p.parent.c_str());
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
std::string text_file(bool given, const std::string& value, const std::string& flag,
                      const std::string& model, const std::string& command) {
  if (given) {
    require_readable(value, flag);
    return value;
  }
  const std::string found = find_heldout_text(model);
  if (found.empty())
    fail(command, ": no ", kHeldoutText, " in $TURBOKV_MODELS or next to the model; pass ", flag,
         " FILE, or set TURBOKV_MODELS to the folder that holds it");
  return found;
}

int run_bench(const std::string& sub, const std::vector<std::string>& args,
              const std::vector<std::string>& cell_argv) {
  const std::string command = "bench " + sub;
  BenchFlags f;
  cli::FlagParser flags(command, synopsis(sub), description(sub));
  declare_flags(sub, f, flags);
  if (!flags.parse(args)) return 0;
  const auto given = [&](const char* name) { return flags.was_set(name); };
  const bool all = sub == "all";
  const std::vector<std::string> skip =
      given("--skip") ? cli::split_list(f.skip, "--skip") : std::vector<std::string>{};
  auto on = [&](const std::string& p) {
    if (!all) return sub == p;
    return std::find(skip.begin(), skip.end(), p) == skip.end();
  };

  CommonOptions o;
  const std::vector<int> threads = given("--threads") ? parse_ints(f.threads, "--threads", 1, 1024)
                                                      : std::vector<int>{physical_core_count()};
  o.threads = threads.front();
  o.ubatch = f.context.ubatch;
  if (given("--mem-limit")) {
    try {
      o.mem_limit = parse_bytes(f.mem_limit);
    } catch (const Error& e) {
      fail("--mem-limit: ", e.what());
    }
  }
  o.cell_timeout = f.cell_timeout;
  o.out_dir = given("--out") ? f.out : all ? "report-bench" : "";  // /report*/ is git-ignored
  o.quiet = f.quiet;
  // The KV flags of the cells. In bench batch, --kv-budget is the capacity
  // count's pool (0 = skip it); its decode cells run without a budget.
  cli::KvFlags cell_kv = f.kv;
  if (sub == "batch") cell_kv.budget.clear();
  // Checked before the model loads.
  const std::string kv_list = cell_kv.list();
  const kv::KvConfig kv_defaults = cell_kv.config();

  ModelInfo info;
  const bool need_model =
      on("memory") || on("speed") || on("batch") || on("serve") || on("recall") || on("quality");
  if (need_model) {
    o.model = f.model.path;
    o.weights = model::weight_memory_name(f.model.weight_memory(command));
    info = model_info(*f.model.probe(command), o.model);
    cell_kv.check_layers(kv_defaults, info.n_layers);
  }
  const int64_t trained = info.n_ctx_train > 0 ? info.n_ctx_train : 4096;

  std::vector<Section> sections;
  // --kv (or -ctk/-ctv) applies to every protocol; a protocol's own list
  // (`own`, when given) overrides it. RAM caps (budgetSIZE items) are for
  // the protocols that run them (ram_caps).
  bool spill_noted = false;
  auto with_kv = [&](const char* own, const std::string& own_list, const std::string& fallback,
                     bool ram_caps = false) {
    CommonOptions c = o;
    const bool own_given = own && given(own);
    const std::string list = own_given                           ? own_list
                             : kv_list.empty() && !given("--kv") ? fallback
                                                                 : kv_list;
    const std::string flag = own_given ? own : "--kv";
    c.kv = parse_bench_kv_list(
        list, flag, [&](const std::string& item) { return cell_kv.configs(item, flag).front(); });
    for (const auto& kv : c.kv) {
      if (kv.ram_budget == 0) continue;
      if (!ram_caps)
        fail(flag, " ", kv.label, ": budget items run in bench recall, speed and memory only");
      if (!spill_noted) note_spill_place();
      spill_noted = true;
    }
    return c;
  };
  if (on("memory")) {
    auto m = std::make_shared<MemoryOptions>();
    m->ctx = given("--ctx") ? parse_token_counts(f.ctx, "--ctx") : capped(m->ctx, trained);
    m->decode_tokens = f.decode_tokens;
    m->fill = fill_mode(f.fill);
    const CommonOptions c = with_kv(nullptr, {}, kDefaultKv, /*ram_caps=*/true);
    sections.push_back({"memory", plan_memory(c, *m, info), [m](std::vector<Json> rows) {
                          return summarize_memory(*m, std::move(rows));
                        }});
  }
  if (on("speed")) {
    auto s = std::make_shared<SpeedOptions>();
    s->ctx = given("--ctx") ? parse_token_counts(f.ctx, "--ctx") : capped(s->ctx, trained);
    const int64_t max_ctx = *std::max_element(s->ctx.begin(), s->ctx.end());
    s->depths =
        given("--depths") ? parse_token_counts(f.depths, "--depths") : capped(s->depths, max_ctx);
    s->threads = threads;
    s->warmup = f.warmup >= 0 ? f.warmup : 2;
    s->steps = f.steps >= 0 ? f.steps : 5;
    s->fill = fill_mode(f.fill);
    const CommonOptions c = with_kv(nullptr, {}, kDefaultKv, /*ram_caps=*/true);
    sections.push_back({"speed", plan_speed(c, *s, info), [s](std::vector<Json> rows) {
                          return summarize_speed(*s, std::move(rows));
                        }});
  }
  if (sub == "batch") {
    auto b = std::make_shared<BatchOptions>();
    if (given("--batch")) b->batch = parse_ints(f.batch, "--batch", 1, 4096);
    if (given("--depth")) b->depth = parse_token_count(f.depth, "--depth");
    b->warmup = f.warmup >= 0 ? f.warmup : 2;
    b->steps = f.steps >= 0 ? f.steps : 5;
    if (given("--kv-budget")) b->fit_budget = f.kv.budget_bytes();
    if (given("--fit-tokens")) b->fit_tokens = parse_token_count(f.fit_tokens, "--fit-tokens");
    const CommonOptions c = with_kv(nullptr, {}, "f16,k4v2");
    sections.push_back({"batch", plan_batch(c, *b, info), [b](std::vector<Json> rows) {
                          return summarize_batch(*b, std::move(rows));
                        }});
  }
  if (sub == "serve") {
    auto s = std::make_shared<ServeOptions>();
    if (given("--clients")) s->clients = parse_ints(f.clients, "--clients", 1, 1024);
    if (given("--prompt-tokens"))
      s->prompt_tokens = parse_token_count(f.prompt_tokens, "--prompt-tokens");
    if (given("--gen-tokens")) s->gen_tokens = parse_token_count(f.gen_tokens, "--gen-tokens");
    if (given("--shared-prefix"))
      s->shared_prefix = parse_token_count(f.shared_prefix, "--shared-prefix");
    if (s->prompt_tokens < 1) fail("--prompt-tokens: must be at least 1");
    if (s->gen_tokens < 1) fail("--gen-tokens: must be at least 1");
    if (s->shared_prefix > s->prompt_tokens)
      fail("--shared-prefix ", s->shared_prefix, " is longer than --prompt-tokens ",
           s->prompt_tokens);
    if (s->prompt_tokens + s->gen_tokens > trained)
      fail("--prompt-tokens + --gen-tokens (", s->prompt_tokens + s->gen_tokens,
           ") exceed the model's trained context ", trained);
    if (given("--long-prompt")) {
      s->long_prompt = parse_token_count(f.long_prompt, "--long-prompt");
      if (s->long_prompt < 1) fail("--long-prompt: must be at least 1");
      if (s->long_prompt + 4 > trained)
        fail("--long-prompt ", s->long_prompt,
             " (+ 4 generated) exceeds the model's trained context ", trained);
    }
    if (given("--url")) {
      (void)parse_server_url(f.url);  // a bad URL fails here
      // The server's settings are its own: flags that would go to it cannot.
      for (const char* flag :
           {"--kv", "-ctk", "-ctv", "--kv-budget", "-ub", "--prefill-step", "--prefill-whole"})
        if (given(flag))
          fail("--url: ", flag, " configures a server bench serve starts; not with --url");
      s->url = f.url;
    }
    if (f.capacity) {
      if (!s->url.empty()) fail("--capacity: counts what a server it starts holds; not with --url");
      if (given("--long-prompt")) fail("--capacity: not with --long-prompt");
      s->capacity_max = f.capacity_max;
      // Every prompt on the prefill grid, so that each leaves a cached
      // prefix (a prompt prefilled as one chunk has no reusable boundary).
      s->server_flags.insert(s->server_flags.end(), {"--prefill-whole", "0"});
    } else if (given("--capacity-max")) {
      fail("--capacity-max: needs --capacity");
    }
    if (given("--kv-budget")) {
      (void)f.kv.budget_bytes();  // a bad size fails here, not in the server
      s->kv_budget = f.kv.budget;
    }
    // The list's policy defaults travel to the server as its own flags.
    auto pass = [&](const char* flag, const std::string& value) {
      if (given(flag)) s->server_flags.insert(s->server_flags.end(), {flag, value});
    };
    pass("--kv-sinks", std::to_string(f.kv.sinks));
    pass("--kv-residual", std::to_string(f.kv.residual));
    pass("--kv-window", std::to_string(f.kv.window));
    pass("--kv-swa", f.kv.swa);
    pass("--kv-page", std::to_string(f.kv.page));
    pass("--kv-select", std::to_string(f.kv.select));
    pass("--kv-select-prefill", f.kv.select_prefill);
    pass("--kv-seed", std::to_string(f.kv.seed));
    for (const auto& o : f.kv.layer_overrides)
      s->server_flags.insert(s->server_flags.end(), {"--kv-layer-override", o});
    // The server's prefill chunk stays its own default unless -ub is given.
    pass("-ub", std::to_string(f.context.ubatch));
    pass("--prefill-step", std::to_string(f.prefill_step));
    pass("--prefill-whole", std::to_string(f.prefill_whole));
    if (f.model.mmap) s->server_flags.push_back("--mmap");
    if (f.model.no_mmap) s->server_flags.push_back("--no-mmap");
    s->server_exe = cell_argv.front();
    const CommonOptions c = with_kv(nullptr, {}, "f16,k4v2");
    sections.push_back({"serve", plan_serve(c, *s, info), [s](std::vector<Json> rows) {
                          return summarize_serve(*s, std::move(rows));
                        }});
  }
  if (on("recall")) {
    auto r = std::make_shared<RecallOptions>();
    if (given("--recall-ctx"))
      r->ctx = parse_token_count(f.recall_ctx, "--recall-ctx");
    else if (!all && given("--ctx"))
      r->ctx = parse_token_count(f.ctx, "--ctx");
    r->facts = f.facts;
    if (given("--fact-depths")) r->depths = parse_fractions(f.fact_depths, "--fact-depths", 0, 1);
    if (given("--seeds")) r->seeds = parse_ints(f.seeds, "--seeds", 0, 1 << 30);
    if (given("--fact-template")) r->templates.fact = f.fact_template;
    if (given("--question-template")) {
      r->templates.question = f.question_template;
      r->question_template_set = true;
    }
    if (r->templates.fact.find("{name}") == std::string::npos ||
        r->templates.fact.find("{code}") == std::string::npos)
      fail("--fact-template must contain {name} and {code}");
    if (r->templates.question.find("{name}") == std::string::npos)
      fail("--question-template must contain {name}");
    r->chat = f.chat;
    r->answer_tokens = f.answer_tokens;
    r->keep_prompts = f.keep_prompts;
    r->multi_turn = !f.no_multi_turn;
    r->turns = f.turns;
    r->multi_turn_window = f.multi_turn_window;
    finalize_recall_options(*r, info);
    r->filler_file = text_file(given("--filler"), f.filler, "--filler", o.model, command);
    if (r->ctx > trained)
      std::fprintf(stderr, "bench recall: warning: --ctx %lld is beyond the model's trained %lld\n",
                   (long long)r->ctx, (long long)trained);
    CommonOptions c = with_kv("--recall-kv", f.recall_kv, kDefaultRecallKv, /*ram_caps=*/true);
    std::vector<PlannedCell> cells;
    {
      RecallOptions single = *r;
      single.multi_turn = false;
      cells = plan_recall(c, single, info);
    }
    if (r->multi_turn) {
      RecallOptions mt = *r;
      CommonOptions cm =
          with_kv("--multi-turn-kv", f.multi_turn_kv, kDefaultMultiTurnKv, /*ram_caps=*/true);
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
        f.window_tokens > 0 ? f.window_tokens : int(std::min<int64_t>(1024, trained));
    q->windows = f.windows;
    q->baseline = f.baseline;
    if (q->baseline != "f16" && q->baseline != "f32")
      fail("--baseline ", q->baseline, ": use f16 or f32");
    q->text_file = text_file(given("--text"), f.text, "--text", o.model, command);
    const CommonOptions c = with_kv("--quality-kv", f.quality_kv, default_quality_kv_list());
    sections.push_back({"quality", plan_quality(c, *q, info), [q](std::vector<Json> rows) {
                          return summarize_quality(*q, std::move(rows));
                        }});
  }
  if (on("kernel")) {
    auto k = std::make_shared<KernelOptions>();
    // `bench all` runs fewer depths by default: 64K dominates a kernel run.
    if (all) k->depths = {1024, 4096, 16384, 32768};
    // In `bench all`, --depths is speed's.
    if (given("--kernel-depths"))
      k->depths = parse_token_counts(f.kernel_depths, "--kernel-depths");
    else if (!all && given("--depths"))
      k->depths = parse_token_counts(f.depths, "--depths");
    if (given("--kernel-threads"))
      k->threads = parse_ints(f.kernel_threads, "--kernel-threads", 1, 1024);
    else if (!all && given("--threads"))
      k->threads = threads;
    if (given("--head-dims")) k->head_dims = parse_ints(f.head_dims, "--head-dims", 8, 1024);
    k->kv_heads = f.kv_heads;
    k->gqa = f.gqa;
    k->warmup = f.warmup >= 0 ? f.warmup : 3;
    k->steps = f.steps >= 0 ? f.steps : 9;
    k->fill_ubatch = f.fill_ubatch;
    const CommonOptions c = with_kv("--kernel-kv", f.kernel_kv, default_kernel_kv_list());
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
      "  serve         a live server under N concurrent streaming clients: tok/s, TTFT, ITL\n"
      "  recall        planted facts at controlled depths, exact-match answers; multi-turn window\n"
      "  quality       perplexity and KL divergence vs an f16 cache through the real cache path\n"
      "  kernel        decode attention alone (one layer, synthetic K/V/Q) by codec and depth\n"
      "  agree         teacher-forced greedy agreement with llama.cpp (llama-server) on a file\n"
      "  compare       prefill and decode tok/s side by side with llama.cpp (llama-bench),\n"
      "                interleaved pairs, medians and spreads of the ratio\n"
      "  all           memory, speed, recall, quality and kernel on a model (not batch\n"
      "                or serve): report.json, report.md and PNG plots in --out\n"
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
  if (sub == "agree") return agree_main(rest);
  if (sub != "memory" && sub != "speed" && sub != "batch" && sub != "serve" && sub != "recall" &&
      sub != "quality" && sub != "kernel" && sub != "all" && sub != "compare")
    fail("bench: unknown subcommand '", sub,
         "' (memory, speed, batch, serve, recall, quality, kernel, agree, compare, all)");
  if (cell_argv.empty()) cell_argv = {self_executable(), "bench", "cell"};
  if (sub == "compare") return compare_main(rest, cell_argv);
  return run_bench(sub, rest, cell_argv);
}

}  // namespace tkv::bench
