// bench speed: what a chat feels like in time, per KV configuration and
// thread count.
//
// One fresh process per (configuration, threads) prefills synthetic tokens
// up to increasing checkpoints (the union of --ctx and --depths), in chunks
// of --ubatch:
//   - at each --ctx point: time to first token = prefill time of the tokens
//     so far including the last token's logits, and prefill tok/s;
//   - at each --depth: --warmup decode steps, then --steps timed decode
//     steps (one token each, whole forward pass + greedy pick): median,
//     min, max ms/token, every sample kept; then --steps attention-only
//     steps (the KV step of one token on every layer through the KvCache
//     API, synthetic q/k/v, the attend calls timed: kv_reads.h); KV bytes
//     attention read per decoded token from RAM and from the disk tier of a
//     budget item, pages on disk, and peak RSS so far.
// --fill synthetic: the checkpoints are reached with KvCache::fill_synthetic
// (N(0,1) K/V through the real codecs and summaries, no forward pass), so
// 128K-token depths take seconds; decode figures only (no prefill rows).
// Decode steps add a few tokens, so later checkpoints are reached with
// slightly fewer prefilled tokens (recorded). The summary gives, per
// configuration, the depth from which it decodes faster than f16 at every
// deeper measured depth, or "never".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"

namespace tkv::bench {

struct SpeedOptions {
  std::vector<int64_t> ctx{512, 4096, 16384, 32768};
  std::vector<int64_t> depths{0, 1024, 4096, 16384, 32768};
  std::vector<int> threads;  // empty: CommonOptions::threads
  int warmup = 2;
  int steps = 5;
  std::string fill = "prefill";  // or "synthetic" (KvCache::fill_synthetic, no prefill figures)
};

std::vector<PlannedCell> plan_speed(const CommonOptions& o, const SpeedOptions& s,
                                    const ModelInfo& info);
// {"options", "rows", "prefill", "decode", "crossover"}.
Json summarize_speed(const SpeedOptions& s, std::vector<Json> rows);
std::string speed_markdown(const Json& section);

}  // namespace tkv::bench
