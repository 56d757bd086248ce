#include "kv_test_harness.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tkv::test {

RandomInputs::RandomInputs(const kv::KvShape& shape, int64_t n_tokens, uint64_t seed,
                           float outlier) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t kv_size = size_t(n_tokens) * shape.n_kv_heads * shape.head_dim;
  const size_t q_size = size_t(n_tokens) * shape.n_heads * shape.head_dim;
  for (int l = 0; l < shape.n_layers; ++l) {
    LayerInputs li;
    li.k.resize(kv_size);
    li.v.resize(kv_size);
    for (auto& x : li.k) x = normal(rng);
    for (auto& x : li.v) x = normal(rng);
    if (outlier > 0 && shape.head_dim > 3)
      for (size_t i = 3; i < kv_size; i += shape.head_dim) li.k[i] *= outlier;
    layers.push_back(std::move(li));
    std::vector<float> ql(q_size);
    for (auto& x : ql) x = normal(rng);
    q.push_back(std::move(ql));
  }
}

ScenarioResult run_scenario(const Scenario& s, const RandomInputs& in, bool check) {
  kv::KvCache cache(s.shape, s.config);
  ThreadPool pool(s.threads);
  ReferenceAttention ref(s.shape, s.config);
  std::vector<LayerForms> forms;
  if (check)
    for (int l = 0; l < s.shape.n_layers; ++l) forms.push_back(ref.forms(l, in.layers[l]));
  const int hd = s.shape.head_dim, n_kv = s.shape.n_kv_heads, nh = s.shape.n_heads;
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
      const float* k = in.layers[l].k.data() + size_t(row) * n_kv * hd;
      const float* v = in.layers[l].v.data() + size_t(row) * n_kv * hd;
      const float* q = in.q[l].data() + size_t(row) * nh * hd;
      std::vector<float> out(size_t(n) * nh * hd);
      cache.write(l, k, v, s.threads > 1 ? &pool : nullptr);
      cache.attend(l, q, out.data(), pool);
      result.outputs[l].insert(result.outputs[l].end(), out.begin(), out.end());
      if (!check) continue;
      for (int t = 0; t < n; ++t) {
        const auto expect = ref.attend(forms[l], q + size_t(t) * nh * hd, pos + t, ring_lo, rows);
        double err = 0, mag = 0;
        for (size_t i = 0; i < expect.size(); ++i) {
          err = std::max(err, double(std::fabs(out[size_t(t) * nh * hd + i] - expect[i])));
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
  const size_t kv_stride = size_t(s.n_kv_heads) * s.head_dim;
  const size_t q_stride = size_t(s.n_heads) * s.head_dim;
  cache.begin_chunk(n);
  for (int l = 0; l < s.n_layers; ++l) {
    std::vector<float> out(size_t(n) * q_stride);
    cache.write(l, in.layers[l].k.data() + size_t(from) * kv_stride,
                in.layers[l].v.data() + size_t(from) * kv_stride);
    cache.attend(l, in.q[l].data() + size_t(from) * q_stride, out.data(), pool);
    if (outs) outs->insert(outs->end(), out.begin(), out.end());
  }
  cache.end_chunk();
}

}  // namespace tkv::test
