#include "bench/memory_protocol.h"

#include <algorithm>
#include <sstream>

#include "bench/cell_env.h"
#include "bench/kv_configs.h"
#include "bench/kv_reads.h"
#include "bench/process_memory.h"
#include "bench/protocols.h"
#include "bench/table.h"
#include "bench/units.h"
#include "common/timer.h"

namespace tkv::bench {

namespace {

// One measured phase of a memory cell: its time, the process memory and
// the cache's figures right after it.
struct Phase {
  double seconds = 0;
  MemorySnapshot memory;
  kv::KvStats stats;
};

struct PrefillPhase : Phase {
  uint64_t model_scratch = 0;  // the model's scratch after the prefill (the decode may grow it)
};

struct DecodePhase : Phase {
  bool peak_reset = false;  // the peak RSS counts from the decode's start
  Json reads;               // KV bytes read per decoded token
};

// Prefill, chunked; only the last token's logits are computed. Or with
// --fill synthetic, all but the last token through KvCache::fill_synthetic
// (no forward pass, no activations) and the last through the model.
PrefillPhase run_prefill(const Json& req, const CellModel& m, kv::KvCache& cache,
                         const std::vector<int32_t>& prompt, int64_t ctx, bool synthetic,
                         const void* weights, std::vector<float>& logits) {
  const model::Model& model = *m.model;
  PrefillPhase p;
  Stopwatch prefill_clock;
  if (synthetic && ctx > 1) {
    cache.fill_synthetic(ctx - 1, req.value("seed", uint64_t(1)), m.pool.get());
    logits = model.eval_last(cache, std::span<const int32_t>(&prompt.back(), 1), *m.pool, 1);
  } else {
    logits = model.eval_last(cache, prompt, *m.pool, m.ubatch);
  }
  p.seconds = prefill_clock.seconds();
  p.memory = memory_snapshot(weights);
  p.stats = cache.stats();
  p.model_scratch = model.scratch_bytes();
  return p;
}

// Decode, greedy, with the peak reset so that it is measured on its own.
// Its own loop, not runtime::generate: exactly --decode-tokens tokens go
// through the cache, each a timed single-token eval, and nothing but the
// cache and the logits is held around what is measured.
DecodePhase run_decode(const CellModel& m, kv::KvCache& cache, int decode_tokens,
                       const void* weights, std::vector<float>& logits) {
  const model::Model& model = *m.model;
  DecodePhase d;
  d.peak_reset = reset_peak_rss();
  cache.reset_peak_scratch();
  const KvReadCounters before = kv_read_counters(cache);
  Stopwatch decode_clock;
  for (int i = 0; i < decode_tokens; ++i) {
    const int32_t next = argmax(logits);
    logits = model.eval_last(cache, std::span<const int32_t>(&next, 1), *m.pool, 1);
  }
  d.seconds = decode_clock.seconds();
  d.memory = memory_snapshot(weights);
  d.stats = cache.stats();
  d.reads = kv_reads_per_token(cache, before, decode_tokens);
  return d;
}

// The row's "phases": the memory at each step and what each phase did.
Json phases_json(const MemorySnapshot& start, const MemorySnapshot& loaded, int64_t ctx,
                 const PrefillPhase& p, int decode_tokens, const DecodePhase& d) {
  return {{"start", to_json(start)},
          {"after_load", to_json(loaded)},
          {"prefill",
           {{"tokens", ctx},
            {"seconds", p.seconds},
            {"tok_per_s", p.seconds > 0 ? double(ctx) / p.seconds : 0.0},
            {"memory", to_json(p.memory)},
            {"kv_persistent_bytes", p.stats.persistent_bytes},
            {"kv_peak_scratch_bytes", p.stats.peak_scratch_bytes},
            {"model_scratch_bytes", p.model_scratch}}},
          {"decode",
           {{"tokens", decode_tokens},
            {"seconds", d.seconds},
            {"peak_reset", d.peak_reset},
            {"memory", to_json(d.memory)},
            {"kv_persistent_bytes", d.stats.persistent_bytes},
            {"kv_peak_scratch_bytes", d.stats.peak_scratch_bytes}}}};
}

}  // namespace

Json memory_cell(const Json& req) {
  const int64_t ctx = req.at("ctx").get<int64_t>();
  const int decode_tokens = req.value("decode_tokens", 4);
  const MemorySnapshot start = memory_snapshot(nullptr);

  CellModel m = load_cell_model(req);
  const model::Model& model = *m.model;
  const void* weights = model.gguf().mapping()->data();  // any byte of the model's file
  const MemorySnapshot loaded = memory_snapshot(weights);
  const CellKv kv = cell_kv(req, model);
  kv::KvCache cache(model.kv_shape(int(ctx + decode_tokens)), kv.config);
  const std::vector<int32_t> prompt = synthetic_prompt(ctx, model, req.value("seed", uint64_t(1)));

  const bool synthetic = req.value("fill", std::string("prefill")) == "synthetic";
  std::vector<float> logits;
  const PrefillPhase prefill = run_prefill(req, m, cache, prompt, ctx, synthetic, weights, logits);
  const DecodePhase decode = run_decode(m, cache, decode_tokens, weights, logits);
  const kv::KvStats& decode_stats = decode.stats;

  const uint64_t peak = std::max(prefill.memory.peak_rss, decode.memory.peak_rss);
  const uint64_t model_resident = std::max(
      {loaded.model_resident, prefill.memory.model_resident, decode.memory.model_resident});
  Json r;
  r["status"] = "ok";
  r["model"] = model_facts(m);
  r["kv_describe"] = cache.config().describe();
  r["kv_ram"] = kv.describe();
  r["tokens"] = cache.n_tokens();
  r["peak_rss_bytes"] = peak;
  r["model_file_bytes"] = model.file_bytes();
  r["model_resident_bytes"] = model_resident;
  r["peak_rss_minus_model_bytes"] = peak > model_resident ? peak - model_resident : 0;
  r["kv_persistent_bytes"] = decode_stats.persistent_bytes;
  r["kv_page_bytes"] = decode_stats.page_bytes;
  r["kv_state_bytes"] = decode_stats.state_bytes;
  r["kv_snapshot_bytes"] = decode_stats.snapshot_bytes;
  r["kv_f16_bytes"] = decode_stats.f16_bytes;
  r["kv_layer_bytes"] = decode_stats.layer_bytes;
  r["kv_pages"] = decode_stats.pages_allocated;
  r["kv_page_bytes_on_disk"] = decode_stats.page_bytes_on_disk;
  r["kv_disk"] = spill_stats_json(cache.pool()->stats());
  r["kv_read_per_token"] = decode.reads;
  r["fill"] = synthetic ? "synthetic" : "prefill";
  r["k_bytes_per_token_head"] = decode_stats.k_bytes_per_token_head;
  r["v_bytes_per_token_head"] = decode_stats.v_bytes_per_token_head;
  r["kv_peak_scratch_bytes"] =
      std::max(prefill.stats.peak_scratch_bytes, decode_stats.peak_scratch_bytes);
  r["model_scratch_bytes"] = std::max(prefill.model_scratch, model.scratch_bytes());
  r["peak_scratch_bytes"] =
      r["kv_peak_scratch_bytes"].get<uint64_t>() + r["model_scratch_bytes"].get<uint64_t>();
  r["phases"] = phases_json(start, loaded, ctx, prefill, decode_tokens, decode);
  return r;
}

std::vector<PlannedCell> plan_memory(const CommonOptions& o, const MemoryOptions& m,
                                     const ModelInfo& info) {
  std::vector<PlannedCell> cells;
  for (const int64_t ctx : m.ctx)
    for (const auto& kv : o.kv) {
      PlannedCell c;
      c.label = "memory " + kv.label + " ctx " + token_count_label(ctx);
      c.cost = estimate_flops(info, ctx, m.decode_tokens);
      c.identity = {{"kv", kv.label},
                    {"policy", policy_label(kv)},
                    {"f16_baseline", is_f16_baseline(kv)},
                    {"ctx", ctx}};
      c.request = request_base(o, "memory");
      c.request["kv"] = bench_kv_to_json(kv);
      c.request["ctx"] = ctx;
      c.request["decode_tokens"] = m.decode_tokens;
      c.request["fill"] = m.fill;
      cells.push_back(std::move(c));
    }
  return cells;
}

Json summarize_memory(const MemoryOptions& m, std::vector<Json> rows) {
  Json headline = Json::array();
  for (const auto& row : rows) {
    Json h = {{"kv", row["kv"]}, {"ctx", row["ctx"]}, {"status", row["status"]}};
    if (result_ok(row)) {
      h["peak_rss_minus_model_bytes"] = row["peak_rss_minus_model_bytes"];
      h["kv_persistent_bytes"] = row["kv_persistent_bytes"];
      // The f16 row at the same context, if it ran.
      for (const auto& base : rows) {
        if (base["ctx"] != row["ctx"] || !base.value("f16_baseline", false) || !result_ok(base))
          continue;
        const double b = base["peak_rss_minus_model_bytes"].get<double>();
        const double kvb = base["kv_persistent_bytes"].get<double>();
        if (b > 0) h["ratio_to_f16"] = row["peak_rss_minus_model_bytes"].get<double>() / b;
        if (kvb > 0) h["kv_ratio_to_f16"] = row["kv_persistent_bytes"].get<double>() / kvb;
        break;
      }
    } else {
      h["reason"] = row.value("reason", "");
    }
    headline.push_back(std::move(h));
  }
  return {{"options", {{"ctx", m.ctx}, {"decode_tokens", m.decode_tokens}, {"fill", m.fill}}},
          {"rows", rows},
          {"headline", headline}};
}

namespace {

// The row ran with a RAM cap and a spill directory (a budget item).
bool spilled(const Json& row) {
  return row.contains("kv_ram") && !row["kv_ram"]["spill"].is_null();
}

}  // namespace

namespace {
// KV persistent bytes; with recurrent layers, what of them is their state
// and its snapshots (the rest is K/V).
std::string kv_persistent_cell(const Json& r) {
  std::string cell = fmt_bytes(r["kv_persistent_bytes"]);
  const uint64_t state = r.value("kv_state_bytes", uint64_t(0));
  if (state == 0) return cell;
  const uint64_t snaps = r.value("kv_snapshot_bytes", uint64_t(0));
  const uint64_t total = r["kv_persistent_bytes"].get<uint64_t>();
  return cell + " = K/V " + fmt_bytes(Json(total - state - snaps)) + " + state " +
         fmt_bytes(Json(state)) + " + snapshots " + fmt_bytes(Json(snaps));
}
}  // namespace

std::string memory_markdown(const Json& section) {
  Table t({"KV", "policy", "ctx", "status", "peak RSS", "model resident", "peak - model",
           "peak - model vs f16 (lower is better)", "KV persistent", "of which on disk",
           "K/V B/token/head", "peak scratch (KV + act.)", "RSS after prefill", "decode peak",
           "prefill tok/s", "decode KV read/token: RAM + disk"});
  const auto& rows = section["rows"];
  const auto& head = section["headline"];
  for (size_t i = 0; i < rows.size(); ++i) {
    const Json& r = rows[i];
    if (!result_ok(r)) {
      t.add({r["kv"], r["policy"], token_count_label(r["ctx"].get<int64_t>()),
             r["status"].get<std::string>() + ": " + r.value("reason", ""), "", "", "", "", "", "",
             "", "", "", "", "", ""});
      continue;
    }
    const auto& ph = r["phases"];
    t.add({r["kv"], r["policy"], token_count_label(r["ctx"].get<int64_t>()), "ok",
           fmt_bytes(r["peak_rss_bytes"]), fmt_bytes(r["model_resident_bytes"]),
           fmt_bytes(r["peak_rss_minus_model_bytes"]),
           head[i].contains("ratio_to_f16") ? fmt_fixed(head[i]["ratio_to_f16"], 3) + "x" : "",
           kv_persistent_cell(r),
           spilled(r) ? Cell(fmt_bytes(r["kv_page_bytes_on_disk"])) : Cell(""),
           fmt_fixed(r["k_bytes_per_token_head"], 1) + " / " +
               fmt_fixed(r["v_bytes_per_token_head"], 1),
           fmt_bytes(r["kv_peak_scratch_bytes"]) + " + " + fmt_bytes(r["model_scratch_bytes"]),
           fmt_bytes(ph["prefill"]["memory"]["rss_bytes"]),
           fmt_bytes(ph["decode"]["memory"]["peak_rss_bytes"]),
           r.value("fill", "") == "synthetic" ? Cell("synthetic fill")
                                              : Cell(fmt_fixed(ph["prefill"]["tok_per_s"], 1)),
           r.contains("kv_read_per_token")
               ? Cell(fmt_bytes(Json(uint64_t(r["kv_read_per_token"]["ram_bytes"].get<double>()))) +
                      " + " +
                      fmt_bytes(Json(uint64_t(r["kv_read_per_token"]["disk_bytes"].get<double>()))))
               : Cell("")});
  }
  // What a decoded token reads of the weights (a mixture of experts: its
  // chosen experts only), from the first row that knows its model.
  std::string weights;
  for (const Json& r : rows)
    if (r.contains("model") && r["model"].is_object() &&
        r["model"].contains("active_weight_bytes")) {
      weights = "Weights read per decoded token: " + fmt_bytes(r["model"]["active_weight_bytes"]) +
                " of " + fmt_bytes(r["model"]["weight_bytes"]) + ".\n\n";
      break;
    }
  return weights + t.markdown();
}

}  // namespace tkv::bench
