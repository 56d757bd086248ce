// What the model-based cells share: loading the model named in the request,
// the thread pool, the KV configuration (with the memory limit turned into a
// KV budget), deterministic synthetic prompts, greedy picks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench/json.h"
#include "bench/spill_dir.h"
#include "common/thread_pool.h"
#include "kv/kv_config.h"
#include "kv/page_pool.h"
#include "model/model.h"

namespace tkv::bench {

struct CellModel {
  std::string path;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<ThreadPool> pool;
  int ubatch = 512;
};

// request: "model", "threads", "ubatch".
CellModel load_cell_model(const Json& request);

// request["kv"] (a BenchKv) -> KvConfig. With request["mem_limit_bytes"] > 0
// the KV page budget becomes the limit minus the model file: a KV cache that
// cannot fit next to the model fails cleanly (KvBudgetExceeded) before it
// allocates.
kv::KvConfig cell_kv_config(const Json& request, const model::Model& model);

// The same, and for an item with a RAM cap (BenchKv::ram_budget) the cap as
// the page budget (the smaller of it and the memory limit's) with a
// temporary spill directory: the disk tier. The directory goes with this.
struct CellKv {
  kv::KvConfig config;
  std::unique_ptr<TempSpillDir> spill;  // null without a RAM cap
  // A private pool for sessions: config's budget and spill directory.
  std::shared_ptr<kv::PagePool> make_pool() const;
  // {"ram_budget_bytes", "spill": {"dir", "on_tmpfs"} or null} for result rows.
  Json describe() const;
};
CellKv cell_kv(const Json& request, const model::Model& model);

// A pool's disk-tier figures for result rows: {"spilled_bytes",
// "spilled_pages", "spill_file_bytes", "spill_writes", "spill_reads"}.
Json spill_stats_json(const kv::PoolStats& stats);

// A deterministic pseudo-random token id for `key` (splitmix64) from the
// middle half [n/4, 3n/4) of a vocabulary of n_vocab ids: never the special
// tokens, which SentencePiece vocabularies put first (with the byte tokens)
// and Llama-3's and Qwen's last (llama-server fails a stream whose prompt
// holds them).
int32_t synthetic_token(uint64_t key, int32_t n_vocab);

// `n` synthetic_token ids of seed and index, with BOS (when the vocabulary
// has one, else id 1) at index 0. Content does not matter for memory and
// speed: the work per token is the same for any id.
std::vector<int32_t> synthetic_prompt(int64_t n, const model::Model& model, uint64_t seed);

int32_t argmax(std::span<const float> logits);

// Facts about the model for result rows.
Json model_facts(const CellModel& m);

}  // namespace tkv::bench
