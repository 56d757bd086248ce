#include "bench/serve_protocol.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <latch>
#include <optional>
#include <thread>

#include "bench/cell_env.h"
#include "bench/kv_configs.h"
#include "bench/protocols.h"
#include "bench/serve_client.h"
#include "bench/stats.h"
#include "bench/table.h"
#include "bench/units.h"
#include "common/error.h"
#include "common/sys_info.h"

namespace tkv::bench {

namespace {

constexpr const char* kKvUsedMetric = "turbokv_kv_cache_used_bytes";
// The KV column of the cells of --url (the server's settings are its own).
constexpr const char* kUrlLabel = "url";

// Client `client`'s prompt (synthetic_token ids): the first `shared`
// positions are the same for every client, the rest its own. `cell` (the
// cell's index in the run) changes all of them, so that a server that
// stays up from cell to cell (--url) never answers a cell from the prefix
// cache of an earlier one. The seed's low 16 bits are the client's (at most
// 1024 by --clients; --capacity's requests, up to 2^20, pass cell 0), the
// rest the cell's.
std::vector<int32_t> client_prompt(int64_t n, int64_t shared, int client, int n_vocab,
                                   uint64_t cell) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t seed = (cell << 16) | (i < shared ? 0 : uint64_t(client) + 1);
    ids[size_t(i)] = synthetic_token((seed << 32) ^ uint64_t(i), n_vocab);
  }
  return ids;
}

// "-" for a figure no request produced.
std::string fixed_or_dash(const Json& v, int digits) {
  return v.is_null() ? std::string("-") : fmt_fixed(v, digits);
}
std::string bytes_or_dash(const Json& v) {
  return v.is_null() ? std::string("-") : format_bytes(v.get<uint64_t>());
}

Json percentiles(const std::vector<double>& v) {
  if (v.empty()) return {{"p50", nullptr}, {"p99", nullptr}, {"n", 0}};
  return {{"p50", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)}, {"n", v.size()}};
}

}  // namespace

namespace {

// The figures of the extra client of --long-prompt: its time to first
// token, and the other streams' inter-token gaps that overlap its prefill
// (request sent .. its first token) against those that do not.
Json long_prompt_figures(const StreamTiming& lp, int64_t tokens,
                         const std::vector<StreamTiming>& others) {
  Json out = {{"tokens", tokens}, {"ok", lp.ok}, {"error", lp.error}};
  if (!lp.ok || lp.text_at_ms.empty()) {
    out["ttft_ms"] = nullptr;
    return out;
  }
  const double from = lp.sent_ms, to = lp.text_at_ms.front();
  std::vector<double> during, outside;
  bool streaming_through = false;
  for (const auto& s : others) {
    if (!s.ok) continue;
    if (!s.text_at_ms.empty() && s.text_at_ms.back() >= to) streaming_through = true;
    for (size_t i = 1; i < s.text_at_ms.size(); ++i) {
      const double a = s.text_at_ms[i - 1], b = s.text_at_ms[i];
      (b > from && a < to ? during : outside).push_back(b - a);
    }
  }
  out["ttft_ms"] = to - from;
  out["others_itl_ms"] = percentiles(during);
  out["others_itl_outside_ms"] = percentiles(outside);
  // Every other stream still had tokens to come when the long prompt's
  // first token came: its whole prefill was measured against them.
  out["others_streaming_through"] = streaming_through;
  // The slowdown: the worst gaps during the prefill against the others'
  // typical gap when nothing prefills.
  out["itl_p99_during_over_p50"] =
      during.empty() || outside.empty() || percentile(outside, 0.5) <= 0
          ? Json(nullptr)
          : Json(percentile(during, 0.99) / percentile(outside, 0.5));
  return out;
}

// Decode-phase throughput: the tokens after each stream's first, over the
// span from the first stream's first token to the last stream's last one
// (the prefills of the first wave are not in it); null when no stream gave
// two tokens.
Json decode_tok_per_s(const std::vector<StreamTiming>& streams) {
  double first = -1, last = -1;
  int64_t tokens = 0;
  for (const auto& s : streams) {
    if (!s.ok || s.text_at_ms.empty()) continue;
    first = first < 0 ? s.text_at_ms.front() : std::min(first, s.text_at_ms.front());
    last = std::max(last, s.text_at_ms.back());
    tokens += std::max<int64_t>(s.completion_tokens - 1, 0);
  }
  if (tokens == 0 || last <= first) return nullptr;
  return double(tokens) / ((last - first) / 1e3);
}

}  // namespace

namespace {

constexpr const char* kRamEntriesMetric = "turbokv_prefix_cache_entries{tier=\"ram\"}";
constexpr const char* kEvictionsMetric = "turbokv_prefix_cache_evictions_total";

// The capacity count of one KV item (see serve_protocol.h).
Json capacity_cell(const Json& req, std::vector<std::string> argv) {
  const int64_t prompt_tokens = req.at("prompt_tokens").get<int64_t>();
  const int max_requests = req.at("capacity_max").get<int>();
  const int n_vocab = req.at("n_vocab").get<int>();
  ServerProcess server(argv, 120);
  const ServerAddress at = server.address();
  const auto start = std::chrono::steady_clock::now();
  int sent = 0, peak = 0;
  double kv_peak = -1;
  bool evicted = false;
  std::string error;
  Json held = Json::array();  // prefixes in RAM after each request
  while (sent < max_requests && !evicted) {
    const Json body = {
        {"model", "bench"}, {"prompt", client_prompt(prompt_tokens, 0, sent, n_vocab, 0)},
        {"max_tokens", 1},  {"temperature", 0},
        {"stream", true},   {"stream_options", {{"include_usage", true}}}};
    const StreamTiming t = stream_completion(at, body, 600, start);
    ++sent;
    if (!t.ok) {
      error = t.error;
      break;
    }
    const double entries = fetch_metric(at, kRamEntriesMetric);
    const double evictions = fetch_metric(at, kEvictionsMetric);
    if (entries < 0 || evictions < 0) {
      error = "the server's /metrics has no prefix cache figures";
      break;
    }
    kv_peak = std::max(kv_peak, fetch_metric(at, kKvUsedMetric));
    held.push_back(int(entries));
    peak = std::max(peak, int(entries));
    evicted = evictions > 0;
  }
  const double wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      1e3;
  const uint64_t peak_rss = server.peak_rss_bytes();
  const int exit_status = server.stop();
  return {{"status", "ok"},
          {"capacity", true},
          {"prompt_tokens", prompt_tokens},
          {"requests_sent", sent},
          {"evicted", evicted},
          {"error", error},
          {"peak_prefixes_held", peak},
          {"held_after_each", held},
          {"kv_used_peak_bytes", kv_peak < 0 ? Json(nullptr) : Json(uint64_t(kv_peak))},
          {"wall_seconds", wall},
          {"server_peak_rss_bytes", peak_rss},
          {"server_command", argv},
          {"server_exit_status", exit_status}};
}

// The load one serve cell puts on the server (see serve_protocol.h).
struct ServeLoad {
  int clients = 0;
  int64_t prompt_tokens = 0, gen_tokens = 0, shared = 0, long_prompt = 0;
  uint64_t cell = 0;
  int n_vocab = 0;
};

// What the clients of one serve cell saw.
struct StreamRun {
  std::vector<StreamTiming> streams;  // one per client
  StreamTiming long_stream;           // --long-prompt's client (unset without it)
  double wall = 0;                    // seconds from the start line to the last stream's end
  double kv_peak = -1;                // the pool's peak bytes while they ran; -1: no /metrics
};

// The command line of the turbokv serve a cell starts: as many sequences
// (and queue places) as the cell has clients, `slots`.
std::vector<std::string> server_argv(const Json& req, const BenchKv& kv, int slots,
                                     const std::string& budget) {
  std::vector<std::string> argv = {req.at("server_exe").get<std::string>(),
                                   "serve",
                                   "-m",
                                   req.at("model").get<std::string>(),
                                   "--port",
                                   "0",
                                   "-t",
                                   std::to_string(req.at("threads").get<int>()),
                                   "--parallel",
                                   std::to_string(slots),
                                   "--queue",
                                   std::to_string(slots),
                                   "--kv",
                                   kv.label};
  for (const auto& a : req.value("server_flags", std::vector<std::string>{})) argv.push_back(a);
  if (!budget.empty()) argv.insert(argv.end(), {"--kv-budget", budget});
  return argv;
}

// A streamed /v1/completions request of `prompt` (greedy, with the usage
// chunk that gives the completion's token count).
Json stream_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  return Json{{"model", "bench"},         {"prompt", std::move(prompt)},
              {"max_tokens", max_tokens}, {"temperature", 0},
              {"stream", true},           {"stream_options", {{"include_usage", true}}}};
}

// Runs the clients (and --long-prompt's) against the server at `at`, all
// sent from one start line, while a poller samples the pool's bytes.
StreamRun run_streams(const ServerAddress& at, const ServeLoad& load) {
  const int clients = load.clients;
  const double timeout = 600;
  StreamRun run;
  run.streams.resize(static_cast<size_t>(clients));
  // The clients wait for one another blocked, not spinning: under chrt
  // (SCHED_FIFO) spinning threads hold the CPUs the others need to send,
  // and a request sent after the server's first step started waits that
  // whole step.
  std::latch start_line(clients + 1);
  std::atomic<int> streaming{0};
  std::atomic<bool> finished{false};
  // The pool's bytes while the streams run (cached prefixes included).
  std::thread poller([&] {
    while (!finished.load()) {
      run.kv_peak = std::max(run.kv_peak, fetch_metric(at, kKvUsedMetric));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      const Json body =
          stream_request(client_prompt(load.prompt_tokens, load.shared, c, load.n_vocab, load.cell),
                         load.gen_tokens);
      start_line.arrive_and_wait();
      bool counted = false;
      run.streams[size_t(c)] = stream_completion(at, body, timeout, start, [&] {
        counted = true;
        ++streaming;
      });
      if (!counted) ++streaming;  // failed or gave no text: not waited for
    });
  // The long prompt goes once every other stream has its first token (a
  // prompt of its own: nothing cached helps it).
  if (load.long_prompt > 0)
    threads.emplace_back([&] {
      const Json body =
          stream_request(client_prompt(load.long_prompt, 0, clients, load.n_vocab, load.cell), 4);
      while (streaming.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      run.long_stream = stream_completion(at, body, timeout, start);
    });
  start_line.arrive_and_wait();
  for (auto& t : threads) t.join();
  run.wall =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
      1e3;
  finished.store(true);
  poller.join();
  return run;
}

// The streams' figures of a serve row: tokens generated, successes, the
// TTFT and ITL samples of the successful streams, the first errors and one
// entry per stream.
struct StreamSummary {
  std::vector<double> ttft, itl;
  int64_t generated = 0;
  int ok = 0;
  Json errors = Json::array(), per_stream = Json::array();
};

StreamSummary summarize_streams(const std::vector<StreamTiming>& streams) {
  StreamSummary sum;
  for (const auto& s : streams) {
    sum.generated += s.completion_tokens;
    if (s.ok) {
      ++sum.ok;
      sum.ttft.push_back(s.ttft_ms);
      sum.itl.insert(sum.itl.end(), s.itl_ms.begin(), s.itl_ms.end());
    } else if (sum.errors.size() < 8) {
      sum.errors.push_back(s.error);
    }
    sum.per_stream.push_back({{"ok", s.ok},
                              {"http_status", s.http_status},
                              {"ttft_ms", s.ttft_ms},
                              {"completion_tokens", s.completion_tokens},
                              {"seconds", s.seconds},
                              {"itl_ms", s.itl_ms}});
  }
  return sum;
}

}  // namespace

Json serve_cell(const Json& req) {
  const std::string url = req.value("url", std::string());
  ServeLoad load;
  load.clients = req.at("clients").get<int>();
  load.prompt_tokens = req.at("prompt_tokens").get<int64_t>();
  load.gen_tokens = req.at("gen_tokens").get<int64_t>();
  load.shared = req.value("shared_prefix", int64_t(0));
  load.long_prompt = req.value("long_prompt", int64_t(0));
  load.cell = req.value("cell", uint64_t(0));
  load.n_vocab = req.at("n_vocab").get<int>();
  const std::string budget = req.value("kv_budget", std::string());
  const int clients = load.clients;
  // The long prompt's request takes one more sequence.
  const int slots = clients + (load.long_prompt > 0 ? 1 : 0);

  std::optional<ServerProcess> server;
  ServerAddress at;
  std::vector<std::string> argv;
  std::string kv_describe = "external server";
  if (url.empty()) {
    const BenchKv kv = bench_kv_from_json(req.at("kv"));
    kv_describe = kv.config.describe();
    argv = server_argv(req, kv, slots, budget);
    if (req.value("capacity_max", 0) > 0) return capacity_cell(req, argv);
    server.emplace(argv, 120);
    at = server->address();
  } else {
    at = parse_server_url(url);
    if (!server_healthy(at, 10)) fail("bench serve: ", url, " does not answer GET /health");
  }

  const StreamRun run = run_streams(at, load);
  const double kv_end = fetch_metric(at, kKvUsedMetric);
  // -1: /metrics could not be read.
  auto bytes = [](double b) { return b < 0 ? Json(nullptr) : Json(uint64_t(b)); };
  const Json peak_rss = server ? Json(server->peak_rss_bytes()) : Json(nullptr);
  const Json exit_status = server ? Json(server->stop()) : Json(nullptr);

  const StreamSummary sum = summarize_streams(run.streams);
  const double wall = run.wall;
  Json row = {
      {"status", "ok"},
      {"kv_describe", kv_describe},
      {"clients", clients},
      {"requests_ok", sum.ok},
      {"requests_failed", clients - sum.ok},
      {"all_succeeded", sum.ok == clients},
      {"errors", sum.errors},
      {"generated_tokens", sum.generated},
      {"wall_seconds", wall},
      {"tok_per_s", wall > 0 ? double(sum.generated) / wall : 0.0},
      {"decode_tok_per_s", decode_tok_per_s(run.streams)},
      {"ttft_ms", percentiles(sum.ttft)},
      {"itl_ms", percentiles(sum.itl)},
      {"server_peak_rss_bytes", peak_rss},
      {"kv_used_peak_bytes", bytes(std::max(run.kv_peak, kv_end))},
      {"kv_used_end_bytes", bytes(kv_end)},
      {"server_command", argv},
      {"server_exit_status", exit_status},
      {"streams", sum.per_stream},
      {"long_prompt", load.long_prompt > 0
                          ? long_prompt_figures(run.long_stream, load.long_prompt, run.streams)
                          : Json(nullptr)}};
  if (!url.empty()) row["url"] = url;
  return row;
}

std::vector<PlannedCell> plan_serve(const CommonOptions& o, const ServeOptions& s,
                                    const ModelInfo& info) {
  std::vector<PlannedCell> cells;
  auto add = [&](const std::string& kv_label, const BenchKv* kv, int n) {
    PlannedCell c;
    c.label = "serve " + kv_label + " clients " + std::to_string(n);
    c.cost = (n * estimate_flops(info, s.prompt_tokens, s.gen_tokens) +
              (s.long_prompt > 0 ? estimate_flops(info, s.long_prompt, 4) : 0.0)) /
             o.threads;
    c.identity = {{"kv", kv_label}, {"clients", n}, {"threads", o.threads}};
    c.request = request_base(o, "serve");
    if (kv) {
      c.identity["policy"] = policy_label(kv->config);
      c.request["kv"] = bench_kv_to_json(*kv);
    }
    c.request["clients"] = n;
    c.request["prompt_tokens"] = s.prompt_tokens;
    c.request["gen_tokens"] = s.gen_tokens;
    c.request["shared_prefix"] = s.shared_prefix;
    c.request["long_prompt"] = s.long_prompt;
    c.request["kv_budget"] = s.kv_budget;
    c.request["server_flags"] = s.server_flags;
    c.request["server_exe"] = s.server_exe;
    c.request["url"] = s.url;
    c.request["capacity_max"] = s.capacity_max;
    c.request["n_vocab"] = info.n_vocab;
    c.request["cell"] = cells.size();
    cells.push_back(std::move(c));
  };
  // --capacity: one cell per KV item (one request at a time).
  if (s.capacity_max > 0)
    for (const auto& kv : o.kv) add(kv.label, &kv, 1);
  // --url: one server, whatever its KV settings; a cell per client count.
  else if (!s.url.empty())
    for (const int n : s.clients) add(kUrlLabel, nullptr, n);
  else
    for (const auto& kv : o.kv)
      for (const int n : s.clients) add(kv.label, &kv, n);
  return cells;
}

Json summarize_serve(const ServeOptions& s, std::vector<Json> rows) {
  Json table = Json::array(), capacity = Json::array();
  std::vector<std::string> order;
  for (const auto& row : rows) {
    const std::string kv = row.value("kv", std::string());
    if (std::find(order.begin(), order.end(), kv) == order.end()) order.push_back(kv);
    if (!result_ok(row)) continue;
    if (row.value("capacity", false)) {
      capacity.push_back({{"kv", kv},
                          {"prompt_tokens", row["prompt_tokens"]},
                          {"peak_prefixes_held", row["peak_prefixes_held"]},
                          {"evicted", row["evicted"]},
                          {"requests_sent", row["requests_sent"]},
                          {"kv_used_peak_bytes", row["kv_used_peak_bytes"]},
                          {"error", row["error"]}});
      continue;
    }
    table.push_back({{"kv", kv},
                     {"clients", row["clients"]},
                     {"threads", row["threads"]},
                     {"requests_ok", row["requests_ok"]},
                     {"requests_failed", row["requests_failed"]},
                     {"tok_per_s", row["tok_per_s"]},
                     {"decode_tok_per_s", row.value("decode_tok_per_s", Json(nullptr))},
                     {"long_prompt", row.value("long_prompt", Json(nullptr))},
                     {"ttft_p50_ms", row["ttft_ms"]["p50"]},
                     {"ttft_p99_ms", row["ttft_ms"]["p99"]},
                     {"itl_p50_ms", row["itl_ms"]["p50"]},
                     {"itl_p99_ms", row["itl_ms"]["p99"]},
                     {"server_peak_rss_bytes", row["server_peak_rss_bytes"]},
                     {"kv_used_peak_bytes", row["kv_used_peak_bytes"]}});
  }
  // The largest N whose requests all succeeded, per configuration (null
  // when none did).
  for (const auto& kv : order) {
    if (s.capacity_max > 0) break;
    Json best = nullptr;
    for (const auto& row : rows)
      if (row.value("kv", std::string()) == kv && result_ok(row) &&
          row.value("all_succeeded", false) &&
          (best.is_null() || row["clients"].get<int>() > best.get<int>()))
        best = row["clients"];
    capacity.push_back({{"kv", kv}, {"largest_clients_all_served", best}});
  }
  return {{"options",
           {{"clients", s.clients},
            {"prompt_tokens", s.prompt_tokens},
            {"gen_tokens", s.gen_tokens},
            {"shared_prefix", s.shared_prefix},
            {"long_prompt", s.long_prompt},
            {"url", s.url.empty() ? Json(nullptr) : Json(s.url)},
            {"capacity_max", s.capacity_max},
            {"kv_budget", s.kv_budget.empty() ? Json(nullptr) : Json(s.kv_budget)}}},
          {"rows", rows},
          {"cells", table},
          {"capacity", capacity}};
}

namespace {

std::string capacity_markdown(const Json& section, const std::string& budget) {
  std::string out;
  Table t(
      {"KV", "prompt tokens", "prefixes held (peak)", "requests", "evicted", "KV bytes (peak)"});
  for (const auto& c : section["capacity"]) {
    out += "serve " + c["kv"].get<std::string>() +
           " capacity: " + std::to_string(c["peak_prefixes_held"].get<int>()) + " " +
           std::to_string(c["prompt_tokens"].get<int64_t>()) + "-token prompts held in " + budget +
           (c["evicted"].get<bool>() ? "" : " (no eviction seen: raise --capacity-max)") +
           (c["error"].get<std::string>().empty() ? ""
                                                  : "; stopped: " + c["error"].get<std::string>()) +
           "\n";
    t.add({c["kv"], c["prompt_tokens"], c["peak_prefixes_held"], c["requests_sent"],
           c["evicted"].get<bool>() ? "yes" : "no", bytes_or_dash(c["kv_used_peak_bytes"])});
  }
  for (const auto& r : section["rows"])
    if (!result_ok(r))
      out += "kv " + r.value("kv", std::string()) + ": " + r.value("status", std::string()) + ": " +
             r.value("reason", std::string()) + "\n";
  return out + "\nConversations a server holds (distinct prompts, one at a time, until a cached " +
         "prefix is evicted):\n\n" + t.markdown();
}

// The summary line of one cell, and of its long prompt when it had one.
std::string cell_lines(const Json& r) {
  std::string out;
  char line[400];
  std::snprintf(
      line, sizeof line,
      "serve %s clients %d: %.2f tok/s (decode %s tok/s), TTFT p50 %s ms p99 %s ms, "
      "ITL p50 %s ms p99 %s ms, %d/%d ok, server peak RSS %s, KV %s\n",
      r["kv"].get<std::string>().c_str(), r["clients"].get<int>(), r["tok_per_s"].get<double>(),
      fixed_or_dash(r["decode_tok_per_s"], 2).c_str(), fixed_or_dash(r["ttft_p50_ms"], 1).c_str(),
      fixed_or_dash(r["ttft_p99_ms"], 1).c_str(), fixed_or_dash(r["itl_p50_ms"], 2).c_str(),
      fixed_or_dash(r["itl_p99_ms"], 2).c_str(), r["requests_ok"].get<int>(),
      r["clients"].get<int>(), bytes_or_dash(r["server_peak_rss_bytes"]).c_str(),
      bytes_or_dash(r["kv_used_peak_bytes"]).c_str());
  out += line;
  const Json& lp = r["long_prompt"];
  if (lp.is_null()) return out;
  if (lp["ttft_ms"].is_null())
    return out + "serve " + r["kv"].get<std::string>() + " clients " +
           std::to_string(r["clients"].get<int>()) + " long prompt " +
           std::to_string(lp["tokens"].get<int64_t>()) +
           ": failed: " + lp["error"].get<std::string>() + "\n";
  std::snprintf(line, sizeof line,
                "serve %s clients %d long prompt %lld: TTFT %.1f ms; the others' ITL during "
                "its prefill p50 %s ms p99 %s ms (p99 %s x their ITL p50 outside it)%s\n",
                r["kv"].get<std::string>().c_str(), r["clients"].get<int>(),
                static_cast<long long>(lp["tokens"].get<int64_t>()), lp["ttft_ms"].get<double>(),
                fixed_or_dash(lp["others_itl_ms"]["p50"], 2).c_str(),
                fixed_or_dash(lp["others_itl_ms"]["p99"], 2).c_str(),
                fixed_or_dash(lp["itl_p99_during_over_p50"], 2).c_str(),
                lp["others_streaming_through"].get<bool>()
                    ? ""
                    : " (the others finished before it: raise --gen-tokens)");
  return out + line;
}

// The largest N each configuration served, then why a cell failed or
// which requests of an ok cell did.
std::string capacity_and_error_lines(const Json& section, const std::string& budget) {
  std::string out;
  for (const auto& c : section["capacity"])
    out += "serve " + c["kv"].get<std::string>() + ": largest N all served within " + budget +
           ": " +
           (c["largest_clients_all_served"].is_null()
                ? std::string("none")
                : std::to_string(c["largest_clients_all_served"].get<int>())) +
           "\n";
  for (const auto& r : section["rows"]) {
    if (!result_ok(r))
      out += "kv " + r.value("kv", std::string()) + ": " + r.value("status", std::string()) + ": " +
             r.value("reason", std::string()) + "\n";
    else
      for (const auto& e : r["errors"])
        out += "kv " + r["kv"].get<std::string>() + " clients " +
               std::to_string(r["clients"].get<int>()) + ": " + e.get<std::string>() + "\n";
  }
  return out;
}

// The table of the cells, under its heading.
std::string cells_table(const Json& section) {
  const Json& opt = section["options"];
  Table t({"KV", "clients", "ok", "aggregate tok/s", "decode tok/s", "TTFT p50 ms", "TTFT p99 ms",
           "ITL p50 ms", "ITL p99 ms", "server peak RSS", "KV bytes (peak)"});
  for (const auto& r : section["cells"])
    t.add({r["kv"], r["clients"],
           std::to_string(r["requests_ok"].get<int>()) + "/" +
               std::to_string(r["clients"].get<int>()),
           fmt_fixed(r["tok_per_s"], 2), fixed_or_dash(r["decode_tok_per_s"], 2),
           fixed_or_dash(r["ttft_p50_ms"], 1), fixed_or_dash(r["ttft_p99_ms"], 1),
           fixed_or_dash(r["itl_p50_ms"], 2), fixed_or_dash(r["itl_p99_ms"], 2),
           bytes_or_dash(r["server_peak_rss_bytes"]), bytes_or_dash(r["kv_used_peak_bytes"])});
  return "\nServer under concurrent clients (" +
         (opt["url"].is_null() ? std::string() : opt["url"].get<std::string>() + ", ") +
         std::to_string(opt["prompt_tokens"].get<int64_t>()) + "-token prompts, " +
         std::to_string(opt["gen_tokens"].get<int64_t>()) +
         " generated tokens each, shared prefix " +
         std::to_string(opt["shared_prefix"].get<int64_t>()) + "):\n\n" + t.markdown();
}

// The table of the long prompts, under its heading.
std::string long_prompt_table(const Json& section) {
  Table l({"KV", "clients", "long prompt", "its TTFT ms", "others' ITL p50 ms (during)",
           "others' ITL p99 ms (during)", "p99 / ITL p50"});
  for (const auto& r : section["cells"]) {
    const Json& lp = r["long_prompt"];
    if (lp.is_null()) continue;
    l.add({r["kv"], r["clients"], lp["tokens"], fixed_or_dash(lp["ttft_ms"], 1),
           fixed_or_dash(lp.value("others_itl_ms", Json::object()).value("p50", Json(nullptr)), 2),
           fixed_or_dash(lp.value("others_itl_ms", Json::object()).value("p99", Json(nullptr)), 2),
           fixed_or_dash(lp.value("itl_p99_during_over_p50", Json(nullptr)), 2)});
  }
  return "\nA long prompt arriving while the others stream (its prefill against their "
         "inter-token latency):\n\n" +
         l.markdown();
}

}  // namespace

std::string serve_markdown(const Json& section) {
  std::string out;
  bool any_long = false;
  for (const auto& r : section["cells"]) {
    out += cell_lines(r);
    any_long = any_long || !r["long_prompt"].is_null();
  }
  const Json& opt = section["options"];
  const std::string budget = opt["kv_budget"].is_null() ? "the server's default budget"
                                                        : opt["kv_budget"].get<std::string>();
  if (opt.value("capacity_max", 0) > 0) return capacity_markdown(section, budget);
  out += capacity_and_error_lines(section, budget) + cells_table(section);
  if (any_long) out += long_prompt_table(section);
  return out;
}

}  // namespace tkv::bench
