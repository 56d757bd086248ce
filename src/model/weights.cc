#include "model/weights.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"
#include "gguf/gguf.h"

namespace tkv::model {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

class Binder {
 public:
  explicit Binder(const gguf::GgufFile& file) : file_(file) {}

  const gguf::TensorInfo& require(const std::string& name) const {
    const gguf::TensorInfo* t = file_.find_tensor(name);
    if (!t) fail(file_.path(), ": missing tensor ", name);
    return *t;
  }

  // A matrix of `rows` outputs by `cols` inputs: ggml shape [cols, rows]
  // (a single row may be stored as a vector [cols], as llama.cpp's
  // qwen35moe shared-expert gate is).
  WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows) {
    const gguf::TensorInfo& t = require(name);
    const bool row_vector = rows == 1 && t.shape.size() == 1 && t.shape[0] == cols;
    if (!row_vector && (t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != rows)) {
      fail(file_.path(), ": tensor ", name, " has shape ", shape_string(t.shape), ", expected ",
           shape_string({cols, rows}));
    }
    bytes_ += t.n_bytes;
    try {
      return make_weight(t.type, t.data, rows, cols, name.c_str());
    } catch (const Error& e) {
      fail(file_.path(), ": ", e.what());
    }
  }

  // n_experts matrices of `rows` by `cols` (ggml shape [cols, rows,
  // n_experts]), one per expert, each its slice of the 3-D tensor.
  std::vector<WeightMatrix> experts(const std::string& name, int64_t cols, int64_t rows,
                                    int64_t n_experts) {
    const gguf::TensorInfo& t = require(name);
    if (t.shape != std::vector<int64_t>{cols, rows, n_experts}) {
      fail(file_.path(), ": tensor ", name, " has shape ", shape_string(t.shape), ", expected ",
           shape_string({cols, rows, n_experts}));
    }
    bytes_ += t.n_bytes;
    std::vector<WeightMatrix> out;
    try {
      const size_t stride = size_t(rows) * tkv::row_bytes(t.type, cols);
      for (int64_t e = 0; e < n_experts; ++e)
        out.push_back(make_weight(t.type, t.data + size_t(e) * stride, rows, cols, name.c_str()));
    } catch (const Error& e) {
      fail(file_.path(), ": ", e.what());
    }
    return out;
  }

  // A vector of n values (norm weights, biases), converted to f32.
  std::vector<float> vector(const std::string& name, int64_t n) { return values(name, {n}); }

  // Every value of a float tensor of this shape (ggml order), as f32.
  std::vector<float> values(const std::string& name, const std::vector<int64_t>& shape) {
    const gguf::TensorInfo& t = require(name);
    if (t.shape != shape) {
      fail(file_.path(), ": tensor ", name, " has shape ", shape_string(t.shape), ", expected ",
           shape_string(shape));
    }
    const DTypeTraits& tr = traits(t.type);
    if (!tr.supported || shape[0] % tr.block_size != 0) {
      fail(file_.path(), ": tensor ", name, " has unsupported type ", tr.name, " for a vector of ",
           shape[0]);
    }
    bytes_ += t.n_bytes;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, v.data(), n);
    return v;
  }

  bool has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

  uint64_t bytes() const { return bytes_; }

 private:
  const gguf::GgufFile& file_;
  uint64_t bytes_ = 0;
};

// The router, experts and shared expert of a MoE layer (prefix p).
MoeWeights bind_moe(Binder& b, const std::string& p, int n_embd, const MoeSpec& m) {
  MoeWeights w;
  const int64_t E = n_embd, G = m.n_ff, X = m.n_experts;
  w.router = b.matrix(p + "ffn_gate_inp.weight", E, X);
  if (m.router_bias) w.router_bias = b.vector(p + "ffn_gate_inp.bias", X);
  if (b.has(p + "ffn_gate_inp.scale")) w.router_scale = b.vector(p + "ffn_gate_inp.scale", E);
  if (b.has(p + "ffn_gate_up_exps.weight")) {
    // Merged: each expert's first G rows are its gate, the next G its up.
    for (WeightMatrix both : b.experts(p + "ffn_gate_up_exps.weight", E, 2 * G, X)) {
      both.rows = G;
      w.gate.push_back(both);
      both.data += size_t(G) * both.row_bytes;
      w.up.push_back(both);
    }
  } else {
    w.gate = b.experts(p + "ffn_gate_exps.weight", E, G, X);
    w.up = b.experts(p + "ffn_up_exps.weight", E, G, X);
  }
  w.down = b.experts(p + "ffn_down_exps.weight", G, E, X);
  if (m.expert_bias) {
    w.gate_bias = b.values(p + "ffn_gate_exps.bias", {G, X});
    w.up_bias = b.values(p + "ffn_up_exps.bias", {G, X});
    w.down_bias = b.values(p + "ffn_down_exps.bias", {E, X});
  }
  if (b.has(p + "ffn_down_exps.scale")) w.down_scale = b.vector(p + "ffn_down_exps.scale", X);
  if (m.n_ff_shared > 0) {
    const int64_t S = m.n_ff_shared;
    w.shared_gate = b.matrix(p + "ffn_gate_shexp.weight", E, S);
    w.shared_up = b.matrix(p + "ffn_up_shexp.weight", E, S);
    w.shared_down = b.matrix(p + "ffn_down_shexp.weight", S, E);
    if (m.shared_gate) w.shared_router = b.matrix(p + "ffn_gate_inp_shexp.weight", E, 1);
  }
  return w;
}

}  // namespace

ActiveWeights active_weights(const gguf::GgufFile& file) {
  ActiveWeights a;
  const std::string arch = file.get_string("general.architecture").value_or("");
  a.n_experts = int(std::max<int64_t>(0, file.get_int(arch + ".expert_count").value_or(0)));
  a.n_used = int(
      std::clamp<int64_t>(file.get_int(arch + ".expert_used_count").value_or(0), 0, a.n_experts));
  const bool tied = file.find_tensor("output.weight") == nullptr;
  for (const gguf::TensorInfo& t : file.tensors()) {
    a.total_params += uint64_t(t.n_elements());
    a.total_bytes += t.n_bytes;
    uint64_t num = 1, den = 1;  // the fraction of it one token reads
    const bool expert =
        a.n_experts > 0 && t.shape.size() == 3 && t.name.find("_exps.") != std::string::npos;
    if (expert) {
      num = uint64_t(a.n_used);
      den = uint64_t(a.n_experts);
    } else if ((t.name == "token_embd.weight" && !tied) ||
               t.name == "per_layer_token_embd.weight") {
      den = uint64_t(std::max<int64_t>(1, t.rows()));
    }
    a.params += uint64_t(t.n_elements()) * num / den;
    a.bytes += t.n_bytes * num / den;
    if (expert) a.expert_bytes += t.n_bytes * num / den;
  }
  return a;
}

std::vector<const WeightMatrix*> LayerWeights::matrices() const {
  std::vector<const WeightMatrix*> out;
  for (const WeightMatrix* m : {&wq, &wk, &wv, &w_qkv, &w_z, &w_beta, &w_alpha, &wo, &w_gate, &w_up,
                                &w_down, &moe.router, &pl_gate, &pl_proj})
    if (m->rows > 0) out.push_back(m);
  for (size_t e = 0; e < moe.gate.size(); ++e)
    for (const WeightMatrix* m : {&moe.gate[e], &moe.up[e], &moe.down[e]}) out.push_back(m);
  for (const WeightMatrix* m :
       {&moe.shared_router, &moe.shared_gate, &moe.shared_up, &moe.shared_down})
    if (m->rows > 0) out.push_back(m);
  return out;
}

std::vector<WeightMatrix*> LayerWeights::matrices() {
  std::vector<WeightMatrix*> out;
  for (const WeightMatrix* m : std::as_const(*this).matrices())
    out.push_back(const_cast<WeightMatrix*>(m));
  return out;
}

namespace {

// A Gated DeltaNet layer's tensors (weights.h lists them).
void bind_recurrent(Binder& b, const std::string& p, int n_embd, const AttentionSpec& at,
                    LayerWeights& L) {
  const int C = at.conv_channels(), I = at.inner_size, Hv = at.n_v_heads;
  L.w_qkv = b.matrix(p + "attn_qkv.weight", n_embd, C);
  L.w_z = b.matrix(p + "attn_gate.weight", n_embd, I);
  L.conv = b.values(p + "ssm_conv1d.weight", {at.conv_kernel, C});
  L.dt_bias = b.vector(p + "ssm_dt.bias", Hv);
  L.ssm_a = b.vector(p + "ssm_a", Hv);
  L.w_beta = b.matrix(p + "ssm_beta.weight", n_embd, Hv);
  L.w_alpha = b.matrix(p + "ssm_alpha.weight", n_embd, Hv);
  L.ssm_norm = b.vector(p + "ssm_norm.weight", at.state_size);
  L.wo = b.matrix(p + "ssm_out.weight", I, n_embd);
}

// An attention layer's tensors (a KV-shared layer's: Q and the output).
void bind_attention(Binder& b, const std::string& p, int n_embd, const AttentionSpec& at,
                    LayerWeights& L) {
  const bool own_kv = at.kind != AttentionKind::SharedKv;
  L.wq = b.matrix(p + "attn_q.weight", n_embd, at.q_width());
  if (at.qkv_bias) L.bq = b.vector(p + "attn_q.bias", at.q_width());
  if (at.qk_norm) L.q_norm = b.vector(p + "attn_q_norm.weight", at.k_dim);
  if (own_kv) {
    L.wk = b.matrix(p + "attn_k.weight", n_embd, at.k_width());
    if (!at.v_from_k) L.wv = b.matrix(p + "attn_v.weight", n_embd, at.v_width());
    if (at.qkv_bias) {
      L.bk = b.vector(p + "attn_k.bias", at.k_width());
      L.bv = b.vector(p + "attn_v.bias", at.v_width());
    }
    if (at.qk_norm) L.k_norm = b.vector(p + "attn_k_norm.weight", at.k_dim);
  }
  L.wo = b.matrix(p + "attn_output.weight", at.out_width(), n_embd);
  if (at.out_bias) L.bo = b.vector(p + "attn_output.bias", n_embd);
  if (at.sink) L.sinks = b.vector(p + "attn_sinks.weight", at.n_heads);
  if (at.post_norm) L.attn_post_norm = b.vector(p + "post_attention_norm.weight", n_embd);
}

// A layer's FFN: dense, experts, or both (gemma4); norms around it.
void bind_ffn(Binder& b, const std::string& p, const ModelConfig& c, const FfnSpec& ffn,
              LayerWeights& L) {
  const int E = c.n_embd;
  // gpt-oss and qwen35 name the FFN's input norm attn_post_norm
  // (post_attention_layernorm).
  const bool post_named =
      c.arch == Arch::GptOss || c.arch == Arch::Qwen35 || c.arch == Arch::Qwen35Moe;
  L.ffn_norm = b.vector(p + (post_named ? "post_attention_norm.weight" : "ffn_norm.weight"), E);
  if (ffn.post_norm) L.ffn_post_norm = b.vector(p + "post_ffw_norm.weight", E);
  if (ffn.kind != FfnKind::Dense) L.moe = bind_moe(b, p, E, ffn.moe);
  if (ffn.kind == FfnKind::Moe) return;
  L.w_gate = b.matrix(p + "ffn_gate.weight", E, ffn.n_ff);
  L.w_up = b.matrix(p + "ffn_up.weight", E, ffn.n_ff);
  L.w_down = b.matrix(p + "ffn_down.weight", ffn.n_ff, E);
  if (ffn.kind == FfnKind::MoePlusDense) {
    L.ffn_post_norm_1 = b.vector(p + "post_ffw_norm_1.weight", E);
    L.ffn_pre_norm_2 = b.vector(p + "pre_ffw_norm_2.weight", E);
    L.ffn_post_norm_2 = b.vector(p + "post_ffw_norm_2.weight", E);
    if (L.moe.router_scale.empty()) b.require(p + "ffn_gate_inp.scale");
  }
}

// gemma4's per-layer input and output scale of layer `s`.
void bind_layer_output(Binder& b, const std::string& p, const ModelConfig& c, const LayerSpec& s,
                       LayerWeights& L) {
  if (s.per_layer_input > 0) {
    L.pl_gate = b.matrix(p + "inp_gate.weight", c.n_embd, s.per_layer_input);
    L.pl_proj = b.matrix(p + "proj.weight", s.per_layer_input, c.n_embd);
    L.pl_post_norm = b.vector(p + "post_norm.weight", c.n_embd);
  }
  if (s.output_scale) L.output_scale = b.vector(p + "layer_output_scale.weight", 1);
}

}  // namespace

ModelWeights ModelWeights::bind(const gguf::GgufFile& file, const ModelConfig& c) {
  Binder b(file);
  ModelWeights w;
  w.token_embd = b.matrix("token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = b.vector("output_norm.weight", c.n_embd);
  w.output = c.tied_output ? w.token_embd : b.matrix("output.weight", c.n_embd, c.n_vocab);
  if (file.find_tensor("rope_freqs.weight")) {
    w.rope_freq_factors = b.vector("rope_freqs.weight", c.n_rot / 2);
    for (float f : w.rope_freq_factors) {
      if (!(f > 0.0f)) fail(file.path(), ": tensor rope_freqs.weight has a factor ", f, " <= 0");
    }
  }
  if (const int pe = c.layers.front().per_layer_input; pe > 0) {
    const int64_t PL = int64_t(pe) * c.n_layers;
    w.per_layer_embd = b.matrix("per_layer_token_embd.weight", PL, c.n_vocab);
    w.per_layer_proj = b.matrix("per_layer_model_proj.weight", c.n_embd, PL);
    w.per_layer_proj_norm = b.vector("per_layer_proj_norm.weight", pe);
  }

  w.layers.resize(size_t(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[size_t(l)];
    const LayerSpec& s = c.layers[size_t(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    L.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd);
    if (s.attention.kind == AttentionKind::Recurrent) {
      bind_recurrent(b, p, c.n_embd, s.attention, L);
    } else {
      bind_attention(b, p, c.n_embd, s.attention, L);
    }
    bind_ffn(b, p, c, s.ffn, L);
    w.expert_bytes += L.moe.expert_bytes();
    bind_layer_output(b, p, c, s, L);
  }
  w.bytes = b.bytes();
  const ActiveWeights a = active_weights(file);
  w.active_bytes = a.bytes;
  w.step_bytes = a.bytes - a.expert_bytes;
  return w;
}

}  // namespace tkv::model
