#include "bench/cell_env.h"
#include "common/vec_math.h"

#include <algorithm>

#include "bench/kv_configs.h"
#include "bench/options.h"
#include "common/error.h"
#include "model/ops.h"

namespace tkv::bench {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

int32_t bos_token(const model::Model& m) {
  if (const auto id = m.gguf().get_int("tokenizer.ggml.bos_token_id"))
    if (*id >= 0 && *id < m.config().n_vocab) return int32_t(*id);
  return m.config().n_vocab > 1 ? 1 : 0;
}

}  // namespace

CellModel load_cell_model(const Json& request) {
  CellModel m;
  m.path = request.at("model").get<std::string>();
  const int threads = request.value("threads", 1);
  m.ubatch = request.value("ubatch", 512);
  if (threads < 1) fail("threads must be at least 1");
  const std::string weights = request.value("weights", std::string("auto"));
  const std::optional<model::WeightMemory> memory = model::parse_weight_memory(weights);
  if (!memory) fail("weights: '", weights, "' is not auto, map or copy");
  m.model = model::Model::load(m.path, *memory);
  m.pool = std::make_unique<ThreadPool>(threads);
  return m;
}

kv::KvConfig cell_kv_config(const Json& request, const model::Model& model) {
  kv::KvConfig c = bench_kv_from_json(request.at("kv")).config;
  const uint64_t limit = request.value("mem_limit_bytes", uint64_t(0));
  if (limit > 0) {
    const uint64_t file = model.file_bytes();
    c.budget_bytes = limit > file ? limit - file : 1;
  }
  return c;
}

CellKv cell_kv(const Json& request, const model::Model& model) {
  CellKv out;
  out.config = cell_kv_config(request, model);
  const uint64_t cap = bench_kv_from_json(request.at("kv")).ram_budget;
  if (cap > 0) {
    out.config.budget_bytes =
        out.config.budget_bytes > 0 ? std::min(out.config.budget_bytes, cap) : cap;
    out.spill = std::make_unique<TempSpillDir>();
    out.config.spill_dir = out.spill->path();
  }
  return out;
}

std::shared_ptr<kv::PagePool> CellKv::make_pool() const {
  return config.spill_dir.empty()
             ? std::make_shared<kv::PagePool>(config.budget_bytes)
             : std::make_shared<kv::PagePool>(config.budget_bytes, config.spill_dir);
}

Json CellKv::describe() const {
  return {{"ram_budget_bytes", spill ? config.budget_bytes : uint64_t(0)},
          {"spill", spill ? to_json(*spill) : Json(nullptr)}};
}

Json spill_stats_json(const kv::PoolStats& s) {
  return {{"spilled_bytes", s.spilled_bytes},
          {"spilled_pages", s.spilled_pages},
          {"spill_file_bytes", s.spill_file_bytes},
          {"spill_writes", s.spill_writes},
          {"spill_reads", s.spill_reads}};
}

int32_t synthetic_token(uint64_t key, int32_t n_vocab) {
  const uint64_t span = uint64_t(std::max(n_vocab / 2, 1));
  return int32_t(uint64_t(n_vocab / 4) + splitmix64(key) % span);
}

std::vector<int32_t> synthetic_prompt(int64_t n, const model::Model& model, uint64_t seed) {
  std::vector<int32_t> ids(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i)
    ids[size_t(i)] = synthetic_token(seed * 0x100000001b3ull + uint64_t(i), model.config().n_vocab);
  if (n > 0) ids[0] = bos_token(model);
  return ids;
}

int32_t argmax(std::span<const float> logits) {
  TKV_CHECK(!logits.empty());
  return int32_t(tkv::argmax(logits.data(), int64_t(logits.size())));
}

Json model_facts(const CellModel& m) {
  return to_json(model_info(*m.model, m.path));
}

}  // namespace tkv::bench
