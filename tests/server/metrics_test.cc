// Metrics: the /metrics text is valid Prometheus exposition (every line a
// comment or a sample of a declared family), histograms are cumulative and
// consistent, counters count, and concurrent updates are not lost.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tkv::server {
namespace {

struct Parsed {
  std::map<std::string, std::string> types;  // family -> counter | gauge | histogram
  std::map<std::string, double> samples;     // "name{labels}" -> value
};

// A strict reader of the subset of the text format the server writes; fails
// the test on any line it does not understand.
Parsed parse_exposition(const std::string& text) {
  Parsed p;
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*)");
  const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram))");
  const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")"
      R"((?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (\S+))");
  std::istringstream in(text);
  std::string line;
  std::set<std::string> helped;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      EXPECT_TRUE(helped.insert(m[1]).second) << "second HELP for " << m[1];
    } else if (std::regex_match(line, m, type)) {
      EXPECT_TRUE(helped.count(m[1])) << "TYPE before HELP for " << m[1];
      EXPECT_FALSE(p.types.count(m[1])) << "second TYPE for " << m[1];
      p.types[m[1]] = m[2];
    } else if (std::regex_match(line, m, sample)) {
      const std::string name = m[1];
      std::string family = name;
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (!p.types.count(family) && family.size() > strlen(suffix) &&
            family.compare(family.size() - strlen(suffix), std::string::npos, suffix) == 0)
          family.resize(family.size() - strlen(suffix));
      EXPECT_TRUE(p.types.count(family)) << "sample of an undeclared family: " << line;
      EXPECT_EQ(name.rfind("turbokv_", 0), 0u) << line;
      const std::string key = name + std::string(m[2]);
      EXPECT_FALSE(p.samples.count(key)) << "duplicate sample " << key;
      p.samples[key] = m[3] == "+Inf" ? INFINITY : std::stod(m[3]);
    } else {
      ADD_FAILURE() << "not an exposition line: '" << line << "'";
    }
  }
  return p;
}

TEST(Metrics, EmptyRenderIsValidAndComplete) {
  ServerMetrics m;
  const Parsed p = parse_exposition(render_prometheus(m, {}));
  for (const char* counter :
       {"turbokv_prompt_tokens_total", "turbokv_prefill_tokens_total",
        "turbokv_generation_tokens_total", "turbokv_prefix_cache_hits_total",
        "turbokv_prefix_cache_reused_tokens_total", "turbokv_requests_total"}) {
    EXPECT_EQ(p.types.at(counter), "counter") << counter;
  }
  for (const char* h : {"turbokv_time_to_first_token_seconds",
                        "turbokv_time_per_output_token_seconds", "turbokv_queue_wait_seconds"}) {
    EXPECT_EQ(p.types.at(h), "histogram") << h;
    EXPECT_EQ(p.samples.at(std::string(h) + "_count"), 0);
    EXPECT_EQ(p.samples.at(std::string(h) + "_bucket{le=\"+Inf\"}"), 0);
  }
  for (const char* g :
       {"turbokv_kv_cache_used_bytes", "turbokv_kv_cache_budget_bytes",
        "turbokv_kv_cache_shared_bytes", "turbokv_kv_cache_spilled_bytes", "turbokv_kv_cache_pages",
        "turbokv_sequences_active", "turbokv_requests_queued", "turbokv_prefix_cache_entries",
        "turbokv_prefix_cache_bytes"}) {
    EXPECT_EQ(p.types.at(g), "gauge") << g;
  }
  // Counter families end in _total; nothing else does.
  for (const auto& [name, type] : p.types)
    EXPECT_EQ(type == "counter", name.size() > 6 && name.substr(name.size() - 6) == "_total")
        << name;
}

TEST(Metrics, CountersIncrease) {
  ServerMetrics m;
  m.add_prompt_tokens(100);
  m.add_prompt_tokens(28);
  m.add_generated_tokens(64);
  m.add_prefix_cache_hit(96);
  m.add_prefix_cache_hit(32);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 200);
  m.count_request("/v1/chat/completions", 400);
  m.count_request("/v1/completions", 503);
  Parsed p = parse_exposition(render_prometheus(m, {}));
  EXPECT_EQ(p.samples.at("turbokv_prompt_tokens_total"), 128);
  EXPECT_EQ(p.samples.at("turbokv_generation_tokens_total"), 64);
  EXPECT_EQ(p.samples.at("turbokv_prefix_cache_hits_total"), 2);
  EXPECT_EQ(p.samples.at("turbokv_prefix_cache_reused_tokens_total"), 128);
  EXPECT_EQ(p.samples.at(R"(turbokv_requests_total{endpoint="/v1/chat/completions",code="200"})"),
            2);
  EXPECT_EQ(p.samples.at(R"(turbokv_requests_total{endpoint="/v1/chat/completions",code="400"})"),
            1);
  EXPECT_EQ(p.samples.at(R"(turbokv_requests_total{endpoint="/v1/completions",code="503"})"), 1);
  m.add_generated_tokens(1);
  p = parse_exposition(render_prometheus(m, {}));
  EXPECT_EQ(p.samples.at("turbokv_generation_tokens_total"), 65);
}

TEST(Metrics, HistogramBucketsAreCumulative) {
  ServerMetrics m;
  // Buckets: 0.005 0.01 0.025 0.05 0.1 0.25 0.5 1 ...; "le" includes the bound.
  for (double s : {0.001, 0.005, 0.02, 0.1, 0.1, 0.7, 500.0}) m.observe_ttft(s);
  const Parsed p = parse_exposition(render_prometheus(m, {}));
  const std::string b = "turbokv_time_to_first_token_seconds_bucket";
  EXPECT_EQ(p.samples.at(b + "{le=\"0.005\"}"), 2);
  EXPECT_EQ(p.samples.at(b + "{le=\"0.01\"}"), 2);
  EXPECT_EQ(p.samples.at(b + "{le=\"0.025\"}"), 3);
  EXPECT_EQ(p.samples.at(b + "{le=\"0.1\"}"), 5);
  EXPECT_EQ(p.samples.at(b + "{le=\"1\"}"), 6);
  EXPECT_EQ(p.samples.at(b + "{le=\"120\"}"), 6);
  EXPECT_EQ(p.samples.at(b + "{le=\"+Inf\"}"), 7);
  EXPECT_EQ(p.samples.at("turbokv_time_to_first_token_seconds_count"), 7);
  EXPECT_NEAR(p.samples.at("turbokv_time_to_first_token_seconds_sum"), 500.926, 1e-9);

  // In every histogram the buckets, ordered by le, never decrease, and the
  // +Inf bucket equals _count.
  for (const auto& [family, type] : p.types) {
    if (type != "histogram") continue;
    std::vector<std::pair<double, double>> buckets;  // (le, cumulative count)
    const std::string prefix = family + "_bucket{le=\"";
    for (const auto& [key, value] : p.samples)
      if (key.rfind(prefix, 0) == 0) {
        const std::string le = key.substr(prefix.size(), key.size() - prefix.size() - 2);
        buckets.emplace_back(le == "+Inf" ? INFINITY : std::stod(le), value);
      }
    std::sort(buckets.begin(), buckets.end());
    ASSERT_GE(buckets.size(), 2u) << family;
    for (size_t i = 1; i < buckets.size(); ++i)
      EXPECT_GE(buckets[i].second, buckets[i - 1].second) << family << " le=" << buckets[i].first;
    EXPECT_EQ(buckets.back().first, INFINITY);
    EXPECT_EQ(buckets.back().second, p.samples.at(family + "_count")) << family;
  }
}

TEST(Metrics, HistogramIgnoresNaN) {
  Histogram h({1.0, 2.0});
  h.observe(std::nan(""));
  h.observe(1.5);
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 1u);
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{0, 1, 1}));
  EXPECT_EQ(s.sum, 1.5);
}

TEST(Metrics, GaugesComeFromTheSnapshot) {
  ServerMetrics m;
  ServerGauges g;
  g.kv_bytes_in_use = 123456789;
  g.kv_budget_bytes = 536870912;
  g.kv_shared_bytes = 4096;
  g.kv_spilled_bytes = 8192;
  g.prefix_evictions = 9;
  g.kv_pages = 77;
  g.sequences_active = 8;
  g.requests_queued = 3;
  g.cached_prefixes_ram = 5;
  g.cached_prefix_bytes_ram = 1000;
  g.cached_prefixes_disk = 2;
  g.cached_prefix_bytes_disk = 2000;
  const Parsed p = parse_exposition(render_prometheus(m, g));
  EXPECT_EQ(p.samples.at("turbokv_kv_cache_used_bytes"), 123456789);
  EXPECT_EQ(p.samples.at("turbokv_kv_cache_budget_bytes"), 536870912);
  EXPECT_EQ(p.samples.at("turbokv_kv_cache_shared_bytes"), 4096);
  EXPECT_EQ(p.samples.at("turbokv_kv_cache_spilled_bytes"), 8192);
  EXPECT_EQ(p.samples.at("turbokv_prefix_cache_evictions_total"), 9);
  EXPECT_EQ(p.types.at("turbokv_prefix_cache_evictions_total"), "counter");
  EXPECT_EQ(p.samples.at("turbokv_kv_cache_pages"), 77);
  EXPECT_EQ(p.samples.at("turbokv_sequences_active"), 8);
  EXPECT_EQ(p.samples.at("turbokv_requests_queued"), 3);
  EXPECT_EQ(p.samples.at(R"(turbokv_prefix_cache_entries{tier="ram"})"), 5);
  EXPECT_EQ(p.samples.at(R"(turbokv_prefix_cache_entries{tier="disk"})"), 2);
  EXPECT_EQ(p.samples.at(R"(turbokv_prefix_cache_bytes{tier="ram"})"), 1000);
  EXPECT_EQ(p.samples.at(R"(turbokv_prefix_cache_bytes{tier="disk"})"), 2000);
}

TEST(Metrics, LabelValuesAreEscaped) {
  ServerMetrics m;
  m.count_request("/odd\"path\\\n", 404);
  const std::string text = render_prometheus(m, {});
  EXPECT_NE(text.find(R"(endpoint="/odd\"path\\\n",code="404")"), std::string::npos) << text;
  parse_exposition(text);
}

TEST(Metrics, ConcurrentUpdatesAreAllCounted) {
  ServerMetrics m;
  constexpr int kThreads = 4, kEach = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&m, t] {
      for (int i = 0; i < kEach; ++i) {
        m.add_generated_tokens(1);
        m.observe_per_token(0.001 * (i % 7));
        m.observe_queue_wait(0.5);
        if (i % 100 == 0) m.count_request("/v1/completions", 200 + t);
      }
    });
  // Renders while the writers run must parse too.
  for (int i = 0; i < 5; ++i) parse_exposition(render_prometheus(m, {}));
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(m.generated_tokens(), uint64_t(kThreads) * kEach);
  EXPECT_EQ(m.per_token().snapshot().count, uint64_t(kThreads) * kEach);
  EXPECT_DOUBLE_EQ(m.queue_wait().snapshot().sum, 0.5 * kThreads * kEach);
  uint64_t requests = 0;
  for (const auto& [key, n] : m.requests()) requests += n;
  EXPECT_EQ(requests, uint64_t(kThreads) * (kEach / 100));
}

}  // namespace
}  // namespace tkv::server
