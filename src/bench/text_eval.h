// Perplexity and KL divergence of a text through the real KV cache.
//
// The text is tokenized once and cut into consecutive windows of
// `window_tokens` (BOS first when the vocabulary adds one, as llama.cpp's
// perplexity does). Each window starts from an empty cache and is evaluated
// with Model::eval(all_logits) in chunks of ubatch, so every past token a
// prediction uses was written to and read back from the compressed pages
// (no bypass). Positions in the second half of a window are scored, like
// llama.cpp: logits at position p (window_tokens/2 <= p <= window_tokens-2)
// predict token p+1.
//
// With a baseline configuration (f16 or f32 cache), the same window is
// evaluated first through the baseline cache; its log-probabilities at the
// scored positions are kept ((window/2) x n_vocab floats) and compared with
// the tested cache's: KL(P_baseline || P_tested) per position, top-1
// agreement, and both perplexities.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/json.h"
#include "common/thread_pool.h"
#include "kv/kv_config.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tkv::bench {

struct TextWindows {
  std::vector<std::vector<int32_t>> windows;
  int64_t text_tokens = 0;  // tokens in the whole text
  bool bos = false;         // windows start with BOS
};

// max_windows 0 = every full window of the text. Throws tkv::Error when the
// text has fewer tokens than one window (or than max_windows windows).
TextWindows make_text_windows(const tok::Tokenizer& tokenizer, const std::string& text,
                              int window_tokens, int max_windows, const std::string& source);

struct WindowScores {
  std::vector<double> nll;       // per scored position, tested cache
  std::vector<double> base_nll;  // same positions, baseline cache (empty without one)
  std::vector<double> kl;        // KL(baseline || tested), nats
  std::vector<uint8_t> top1_agree;
};

struct TextEvalOptions {
  int ubatch = 512;
  const kv::KvConfig* baseline = nullptr;  // nullptr: perplexity only
};

// Scores every window; `on_window(i, scores_of_window_i)` is called after each.
std::vector<WindowScores> evaluate_text(
    const model::Model& model, ThreadPool& pool, const kv::KvConfig& tested,
    const TextWindows& windows, const TextEvalOptions& opts,
    const std::function<void(size_t, const WindowScores&)>& on_window = {});

// {"ppl", "baseline_ppl", "ppl_delta_pct", "kl": {mean, p99, max, median,
// stderr}, "top1_agreement", "n_scored", "windows": [...], "kl_samples"}.
Json text_eval_json(const std::vector<WindowScores>& scores, bool with_samples);

double perplexity(const std::vector<double>& nll);

}  // namespace tkv::bench
