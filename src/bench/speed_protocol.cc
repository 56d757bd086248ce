#include "bench/speed_protocol.h"

#include <algorithm>
#include <set>

#include "bench/cell_env.h"
#include "bench/kernel_protocol.h"
#include "bench/kv_configs.h"
#include "bench/kv_reads.h"
#include "bench/process_memory.h"
#include "bench/protocols.h"
#include "bench/stats.h"
#include "bench/table.h"
#include "bench/units.h"
#include "common/error.h"
#include "common/timer.h"

namespace tkv::bench {

namespace {

// How the cache got to the current checkpoint: the model's prefill (timed
// as time to first token) or, with --fill synthetic, KvCache::fill_synthetic.
struct FillProgress {
  double prefill_seconds = 0, fill_seconds = 0;
  int64_t prefilled = 0;
};

// Brings the cache to `point` tokens (at least one: depth 0 still needs a
// token, BOS, to have logits to decode from); `logits` are the last
// token's.
void fill_to(int64_t point, bool synthetic, const CellModel& m, kv::KvCache& cache,
             const std::vector<int32_t>& prompt, std::vector<float>& logits, FillProgress& f) {
  const model::Model& model = *m.model;
  const int64_t target = std::max<int64_t>(point, 1);
  const int64_t need = target - cache.n_tokens();
  if (need > 0 && synthetic) {
    // All but the last token synthetic; the last through the model, for
    // logits to decode from.
    Stopwatch clock;
    if (need > 1) cache.fill_synthetic(need - 1, uint64_t(point) + 1, m.pool.get());
    logits = model.eval_last(cache, std::span<const int32_t>(prompt.data() + cache.n_tokens(), 1),
                             *m.pool, 1);
    f.fill_seconds += clock.seconds();
  } else if (need > 0) {
    const std::span<const int32_t> chunk(prompt.data() + cache.n_tokens(), size_t(need));
    Stopwatch clock;
    logits = model.eval_last(cache, chunk, *m.pool, m.ubatch);
    f.prefill_seconds += clock.seconds();
    f.prefilled += need;
  }
}

// The decode figures at the cache's current depth (checkpoint `point`):
// `warmup` untimed and `steps` timed greedy steps, then as many attention
// steps alone.
Json decode_at(int64_t point, int warmup, int steps, const CellModel& m, kv::KvCache& cache,
               std::vector<float>& logits) {
  const model::Model& model = *m.model;
  std::vector<double> ms, attention_ms;
  const int64_t depth_actual = cache.n_tokens();
  KvReadCounters before;
  // Its own greedy loop, not runtime::generate: each step's eval is timed
  // alone (the sampling and bookkeeping around it are not the figure).
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup) before = kv_read_counters(cache);
    const int32_t next = argmax(logits);
    Stopwatch clock;
    logits = model.eval_last(cache, std::span<const int32_t>(&next, 1), *m.pool, 1);
    const double t = clock.seconds() * 1e3;
    if (i >= warmup) ms.push_back(t);
  }
  const Json reads = kv_reads_per_token(cache, before, steps);
  // Attention alone at the same depth (the model does not time its parts).
  for (int i = 0; i < steps; ++i)
    attention_ms.push_back(time_attention_step(cache, *m.pool, uint64_t(point) + uint64_t(i)));
  const Summary s = summarize(ms), a = summarize(attention_ms);
  return {{"depth", point},
          {"depth_actual", depth_actual},
          {"ms_per_token", to_json(s)},
          {"tok_per_s", s.median > 0 ? 1e3 / s.median : 0.0},
          {"samples_ms", ms},
          {"attention_ms_per_token", to_json(a)},
          {"kv_read_per_token", reads},
          {"kv_page_bytes_on_disk", cache.stats().page_bytes_on_disk},
          {"peak_rss_bytes", memory_snapshot(nullptr).peak_rss}};
}

}  // namespace

Json speed_cell(const Json& req) {
  const auto ctx_points = req.at("ctx").get<std::vector<int64_t>>();
  const auto depths = req.at("depths").get<std::vector<int64_t>>();
  const int warmup = req.value("warmup", 2), steps = req.value("steps", 5);
  if (steps < 1) fail("--steps must be at least 1");
  // "synthetic": the cache reaches each checkpoint through
  // KvCache::fill_synthetic (no forward pass, no prefill figures).
  const bool synthetic = req.value("fill", std::string("prefill")) == "synthetic";

  std::set<int64_t> checkpoints(ctx_points.begin(), ctx_points.end());
  checkpoints.insert(depths.begin(), depths.end());
  const int64_t deepest = checkpoints.empty() ? 1 : std::max<int64_t>(1, *checkpoints.rbegin());
  // Each depth adds its decode steps and as many attention steps.
  const int64_t capacity = deepest + int64_t(depths.size()) * (warmup + 2 * steps) + 1;

  CellModel m = load_cell_model(req);
  const model::Model& model = *m.model;
  const CellKv kv = cell_kv(req, model);
  kv::KvCache cache(model.kv_shape(int(capacity)), kv.config);
  const std::vector<int32_t> prompt =
      synthetic_prompt(capacity, model, req.value("seed", uint64_t(2)));

  // bench compare: an untimed prefill of the first --ctx point into a cache
  // of its own first, as llama-bench warms up, so the timed one finds the
  // weights resident and the buffers allocated.
  if (req.value("prefill_warmup", false) && !synthetic && !ctx_points.empty()) {
    kv::KvCache warm(model.kv_shape(int(capacity)), kv.config);
    const size_t n = size_t(std::max<int64_t>(1, ctx_points.front()));
    model.eval_last(warm, std::span<const int32_t>(prompt.data(), n), *m.pool, m.ubatch);
  }
  Json prefill = Json::array(), decode = Json::array();
  FillProgress f;
  std::vector<float> logits;
  for (const int64_t point : checkpoints) {
    fill_to(point, synthetic, m, cache, prompt, logits, f);
    if (!synthetic && std::find(ctx_points.begin(), ctx_points.end(), point) != ctx_points.end()) {
      prefill.push_back(
          {{"ctx", point},
           {"prefilled_tokens", f.prefilled},
           {"ttft_s", f.prefill_seconds},
           {"tok_per_s", f.prefill_seconds > 0 ? f.prefilled / f.prefill_seconds : 0.0}});
    }
    if (std::find(depths.begin(), depths.end(), point) != depths.end())
      decode.push_back(decode_at(point, warmup, steps, m, cache, logits));
  }
  const kv::KvStats st = cache.stats();
  return {{"status", "ok"},
          {"model", model_facts(m)},
          {"kv_describe", cache.config().describe()},
          {"kv_ram", kv.describe()},
          {"fill", synthetic ? "synthetic" : "prefill"},
          {"fill_seconds", f.fill_seconds},
          {"kv_disk", spill_stats_json(cache.pool()->stats())},
          {"prefill", prefill},
          {"decode", decode},
          {"kv_persistent_bytes", st.persistent_bytes},
          {"kv_peak_scratch_bytes", st.peak_scratch_bytes}};
}

std::vector<PlannedCell> plan_speed(const CommonOptions& o, const SpeedOptions& s,
                                    const ModelInfo& info) {
  const std::vector<int> threads = s.threads.empty() ? std::vector<int>{o.threads} : s.threads;
  std::vector<PlannedCell> cells = copy_bandwidth_cells("speed", threads);
  int64_t deepest = 1;
  for (auto v : s.ctx) deepest = std::max(deepest, v);
  for (auto v : s.depths) deepest = std::max(deepest, v);
  for (const int t : threads)
    for (const auto& kv : o.kv) {
      PlannedCell c;
      c.label = "speed " + kv.label + " " + std::to_string(t) + "t";
      // A synthetic fill costs the decode steps (and the encoding) only.
      c.cost =
          (s.fill == "synthetic"
               ? estimate_flops(info, 0, int64_t(s.depths.size()) * (s.warmup + s.steps)) +
                     double(deepest) * info.n_layers * info.n_kv_heads * info.head_dim * 64
               : estimate_flops(info, deepest, int64_t(s.depths.size()) * (s.warmup + s.steps))) /
          t;
      c.identity = {{"kv", kv.label},
                    {"policy", policy_label(kv)},
                    {"f16_baseline", is_f16_baseline(kv)},
                    {"threads", t}};
      c.request = request_base(o, "speed");
      c.request["threads"] = t;
      c.request["kv"] = bench_kv_to_json(kv);
      c.request["ctx"] = s.ctx;
      c.request["depths"] = s.depths;
      c.request["warmup"] = s.warmup;
      c.request["steps"] = s.steps;
      c.request["fill"] = s.fill;
      cells.push_back(std::move(c));
    }
  return cells;
}

namespace {

const Json* find_f16(const std::vector<Json>& rows, const Json& row) {
  for (const auto& r : rows)
    if (r["threads"] == row["threads"] && r.value("f16_baseline", false) && result_ok(r)) return &r;
  return nullptr;
}

// What a decode step reads from RAM (the weights one token reads, as
// model::ActiveWeights counts them, plus its KV), the GB/s that makes at
// the median step, and its share of the copy bandwidth measured in the run
// at the same thread count: how close decode runs to the memory limit.
void add_bandwidth(Json& entry, const Json& row, const Json& copy) {
  if (!row.contains("model") || !row["model"].is_object()) return;
  const double weights = row["model"].value("active_weight_bytes", 0.0);
  const double kv = entry.contains("kv_read_per_token")
                        ? entry["kv_read_per_token"]["ram_bytes"].get<double>()
                        : 0.0;
  const double ms = entry["median_ms"].get<double>();
  if (weights <= 0 || ms <= 0) return;
  entry["weights_read_per_token"] = weights;
  entry["read_gb_per_s"] = (weights + kv) / (ms * 1e6);
  const std::string t = std::to_string(row["threads"].get<int>());
  if (copy.contains(t) && copy[t].get<double>() > 0)
    entry["share_of_copy_bandwidth"] = entry["read_gb_per_s"].get<double>() / copy[t].get<double>();
}

double median_at(const Json& row, int64_t depth) {
  for (const auto& d : row["decode"])
    if (d["depth"].get<int64_t>() == depth) return d["ms_per_token"]["median"].get<double>();
  return -1;
}

}  // namespace

Json summarize_speed(const SpeedOptions& s, std::vector<Json> all_rows) {
  std::vector<Json> rows;
  const Json copy = copy_bandwidth_of(all_rows, rows);
  Json prefill = Json::array(), decode = Json::array(), crossover = Json::array();
  for (const auto& row : rows) {
    if (!result_ok(row)) {
      crossover.push_back({{"kv", row["kv"]},
                           {"threads", row["threads"]},
                           {"status", row["status"]},
                           {"reason", row.value("reason", "")}});
      continue;
    }
    const Json* base = find_f16(rows, row);
    for (const auto& p : row["prefill"])
      prefill.push_back({{"kv", row["kv"]},
                         {"threads", row["threads"]},
                         {"ctx", p["ctx"]},
                         {"ttft_s", p["ttft_s"]},
                         {"tok_per_s", p["tok_per_s"]}});
    const Json& dec = row["decode"];  // depths ascending
    std::vector<bool> faster(dec.size(), false);
    for (size_t i = 0; i < dec.size(); ++i) {
      const Json& d = dec[i];
      Json entry = {{"kv", row["kv"]},
                    {"threads", row["threads"]},
                    {"depth", d["depth"]},
                    {"median_ms", d["ms_per_token"]["median"]},
                    {"min_ms", d["ms_per_token"]["min"]},
                    {"max_ms", d["ms_per_token"]["max"]},
                    {"tok_per_s", d["tok_per_s"]}};
      if (d.contains("attention_ms_per_token")) {
        entry["attention_median_ms"] = d["attention_ms_per_token"]["median"];
        entry["kv_read_per_token"] = d["kv_read_per_token"];
        entry["peak_rss_bytes"] = d["peak_rss_bytes"];
      }
      add_bandwidth(entry, row, copy);
      if (base) {
        const double b = median_at(*base, d["depth"].get<int64_t>());
        const double mine = d["ms_per_token"]["median"].get<double>();
        if (b > 0) entry["ratio_to_f16"] = mine / b;
        faster[i] = b > 0 && mine < b;
      }
      decode.push_back(std::move(entry));
    }
    // "Faster from" = the first depth from which every deeper measured depth
    // is faster than f16 too.
    Json from = "never";
    for (size_t i = dec.size(); i-- > 0 && faster[i];) from = dec[i]["depth"];
    Json c = {{"kv", row["kv"]}, {"threads", row["threads"]}, {"status", "ok"}};
    if (!base) {
      c["faster_than_f16_from_depth"] = "no f16 row";
    } else if (row.value("f16_baseline", false)) {
      c["faster_than_f16_from_depth"] = "baseline";
    } else {
      c["faster_than_f16_from_depth"] = from;
    }
    crossover.push_back(std::move(c));
  }
  return {{"options",
           {{"ctx", s.ctx},
            {"depths", s.depths},
            {"threads", s.threads},
            {"warmup", s.warmup},
            {"steps", s.steps},
            {"fill", s.fill}}},
          {"copy_bandwidth_gb_per_s", copy},
          {"rows", rows},
          {"prefill", prefill},
          {"decode", decode},
          {"crossover", crossover}};
}

std::string speed_markdown(const Json& section) {
  std::string out;
  Table p({"KV", "threads", "ctx", "time to first token (s)", "prefill tok/s"});
  for (const auto& r : section["prefill"])
    p.add({r["kv"], r["threads"], token_count_label(r["ctx"].get<int64_t>()),
           fmt_fixed(r["ttft_s"], 3), fmt_fixed(r["tok_per_s"], 1)});
  out += section["prefill"].empty() && section["options"].value("fill", "") == "synthetic"
             ? "Prefill: none (--fill synthetic).\n"
             : "Prefill:\n\n" + p.markdown();
  const Json copy = section.value("copy_bandwidth_gb_per_s", Json::object());
  for (const auto& [threads, gbps] : copy.items())
    out += "\nCopy bandwidth (STREAM-like, read + write), " + threads +
           " thread(s): " + fmt_fixed(gbps, 1) + " GB/s\n";
  Table d({"KV", "threads", "depth", "decode ms/token (median)", "min - max", "tok/s",
           "time vs f16 (lower is better)", "attention ms/token", "KV read/token: RAM + disk",
           "weights read/token", "read GB/s (share of copy bandwidth)", "peak RSS"});
  for (const auto& r : section["decode"]) {
    const bool more = r.contains("kv_read_per_token");
    const Json& rd = more ? r["kv_read_per_token"] : r;
    d.add({r["kv"], r["threads"], token_count_label(r["depth"].get<int64_t>()),
           fmt_fixed(r["median_ms"], 2),
           fmt_fixed(r["min_ms"], 2) + " - " + fmt_fixed(r["max_ms"], 2),
           fmt_fixed(r["tok_per_s"], 2),
           r.contains("ratio_to_f16") ? fmt_fixed(r["ratio_to_f16"], 3) + "x" : "",
           more ? fmt_fixed(r["attention_median_ms"], 3) : "",
           more ? fmt_bytes(Json(uint64_t(rd["ram_bytes"].get<double>()))) + " + " +
                      fmt_bytes(Json(uint64_t(rd["disk_bytes"].get<double>())))
                : "",
           r.contains("weights_read_per_token")
               ? fmt_bytes(Json(uint64_t(r["weights_read_per_token"].get<double>())))
               : "",
           r.contains("read_gb_per_s")
               ? fmt_fixed(r["read_gb_per_s"], 1) +
                     (r.contains("share_of_copy_bandwidth")
                          ? " (" + fmt_fixed(r["share_of_copy_bandwidth"].get<double>() * 100, 0) +
                                "%)"
                          : "")
               : "",
           more ? fmt_bytes(r["peak_rss_bytes"]) : ""});
  }
  out += "\nDecode (steady state):\n\n" + d.markdown();
  Table c({"KV", "threads", "decodes faster than f16 from depth"});
  for (const auto& r : section["crossover"]) {
    const Json& f = r.contains("faster_than_f16_from_depth")
                        ? r["faster_than_f16_from_depth"]
                        : Json(r["status"].get<std::string>() + ": " + r.value("reason", ""));
    c.add({r["kv"], r["threads"], f.is_number() ? token_count_label(f.get<int64_t>()) : Cell(f)});
  }
  out += "\nCrossover:\n\n" + c.markdown();
  return out;
}

}  // namespace tkv::bench
