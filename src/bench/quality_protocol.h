// bench quality: how much a KV configuration changes what the model
// predicts, through the real cache path (see text_eval.h): perplexity of a
// text, and KL divergence / top-1 agreement of the next-token distribution
// against a baseline cache (f16 by default, --baseline f32 for the
// reference simulation's setting), over --windows windows of
// --window-tokens tokens, second half of each scored.
//
// One fresh process per configuration; each recomputes the baseline on the
// same windows (cheap next to a fresh process per cell, and keeps cells
// independent). Rows that match the reference simulation of issue 3
// (tkv-test-23M, f32 baseline) carry its figures for comparison.
#pragma once

#include <string>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"

namespace tkv::bench {

struct QualityOptions {
  std::string text_file;  // default: tkv-test-heldout.txt under TURBOKV_MODELS
  int window_tokens = 1024;
  int windows = 4;
  std::string baseline = "f16";  // f16 | f32
};

// The configurations of issue 3's table (reproduced by default).
std::string default_quality_kv_list();
// Where the default text lives: $TURBOKV_MODELS/tkv-test-heldout.txt, else
// ../shared/models next to the current directory.
std::string default_heldout_text();

std::vector<PlannedCell> plan_quality(const CommonOptions& o, const QualityOptions& q,
                                      const ModelInfo& info);
// {"options", "rows", "targets"}.
Json summarize_quality(const QualityOptions& q, std::vector<Json> rows);
std::string quality_markdown(const Json& section);

}  // namespace tkv::bench
