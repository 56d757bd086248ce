// bench kernel: decode attention alone, through the real KvCache::attend,
// one layer with synthetic K/V/Q (Gaussian), per codec configuration,
// head_dim, thread count and depth.
//
// Geometry (llama-3-like): 8 KV heads, GQA 4 (32 query heads). One fresh process
// per (configuration, head_dim) fills the cache chunk by chunk (begin_chunk /
// write / attend / end_chunk -- the public protocol, so the fill pays the
// causal attention of every chunk: O(depth^2), by far the slowest part) up
// to each depth in turn, then, for each thread count, times --steps decode
// steps' attend() after --warmup: median, min, max microseconds per token,
// every sample kept. Per depth it reports the
// bytes of KV one decode step reads (packed pages of all heads + the f16
// sinks and residual window), the achieved GB/s on those bytes, the ratio to
// a STREAM-like copy bandwidth measured in the same run (copy_bandwidth
// cells, bytes read + written, as STREAM counts them) and the time ratio to
// f16 at the same head_dim, threads and depth.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"

namespace tkv::bench {

struct KernelOptions {
  std::vector<int64_t> depths{1024, 4096, 16384, 32768, 65536};
  std::vector<int> head_dims{64, 128};
  std::vector<int> threads{1, 2};
  int kv_heads = 8;
  int gqa = 4;
  int warmup = 3;
  int steps = 9;
  int fill_ubatch = 1024;
};

std::string default_kernel_kv_list();

std::vector<PlannedCell> plan_kernel(const CommonOptions& o, const KernelOptions& k);
// {"options", "copy_bandwidth", "rows", "table"}
Json summarize_kernel(const KernelOptions& k, std::vector<Json> rows);
std::string kernel_markdown(const Json& section);

// STREAM-like copy bandwidth (GB/s, read + write bytes, best of `reps`)
// over two buffers of `bytes` each.
double measure_copy_bandwidth(int threads, size_t bytes, int reps);

// One copy_bandwidth cell per thread count (`what` names the protocol in
// the labels), and the GB/s of those among a run's rows by thread count
// ({"2": 18.5, ...}); the other rows are returned in `rest`.
std::vector<PlannedCell> copy_bandwidth_cells(const std::string& what,
                                              const std::vector<int>& threads);
Json copy_bandwidth_of(const std::vector<Json>& rows, std::vector<Json>& rest);

}  // namespace tkv::bench
