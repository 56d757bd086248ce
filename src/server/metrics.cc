#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "common/error.h"

namespace tkv::server {

namespace {

// Shortest text that reads back as the same double ("0.005", "1e-06").
std::string number_text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

// Label values escape backslash, double quote and line feed.
std::string label_value(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

constexpr std::string_view kPrefix = "turbokv_";

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(kPrefix).append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(kPrefix).append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view labels,
            const std::string& value) {
  out.append(kPrefix).append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(value).append("\n");
}

void counter(std::string& out, std::string_view name, std::string_view help, uint64_t value) {
  header(out, name, "counter", help);
  sample(out, name, "", std::to_string(value));
}

void gauge(std::string& out, std::string_view name, std::string_view help, uint64_t value) {
  header(out, name, "gauge", help);
  sample(out, name, "", std::to_string(value));
}

// One gauge with a tier="ram" and a tier="disk" sample.
void tier_gauge(std::string& out, std::string_view name, std::string_view help, uint64_t ram,
                uint64_t disk) {
  header(out, name, "gauge", help);
  sample(out, name, "tier=\"ram\"", std::to_string(ram));
  sample(out, name, "tier=\"disk\"", std::to_string(disk));
}

void histogram(std::string& out, std::string_view name, std::string_view help, const Histogram& h) {
  const Histogram::Snapshot s = h.snapshot();
  header(out, name, "histogram", help);
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i < s.upper_bounds.size(); ++i)
    sample(out, bucket, "le=\"" + number_text(s.upper_bounds[i]) + "\"",
           std::to_string(s.cumulative[i]));
  sample(out, bucket, "le=\"+Inf\"", std::to_string(s.count));
  sample(out, std::string(name) + "_sum", "", number_text(s.sum));
  sample(out, std::string(name) + "_count", "", std::to_string(s.count));
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    TKV_CHECK(std::isfinite(bounds_[i]));
    TKV_CHECK(i == 0 || bounds_[i - 1] < bounds_[i]);
  }
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;
  // The first bucket whose upper bound is >= value ("le"); past the last: +Inf.
  const size_t i =
      size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  double old = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(old, old + value, std::memory_order_relaxed)) {
  }
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  s.cumulative.resize(counts_.size());
  uint64_t running = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> ttft_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

std::vector<double> per_token_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5};
}

std::vector<double> queue_wait_buckets() {
  return {0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

ServerMetrics::ServerMetrics()
    : ttft_(ttft_buckets()), per_token_(per_token_buckets()), queue_wait_(queue_wait_buckets()) {}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  const std::lock_guard<std::mutex> lock(requests_mutex_);
  ++requests_[{endpoint, status}];
}

std::map<std::pair<std::string, int>, uint64_t> ServerMetrics::requests() const {
  const std::lock_guard<std::mutex> lock(requests_mutex_);
  return requests_;
}

std::string render_prometheus(const ServerMetrics& m, const ServerGauges& g) {
  std::string out;
  out.reserve(8192);
  counter(out, "prompt_tokens_total",
          "Prompt tokens of the requests served, those reused from the prefix cache included.",
          m.prompt_tokens());
  counter(out, "prefill_tokens_total",
          "Prompt tokens run through the model (not those reused from the prefix cache; a "
          "prompt of n choices once).",
          g.prefill_tokens);
  counter(out, "generation_tokens_total", "Tokens generated.", m.generated_tokens());
  counter(out, "prefix_cache_hits_total", "Requests whose prompt started with a cached prefix.",
          m.prefix_cache_hits());
  counter(out, "prefix_cache_reused_tokens_total",
          "Prompt tokens served from the prefix cache instead of prefilled.",
          m.prefix_cache_reused_tokens());
  counter(out, "prefix_cache_evictions_total",
          "Cached prefixes evicted from RAM (to the cache directory, or dropped).",
          g.prefix_evictions);

  header(out, "requests_total", "counter", "Requests answered, by endpoint and HTTP status.");
  for (const auto& [key, n] : m.requests())
    sample(
        out, "requests_total",
        "endpoint=\"" + label_value(key.first) + "\",code=\"" + std::to_string(key.second) + "\"",
        std::to_string(n));

  histogram(out, "time_to_first_token_seconds",
            "Seconds from a request's arrival to its first generated token.", m.ttft());
  histogram(out, "time_per_output_token_seconds",
            "Seconds between consecutive generated tokens of a request.", m.per_token());
  histogram(out, "queue_wait_seconds",
            "Seconds a request waited in the queue before it joined the running batch.",
            m.queue_wait());

  gauge(out, "kv_cache_used_bytes",
        "Bytes of KV pages held by running sequences and cached prefixes.", g.kv_bytes_in_use);
  gauge(out, "kv_cache_budget_bytes", "The KV budget (--kv-budget) in bytes.", g.kv_budget_bytes);
  gauge(out, "kv_cache_shared_bytes", "Bytes of KV pages referenced by more than one owner.",
        g.kv_shared_bytes);
  gauge(out, "kv_cache_spilled_bytes",
        "Of the bytes in use, those on the disk tier (--kv-spill-dir).", g.kv_spilled_bytes);
  gauge(out, "kv_cache_pages", "KV pages in use.", g.kv_pages);
  gauge(out, "sequences_active", "Sequences in the running batch.", g.sequences_active);
  gauge(out, "requests_queued", "Requests waiting for a place in the running batch.",
        g.requests_queued);
  tier_gauge(out, "prefix_cache_entries", "Cached prefixes, in RAM and in the cache directory.",
             g.cached_prefixes_ram, g.cached_prefixes_disk);
  tier_gauge(out, "prefix_cache_bytes",
             "Bytes of cached prefixes, in RAM and in the cache directory.",
             g.cached_prefix_bytes_ram, g.cached_prefix_bytes_disk);
  return out;
}

}  // namespace tkv::server
