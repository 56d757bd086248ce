// `turbokv synth`: GGUF files with a real model's shapes and metadata and
// deterministic random weights, so that memory and speed can be measured at
// real shapes without downloading anything.
//
// Weights are uniform with the variance of N(0, 1/fan_in) (activations keep
// unit scale through every layer), norm weights 1 +- 0.1, biases +- 0.1.
// Every row is generated from its own seed (seed, tensor name, row), so the
// output is the same bytes for the same options whatever the thread count.
// Tensors are generated and written one at a time (the GgufWriter filler
// callback): memory stays at one tensor, whatever the model size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/thread_pool.h"

namespace tkv::gguf {
class GgufWriter;
}

namespace tkv::model {

// Shapes and metadata of a model to synthesize. Presets reproduce real
// models' config.json; tests may shrink any field.
struct SynthSpec {
  std::string preset;  // "llama-3.1-8b", ... (recorded in the file's metadata)
  // llama | qwen2 (QKV bias) | qwen3 (QK norm) | qwen3moe (qwen3 with
  // experts) | gpt-oss (files llama.cpp runs; turbokv's forward does not
  // run its attention yet: sliding windows, sinks)
  std::string arch = "llama";
  int n_embd = 256;
  int n_layers = 2;
  int n_heads = 4;
  int n_kv_heads = 2;
  int head_dim = 64;
  int n_ff = 768;
  // Mixture of experts (qwen3moe): n_experts of n_ff_expert width per layer,
  // n_experts_used chosen per token; 0 = a dense FFN.
  int n_experts = 0, n_experts_used = 0, n_ff_expert = 0;
  // Per-layer KV heads and FFN widths, written as metadata arrays (llama.cpp
  // reads either form); empty: n_kv_heads and n_ff for every layer.
  std::vector<int> layer_kv_heads, layer_ff;
  int n_vocab = 512;  // replaced by the copied vocabulary's size with vocab_from
  int n_ctx = 2048;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;
  int sliding_window = 0;  // Mistral v0.1
  // Llama 3 rope scaling (factor 0 = none), written as llama.cpp's converter
  // does: a rope_freqs tensor of per-pair divisors.
  float llama3_factor = 0.0f;
  float llama3_low_freq_factor = 1.0f;
  float llama3_high_freq_factor = 4.0f;
  int llama3_orig_ctx = 8192;
  // YaRN rope scaling metadata (gpt-oss), factor 0 = none.
  float yarn_factor = 0.0f;
  int yarn_orig_ctx = 0;
};

// Names of the presets: tiny, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b,
// qwen2.5-0.5b, qwen2.5-7b, qwen3-8b, mistral-7b (v0.3), mistral-7b-v0.1,
// qwen3-30b-a3b (qwen3moe: 128 experts of 768, top 8), gpt-oss-20b (32
// experts of 2880, top 4), tiny-moe.
std::vector<std::string> synth_preset_names();
// A preset by name; tkv::Error listing the known names otherwise.
SynthSpec synth_preset(std::string_view name);

struct SynthOptions {
  int layers = 0;  // > 0: override the preset's layer count (shapes kept)
  // > 0: override a MoE preset's expert count, experts used per token and
  // expert width (test-sized MoE models of a real model's other shapes).
  int experts = 0, experts_used = 0, expert_ff = 0;
  std::string vocab_from;  // GGUF whose tokenizer.* metadata is copied
  // Weight type of the matrices: any supported dtype name ("f32", "f16",
  // "bf16", "q8_0", "q4_0", "q4_K", "q6_K", "mxfp4", ...), "q4_K_M" (llama.cpp's
  // mix: q6_K for output and for attn_v / ffn_down in some layers, q4_K
  // elsewhere) or "mxfp4_moe" (expert tensors mxfp4, the rest q8_0).
  // A matrix whose row length is not a multiple of the type's block falls
  // back to f16, as llama.cpp does. Norms, biases and rope_freqs stay f32.
  std::string type = "f16";
  uint64_t seed = 0;
  ThreadPool* pool = nullptr;  // generation threads (nullptr: one thread)
  // Called after each tensor with (bytes written so far, total tensor bytes).
  std::function<void(uint64_t done, uint64_t total)> progress;
};

struct SynthResult {
  SynthSpec spec;  // after overrides (layers, vocabulary size)
  uint64_t tensor_bytes = 0;
  uint64_t n_params = 0;
  size_t n_tensors = 0;
};

// Adds the metadata and the (lazily generated) tensors of `spec` to `writer`.
SynthResult build_synth_model(const SynthSpec& spec, const SynthOptions& opts,
                              gguf::GgufWriter& writer);

// build_synth_model + write to `out_path` (atomically). Throws tkv::Error for
// an unknown type, an unreadable vocabulary file or a failed write.
SynthResult write_synth_model(const SynthSpec& spec, const SynthOptions& opts,
                              const std::string& out_path);

// What the CLI calls: `turbokv synth --like NAME --out FILE ...`.
inline SynthResult synth(std::string_view like, const std::string& out_path,
                         const SynthOptions& opts) {
  return write_synth_model(synth_preset(like), opts, out_path);
}

// Llama 3 rope_freqs values (head_dim/2 divisors of the rotation speeds), as
// llama.cpp's converter computes them from config.json's rope_scaling.
std::vector<float> llama3_rope_freq_factors(int head_dim, float rope_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int orig_ctx);

// Vocabulary metadata (tokenizer.* keys) for the writer. Invented: an
// SPM-style vocabulary of n_vocab tokens (<unk>, <s>, </s>, the 256 byte
// tokens <0x00>..<0xFF>, then pieces of growing length), so that any text
// still tokenizes. Copied: every tokenizer.* key of `vocab_path`; returns the
// number of tokens.
void add_invented_vocab(gguf::GgufWriter& writer, int n_vocab);
int copy_vocab(gguf::GgufWriter& writer, const std::string& vocab_path);

}  // namespace tkv::model
