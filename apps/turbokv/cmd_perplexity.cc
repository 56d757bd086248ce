// `turbokv perplexity`: perplexity of a text file with every past token read
// from the (compressed) KV cache; --baseline adds KL divergence and top-1
// agreement against an f16/f32 cache. The work is in src/bench/perplexity.h.
#include <span>
#include <string>

#include "bench/perplexity.h"
#include "cli/common_flags.h"
#include "cli/flags.h"
#include "command_registry.h"
#include "model/model.h"

namespace tkv::cli {
namespace {

int perplexity_command(std::span<const std::string> args) {
  ModelFlags model;
  ThreadFlags threads;
  ContextFlags context;
  KvFlags kv;
  bench::PerplexityOptions opts;
  FlagParser flags("perplexity", "turbokv perplexity -m MODEL -f FILE [KV flags] [flags]",
                   "Scores consecutive windows of --window-tokens tokens of FILE (BOS first),\n"
                   "each from an empty cache through the chunked prefill, so every past token\n"
                   "is read back from the compressed pages; the second half of each window is\n"
                   "scored (as llama.cpp's perplexity does). -c is not used: the window is the\n"
                   "context.");
  model.add_to(flags);
  flags.add_string({"-f", "--file"}, "FILE", "text to score (- reads standard input)",
                   &opts.text_path);
  flags.add_int({"--window-tokens"}, "N", "tokens per window (default min(1024, trained context))",
                &opts.window_tokens, 4, 1 << 24);
  flags.add_int({"--windows"}, "N", "windows to score (default: every full window)", &opts.windows,
                0, 1 << 24);
  flags.add_string({"--baseline"}, "f16|f32",
                   "also report KL divergence and top-1 agreement against this cache",
                   &opts.baseline);
  flags.add_string({"--json"}, "FILE", "write the result as JSON", &opts.json_out);
  threads.add_to(flags);
  context.add_to(flags);
  // Without KV flags, the model's own perplexity: an f16 cache (llama.cpp's).
  kv.shorthand = "f16";
  kv.add_to(flags);
  if (!flags.parse(args)) return 0;
  opts.model_path = model.path;
  opts.threads = threads.count();
  opts.ubatch = context.ubatch;
  opts.config = kv.config();
  opts.check_model = [&](const model::Model& m) {
    kv.check_layers(opts.config, m.config().n_layers);
  };
  return bench::run_perplexity(opts);
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(perplexity, "perplexity (and KL vs f16) of a text through the KV cache",
                     tkv::cli::perplexity_command);
