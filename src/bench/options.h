// Options every bench subcommand shares, and what the parent knows about the
// model before any cell runs (for labels and cost estimates).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/json.h"
#include "bench/kv_configs.h"

namespace tkv::model {
class Model;
}

namespace tkv::bench {

struct ModelInfo {
  std::string path, file;
  int n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, n_vocab = 0, n_ctx_train = 0;
  uint64_t file_bytes = 0, weight_bytes = 0;
  // What one decoded token reads of the weights (model::ActiveWeights: a
  // mixture of experts reads its chosen experts only).
  uint64_t active_weight_bytes = 0;
  std::string describe;
  // How the process that loaded it holds the file: "mapped" or "read into
  // 2 MiB pages" (common/mapped_file.h: describe).
  std::string file_memory;
};
// The facts of a loaded model (`path` is where it came from).
ModelInfo model_info(const model::Model& model, const std::string& path);
// Loads the model's header and tensor table (weights stay unread).
ModelInfo probe_model(const std::string& path);
Json to_json(const ModelInfo& m);

struct CommonOptions {
  std::string model;             // -m
  std::string weights = "auto";  // --mmap: "map", --no-mmap: "copy" (model::WeightMemory)
  int threads = 1;               // -t (default: physical cores)
  int ubatch = 512;              // -ub
  std::vector<BenchKv> kv;       // --kv list
  uint64_t mem_limit = 0;        // --mem-limit (0 = none)
  double cell_timeout = 0;       // --cell-timeout seconds (0 = none)
  std::string out_dir;           // --out
  bool quiet = false;            // no progress bar
};

// Rough floating-point work of prefilling n tokens from empty, then decoding
// `decode` more: 2 flops per weight per token plus causal attention (2 x hd
// multiply-adds per query head and visible key). Only for ETAs.
double estimate_flops(const ModelInfo& m, int64_t n, int64_t decode = 0);

Json request_base(const CommonOptions& o, const std::string& protocol);

}  // namespace tkv::bench
