// The tensors of a llama-family model, bound by name from a GGUF file.
//
// llama.cpp's tensor names and (ggml-order) shapes, with each layer's own
// geometry (ModelConfig::layers): E = n_embd, Q = n_heads x k_dim, K =
// n_kv_heads x k_dim, KV = n_kv_heads x v_dim, O = n_heads x v_dim, F = the
// layer's n_ff, V = n_vocab (today's models: k_dim = v_dim = head_dim):
//   token_embd.weight        [E, V]
//   blk.N.attn_norm.weight   [E]
//   blk.N.attn_q.weight      [E, Q]   (+ attn_q.bias [Q] for qwen2)
//   blk.N.attn_k.weight      [E, K]   (+ attn_k.bias [K])
//   blk.N.attn_v.weight      [E, KV]  (+ attn_v.bias [KV])
//   blk.N.attn_q_norm.weight [k_dim]  qwen3, gemma3
//   blk.N.attn_k_norm.weight [k_dim]  qwen3, gemma3
//   blk.N.attn_output.weight [O, E]   (+ attn_output.bias [E] for gpt-oss)
//   blk.N.attn_sinks.weight  [n_heads] gpt-oss: a learned sink logit per head
//   blk.N.post_attention_norm.weight [E]  gemma3: RMSNorm of the attention
//                                     output (gpt-oss: the FFN's input norm)
//   blk.N.ffn_norm.weight    [E]      (absent in gpt-oss)
//   blk.N.ffn_gate.weight    [E, F]
//   blk.N.ffn_up.weight      [E, F]
//   blk.N.ffn_down.weight    [F, E]
//   blk.N.post_ffw_norm.weight [E]   gemma3: RMSNorm of the FFN output
//   blk.N.layer_output_scale.weight [1]  gemma4: the layer's output scale
// gemma4 (model/forward_layer.cc): a KV-shared layer has only attn_q,
// attn_q_norm and attn_output of the attention's tensors used (any attn_k /
// attn_v it holds are not read); the global layers may have no attn_v (V
// is K); rope_freqs.weight [global head dim / 2] is the global layers'
// proportional RoPE. Experts beside the dense FFN add
//   blk.N.ffn_gate_inp.scale [E]      the router input's scale
//   blk.N.post_ffw_norm_1.weight [E]  RMSNorm of the dense FFN's output
//   blk.N.pre_ffw_norm_2.weight [E]   the experts' input norm
//   blk.N.post_ffw_norm_2.weight [E]  RMSNorm of the experts' output
//   blk.N.ffn_down_exps.scale [X]     a scale per expert
// and per-layer embeddings of width PE (PL = PE x n_layers):
//   per_layer_token_embd.weight [PL, V]  per_layer_model_proj.weight [E, PL]
//   per_layer_proj_norm.weight [PE]
//   blk.N.inp_gate.weight [E, PE]  blk.N.proj.weight [PE, E]  blk.N.post_norm.weight [E]
// or, in a mixture-of-experts layer (X = n_experts, G = each expert's
// width; model/moe.h):
//   blk.N.ffn_gate_inp.weight   [E, X]     the router
//   blk.N.ffn_gate_exps.weight  [E, G, X]  (or ffn_gate_up_exps [E, 2G, X])
//   blk.N.ffn_up_exps.weight    [E, G, X]
//   blk.N.ffn_down_exps.weight  [G, E, X]
// or, in a recurrent (Gated DeltaNet) layer of qwen35 (C = the conv's
// channels, 2 x group_count x state_size + inner_size; I = inner_size;
// Hv = time_step_rank; K = conv_kernel):
//   blk.N.attn_qkv.weight    [E, C]   q, k and v before the conv
//   blk.N.attn_gate.weight   [E, I]   z, the output norm's gate
//   blk.N.ssm_conv1d.weight  [K, C]
//   blk.N.ssm_dt.bias        [Hv]     ssm_a [Hv] (-exp(A_log))
//   blk.N.ssm_beta.weight    [E, Hv]  ssm_alpha.weight [E, Hv]
//   blk.N.ssm_norm.weight    [state_size]
//   blk.N.ssm_out.weight     [I, E]
// (qwen35's full layers: attn_q [E, 2Q], queries and gates per head; its
// FFN's input norm is post_attention_norm, as gpt-oss's)
//   output_norm.weight       [E]
//   output.weight            [E, V]   (absent: tied to token_embd)
//   rope_freqs.weight        [n_rot/2] optional (Llama 3 rope scaling)
// Matrices stay in the mapped file (WeightMatrix points into it); the small
// vectors (norms, biases, rope factors) are converted to f32 copies at load.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/moe.h"
#include "tensor/matmul.h"

namespace tkv::gguf {
class GgufFile;
}

namespace tkv::model {

struct LayerWeights {
  std::vector<float> attn_norm;  // n_embd
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;      // empty unless the layer's qkv_bias
  std::vector<float> q_norm, k_norm;  // k_dim each, empty unless the layer's qk_norm
  std::vector<float> bo;              // n_embd, empty unless the layer's out_bias
  std::vector<float> sinks;           // n_heads, empty unless the layer's sink
  std::vector<float> attn_post_norm;  // n_embd, empty unless the attention's post_norm
  std::vector<float> ffn_norm;        // n_embd
  std::vector<float> ffn_post_norm;   // n_embd, empty unless the FFN's post_norm
  // MoePlusDense: the dense FFN's output norm, the experts' input and
  // output norms.
  std::vector<float> ffn_post_norm_1, ffn_pre_norm_2, ffn_post_norm_2;
  // Per-layer input (per_layer_input > 0): its gate and projection and the
  // projection's norm.
  WeightMatrix pl_gate, pl_proj;
  std::vector<float> pl_post_norm;
  std::vector<float> output_scale;  // 1 value, empty unless the layer's output_scale
  // Recurrent layers (AttentionKind::Recurrent; wo is ssm_out there).
  WeightMatrix w_qkv, w_z, w_beta, w_alpha;  // attn_qkv, attn_gate, ssm_beta, ssm_alpha
  std::vector<float> conv;                   // conv_channels x conv_kernel taps
  std::vector<float> dt_bias, ssm_a;         // n_v_heads each
  std::vector<float> ssm_norm;               // state_size
  WeightMatrix w_gate, w_up, w_down;         // dense FFN (rows 0 in a MoE layer)
  MoeWeights moe;                            // mixture-of-experts FFN (FfnKind::Moe)

  // The layer's matrices, in the order the forward pass reads them (each
  // expert's three after the router).
  std::vector<const WeightMatrix*> matrices() const;
  std::vector<WeightMatrix*> matrices();
};

// What one token reads of a model file: every tensor, except that of the
// 3-D expert tensors (*_exps) only expert_used_count of expert_count count,
// and of token_embd one row (all of it when it is also the output matrix).
// From the metadata and tensor table alone: it also describes files of
// architectures the forward does not run yet.
struct ActiveWeights {
  int n_experts = 0, n_used = 0;               // 0: no experts
  uint64_t params = 0, bytes = 0;              // per token
  uint64_t expert_bytes = 0;                   // of `bytes`, the chosen experts'
  uint64_t total_params = 0, total_bytes = 0;  // the whole file's tensors
};
ActiveWeights active_weights(const gguf::GgufFile& file);

struct ModelWeights {
  WeightMatrix token_embd;               // n_vocab rows of n_embd
  std::vector<float> output_norm;        // n_embd
  WeightMatrix output;                   // n_vocab rows of n_embd (== token_embd when tied)
  std::vector<float> rope_freq_factors;  // n_rot/2, empty when absent
  // Per-layer embeddings (gemma4 E models; rows 0 without): per token, a
  // row of n_layers x width; the projection of the embedding to the same
  // width; the norm of each layer's part of that projection.
  WeightMatrix per_layer_embd, per_layer_proj;
  std::vector<float> per_layer_proj_norm;
  std::vector<LayerWeights> layers;
  uint64_t bytes = 0;         // bytes of all tensors used (the mapped weights, once each)
  uint64_t expert_bytes = 0;  // of those, the expert matrices'
  uint64_t active_bytes = 0;  // what one token reads (active_weights)
  // Of that, what any step reads whatever its rows chose (all but the experts).
  uint64_t step_bytes = 0;

  // Binds and checks every tensor; throws tkv::Error "<path>: tensor <name> ...".
  static ModelWeights bind(const gguf::GgufFile& file, const ModelConfig& config);
};

}  // namespace tkv::model
