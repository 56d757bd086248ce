#include "model/weights.h"

#include <string>

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

  // A matrix of `rows` outputs by `cols` inputs: ggml shape [cols, rows].
  WeightMatrix matrix(const std::string& name, int64_t cols, int64_t rows) {
    const gguf::TensorInfo& t = require(name);
    if (t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != rows) {
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

  // A vector of n values (norm weights, biases), converted to f32.
  std::vector<float> vector(const std::string& name, int64_t n) {
    const gguf::TensorInfo& t = require(name);
    if (t.shape.size() != 1 || t.shape[0] != n) {
      fail(file_.path(), ": tensor ", name, " has shape ", shape_string(t.shape), ", expected ",
           shape_string({n}));
    }
    const DTypeTraits& tr = traits(t.type);
    if (!tr.supported || n % tr.block_size != 0) {
      fail(file_.path(), ": tensor ", name, " has unsupported type ", tr.name, " for a vector of ",
           n);
    }
    bytes_ += t.n_bytes;
    std::vector<float> v(static_cast<size_t>(n));
    dequantize_row(t.type, t.data, v.data(), n);
    return v;
  }

  uint64_t bytes() const { return bytes_; }

 private:
  const gguf::GgufFile& file_;
  uint64_t bytes_ = 0;
};

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

  w.layers.resize(size_t(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[size_t(l)];
    const AttentionSpec& at = c.layers[size_t(l)].attention;
    const int ff = c.layers[size_t(l)].ffn.n_ff;
    const std::string p = "blk." + std::to_string(l) + ".";
    L.attn_norm = b.vector(p + "attn_norm.weight", c.n_embd);
    L.wq = b.matrix(p + "attn_q.weight", c.n_embd, at.q_width());
    L.wk = b.matrix(p + "attn_k.weight", c.n_embd, at.k_width());
    L.wv = b.matrix(p + "attn_v.weight", c.n_embd, at.v_width());
    if (at.qkv_bias) {
      L.bq = b.vector(p + "attn_q.bias", at.q_width());
      L.bk = b.vector(p + "attn_k.bias", at.k_width());
      L.bv = b.vector(p + "attn_v.bias", at.v_width());
    }
    if (at.qk_norm) {
      L.q_norm = b.vector(p + "attn_q_norm.weight", at.k_dim);
      L.k_norm = b.vector(p + "attn_k_norm.weight", at.k_dim);
    }
    L.wo = b.matrix(p + "attn_output.weight", at.out_width(), c.n_embd);
    L.ffn_norm = b.vector(p + "ffn_norm.weight", c.n_embd);
    L.w_gate = b.matrix(p + "ffn_gate.weight", c.n_embd, ff);
    L.w_up = b.matrix(p + "ffn_up.weight", c.n_embd, ff);
    L.w_down = b.matrix(p + "ffn_down.weight", ff, c.n_embd);
  }
  w.bytes = b.bytes();
  return w;
}

}  // namespace tkv::model
