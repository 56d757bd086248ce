// The FFN half of a layer (model/forward.h): one function per FFN kind
// (layer_spec.h).
#include <algorithm>
#include <cmath>

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
      return moe_plus_dense_ffn(l);
  }
}

// xb_ (rows of normed input) becomes W_down act(W_gate h, W_up h) for
// layer l's dense FFN (act: SwiGLU or GeGLU), row by row in place.
void Forward::dense_ffn_rows(int l) {
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const FfnSpec& ffn = c_.layers[size_t(l)].ffn;
  const int E = c_.n_embd, n_ff = ffn.n_ff;
  float* gate = ctx_.gate_.data();
  float* up = ctx_.up_.data();
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
}

// x += the dense FFN of h = RMSNorm(x) for layer l, RMS-normed first where
// the layer has a post norm.
void Forward::dense_ffn(int l) {
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int E = c_.n_embd;
  ops::rmsnorm_rows(ctx_.x_.data(), L.ffn_norm.data(), ctx_.xb_.data(), n_rows_, E, c_.rms_eps,
                    pool_);
  dense_ffn_rows(l);
  if (c_.layers[size_t(l)].ffn.post_norm)
    ops::rmsnorm_rows(ctx_.xb_.data(), L.ffn_post_norm.data(), ctx_.xb_.data(), n_rows_, E,
                      c_.rms_eps, pool_);
  ops::add(ctx_.x_.data(), ctx_.xb_.data(), int64_t(n_rows_) * E);
}

// x += the mixture of experts of h = RMSNorm(x) for layer l (model/moe.h).
void Forward::moe_ffn_layer(int l) {
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  ops::rmsnorm_rows(ctx_.x_.data(), L.ffn_norm.data(), ctx_.xb_.data(), n_rows_, c_.n_embd,
                    c_.rms_eps, pool_);
  moe_ffn(c_.layers[size_t(l)].ffn.moe, L.moe, ctx_.xb_.data(), nullptr, n_exact_, n_rows_,
          ctx_.ffn_rows_, ctx_.x_.data(), ctx_.moe_, pool_);
}

// gemma4's experts beside a dense FFN (llama.cpp's gemma4.cpp), each branch
// with its own norms:
//   dense   = post_norm_1(dense_ffn(ffn_norm(x)))
//   experts = post_norm_2(moe(pre_norm_2(x))), routed by
//             W_router (RMSNorm(x) / sqrt(n_embd) * router_scale)
//   x += post_norm(dense + experts)
void Forward::moe_plus_dense_ffn(int l) {
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int E = c_.n_embd;
  const int64_t n = int64_t(n_rows_) * E;
  const float eps = c_.rms_eps;
  float* x = ctx_.x_.data();
  float* h = ctx_.xb_.data();
  float* moe_in = ctx_.moe_in_.data();
  float* router_in = ctx_.router_in_.data();
  float* moe_out = ctx_.moe_out_.data();
  ops::rmsnorm_rows(x, L.ffn_norm.data(), h, n_rows_, E, eps, pool_);
  dense_ffn_rows(l);
  ops::rmsnorm_rows(h, L.ffn_post_norm_1.data(), h, n_rows_, E, eps, pool_);
  ops::rmsnorm_rows(x, nullptr, router_in, n_rows_, E, eps, pool_);
  const float inv_sqrt = 1.0f / std::sqrt(float(E));
  for (int t = 0; t < n_rows_; ++t) {
    float* row = router_in + size_t(t) * E;
    for (int i = 0; i < E; ++i) row[i] = row[i] * inv_sqrt * L.moe.router_scale[size_t(i)];
  }
  ops::rmsnorm_rows(x, L.ffn_pre_norm_2.data(), moe_in, n_rows_, E, eps, pool_);
  std::fill(moe_out, moe_out + n, 0.0f);
  moe_ffn(c_.layers[size_t(l)].ffn.moe, L.moe, moe_in, router_in, n_exact_, n_rows_, ctx_.ffn_rows_,
          moe_out, ctx_.moe_, pool_);
  ops::rmsnorm_rows(moe_out, L.ffn_post_norm_2.data(), moe_out, n_rows_, E, eps, pool_);
  ops::add(h, moe_out, n);
  ops::rmsnorm_rows(h, L.ffn_post_norm.data(), h, n_rows_, E, eps, pool_);
  ops::add(x, h, n);
}

}  // namespace tkv::model
