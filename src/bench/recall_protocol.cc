#include "bench/recall_protocol.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "bench/cell_env.h"
#include "bench/kv_configs.h"
#include "bench/protocols.h"
#include "bench/qa.h"
#include "bench/quality_protocol.h"
#include "bench/recall_compare.h"
#include "bench/table.h"
#include "bench/units.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "kv/page_pool.h"

namespace tkv::bench {

namespace {

constexpr int64_t kWindowProbeMargin = 64;  // filler tokens past the window's edge
// Room left after a document for the question and the answer.
constexpr int64_t kQuestionRoom = 48;
// Cache room past --ctx, so a long question or answer never hits the limit.
constexpr int kAnswerSlack = 64;

RecallTemplates templates_from(const Json& req) {
  RecallTemplates t;
  t.fact = req.at("fact_template").get<std::string>();
  t.question = req.at("question_template").get<std::string>();
  return t;
}

// One prompt: placements -> document -> questions (facts shuffled, the
// control last) -> answers.
Json run_trial(const CellModel& m, const tok::Tokenizer& tok, const CellKv& kv,
               const Filler& filler, const PromptFormat& format, const RecallTemplates& tmpl,
               const Json& placements, int seed, int trial, int64_t ctx, int answer_tokens,
               bool keep_prompt) {
  const uint64_t s = mix_seed(uint64_t(seed), uint64_t(trial));
  const std::vector<FactSpec> specs = make_facts(int(placements.size()), s);
  std::vector<FactPlacement> place;
  for (size_t i = 0; i < placements.size(); ++i)
    place.push_back({specs[i], placements[i].at("depth").get<double>(),
                     placements[i].at("label").get<std::string>(),
                     placements[i].value("tokens_before_end", int64_t(-1))});
  const Document doc = build_document(tok, filler, size_t(s % filler.size()), place, tmpl,
                                      ctx - kQuestionRoom - answer_tokens);

  // Question order: facts shuffled by the seed, then the control.
  std::vector<size_t> order(doc.facts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[mix_seed(s, 77 + i) % i]);
  const FactSpec control = specs.back();
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i : order)
    prompts.push_back(format.document_question(
        doc.text, fill_template(tmpl.question, doc.facts[i].fact.name, "")));
  prompts.push_back(
      format.document_question(doc.text, fill_template(tmpl.question, control.name, "")));

  runtime::Sequence session(*m.model, tok, int(ctx) + kAnswerSlack, kv.config,
                                    kv.make_pool(), *m.pool, m.ubatch);
  AskOptions ao;
  ao.max_answer_tokens = answer_tokens;
  const std::vector<Answer> answers = answer_prompts(session, prompts, ao);

  Json facts = Json::array();
  std::set<std::string> planted;
  for (const auto& f : doc.facts) planted.insert(f.fact.code);
  for (size_t q = 0; q < order.size(); ++q) {
    const PlacedFact& f = doc.facts[order[q]];
    const Answer& a = answers[q];
    facts.push_back({{"name", f.fact.name},
                     {"code", f.fact.code},
                     {"depth", f.depth},
                     {"label", f.depth_label},
                     {"token_pos", f.token_pos},
                     {"tokens_after", a.prompt_tokens - f.token_pos},
                     {"answer", a.text},
                     {"correct", a.digits == f.fact.code}});
  }
  const Answer& ca = answers.back();
  Json out = {{"seed", seed},
              {"trial", trial},
              {"document_tokens", doc.tokens},
              {"facts", facts},
              {"control",
               {{"name", control.name},
                {"answer", ca.text},
                {"planted_code_hit", planted.count(ca.digits) > 0}}}};
  if (keep_prompt) out["document"] = doc.text;
  return out;
}

}  // namespace

std::string depth_label(double depth) {
  return std::to_string(int(std::lround(depth * 100))) + "%";
}

Json recall_cell(const Json& req) {
  CellModel m = load_cell_model(req);
  const tok::Tokenizer tok = tok::Tokenizer::from_gguf(m.model->gguf());
  const CellKv kv = cell_kv(req, *m.model);
  const std::string filler_path = req.at("filler_file").get<std::string>();
  const Filler filler(read_file(filler_path), filler_path);
  const PromptFormat format(tok, req.value("chat", std::string()));
  const RecallTemplates tmpl = templates_from(req);
  const int64_t ctx = req.at("ctx").get<int64_t>();
  const int answer_tokens = req.at("answer_tokens").get<int>();

  Json trials = Json::array();
  int correct = 0, total = 0, control_hits = 0, controls = 0;
  for (const int seed : req.at("seeds").get<std::vector<int>>()) {
    int trial = 0;
    for (const Json& placements : req.at("trials")) {
      Json t = run_trial(m, tok, kv, filler, format, tmpl, placements, seed, trial++, ctx,
                         answer_tokens, req.value("keep_prompts", false));
      for (const auto& f : t["facts"]) {
        correct += f["correct"].get<bool>();
        ++total;
      }
      control_hits += t["control"]["planted_code_hit"].get<bool>();
      ++controls;
      trials.push_back(std::move(t));
    }
  }
  return {{"status", "ok"},
          {"kv_describe", kv.config.describe()},
          {"kv_ram", kv.describe()},
          {"accuracy", total ? double(correct) / total : 0.0},
          {"correct", correct},
          {"questions", total},
          {"control_planted_rate", controls ? double(control_hits) / controls : 0.0},
          {"trials", trials}};
}

void finalize_recall_options(RecallOptions& r, const ModelInfo& info) {
  if (r.ctx <= 0) r.ctx = std::min<int64_t>(3200, std::max(256, info.n_ctx_train - 64));
  if (r.answer_tokens <= 0) r.answer_tokens = r.chat.empty() ? 8 : 32;
  if (!r.chat.empty() && !r.question_template_set)
    r.templates.question = "What is the access code for {name}? Reply with the code only.";
  if (r.facts < 1) fail("--facts ", r.facts, ": must be at least 1");
  if (!r.depths.empty() && r.facts > 1 && int(r.depths.size()) != r.facts)
    fail("--depths has ", r.depths.size(), " values for ", r.facts, " facts (give one per fact, ",
         "or use --facts 1 for a sweep over depths)");
}

std::vector<PlannedCell> plan_recall(const CommonOptions& o, const RecallOptions& r,
                                     const ModelInfo& info) {
  // Placements of each trial (the same for every seed and configuration).
  std::vector<double> depths = r.depths;
  if (depths.empty())
    for (int i = 0; i < r.facts; ++i)
      depths.push_back(r.facts == 1 ? 0.5 : double(i) / (r.facts - 1));
  std::vector<Json> base_trials;
  if (r.facts == 1) {
    for (double d : depths)
      base_trials.push_back(Json::array({{{"depth", d}, {"label", depth_label(d)}}}));
  } else {
    Json t = Json::array();
    for (double d : depths) t.push_back({{"depth", d}, {"label", depth_label(d)}});
    base_trials.push_back(t);
  }
  // Selection and cap items run next to their dense and window partners.
  std::vector<BenchKv> list = o.kv;
  const std::vector<RecallPartners> partners = add_recall_partners(list, info);
  std::set<int> windows;
  for (const auto& kv : list)
    if (kv.config.window > 0 &&
        kv.config.window + kWindowProbeMargin < r.ctx - kQuestionRoom - r.answer_tokens - 32)
      windows.insert(kv.config.window);
  // A trial's prompt derives from (seed, its index): the depth sweep's
  // prompts come first, so they are the same prompts whether or not a
  // window configuration adds its probe prompts (after them).
  Json trials = Json::array(), probe_trials = Json::array();
  for (Json t : base_trials) {
    for (int w : windows) {
      const int64_t after = w + kWindowProbeMargin;
      const Json probe = {{"depth", 1.0 - double(after) / double(r.ctx)},
                          {"label", str("W", w, "+")},
                          {"tokens_before_end", after}};
      if (r.facts == 1) {
        probe_trials.push_back(Json::array({probe}));
      } else {
        t.push_back(probe);
      }
    }
    trials.push_back(t);
  }
  for (const Json& t : probe_trials) trials.push_back(t);

  std::vector<PlannedCell> cells;
  const double per_prompt = estimate_flops(info, r.ctx) + 6.0 * estimate_flops(info, 64);
  // What both variants' cells need: the configuration, prompt and answers.
  const auto request = [&](const char* kind, const BenchKv& kv) {
    Json q = request_base(o, kind);
    q["kv"] = bench_kv_to_json(kv);
    q["ctx"] = r.ctx;
    q["seeds"] = r.seeds;
    q["filler_file"] = r.filler_file;
    q["fact_template"] = r.templates.fact;
    q["question_template"] = r.templates.question;
    q["chat"] = r.chat;
    q["answer_tokens"] = r.answer_tokens;
    return q;
  };
  const auto given = [&](const std::string& label) {
    return std::any_of(o.kv.begin(), o.kv.end(),
                       [&](const BenchKv& k) { return k.label == label; });
  };
  for (const auto& kv : list) {
    PlannedCell c;
    c.label = "recall " + kv.label;
    c.cost = per_prompt * double(r.seeds.size() * trials.size());
    c.identity = {
        {"kv", kv.label}, {"policy", policy_label(kv)}, {"f16_baseline", is_f16_baseline(kv)}};
    if (!given(kv.label)) c.identity["added"] = true;  // a partner (recall_compare.h)
    for (const auto& p : partners)
      if (p.item == kv.label)
        c.identity["partners"] = {{"kind", p.kind},
                                  {"token_budget", p.token_budget},
                                  {"dense", p.dense},
                                  {"window", p.window}};
    c.request = request("recall", kv);
    c.request["trials"] = trials;
    c.request["keep_prompts"] = r.keep_prompts;
    cells.push_back(std::move(c));
  }
  if (r.multi_turn) {
    // One cell per (configuration, cap): `cap` is the age past which a fact
    // counts as older than the window (or the token budget it is compared at).
    std::set<std::pair<std::string, int64_t>> planned;
    const auto add_cell = [&](const BenchKv& v, int64_t cap) {
      if (!planned.insert({v.label, cap}).second) return;
      // A window must hold more than the f16 residual window (the cache
      // refuses it otherwise): say so while planning, not as a failed cell.
      if (v.config.window > 0 && v.config.window <= v.config.effective_residual())
        fail(v.config.window == r.multi_turn_window ? "--multi-turn-window " : "--kv window ",
             v.config.window, " is not larger than the residual window of ", v.label, " (",
             v.config.effective_residual(), " tokens)");
      PlannedCell c;
      c.label = "recall multi-turn " + v.label;
      c.cost = per_prompt * double(r.seeds.size());
      c.identity = {{"kv", v.label},
                    {"policy", policy_label(v)},
                    {"window", v.config.window},
                    {"multi_turn", true}};
      c.request = request("recall_multi_turn", v);
      c.request["turns"] = r.turns;
      c.request["scroll_window"] = cap;
      cells.push_back(std::move(c));
    };
    for (const auto& kv : list) {
      // A selection or cap item and its partners: counted at its token budget.
      bool grouped = false;
      for (const auto& p : partners)
        if (kv.label == p.item || kv.label == p.dense || kv.label == p.window) {
          grouped = true;
          if (p.token_budget > 0) add_cell(kv, p.token_budget);
        }
      if (grouped) continue;
      // Anything else runs as given and with the --multi-turn-window cap.
      add_cell(kv, kv.config.window > 0 ? kv.config.window : r.multi_turn_window);
      if (kv.config.window == 0) {
        BenchKv w = kv;
        w.config.window = r.multi_turn_window;
        w.label = kv.label + (kv.label.find(':') == std::string::npos ? ":" : "+") + "w" +
                  std::to_string(r.multi_turn_window);
        add_cell(w, r.multi_turn_window);
      }
    }
  }
  return cells;
}

Json summarize_recall(const RecallOptions& r, std::vector<Json> rows) {
  // Heat map: configurations x depth labels, accuracy over seeds.
  std::vector<std::pair<double, std::string>> label_order;
  std::vector<std::string> configs;
  std::map<std::pair<std::string, std::string>, std::pair<int, int>> cells;
  Json single = Json::array(), multi = Json::array();
  for (auto& row : rows) {
    if (row.value("multi_turn", false)) {
      multi.push_back(row);
      continue;
    }
    single.push_back(row);
    if (!result_ok(row)) continue;
    configs.push_back(row["kv"].get<std::string>());
    for (const auto& t : row["trials"])
      for (const auto& f : t["facts"]) {
        const std::string label = f["label"].get<std::string>();
        if (std::none_of(label_order.begin(), label_order.end(),
                         [&](const auto& p) { return p.second == label; }))
          label_order.emplace_back(f["depth"].get<double>(), label);
        auto& c = cells[{row["kv"].get<std::string>(), label}];
        c.first += f["correct"].get<bool>();
        c.second += 1;
      }
  }
  std::stable_sort(label_order.begin(), label_order.end());
  Json labels = Json::array(), matrix = Json::array();
  for (const auto& [d, l] : label_order) labels.push_back(l);
  for (const auto& cfg : configs) {
    Json line = Json::array();
    for (const auto& [d, l] : label_order) {
      const auto it = cells.find({cfg, l});
      line.push_back(it == cells.end() || it->second.second == 0
                         ? Json(nullptr)
                         : Json(double(it->second.first) / it->second.second));
    }
    matrix.push_back(line);
  }
  return {{"options",
           {{"facts", r.facts},
            {"depths", r.depths},
            {"ctx", r.ctx},
            {"seeds", r.seeds},
            {"filler_file", r.filler_file},
            {"fact_template", r.templates.fact},
            {"question_template", r.templates.question},
            {"chat", r.chat},
            {"turns", r.turns},
            {"multi_turn_window", r.multi_turn_window}}},
          {"rows", single},
          {"heatmap", {{"labels", labels}, {"configs", configs}, {"accuracy", matrix}}},
          {"multi_turn", multi},
          {"comparisons", recall_comparisons(single, multi)}};
}

std::string recall_markdown(const Json& section) {
  const Json& hm = section["heatmap"];
  std::vector<std::string> header{"KV", "policy"};
  for (const auto& l : hm["labels"]) header.push_back(l.get<std::string>());
  header.insert(header.end(), {"all", "control: a planted code given (lower is better)"});
  Table t(header);
  for (const auto& row : section["rows"]) {
    std::vector<Cell> cells{
        row["kv"].get<std::string>() + (row.value("added", false) ? " (added)" : ""),
        row["policy"]};
    if (!result_ok(row)) {
      cells.push_back(row["status"].get<std::string>() + ": " + row.value("reason", ""));
      t.add(cells);
      continue;
    }
    size_t ci = 0;
    while (ci < hm["configs"].size() && hm["configs"][ci] != row["kv"]) ++ci;
    for (const auto& v : hm["accuracy"][ci]) cells.push_back(v.is_null() ? "" : fmt_percent(v, 0));
    cells.push_back(fmt_percent(row["accuracy"], 1) + " (" +
                    std::to_string(row["correct"].get<int>()) + "/" +
                    std::to_string(row["questions"].get<int>()) + ")");
    cells.push_back(fmt_percent(row["control_planted_rate"], 0));
    t.add(cells);
  }
  std::string out = t.markdown();
  if (section.contains("comparisons") && !section["comparisons"].empty())
    out +=
        "\nSelection and RAM caps against dense and a window of the same token budget "
        "(rows marked \"added\" were added for this):\n\n" +
        recall_comparisons_markdown(section["comparisons"]);
  if (!section["multi_turn"].empty()) {
    Table m({"KV", "policy", "window", "cap", "recall: facts older than the cap",
             "recall: facts within the cap", "control: a planted code given (lower is better)"});
    for (const auto& row : section["multi_turn"]) {
      if (!result_ok(row)) {
        m.add({row["kv"], row["policy"], row["window"], "",
               row["status"].get<std::string>() + ": " + row.value("reason", "")});
        continue;
      }
      auto frac = [](const Json& p) {
        return p["total"].get<int>() == 0
                   ? std::string("-")
                   : fmt_percent(Json(double(p["correct"].get<int>()) / p["total"].get<int>()), 0) +
                         " (" + std::to_string(p["correct"].get<int>()) + "/" +
                         std::to_string(p["total"].get<int>()) + ")";
      };
      m.add({row["kv"], row["policy"], row["window"].get<int>() ? row["window"] : Json("none"),
             row["cap"], frac(row["scrolled_out"]), frac(row["in_window"]),
             fmt_percent(row["control_planted_rate"], 0)});
    }
    out +=
        "\nMulti-turn conversation growing past a window cap or token budget:\n\n" + m.markdown();
  }
  return out;
}

}  // namespace tkv::bench
