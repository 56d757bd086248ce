// Decode attention over a compressed KV context, through the codecs' fused
// kernels, against the f16 baseline and a STREAM-like copy bandwidth
// measured in the same run.
//
//   BM_StreamCopy/threads            copy of a 2 x 256 MiB buffer (bytes read + written)
//   BM_DecodeAttention/K/V/d/N/thr   one decode step for 8 KV heads x G = 4 query heads:
//                                    prepare_queries, per page score -> online softmax ->
//                                    accumulate, split-K across threads, log-sum-exp
//                                    merge, unrotate
//   BM_Kernels/K/V/d/N               score + accumulate only (fixed probabilities)
//   BM_Encode/codec/d                encode() throughput
//
// Counters: ns_per_tok (one context token, all 8 KV heads), kv_B_per_tok (bytes of
// K+V pages read per token, all heads), GB_per_s (those bytes / time), copy_GB_per_s,
// bw_frac (GB_per_s / copy), vs_f16 (time / f16's for the same d, N, threads).
// Counters use the fastest iteration (copy included): on a machine shared with
// other jobs the mean measures the neighbours; the minimum is the least
// disturbed run. The "Time" column is Google Benchmark's mean.
//
// Example: build-codec/benchmarks/kv_codec/bench_kv_codec --benchmark_filter='Copy|Decode.*/32768/'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench_softmax.h"
#include "common/thread_pool.h"
#include "common/timer.h"
#include "kv/codec/codec.h"

namespace {

using tkv::kv::Codec;
using tkv::kv::Rotation;

constexpr int kPageTokens = 64;
constexpr int kKvHeads = 8;
constexpr int kGroup = 4;  // query heads per KV head

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, AlignedFree>;
Buffer aligned_buffer(size_t bytes) {
  return Buffer(static_cast<uint8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
}

// Results shared between benchmarks of one run (f16 time, copy bandwidth).
std::map<std::tuple<int, int, int>, double>& f16_seconds() {
  static std::map<std::tuple<int, int, int>, double> m;
  return m;
}
std::map<int, double>& copy_gbps() {
  static std::map<int, double> m;
  return m;
}

tkv::ThreadPool& pool(int threads) {
  static std::map<int, std::unique_ptr<tkv::ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<tkv::ThreadPool>(threads);
  return *p;
}

void BM_StreamCopy(benchmark::State& state) {
  const int threads = int(state.range(0));
  const size_t bytes = size_t(256) << 20;
  auto src = aligned_buffer(bytes), dst = aligned_buffer(bytes);
  std::memset(src.get(), 1, bytes);
  std::memset(dst.get(), 2, bytes);
  auto& tp = pool(threads);
  double best = 1e30;
  for (auto _ : state) {
    tkv::Stopwatch sw;
    tp.parallel_for(int64_t(bytes), 1 << 20, [&](int64_t b, int64_t e, int) {
      std::memcpy(dst.get() + b, src.get() + b, size_t(e - b));
    });
    benchmark::ClobberMemory();
    best = std::min(best, sw.seconds());
  }
  const double gbps = 2.0 * bytes / best / 1e9;
  copy_gbps()[threads] = gbps;
  state.counters["copy_GB_per_s"] = gbps;
}

// A layer's context: pages of kPageTokens slots, each page holding K of the
// 8 heads then V of the 8 heads (as the store lays them out).
struct Context {
  std::shared_ptr<const Rotation> rotation;
  std::unique_ptr<Codec> k, v;
  size_t k_head = 0, v_head = 0;
  std::vector<Buffer> pages;
  int n_tokens = 0;

  Context(const std::string& kname, const std::string& vname, int d, int n_tokens)
      : n_tokens(n_tokens) {
    rotation = std::make_shared<const Rotation>(d, 7);
    k = tkv::kv::make_codec(*tkv::kv::parse_codec(kname), d, rotation);
    v = tkv::kv::make_codec(*tkv::kv::parse_codec(vname), d, rotation);
    k_head = k->page_bytes(kPageTokens);
    v_head = v->page_bytes(kPageTokens);
    const size_t page_bytes = kKvHeads * (k_head + v_head);
    // A few distinct encoded pages, copied over the whole context (the
    // contents do not change the work; encoding 64K x 8 x 2 vectors would).
    constexpr int kDistinct = 4;
    std::vector<Buffer> templates;
    std::mt19937_64 rng(1);
    std::normal_distribution<float> n01;
    std::vector<float> x(d);
    for (int t = 0; t < kDistinct; ++t) {
      templates.push_back(aligned_buffer(page_bytes));
      uint8_t* p = templates.back().get();
      for (int h = 0; h < kKvHeads; ++h)
        for (int s = 0; s < kPageTokens; ++s) {
          for (float& xi : x) xi = n01(rng);
          k->encode(x.data(), p + h * k_head, kPageTokens, s);
          for (float& xi : x) xi = n01(rng);
          v->encode(x.data(), p + kKvHeads * k_head + h * v_head, kPageTokens, s);
        }
    }
    const int n_pages = n_tokens / kPageTokens;
    for (int i = 0; i < n_pages; ++i) {
      pages.push_back(aligned_buffer(page_bytes));
      std::memcpy(pages.back().get(), templates[i % kDistinct].get(), page_bytes);
    }
  }
  double kv_bytes_per_token() const {
    return kKvHeads * (k->bytes_per_vector(kPageTokens) + v->bytes_per_vector(kPageTokens));
  }
};

// Per (head, split) task state, reused across iterations.
struct Partial {
  std::vector<float> prep, scores, m, l, acc;
};

// One decode step. Tasks = heads x splits; each runs an online softmax over
// its pages; the splits are merged with a log-sum-exp, then unrotated.
void decode_step(const Context& c, const std::vector<float>& q, int threads,
                 std::vector<Partial>& parts, std::vector<float>& out, bool softmax,
                 bool prefetch) {
  const int d = c.k->head_dim();
  const int n_pages = int(c.pages.size());
  const int splits = threads == 1 ? 1 : std::max(1, (4 * threads + kKvHeads - 1) / kKvHeads);
  const int tasks = kKvHeads * splits;
  if (int(parts.size()) < tasks) parts.resize(tasks);
  auto run_task = [&](int64_t task, int) {
    const int h = int(task / splits), s = int(task % splits);
    Partial& P = parts[task];
    P.prep.resize(kGroup * c.k->prepared_query_floats());
    P.scores.resize(kGroup * kPageTokens);
    P.m.assign(kGroup, -1e30f);
    P.l.assign(kGroup, 0.0f);
    P.acc.assign(size_t(kGroup) * d, 0.0f);
    c.k->prepare_queries(q.data() + size_t(h) * kGroup * d, kGroup, P.prep.data());
    const int p0 = n_pages * s / splits, p1 = n_pages * (s + 1) / splits;
    for (int pg = p0; pg < p1; ++pg) {
      if (prefetch && pg + 1 < p1) {
        // The next page of this head, while this one is computed.
        const uint8_t* nb = c.pages[pg + 1].get();
        c.k->prefetch(nb + h * c.k_head, kPageTokens);
        c.v->prefetch(nb + kKvHeads * c.k_head + h * c.v_head, kPageTokens);
      }
      const uint8_t* base = c.pages[pg].get();
      const uint8_t* kp = base + h * c.k_head;
      const uint8_t* vp = base + kKvHeads * c.k_head + h * c.v_head;
      c.k->score(P.prep.data(), kGroup, kp, kPageTokens, 0, kPageTokens, P.scores.data(),
                 kPageTokens);
      if (softmax) {
        for (int g = 0; g < kGroup; ++g) {
          const float corr = tkv::bench::online_softmax_step(P.scores.data() + g * kPageTokens,
                                                             kPageTokens, P.m[g], P.l[g]);
          if (corr != 1.0f)
            for (int i = 0; i < d; ++i) P.acc[size_t(g) * d + i] *= corr;
        }
      } else {
        std::fill(P.scores.begin(), P.scores.end(), 1.0f / 4096);
      }
      c.v->accumulate(P.scores.data(), kGroup, kPageTokens, vp, kPageTokens, 0, kPageTokens,
                      P.acc.data());
    }
  };
  if (threads == 1) {
    for (int t = 0; t < tasks; ++t) run_task(t, 0);
  } else {
    pool(threads).run(tasks, run_task);
  }
  out.assign(size_t(kKvHeads) * kGroup * d, 0.0f);
  for (int h = 0; h < kKvHeads; ++h) {
    float* o = out.data() + size_t(h) * kGroup * d;
    for (int g = 0; g < kGroup; ++g) {
      float M = -1e30f, L = 0;
      for (int s = 0; s < splits; ++s) M = std::max(M, parts[h * splits + s].m[g]);
      for (int s = 0; s < splits; ++s) {
        const Partial& P = parts[h * splits + s];
        const float w = std::exp(P.m[g] - M);
        L += P.l[g] * w;
        for (int i = 0; i < d; ++i) o[g * d + i] += w * P.acc[size_t(g) * d + i];
      }
      const float inv = L > 0 ? 1.0f / L : 1.0f;
      for (int i = 0; i < d; ++i) o[g * d + i] *= inv;
    }
    c.v->unrotate(o, kGroup);
  }
}

void run_attention(benchmark::State& state, const std::string& kname, const std::string& vname,
                   int d, int n_tokens, int threads, bool softmax, bool prefetch = true) {
  const Context c(kname, vname, d, n_tokens);
  std::mt19937_64 rng(2);
  std::normal_distribution<float> n01;
  std::vector<float> q(size_t(kKvHeads) * kGroup * d), out;
  for (float& x : q) x = n01(rng) / std::sqrt(float(d));
  std::vector<Partial> parts;
  decode_step(c, q, threads, parts, out, softmax, prefetch);  // warm-up
  double sec = 1e30;
  for (auto _ : state) {
    tkv::Stopwatch sw;
    decode_step(c, q, threads, parts, out, softmax, prefetch);
    benchmark::DoNotOptimize(out.data());
    sec = std::min(sec, sw.seconds());
  }
  const double bpt = c.kv_bytes_per_token();
  const double gbps = bpt * n_tokens / sec / 1e9;
  state.counters["ns_per_tok"] = sec / n_tokens * 1e9;
  state.counters["kv_B_per_tok"] = bpt;
  state.counters["GB_per_s"] = gbps;
  if (auto it = copy_gbps().find(threads); it != copy_gbps().end()) {
    state.counters["copy_GB_per_s"] = it->second;
    state.counters["bw_frac"] = gbps / it->second;
  }
  const auto key = std::make_tuple(d, n_tokens, threads * (softmax ? 1 : -1) * (prefetch ? 1 : 10));
  if (kname == "f16" && vname == "f16") f16_seconds()[key] = sec;
  if (auto it = f16_seconds().find(key); it != f16_seconds().end())
    state.counters["vs_f16"] = sec / it->second;
}

void BM_Encode(benchmark::State& state, const std::string& name, int d) {
  auto rotation = std::make_shared<const Rotation>(d, 7);
  auto codec = tkv::kv::make_codec(*tkv::kv::parse_codec(name), d, rotation);
  auto page = aligned_buffer(codec->page_bytes(kPageTokens));
  std::mt19937_64 rng(3);
  std::normal_distribution<float> n01;
  std::vector<float> x(size_t(kPageTokens) * d);
  for (float& v : x) v = n01(rng);
  int slot = 0;
  for (auto _ : state) {
    codec->encode(x.data() + size_t(slot) * d, page.get(), kPageTokens, slot);
    slot = (slot + 1) % kPageTokens;
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

const std::vector<std::pair<std::string, std::string>> kPairs = {
    {"f16", "f16"}, {"q8_0h", "q8_0h"}, {"q4_0h", "q4_0h"},
    {"tq4", "tq2"}, {"tq4", "tq4"},     {"tq3", "tq3"}};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int threads : {1, 2})
    benchmark::RegisterBenchmark(("BM_StreamCopy/threads:" + std::to_string(threads)).c_str(),
                                 BM_StreamCopy)
        ->Arg(threads)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  for (int d : {64, 128})
    for (int n : {1024, 4096, 16384, 32768, 65536})
      for (int threads : {1, 2})
        for (const auto& [k, v] : kPairs) {
          const std::string name = "BM_DecodeAttention/" + k + "/" + v + "/d:" + std::to_string(d) +
                                   "/ctx:" + std::to_string(n) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& st) { run_attention(st, k, v, d, n, threads, true); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
  for (int d : {64, 128})
    for (const auto& [k, v] : kPairs) {
      for (int n : {1024, 32768})
        for (bool prefetch : {true, false}) {
          const std::string name = "BM_Kernels/" + k + "/" + v + "/d:" + std::to_string(d) +
                                   "/ctx:" + std::to_string(n) +
                                   (prefetch ? "/prefetch" : "/no_prefetch");
          benchmark::RegisterBenchmark(
              name.c_str(),
              [=](benchmark::State& st) { run_attention(st, k, v, d, n, 1, false, prefetch); })
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
    }
  for (int d : {64, 128})
    for (const char* name : {"f16", "q8_0h", "q4_0h", "tq2", "tq3", "tq4", "tq4r"})
      benchmark::RegisterBenchmark(
          ("BM_Encode/" + std::string(name) + "/d:" + std::to_string(d)).c_str(),
          [=](benchmark::State& st) { BM_Encode(st, name, d); });
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
