// The FFN half of a layer (model/forward.h): one function per FFN kind
// (layer_spec.h).
#include <algorithm>

#include "common/error.h"
#include "model/forward.h"

namespace tkv::model {

// x += ffn(RMSNorm(x)) for layer l, per its FFN kind.
void Forward::ffn_layer(int l) {
  switch (c_.layers[size_t(l)].ffn.kind) {
    case FfnKind::Dense:
      return dense_ffn(l);
    case FfnKind::Moe:
      return moe_ffn_layer(l);
    case FfnKind::MoePlusDense:
      // ModelConfig::from_gguf rejects it (unsupported_reason).
      fail("layer ", l, ": ", ffn_kind_name(c_.layers[size_t(l)].ffn.kind),
           " is not supported yet");
  }
}

// x += W_down act(W_gate h, W_up h), h = RMSNorm(x), for layer l (act:
// SwiGLU or GeGLU), the sum RMS-normed first where the layer has a post norm.
void Forward::dense_ffn(int l) {
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const FfnSpec& ffn = c_.layers[size_t(l)].ffn;
  const int E = c_.n_embd, n_ff = ffn.n_ff;
  float* gate = ctx_.gate_.data();
  float* up = ctx_.up_.data();

  ops::rmsnorm_rows(ctx_.x_.data(), L.ffn_norm.data(), ctx_.xb_.data(), n_rows_, E, c_.rms_eps,
                    pool_);
  // At most ffn_rows rows at a time (reserved by Forward::run), never mixing
  // exact and GEMM rows.
  for (int t0 = 0; t0 < n_rows_;) {
    const bool exact = t0 < n_exact_;
    const int rows = std::min(ctx_.ffn_rows_, (exact ? n_exact_ : n_rows_) - t0);
    float* h = ctx_.xb_.data() + size_t(t0) * E;  // normed input in, FFN output out
    product(L.w_gate, h, rows, gate, exact, pool_);
    product(L.w_up, h, rows, up, exact, pool_);
    // Row by row: the kernel's vector body and its scalar tail may round
    // exp() differently, so where a row is split must not depend on its
    // neighbours in the batch.
    ops::gated_activation_rows(ffn.activation, gate, up, rows, n_ff, pool_);
    product(L.w_down, gate, rows, h, exact, pool_);
    t0 += rows;
  }
  if (ffn.post_norm)
    ops::rmsnorm_rows(ctx_.xb_.data(), L.ffn_post_norm.data(), ctx_.xb_.data(), n_rows_, E,
                      c_.rms_eps, pool_);
  ops::add(ctx_.x_.data(), ctx_.xb_.data(), int64_t(n_rows_) * E);
}

// x += the mixture of experts of h = RMSNorm(x) for layer l (model/moe.h).
void Forward::moe_ffn_layer(int l) {
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  ops::rmsnorm_rows(ctx_.x_.data(), L.ffn_norm.data(), ctx_.xb_.data(), n_rows_, c_.n_embd,
                    c_.rms_eps, pool_);
  moe_ffn(c_.layers[size_t(l)].ffn.moe, L.moe, ctx_.xb_.data(), n_exact_, n_rows_, ctx_.ffn_rows_,
          ctx_.x_.data(), ctx_.moe_, pool_);
}

}  // namespace tkv::model
