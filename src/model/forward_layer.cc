// What a gemma4 layer adds after its FFN (model/forward.h), as llama.cpp's
// src/models/gemma4.cpp computes it:
//   per-layer inputs, once per batch: for each row with token t and scaled
//   embedding e (what the first layer's x is),
//     in = (RMSNorm_chunks(W_model_proj e / sqrt(n_embd)) + embd_l[t] sqrt(w)) / sqrt(2)
//   (w = the per-layer width; n_layers chunks of w, each RMS-normed with
//   per_layer_proj_norm; embd_l: per_layer_token_embd's row for t);
//   layer l, after the FFN's residual add:
//     x += RMSNorm(W_proj (gelu(W_gate x) * in[l]))   (post_norm)
//     x *= layer_output_scale
#include <cmath>

#include "model/forward.h"

namespace tkv::model {

void Forward::per_layer_inputs() {
  const int pe = c_.layers.front().per_layer_input;
  if (pe == 0) return;
  const ModelWeights& w = m_.weights_;
  const size_t E = size_t(c_.n_embd), PL = size_t(pe) * size_t(c_.n_layers);
  // Every row's scaled token embedding (x_ holds a carry instead for an
  // item continuing its chunk), in xb_, which the first layer overwrites.
  float* e = ctx_.xb_.data();
  for (const auto& live : all_) {
    const BatchItem& it = items_[live.index];
    float* rows = e + size_t(live.home) * E;
    for (int t = 0; t < live.n_rows; ++t)
      weight_row(w.token_embd, it.tokens[size_t(t)], rows + size_t(t) * E);
    for (size_t i = 0; i < size_t(live.n_rows) * E; ++i) rows[i] *= c_.embed_scale;
  }
  float* in = ctx_.per_layer_.data();
  project(w.per_layer_proj, e, batch_exact_, batch_rows_, in, pool_);
  const float proj_scale = 1.0f / std::sqrt(float(E));
  for (size_t i = 0; i < size_t(batch_rows_) * PL; ++i) in[i] *= proj_scale;
  ops::rmsnorm_rows(in, w.per_layer_proj_norm.data(), in, int64_t(batch_rows_) * c_.n_layers, pe,
                    c_.rms_eps, pool_);
  const float embd_scale = std::sqrt(float(pe)), mix = 1.0f / std::sqrt(2.0f);
  std::vector<float> embd(PL);
  for (const auto& live : all_) {
    const BatchItem& it = items_[live.index];
    for (int t = 0; t < live.n_rows; ++t) {
      weight_row(w.per_layer_embd, it.tokens[size_t(t)], embd.data());
      float* row = in + size_t(live.home + t) * PL;
      for (size_t i = 0; i < PL; ++i) row[i] = (row[i] + embd[i] * embd_scale) * mix;
    }
  }
}

void Forward::layer_output(int l) {
  const LayerSpec& s = c_.layers[size_t(l)];
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int E = c_.n_embd;
  float* x = ctx_.x_.data();
  if (const int pe = s.per_layer_input; pe > 0) {
    float* gate = ctx_.pl_rows_.data();
    float* input = gate + size_t(n_rows_) * size_t(pe);
    const size_t PL = size_t(pe) * size_t(c_.n_layers);
    for (const auto& live : ctx_.live_)
      for (int t = 0; t < live.n_rows; ++t)
        std::copy_n(ctx_.per_layer_.data() + size_t(live.home + live.tok0 + t) * PL +
                        size_t(l) * size_t(pe),
                    size_t(pe), input + size_t(live.row0 + t) * size_t(pe));
    project(L.pl_gate, x, n_exact_, n_rows_, gate, pool_);
    ops::gated_activation_rows(GatedActivation::GeGlu, gate, input, n_rows_, pe, pool_);
    float* y = ctx_.xb_.data();
    project(L.pl_proj, gate, n_exact_, n_rows_, y, pool_);
    ops::rmsnorm_rows(y, L.pl_post_norm.data(), y, n_rows_, E, c_.rms_eps, pool_);
    ops::add(x, y, int64_t(n_rows_) * E);
  }
  if (s.output_scale) {
    const float scale = L.output_scale[0];
    for (int64_t i = 0; i < int64_t(n_rows_) * E; ++i) x[i] *= scale;
  }
}

}  // namespace tkv::model
