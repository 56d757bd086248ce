// What attention reads from the KV store per decoded token, split between
// RAM and the disk tier, from the counters KvStats and PoolStats keep: the
// page tiles selection read against dense (KvStats::select_page_reads,
// select_dense_page_reads) and the pages read back from the page file
// (PoolStats::spill_reads). An estimate, not a byte count: the bytes of a
// page tile read are taken as the average page's, and every layer's pages
// as the same size (layer codec overrides make them differ).
//
// And the time of attention alone at a depth: the KV step of one decode
// token (write + attend on every layer, through the public KvCache API with
// synthetic q/k/v), timed around the attend calls only.
#pragma once

#include <cstdint>

#include "bench/json.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"

namespace tkv::bench {

struct KvReadCounters {
  int64_t select_page_reads = 0, select_dense_page_reads = 0, spill_reads = 0;
  uint64_t page_bytes_read = 0;
};
KvReadCounters kv_read_counters(const kv::KvCache& cache);

// Per token over `tokens` decode steps between `before` and now:
// {"kv_bytes", "ram_bytes", "disk_bytes", "pages_read_back",
//  "selected_page_fraction" (null without selection)}.
Json kv_reads_per_token(const kv::KvCache& cache, const KvReadCounters& before, int64_t tokens);

// Milliseconds of the attend() calls of one token's KV step on every layer
// (appends one token to the cache). `seed` picks the synthetic q/k/v.
double time_attention_step(kv::KvCache& cache, ThreadPool& pool, uint64_t seed);

}  // namespace tkv::bench
