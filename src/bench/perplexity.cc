#include "bench/perplexity.h"

#include <algorithm>
#include <cstdio>

#include "bench/json.h"
#include "bench/table.h"
#include "bench/text_eval.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "common/timer.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tkv::bench {

int run_perplexity(const PerplexityOptions& o) {
  if (o.model_path.empty()) fail("perplexity: no model given (use -m MODEL.gguf)");
  if (o.text_path.empty()) fail("perplexity: no text given (use -f FILE)");
  kv::KvConfig baseline;
  if (!o.baseline.empty() &&
      (!kv::parse_kv_shorthand(o.baseline, baseline.k, baseline.v) || baseline.k.quantized()))
    fail("--baseline ", o.baseline, ": use f16 or f32");
  if (!o.json_out.empty()) check_output_path(o.json_out, "--json");
  // Read the text before the model: "-f -" is standard input, and a bad
  // path should fail before seconds of loading.
  const std::string text = read_input_file(o.text_path);

  const auto model = model::Model::load(o.model_path);
  if (o.check_model) o.check_model(*model);
  const int trained = model->config().n_ctx_train > 0 ? model->config().n_ctx_train : 1024;
  const int window = o.window_tokens > 0 ? o.window_tokens : std::min(1024, trained);
  ThreadPool pool(std::max(1, o.threads));
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(model->gguf());
  const TextWindows tw = make_text_windows(tokenizer, text, window, o.windows, o.text_path);
  { kv::KvCache probe(model->kv_shape(window), o.config); }  // a bad configuration fails now
  if (o.progress)
    std::fprintf(stderr, "perplexity: %zu window(s) of %d tokens (%lld in the text), KV %s\n",
                 tw.windows.size(), window, (long long)tw.text_tokens, o.config.describe().c_str());
  TextEvalOptions eo;
  eo.ubatch = o.ubatch;
  eo.baseline = o.baseline.empty() ? nullptr : &baseline;
  Stopwatch clock;
  const auto scores =
      evaluate_text(*model, pool, o.config, tw, eo, [&](size_t i, const WindowScores& w) {
        if (!o.progress) return;
        std::fprintf(stderr, "[%zu/%zu] ppl %.4f", i + 1, tw.windows.size(), perplexity(w.nll));
        if (!w.kl.empty()) std::fprintf(stderr, "  baseline ppl %.4f", perplexity(w.base_nll));
        std::fprintf(stderr, "  (%.1f s)\n", clock.seconds());
      });
  Json j = text_eval_json(scores, /*with_samples=*/false);
  j["model"] = o.model_path;
  j["file"] = o.text_path;
  j["kv"] = o.config.describe();
  j["window_tokens"] = window;
  j["windows_scored"] = tw.windows.size();
  j["seconds"] = clock.seconds();
  std::printf("PPL %.4f over %zu scored tokens (%zu window(s) of %d, second half of each), KV %s\n",
              j["ppl"].get<double>(), j["n_scored"].get<size_t>(), tw.windows.size(), window,
              o.config.describe().c_str());
  if (eo.baseline)
    std::printf(
        "vs %s cache: PPL %.4f (%+.2f%%), KL mean %s p99 %s max %s, top-1 agreement %.1f%%\n",
        o.baseline.c_str(), j["baseline_ppl"].get<double>(), j["ppl_delta_pct"].get<double>(),
        fmt_general(j["kl"]["mean"].get<double>(), 4).c_str(),
        fmt_general(j["kl"]["p99"].get<double>(), 4).c_str(),
        fmt_general(j["kl"]["max"].get<double>(), 4).c_str(),
        100.0 * j["top1_agreement"].get<double>());
  std::fflush(stdout);
  if (!o.json_out.empty()) write_file_atomic(o.json_out, j.dump(1) + "\n");
  return 0;
}

}  // namespace tkv::bench
