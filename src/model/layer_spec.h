// The model as a stack of layers: what each layer's attention memory, FFN
// and extra inputs are, with their own geometry (ModelConfig::layers, one
// LayerSpec per block, filled by ModelConfig::from_gguf).
//
// A layer is
//   x += attention(x)  per its AttentionSpec (the kind decides where its
//                      keys and values live)
//   x += ffn(x)        per its FfnSpec
// with, optionally, a per-layer input (a token embedding of its own) mixed
// in. Today every supported model (llama, qwen2, qwen3) is a stack of
// full-attention + dense SwiGLU layers of one geometry; the other kinds are
// declared so that the models that need them fill in their compute (one
// function per kind in the forward, model/forward_*.cc) without reshaping
// this description. ModelConfig::from_gguf rejects, with one line naming
// the layer and the metadata that asked for it, any kind the forward does
// not run yet (unsupported_reason).
//
// Where llama.cpp's GGUF metadata says what (prefix "{arch}."; see
// llama.cpp's src/llama-arch.cpp and llama-model.cpp load_hparams):
//   attention.head_count, attention.head_count_kv  a number, or an array
//                                      with one entry per layer
//   attention.key_length, value_length K and V head dims (may differ)
//   attention.key_length_swa, value_length_swa  the same for window layers
//   attention.sliding_window           W, with attention.sliding_window_pattern
//                                      (a period, or one bool per layer) for
//                                      which layers are windowed
//   attention.shared_kv_layers         the last N layers reuse an earlier
//                                      layer's K/V (no attn_k / attn_v)
//   attention.scale                    the score scale (default 1/sqrt(k_dim))
//   attn_logit_softcapping             soft-cap c: scores become c tanh(s / c)
//   rope.dimension_count(_swa), rope.freq_base(_swa), rope_freqs.weight
//   feed_forward_length                a number, or one per layer
//   expert_count, expert_used_count, expert_feed_forward_length,
//   expert_shared_feed_forward_length, leading_dense_block_count
//   embedding_length_per_layer_input   per-layer token embeddings
//   full_attention_interval, ssm.*     recurrent (Gated DeltaNet) layers
// and, from the tensors: blk.N.attn_sinks.weight (a learned sink logit per
// query head), no blk.N.attn_v.weight (V taken from the K projection).
#pragma once

#include <string>

namespace tkv::model {

// How RoPE pairs up the dimensions of a head (llama.cpp's rope types).
//   Normal: (x[2i], x[2i+1]) rotate together (Llama as converted to GGUF).
//   Neox  : (x[i], x[i + n_rot/2]) rotate together ("rotate halves", Qwen).
enum class RopeStyle { Normal, Neox };

// The rotary embedding of one layer: the first n_rot dims of each Q and K
// head rotate, pair i at angle pos * freq_scale * base^(-2i/n_rot) /
// freq_factor[i] (freq_factor from the model's rope_freqs tensor when
// freq_factors is set, else 1). n_rot 0: no RoPE.
struct RopeSpec {
  int n_rot = 0;
  float base = 10000.0f;
  RopeStyle style = RopeStyle::Normal;
  float freq_scale = 1.0f;    // 1 / linear scaling factor
  bool freq_factors = false;  // divide by the rope_freqs tensor's factors
  bool operator==(const RopeSpec&) const = default;
};

// Where a layer's attention finds its keys and values.
enum class AttentionKind {
  Full,       // causal attention over every earlier position, K/V in the KV cache
  Window,     // causal attention over the newest `window` positions only
  SharedKv,   // reads layer `kv_source`'s K/V (writes none of its own)
  Recurrent,  // a recurrent state per sequence (Gated DeltaNet), no KV
};

struct AttentionSpec {
  AttentionKind kind = AttentionKind::Full;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (GQA: n_heads % n_kv_heads == 0)
  int k_dim = 0;       // head dim of Q and K
  int v_dim = 0;       // head dim of V (and of each head's attention output)
  RopeSpec rope;
  float scale = 0.0f;     // score scale; 0 = 1/sqrt(k_dim)
  float softcap = 0.0f;   // logit soft-cap; 0 = none
  int window = 0;         // Window: positions each query sees (its own included)
  int kv_source = -1;     // SharedKv: the layer whose K/V it reads
  bool sink = false;      // a learned sink logit per query head (attn_sinks)
  bool v_from_k = false;  // V is the K projection (no attn_v)
  bool qkv_bias = false;  // biases on Q, K, V (qwen2; llama when present)
  bool qk_norm = false;   // RMSNorm of each Q and K head before RoPE (qwen3)
  // Recurrent: the state's geometry (ssm.conv_kernel, ssm.state_size,
  // ssm.inner_size, ssm.group_count); 0 elsewhere.
  int conv_kernel = 0, state_size = 0, inner_size = 0, n_groups = 0;

  int q_width() const { return n_heads * k_dim; }     // rows of Wq
  int k_width() const { return n_kv_heads * k_dim; }  // rows of Wk
  int v_width() const { return n_kv_heads * v_dim; }  // rows of Wv
  int out_width() const { return n_heads * v_dim; }   // columns of Wo
};

enum class FfnKind {
  Dense,         // SwiGLU: W_down (silu(W_gate h) * W_up h)
  Moe,           // mixture of experts: a router picks n_experts_used of n_experts
  MoePlusDense,  // experts beside a shared dense FFN (n_ff wide)
};

struct FfnSpec {
  FfnKind kind = FfnKind::Dense;
  int n_ff = 0;  // dense (or shared) hidden width
  int n_experts = 0, n_experts_used = 0, n_ff_expert = 0;
};

struct LayerSpec {
  AttentionSpec attention;
  FfnSpec ffn;
  // Width of this layer's own token embedding (Gemma's per-layer inputs),
  // 0 = none.
  int per_layer_input = 0;
};

const char* attention_kind_name(AttentionKind k);
const char* ffn_kind_name(FfnKind k);

// Why the forward cannot run `layer` (index `l`) yet, as a phrase naming
// the kind and what asked for it ("layer 3: sliding-window attention
// (attention.sliding_window_pattern) is not supported yet"); empty when it
// can.
std::string unsupported_reason(const LayerSpec& layer, int l);

}  // namespace tkv::model
