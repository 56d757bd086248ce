#include "bench/text_eval.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bench/stats.h"
#include "common/error.h"
#include "common/vec_math.h"
#include "kv/kv_cache.h"

namespace tkv::bench {

namespace {

// log-softmax of `logits` into `out` (the normalizer summed in double).
void log_softmax(std::span<const float> logits, float* out) {
  const double lse = log_sum_exp(logits.data(), int64_t(logits.size()));
  for (size_t i = 0; i < logits.size(); ++i) out[i] = float(double(logits[i]) - lse);
}

}  // namespace

TextWindows make_text_windows(const tok::Tokenizer& tokenizer, const std::string& text,
                              int window_tokens, int max_windows, const std::string& source) {
  if (window_tokens < 4) fail("--window-tokens ", window_tokens, ": must be at least 4");
  TextWindows tw;
  const std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/false, false);
  tw.text_tokens = int64_t(ids.size());
  tw.bos = tokenizer.add_bos() && tokenizer.bos() != tok::kNoToken;
  const size_t per_window = size_t(window_tokens) - (tw.bos ? 1 : 0);
  const size_t available = ids.size() / per_window;
  if (available == 0 || (max_windows > 0 && available < size_t(max_windows)))
    fail(source, ": ", ids.size(), " tokens, too short for ", std::max(max_windows, 1),
         " window(s) of ", window_tokens, " tokens");
  const size_t n = max_windows > 0 ? size_t(max_windows) : available;
  for (size_t w = 0; w < n; ++w) {
    std::vector<int32_t> win;
    win.reserve(size_t(window_tokens));
    if (tw.bos) win.push_back(tokenizer.bos());
    win.insert(win.end(), ids.begin() + std::ptrdiff_t(w * per_window),
               ids.begin() + std::ptrdiff_t((w + 1) * per_window));
    tw.windows.push_back(std::move(win));
  }
  return tw;
}

std::vector<WindowScores> evaluate_text(
    const model::Model& model, ThreadPool& pool, const kv::KvConfig& tested,
    const TextWindows& windows, const TextEvalOptions& opts,
    const std::function<void(size_t, const WindowScores&)>& on_window) {
  const size_t V = size_t(model.config().n_vocab);
  model::EvalOptions eo;
  eo.ubatch = opts.ubatch;
  eo.all_logits = true;
  std::vector<WindowScores> out;
  std::vector<float> base_logp, logp(V);
  for (size_t w = 0; w < windows.windows.size(); ++w) {
    const std::vector<int32_t>& toks = windows.windows[w];
    const int64_t N = int64_t(toks.size());
    const int64_t first = N / 2, last = N - 2;  // scored logits positions, inclusive
    const size_t n_scored = size_t(last - first + 1);
    WindowScores ws;
    if (opts.baseline) {
      base_logp.assign(n_scored * V, 0.0f);
      kv::KvCache cache(model.kv_shape(int(N)), *opts.baseline);
      model.eval(
          cache, toks, pool,
          [&](int64_t pos, std::span<const float> logits) {
            if (pos < first || pos > last) return;
            float* dst = base_logp.data() + size_t(pos - first) * V;
            log_softmax(logits, dst);
            ws.base_nll.push_back(-double(dst[size_t(toks[size_t(pos + 1)])]));
          },
          eo);
    }
    kv::KvCache cache(model.kv_shape(int(N)), tested);
    model.eval(
        cache, toks, pool,
        [&](int64_t pos, std::span<const float> logits) {
          if (pos < first || pos > last) return;
          log_softmax(logits, logp.data());
          ws.nll.push_back(-double(logp[size_t(toks[size_t(pos + 1)])]));
          if (!opts.baseline) return;
          const float* b = base_logp.data() + size_t(pos - first) * V;
          double kl = 0;
          for (size_t i = 0; i < V; ++i) kl += std::exp(double(b[i])) * (double(b[i]) - logp[i]);
          ws.kl.push_back(std::max(0.0, kl));  // rounding can leave -1e-12
          ws.top1_agree.push_back(argmax(b, int64_t(V)) == argmax(logp.data(), int64_t(V)));
        },
        eo);
    if (on_window) on_window(w, ws);
    out.push_back(std::move(ws));
  }
  return out;
}

double perplexity(const std::vector<double>& nll) {
  if (nll.empty()) return 0;
  return std::exp(std::accumulate(nll.begin(), nll.end(), 0.0) / double(nll.size()));
}

Json text_eval_json(const std::vector<WindowScores>& scores, bool with_samples) {
  std::vector<double> nll, base_nll, kl;
  size_t agree = 0, n_top1 = 0;
  Json windows = Json::array();
  for (const auto& w : scores) {
    nll.insert(nll.end(), w.nll.begin(), w.nll.end());
    base_nll.insert(base_nll.end(), w.base_nll.begin(), w.base_nll.end());
    kl.insert(kl.end(), w.kl.begin(), w.kl.end());
    const size_t a = size_t(std::count(w.top1_agree.begin(), w.top1_agree.end(), uint8_t(1)));
    agree += a;
    n_top1 += w.top1_agree.size();
    Json jw = {{"ppl", perplexity(w.nll)}, {"n_scored", w.nll.size()}};
    if (!w.kl.empty()) {
      jw["baseline_ppl"] = perplexity(w.base_nll);
      jw["kl_mean"] = summarize(w.kl).mean;
      jw["top1_agreement"] = double(a) / double(w.top1_agree.size());
    }
    windows.push_back(std::move(jw));
  }
  Json j = {{"ppl", perplexity(nll)}, {"n_scored", nll.size()}};
  if (!kl.empty()) {
    const Summary s = summarize(kl);
    double var = 0;
    for (double x : kl) var += (x - s.mean) * (x - s.mean);
    var /= double(std::max<size_t>(kl.size() - 1, 1));
    const double base = perplexity(base_nll);
    j["baseline_ppl"] = base;
    j["ppl_delta_pct"] = base > 0 ? 100.0 * (perplexity(nll) / base - 1.0) : 0.0;
    j["kl"] = {{"mean", s.mean},
               {"median", s.median},
               {"p99", percentile(kl, 0.99)},
               {"max", s.max},
               {"stderr", std::sqrt(var / double(kl.size()))}};
    j["top1_agreement"] = double(agree) / double(n_top1);
  }
  j["windows"] = windows;
  if (with_samples && !kl.empty()) {
    Json samples = Json::array();
    for (double x : kl) samples.push_back(float(x));
    j["kl_samples"] = samples;
  }
  return j;
}

}  // namespace tkv::bench
