// bench memory: what a chat costs in RAM, per KV configuration and context.
//
// Each cell (one configuration x one context) is a fresh process that loads
// the model, prefills `ctx` synthetic tokens in chunks of --ubatch, records
// the kernel's memory figures, resets the peak, decodes --decode-tokens
// greedy tokens and records them again. Reported per cell: peak RSS (VmHWM)
// of prefill and of decode, model bytes (file and actually resident), KV
// persistent bytes (KvStats: pages + f16 sinks/residual), peak scratch (KV
// attention scratch + model activations), timings. The headline is peak RSS
// minus resident model bytes (what the KV choice controls), and its ratio to
// f16 at the same context. Rows of a budget item add the KV bytes on disk
// and what the page file read and wrote; every row the KV bytes attention
// read per decoded token from RAM and from disk (kv_reads.h). With --fill
// synthetic the prefill phase is KvCache::fill_synthetic (no activations:
// the peak is the KV store's and the model's alone) and one real token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"

namespace tkv::bench {

struct MemoryOptions {
  std::vector<int64_t> ctx{4096, 8192, 16384, 32768, 65536};
  int decode_tokens = 4;
  std::string fill = "prefill";  // or "synthetic" (KvCache::fill_synthetic, see speed_protocol.h)
};

std::vector<PlannedCell> plan_memory(const CommonOptions& o, const MemoryOptions& m,
                                     const ModelInfo& info);
// {"options", "rows", "headline"}: rows in plan order; headline rows per
// (kv, ctx) with peak_rss_minus_model and its ratio to f16.
Json summarize_memory(const MemoryOptions& m, std::vector<Json> rows);
std::string memory_markdown(const Json& section);

}  // namespace tkv::bench
