// `turbokv synth`: writes a GGUF with a real model's shapes and deterministic
// random weights (src/model/synth.h), to measure memory and speed at real
// shapes without a download.
#include <unistd.h>

#include <cstdio>
#include <span>
#include <string>

#include "cli/flags.h"
#include "command_registry.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "common/thread_pool.h"
#include "common/timer.h"
#include "model/synth.h"
#include "output.h"

namespace tkv::cli {
namespace {

std::string preset_table() {
  std::string out;
  char line[200];
  std::snprintf(line, sizeof line, "%-18s %-8s %6s %6s %9s %8s %6s %8s %8s  %s\n", "preset", "arch",
                "layers", "embd", "heads/kv", "head_dim", "ff", "vocab", "ctx", "experts");
  out += line;
  for (const auto& name : model::synth_preset_names()) {
    const model::SynthSpec s = model::synth_preset(name);
    const std::string experts = s.n_experts > 0 ? std::to_string(s.n_experts_used) + "/" +
                                                      std::to_string(s.n_experts) + " x " +
                                                      std::to_string(s.n_ff_expert)
                                                : "-";
    std::snprintf(line, sizeof line, "%-18s %-8s %6d %6d %5d/%-3d %8d %6d %8d %8d  %s\n",
                  name.c_str(), s.arch.c_str(), s.n_layers, s.n_embd, s.n_heads, s.n_kv_heads,
                  s.head_dim, s.n_ff, s.n_vocab, s.n_ctx, experts.c_str());
    out += line;
  }
  return out;
}

// Progress on stderr: rewritten in place on a terminal, one line per 10%
// otherwise (logs and tests).
class ProgressLine {
 public:
  ProgressLine() : tty_(::isatty(2) == 1) {}
  void update(uint64_t done, uint64_t total) {
    const int percent = total ? int(100.0 * double(done) / double(total)) : 100;
    const int step = tty_ ? percent : percent / 10 * 10;
    if (step == last_) return;
    last_ = step;
    const double mb = double(done) / 1e6;
    const double s = clock_.seconds();
    if (tty_)
      std::fprintf(stderr, "\rsynth: %3d%%  %.1f MB written  %.1f MB/s ", percent, mb,
                   s > 0 ? mb / s : 0.0);
    else
      std::fprintf(stderr, "synth: %3d%%  %.1f MB written\n", step, mb);
  }
  void finish() {
    if (tty_ && last_ >= 0) std::fputc('\n', stderr);
  }

 private:
  bool tty_;
  int last_ = -1;
  Stopwatch clock_;
};

int synth_main(std::span<const std::string> args) {
  std::string like, out_path, vocab_from, type = "f16";
  int layers = 0, threads = 0, experts = 0, experts_used = 0, expert_ff = 0;
  uint64_t seed = 0;
  bool list = false;
  FlagParser flags("synth",
                   "turbokv synth --like NAME --out FILE [flags]   |   turbokv synth --list",
                   "Writes a GGUF with the shapes and metadata of a real model and deterministic\n"
                   "random weights (same options, same bytes). Without --vocab-from the token\n"
                   "strings are invented; with it, a real tokenizer is copied.");
  flags.add_string({"--like"}, "NAME", "preset to copy the shapes of (see --list)", &like);
  flags.add_string({"-o", "--out"}, "FILE", "output GGUF path", &out_path);
  flags.add_int({"--layers"}, "N", "keep the per-layer shapes but use N layers", &layers, 1, 1024);
  flags.add_int({"--experts"}, "N", "MoE presets: N experts per layer (shrinks a test model)",
                &experts, 1, 4096);
  flags.add_int({"--experts-used"}, "K", "MoE presets: K experts chosen per token", &experts_used,
                1, 4096);
  flags.add_int({"--expert-ff"}, "N", "MoE presets: each expert's hidden width", &expert_ff, 1,
                1 << 20);
  flags.add_string({"--vocab-from"}, "GGUF", "copy the tokenizer (tokenizer.*) of this GGUF file",
                   &vocab_from);
  flags.add_string({"--type"}, "TYPE",
                   "weight type of the matrices: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0,\n"
                   "q5_1, q2_K..q6_K, q4_K_M (llama.cpp's mix), ... (default f16)",
                   &type);
  flags.add_uint64({"--seed"}, "N", "weight seed (default 0)", &seed);
  flags.add_int({"-t", "--threads"}, "N", "generation threads (default: physical cores)", &threads,
                1, 1024);
  flags.add_bool({"--list"}, "print the presets and exit", &list);
  if (!flags.parse(args)) return 0;

  if (list) {
    write_stdout(preset_table());
    return 0;
  }
  if (like.empty()) fail("synth: --like NAME is required (see turbokv synth --list)");
  if (out_path.empty()) fail("synth: --out FILE is required");
  check_output_path(out_path, "--out");  // before minutes of writing, not after

  ThreadPool pool(threads > 0 ? threads : physical_core_count());
  ProgressLine progress;
  model::SynthOptions opts;
  opts.layers = layers;
  opts.experts = experts;
  opts.experts_used = experts_used;
  opts.expert_ff = expert_ff;
  opts.vocab_from = vocab_from;
  opts.type = type;
  opts.seed = seed;
  opts.pool = &pool;
  opts.progress = [&](uint64_t done, uint64_t total) { progress.update(done, total); };
  const Stopwatch clock;
  const model::SynthResult r = model::synth(like, out_path, opts);
  progress.finish();
  std::fprintf(stderr,
               "synth: wrote %s: %s, %d layers, vocabulary %d, %zu tensors, %.3fB parameters, %s "
               "of weights (%s) in %.1f s\n",
               out_path.c_str(), r.spec.preset.c_str(), r.spec.n_layers, r.spec.n_vocab,
               r.n_tensors, double(r.n_params) / 1e9, format_bytes(r.tensor_bytes).c_str(),
               type.c_str(), clock.seconds());
  return 0;
}

}  // namespace
}  // namespace tkv::cli

TKV_REGISTER_COMMAND(synth, "write a GGUF with a real model's shapes and random weights",
                     tkv::cli::synth_main);
