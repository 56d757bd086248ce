// bench recall: what a selection or RAM-cap item is compared with.
//
// Page selection (selN) reads N tokens' worth of pages per query, and a RAM
// cap (budgetSIZE) keeps so many tokens' pages in RAM (the rest on disk).
// Either is worth its cost only against what the same token budget gives
// otherwise: so each such item runs next to its dense configuration (the
// same item without selN and budgetSIZE) and a window of its token budget
// (the dense item + wN); both are added to the run unless the list already
// has them. The report groups the three in one table (recall_comparisons).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/json.h"
#include "bench/options.h"

namespace tkv::bench {

// The tokens an item's selection or RAM cap stands for: N for selN (with a
// cap too, still N); for a cap alone, the tokens whose pages (of the main
// codecs) fit in it next to the f16 sinks and residual of every layer, in
// whole pages. 0 for other items.
int64_t token_budget(const BenchKv& kv, const ModelInfo& info);

// Adds, after each selection or cap item of `list`, its dense and window
// partners (unless the list has an equal configuration, under any label),
// and records in each item's `partners` the labels to compare with.
struct RecallPartners {
  std::string item, kind;  // kind: "sel", "budget" or "sel+budget"
  int64_t token_budget = 0;
  std::string dense, window;  // window "" when the budget is within the residual window
};
std::vector<RecallPartners> add_recall_partners(std::vector<BenchKv>& list, const ModelInfo& info);

// The comparisons of a summarized recall section: per item, the overall
// recall of item, dense and window on the same prompts, their recall of the
// facts planted just past the window ("W<N>+" probes), and in the
// multi-turn variant of the facts older than the token budget. The item
// rows carry their partners in identity["partners"].
Json recall_comparisons(const Json& single_rows, const Json& multi_rows);
std::string recall_comparisons_markdown(const Json& comparisons);

}  // namespace tkv::bench
