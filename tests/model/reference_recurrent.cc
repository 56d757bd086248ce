// The Gated DeltaNet layer in double, as llama.cpp's
// src/models/qwen35.cpp (build_layer_attn_linear) defines it, per token:
//
//   mixed = W_qkv h                 [q (S G) | k (S G) | v (S Hv)]
//   z = W_gate h;  beta = sigmoid(W_beta h)
//   decay = exp(softplus(W_alpha h + dt_bias) * ssm_a)
//   u = silu(depthwise causal conv of mixed over the last K inputs)
//   q_j, k_j = u's heads / max(||.||, eps)   (ggml_l2_norm, eps = the RMS eps)
//   value head h reads key head j = h % G:
//     M <- decay M;  d = beta (v - M^T k);  M <- M + k d^T;  o = M^T q / sqrt(S)
//   y_h = RMSNorm(o, ssm_norm) * silu(z_h);  out = W_ssm_out y
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "gguf/gguf.h"
#include "reference_recurrent.h"

namespace tkv::test::ref {

namespace {

double silu(double x) {
  return x * sigmoid(x);
}

double softplus(double x) {
  return x > 20 ? x : std::log1p(std::exp(x));
}

int64_t meta(const gguf::GgufFile& f, const std::string& key) {
  const auto v = f.get_int(key);
  if (!v) throw std::runtime_error("reference: missing metadata " + key);
  return *v;
}

void l2_normalize(double* x, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double scale = 1.0 / std::max(std::sqrt(ss), eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace

DeltaNet::DeltaNet(const gguf::GgufFile& f, const std::string& arch, const std::string& p,
                   double eps_)
    : eps(eps_) {
  K = meta(f, arch + ".ssm.conv_kernel");
  S = meta(f, arch + ".ssm.state_size");
  G = meta(f, arch + ".ssm.group_count");
  Hv = meta(f, arch + ".ssm.time_step_rank");
  C = 2 * G * S + Hv * S;
  qkv = load_mat(f, p + "attn_qkv.weight");
  z = load_mat(f, p + "attn_gate.weight");
  beta = load_mat(f, p + "ssm_beta.weight");
  alpha = load_mat(f, p + "ssm_alpha.weight");
  out = load_mat(f, p + "ssm_out.weight");
  conv_w = load_vec(f, p + "ssm_conv1d.weight");
  dt_bias = load_vec(f, p + "ssm_dt.bias");
  a = load_vec(f, p + "ssm_a");
  norm = load_vec(f, p + "ssm_norm.weight");
  if (qkv.rows != C || int64_t(conv_w.size()) != K * C || int64_t(a.size()) != Hv)
    throw std::runtime_error("reference: " + p + " recurrent tensors do not fit ssm.*");
  reset();
}

void DeltaNet::reset() {
  inputs.assign(size_t(K - 1), Vec(size_t(C), 0.0));
  M.assign(size_t(Hv), Vec(size_t(S * S), 0.0));
}

// Channel c's filter is row c of ssm_conv1d ([K, C]); its last tap
// multiplies the newest input.
Vec DeltaNet::conv_silu(const Vec& mixed) {
  Vec u(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    double s = mixed[size_t(c)] * conv_w[size_t(c * K + K - 1)];
    for (int64_t i = 0; i < K - 1; ++i)
      s += inputs[size_t(i)][size_t(c)] * conv_w[size_t(c * K + i)];
    u[size_t(c)] = silu(s);
  }
  inputs.erase(inputs.begin());
  inputs.push_back(mixed);
  return u;
}

Vec DeltaNet::step(const Vec& h) {
  Vec u = conv_silu(qkv.mul(h));
  const Vec zz = z.mul(h), b = beta.mul(h), al = alpha.mul(h);
  for (int64_t j = 0; j < 2 * G; ++j) l2_normalize(u.data() + j * S, S, eps);
  Vec y(static_cast<size_t>(Hv * S));
  for (int64_t hv = 0; hv < Hv; ++hv) {
    const int64_t j = hv % G;
    const double* q = u.data() + j * S;
    const double* k = u.data() + (G + j) * S;
    const double* v = u.data() + 2 * G * S + hv * S;
    const double decay = std::exp(softplus(al[size_t(hv)] + dt_bias[size_t(hv)]) * a[size_t(hv)]);
    const double bt = sigmoid(b[size_t(hv)]);
    Vec& m = M[size_t(hv)];
    for (double& x : m) x *= decay;
    Vec o(static_cast<size_t>(S), 0.0);
    for (int64_t c = 0; c < S; ++c) {
      double mk = 0;
      for (int64_t i = 0; i < S; ++i) mk += m[size_t(i * S + c)] * k[i];
      const double d = bt * (v[c] - mk);
      for (int64_t i = 0; i < S; ++i) m[size_t(i * S + c)] += k[i] * d;
      for (int64_t i = 0; i < S; ++i) o[size_t(c)] += m[size_t(i * S + c)] * q[i];
      o[size_t(c)] /= std::sqrt(double(S));
    }
    o = rmsnorm(o, norm, eps);
    for (int64_t c = 0; c < S; ++c)
      y[size_t(hv * S + c)] = o[size_t(c)] * silu(zz[size_t(hv * S + c)]);
  }
  return out.mul(y);
}

}  // namespace tkv::test::ref
