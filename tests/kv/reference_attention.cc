#include "reference_attention.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/f16.h"
#include "kv/codec/codec.h"

namespace tkv::test {

ReferenceAttention::ReferenceAttention(const kv::KvShape& shape, const kv::KvConfig& config)
    : shape_(shape),
      config_(config),
      S_(config.effective_sinks()),
      R_(config.effective_residual()),
      W_(config.window) {}

LayerForms ReferenceAttention::forms(int layer, const LayerInputs& in) const {
  LayerForms f;
  f.geom = shape_.layer(layer);
  const int kd = f.geom.k_dim, vd = f.geom.v_dim;
  const int P = config_.page_tokens;
  auto rot = std::make_shared<const kv::Rotation>(kd, kv::rotation_seed(config_, layer));
  auto v_rot =
      vd == kd ? rot : std::make_shared<const kv::Rotation>(vd, kv::rotation_seed(config_, layer));
  auto kc = kv::make_codec(config_.k_for(layer, shape_.n_layers), kd, rot);
  auto vc = kv::make_codec(config_.v_for(layer, shape_.n_layers), vd, v_rot);
  auto make = [&](const std::vector<float>& x, const kv::Codec& codec, int hd,
                  std::vector<float>& f16, std::vector<float>& coded) {
    f16.resize(x.size());
    coded.resize(x.size());
    std::vector<uint8_t> page(codec.page_bytes(P));
    std::vector<float> src(hd);
    for (size_t vec = 0; vec < x.size() / hd; ++vec) {
      for (int i = 0; i < hd; ++i) {
        f16[vec * hd + i] = round_f16(x[vec * hd + i]);
        // With a residual window, pages are encoded from the f16 form.
        src[i] = R_ > 0 ? f16[vec * hd + i] : x[vec * hd + i];
      }
      const int slot = int(vec % P);
      codec.encode(src.data(), page.data(), P, slot);
      codec.decode(page.data(), P, slot, coded.data() + vec * hd);
    }
  };
  make(in.k, *kc, kd, f.k_f16, f.k_codec);
  make(in.v, *vc, vd, f.v_f16, f.v_codec);
  return f;
}

std::vector<float> ReferenceAttention::attend(const LayerForms& f, const float* q,
                                              int64_t p) const {
  std::vector<int64_t> rows(size_t(p) + 1);
  for (int64_t j = 0; j <= p; ++j) rows[size_t(j)] = j;
  return attend(f, q, p, 0, rows);
}

std::vector<float> ReferenceAttention::attend(const LayerForms& f, const float* q, int64_t p,
                                              int64_t ring_lo, const std::vector<int64_t>& rows,
                                              const float* sinks, float softcap) const {
  const int kd = f.geom.k_dim, vd = f.geom.v_dim, n_kv = f.geom.n_kv_heads;
  const int G = f.geom.n_heads / n_kv;
  const int64_t wlo = W_ > 0 ? p - W_ + 1 : 0;
  // The model's window hides everything older, the sinks included.
  const int64_t model_lo = f.geom.window > 0 ? std::max<int64_t>(0, p - f.geom.window + 1) : 0;
  std::vector<float> out(size_t(f.geom.n_heads) * vd, 0.0f);
  for (int h = 0; h < n_kv; ++h) {
    std::vector<const float*> keys, values;
    for (int64_t j = model_lo; j <= p; ++j) {
      const size_t k_off = (size_t(rows[size_t(j)]) * n_kv + h) * kd;
      const size_t v_off = (size_t(rows[size_t(j)]) * n_kv + h) * vd;
      if (j < S_ || j >= std::max<int64_t>(p - R_ + 1, ring_lo)) {
        if (j >= S_ && j < wlo) continue;
        keys.push_back(f.k_f16.data() + k_off);
        values.push_back(f.v_f16.data() + v_off);
      } else if (j >= wlo) {
        keys.push_back(f.k_codec.data() + k_off);
        values.push_back(f.v_codec.data() + v_off);
      }
    }
    for (int g = 0; g < G; ++g) {
      const float* qh = q + size_t(h * G + g) * kd;
      std::vector<double> s(keys.size());
      const double sink = sinks ? double(sinks[h * G + g]) : -1e300;
      double mx = sink;
      for (size_t t = 0; t < keys.size(); ++t) {
        double dot = 0;
        for (int i = 0; i < kd; ++i) dot += double(qh[i]) * keys[t][i];
        s[t] = dot / std::sqrt(double(kd));
        if (softcap > 0) s[t] = softcap * std::tanh(s[t] / softcap);
        mx = std::max(mx, s[t]);
      }
      double l = sinks ? std::exp(sink - mx) : 0.0;
      std::vector<double> acc(vd, 0.0);
      for (size_t t = 0; t < keys.size(); ++t) {
        const double w = std::exp(s[t] - mx);
        l += w;
        for (int i = 0; i < vd; ++i) acc[i] += w * values[t][i];
      }
      for (int i = 0; i < vd; ++i) out[size_t(h * G + g) * vd + i] = float(acc[i] / l);
    }
  }
  return out;
}

}  // namespace tkv::test
