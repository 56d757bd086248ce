#include "model/context.h"

#include <algorithm>

#include "tensor/matmul.h"

namespace tkv::model {

namespace {

template <class... V>
size_t total_floats(const V&... v) {
  return (v.size() + ...);
}

}  // namespace

uint64_t ExecutionContext::activation_bytes() const {
  return total_floats(x_, xb_, q_, k_, v_, att_, attn_gate_, conv_rows_, z_rows_, beta_rows_,
                      gate_rows_, gate_, up_, moe_in_, router_in_, moe_out_, per_layer_, pl_rows_,
                      logits_, last_logits_, rope_cos_, rope_sin_, x_all_) *
             sizeof(float) +
         moe_.bytes();
}

uint64_t ExecutionContext::bytes() const {
  return activation_bytes() + attention_.bytes() + act_scratch_bytes_;
}

uint64_t ExecutionContext::peak_bytes() const {
  return std::max(peak_, bytes());
}

void ExecutionContext::note_peak() {
  act_scratch_bytes_ = tkv::activation_scratch_bytes();
  peak_ = std::max(peak_, activation_bytes() + attention_.peak_bytes() + act_scratch_bytes_);
}

void ExecutionContext::reset_peak() {
  attention_.reset_peak();
  peak_ = bytes();
}

void ExecutionContext::release() {
  for (auto* b : {&x_,         &xb_,          &q_,         &k_,         &v_,         &att_,
                  &attn_gate_, &conv_rows_,   &z_rows_,    &beta_rows_, &gate_rows_, &gate_,
                  &up_,        &moe_in_,      &router_in_, &moe_out_,   &per_layer_, &pl_rows_,
                  &logits_,    &last_logits_, &rope_cos_,  &rope_sin_,  &x_all_}) {
    std::vector<float>().swap(*b);
  }
  attention_.release();
  moe_.release();
  capacity_ = 0;
  live_.clear();
  logits_slot_.clear();
}

void ExecutionContext::reserve(const ModelConfig& c, int rows, int ffn_rows, int rope_pairs) {
  // The FFN's rows per call may change between calls (the AMX preference):
  // its buffers grow on their own, not only with the row capacity.
  ffn_rows_ = ffn_rows;
  const size_t F = size_t(std::min(rows, ffn_rows)) * size_t(c.max_ff());
  if (gate_.size() < F) {
    gate_.resize(F);
    up_.resize(F);
  }
  if (rows <= capacity_) return;
  const size_t T = size_t(rows);
  x_.resize(T * c.n_embd);
  xb_.resize(T * std::max({c.n_embd, c.max_q_width(), c.max_out_width()}));
  q_.resize(T * c.max_q_width());
  k_.resize(T * c.max_kv_width());
  v_.resize(T * c.max_kv_width());
  att_.resize(T * c.max_out_width());
  bool gated = false, beside = false;
  int v_heads = 0, per_layer = 0;
  for (const LayerSpec& s : c.layers) {
    gated = gated || s.attention.output_gate;
    beside = beside || s.ffn.kind == FfnKind::MoePlusDense;
    v_heads = std::max(v_heads, s.attention.n_v_heads);
    per_layer = std::max(per_layer, s.per_layer_input);
  }
  for (auto* b : {&moe_in_, &router_in_, &moe_out_}) b->resize(beside ? T * c.n_embd : 0);
  per_layer_.resize(T * size_t(per_layer) * size_t(c.n_layers));
  pl_rows_.resize(2 * T * size_t(per_layer));
  attn_gate_.resize(gated ? T * c.max_out_width() : 0);
  conv_rows_.resize(T * size_t(c.max_conv_channels()));
  z_rows_.resize(T * size_t(c.max_recurrent_v()));
  beta_rows_.resize(T * size_t(v_heads));
  gate_rows_.resize(T * size_t(v_heads));
  rope_cos_.resize(T * size_t(rope_pairs));
  rope_sin_.resize(T * size_t(rope_pairs));
  capacity_ = rows;
}

std::span<const float> ExecutionContext::logits(size_t item) const {
  if (item >= logits_slot_.size() || logits_slot_[item] < 0) return {};
  return std::span<const float>(last_logits_.data() + size_t(logits_slot_[item]) * n_vocab_,
                                size_t(n_vocab_));
}

}  // namespace tkv::model
