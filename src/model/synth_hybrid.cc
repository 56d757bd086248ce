// synth for the Qwen3.5 / Qwen3.6 hybrids (llama.cpp's qwen35 and qwen35moe):
// three Gated DeltaNet linear-attention layers, then one gated full-attention
// layer, each followed by a dense SwiGLU FFN (qwen35) or routed experts plus
// a gated shared expert (qwen35moe); multi-token-prediction layers after the
// trunk. Metadata keys and tensor shapes are those llama.cpp's converter
// writes and its loader reads (src/models/qwen35.cpp, qwen35moe.cpp).
#include <numeric>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/synth_plan.h"

namespace tkv::model::synth_detail {

namespace {

SynthSpec hybrid(std::string preset, std::string arch, int embd, int layers, int heads,
                 int kv_heads, int ff, int v_heads) {
  SynthSpec s = make_spec(std::move(preset), std::move(arch), embd, layers, heads, kv_heads, 256,
                          ff, 248320, 262144, 1e7f, 1e-6f, /*tied=*/false);
  s.full_attention_interval = 4;
  s.ssm_conv_kernel = 4;
  s.ssm_state_size = 128;
  s.ssm_group_count = 16;
  s.ssm_time_step_rank = v_heads;
  // partial_rotary_factor 0.25 of 256; mrope_section [11, 11, 10] padded to 4.
  s.rope_dims = 64;
  s.rope_sections = {11, 11, 10, 0};
  s.n_nextn_layers = 1;  // mtp_num_hidden_layers
  return s;
}

// Test-sized: 4 layers of 128 (3 linear, then 1 full attention), 4 v heads
// over 2 q/k heads of 32 as the real models pair them, a quarter of the
// 64-wide attention heads rotated; no multi-token-prediction layer.
SynthSpec tiny(std::string preset, std::string arch) {
  SynthSpec s = hybrid(std::move(preset), std::move(arch), 128, 4, 4, 2, 256, 4);
  s.head_dim = 64;
  s.n_vocab = 512;
  s.n_ctx = 4096;
  s.ssm_state_size = 32;
  s.ssm_group_count = 2;
  s.rope_dims = 16;
  s.rope_sections = {3, 3, 2, 0};
  s.n_nextn_layers = 0;
  return s;
}

SynthSpec with_moe(SynthSpec s, int experts, int used, int ff_expert, int ff_shared) {
  s.n_experts = experts;
  s.n_experts_used = used;
  s.n_ff_expert = ff_expert;
  s.n_ff_shared_expert = ff_shared;
  return s;
}

// The full-attention layer: Q and the output gate in one projection (per
// head: head_dim queries, then head_dim gate values), QK norms.
void full_attention(PlanBuilder& b, const std::string& p, int l) {
  const SynthSpec& s = b.s;
  const int64_t E = s.n_embd, D = s.head_dim;
  const int64_t Q = int64_t(s.n_heads) * D, K = int64_t(s.n_kv_heads) * D;
  b.matrix(p + "attn_q.weight", "attn_q", l, E, 2 * Q);
  b.matrix(p + "attn_k.weight", "attn_k", l, E, K);
  b.matrix(p + "attn_v.weight", "attn_v", l, E, K);
  b.matrix(p + "attn_output.weight", "attn_output", l, Q, E);
  b.vec(p + "attn_q_norm.weight", D, Fill::Norm);
  b.vec(p + "attn_k_norm.weight", D, Fill::Norm);
}

// The Gated DeltaNet layer. Its decay per v head and token is
// exp(softplus(alpha + ssm_dt.bias) * ssm_a): ssm_a holds -exp(A_log) (the
// converter's sign), here A in [1, 16) as the checkpoints initialise it, and
// the bias is log(dt) for dt in [0.001, 0.1), so with unit-scale alpha the
// decays stay inside (0, 1), mostly near 0.9.
void linear_attention(PlanBuilder& b, const std::string& p, int l) {
  const SynthSpec& s = b.s;
  const int64_t E = s.n_embd, S = s.ssm_state_size;
  const int64_t key_dim = S * s.ssm_group_count, value_dim = S * s.ssm_time_step_rank;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  b.matrix(p + "attn_qkv.weight", "attn_qkv", l, E, conv_dim);
  b.matrix(p + "attn_gate.weight", "attn_gate", l, E, value_dim);
  // A depthwise conv of a few taps per channel: llama-quantize keeps it f32
  // and ggml's conv reads f32 only.
  b.f32_matrix(p + "ssm_conv1d.weight", s.ssm_conv_kernel, conv_dim);
  b.uniform(p + "ssm_dt.bias", s.ssm_time_step_rank, -4.6f, 2.3f);
  b.uniform(p + "ssm_a", s.ssm_time_step_rank, -8.5f, 7.5f);
  b.matrix(p + "ssm_beta.weight", "ssm_beta", l, E, s.ssm_time_step_rank);
  b.matrix(p + "ssm_alpha.weight", "ssm_alpha", l, E, s.ssm_time_step_rank);
  b.vec(p + "ssm_norm.weight", S, Fill::Norm);
  b.matrix(p + "ssm_out.weight", "ssm_out", l, value_dim, E);
}

void ffn(PlanBuilder& b, const std::string& p, int l) {
  const SynthSpec& s = b.s;
  const int64_t E = s.n_embd;
  if (s.n_experts == 0) {
    b.matrix(p + "ffn_gate.weight", "ffn_gate", l, E, s.n_ff);
    b.matrix(p + "ffn_up.weight", "ffn_up", l, E, s.n_ff);
    b.matrix(p + "ffn_down.weight", "ffn_down", l, s.n_ff, E);
    return;
  }
  const int64_t X = s.n_experts, G = s.n_ff_expert, H = s.n_ff_shared_expert;
  b.f32_matrix(p + "ffn_gate_inp.weight", E, X);
  b.matrix(p + "ffn_gate_exps.weight", "ffn_gate_exps", l, E, G, X);
  b.matrix(p + "ffn_up_exps.weight", "ffn_up_exps", l, E, G, X);
  b.matrix(p + "ffn_down_exps.weight", "ffn_down_exps", l, G, E, X);
  // The shared expert's gate is one row: sigmoid(w . x) scales its output.
  b.f32_matrix(p + "ffn_gate_inp_shexp.weight", E, 1);
  b.matrix(p + "ffn_gate_shexp.weight", "ffn_gate_shexp", l, E, H);
  b.matrix(p + "ffn_up_shexp.weight", "ffn_up_shexp", l, E, H);
  b.matrix(p + "ffn_down_shexp.weight", "ffn_down_shexp", l, H, E);
}

}  // namespace

void add_qwen35_presets(std::vector<SynthSpec>& p) {
  p.push_back(hybrid("qwen3.5-9b", "qwen35", 4096, 32, 16, 4, 12288, 32));
  p.push_back(hybrid("qwen3.6-27b", "qwen35", 5120, 64, 24, 4, 17408, 48));
  // feed_forward_length is only llama.cpp's fallback for the expert widths.
  p.push_back(
      with_moe(hybrid("qwen3.6-35b-a3b", "qwen35moe", 2048, 40, 16, 2, 512, 32), 256, 8, 512, 512));
  p.push_back(tiny("tiny-qwen35", "qwen35"));
  p.push_back(with_moe(tiny("tiny-qwen35moe", "qwen35moe"), 8, 2, 128, 128));
}

bool is_hybrid(const SynthSpec& s) {
  return s.arch == "qwen35" || s.arch == "qwen35moe";
}

bool is_linear_layer(const SynthSpec& s, int l) {
  return l < s.n_layers && (l + 1) % s.full_attention_interval != 0;
}

void validate_hybrid(const SynthSpec& s) {
  if (!is_hybrid(s)) {
    if (s.n_ff_shared_expert != 0 || s.n_nextn_layers != 0)
      fail("synth: ", s.preset, ": a shared expert and nextn layers go with qwen35 / qwen35moe");
    return;
  }
  if (s.full_attention_interval < 1 || s.ssm_conv_kernel < 1 || s.ssm_state_size < 1 ||
      s.ssm_group_count < 1 || s.ssm_time_step_rank < 1)
    fail("synth: ", s.preset, ": the linear-attention layers need positive dimensions");
  if (s.ssm_time_step_rank % s.ssm_group_count != 0)
    fail("synth: ", s.preset, ": ", s.ssm_time_step_rank, " v heads are not a multiple of ",
         s.ssm_group_count, " q/k heads");
  const int section_sum = std::accumulate(s.rope_sections.begin(), s.rope_sections.end(), 0);
  bool sections_ok =
      s.rope_sections.size() == 4 && section_sum > 0 && 2 * section_sum <= s.head_dim;
  for (int v : s.rope_sections) sections_ok = sections_ok && v >= 0;
  if (!sections_ok)
    fail("synth: ", s.preset, ": needs 4 rope sections of at most head_dim / 2 pairs in all");
  if ((s.arch == "qwen35moe") != (s.n_ff_shared_expert > 0))
    fail("synth: ", s.preset, ": qwen35moe, and only it, has a shared expert");
  if (s.n_nextn_layers < 0 || s.n_nextn_layers > 1)
    fail("synth: ", s.preset, ": ", s.n_nextn_layers, " nextn layers (llama.cpp runs 0 or 1)");
}

void add_hybrid_metadata(const SynthSpec& s, gguf::GgufWriter& w) {
  const std::string a = s.arch + ".";
  w.set_u32(a + "ssm.conv_kernel", uint32_t(s.ssm_conv_kernel));
  w.set_u32(a + "ssm.state_size", uint32_t(s.ssm_state_size));
  w.set_u32(a + "ssm.group_count", uint32_t(s.ssm_group_count));
  w.set_u32(a + "ssm.time_step_rank", uint32_t(s.ssm_time_step_rank));
  w.set_u32(a + "ssm.inner_size", uint32_t(s.ssm_state_size * s.ssm_time_step_rank));
  w.set_u32(a + "full_attention_interval", uint32_t(s.full_attention_interval));
  w.set(a + "rope.dimension_sections", gguf::Value::make_i32s(s.rope_sections));
  if (s.n_ff_shared_expert > 0)
    w.set_u32(a + "expert_shared_feed_forward_length", uint32_t(s.n_ff_shared_expert));
  if (s.n_nextn_layers > 0) w.set_u32(a + "nextn_predict_layers", uint32_t(s.n_nextn_layers));
}

void plan_hybrid_layers(PlanBuilder& b) {
  const SynthSpec& s = b.s;
  const int64_t E = s.n_embd;
  for (int l = 0; l < s.n_layers + s.n_nextn_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    b.vec(p + "attn_norm.weight", E, Fill::Norm);
    if (is_linear_layer(s, l)) {
      linear_attention(b, p, l);
    } else {
      full_attention(b, p, l);
    }
    b.vec(p + "post_attention_norm.weight", E, Fill::Norm);
    ffn(b, p, l);
    if (l >= s.n_layers) {  // the MTP layer's input: [norm(embedding), norm(hidden)] -> E
      b.matrix(p + "nextn.eh_proj.weight", "nextn.eh_proj", l, 2 * E, E);
      b.vec(p + "nextn.enorm.weight", E, Fill::Norm);
      b.vec(p + "nextn.hnorm.weight", E, Fill::Norm);
      b.vec(p + "nextn.shared_head_norm.weight", E, Fill::Norm);
    }
  }
}

}  // namespace tkv::model::synth_detail
