// `turbokv serve`: an OpenAI-compatible HTTP server (src/server). Many
// conversations decode together on one model and one compressed page pool;
// finished ones stay as a prefix cache (in RAM, and with --cache-dir on
// disk, across restarts).
//
// SIGTERM or SIGINT drains: new requests get 503, running ones finish within
// the grace period (or are cancelled), cached prefixes are written to
// --cache-dir, and the process exits 0. A second signal exits at once.
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cli/common_flags.h"
#include "command_registry.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "model/model.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "tensor/kernel_config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tkv::cli {
namespace {

constexpr const char* kDefaultBudget = "1G";

struct ServeFlags {
  ModelFlags model;
  ThreadFlags threads;
  ContextFlags context;
  KvFlags kv;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key, api_key_file;
  int parallel = server::SchedulerOptions{}.parallel;
  int queue = server::SchedulerOptions{}.queue_capacity;
  std::string cache_dir, cache_dir_max;
  std::string prefix_reuse = "exact";
  std::string chat_template;
  std::string max_body = "8M";
  std::string cors;
  int timeout = server::HttpOptions{}.read_timeout_seconds;
  int drain_grace = 10;
  int prefill_step = server::SchedulerOptions{}.prefill_tokens_per_step;
  int prefill_whole = server::SchedulerOptions{}.whole_prompt_tokens;
};

// The API key: --api-key, or the first line of --api-key-file (which keeps
// it out of the process list).
std::string api_key(const ServeFlags& f) {
  if (f.api_key_file.empty()) return f.api_key;
  if (!f.api_key.empty()) fail("serve: give --api-key or --api-key-file, not both");
  std::ifstream in(f.api_key_file);
  std::string key;
  if (!in || !std::getline(in, key)) fail("--api-key-file: cannot read ", f.api_key_file);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) fail("--api-key-file: ", f.api_key_file, " holds no key on its first line");
  return key;
}

uint64_t size_flag(const std::string& flag, const std::string& text) {
  try {
    return parse_bytes(text);
  } catch (const Error& e) {
    fail(flag, ": ", e.what());
  }
}

// The name /v1/models lists: the file name without .gguf.
std::string model_id(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0)
    name.resize(name.size() - 5);
  return name;
}

int64_t modification_time(const std::string& path) {
  struct stat st = {};
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_mtime) : int64_t(std::time(nullptr));
}

// Waits for SIGINT or SIGTERM (blocked in every thread, see serve_main), or
// for `stop` to be raised by the thread that serves HTTP; returns the signal
// or 0.
int wait_for_signal(const sigset_t& signals, const std::atomic<bool>& stop) {
  const timespec poll = {0, 200 * 1000 * 1000};
  while (!stop.load()) {
    const int sig = sigtimedwait(&signals, nullptr, &poll);
    if (sig > 0) return sig;
  }
  return 0;
}

// --help's paragraph (`defaults`: the scheduler's).
std::string serve_description(const server::SchedulerOptions& defaults) {
  return "An OpenAI-compatible server: POST /v1/chat/completions, POST /v1/completions\n"
         "(streaming or not), GET /v1/models, GET /health, GET /metrics. Requests decode\n"
         "together (continuous batching); prompts leave cached prefixes for reuse.\n"
         "Defaults here: --kv-budget 1G (the pool of running and cached sequences),\n"
         "-ub " +
         std::to_string(defaults.prefill_chunk) +
         " (the prefill chunk). SIGTERM / Ctrl-C drains and exits 0.\n"
         "docs/SERVER.md has the details.";
}

// serve's flags, declared on `flags` into `f` (`defaults`: the scheduler's).
void declare_flags(FlagParser& flags, ServeFlags& f, const server::SchedulerOptions& defaults) {
  f.model.add_to(flags);
  flags.section("HTTP");
  flags.add_string({"--host"}, "ADDR",
                   "address to listen on (default 127.0.0.1: this machine only)", &f.host);
  flags.add_int({"--port"}, "N", "port (default 8080; 0 = any free port, printed)", &f.port, 0,
                65535);
  flags.add_string({"--api-key"}, "KEY",
                   "require 'Authorization: Bearer KEY' on every route but /health", &f.api_key);
  flags.add_string({"--api-key-file"}, "FILE", "read the key from the first line of FILE",
                   &f.api_key_file);
  flags.add_string({"--max-body"}, "SIZE", "largest request body (default 8M; larger: 413)",
                   &f.max_body);
  flags.add_string({"--cors"}, "ORIGIN[,ORIGIN]",
                   "answer browsers' cross-origin requests from these origins ('*': any,\n"
                   "without credentials; default: off)",
                   &f.cors);
  flags.add_int({"--timeout"}, "S",
                "drop a client that sends or reads nothing for S seconds, or whose request headers "
                "take longer (default 30; a body: S s plus 1 s per 64 KiB)",
                &f.timeout, 1, 3600);
  flags.section("serving");
  flags.add_int({"-np", "--parallel"}, "N",
                "sequences decoding at once (default 4); -c is each one's context", &f.parallel, 1,
                1024);
  flags.add_int({"--queue"}, "N", "requests waiting beyond --parallel (default 64; full: 503)",
                &f.queue, 1, 1 << 20);
  flags.add_string({"--prefix-reuse"}, "exact|any",
                   "exact: reuse cached prefixes at -ub boundaries, the bits of a cold\n"
                   "prefill (default); any: also at a prompt's end and into a finished\n"
                   "reply, as llama-server does (its last bits may differ from a cold run's)",
                   &f.prefix_reuse);
  flags.add_string({"--cache-dir"}, "DIR",
                   "keep cached prefixes in DIR as session files, across restarts", &f.cache_dir);
  flags.add_string({"--cache-dir-max"}, "SIZE",
                   "bound of --cache-dir; the oldest files go first (default none)",
                   &f.cache_dir_max);
  flags.add_string({"--chat-template"}, "NAME|FILE",
                   "override the model's chat template: a built-in (chatml, llama3, phi3,\n"
                   "gemma, mistral-v7, llama2) or a Jinja file (default: the model's own)",
                   &f.chat_template);
  flags.add_int({"--drain-grace"}, "S",
                "on SIGTERM, let running requests finish for S seconds (default 10)",
                &f.drain_grace, 0, 3600);
  flags.add_int({"--prefill-step"}, "N",
                "prefill work per step while other sequences decode, in tokens through\n"
                "every layer; a larger chunk runs a few layers a step (default " +
                    std::to_string(defaults.prefill_tokens_per_step) +
                    "; more: faster\n"
                    "prefill, slower streams; 0: one -ub chunk a step, whole)",
                &f.prefill_step, 0, 1 << 20);
  flags.add_int({"--prefill-whole"}, "N",
                "prompts of at most N tokens are prefilled as one chunk (the prefill\n"
                "GEMM), longer ones on the -ub grid (default " +
                    std::to_string(defaults.whole_prompt_tokens) + "; 0: every prompt on the grid)",
                &f.prefill_whole, 0, 1 << 20);
  flags.section("compute");
  f.threads.add_to(flags);
  f.context.add_to(flags);
  f.kv.add_to(flags);
  // The shared flags' help states their defaults elsewhere; serve's differ.
  flags.set_help("-ub", "tokens per prefill chunk, the prefill grid (default " +
                            std::to_string(defaults.prefill_chunk) + ")");
  flags.set_help("--kv-budget",
                 "byte budget of the page pool: running and cached sequences (default 1G)");
}

// Everything the flags alone decide, before the model is mapped.
struct ServePlan {
  kv::KvConfig kv;
  server::HttpOptions http;
  server::SchedulerOptions sched;
  std::optional<tok::ChatTemplate> forced_template;
};

ServePlan plan_of(const ServeFlags& f) {
  ServePlan plan;
  kv::KvConfig& kv_config = plan.kv;
  kv_config = f.kv.config();
  const std::string key = api_key(f);
  server::HttpOptions& http = plan.http;
  http.host = f.host;
  http.port = f.port;
  http.api_key = key;
  http.max_body_bytes = size_flag("--max-body", f.max_body);
  if (http.max_body_bytes == 0) fail("--max-body: must be larger than 0");
  http.read_timeout_seconds = http.write_timeout_seconds = f.timeout;
  if (!f.cors.empty()) http.cors = server::CorsPolicy::parse(f.cors);
  server::SchedulerOptions& sched = plan.sched;
  sched.parallel = f.parallel;
  sched.queue_capacity = f.queue;
  sched.budget_bytes = kv_config.budget_bytes;
  sched.spill_dir = kv_config.spill_dir;
  kv_config.budget_bytes = 0;  // the scheduler's pool has the budget and the disk tier
  kv_config.spill_dir.clear();
  sched.cache_dir = f.cache_dir;
  if (f.prefix_reuse != "exact" && f.prefix_reuse != "any")
    fail("--prefix-reuse: expected exact or any, got '", f.prefix_reuse, "'");
  sched.exact_reuse = f.prefix_reuse == "exact";
  if (!f.cache_dir_max.empty()) {
    if (f.cache_dir.empty()) fail("--cache-dir-max: needs --cache-dir");
    sched.cache_dir_max_bytes = size_flag("--cache-dir-max", f.cache_dir_max);
  }
  sched.prefill_chunk = f.context.ubatch;
  sched.prefill_tokens_per_step = f.prefill_step;
  sched.whole_prompt_tokens = f.prefill_whole;
  if (!f.chat_template.empty())
    plan.forced_template = tok::ChatTemplate::from_option(f.chat_template);

  return plan;
}

// Serves until SIGINT / SIGTERM (then drains: running requests get `f.drain_grace`
// seconds) or until the HTTP server stops by itself; the exit status.
int serve_until_signal(server::HttpServer& server, server::Scheduler& scheduler,
                       const sigset_t& signals, const ServeFlags& f) {
  std::atomic<bool> serve_ended{false};
  std::thread http_thread([&] {
    server.serve();
    serve_ended.store(true);
  });
  const int sig = wait_for_signal(signals, serve_ended);
  if (sig != 0) {
    std::fprintf(stderr, "turbokv serve: %s: draining (up to %d s)\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", f.drain_grace);
    // A second signal: leave now, without waiting for anything. One that
    // comes within a second is the same request (`timeout` and some process
    // managers signal both the process and its group).
    std::thread([signals] {
      const auto first = std::chrono::steady_clock::now();
      int again = 0;
      while (sigwait(&signals, &again) == 0)
        if (std::chrono::steady_clock::now() - first > std::chrono::seconds(1)) break;
      std::fprintf(stderr, "turbokv serve: second signal: exiting now\n");
      std::_Exit(1);
    }).detach();
  } else
    std::fprintf(stderr, "turbokv serve: the HTTP server stopped unexpectedly\n");
  server.stop_admitting();
  scheduler.drain(std::chrono::seconds(f.drain_grace));
  // The drained jobs' last events are out of the scheduler; let the
  // responses carrying them finish writing.
  if (!server.wait_idle(std::chrono::seconds(f.timeout)))
    std::fprintf(stderr, "turbokv serve: some responses did not finish; closing them\n");
  server.stop();
  // serve() returns once every connection is closed, and an idle keep-alive
  // connection is only closed after its timeout: do not wait for those.
  // Nothing is left to write (the drain wrote the cached prefixes).
  for (int i = 0; i < 50 && !serve_ended.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::fprintf(stderr, "turbokv serve: stopped\n");
  if (!serve_ended.load()) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(sig != 0 ? 0 : 1);
  }
  http_thread.join();
  return sig != 0 ? 0 : 1;
}

// --chat-template's template, else the model's; neither: chat requests
// are refused, which is said at start-up.
std::optional<tok::ChatTemplate> served_template(const ServePlan& plan,
                                                 const tok::Tokenizer& tokenizer) {
  std::optional<tok::ChatTemplate> t =
      plan.forced_template ? plan.forced_template : tok::ChatTemplate::of_model(tokenizer);
  if (plan.forced_template) t->bind(tokenizer);
  if (!t)
    std::fprintf(stderr,
                 "turbokv: warning: the model has no chat template (tokenizer.chat_template): chat "
                 "requests are refused; pass --chat-template NAME|FILE to serve them\n");
  return t;
}

int serve_main(std::span<const std::string> args) {
#if defined(__GLIBC__)
  // Request bodies and their parsed JSON come and go in megabytes on every
  // HTTP thread: with a fixed threshold, blocks of 128 KiB or more are
  // mapped and unmapped on their own instead of staying in each thread's
  // heap (glibc raises its threshold past every large block freed, and the
  // memory of a burst of large requests then stayed with the process;
  // docs/SERVER.md, results/serve-soak.md).
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
#endif
  ServeFlags f;
  f.kv.budget = kDefaultBudget;
  // -ub is the prefill grid: small by default (the decode path's kernels, in
  // the decode tokens' weight pass), so that a long prompt arriving slows
  // the other streams' steps only a little.
  const server::SchedulerOptions defaults;
  f.context.ubatch = defaults.prefill_chunk;
  FlagParser flags("serve", "turbokv serve -m MODEL [--host H] [--port P] [--api-key KEY] [flags]",
                   serve_description(defaults));
  declare_flags(flags, f, defaults);
  if (!flags.parse(args)) return 0;

  ServePlan plan = plan_of(f);
  kv::KvConfig& kv_config = plan.kv;
  server::SchedulerOptions& sched = plan.sched;

  // Reading the weights (or, mapped, faulting them in: otherwise the first
  // request would take the faults page by page) may read gigabytes from
  // disk where the file is not cached: said first.
  std::fprintf(stderr, "turbokv serve: loading %s ...\n", f.model.path.c_str());
  const auto loading = std::chrono::steady_clock::now();
  // Sequences decode in batches: F16 row blocks pay off for them on every
  // CPU measured, where one sequence alone may not (kernel_config.h).
  if (sched.parallel > 1) set_kernel_decodes_batches(true);
  const auto model = f.model.load("serve");
  model->fault_in_weights();
  std::fprintf(stderr, "turbokv serve: weights (%s) %s, in %.1f s\n",
               format_bytes(model->weight_bytes()).c_str(), model->describe_weights().c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - loading).count());
  if (const std::string note = f.kv.adapt_to(*model, kv_config); !note.empty())
    std::fprintf(stderr, "%s\n", note.c_str());
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(model->gguf());
  server::ServedModel served;
  served.id = model_id(f.model.path);
  served.created = modification_time(f.model.path);
  served.tokenizer = &tokenizer;
  served.chat_template = served_template(plan, tokenizer);
  served.context = f.context.context_for(*model);
  served.windowed = kv_config.window > 0;
  sched.context = int(served.context);
  sched.kv = kv_config;
  sched.threads = f.threads.count();
  if (const uint64_t least = server::Scheduler::smallest_budget(*model, sched);
      sched.budget_bytes > 0 && sched.budget_bytes < least)
    fail("--kv-budget ", format_bytes(sched.budget_bytes), " cannot hold one sequence: its ",
         "sinks, residual ring and state and one prefill chunk of ",
         std::min(sched.context, sched.prefill_chunk), " tokens need ", format_bytes(least),
         "; give at least that");

  // SIGINT and SIGTERM are taken by sigtimedwait in this thread only: block
  // them before any thread starts (threads inherit the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  server::ServerMetrics metrics;
  server::Scheduler scheduler(*model, tokenizer, sched);
  server::HttpServer server(served, scheduler, metrics, plan.http);
  const int port = server.bind();
  std::printf(
      "turbokv serve: listening on http://%s:%d (model %s, template %s, context %lld, "
      "parallel %d, kv %s, budget %s%s%s)\n",
      f.host.c_str(), port, served.id.c_str(),
      served.chat_template ? served.chat_template->name().c_str() : "none",
      static_cast<long long>(served.context), sched.parallel, kv_config.describe().c_str(),
      sched.budget_bytes ? format_bytes(sched.budget_bytes).c_str() : "none",
      sched.cache_dir.empty() ? "" : ", cache dir ", sched.cache_dir.c_str());
  std::fflush(stdout);

  return serve_until_signal(server, scheduler, signals, f);
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(serve, "an OpenAI-compatible HTTP server (continuous batching, prefix cache)",
                     tkv::cli::serve_main);
