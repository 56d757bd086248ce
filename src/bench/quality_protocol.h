// bench quality: how much a KV configuration changes what the model
// predicts, through the real cache path (see text_eval.h): perplexity of a
// text, and KL divergence / top-1 agreement of the next-token distribution
// against a baseline cache (f16 by default, or f32), over --windows windows
// of --window-tokens tokens, second half of each scored.
//
// One fresh process per configuration; each recomputes the baseline on the
// same windows (cheap next to a fresh process per cell, and keeps cells
// independent).
#pragma once

#include <string>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"

namespace tkv::bench {

struct QualityOptions {
  std::string text_file;  // default: find_heldout_text()
  int window_tokens = 1024;
  int windows = 4;
  std::string baseline = "f16";  // f16 | f32
};

// The default configurations: llama.cpp's q8_0 / q4_0 layouts without a
// policy, the TurboQuant codecs without one, and k4v2 with no, one and the
// default sinks + residual window.
std::string default_quality_kv_list();

// The default text of quality and recall.
inline constexpr const char* kHeldoutText = "tkv-test-heldout.txt";
// kHeldoutText in $TURBOKV_MODELS, else next to the model file; "" when
// neither holds it.
std::string find_heldout_text(const std::string& model_path);

std::vector<PlannedCell> plan_quality(const CommonOptions& o, const QualityOptions& q,
                                      const ModelInfo& info);
// {"options", "rows"}.
Json summarize_quality(const QualityOptions& q, std::vector<Json> rows);
std::string quality_markdown(const Json& section);

}  // namespace tkv::bench
