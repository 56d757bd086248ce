// The model as a stack of layers: what each layer's attention memory, FFN
// and extra inputs are, with their own geometry (ModelConfig::layers, one
// LayerSpec per block, filled by ModelConfig::from_gguf).
//
// A layer is
//   x += attention(x)  per its AttentionSpec (the kind decides where its
//                      keys and values live)
//   x += ffn(x)        per its FfnSpec
// with, optionally, a per-layer input (a token embedding of its own) mixed
// in. The supported models are stacks of full-attention and
// sliding-window layers with a dense FFN (llama, qwen2, qwen3, gemma3), a
// mixture-of-experts FFN (qwen3moe, Mixtral as llama with experts,
// gpt-oss) or both side by side (gemma4, whose last layers may also read
// earlier layers' K/V and take per-layer token embeddings), and hybrids of
// recurrent and full-attention layers (qwen35, qwen35moe). Each kind is one
// function in the forward (model/forward_*.cc). ModelConfig::from_gguf
// rejects, with one line naming the layer and the metadata that asked for
// it, anything the forward does not run (unsupported_reason).
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
//   expert_count, expert_used_count    experts per MoE layer, chosen per row
//   expert_feed_forward_length         each expert's hidden width
//   expert_shared_feed_forward_length  the shared expert's (qwen35moe)
//   expert_weights_scale, expert_weights_norm, expert_gating_func
//   leading_dense_block_count          the first N layers have a dense FFN
//   embedding_length_per_layer_input   per-layer token embeddings
//   full_attention_interval, ssm.*     recurrent (Gated DeltaNet) layers
// and, from the tensors: blk.N.attn_sinks.weight (a learned sink logit per
// query head), no blk.N.attn_v.weight in gemma4 (V taken from the K projection).
#pragma once

#include <array>
#include <cstdint>
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
  float freq_scale = 1.0f;    // 1 / the scaling factor (linear or YaRN)
  bool freq_factors = false;  // divide by the rope_freqs tensor's factors
  // YaRN (rope.scaling.type yarn; gpt-oss), as ggml's rope_yarn: pair i's
  // speed blends the scaled and unscaled ones by a ramp between the
  // correction dims of orig_ctx (betas 32 and 1), and cos/sin are scaled by
  // attn_factor (1 + 0.1 ln(1 / freq_scale)). ext_factor 0 = plain scaling.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;  // llama.cpp's yarn_attn_factor (1 for linear scaling)
  int orig_ctx = 0;          // rope.scaling.original_context_length (or the training context)
  // M-RoPE (rope.dimension_sections; qwen35's interleaved form when
  // `interleaved`): pair i belongs to one of four sections, each rotated by
  // its own position component. For text the first three components are
  // the token's position and the fourth is 0, so pairs of the fourth
  // section do not rotate; all zero = no sections.
  std::array<int, 4> sections{};
  bool interleaved = false;
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
  float scale = 0.0f;    // score scale; 0 = 1/sqrt(k_dim)
  float softcap = 0.0f;  // logit soft-cap; 0 = none
  int window = 0;        // Window: positions each query sees (its own included)
  // SharedKv: the layer whose K/V it reads (and whose window, when
  // `window` is set: a shared window layer reads a window layer).
  int kv_source = -1;
  bool sink = false;       // a learned sink logit per query head (attn_sinks)
  bool v_from_k = false;   // V is the K projection (no attn_v)
  bool qkv_bias = false;   // biases on Q, K, V (qwen2; llama, gpt-oss when present)
  bool qk_norm = false;    // RMSNorm of each Q and K head before RoPE (qwen3, gemma3)
  bool v_norm = false;     // RMSNorm of each V head, without a weight (gemma4)
  bool out_bias = false;   // a bias on the output projection (gpt-oss)
  bool post_norm = false;  // RMSNorm of the output before the residual add (gemma)
  // The Q projection holds, per head, k_dim query values then k_dim gate
  // values; the attention output is multiplied by sigmoid(gate) (qwen35).
  bool output_gate = false;
  // Recurrent (Gated DeltaNet, model/forward_recurrent.cc): ssm.conv_kernel
  // (the causal conv's width), ssm.state_size (head dim of q, k and v),
  // ssm.group_count (q and k heads), ssm.time_step_rank (v heads),
  // ssm.inner_size (v heads x state size); 0 elsewhere.
  int conv_kernel = 0, state_size = 0, inner_size = 0, n_groups = 0, n_v_heads = 0;

  // Recurrent: channels of the conv (q, k and v side by side), and the
  // floats of one sequence's state: the conv's last conv_kernel - 1 inputs
  // per channel, then a state_size x state_size matrix per v head.
  int conv_channels() const { return 2 * n_groups * state_size + inner_size; }
  int64_t conv_state_floats() const { return int64_t(conv_kernel - 1) * conv_channels(); }
  int64_t state_floats() const {
    return conv_state_floats() + int64_t(n_v_heads) * state_size * state_size;
  }

  int q_width() const { return n_heads * k_dim * (output_gate ? 2 : 1); }  // rows of Wq
  int query_width() const { return n_heads * k_dim; }  // a row's queries (without the gate)
  int k_width() const { return n_kv_heads * k_dim; }   // rows of Wk
  int v_width() const { return n_kv_heads * v_dim; }   // rows of Wv
  // Columns of Wo: the attention's output per row (a recurrent layer's
  // value heads).
  int out_width() const { return kind == AttentionKind::Recurrent ? inner_size : n_heads * v_dim; }
};

enum class FfnKind {
  Dense,         // W_down act(W_gate h, W_up h): SwiGLU, or GeGLU (gemma)
  Moe,           // mixture of experts: a router picks n_used of n_experts per row
  MoePlusDense,  // experts beside a dense FFN, each with its own norms (Gemma 4)
};

// How the router's logits become the chosen experts and their weights
// (llama.cpp's llama_expert_gating_func_type).
enum class MoeGating {
  Softmax,        // p = softmax(logits) over all experts; the n_used largest p
  SoftmaxChosen,  // the n_used largest logits, then a softmax over those (gpt-oss)
};

// The gated activation of an FFN's or an expert's (gate, up) pair.
enum class GatedActivation {
  SwiGlu,     // silu(g) * u
  SwiGluOai,  // gpt-oss: g' = min(g, 7), u' = clamp(u, -7, 7), g' sigmoid(1.702 g') (u' + 1)
  GeGlu,      // gelu(g) * u (tanh approximation, as ggml's gelu)
};

// A mixture-of-experts FFN (model/forward_moe.cc): per row, router logits
// W_router h (+ router bias), n_used experts and weights per `gating`
// (renormalized to sum 1 when `normalize`, times `weights_scale`), and
// out = sum_k w_k down_k(act(gate_k h, up_k h)) over the chosen experts,
// plus a shared expert (a SwiGLU FFN n_ff_shared wide, its output times
// sigmoid(w_shared_gate . h) when shared_gate) on every row.
struct MoeSpec {
  int n_experts = 0, n_used = 0;
  int n_ff = 0;  // each expert's hidden width
  MoeGating gating = MoeGating::Softmax;
  GatedActivation activation = GatedActivation::SwiGlu;
  bool normalize = false;      // weights / max(sum of the chosen, 2^-14)
  float weights_scale = 1.0f;  // expert_weights_scale (0 in a file means 1)
  bool router_bias = false;    // ffn_gate_inp.bias (gpt-oss)
  bool expert_bias = false;    // ffn_{gate,up,down}_exps.bias (gpt-oss)
  int n_ff_shared = 0;         // shared expert width, 0 = none
  bool shared_gate = false;    // ffn_gate_inp_shexp: a sigmoid gate on the shared expert
};

struct FfnSpec {
  FfnKind kind = FfnKind::Dense;
  int n_ff = 0;  // the dense FFN's hidden width (Dense, MoePlusDense); 0 for Moe
  GatedActivation activation = GatedActivation::SwiGlu;  // the dense FFN's
  bool post_norm = false;  // RMSNorm of the output before the residual add (gemma)
  MoeSpec moe;             // Moe, MoePlusDense
};

struct LayerSpec {
  AttentionSpec attention;
  FfnSpec ffn;
  // Width of this layer's own token embedding (Gemma's per-layer inputs),
  // 0 = none.
  int per_layer_input = 0;
  // The layer's output (residual included) times a learned scalar
  // (gemma4's layer_output_scale).
  bool output_scale = false;
};

const char* attention_kind_name(AttentionKind k);
const char* ffn_kind_name(FfnKind k);

// Why the forward cannot run `layer` (index `l`) yet, as a phrase naming
// the kind and what asked for it ("layer 3: attention over another
// layer's KV (attention.shared_kv_layers) is not supported yet"); empty
// when it can.
std::string unsupported_reason(const LayerSpec& layer, int l);

}  // namespace tkv::model
