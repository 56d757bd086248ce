// Hyper-parameters of a llama-family model, read from GGUF metadata.
//
// Keys are llama.cpp's ("{arch}.embedding_length", "{arch}.attention.head_count",
// ...), with {arch} = general.architecture. Supported architectures:
//   llama : Llama 1/2/3 and Mistral. RoPE on adjacent pairs (llama.cpp's
//           "normal" rope: the converter permutes Q/K rows so that this holds);
//           Llama 3.1+ long-context scaling arrives as the rope_freqs tensor.
//   qwen2 : Qwen2/2.5, biases on the Q, K and V projections, NEOX rope.
//   qwen3 : Qwen3, per-head RMSNorm of Q and K before RoPE, NEOX rope.
//   qwen3moe : Qwen3 attention with a mixture-of-experts FFN in every layer.
//   gemma3 : Gemma 3. Five of every six layers attend to a sliding window
//           (with their own RoPE base, unscaled); QK norm; RMSNorm after the
//           attention and after the FFN; GeGLU; embeddings scaled by
//           sqrt(n_embd); NEOX rope.
//   gemma4 : Gemma 4. Window layers per a per-layer pattern, with their own
//           head dims and RoPE; global layers with proportional RoPE
//           (rope_freqs) and possibly V taken from K; a score scale of 1;
//           V heads RMS-normed; the last attention.shared_kv_layers layers
//           read the K/V of the last earlier layer of their kind; experts
//           beside the dense FFN where a layer has a router (26B-A4B);
//           per-layer token embeddings (E2B, E4B); a learned output scale
//           per layer.
//   gpt-oss : every other layer a sliding window; a learned sink logit per
//           head; biases on Q, K, V and the output; YaRN rope; a
//           mixture-of-experts FFN (top-k then softmax, clamped SwiGLU).
//   qwen35 : Qwen3.5/3.6, a hybrid: three of every four layers are Gated
//           DeltaNet (recurrent state, no KV), the fourth full attention
//           with QK norm, an output gate and partial interleaved M-RoPE;
//           the FFN's input norm is post_attention_norm. MTP blocks at the
//           end (nextn_predict_layers) are not run.
//   qwen35moe : qwen35 with a mixture-of-experts FFN and a gated shared
//           expert in every layer.
// llama with expert_count is Mixtral (a mixture-of-experts FFN). Anything
// else is rejected with an error naming the architecture (and, for the
// architectures whose attention is not supported yet, what is missing).
//
// The model-wide fields below are the metadata as written; the forward reads
// `layers` (model/layer_spec.h: each layer's attention kind, geometry, RoPE
// and FFN kind), which from_gguf fills from them and from the per-layer
// arrays where the file has them. Where layers differ, the model-wide
// n_heads, n_kv_heads, head_dim and n_ff are the largest over the layers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/layer_spec.h"

namespace tkv::gguf {
class GgufFile;
}

namespace tkv::model {

enum class Arch {
  Llama,
  Qwen2,
  Qwen3,
  Qwen3Moe,
  Gemma2,
  Gemma3,
  Gemma4,
  GptOss,
  Qwen35,
  Qwen35Moe
};

enum class RopeScalingType { None, Linear, Yarn };

struct ModelConfig {
  std::string arch_name;  // general.architecture, e.g. "llama"
  Arch arch = Arch::Llama;
  std::string name;  // general.name, may be empty

  int n_embd = 0;       // residual stream width
  int n_layers = 0;     // the blocks the forward runs (block_count less any MTP blocks)
  int n_heads = 0;      // query heads
  int n_kv_heads = 0;   // key/value heads (GQA: n_heads % n_kv_heads == 0)
  int head_dim = 0;     // attention.key_length (== value_length), default n_embd / n_heads
  int n_ff = 0;         // SwiGLU hidden width
  int n_vocab = 0;      // token list size (or token_embd rows when there is no list)
  int n_ctx_train = 0;  // context_length the model was trained with

  // RoPE: the first n_rot dims of each head rotate, dimension pair i at
  // angle pos * freq_scale * rope_base^(-2i/n_rot) / freq_factor[i]
  // (freq_factor from the rope_freqs tensor, Llama 3 scaling; else 1).
  int n_rot = 0;
  float rope_base = 10000.0f;
  RopeStyle rope_style = RopeStyle::Normal;
  RopeScalingType rope_scaling = RopeScalingType::None;
  float rope_freq_scale = 1.0f;   // 1 / rope.scaling.factor (linear or YaRN)
  int rope_orig_ctx = 0;          // rope.scaling.original_context_length, 0 if absent
  float rope_attn_factor = 1.0f;  // cos/sin scale (YaRN's, times rope.scaling.attn_factor)

  float rms_eps = 1e-5f;
  // Mistral v0.1-style sliding-window attention (attention.sliding_window), 0
  // = full attention. The model does not enforce it itself: a caller that
  // wants it maps it onto the KV cache's window policy.
  int sliding_window = 0;

  bool qkv_bias = false;       // qwen2 (required); llama (when the tensors are present)
  bool qk_norm = false;        // qwen3
  bool tied_output = false;    // no output.weight: logits use token_embd
  float embed_scale = 1.0f;    // token embeddings times this (gemma: sqrt(n_embd))
  float final_softcap = 0.0f;  // logits become c tanh(logits / c); 0 = none

  // One entry per layer, top to bottom (layer_spec.h).
  std::vector<LayerSpec> layers;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  // The widest of any layer (buffer sizes): Q rows, K or V rows, attention
  // output rows, FFN hidden width, RoPE pairs.
  int max_q_width() const;
  int max_kv_width() const;
  int max_out_width() const;
  int max_ff() const;  // of the dense FFNs (MoE scratch sizes itself: model/moe.h)
  int max_rope_pairs() const;
  // Recurrent layers: the widest conv channels and v widths (0 without).
  int max_conv_channels() const;
  int max_recurrent_v() const;
  int n_recurrent() const;  // how many layers are Recurrent
  // The model-wide RoPE (what every layer of today's models uses).
  RopeSpec rope_spec(bool freq_factors) const;

  // Reads and validates the metadata of `file` (tensor-derived fields such as
  // tied_output, qkv_bias for llama, n_vocab without a token list and the
  // layers' sinks and V-from-K are filled in here too). Throws tkv::Error
  // "<path>: <problem>", also for a layer kind the forward does not run yet
  // ("<path>: layer 0: mixture-of-experts FFN (llama.expert_count) is not
  // supported yet").
  static ModelConfig from_gguf(const gguf::GgufFile& file);

  // One line for logs: "llama 16L d2048 h32/8x64 ff8192 v128256 rope 500000 ...".
  std::string describe() const;
};

std::string_view arch_name(Arch a);
RopeStyle rope_style_of(Arch a);

}  // namespace tkv::model
