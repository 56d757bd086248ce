// bench batch: aggregate decode throughput of many sequences decoding
// together through Model::eval_batch, and how many sequences of a given
// length a shared page pool of a given budget holds.
//
// One fresh process per KV configuration. For each batch size B: B
// sequences in one shared pool, each prefilled to --depth tokens (at least
// one), then --warmup untimed and --steps timed decode steps, each step one
// eval_batch of B single-token items (the weights streamed once for all B).
// Aggregate tok/s = B / median step time.
//
// Capacity (--fit-tokens N, --kv-budget SIZE; skipped with --kv-budget 0):
// one sequence is filled with N tokens of deterministic pseudo-random K/V
// through the real store (write + attend per chunk) and saved to a temporary
// session file; then sequences are created in a pool of SIZE and the file
// loaded into each, until the pool refuses one (KvBudgetExceeded). The count
// is measured through real allocations, not computed from bytes per token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/options.h"
#include "bench/plan.h"

namespace tkv::bench {

struct BatchOptions {
  std::vector<int> batch{1, 2, 4, 8, 16};
  int64_t depth = 0;
  int warmup = 2;
  int steps = 5;
  uint64_t fit_budget = uint64_t(1) << 30;  // 0: no capacity measurement
  int64_t fit_tokens = 4096;
};

std::vector<PlannedCell> plan_batch(const CommonOptions& o, const BatchOptions& b,
                                    const ModelInfo& info);
// {"options", "rows", "decode", "fit"}.
Json summarize_batch(const BatchOptions& b, std::vector<Json> rows);
// "batch B: X tok/s (...)" lines per configuration, then the tables.
std::string batch_markdown(const Json& section);

}  // namespace tkv::bench
