#include "bench/quality_protocol.h"

#include <cstdlib>
#include <filesystem>

#include "bench/cell_env.h"
#include "bench/kv_configs.h"
#include "bench/protocols.h"
#include "bench/table.h"
#include "bench/text_eval.h"
#include "common/atomic_file.h"
#include "common/error.h"

namespace tkv::bench {

std::string default_quality_kv_list() {
  return "q8_0:none,q4_0h:none,tq4:none,k4v2:none,k4v2:s1+r0,k4v2,tq3,tq4";
}

std::string find_heldout_text(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("TURBOKV_MODELS"); env && *env) dirs.emplace_back(env);
  if (!model_path.empty()) dirs.push_back(fs::path(model_path).parent_path());
  for (const auto& d : dirs) {
    const fs::path p = (d.empty() ? fs::path(".") : d) / kHeldoutText;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return {};
}

Json quality_cell(const Json& req) {
  CellModel m = load_cell_model(req);
  const model::Model& model = *m.model;
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(model.gguf());
  const std::string path = req.at("text_file").get<std::string>();
  const TextWindows tw =
      make_text_windows(tokenizer, read_file(path), req.at("window_tokens").get<int>(),
                        req.at("windows").get<int>(), path);
  const kv::KvConfig tested = cell_kv_config(req, model);
  kv::KvConfig baseline;
  const std::string base_name = req.value("baseline", std::string("f16"));
  if (!kv::parse_kv_shorthand(base_name, baseline.k, baseline.v) || baseline.k.quantized())
    fail("--baseline ", base_name, ": must be f16 or f32");
  baseline.budget_bytes = tested.budget_bytes;
  TextEvalOptions opts;
  opts.ubatch = m.ubatch;
  opts.baseline = &baseline;
  const auto scores = evaluate_text(model, *m.pool, tested, tw, opts);
  Json r = text_eval_json(scores, /*with_samples=*/true);
  r["status"] = "ok";
  r["model"] = model_facts(m);
  r["kv_describe"] = tested.describe();
  r["baseline"] = base_name;
  r["text_tokens"] = tw.text_tokens;
  r["bits_k"] = codec_bits(tested.k, model.config().head_dim);
  r["bits_v"] = codec_bits(tested.v, model.config().head_dim);
  return r;
}

std::vector<PlannedCell> plan_quality(const CommonOptions& o, const QualityOptions& q,
                                      const ModelInfo& info) {
  std::vector<PlannedCell> cells;
  for (const auto& kv : o.kv) {
    PlannedCell c;
    c.label = "quality " + kv.label;
    c.cost = 2.0 * q.windows * estimate_flops(info, q.window_tokens);
    c.identity = {{"kv", kv.label}, {"policy", policy_label(kv.config)}};
    c.request = request_base(o, "quality");
    c.request["kv"] = bench_kv_to_json(kv);
    c.request["text_file"] = q.text_file;
    c.request["window_tokens"] = q.window_tokens;
    c.request["windows"] = q.windows;
    c.request["baseline"] = q.baseline;
    cells.push_back(std::move(c));
  }
  return cells;
}

Json summarize_quality(const QualityOptions& q, std::vector<Json> rows) {
  return {{"options",
           {{"text_file", q.text_file},
            {"window_tokens", q.window_tokens},
            {"windows", q.windows},
            {"baseline", q.baseline}}},
          {"rows", rows}};
}

std::string quality_markdown(const Json& section) {
  const std::string base = section["options"].value("baseline", std::string("f16"));
  Table t({"K / V", "policy", "bits K/V", "PPL", base + " PPL", "PPL change (lower is better)",
           "mean KL vs " + base + " (lower is better)", "p99 KL", "max KL",
           "top-1 agreement with " + base + " (higher is better)"});
  for (const auto& r : section["rows"]) {
    if (!result_ok(r)) {
      t.add({r["kv"], r["policy"], r["status"].get<std::string>() + ": " + r.value("reason", "")});
      continue;
    }
    t.add({r["kv"], r["policy"], fmt_fixed(r["bits_k"], 2) + " / " + fmt_fixed(r["bits_v"], 2),
           fmt_fixed(r["ppl"], 3), fmt_fixed(r["baseline_ppl"], 3),
           fmt_fixed(r["ppl_delta_pct"], 2) + "%",
           fmt_general(r["kl"]["mean"].get<double>(), 3) + " +- " +
               fmt_general(r["kl"]["stderr"].get<double>(), 2),
           fmt_general(r["kl"]["p99"].get<double>(), 3),
           fmt_general(r["kl"]["max"].get<double>(), 3), fmt_percent(r["top1_agreement"], 1)});
  }
  return t.markdown();
}

}  // namespace tkv::bench
