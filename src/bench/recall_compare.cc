#include "bench/recall_compare.h"

#include <algorithm>
#include <set>

#include "bench/cell.h"
#include "bench/kv_configs.h"
#include "bench/table.h"
#include "common/error.h"

namespace tkv::bench {

namespace {

// The item's label without its selN and budgetSIZE parts: "k4v2:s2+sel512"
// -> "k4v2:s2", "k4v2:sel512" -> "k4v2".
std::string dense_label(const std::string& label) {
  const size_t colon = label.find(':');
  if (colon == std::string::npos) return label;
  std::string kept;
  const std::string parts = label.substr(colon + 1);
  for (size_t start = 0; start <= parts.size();) {
    const size_t plus = std::min(parts.find('+', start), parts.size());
    const std::string part = parts.substr(start, plus - start);
    start = plus + 1;
    if (part.rfind("sel", 0) == 0 || part.rfind("budget", 0) == 0) continue;
    kept += (kept.empty() ? "" : "+") + part;
  }
  return label.substr(0, colon) + (kept.empty() ? "" : ":" + kept);
}

bool same_configuration(const BenchKv& a, const BenchKv& b) {
  return a.ram_budget == b.ram_budget && a.config.describe() == b.config.describe();
}

// Adds `kv` to `list` after position `at` unless an equal configuration is
// there; returns the label it is known by.
std::string add_unless_present(std::vector<BenchKv>& list, size_t& at, const BenchKv& kv) {
  for (const auto& other : list)
    if (same_configuration(other, kv)) return other.label;
  for (const auto& other : list)
    if (other.label == kv.label)
      fail("recall: ", kv.label, " is in the list as another configuration; ",
           "list the dense and window comparisons under other labels");
  list.insert(list.begin() + std::ptrdiff_t(++at), kv);
  return kv.label;
}

// Fraction of the facts of `row` (a single-document row) whose depth label
// is `label` ("" = all facts) that were answered; null when none.
Json fact_recall(const Json* row, const std::string& label) {
  if (!row || !result_ok(*row)) return nullptr;
  int correct = 0, total = 0;
  for (const auto& t : (*row)["trials"])
    for (const auto& f : t["facts"])
      if (label.empty() || f["label"] == label) {
        correct += f["correct"].get<bool>();
        ++total;
      }
  if (total == 0) return nullptr;
  return {{"correct", correct}, {"total", total}, {"fraction", double(correct) / total}};
}

const Json* find_row(const Json& rows, const std::string& label) {
  for (const auto& r : rows)
    if (r["kv"] == label) return &r;
  return nullptr;
}

// The multi-turn row of `label` counted against `cap`.
Json older_than(const Json& rows, const std::string& label, int64_t cap) {
  for (const auto& r : rows) {
    if (r["kv"] != label || !result_ok(r) || r["cap"].get<int64_t>() != cap) continue;
    const Json& s = r["scrolled_out"];
    const int total = s["total"].get<int>();
    if (total == 0) return nullptr;
    return {{"correct", s["correct"]},
            {"total", total},
            {"fraction", s["correct"].get<double>() / total}};
  }
  return nullptr;
}

std::string fraction_cell(const Json& f) {
  if (f.is_null()) return "-";
  return fmt_percent(f["fraction"], 0) + " (" + std::to_string(f["correct"].get<int>()) + "/" +
         std::to_string(f["total"].get<int>()) + ")";
}

}  // namespace

int64_t token_budget(const BenchKv& kv, const ModelInfo& info) {
  if (kv.config.select > 0) return kv.config.select;
  if (kv.ram_budget == 0 || info.n_layers <= 0 || info.head_dim <= 0) return 0;
  const int hd = info.head_dim;
  const double values = double(info.n_layers) * info.n_kv_heads * hd;  // per token, K or V
  const double per_token = values * (codec_bits(kv.config.k, hd) + codec_bits(kv.config.v, hd)) / 8;
  // The f16 sinks and residual take whole 16-token slots of K and V.
  const auto slots = [](int tokens) { return (tokens + 15) / 16 * 16; };
  const double f16 =
      values * 2 * 2 * (slots(kv.config.effective_sinks()) + slots(kv.config.effective_residual()));
  const double rest = double(kv.ram_budget) - f16;
  const int64_t page = std::max(1, kv.config.page_tokens);
  return rest > 0 ? int64_t(rest / per_token) / page * page : 0;
}

std::vector<RecallPartners> add_recall_partners(std::vector<BenchKv>& list, const ModelInfo& info) {
  std::vector<RecallPartners> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const BenchKv item = list[i];
    if (item.config.select == 0 && item.ram_budget == 0) continue;
    RecallPartners p;
    p.item = item.label;
    p.kind = item.config.select > 0 && item.ram_budget > 0 ? "sel+budget"
             : item.config.select > 0                      ? "sel"
                                                           : "budget";
    p.token_budget = token_budget(item, info);
    BenchKv dense = item;
    dense.label = dense_label(item.label);
    dense.config.select = 0;
    dense.ram_budget = 0;
    size_t at = i;
    p.dense = add_unless_present(list, at, dense);
    if (item.config.window == 0 && p.token_budget > item.config.effective_residual()) {
      BenchKv window = dense;
      window.config.window = int(p.token_budget);
      window.label = dense.label + (dense.label.find(':') == std::string::npos ? ":" : "+") + "w" +
                     std::to_string(p.token_budget);
      p.window = add_unless_present(list, at, window);
    }
    out.push_back(p);
  }
  return out;
}

Json recall_comparisons(const Json& single_rows, const Json& multi_rows) {
  Json out = Json::array();
  for (const auto& row : single_rows) {
    if (!row.contains("partners")) continue;
    const Json& p = row["partners"];
    const int64_t budget = p["token_budget"].get<int64_t>();
    const std::string probe = "W" + std::to_string(budget) + "+";
    const std::string window = p["window"].get<std::string>();
    Json c = {{"item", row["kv"]},
              {"kind", p["kind"]},
              {"token_budget", budget},
              {"dense", p["dense"]},
              {"window", window}};
    const Json* rows[3] = {&row, find_row(single_rows, p["dense"].get<std::string>()),
                           window.empty() ? nullptr : find_row(single_rows, window)};
    const char* roles[3] = {"item", "dense", "window"};
    for (int k = 0; k < 3; ++k) {
      c["recall"][roles[k]] = fact_recall(rows[k], "");
      c["past_window"][roles[k]] = fact_recall(rows[k], probe);
      const std::string label = k == 0   ? row["kv"].get<std::string>()
                                : k == 1 ? p["dense"].get<std::string>()
                                         : window;
      c["multi_turn_older_than_budget"][roles[k]] =
          label.empty() ? Json(nullptr) : older_than(multi_rows, label, budget);
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string recall_comparisons_markdown(const Json& comparisons) {
  Table t({"item", "compared with (dense, window)", "token budget", "recall: item / dense / window",
           "facts just past the window (W<N>+)", "multi-turn: facts older than the budget"});
  for (const auto& c : comparisons) {
    auto three = [&](const char* what) {
      const Json& v = c[what];
      return fraction_cell(v["item"]) + " / " + fraction_cell(v["dense"]) + " / " +
             fraction_cell(v["window"]);
    };
    const std::string window = c["window"].get<std::string>();
    t.add({c["item"], c["dense"].get<std::string>() + ", " + (window.empty() ? "-" : window),
           c["token_budget"], three("recall"), three("past_window"),
           three("multi_turn_older_than_budget")});
  }
  return t.markdown();
}

}  // namespace tkv::bench
