#include "bench/kernel_protocol.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>

#include "bench/kv_configs.h"
#include "bench/protocols.h"
#include "bench/stats.h"
#include "bench/table.h"
#include "bench/units.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "common/timer.h"
#include "kv/kv_cache.h"

namespace tkv::bench {

namespace {

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

// A few chunks of Gaussian K/V/Q, cycled through while filling: content
// does not change the work, generating fresh numbers per token would
// dominate the fill.
struct SyntheticBlocks {
  static constexpr int kBlocks = 3;
  std::vector<float> k[kBlocks], v[kBlocks], q[kBlocks];
  SyntheticBlocks(int tokens, const kv::KvShape& s, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int b = 0; b < kBlocks; ++b) {
      k[b].resize(size_t(tokens) * s.n_kv_heads * s.head_dim);
      v[b].resize(k[b].size());
      q[b].resize(size_t(tokens) * s.n_heads * s.head_dim);
      for (auto* vec : {&k[b], &v[b], &q[b]})
        for (float& x : *vec) x = n(rng);
    }
  }
};

// Bytes one decode step reads at `n` tokens: packed pages + f16 sinks/residual.
uint64_t kv_bytes_read(const kv::KvCache& cache, int64_t n) {
  const kv::KvStats st = cache.stats();
  const auto& s = cache.shape();
  const int64_t S = cache.config().effective_sinks(), R = cache.config().effective_residual();
  const int64_t f16_tokens = std::min(n, S) + std::min(R, std::max<int64_t>(0, n - S));
  const int64_t page_tokens = std::max<int64_t>(0, n - f16_tokens);
  const double per_token = st.k_bytes_per_token_head + st.v_bytes_per_token_head;
  return uint64_t(double(s.n_kv_heads) *
                  (double(page_tokens) * per_token + double(f16_tokens) * 2.0 * 2.0 * s.head_dim));
}

}  // namespace

double measure_copy_bandwidth(int threads, size_t bytes, int reps) {
  ThreadPool pool(threads);
  std::unique_ptr<uint8_t, AlignedFree> src(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  std::unique_ptr<uint8_t, AlignedFree> dst(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  if (!src || !dst) throw std::bad_alloc();
  // First touch from the threads that will copy (page placement).
  pool.parallel_for(int64_t(bytes), 1 << 20, [&](int64_t b, int64_t e, int) {
    std::memset(src.get() + b, 1, size_t(e - b));
    std::memset(dst.get() + b, 2, size_t(e - b));
  });
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    Stopwatch clock;
    pool.parallel_for(int64_t(bytes), 1 << 20, [&](int64_t b, int64_t e, int) {
      std::memcpy(dst.get() + b, src.get() + b, size_t(e - b));
    });
    best = std::max(best, 2.0 * double(bytes) / clock.seconds() / 1e9);
  }
  return best;
}

Json copy_bandwidth_cell(const Json& req) {
  const int threads = req.value("threads", 1);
  const size_t bytes = req.value("bytes", size_t(256) << 20);
  return {{"status", "ok"},
          {"bytes", bytes},
          {"copy_gb_per_s", measure_copy_bandwidth(threads, bytes, req.value("reps", 5))}};
}

Json kernel_cell(const Json& req) {
  const auto threads = req.at("threads").get<std::vector<int>>();
  if (threads.empty()) fail("kernel cell: no thread counts");
  kv::KvShape shape;
  shape.n_layers = 1;
  shape.n_kv_heads = req.at("kv_heads").get<int>();
  shape.n_heads = shape.n_kv_heads * req.at("gqa").get<int>();
  shape.head_dim = req.at("head_dim").get<int>();
  const auto depths = req.at("depths").get<std::vector<int64_t>>();
  const int warmup = req.at("warmup").get<int>(), steps = req.at("steps").get<int>();
  const int fill = std::max(1, req.at("fill_ubatch").get<int>());
  if (steps < 1) fail("--steps must be at least 1");
  int64_t deepest = 1;
  for (auto d : depths) deepest = std::max(deepest, d);
  const int64_t step_tokens = int64_t(threads.size()) * (warmup + steps);
  shape.max_tokens = int(deepest + int64_t(depths.size()) * step_tokens + 1);

  kv::KvConfig config = bench_kv_from_json(req.at("kv")).config;
  const uint64_t limit = req.value("mem_limit_bytes", uint64_t(0));
  if (limit > 0) config.budget_bytes = limit;
  kv::KvCache cache(shape, config);
  // One pool per thread count; the fill (the expensive part: causal
  // attention of every chunk) uses the largest and is shared by all.
  std::vector<std::unique_ptr<ThreadPool>> pools;
  for (int t : threads) pools.push_back(std::make_unique<ThreadPool>(t));
  ThreadPool& fill_pool =
      *pools[size_t(std::max_element(threads.begin(), threads.end()) - threads.begin())];
  const SyntheticBlocks blocks(fill, shape, 0x6b65726e);
  std::vector<float> out(size_t(fill) * shape.n_heads * shape.head_dim);

  Json rows = Json::array();
  double fill_seconds = 0;
  int block = 0;
  for (const int64_t depth : depths) {
    Stopwatch fill_clock;
    while (cache.n_tokens() < depth) {
      const int n = int(std::min<int64_t>(fill, depth - cache.n_tokens()));
      cache.begin_chunk(n);
      cache.write(0, blocks.k[block].data(), blocks.v[block].data());
      cache.attend(0, blocks.q[block].data(), out.data(), fill_pool);
      cache.end_chunk();
      block = (block + 1) % SyntheticBlocks::kBlocks;
    }
    fill_seconds += fill_clock.seconds();
    for (size_t ti = 0; ti < threads.size(); ++ti) {
      std::vector<double> us;
      const int64_t n_at = cache.n_tokens();
      for (int i = 0; i < warmup + steps; ++i) {
        const int b = i % SyntheticBlocks::kBlocks;
        cache.begin_chunk(1);
        cache.write(0, blocks.k[b].data(), blocks.v[b].data());
        Stopwatch clock;
        cache.attend(0, blocks.q[b].data(), out.data(), *pools[ti]);
        const double t = clock.seconds() * 1e6;
        cache.end_chunk();
        if (i >= warmup) us.push_back(t);
      }
      const Summary s = summarize(us);
      const uint64_t bytes = kv_bytes_read(cache, n_at + 1);
      rows.push_back({{"depth", depth},
                      {"threads", threads[ti]},
                      {"us_per_token", to_json(s)},
                      {"kv_bytes_read", bytes},
                      {"gb_per_s", s.median > 0 ? double(bytes) / (s.median * 1e-6) / 1e9 : 0.0},
                      {"samples_us", us}});
    }
  }
  const kv::KvStats st = cache.stats();
  return {{"status", "ok"},
          {"kv_describe", cache.config().describe()},
          {"k_bytes_per_token_head", st.k_bytes_per_token_head},
          {"v_bytes_per_token_head", st.v_bytes_per_token_head},
          {"fill_seconds", fill_seconds},
          {"peak_scratch_bytes", st.peak_scratch_bytes},
          {"depths", rows}};
}

std::string default_kernel_kv_list() {
  return "f16,q8_0,q4_0h,k8v8,k4v4,k4v2,k3v2";
}

std::vector<PlannedCell> copy_bandwidth_cells(const std::string& what,
                                              const std::vector<int>& threads) {
  std::vector<PlannedCell> cells;
  for (const int t : threads) {
    PlannedCell c;
    c.label = what + " copy bandwidth " + std::to_string(t) + "t";
    c.cost = 5e9;
    c.identity = {{"copy_bandwidth", true}, {"threads", t}};
    c.request = {{"protocol", "copy_bandwidth"}, {"threads", t}};
    cells.push_back(std::move(c));
  }
  return cells;
}

Json copy_bandwidth_of(const std::vector<Json>& rows, std::vector<Json>& rest) {
  Json copy = Json::object();
  for (const auto& r : rows) {
    if (!r.value("copy_bandwidth", false)) {
      rest.push_back(r);
    } else if (result_ok(r)) {
      copy[std::to_string(r["threads"].get<int>())] = r["copy_gb_per_s"];
    }
  }
  return copy;
}

std::vector<PlannedCell> plan_kernel(const CommonOptions& o, const KernelOptions& k) {
  std::vector<PlannedCell> cells = copy_bandwidth_cells("kernel", k.threads);
  int64_t deepest = 1;
  for (auto d : k.depths) deepest = std::max(deepest, d);
  const int max_threads = *std::max_element(k.threads.begin(), k.threads.end());
  for (const int hd : k.head_dims)
    for (const auto& kv : o.kv) {
      PlannedCell c;
      c.label = "kernel " + kv.label + " d" + std::to_string(hd);
      // The fill: causal attention over `deepest` tokens, all query heads.
      c.cost = 2.0 * double(deepest) * double(deepest) * k.kv_heads * k.gqa * hd / max_threads;
      c.identity = {{"kv", kv.label},
                    {"policy", policy_label(kv.config)},
                    {"f16_baseline", is_f16_baseline(kv.config)},
                    {"head_dim", hd}};
      c.request = {{"protocol", "kernel"},        {"kv", bench_kv_to_json(kv)}, {"head_dim", hd},
                   {"threads", k.threads},        {"kv_heads", k.kv_heads},     {"gqa", k.gqa},
                   {"depths", k.depths},          {"warmup", k.warmup},         {"steps", k.steps},
                   {"fill_ubatch", k.fill_ubatch}};
      cells.push_back(std::move(c));
    }
  return cells;
}

Json summarize_kernel(const KernelOptions& k, std::vector<Json> rows) {
  std::vector<Json> cells;
  const Json copy = copy_bandwidth_of(rows, cells);
  Json table = Json::array();
  for (const auto& r : cells) {
    if (!result_ok(r)) {
      table.push_back({{"kv", r["kv"]},
                       {"head_dim", r["head_dim"]},
                       {"status", r["status"]},
                       {"reason", r.value("reason", "")}});
      continue;
    }
    const Json* base = nullptr;
    for (const auto& b : cells)
      if (b.value("f16_baseline", false) && b["head_dim"] == r["head_dim"] && result_ok(b))
        base = &b;
    for (const auto& d : r["depths"]) {
      const std::string tkey = std::to_string(d["threads"].get<int>());
      Json e = {{"kv", r["kv"]},
                {"head_dim", r["head_dim"]},
                {"threads", d["threads"]},
                {"status", "ok"},
                {"depth", d["depth"]},
                {"us_median", d["us_per_token"]["median"]},
                {"us_min", d["us_per_token"]["min"]},
                {"us_max", d["us_per_token"]["max"]},
                {"kv_bytes_read", d["kv_bytes_read"]},
                {"gb_per_s", d["gb_per_s"]}};
      if (copy.contains(tkey) && copy[tkey].get<double>() > 0)
        e["fraction_of_copy"] = d["gb_per_s"].get<double>() / copy[tkey].get<double>();
      if (base)
        for (const auto& bd : (*base)["depths"])
          if (bd["depth"] == d["depth"] && bd["threads"] == d["threads"])
            e["ratio_to_f16"] = d["us_per_token"]["median"].get<double>() /
                                bd["us_per_token"]["median"].get<double>();
      table.push_back(std::move(e));
    }
  }
  return {{"options",
           {{"depths", k.depths},
            {"head_dims", k.head_dims},
            {"threads", k.threads},
            {"kv_heads", k.kv_heads},
            {"gqa", k.gqa},
            {"warmup", k.warmup},
            {"steps", k.steps}}},
          {"copy_bandwidth_gb_per_s", copy},
          {"rows", rows},
          {"table", table}};
}

std::string kernel_markdown(const Json& section) {
  std::string out;
  for (const auto& [threads, gbps] : section["copy_bandwidth_gb_per_s"].items())
    out += "Copy bandwidth (STREAM-like, read + write), " + threads +
           " thread(s): " + fmt_fixed(gbps, 1) + " GB/s\n";
  Table t({"KV", "head_dim", "threads", "depth", "us/token (median)", "min - max", "KV read/token",
           "GB/s", "share of copy bandwidth (higher is better)", "time vs f16 (lower is better)"});
  for (const auto& r : section["table"]) {
    if (r["status"] != "ok") {
      t.add({r["kv"], r["head_dim"], "", "",
             r["status"].get<std::string>() + ": " + r.value("reason", "")});
      continue;
    }
    t.add({r["kv"], r["head_dim"], r["threads"], token_count_label(r["depth"].get<int64_t>()),
           fmt_fixed(r["us_median"], 1),
           fmt_fixed(r["us_min"], 1) + " - " + fmt_fixed(r["us_max"], 1),
           fmt_bytes(r["kv_bytes_read"]), fmt_fixed(r["gb_per_s"], 2),
           r.contains("fraction_of_copy") ? fmt_percent(r["fraction_of_copy"], 0) : "",
           r.contains("ratio_to_f16") ? fmt_fixed(r["ratio_to_f16"], 3) + "x" : ""});
  }
  return out + "\n" + t.markdown();
}

}  // namespace tkv::bench
