// KvCache::fill_synthetic: deep sequences for benchmarks and tests without a
// model prefill (kv_cache.h).
#include <cmath>
#include <vector>

#include "kv/kv_cache_impl.h"

namespace tkv::kv {

namespace {

constexpr int kFillChunk = 512;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A standard normal value from one 64-bit hash (Box-Muller on its two halves).
float normal_of(uint64_t h) {
  const double u1 = (double((h >> 32) & 0xffffffffu) + 1.0) / 4294967297.0;  // (0, 1)
  const double u2 = double(h & 0xffffffffu) / 4294967296.0;                  // [0, 1)
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace

void KvCache::fill_synthetic(int64_t n, uint64_t seed, ThreadPool* pool) {
  Impl& c = *impl_;
  // Buffers for the widest layer; a layer uses its own K and V widths.
  const size_t widest = size_t(c.shape.n_kv_heads) * size_t(c.shape.head_dim);
  std::vector<float> k(size_t(kFillChunk) * widest), v(k.size());
  for (int64_t done = 0; done < n;) {
    const int T = int(std::min<int64_t>(kFillChunk, n - done));
    const int64_t pos0 = c.n_tokens;
    begin_chunk(T);
    for (int l = 0; l < c.shape.n_layers; ++l) {
      const KvLayerShape g = c.shape.layer(l);
      const size_t kw = size_t(g.n_kv_heads) * g.k_dim, vw = size_t(g.n_kv_heads) * g.v_dim;
      // One hash stream per (layer, position): element i of K and of V
      // (head-major) at 2i and 2i + 1.
      auto gen = [&](int64_t t0, int64_t t1, int) {
        for (int64_t t = t0; t < t1; ++t) {
          const uint64_t base =
              splitmix64(seed ^ splitmix64(uint64_t(l) << 40 ^ uint64_t(pos0 + t)));
          for (size_t i = 0; i < kw; ++i)
            k[size_t(t) * kw + i] = normal_of(splitmix64(base + 2 * i));
          for (size_t i = 0; i < vw; ++i)
            v[size_t(t) * vw + i] = normal_of(splitmix64(base + 2 * i + 1));
        }
      };
      if (pool)
        pool->parallel_for(T, 16, gen);
      else
        gen(0, T, 0);
      write(l, k.data(), v.data(), pool);
      c.commit_recent(l);
    }
    end_chunk();
    done += T;
  }
}

}  // namespace tkv::kv
