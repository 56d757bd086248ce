// A recurrent (Gated DeltaNet) layer's attention half (model/forward.h), as
// llama.cpp's src/models/qwen35.cpp builds it and ggml's CPU ops compute it:
//
//   h = RMSNorm(x)
//   mixed = h W_qkv                       q, k, v channels side by side
//   z = h W_z;  beta = sigmoid(h W_beta);  g = softplus(h W_alpha + dt_bias) a
//   c = silu(causal_conv(mixed))          width K, the last K-1 inputs kept
//   q, k = L2-normalized heads of c;  v = the rest of c
//   o = delta rule (model/delta_net.h), value head h on key head h % groups
//   out = RMSNorm_head(o) silu(z)          then W_out (attention_output)
//
// The state (the conv's last K-1 inputs per channel, then an S x S matrix
// per value head) is the sequence's: kv::KvCache::state, updated in place.
#include <algorithm>
#include <cmath>
#include <vector>

#include "model/delta_net.h"
#include "model/forward.h"

namespace tkv::model {

namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// ggml's softplus.
float softplus(float x) {
  return x > 20.0f ? x : std::log(1.0f + std::exp(x));
}

// x / max(|x|, eps), ggml_l2_norm.
void l2_normalize(float* x, int n, float eps) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::max(std::sqrt(sum), eps);
  for (int i = 0; i < n; ++i) x[i] *= scale;
}

// The causal conv of one channel over a chunk's T rows (stride C, in
// place) and its state (the channel's last K-1 inputs before the chunk,
// updated to those after it), then silu. `window` holds K-1+T floats.
void conv_channel(float* rows, int64_t stride, int T, const float* w, int K, float* state,
                  float* window) {
  std::copy_n(state, K - 1, window);
  for (int t = 0; t < T; ++t) window[K - 1 + t] = rows[int64_t(t) * stride];
  for (int t = 0; t < T; ++t) {
    float sum = 0.0f;
    for (int i = 0; i < K; ++i) sum += window[t + i] * w[i];
    const float y = sum;
    rows[int64_t(t) * stride] = y * sigmoid(y);
  }
  std::copy_n(window + T, K - 1, state);
}

}  // namespace

void Forward::recurrent_layer(int l) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int T = n_rows_, Hv = at.n_v_heads;
  float* mixed = ctx_.conv_rows_.data();
  float* z = ctx_.z_rows_.data();
  float* beta = ctx_.beta_rows_.data();
  float* gate = ctx_.gate_rows_.data();
  ops::rmsnorm_rows(ctx_.x_.data(), L.attn_norm.data(), ctx_.xb_.data(), T, c_.n_embd, c_.rms_eps,
                    pool_);
  project(L.w_qkv, ctx_.xb_.data(), n_exact_, T, mixed, pool_);
  project(L.w_z, ctx_.xb_.data(), n_exact_, T, z, pool_);
  project(L.w_beta, ctx_.xb_.data(), n_exact_, T, beta, pool_);
  project(L.w_alpha, ctx_.xb_.data(), n_exact_, T, gate, pool_);
  for (int64_t i = 0; i < int64_t(T) * Hv; ++i) {
    const int h = int(i % Hv);
    beta[i] = sigmoid(beta[i]);
    gate[i] = std::exp(softplus(gate[i] + L.dt_bias[size_t(h)]) * L.ssm_a[size_t(h)]);
  }
  each_item_with_memory([&](const LiveItem& live) { recurrent_item(l, live); }, ctx_.att_.data(),
                        at.out_width());
  // The output norm, per row and value head, gated by silu(z).
  const int S = at.state_size;
  pool_.parallel_for(int64_t(T) * Hv, 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      float* o = ctx_.att_.data() + i * S;
      ops::rmsnorm(o, L.ssm_norm.data(), o, S, c_.rms_eps);
      const float* zi = z + i * S;
      for (int j = 0; j < S; ++j) o[j] *= zi[j] * sigmoid(zi[j]);
    }
  });
  check_finite(ctx_.att_.data(), int64_t(T) * at.out_width(), l, "recurrent outputs");
}

// One item's rows of layer l: the conv over its state, then the delta rule
// per value head, into att_.
void Forward::recurrent_item(int l, const LiveItem& live) {
  const AttentionSpec& at = c_.layers[size_t(l)].attention;
  const LayerWeights& L = m_.weights_.layers[size_t(l)];
  const int C = at.conv_channels(), K = at.conv_kernel, S = at.state_size, Hv = at.n_v_heads;
  const int G = at.n_groups, T = live.n_rows;
  kv::KvCache& seq = *items_[live.index].sequence;
  const int r = m_.cache_index_[size_t(l)];
  const kv::PagePins pinned = seq.pin_state(r);  // with the disk tier it may be there
  float* state = seq.state(r);
  float* conv_state = state;
  float* matrices = state + at.conv_state_floats();
  float* rows = ctx_.conv_rows_.data() + int64_t(live.row0) * C;
  pool_.parallel_for(C, 64, [&](int64_t b, int64_t e, int) {
    std::vector<float> window(size_t(K - 1 + T));
    for (int64_t ch = b; ch < e; ++ch)
      conv_channel(rows + ch, C, T, L.conv.data() + ch * K, K, conv_state + ch * (K - 1),
                   window.data());
  });
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < 2 * G; ++h) l2_normalize(rows + int64_t(t) * C + h * S, S, c_.rms_eps);
  const float scale = 1.0f / std::sqrt(float(S));
  const float* beta = ctx_.beta_rows_.data() + int64_t(live.row0) * Hv;
  const float* decay = ctx_.gate_rows_.data() + int64_t(live.row0) * Hv;
  float* out = ctx_.att_.data() + int64_t(live.row0) * at.out_width();
  pool_.parallel_for(Hv, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t h = b; h < e; ++h) {
      float* M = matrices + h * S * S;
      const int kh = int(h % G);
      for (int t = 0; t < T; ++t) {
        const float* row = rows + int64_t(t) * C;
        ops::delta_rule_token(M, row + kh * S, row + (G + kh) * S, row + 2 * G * S + h * S,
                              decay[int64_t(t) * Hv + h], beta[int64_t(t) * Hv + h], scale,
                              out + int64_t(t) * at.out_width() + h * S, S);
      }
    }
  });
}

}  // namespace tkv::model
