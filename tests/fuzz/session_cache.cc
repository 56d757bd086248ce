#include <random>
#include <vector>

#include "common/thread_pool.h"
#include "kv/kv_config.h"
#include "session_fuzz.h"

namespace tkv::fuzz {

std::unique_ptr<kv::KvCache> make_session_cache(uint8_t selector) {
  kv::KvShape shape;
  shape.n_layers = 2;
  shape.n_heads = 2;
  shape.n_kv_heads = 1;
  shape.head_dim = 32;
  shape.max_tokens = 256;
  kv::KvConfig config;
  config.page_tokens = 16;
  if (selector & 1) kv::parse_kv_shorthand("k4v2", config.k, config.v);
  return std::make_unique<kv::KvCache>(shape, config);
}

void fill_session_cache(kv::KvCache& cache, int n, uint32_t seed) {
  const kv::KvShape& s = cache.shape();
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  auto random = [&](size_t count) {
    std::vector<float> v(count);
    for (float& x : v) x = normal(rng);
    return v;
  };
  ThreadPool pool(1);
  const size_t kv_floats = size_t(n) * s.n_kv_heads * s.head_dim;
  const size_t q_floats = size_t(n) * s.n_heads * s.head_dim;
  std::vector<float> out(q_floats);
  cache.begin_chunk(n);
  for (int l = 0; l < s.n_layers; ++l) {
    const auto k = random(kv_floats), v = random(kv_floats), q = random(q_floats);
    cache.write(l, k.data(), v.data(), &pool);
    cache.attend(l, q.data(), out.data(), pool);
  }
  cache.end_chunk();
}

}  // namespace tkv::fuzz
