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
  // experts) | gpt-oss, gemma3, gemma4, qwen35, qwen35moe (files llama.cpp
  // runs; turbokv's forward may not run them yet: see config.cc)
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

  // ---- Gemma 2 / Gemma 3 / Gemma 4 (arch "gemma2", "gemma3", "gemma4") ----
  // Window layers: with sliding_window > 0 and swa_period > 0, layer l sees
  // the last sliding_window tokens unless (l + 1) % swa_period == 0 (a global
  // layer, which sees them all): Gemma's 5 window layers then 1 global.
  // gemma3 writes the period (attention.sliding_window_pattern, u32; llama.cpp
  // assumes 6 without it); gemma2 nothing (llama.cpp assumes 2); gemma4 one
  // flag per layer (bool array).
  int swa_period = 0;
  // rope.freq_base_swa: the window layers' rope base (rope_base is the global
  // layers'); 0 = not written.
  float rope_base_swa = 0.0f;
  // Linear rope scaling of the global layers (rope.scaling.type "linear",
  // rope.scaling.factor); 0 = none.
  float rope_linear_factor = 0.0f;
  // final_logit_softcapping: logits = c tanh(logits / c); 0 = none.
  float final_logit_softcap = 0.0f;
  // attn_logit_softcapping (gemma2): scores = c tanh(scores / c); 0 = none.
  float attn_logit_softcap = 0.0f;
  // gemma4: the window layers' head size and KV heads (head_dim and
  // n_kv_heads are the global layers'); 0 = the same as the global layers.
  // Written as key_length_swa / value_length_swa and a per-layer
  // head_count_kv array.
  int head_dim_swa = 0;
  int n_kv_heads_swa = 0;
  // gemma4 "proportional" rope on the global layers: only this fraction of
  // each head rotates; written as rope_freqs (1 for the rotated pairs, 1e30
  // for the others), as llama.cpp's converter does. 0 = no rope_freqs.
  float rope_partial_global = 0.0f;
  // gemma4: the last n_kv_shared_layers layers reuse the K/V of the last
  // earlier layer of their kind (window or global), so the layers before
  // them should end with a global layer. Their K/V weights are still written
  // (the checkpoints hold them; llama.cpp loads and ignores them). A cut
  // (SynthOptions::layers) keeps the same share of shared layers, rounded so
  // that the others are whole swa_periods.
  int n_kv_shared_layers = 0;
  // gemma4 (E2B/E4B): per-layer token embeddings of this width
  // (per_layer_token_embd, per_layer_model_proj, and per layer inp_gate /
  // proj / post_norm); 0 = none.
  int n_embd_per_layer = 0;
  // gemma4 attention_k_eq_v: the global layers have no attn_v (V is K).
  bool global_v_from_k = false;
  // gemma4 use_double_wide_mlp: the KV-shared layers' FFN is 2 n_ff wide.
  bool double_wide_kv_shared_ff = false;

  // ---- Qwen3.5 / Qwen3.6 hybrids (arch "qwen35", "qwen35moe") ----
  // Layer l is a Gated DeltaNet linear-attention layer unless
  // (l + 1) % full_attention_interval == 0 (a gated full-attention layer:
  // its Q projection is 2 n_heads x head_dim, queries and output gates
  // interleaved per head). 0: not a hybrid.
  int full_attention_interval = 0;
  // The linear layers: ssm_group_count q/k heads and ssm_time_step_rank v
  // heads, all of ssm_state_size (the state of a v head is its square), a
  // causal conv of ssm_conv_kernel taps over q, k and v.
  int ssm_conv_kernel = 4;
  int ssm_state_size = 128;
  int ssm_group_count = 16;
  int ssm_time_step_rank = 32;
  // rope.dimension_count: the rotated dims of a head (0 = head_dim) and the
  // multi-axis rope sections (rope.dimension_sections; empty = none).
  int rope_dims = 0;
  std::vector<int> rope_sections;
  // qwen35moe: a shared expert of this width beside the routed ones, scaled
  // by a sigmoid gate of its own (0 = none).
  int n_ff_shared_expert = 0;
  // Multi-token-prediction layers after the trunk (nextn_predict_layers):
  // each a full-attention layer plus its nextn projections. A --layers cut
  // keeps them.
  int n_nextn_layers = 0;
};

// Names of the presets: tiny, llama-3.2-1b, llama-3.2-3b, llama-3.1-8b,
// qwen2.5-0.5b, qwen2.5-7b, qwen3-8b, mistral-7b (v0.3), mistral-7b-v0.1,
// qwen3-30b-a3b (qwen3moe: 128 experts of 768, top 8), gpt-oss-20b (32
// experts of 2880, top 4), tiny-moe, gemma-3-12b, gemma-3-27b, tiny-gemma3
// (6 layers of 256, window 16: 5 window layers then 1 global), gemma-4-e2b,
// gemma-4-e4b, gemma-4-31b, gemma-4-26b-a4b (128 experts of 704, top 8,
// beside a dense FFN of 2112), tiny-gemma4 (tiny-gemma3's layout with Gemma
// 4's head sizes, V from K on the global layer and 4 experts of 256, top 2),
// tiny-gemma4-e (8 layers of 256, every fourth global, the last 4 reading
// earlier layers' K/V, per-layer embeddings of 64),
// qwen3.5-9b, qwen3.6-27b (qwen35: 3 Gated DeltaNet layers, then 1 gated
// full-attention layer), qwen3.6-35b-a3b (qwen35moe: 256 experts of 512, top
// 8, and a shared expert), tiny-qwen35, tiny-qwen35moe (4 layers of 128).
std::vector<std::string> synth_preset_names();
// A preset by name; tkv::Error listing the known names otherwise.
SynthSpec synth_preset(std::string_view name);

struct SynthOptions {
  int layers = 0;  // > 0: override the preset's layer count (shapes kept; see n_kv_shared_layers)
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
