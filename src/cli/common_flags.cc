#include "cli/common_flags.h"

#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "common/error.h"
#include "common/sys_info.h"
#include "common/thread_pool.h"
#include "kv/codec/codec.h"
#include "model/model.h"

namespace tkv::cli {

// ---- model ----------------------------------------------------------------

void ModelFlags::add_to(FlagParser& flags) {
  flags.section("model");
  flags.add_string({"-m", "--model"}, "PATH", "GGUF model file", &path);
  flags.add_bool({"--mmap"},
                 "map the model file in place (its pages shared with the page cache and other "
                 "processes)",
                 &mmap);
  flags.add_bool({"--no-mmap"},
                 "read the model into private memory in 2 MiB pages (fewer TLB misses). Default: "
                 "--no-mmap for a file of 64 MiB or more that takes at most 3/4 of the available "
                 "memory, where the kernel has transparent huge pages; else --mmap",
                 &no_mmap);
}

model::WeightMemory ModelFlags::weight_memory(const std::string& command) const {
  if (mmap && no_mmap) fail(command, ": --mmap and --no-mmap contradict each other; give one");
  return mmap      ? model::WeightMemory::kMap
         : no_mmap ? model::WeightMemory::kCopy
                   : model::WeightMemory::kAuto;
}

std::unique_ptr<model::Model> ModelFlags::load(const std::string& command) const {
  return open(command, weight_memory(command));
}

std::unique_ptr<model::Model> ModelFlags::probe(const std::string& command) const {
  weight_memory(command);
  return open(command, model::WeightMemory::kMap);
}

std::unique_ptr<model::Model> ModelFlags::open(const std::string& command,
                                               model::WeightMemory memory) const {
  if (path.empty()) fail(command, ": no model given (use -m MODEL.gguf)");
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) fail(path, ": model file does not exist");
  if (fs::is_directory(status)) fail(path, ": is a directory, not a model file");
  return model::Model::load(path, memory);
}

// ---- threads --------------------------------------------------------------

void ThreadFlags::add_to(FlagParser& flags) {
  flags.add_int({"-t", "--threads"}, "N",
                "worker threads (default: physical cores, here " +
                    std::to_string(physical_core_count()) + ")",
                &threads, 1, 1024);
}

int ThreadFlags::count() const {
  if (threads <= 0) return physical_core_count();
  const unsigned cpus = std::thread::hardware_concurrency();
  if (!warned_ && cpus > 0 && unsigned(threads) > cpus) {
    std::fprintf(stderr,
                 "turbokv: warning: -t %d is more than the %u CPUs here: the extra threads only "
                 "compete for them (default: %d)\n",
                 threads, cpus, physical_core_count());
    warned_ = true;
  }
  return threads;
}

// ---- context --------------------------------------------------------------

void ContextFlags::add_to(FlagParser& flags) {
  flags.add_int({"-c", "--ctx-size"}, "N",
                "context length in tokens (default: the model's trained context)", &ctx, 1,
                1 << 24);
  add_ubatch_to(flags);
}

void ContextFlags::add_ubatch_to(FlagParser& flags) {
  flags.add_int({"-ub", "--ubatch", "--ubatch-size"}, "N", "tokens per prefill chunk (default 512)",
                &ubatch, 1, 1 << 16);
}

int ContextFlags::context_for(const model::Model& model) const {
  const int trained = model.kv_shape(0).max_tokens;
  if (ctx <= 0) return trained;
  if (!warned_ && ctx > trained) {
    std::fprintf(stderr,
                 "turbokv: warning: -c %d is above the model's trained context of %d tokens: "
                 "output past %d tokens may degrade\n",
                 ctx, trained, trained);
    warned_ = true;
  }
  return ctx;
}

// ---- progress -------------------------------------------------------------

void ProgressFlags::add_to(FlagParser& flags) {
  flags.add_bool({"-q", "--quiet"}, "no prefill progress", &quiet);
  flags.add_bool({"--progress"},
                 "prefill progress on stderr even when it is not a terminal\n"
                 "(default: on a terminal, for prompts that take over a second)",
                 &progress);
}

PrefillProgress ProgressFlags::mode() const {
  if (quiet && progress) fail("-q and --progress contradict each other: give one");
  if (quiet) return PrefillProgress::kOff;
  return progress ? PrefillProgress::kAlways : PrefillProgress::kAuto;
}

// ---- KV cache -------------------------------------------------------------

void KvFlags::add_to(FlagParser& flags, Form form) {
  form_ = form;
  const bool list = form == Form::kList;
  if (!list && shorthand.empty()) shorthand = kDefaultKvCache;
  flags.section("KV cache");
  flags.add_string({"-ctk", "--cache-type-k"}, "CODEC",
                   std::string("codec of the keys: ") + kKvCodecNames +
                       (list ? " (default f16);\nwith -ctv, the one configuration to run "
                               "(instead of --kv)"
                             : " (default: --kv's keys)"),
                   &cache_type_k);
  flags.add_string(
      {"-ctv", "--cache-type-v"}, "CODEC",
      list ? "codec of the values (default f16)" : "codec of the values (default: --kv's values)",
      &cache_type_v);
  if (list)
    flags.add_string({"--kv"}, "LIST",
                     "KV configurations CODECS[:POLICY], e.g. f16,k4v2,tq4/tq2:s4+r64;\n"
                     "in `bench all` every protocol runs them unless its own list is given",
                     &shorthand);
  else
    flags.add_string({"--kv"}, "SPEC",
                     "both codecs at once: a codec name, or kAvB = tqA keys, tqB values\n"
                     "(A, B in 1..4; 8 = q8_0h), e.g. k8v4 or f16; -ctk/-ctv override a\n"
                     "half (default " +
                         shorthand + ")",
                     &shorthand);
  // The ranges are the cache's own limits, so a bad value is refused here,
  // naming the flag.
  flags.add_int({"--kv-sinks"}, "N",
                list ? "sinks for configurations without a policy (default 4 when quantized)"
                     : "first N tokens stay f16 (default 4 with a quantized codec, else 0)",
                &sinks, 0, 1024);
  flags.add_int({"--kv-residual"}, "N",
                list ? "residual f16 tokens for configurations without a policy\n"
                       "(default 64 when quantized)"
                     : "newest N tokens stay f16 (default 64 with a quantized codec, else 0)",
                &residual, 0, 65536);
  flags.add_int({"--kv-window"}, "N",
                list ? "window for configurations without a policy (0 = none)"
                     : "keep only the sinks and the newest N tokens (StreamingLLM; 0 = keep all);\n"
                       "memory stays flat and the sequence may run past -c",
                &window, 0, 1 << 30);
  flags.add_string({"--kv-swa"}, "MODE",
                   "window layers (Gemma, gpt-oss): 'full' (default) keeps their whole history,\n"
                   "compressed, so prompts are reused and branched at any position; 'window'\n"
                   "keeps only what their window still sees (least memory)",
                   &swa);
  flags.add_int({"--kv-snapshots"}, "N",
                "recurrent layers (Qwen3.5): states kept at prompt starts and ends, so a\n"
                "sequence goes back there and feeds only the tokens since (default 4)",
                &snapshots, 0, 1024);
  flags.add_int({"--kv-snapshot-spacing"}, "N",
                "recurrent layers: within a long prompt, a snapshot past every N tokens\n"
                "(default 2048; 0 = at its start and end only)",
                &snapshot_spacing, 0, 1 << 30);
  flags.add_int({"--kv-select"}, "N",
                list ? "page selection for configurations without one (tokens; 0 = dense)"
                     : "at decode each query reads its best pages up to N tokens, chosen by\n"
                       "per-page bounds on q.k, plus sinks, residual and newest page (0 = dense)",
                &select, 0, 1 << 30);
  flags.add_string({"--kv-select-prefill"}, "MODE",
                   "with --kv-select: 'select' (default) selects for prefill chunks too,\n"
                   "'dense' reads every page during prefill",
                   &select_prefill);
  flags.add_strings({"--kv-layer-override"}, "SPEC",
                    "per-layer codecs, e.g. 0,-1:k8v4 (repeatable; -1 = last layer)",
                    &layer_overrides);
  flags.add_int({"--kv-page"}, "N", "tokens per page, a multiple of 16 (default 64)", &page, 16,
                4096);
  flags.add_string({"--kv-budget"}, "SIZE",
                   list ? "byte budget of each cell's page pool, e.g. 2G (default none)"
                        : "byte budget of the page pool, e.g. 2G (default none)",
                   &budget);
  if (!list)
    flags.add_string({"--kv-spill-dir"}, "DIR",
                     "with --kv-budget: move the coldest pages, still compressed, to an\n"
                     "unnamed page file in DIR instead of failing (default none)",
                     &spill_dir);
  flags.add_uint64({"--kv-seed"}, "N",
                   "seed of the per-layer rotations, decimal or 0x hex (default 0x74626b76)",
                   &seed);
}

uint64_t KvFlags::budget_bytes() const {
  if (budget.empty()) return 0;
  try {
    return parse_bytes(budget);
  } catch (const Error& e) {
    fail("--kv-budget: ", e.what());
  }
}

namespace {

kv::CodecSpec codec_or_fail(const std::string& flag, const std::string& name) {
  if (auto spec = kv::parse_codec(name)) return *spec;
  fail(flag, ": unknown KV codec '", name, "' (known: ", kKvCodecNames, ")");
}

// The one rule between the policy settings that the cache would refuse
// (its own message speaks of the configuration, these of the flags).
bool window_too_small(const kv::KvConfig& c) {
  return c.window > 0 && c.window <= c.effective_residual();
}

}  // namespace

kv::KvConfig KvFlags::config() const {
  kv::KvConfig c;
  c.sinks = sinks;
  c.residual = residual;
  c.window = window;
  for (const auto& text : layer_overrides) {
    try {
      for (auto& o : kv::parse_layer_overrides(text)) c.overrides.push_back(o);
    } catch (const Error& e) {
      fail("--kv-layer-override: ", e.what());
    }
  }
  if (page % 16 != 0) fail("--kv-page ", page, ": must be a multiple of 16 in [16, 4096]");
  c.page_tokens = page;
  if (!budget.empty()) {
    c.budget_bytes = budget_bytes();
    if (c.budget_bytes == 0) fail("--kv-budget: must be larger than 0");
  }
  if (!spill_dir.empty()) {
    if (budget.empty()) fail("--kv-spill-dir: needs --kv-budget (the RAM the pages may hold)");
    c.spill_dir = spill_dir;
  }
  c.seed = seed;
  c.select = select;
  if (!select_prefill.empty()) {
    if (select_prefill != "select" && select_prefill != "dense")
      fail("--kv-select-prefill '", select_prefill, "': must be 'select' or 'dense'");
    c.select_prefill = select_prefill == "select";
  }
  if (!swa.empty()) {
    if (swa != "full" && swa != "window") fail("--kv-swa '", swa, "': must be 'full' or 'window'");
    c.swa_window_only = swa == "window";
  }
  if (snapshots >= 0) c.state_snapshots = snapshots;
  if (snapshot_spacing >= 0) c.state_snapshot_spacing = snapshot_spacing;
  if (form_ == Form::kList) return c;
  if (!shorthand.empty()) c = parse_kv_spec(shorthand, c).config;
  if (!cache_type_k.empty()) c.k = codec_or_fail("-ctk", cache_type_k);
  if (!cache_type_v.empty()) c.v = codec_or_fail("-ctv", cache_type_v);
  if (window_too_small(c))
    fail("--kv-window ", c.window, " must be larger than the residual window (",
         c.effective_residual(), " tokens; set --kv-residual lower)");
  return c;
}

std::string KvFlags::list() const {
  if (cache_type_k.empty() && cache_type_v.empty()) return shorthand;
  if (!shorthand.empty())
    fail("--kv and -ctk/-ctv: give the configurations as --kv LIST, or one as -ctk/-ctv");
  if (!cache_type_k.empty()) codec_or_fail("-ctk", cache_type_k);
  if (!cache_type_v.empty()) codec_or_fail("-ctv", cache_type_v);
  return (cache_type_k.empty() ? "f16" : cache_type_k) + "/" +
         (cache_type_v.empty() ? "f16" : cache_type_v);
}

std::vector<KvSpec> KvFlags::configs(std::string_view list, std::string_view flag) const {
  std::vector<KvSpec> out = parse_kv_spec_list(list, config(), flag);
  for (const auto& spec : out)
    if (window_too_small(spec.config))
      fail(flag, " ", spec.label, ": window ", spec.config.window,
           " must be larger than the residual window (", spec.config.effective_residual(),
           " tokens)");
  return out;
}

void KvFlags::check_layers(const kv::KvConfig& config, int n_layers) const {
  for (const auto& o : config.overrides) {
    const int l = o.layer < 0 ? n_layers + o.layer : o.layer;
    if (l < 0 || l >= n_layers)
      fail("--kv-layer-override: layer ", o.layer, " does not exist (the model has ", n_layers,
           " layers)");
  }
}

std::string KvFlags::apply_model_window(int sliding_window, kv::KvConfig& config) const {
  if (sliding_window <= 0 || window > 0) return "";
  config.window = sliding_window;
  if (sinks < 0) config.sinks = 0;
  return str("note: the model uses sliding-window attention over ", sliding_window,
             " tokens: KV window ", config.window, ", sinks ", config.effective_sinks(),
             " (set --kv-window to change)");
}

std::string KvFlags::adapt_to(const model::Model& model, kv::KvConfig& config) const {
  check_layers(config, model.config().n_layers);
  for (const model::LayerSpec& s : model.config().layers)
    if (s.attention.kind == model::AttentionKind::Window) return "";
  return apply_model_window(model.config().sliding_window, config);
}

// ---- sampling -------------------------------------------------------------

void SamplingFlags::add_to(FlagParser& flags) {
  flags.section("sampling");
  flags.add_float({"--temp"}, "T", "temperature; 0 = greedy (default 0.8)", &sampler.temperature,
                  0.0, 100.0);
  flags.add_int({"--top-k"}, "K", "keep the K most likely tokens; 0 = off (default 40)",
                &sampler.top_k, 0);
  flags.add_float({"--top-p"}, "P", "nucleus: smallest set with probability >= P (default 0.95)",
                  &sampler.top_p, 0.0, 1.0);
  flags.add_float({"--min-p"}, "P", "drop tokens below P x the top probability (default 0.05)",
                  &sampler.min_p, 0.0, 1.0);
  flags.add_float({"--repeat-penalty"}, "X", "repetition penalty; 1 = off (default 1.0)",
                  &sampler.repeat_penalty, 0.0, 100.0);
  flags.add_int({"--repeat-last-n"}, "N",
                "tokens the penalty looks back; 0 = off, -1 = all (default 64)",
                &sampler.repeat_last_n, -1);
  flags.add_custom({"-s", "--seed"}, "N", "random seed (default: random, printed in the summary)",
                   [this](const std::string& flag, const std::string& value) {
                     sampler.seed = parse_uint64(flag, value);
                     seed_given = true;
                   });
}

sample::SamplerConfig SamplingFlags::config() {
  if (!seed_given) {
    std::random_device rd;
    sampler.seed = (uint64_t(rd()) << 32) ^ rd();
    seed_given = true;  // the same seed on a second call
  }
  if (sampler.top_p <= 0.0f) fail("--top-p: must be larger than 0");
  if (sampler.repeat_penalty <= 0.0f) fail("--repeat-penalty: must be larger than 0");
  sample::validate(sampler);
  return sampler;
}

std::string describe_sampling(const sample::SamplerConfig& c) {
  if (c.temperature == 0.0f) {
    if (c.repeat_penalty != 1.0f)
      return str("greedy, repeat-penalty ", c.repeat_penalty, " over ", c.repeat_last_n);
    return "greedy";
  }
  std::string s =
      str("temp ", c.temperature, " top-k ", c.top_k, " top-p ", c.top_p, " min-p ", c.min_p);
  if (c.repeat_penalty != 1.0f)
    s += str(" repeat-penalty ", c.repeat_penalty, " over ", c.repeat_last_n);
  return s + str(" seed ", c.seed);
}

}  // namespace tkv::cli
