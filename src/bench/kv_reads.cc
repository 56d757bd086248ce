#include "bench/kv_reads.h"

#include <algorithm>
#include <vector>

#include "common/timer.h"

namespace tkv::bench {

namespace {

// Uniform in [-1, 1) from (seed, index): the values do not matter for
// timing, only that they are finite and not all equal.
void fill_values(std::vector<float>& v, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f = float(int64_t(x >> 40) - (int64_t(1) << 23)) / float(1 << 23);
  }
}

}  // namespace

KvReadCounters kv_read_counters(const kv::KvCache& cache) {
  const kv::KvStats s = cache.stats();
  return {s.select_page_reads, s.select_dense_page_reads, cache.pool()->stats().spill_reads,
          s.page_bytes_read};
}

Json kv_reads_per_token(const kv::KvCache& cache, const KvReadCounters& before, int64_t tokens) {
  const kv::KvStats s = cache.stats();
  const KvReadCounters now = kv_read_counters(cache);
  const double n = double(std::max<int64_t>(tokens, 1));
  // The pages attention read (a window layer its window's, a selecting
  // layer its choice), per step.
  const int64_t sel = now.select_page_reads - before.select_page_reads;
  const int64_t dense = now.select_dense_page_reads - before.select_dense_page_reads;
  const double fraction = dense > 0 ? double(sel) / double(dense) : 1.0;
  const double page_reads = double(now.page_bytes_read - before.page_bytes_read) / n;
  const double kv_bytes = page_reads + double(s.f16_bytes) + double(s.summary_bytes);
  const double avg_page = s.pages_allocated > 0 ? double(s.page_bytes) / s.pages_allocated : 0;
  const int64_t back = now.spill_reads - before.spill_reads;
  const double disk = std::min(kv_bytes * n, double(back) * avg_page) / n;
  return {{"kv_bytes", kv_bytes},
          {"ram_bytes", kv_bytes - disk},
          {"disk_bytes", disk},
          {"pages_read_back", double(back) / n},
          {"selected_page_fraction", dense > 0 ? Json(fraction) : Json(nullptr)}};
}

double time_attention_step(kv::KvCache& cache, ThreadPool& pool, uint64_t seed) {
  const kv::KvShape& sh = cache.shape();
  std::vector<float> k(size_t(sh.n_kv_heads) * sh.head_dim), v(k.size());
  std::vector<float> q(size_t(sh.n_heads) * sh.head_dim), out(q.size());
  double seconds = 0;
  cache.begin_chunk(1);
  for (int layer = 0; layer < sh.n_layers; ++layer) {
    fill_values(k, seed * 3 + uint64_t(layer) * 7 + 1);
    fill_values(v, seed * 3 + uint64_t(layer) * 7 + 2);
    fill_values(q, seed * 3 + uint64_t(layer) * 7 + 3);
    cache.write(layer, k.data(), v.data(), &pool);
    Stopwatch clock;
    cache.attend(layer, q.data(), out.data(), pool);
    seconds += clock.seconds();
  }
  cache.end_chunk();
  return seconds * 1e3;
}

}  // namespace tkv::bench
