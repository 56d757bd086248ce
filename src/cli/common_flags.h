// Flag groups shared by the subcommands (run, chat, bench, perplexity, ...).
// Each group owns its values and defaults, declares its flags on a
// FlagParser, and turns them into the engine's configuration objects:
//
//   ModelFlags model; ThreadFlags threads; KvFlags kv;
//   model.add_to(flags); threads.add_to(flags); kv.add_to(flags);
//   if (!flags.parse(args)) return 0;
//   auto m = model.load();                  // tkv::Error if missing / corrupt
//   ThreadPool pool(threads.count());
//   kv::KvConfig config = kv.config();      // tkv::Error for an unknown codec
//
// Flag names follow llama.cpp where it has one (-m -t -c -ub -ctk -ctv --temp
// --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/flags.h"
#include "cli/kv_spec.h"
#include "kv/kv_config.h"
#include "sample/sampler.h"

namespace tkv::model {
class Model;
enum class WeightMemory;
}  // namespace tkv::model

namespace tkv::cli {

// -m / --model PATH, --mmap / --no-mmap (default: model::WeightMemory::kAuto)
struct ModelFlags {
  std::string path;
  bool mmap = false, no_mmap = false;

  void add_to(FlagParser& flags);
  // What --mmap / --no-mmap ask for; tkv::Error (naming `command`) when both.
  model::WeightMemory weight_memory(const std::string& command) const;
  // Loads the model as weight_memory() says; tkv::Error when -m was not
  // given, the file is missing, unreadable or not a usable model.
  std::unique_ptr<model::Model> load(const std::string& command) const;
  // The same checks, the file mapped whatever the flags (a look at its
  // header and tensors, the weights left unread).
  std::unique_ptr<model::Model> probe(const std::string& command) const;

 private:
  std::unique_ptr<model::Model> open(const std::string& command, model::WeightMemory memory) const;
};

// -t / --threads N (default: physical cores)
struct ThreadFlags {
  int threads = 0;  // 0 = physical cores

  void add_to(FlagParser& flags);
  // The thread count; the first call warns on stderr when -t asks for more
  // threads than the machine has CPUs (they would only compete for them).
  int count() const;

 private:
  mutable bool warned_ = false;
};

// -c / --ctx-size N (default: the model's trained context), -ub / --ubatch N
struct ContextFlags {
  int ctx = 0;  // 0 = the model's trained context length
  int ubatch = 512;

  void add_to(FlagParser& flags);
  // -ub alone, for commands whose -c means something else (bench: a list).
  void add_ubatch_to(FlagParser& flags);
  // The context length to allocate for `model`; warns on stderr (once)
  // when -c is above the model's trained context.
  int context_for(const model::Model& model) const;

 private:
  mutable bool warned_ = false;
};

// Prefill progress on stderr: kAuto draws it on a terminal once a prefill has
// taken a second; kAlways (--progress) prints it whatever stderr is and
// however short the prompt; kOff (-q) never. The app draws the bar
// (apps/turbokv/prefill_progress.h).
enum class PrefillProgress { kOff, kAuto, kAlways };

// -q / --quiet, --progress: prefill progress on stderr (run, chat).
struct ProgressFlags {
  bool quiet = false, progress = false;

  void add_to(FlagParser& flags);
  // tkv::Error when both are given.
  PrefillProgress mode() const;
};

// The KV cache of run, chat and serve when --kv is not given: k4v2, i.e.
// TurboQuant 4-bit keys and 2-bit values, with the quantized codecs' policy
// (the first 4 tokens and the newest 64 stay f16): ~5x fewer bytes per
// token than f16. Chosen by measured quality (docs/results/default-cache,
// on tkv-test-23M against an f16 cache): mean KL 0.011, top-1 agreement
// 94%, perplexity within noise of f16's; k4v4 (KL 0.004, 97%) and k8v4
// (0.0005, 99%) cost 1.3x and 2x its bytes. docs/CLI.md has the figures.
inline constexpr const char* kDefaultKvCache = "k4v2";

// KV cache: -ctk / -ctv / --kv and the policies. One definition for every
// command: run, chat, serve and perplexity take one configuration (Form::kOne);
// the bench protocols compare a list of them (Form::kList: --kv LIST, the
// policy flags the defaults of every item; cli/kv_spec.h has the grammar).
struct KvFlags {
  enum class Form { kOne, kList };

  std::string cache_type_k, cache_type_v;
  // --kv as given: one item (kOne) or a list (kList). In the kOne form,
  // add_to makes kDefaultKvCache the default unless the command chose one
  // before (perplexity: f16).
  std::string shorthand;
  int sinks = -1, residual = -1, window = 0, page = 64;
  int select = 0;              // --kv-select N (0 = dense)
  std::string select_prefill;  // --kv-select-prefill select|dense ("" = select)
  std::string swa;             // --kv-swa full|window ("" = full)
  int snapshots = -1;          // --kv-snapshots (-1 = the default)
  int snapshot_spacing = -1;   // --kv-snapshot-spacing (-1 = the default)
  std::vector<std::string> layer_overrides;
  std::string budget;
  std::string spill_dir;  // --kv-spill-dir DIR (kOne form only; needs --kv-budget)
  uint64_t seed = kv::KvConfig{}.seed;

  void add_to(FlagParser& flags, Form form = Form::kOne);
  // The KvConfig these flags describe. -ctk / -ctv override the matching half
  // of --kv; a policy written in --kv (k4v2:s0+r0) wins over --kv-sinks and
  // --kv-residual. tkv::Error naming the flag for an unknown codec, a bad
  // override, size or policy. In the kList form: the defaults of the items.
  kv::KvConfig config() const;
  // --kv-budget in bytes (0 when not given; 0 given is 0); tkv::Error naming
  // the flag for a bad size.
  uint64_t budget_bytes() const;

  // kList form: --kv as given, else the one configuration -ctk / -ctv
  // describe ("q8_0/q4_0"), else "". tkv::Error when both are given.
  std::string list() const;
  // kList form: the configurations of `list` (a protocol's own list, list()
  // or a default), each starting from config(); `flag` names it in errors.
  std::vector<KvSpec> configs(std::string_view list, std::string_view flag = "--kv") const;

  // Checks `config`'s layer overrides against a model of `n_layers` layers
  // (tkv::Error naming --kv-layer-override for a layer it does not have).
  void check_layers(const kv::KvConfig& config, int n_layers) const;
  // Mistral v0.1-style sliding-window attention (attention.sliding_window =
  // W > 0): every query attends to exactly the newest W positions, which is
  // the KV window policy with no sinks, so a model that declares it gets
  // `--kv-window W --kv-sinks 0` unless these flags chose a window (or
  // sinks) themselves. Returns the note to print, or "" when nothing changed.
  std::string apply_model_window(int sliding_window, kv::KvConfig& config) const;
  // What a command does once the model is loaded: check_layers, then
  // apply_model_window for a model whose sliding window is not a layer
  // kind of its own (Mistral v0.1; Gemma and gpt-oss window their layers
  // themselves, kv::KvLayerShape::window). Returns the note to print, or "".
  std::string adapt_to(const model::Model& model, kv::KvConfig& config) const;

 private:
  Form form_ = Form::kOne;
};

// Sampling: --temp --top-k --top-p --min-p --repeat-penalty --repeat-last-n --seed
struct SamplingFlags {
  sample::SamplerConfig sampler;  // llama.cpp's defaults
  bool seed_given = false;

  void add_to(FlagParser& flags);
  // The validated sampler configuration; without --seed, a random seed is
  // drawn here (report it: config().seed, so a run can be reproduced).
  sample::SamplerConfig config();
};

// "greedy" or "temp 0.8 top-k 40 top-p 0.95 min-p 0.05 seed 42", for summaries.
std::string describe_sampling(const sample::SamplerConfig& config);

}  // namespace tkv::cli
