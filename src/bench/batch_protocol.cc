#include "bench/batch_protocol.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "bench/cell_env.h"
#include "bench/kernel_protocol.h"
#include "bench/kv_configs.h"
#include "bench/protocols.h"
#include "bench/stats.h"
#include "bench/table.h"
#include "bench/units.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "common/timer.h"
#include "kv/kv_cache.h"
#include "model/context.h"

namespace tkv::bench {

namespace {

// Prefills `seq` with `prompt` in chunks of `ubatch` (one item per call);
// returns the last token's greedy pick.
int32_t prefill(const model::Model& model, model::ExecutionContext& ctx, kv::KvCache& seq,
                std::span<const int32_t> prompt, int ubatch, ThreadPool& pool) {
  for (size_t done = 0; done < prompt.size(); done += size_t(ubatch)) {
    const size_t n = std::min(prompt.size() - done, size_t(ubatch));
    const model::BatchItem item{
        &seq, prompt.subspan(done, n),
        done + n == prompt.size() ? model::Logits::kLast : model::Logits::kNone};
    const auto st = model.eval_batch(ctx, std::span<const model::BatchItem>(&item, 1), pool);
    if (!st[0].ok()) std::rethrow_exception(st[0].error);
  }
  return argmax(ctx.logits(0));
}

// Decode throughput of B sequences stepping together.
Json measure_batch(const CellModel& m, const kv::KvConfig& config, int B, int64_t depth, int warmup,
                   int steps, model::ExecutionContext& ctx) {
  const model::Model& model = *m.model;
  const int64_t prompt_len = std::max<int64_t>(depth, 1);
  const auto shape = model.kv_shape(int(prompt_len + warmup + steps + 1));
  auto pool = std::make_shared<kv::PagePool>(config.budget_bytes);
  std::vector<std::unique_ptr<kv::KvCache>> seqs;
  std::vector<int32_t> next;
  for (int i = 0; i < B; ++i) {
    seqs.push_back(std::make_unique<kv::KvCache>(shape, config, pool));
    const auto prompt = synthetic_prompt(prompt_len, model, uint64_t(3 + i));
    next.push_back(prefill(model, ctx, *seqs.back(), prompt, m.ubatch, *m.pool));
  }
  // Its own greedy loop, not the runtime's: each step is one timed
  // eval_batch of the B sequences, the figure this protocol measures.
  std::vector<double> ms;
  std::vector<model::BatchItem> items(static_cast<size_t>(B));
  uint64_t experts_before = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    if (s == warmup) experts_before = ctx.expert_bytes_read();
    for (int i = 0; i < B; ++i) items[size_t(i)] = {seqs[size_t(i)].get(), {&next[size_t(i)], 1}};
    Stopwatch clock;
    const auto st = model.eval_batch(ctx, items, *m.pool);
    const double t = clock.seconds() * 1e3;
    for (int i = 0; i < B; ++i) {
      if (!st[size_t(i)].ok()) std::rethrow_exception(st[size_t(i)].error);
      next[size_t(i)] = argmax(ctx.logits(size_t(i)));
    }
    if (s >= warmup) ms.push_back(t);
  }
  const Summary sum = summarize(ms);
  // What a step read of the weights: every non-expert tensor once, and the
  // experts the B rows chose (counted by the forward pass).
  const uint64_t experts =
      (ctx.expert_bytes_read() - experts_before) / uint64_t(std::max(1, steps));
  return {{"batch", B},
          {"depth", depth},
          {"ms_per_step", to_json(sum)},
          {"tok_per_s", sum.median > 0 ? B * 1e3 / sum.median : 0.0},
          {"samples_ms", ms},
          {"weights_read_per_step", model.weights().step_bytes + experts},
          {"experts_read_per_step", experts},
          {"kv_pool_bytes", pool->stats().bytes_in_use}};
}

// Removes a file when it goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

// How many `tokens`-token sequences a pool of `budget` bytes holds.
Json measure_fit(const model::Model& model, const kv::KvConfig& config, uint64_t budget,
                 int64_t tokens, ThreadPool& threads) {
  // One query head per KV head: the attention needed to commit the chunks
  // costs less, and what the store holds per token does not depend on it.
  kv::KvShape shape = model.kv_shape(int(tokens));
  shape.n_heads = shape.n_kv_heads;
  kv::KvConfig unbudgeted = config;
  unbudgeted.budget_bytes = 0;
  kv::KvCache source(shape, unbudgeted);
  const int64_t chunk = 512;
  const size_t width = size_t(shape.n_kv_heads) * size_t(shape.head_dim);
  std::vector<float> k(size_t(chunk) * width), v(k.size()), q(k.size()), out(k.size());
  uint64_t x = 0x9e3779b97f4a7c15ull;
  auto fill = [&](std::vector<float>& buf) {
    for (auto& f : buf) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      f = float(int64_t(x >> 40) - (int64_t(1) << 23)) / float(1 << 23);
    }
  };
  for (int64_t done = 0; done < tokens; done += chunk) {
    const int n = int(std::min(chunk, tokens - done));
    source.begin_chunk(n);
    for (int l = 0; l < shape.n_layers; ++l) {
      fill(k);
      fill(v);
      fill(q);
      source.write(l, k.data(), v.data(), &threads);
      source.attend(l, q.data(), out.data(), threads);
    }
    source.end_chunk();
  }
  TempFile file{(std::filesystem::temp_directory_path() /
                 ("turbokv-bench-fit-" + std::to_string(::getpid()) + ".gguf"))
                    .string()};
  source.save(file.path, model.fingerprint());

  auto pool = std::make_shared<kv::PagePool>(budget);
  std::vector<std::unique_ptr<kv::KvCache>> held;
  constexpr size_t kMaxSequences = 100000;
  while (held.size() < kMaxSequences) {
    try {
      auto seq = std::make_unique<kv::KvCache>(shape, config, pool);
      seq->load(file.path, model.fingerprint());
      held.push_back(std::move(seq));
    } catch (const kv::KvBudgetExceeded&) {
      break;
    }
  }
  const kv::PoolStats ps = pool->stats();
  return {{"budget_bytes", budget},
          {"tokens", tokens},
          {"sequences", held.size()},
          {"pool_bytes_in_use", ps.bytes_in_use},
          {"bytes_per_sequence", held.empty() ? 0 : ps.bytes_in_use / held.size()}};
}

}  // namespace

Json batch_cell(const Json& req) {
  const auto batches = req.at("batch").get<std::vector<int>>();
  const int64_t depth = req.value("depth", int64_t(0));
  const int warmup = req.value("warmup", 2), steps = req.value("steps", 5);
  if (steps < 1) fail("--steps must be at least 1");
  CellModel m = load_cell_model(req);
  const kv::KvConfig config = cell_kv_config(req, *m.model);
  model::ExecutionContext ctx;
  Json decode = Json::array();
  for (const int B : batches)
    decode.push_back(measure_batch(m, config, B, depth, warmup, steps, ctx));
  Json r = {{"status", "ok"},
            {"model", model_facts(m)},
            {"kv_describe", config.describe()},
            {"decode", decode},
            {"context_peak_bytes", ctx.peak_bytes()}};
  const uint64_t budget = req.value("fit_budget", uint64_t(0));
  if (budget > 0)
    r["fit"] =
        measure_fit(*m.model, config, budget, req.value("fit_tokens", int64_t(4096)), *m.pool);
  return r;
}

std::vector<PlannedCell> plan_batch(const CommonOptions& o, const BatchOptions& b,
                                    const ModelInfo& info) {
  std::vector<PlannedCell> cells = copy_bandwidth_cells("batch", {o.threads});
  int64_t rows = 0, decoded = 0;
  for (const int B : b.batch) {
    rows += B * std::max<int64_t>(b.depth, 1);
    decoded += int64_t(B) * (b.warmup + b.steps);
  }
  for (const auto& kv : o.kv) {
    PlannedCell c;
    c.label = "batch " + kv.label;
    c.cost = estimate_flops(info, rows, decoded) / o.threads;
    c.identity = {{"kv", kv.label},
                  {"policy", policy_label(kv.config)},
                  {"f16_baseline", is_f16_baseline(kv.config)},
                  {"threads", o.threads}};
    c.request = request_base(o, "batch");
    c.request["kv"] = bench_kv_to_json(kv);
    c.request["batch"] = b.batch;
    c.request["depth"] = b.depth;
    c.request["warmup"] = b.warmup;
    c.request["steps"] = b.steps;
    c.request["fit_budget"] = b.fit_budget;
    c.request["fit_tokens"] = b.fit_tokens;
    cells.push_back(std::move(c));
  }
  return cells;
}

Json summarize_batch(const BatchOptions& b, std::vector<Json> all_rows) {
  std::vector<Json> rows;
  const Json copy = copy_bandwidth_of(all_rows, rows);
  Json decode = Json::array(), fit = Json::array();
  for (const auto& row : rows) {
    if (!result_ok(row)) continue;
    double single = 0;
    for (const auto& d : row["decode"])
      if (d["batch"].get<int>() == 1) single = d["tok_per_s"].get<double>();
    for (const auto& d : row["decode"]) {
      Json e = {{"kv", row["kv"]},
                {"threads", row["threads"]},
                {"batch", d["batch"]},
                {"depth", d["depth"]},
                {"median_ms_per_step", d["ms_per_step"]["median"]},
                {"tok_per_s", d["tok_per_s"]}};
      if (single > 0) e["speedup_vs_batch_1"] = d["tok_per_s"].get<double>() / single;
      // The bandwidth ceiling: B tokens per step, a step no faster than
      // reading its weights at the copy bandwidth.
      const std::string t = std::to_string(row["threads"].get<int>());
      if (d.contains("weights_read_per_step") && copy.contains(t)) {
        const double bytes = d["weights_read_per_step"].get<double>();
        const double ceiling =
            bytes > 0 ? d["batch"].get<double>() * copy[t].get<double>() * 1e9 / bytes : 0;
        e["weights_read_per_step"] = d["weights_read_per_step"];
        e["experts_read_per_step"] = d["experts_read_per_step"];
        e["copy_gb_per_s"] = copy[t];
        e["ceiling_tok_per_s"] = ceiling;
        if (ceiling > 0) e["share_of_ceiling"] = d["tok_per_s"].get<double>() / ceiling;
      }
      decode.push_back(std::move(e));
    }
    if (row.contains("fit")) {
      Json f = row["fit"];
      f["kv"] = row["kv"];
      fit.push_back(std::move(f));
    }
  }
  return {{"options",
           {{"batch", b.batch},
            {"depth", b.depth},
            {"warmup", b.warmup},
            {"steps", b.steps},
            {"fit_budget", b.fit_budget},
            {"fit_tokens", b.fit_tokens}}},
          {"copy_bandwidth_gb_per_s", copy},
          {"rows", rows},
          {"decode", decode},
          {"fit", fit}};
}

std::string batch_markdown(const Json& section) {
  std::string out;
  for (const auto& r : section["decode"]) {
    char line[256];
    std::snprintf(line, sizeof line, "batch %d: %.2f tok/s (kv %s, depth %lld",
                  r["batch"].get<int>(), r["tok_per_s"].get<double>(),
                  r["kv"].get<std::string>().c_str(), (long long)r["depth"].get<int64_t>());
    out += line;
    if (r.contains("speedup_vs_batch_1"))
      out += ", " + fmt_fixed(r["speedup_vs_batch_1"], 2) + "x batch 1";
    out += ")\n";
  }
  for (const auto& f : section["fit"])
    out += "fit " + f["kv"].get<std::string>() + ": " +
           std::to_string(f["sequences"].get<int64_t>()) + " sequences of " +
           token_count_label(f["tokens"].get<int64_t>()) + " tokens in " +
           format_bytes(f["budget_bytes"].get<uint64_t>()) + "\n";
  for (const auto& r : section["rows"])
    if (!result_ok(r))
      out += "kv " + r.value("kv", std::string()) + ": " + r.value("status", std::string()) + ": " +
             r.value("reason", std::string()) + "\n";
  Table d({"KV", "threads", "batch", "depth", "ms/step (median)", "aggregate tok/s", "vs batch 1",
           "weights read/step (experts)", "ceiling tok/s", "of ceiling"});
  for (const auto& r : section["decode"]) {
    const bool c = r.contains("ceiling_tok_per_s");
    d.add({r["kv"], r["threads"], r["batch"], token_count_label(r["depth"].get<int64_t>()),
           fmt_fixed(r["median_ms_per_step"], 2), fmt_fixed(r["tok_per_s"], 2),
           r.contains("speedup_vs_batch_1") ? fmt_fixed(r["speedup_vs_batch_1"], 2) + "x" : "",
           c ? fmt_bytes(r["weights_read_per_step"]) + " (" +
                   fmt_bytes(r["experts_read_per_step"]) + ")"
             : "",
           c ? fmt_fixed(r["ceiling_tok_per_s"], 1) : "",
           r.contains("share_of_ceiling")
               ? fmt_fixed(r["share_of_ceiling"].get<double>() * 100, 0) + "%"
               : ""});
  }
  out +=
      "\nBatched decode (ceiling = batch x copy bandwidth / weights read per step; the KV "
      "a step reads is left out):\n\n" +
      d.markdown();
  if (!section["fit"].empty()) {
    Table f({"KV", "sequences that fit", "tokens each", "budget", "bytes per sequence"});
    for (const auto& r : section["fit"])
      f.add({r["kv"], r["sequences"], token_count_label(r["tokens"].get<int64_t>()),
             format_bytes(r["budget_bytes"].get<uint64_t>()),
             format_bytes(r["bytes_per_sequence"].get<uint64_t>())});
    out += "\nSequences in one pool:\n\n" + f.markdown();
  }
  return out;
}

}  // namespace tkv::bench
