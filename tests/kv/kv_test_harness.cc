#include "kv_test_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tkv::test {

RandomInputs::RandomInputs(const kv::KvShape& shape, int64_t n_tokens, uint64_t seed,
                           float outlier) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int l = 0; l < shape.n_layers; ++l) {
    const kv::KvLayerShape g = shape.layer(l);
    const size_t k_size = size_t(n_tokens) * g.n_kv_heads * g.k_dim;
    const size_t v_size = size_t(n_tokens) * g.n_kv_heads * g.v_dim;
    LayerInputs li;
    li.k.resize(k_size);
    li.v.resize(v_size);
    for (auto& x : li.k) x = normal(rng);
    for (auto& x : li.v) x = normal(rng);
    if (outlier > 0 && g.k_dim > 3)
      for (size_t i = 3; i < k_size; i += g.k_dim) li.k[i] *= outlier;
    layers.push_back(std::move(li));
    std::vector<float> ql(size_t(n_tokens) * g.n_heads * g.k_dim);
    for (auto& x : ql) x = normal(rng);
    q.push_back(std::move(ql));
  }
}

kv::KvConfig kv_config(const char* kv, int sinks, int residual) {
  kv::KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand(kv, c.k, c.v)) << kv;
  c.sinks = sinks;
  c.residual = residual;
  return c;
}

ScenarioResult run_scenario(const Scenario& s, const RandomInputs& in, bool check) {
  kv::KvCache cache(s.shape, s.config);
  ThreadPool pool(s.threads);
  ReferenceAttention ref(s.shape, s.config);
  std::vector<LayerForms> forms;
  if (check)
    for (int l = 0; l < s.shape.n_layers; ++l) forms.push_back(ref.forms(l, in.layers[l]));
  ScenarioResult result;
  result.outputs.resize(s.shape.n_layers);
  const int64_t S = s.config.effective_sinks(), R = s.config.effective_residual();
  int64_t pos = 0, row = 0;   // next position, next unused input row
  int64_t ring_lo = S;        // as the cache tracks it (kv_cache.h, truncate())
  std::vector<int64_t> rows;  // input row of each position
  for (size_t ci = 0; ci < s.chunks.size(); ++ci) {
    for (const auto& [at, to] : s.truncations)
      if (at == ci) {
        cache.truncate(to);
        pos = to;
        rows.resize(size_t(to));
        ring_lo = std::max(S, std::min(ring_lo, to));
      }
    const int n = s.chunks[ci];
    for (int t = 0; t < n; ++t) rows.push_back(row + t);
    cache.begin_chunk(n);
    for (int l = 0; l < s.shape.n_layers; ++l) {
      const kv::KvLayerShape g = s.shape.layer(l);
      const size_t k_stride = size_t(g.n_kv_heads) * g.k_dim;
      const size_t v_stride = size_t(g.n_kv_heads) * g.v_dim;
      const size_t q_stride = size_t(g.n_heads) * g.k_dim, o_stride = size_t(g.n_heads) * g.v_dim;
      const float* k = in.layers[l].k.data() + size_t(row) * k_stride;
      const float* v = in.layers[l].v.data() + size_t(row) * v_stride;
      const float* q = in.q[l].data() + size_t(row) * q_stride;
      std::vector<float> out(size_t(n) * o_stride);
      cache.write(l, k, v, s.threads > 1 ? &pool : nullptr);
      const float* sinks =
          size_t(l) < s.sinks.size() && !s.sinks[l].empty() ? s.sinks[l].data() : nullptr;
      cache.attend(l, q, out.data(), pool, {.sinks = sinks, .softcap = s.softcap});
      result.outputs[l].insert(result.outputs[l].end(), out.begin(), out.end());
      if (!check) continue;
      for (int t = 0; t < n; ++t) {
        const auto expect = ref.attend(forms[l], q + size_t(t) * q_stride, pos + t, ring_lo, rows,
                                       sinks, s.softcap);
        double err = 0, mag = 0;
        for (size_t i = 0; i < expect.size(); ++i) {
          err = std::max(err, double(std::fabs(out[size_t(t) * o_stride + i] - expect[i])));
          mag = std::max(mag, double(std::fabs(expect[i])));
        }
        result.max_rel_error = std::max(result.max_rel_error, err / std::max(mag, 1e-12));
        ++result.queries;
      }
    }
    cache.end_chunk();
    ring_lo = std::max(ring_lo, pos + n - R);
    pos += n;
    row += n;
  }
  return result;
}

void feed_chunk(kv::KvCache& cache, const RandomInputs& in, ThreadPool& pool, int64_t from, int n,
                std::vector<float>* outs) {
  const kv::KvShape& s = cache.shape();
  cache.begin_chunk(n);
  for (int l = 0; l < s.n_layers; ++l) {
    const kv::KvLayerShape g = s.layer(l);
    const size_t k_stride = size_t(g.n_kv_heads) * g.k_dim;
    const size_t v_stride = size_t(g.n_kv_heads) * g.v_dim;
    const size_t q_stride = size_t(g.n_heads) * g.k_dim;
    std::vector<float> out(size_t(n) * g.n_heads * g.v_dim);
    cache.write(l, in.layers[l].k.data() + size_t(from) * k_stride,
                in.layers[l].v.data() + size_t(from) * v_stride);
    cache.attend(l, in.q[l].data() + size_t(from) * q_stride, out.data(), pool);
    if (outs) outs->insert(outs->end(), out.begin(), out.end());
  }
  cache.end_chunk();
}

}  // namespace tkv::test
