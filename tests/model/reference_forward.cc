#include "reference_forward.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/f16.h"
#include "gguf/gguf.h"
#include "reference_recurrent.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"

namespace tkv::test {

namespace ref {

namespace {

// x as the integer-dot kernels see it (tensor/matmul.h): each block of
// `block` values rounded to d * q with q = round(x * 127 / amax) in
// [-127, 127] and d = amax / 127, itself rounded to f16 for 32-value blocks
// (as ggml's q8_0 stores it). The kernels quantize their f32 activations;
// this reference quantizes its double ones, so a value within float
// rounding of a rounding boundary may land one step apart (rare: the
// tolerance covers it).
Vec quantize_activations(const Vec& x, int64_t block) {
  Vec out(x.size());
  for (size_t b0 = 0; b0 < x.size(); b0 += size_t(block)) {
    double amax = 0;
    for (size_t i = b0; i < b0 + size_t(block); ++i) amax = std::max(amax, std::fabs(x[i]));
    const double d = block == 32 ? double(round_f16(float(amax / 127.0))) : amax / 127.0;
    for (size_t i = b0; i < b0 + size_t(block); ++i)
      out[i] = amax > 0 ? d * std::nearbyint(x[i] * 127.0 / amax) : 0.0;
  }
  return out;
}

const gguf::TensorInfo& tensor(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) throw std::runtime_error("reference: missing tensor " + name);
  return *t;
}

Vec load_values(const gguf::TensorInfo& t) {
  std::vector<float> tmp(size_t(t.n_elements()));
  dequantize_row_ref(t.type, t.data, tmp.data(), t.n_elements());
  return Vec(tmp.begin(), tmp.end());
}

}  // namespace

Vec Mat::mul(const Vec& x_in) const {
  const Vec x = act_block > 0 ? quantize_activations(x_in, act_block) : x_in;
  Vec y(size_t(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += w[size_t(r * cols + c)] * x[size_t(c)];
    y[size_t(r)] = s;
  }
  return y;
}

Mat load_mat(const gguf::GgufFile& f, const std::string& name) {
  const auto& t = tensor(f, name);
  Mat m;
  m.cols = t.shape.at(0);
  m.rows = t.shape.size() > 1 ? t.shape[1] : 1;
  m.w = load_values(t);
  if (integer_path_active(t.type)) m.act_block = int64_t(traits(t.type).block_size);
  return m;
}

Vec load_vec(const gguf::GgufFile& f, const std::string& name) {
  return load_values(tensor(f, name));
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

}  // namespace ref

namespace {

using ref::load_mat;
using ref::load_vec;
using ref::Mat;
using ref::rmsnorm;
using ref::Vec;

// Each expert's matrix of a 3-D expert tensor ([cols, rows, n_experts]).
std::vector<Mat> load_experts(const gguf::GgufFile& f, const std::string& name) {
  const Vec all = load_vec(f, name);
  const gguf::TensorInfo& t = *f.find_tensor(name);
  std::vector<Mat> out(size_t(t.shape.at(2)));
  for (size_t e = 0; e < out.size(); ++e) {
    Mat& m = out[e];
    m.cols = t.shape[0];
    m.rows = t.shape[1];
    const size_t n = size_t(m.rows * m.cols);
    m.w.assign(all.begin() + ptrdiff_t(e * n), all.begin() + ptrdiff_t((e + 1) * n));
    if (integer_path_active(t.type)) m.act_block = int64_t(traits(t.type).block_size);
  }
  return out;
}

enum class Act { SwiGlu, GeGlu, SwiGluOai };

// act(g, u) as llama.cpp's ggml ops define them: SiLU, GELU (tanh form),
// gpt-oss's clamped SwiGLU (alpha 1.702, limit 7).
double activate(Act a, double g, double u) {
  switch (a) {
    case Act::SwiGlu:
      return g / (1.0 + std::exp(-g)) * u;
    case Act::GeGlu:
      return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * u;
    case Act::SwiGluOai: {
      const double x = std::min(g, 7.0), y = std::clamp(u, -7.0, 7.0);
      return x / (1.0 + std::exp(-1.702 * x)) * (y + 1.0);
    }
  }
  return 0;
}

void add_to(Vec& y, const Vec& b, size_t offset = 0) {
  if (b.empty()) return;
  for (size_t i = 0; i < y.size(); ++i) y[i] += b[offset + i];
}

// Gated FFN: down(act(gate h + gb, up h + ub)) + db (biases optional, at
// `offset` within them: an expert's row of the experts' biases).
Vec gated_ffn(Act a, const Mat& gate, const Mat& up, const Mat& down, const Vec& h,
              const Vec& gb = {}, const Vec& ub = {}, const Vec& db = {}, size_t expert = 0) {
  Vec g = gate.mul(h);
  Vec u = up.mul(h);
  add_to(g, gb, expert * g.size());
  add_to(u, ub, expert * u.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = activate(a, g[i], u[i]);
  Vec y = down.mul(g);
  add_to(y, db, expert * y.size());
  return y;
}

struct Layer {
  Vec attn_norm, ffn_norm, bq, bk, bv, q_norm, k_norm;
  Vec bo, sinks, post_attn_norm, post_ffn_norm;  // gemma3, gpt-oss (empty: none)
  bool swa = false;                              // attends to the model's window only
  int64_t head_dim = 0, n_rot = 0;               // gemma4: the window layers' own
  bool rope_factors = true;                      // divide by rope_freqs (gemma4: global layers)
  bool v_norm = false;                           // gemma4: V heads RMS-normed, no weight
  int64_t kv_source = -1;                        // gemma4: reads this layer's K/V
  Mat wq, wk, wv, wo, gate, up, down;
  // Mixture of experts (qwen3moe, Mixtral): softmax over the router's
  // logits, the n_used most probable experts, their probabilities
  // renormalized to sum 1.
  // gpt-oss: router and expert biases, the n_used largest logits then a
  // softmax over those, clamped SwiGLU.
  Mat router;
  Vec router_b, gate_exps_b, up_exps_b, down_exps_b;
  std::vector<Mat> gate_exps, up_exps, down_exps;
  int64_t n_used = 0;
  // gemma4: experts beside the dense FFN (GELU experts, a scale per
  // expert), routed from RMSNorm(x) / sqrt(n_embd) * router_scale, each
  // branch with its own norms; per-layer inputs; an output scale.
  Vec router_scale, down_exps_s, pre_norm_2, post_norm_1, post_norm_2;
  Mat pl_gate, pl_proj;
  Vec pl_post_norm;
  double out_scale = 1;
  // qwen35moe: a shared expert next to the routed ones, its output times
  // sigmoid(shexp_router . h) (one scalar per token).
  Mat shexp_router, shexp_gate, shexp_up, shexp_down;
  std::vector<Vec> keys, values;  // all past positions, kv_heads x head_dim each
  int64_t kv_heads = 0;           // this layer's (attn_k's rows / head_dim)
  // qwen35: attn_q holds per head head_dim queries then head_dim gate
  // values; the attention output is multiplied by sigmoid(gate).
  bool output_gate = false;
  std::unique_ptr<ref::DeltaNet> delta;  // qwen35's recurrent layers (no attention)
};

}  // namespace

struct ReferenceForward::Impl {
  gguf::GgufFile file;
  std::string arch;
  int64_t embd = 0, n_layers = 0, heads = 0, head_dim = 0, n_rot = 0;
  double rope_base = 10000, eps = 1e-5;
  bool neox = false;
  // gemma3 / gpt-oss (llama.cpp's gemma3.cpp, openai-moe.cpp, ggml's rope_yarn).
  bool gemma = false, oss = false, gemma4 = false, gemma2 = false;
  int64_t window = 0;
  double rope_base_swa = 10000, freq_scale = 1, embed_scale = 1, softcap = 0, q_scale = 0;
  double attn_softcap = 0;  // gemma2: scores = c tanh(scores / c)
  bool yarn = false;
  double yarn_orig_ctx = 0, mscale = 1;
  Act act = Act::SwiGlu;
  std::vector<bool> swa_flags;  // per layer: a window layer

  // qwen35 / qwen35moe: recurrent and gated attention layers, M-RoPE.
  bool hybrid = false;
  std::vector<int64_t> sections;  // rope.dimension_sections (empty: plain RoPE)

  bool swa_layer(int64_t l) const { return swa_flags[size_t(l)]; }
  Vec rope_factors;
  Mat token_embd, output;
  // gemma4's per-layer inputs: width pe per layer.
  int64_t pe = 0;
  Mat per_layer_embd, per_layer_proj;
  Vec per_layer_proj_norm;
  Vec output_norm;
  std::vector<Layer> layers;

  int64_t meta_int(const std::string& key, int64_t fallback) const {
    auto v = file.get_int(arch + "." + key);
    return v ? *v : fallback;
  }

  // qwen35's interleaved M-RoPE (ggml_mrope_cache_init, is_imrope): pair i
  // of n_rot / 2 falls in sector i % (sum of the sections); sectors cycle
  // through the t, h, w components while each has pairs left, the rest take
  // the fourth, e. For text t = h = w = the position and e = 0.
  bool fourth_section(int64_t i) const {
    if (sections.empty()) return false;
    const int64_t sector = i % (sections[0] + sections[1] + sections[2] + sections[3]);
    if (sector % 3 == 1 && sector < 3 * sections[1]) return false;
    if (sector % 3 == 2 && sector < 3 * sections[2]) return false;
    if (sector % 3 == 0 && sector < 3 * sections[0]) return false;
    return true;
  }

  void rope(double* v, int64_t n_heads, int64_t pos, const Layer& L) const {
    // gemma3/4's window layers: their own base, unscaled; gemma2's and
    // gpt-oss's: the same.
    const bool swa = L.swa;
    const int64_t head_dim = L.head_dim, n_rot = L.n_rot;
    const double base = swa ? rope_base_swa : rope_base;
    const double scale = swa && gemma && !gemma2 ? 1.0 : freq_scale;
    for (int64_t h = 0; h < n_heads; ++h) {
      double* x = v + h * head_dim;
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        if (fourth_section(i)) continue;  // rotated by position component 0
        double theta = double(pos) * std::pow(base, -2.0 * double(i) / double(n_rot));
        if (!rope_factors.empty() && L.rope_factors) theta /= rope_factors[size_t(i)];
        double mag = 1;
        if (yarn) {  // blend scaled and unscaled speeds by the ramp between the correction dims
          const auto corr = [&](double beta) {
            return double(n_rot) * std::log(yarn_orig_ctx / (beta * 2 * M_PI)) /
                   (2 * std::log(base));
          };
          const double lo = std::max(0.0, std::floor(corr(32)));
          const double hi = std::min(double(n_rot - 1), std::ceil(corr(1)));
          const double y = (double(i) - lo) / std::max(0.001, hi - lo);
          const double ramp = 1.0 - std::clamp(y, 0.0, 1.0);
          theta = theta * (scale * (1.0 - ramp) + ramp);
          mag = mscale;
        } else {
          theta *= scale;
        }
        const double c = std::cos(theta) * mag, s = std::sin(theta) * mag;
        // llama: adjacent pairs; qwen (NEOX): dimension i with i + n_rot/2
        const int64_t a = neox ? i : 2 * i, b = neox ? i + n_rot / 2 : 2 * i + 1;
        const double x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
      }
    }
  }

  // gpt-oss: the n_used largest logits, a softmax over them.
  static Vec experts_oss(const Layer& L, const Vec& h) {
    Vec p = L.router.mul(h);
    add_to(p, L.router_b);
    std::vector<size_t> idx(p.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    const double mx = p[idx[0]];
    double sum = 0;
    for (int64_t k = 0; k < L.n_used; ++k) sum += std::exp(p[idx[size_t(k)]] - mx);
    Vec out(h.size(), 0.0);
    for (int64_t k = 0; k < L.n_used; ++k) {
      const size_t e = idx[size_t(k)];
      const Vec y = gated_ffn(Act::SwiGluOai, L.gate_exps[e], L.up_exps[e], L.down_exps[e], h,
                              L.gate_exps_b, L.up_exps_b, L.down_exps_b, e);
      for (size_t i = 0; i < out.size(); ++i) out[i] += std::exp(p[e] - mx) / sum * y[i];
    }
    return out;
  }

  // Softmax over the router's logits (of router_in), the n_used most
  // probable experts, their probabilities renormalized; gemma4's experts
  // are GELU and scaled each; a shared expert where the layer has one.
  static Vec experts(const Layer& L, const Vec& h, const Vec& router_in, Act act) {
    Vec p = L.router.mul(router_in);
    const double mx = *std::max_element(p.begin(), p.end());
    double sum = 0;
    for (double& v : p) sum += (v = std::exp(v - mx));
    std::vector<size_t> idx(p.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int64_t k = 0; k < L.n_used; ++k) chosen += p[idx[size_t(k)]];
    Vec out(h.size(), 0.0);
    for (int64_t k = 0; k < L.n_used; ++k) {
      const size_t e = idx[size_t(k)];
      Vec y = gated_ffn(act, L.gate_exps[e], L.up_exps[e], L.down_exps[e], h);
      if (!L.down_exps_s.empty())
        for (double& v : y) v *= L.down_exps_s[e];
      for (size_t i = 0; i < out.size(); ++i) out[i] += p[e] / chosen * y[i];
    }
    if (!L.shexp_up.w.empty()) {
      const Vec y = gated_ffn(Act::SwiGlu, L.shexp_gate, L.shexp_up, L.shexp_down, h);
      const double g = L.shexp_router.w.empty() ? 1.0 : ref::sigmoid(L.shexp_router.mul(h)[0]);
      for (size_t i = 0; i < out.size(); ++i) out[i] += g * y[i];
    }
    return out;
  }

  // Each head of v (n_heads x dim) RMS-normed with `w` (empty: no weight).
  void norm_heads(Vec& v, int64_t n_heads, int64_t dim, const Vec& w) const {
    const Vec ones(size_t(dim), 1.0);
    for (int64_t hd = 0; hd < n_heads; ++hd) {
      Vec part(v.begin() + hd * dim, v.begin() + (hd + 1) * dim);
      part = rmsnorm(part, w.empty() ? ones : w, eps);
      std::copy(part.begin(), part.end(), v.begin() + hd * dim);
    }
  }

  // Layer L's query, key and value for one token at `pos` (a KV-shared
  // layer's query only); its K and V appended to the layer's history.
  Vec project_qkv(Layer& L, const Vec& h, int64_t pos, Vec& gate) const {
    const int64_t head_dim = L.head_dim;
    Vec q = L.wq.mul(h);
    if (L.output_gate) {
      Vec qq(size_t(heads * head_dim));
      gate.resize(qq.size());
      for (int64_t i = 0; i < heads * head_dim; ++i) {
        const int64_t hd = i / head_dim, j = i % head_dim;
        qq[size_t(i)] = q[size_t(hd * 2 * head_dim + j)];
        gate[size_t(i)] = q[size_t(hd * 2 * head_dim + head_dim + j)];
      }
      q = std::move(qq);
    }
    if (!L.bq.empty())
      for (size_t i = 0; i < q.size(); ++i) q[i] += L.bq[i];
    if (!L.q_norm.empty()) norm_heads(q, heads, head_dim, L.q_norm);
    rope(q.data(), heads, pos, L);
    if (L.kv_source >= 0) return q;
    Vec k = L.wk.mul(h);
    Vec v = L.wv.w.empty() ? k : L.wv.mul(h);  // gemma4's global layers: V is K
    if (!L.bk.empty()) {
      for (size_t i = 0; i < k.size(); ++i) k[i] += L.bk[i];
      for (size_t i = 0; i < v.size(); ++i) v[i] += L.bv[i];
    }
    if (!L.k_norm.empty()) norm_heads(k, L.kv_heads, head_dim, L.k_norm);
    if (L.v_norm) norm_heads(v, L.kv_heads, head_dim, {});
    rope(k.data(), L.kv_heads, pos, L);
    L.keys.push_back(k);
    L.values.push_back(v);
    return q;
  }

  // Layer L's attention for one token at `pos` (over its own K/V, or a
  // KV-shared layer's source's): the output projection's result, before the
  // residual add.
  Vec attention(Layer& L, const Vec& h, int64_t pos) const {
    Vec gate;
    const Vec q = project_qkv(L, h, pos, gate);
    const Layer& kv = L.kv_source >= 0 ? layers[size_t(L.kv_source)] : L;
    const int64_t head_dim = L.head_dim, group = heads / kv.kv_heads;
    // A window layer sees the newest `window` positions, its own included.
    const size_t first = L.swa ? size_t(std::max<int64_t>(0, pos - window + 1)) : 0;
    const double score_scale = q_scale > 0 ? q_scale : 1.0 / std::sqrt(double(head_dim));

    Vec att(size_t(heads * head_dim), 0.0);
    for (int64_t hd = 0; hd < heads; ++hd) {
      const int64_t kvh = hd / group;
      std::vector<double> scores;
      // A learned sink is one more logit in the softmax, with no value.
      const double sink = L.sinks.empty() ? -INFINITY : L.sinks[size_t(hd)];
      double max_score = sink;
      for (size_t t = first; t < kv.keys.size(); ++t) {
        double s = 0;
        for (int64_t i = 0; i < head_dim; ++i)
          s += q[size_t(hd * head_dim + i)] * kv.keys[t][size_t(kvh * head_dim + i)];
        s *= score_scale;
        if (attn_softcap > 0) s = attn_softcap * std::tanh(s / attn_softcap);
        scores.push_back(s);
        max_score = std::max(max_score, s);
      }
      double sum = L.sinks.empty() ? 0.0 : std::exp(sink - max_score);
      for (double& s : scores) sum += (s = std::exp(s - max_score));
      for (size_t t = 0; t < scores.size(); ++t) {
        for (int64_t i = 0; i < head_dim; ++i) {
          att[size_t(hd * head_dim + i)] +=
              scores[t] / sum * kv.values[first + t][size_t(kvh * head_dim + i)];
        }
      }
    }
    for (size_t i = 0; i < gate.size(); ++i) att[i] *= ref::sigmoid(gate[i]);
    Vec o = L.wo.mul(att);
    add_to(o, L.bo);
    if (!L.post_attn_norm.empty()) o = rmsnorm(o, L.post_attn_norm, eps);
    return o;
  }

  // The FFN's output for x (before the residual add): dense, experts, or
  // gemma4's both, each with its norms.
  Vec ffn(const Layer& L, const Vec& x) const {
    const Vec h = rmsnorm(x, L.ffn_norm, eps);
    Vec d;
    if (L.n_used == 0) {
      d = gated_ffn(act, L.gate, L.up, L.down, h);
    } else if (oss) {
      d = experts_oss(L, h);
    } else if (!gemma4) {
      d = experts(L, h, h, Act::SwiGlu);
    } else {
      d = rmsnorm(gated_ffn(act, L.gate, L.up, L.down, h), L.post_norm_1, eps);
      Vec r = rmsnorm(x, Vec(x.size(), 1.0), eps);
      for (size_t i = 0; i < r.size(); ++i) r[i] *= L.router_scale[i] / std::sqrt(double(embd));
      const Vec e =
          rmsnorm(experts(L, rmsnorm(x, L.pre_norm_2, eps), r, Act::GeGlu), L.post_norm_2, eps);
      for (size_t i = 0; i < d.size(); ++i) d[i] += e[i];
    }
    if (!L.post_ffn_norm.empty()) d = rmsnorm(d, L.post_ffn_norm, eps);
    return d;
  }

  // gemma4: every layer's input of its own for a token with scaled
  // embedding e (n_layers x pe values).
  Vec per_layer_inputs(int32_t token, const Vec& e) const {
    Vec in = per_layer_proj.mul(e);
    const Vec own(per_layer_embd.w.begin() + token * pe * n_layers,
                  per_layer_embd.w.begin() + (token + 1) * pe * n_layers);
    for (int64_t l = 0; l < n_layers; ++l) {
      Vec part(in.begin() + l * pe, in.begin() + (l + 1) * pe);
      for (double& v : part) v /= std::sqrt(double(embd));
      part = rmsnorm(part, per_layer_proj_norm, eps);
      for (int64_t i = 0; i < pe; ++i)
        in[size_t(l * pe + i)] =
            (part[size_t(i)] + own[size_t(l * pe + i)] * std::sqrt(double(pe))) / std::sqrt(2.0);
    }
    return in;
  }

  // gemma4, after the FFN: x += RMSNorm(proj(gelu(gate x) * in_l)); x *= scale.
  void layer_output(const Layer& L, int64_t l, const Vec& in, Vec& x) const {
    if (pe > 0) {
      Vec g = L.pl_gate.mul(x);
      for (int64_t i = 0; i < pe; ++i)
        g[size_t(i)] = activate(Act::GeGlu, g[size_t(i)], in[size_t(l * pe + i)]);
      const Vec y = rmsnorm(L.pl_proj.mul(g), L.pl_post_norm, eps);
      for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    }
    for (double& v : x) v *= L.out_scale;
  }

  // One token at position `pos`; returns its logits.
  Vec step(int32_t token, int64_t pos) {
    Vec x(token_embd.w.begin() + token * embd, token_embd.w.begin() + (token + 1) * embd);
    for (double& v : x) v *= embed_scale;
    const Vec in = pe > 0 ? per_layer_inputs(token, x) : Vec();
    for (size_t l = 0; l < layers.size(); ++l) {
      Layer& L = layers[l];
      const Vec h = rmsnorm(x, L.attn_norm, eps);
      const Vec o = L.delta ? L.delta->step(h) : attention(L, h, pos);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      const Vec d = ffn(L, x);
      for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
      layer_output(L, int64_t(l), in, x);
    }
    Vec logits = output.mul(rmsnorm(x, output_norm, eps));
    if (softcap > 0)
      for (double& v : logits) v = softcap * std::tanh(v / softcap);
    return logits;
  }

  void read_window_and_rope();
  Layer load_layer(int64_t l);
  void load_gemma4_attention(Layer& L, int64_t l);
  void load_ffn(Layer& L, const std::string& prefix);
  void load_gemma4_experts(Layer& L, const std::string& prefix);
  void load_layer_output(Layer& L, const std::string& prefix);
};

// Window layers (attention.sliding_window_pattern: a period with every n-th
// layer global, or one flag per layer; by default 6 for gemma3, 2 for
// gemma2 and gpt-oss) and RoPE scaling (linear, or YaRN with its magnitude
// 1 + 0.1 ln factor), gemma's scales, soft-caps and GeGLU.
void ReferenceForward::Impl::read_window_and_rope() {
  window = meta_int("attention.sliding_window", gemma2 ? 4096 : 0);
  swa_flags.assign(size_t(n_layers), false);
  int64_t period = gemma2 || oss ? 2 : gemma ? 6 : 0;
  const std::string pattern = arch + ".attention.sliding_window_pattern";
  const gguf::Value* p = file.find(pattern);
  if (p && p->is_array()) {
    const auto ints = p->bools.empty() ? file.get_ints(pattern) : std::nullopt;
    for (int64_t l = 0; l < n_layers; ++l)
      swa_flags[size_t(l)] = ints ? (*ints)[size_t(l)] != 0 : bool(p->bools[size_t(l)]);
  } else {
    if (p) period = *file.get_int(pattern);
    for (int64_t l = 0; l < n_layers; ++l)
      swa_flags[size_t(l)] = period > 0 && l % period < period - 1;
  }
  rope_base_swa =
      file.get_float(arch + ".rope.freq_base_swa").value_or(gemma && !gemma2 ? 10000.0 : rope_base);
  const double factor = file.get_float(arch + ".rope.scaling.factor").value_or(0.0);
  if (factor > 0 && factor != 1) freq_scale = 1.0 / factor;
  yarn = file.get_string(arch + ".rope.scaling.type").value_or("") == "yarn";
  if (yarn) {
    yarn_orig_ctx =
        double(meta_int("rope.scaling.original_context_length", meta_int("context_length", 0)));
    mscale = 1.0 + 0.1 * std::log(1.0 / freq_scale);
  }
  if (gemma) {
    embed_scale = std::sqrt(double(embd));
    const bool by_width = n_layers == (gemma2 ? 46 : 62);  // the 27B sizes
    q_scale = by_width ? 1.0 / std::sqrt(double(embd / heads)) : 1.0 / std::sqrt(double(head_dim));
    if (gemma4) q_scale = 1.0;  // gemma4.cpp: f_attention_scale = 1
    act = Act::GeGlu;
    softcap = file.get_float(arch + ".final_logit_softcapping").value_or(gemma2 ? 30.0 : 0.0);
    if (gemma2) attn_softcap = file.get_float(arch + ".attn_logit_softcapping").value_or(50.0);
  }
}

// Layer l's tensors: its norms, its attention (or, qwen35's recurrent
// layers, the Gated DeltaNet), its FFN (load_ffn).
Layer ReferenceForward::Impl::load_layer(int64_t l) {
  const std::string p = "blk." + std::to_string(l) + ".";
  Layer L;
  L.attn_norm = load_vec(file, p + "attn_norm.weight");
  // gpt-oss's and qwen35's FFN input norm is their "post-attention" norm;
  // gemma3 has both.
  L.ffn_norm =
      load_vec(file, p + (oss || hybrid ? "post_attention_norm.weight" : "ffn_norm.weight"));
  if (gemma) {
    L.post_attn_norm = load_vec(file, p + "post_attention_norm.weight");
    L.post_ffn_norm = load_vec(file, p + "post_ffw_norm.weight");
  }
  load_ffn(L, p);
  if (hybrid && file.find_tensor(p + "ssm_a")) {
    L.delta = std::make_unique<ref::DeltaNet>(file, arch, p, eps);
    return L;
  }
  if (file.find_tensor(p + "attn_output.bias")) L.bo = load_vec(file, p + "attn_output.bias");
  if (file.find_tensor(p + "attn_sinks.weight")) L.sinks = load_vec(file, p + "attn_sinks.weight");
  L.swa = window > 0 && swa_layer(l);
  L.output_gate = hybrid;
  L.head_dim = head_dim;
  L.n_rot = n_rot;
  if (gemma4) load_gemma4_attention(L, l);
  L.wq = load_mat(file, p + "attn_q.weight");
  L.wo = load_mat(file, p + "attn_output.weight");
  if (L.kv_source >= 0) {  // queries only
    L.q_norm = load_vec(file, p + "attn_q_norm.weight");
    return L;
  }
  L.wk = load_mat(file, p + "attn_k.weight");
  L.kv_heads = L.wk.rows / L.head_dim;
  if (file.find_tensor(p + "attn_v.weight")) L.wv = load_mat(file, p + "attn_v.weight");
  if (file.find_tensor(p + "attn_q.bias")) {
    L.bq = load_vec(file, p + "attn_q.bias");
    L.bk = load_vec(file, p + "attn_k.bias");
    L.bv = load_vec(file, p + "attn_v.bias");
  }
  if (file.find_tensor(p + "attn_q_norm.weight")) {
    L.q_norm = load_vec(file, p + "attn_q_norm.weight");
    L.k_norm = load_vec(file, p + "attn_k_norm.weight");
  }
  return L;
}

// gemma4's window layers: their own head dims and rotated dims, no RoPE
// factors; V heads normed; the KV-shared layers' sources (llama.cpp's
// reuse: the first shared layer's index less 2 for a window layer, less 1
// for a global one).
void ReferenceForward::Impl::load_gemma4_attention(Layer& L, int64_t l) {
  if (L.swa) {
    L.head_dim = meta_int("attention.key_length_swa", head_dim);
    L.n_rot = meta_int("rope.dimension_count_swa", L.head_dim);
    L.rope_factors = false;
  }
  L.v_norm = true;
  const int64_t kv_from = n_layers - meta_int("attention.shared_kv_layers", 0);
  if (l >= kv_from) L.kv_source = kv_from - (swa_layer(l) ? 2 : 1);
}

// gemma4's per-layer input and output scale of layer p.
void ReferenceForward::Impl::load_layer_output(Layer& L, const std::string& p) {
  if (pe > 0) {
    L.pl_gate = load_mat(file, p + "inp_gate.weight");
    L.pl_proj = load_mat(file, p + "proj.weight");
    L.pl_post_norm = load_vec(file, p + "post_norm.weight");
  }
  if (file.find_tensor(p + "layer_output_scale.weight"))
    L.out_scale = load_vec(file, p + "layer_output_scale.weight")[0];
}

void ReferenceForward::Impl::load_ffn(Layer& L, const std::string& p) {
  load_layer_output(L, p);
  if (gemma4 || !file.find_tensor(p + "ffn_gate_inp.weight")) {
    L.gate = load_mat(file, p + "ffn_gate.weight");
    L.up = load_mat(file, p + "ffn_up.weight");
    L.down = load_mat(file, p + "ffn_down.weight");
    if (!file.find_tensor(p + "ffn_gate_inp.weight")) return;
  }
  L.router = load_mat(file, p + "ffn_gate_inp.weight");
  L.n_used = meta_int("expert_used_count", 0);
  if (gemma4) {
    load_gemma4_experts(L, p);
    return;
  }
  L.gate_exps = load_experts(file, p + "ffn_gate_exps.weight");
  L.up_exps = load_experts(file, p + "ffn_up_exps.weight");
  L.down_exps = load_experts(file, p + "ffn_down_exps.weight");
  if (oss) {
    L.router_b = load_vec(file, p + "ffn_gate_inp.bias");
    L.gate_exps_b = load_vec(file, p + "ffn_gate_exps.bias");
    L.up_exps_b = load_vec(file, p + "ffn_up_exps.bias");
    L.down_exps_b = load_vec(file, p + "ffn_down_exps.bias");
  }
  if (file.find_tensor(p + "ffn_up_shexp.weight")) {
    if (file.find_tensor(p + "ffn_gate_inp_shexp.weight"))
      L.shexp_router = load_mat(file, p + "ffn_gate_inp_shexp.weight");
    L.shexp_gate = load_mat(file, p + "ffn_gate_shexp.weight");
    L.shexp_up = load_mat(file, p + "ffn_up_shexp.weight");
    L.shexp_down = load_mat(file, p + "ffn_down_shexp.weight");
  }
}

// gemma4's experts: merged gate+up (each expert's first half of rows its
// gate), a down scale per expert, the router's input scale, the norms of
// both branches.
void ReferenceForward::Impl::load_gemma4_experts(Layer& L, const std::string& p) {
  for (Mat& both : load_experts(file, p + "ffn_gate_up_exps.weight")) {
    const size_t half = size_t(both.rows / 2 * both.cols);
    Mat g = both, u = both;
    g.rows = u.rows = both.rows / 2;
    g.w.assign(both.w.begin(), both.w.begin() + ptrdiff_t(half));
    u.w.assign(both.w.begin() + ptrdiff_t(half), both.w.end());
    L.gate_exps.push_back(std::move(g));
    L.up_exps.push_back(std::move(u));
  }
  L.down_exps = load_experts(file, p + "ffn_down_exps.weight");
  L.down_exps_s = load_vec(file, p + "ffn_down_exps.scale");
  L.router_scale = load_vec(file, p + "ffn_gate_inp.scale");
  L.pre_norm_2 = load_vec(file, p + "pre_ffw_norm_2.weight");
  L.post_norm_1 = load_vec(file, p + "post_ffw_norm_1.weight");
  L.post_norm_2 = load_vec(file, p + "post_ffw_norm_2.weight");
}

ReferenceForward::ReferenceForward(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.file = gguf::GgufFile::open(path);
  m.arch = m.file.require_string("general.architecture");
  m.gemma4 = m.arch == "gemma4";
  m.gemma2 = m.arch == "gemma2";
  m.gemma = m.arch == "gemma3" || m.gemma4 || m.gemma2;
  m.oss = m.arch == "gpt-oss";
  m.hybrid = m.arch == "qwen35" || m.arch == "qwen35moe";
  m.neox = m.arch == "qwen2" || m.arch == "qwen3" || m.arch == "qwen3moe" || m.gemma || m.oss ||
           m.hybrid;
  m.embd = m.meta_int("embedding_length", 0);
  // qwen35's multi-token-prediction blocks follow the trunk and are not run.
  m.n_layers = m.meta_int("block_count", 0) - m.meta_int("nextn_predict_layers", 0);
  m.heads = m.meta_int("attention.head_count", 0);
  m.head_dim = m.meta_int("attention.key_length", m.embd / m.heads);
  m.n_rot = m.meta_int("rope.dimension_count", m.head_dim);
  m.rope_base = m.file.get_float(m.arch + ".rope.freq_base").value_or(10000.0);
  m.eps = m.file.require_float(m.arch + ".attention.layer_norm_rms_epsilon");
  if (m.file.find_tensor("rope_freqs.weight"))
    m.rope_factors = load_vec(m.file, "rope_freqs.weight");
  if (m.hybrid) {
    m.sections =
        m.file.get_ints(m.arch + ".rope.dimension_sections").value_or(std::vector<int64_t>{});
    m.sections.resize(4, 0);
  }

  m.read_window_and_rope();
  m.token_embd = load_mat(m.file, "token_embd.weight");
  m.pe = m.meta_int("embedding_length_per_layer_input", 0);
  if (m.pe > 0) {
    m.per_layer_embd = load_mat(m.file, "per_layer_token_embd.weight");
    m.per_layer_proj = load_mat(m.file, "per_layer_model_proj.weight");
    m.per_layer_proj_norm = load_vec(m.file, "per_layer_proj_norm.weight");
  }
  m.output_norm = load_vec(m.file, "output_norm.weight");
  m.output = m.file.find_tensor("output.weight") ? load_mat(m.file, "output.weight") : m.token_embd;
  for (int64_t l = 0; l < m.n_layers; ++l) m.layers.push_back(m.load_layer(l));
}

ReferenceForward::~ReferenceForward() = default;

int ReferenceForward::n_vocab() const {
  return int(impl_->output.rows);
}

std::vector<std::vector<double>> ReferenceForward::run(const std::vector<int32_t>& tokens) {
  for (auto& L : impl_->layers) {
    L.keys.clear();
    L.values.clear();
    if (L.delta) L.delta->reset();
  }
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < tokens.size(); ++i) out.push_back(impl_->step(tokens[i], int64_t(i)));
  return out;
}

}  // namespace tkv::test
