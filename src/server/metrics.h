// Server metrics for GET /metrics, in the Prometheus text exposition format
// (version 0.0.4): counters and histograms the server updates as it works
// (ServerMetrics, lock-free on the hot path), and gauges read at render time
// from the engine (ServerGauges, a snapshot the caller fills).
//
// Names (all prefixed turbokv_):
//   counters    prompt_tokens_total, generation_tokens_total,
//               prefix_cache_hits_total, prefix_cache_reused_tokens_total,
//               prefix_cache_evictions_total, requests_total{endpoint, code}
//   histograms  time_to_first_token_seconds, time_per_output_token_seconds,
//               queue_wait_seconds (each _bucket{le}, _sum, _count)
//   gauges      kv_cache_used_bytes, kv_cache_budget_bytes,
//               kv_cache_shared_bytes, kv_cache_spilled_bytes, kv_cache_pages,
//               sequences_active,
//               requests_queued, prefix_cache_entries{tier="ram"|"disk"},
//               prefix_cache_bytes{tier="ram"|"disk"}
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tkv::server {

// A histogram with fixed upper bounds (seconds). observe() is lock-free;
// a render concurrent with observe() may miss the newest observation, but
// its buckets are always cumulative and the +Inf bucket equals _count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending, finite

  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::vector<std::atomic<uint64_t>> counts_;  // per bucket, not cumulative; +Inf last
  std::atomic<double> sum_{0.0};
};

// The bucket bounds the server uses.
std::vector<double> ttft_buckets();        // 5 ms .. 120 s
std::vector<double> per_token_buckets();   // 1 ms .. 5 s
std::vector<double> queue_wait_buckets();  // 1 ms .. 300 s

class ServerMetrics {
 public:
  ServerMetrics();

  void add_prompt_tokens(uint64_t n) { prompt_tokens_.fetch_add(n, std::memory_order_relaxed); }
  void add_generated_tokens(uint64_t n) {
    generated_tokens_.fetch_add(n, std::memory_order_relaxed);
  }
  // One request whose prompt started with a cached prefix of `reused_tokens`.
  void add_prefix_cache_hit(uint64_t reused_tokens) {
    prefix_cache_hits_.fetch_add(1, std::memory_order_relaxed);
    prefix_cache_reused_tokens_.fetch_add(reused_tokens, std::memory_order_relaxed);
  }
  // One answered request: its route ("/v1/chat/completions") and HTTP status.
  void count_request(const std::string& endpoint, int status);

  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_per_token(double seconds) { per_token_.observe(seconds); }
  void observe_queue_wait(double seconds) { queue_wait_.observe(seconds); }

  uint64_t prompt_tokens() const { return prompt_tokens_.load(std::memory_order_relaxed); }
  uint64_t generated_tokens() const { return generated_tokens_.load(std::memory_order_relaxed); }
  uint64_t prefix_cache_hits() const { return prefix_cache_hits_.load(std::memory_order_relaxed); }
  uint64_t prefix_cache_reused_tokens() const {
    return prefix_cache_reused_tokens_.load(std::memory_order_relaxed);
  }
  // (endpoint, status) -> count, sorted.
  std::map<std::pair<std::string, int>, uint64_t> requests() const;
  const Histogram& ttft() const { return ttft_; }
  const Histogram& per_token() const { return per_token_; }
  const Histogram& queue_wait() const { return queue_wait_; }

 private:
  std::atomic<uint64_t> prompt_tokens_{0};
  std::atomic<uint64_t> generated_tokens_{0};
  std::atomic<uint64_t> prefix_cache_hits_{0};
  std::atomic<uint64_t> prefix_cache_reused_tokens_{0};
  mutable std::mutex requests_mutex_;  // once per request, not per token
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  Histogram ttft_;
  Histogram per_token_;
  Histogram queue_wait_;
};

// Engine state at render time.
struct ServerGauges {
  uint64_t kv_bytes_in_use = 0;   // pages held by sequences and cached prefixes
  uint64_t kv_budget_bytes = 0;   // --kv-budget
  uint64_t kv_shared_bytes = 0;   // bytes of pages referenced by more than one owner
  uint64_t kv_spilled_bytes = 0;  // of kv_bytes_in_use, on the disk tier (--kv-spill-dir)
  uint64_t prefix_evictions = 0;  // cached prefixes evicted from RAM so far (a counter)
  uint64_t prefill_tokens = 0;    // prompt tokens run through the model so far (a counter)
  uint64_t kv_pages = 0;          // pages in use
  uint64_t sequences_active = 0;  // sequences in the running batch
  uint64_t requests_queued = 0;   // admitted requests waiting for a slot
  uint64_t cached_prefixes_ram = 0;
  uint64_t cached_prefix_bytes_ram = 0;
  uint64_t cached_prefixes_disk = 0;
  uint64_t cached_prefix_bytes_disk = 0;
};

// The whole /metrics body (Content-Type: text/plain; version=0.0.4).
std::string render_prometheus(const ServerMetrics& metrics, const ServerGauges& gauges);

}  // namespace tkv::server
