#include "bench/options.h"

#include <filesystem>

#include "model/model.h"

namespace tkv::bench {

ModelInfo probe_model(const std::string& path) {
  return model_info(*model::Model::load(path), path);
}

ModelInfo model_info(const model::Model& model, const std::string& path) {
  const auto& c = model.config();
  ModelInfo m;
  m.path = path;
  m.file = std::filesystem::path(path).filename().string();
  m.n_layers = c.n_layers;
  m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads;
  m.head_dim = c.head_dim;
  m.n_vocab = c.n_vocab;
  m.n_ctx_train = c.n_ctx_train;
  m.file_bytes = model.file_bytes();
  m.weight_bytes = model.weight_bytes();
  m.active_weight_bytes = model.weights().active_bytes;
  m.describe = c.describe();
  m.file_memory = describe(model.file_memory());
  return m;
}

Json to_json(const ModelInfo& m) {
  return {{"path", m.path},
          {"file", m.file},
          {"describe", m.describe},
          {"n_layers", m.n_layers},
          {"n_heads", m.n_heads},
          {"n_kv_heads", m.n_kv_heads},
          {"head_dim", m.head_dim},
          {"n_vocab", m.n_vocab},
          {"n_ctx_train", m.n_ctx_train},
          {"file_bytes", m.file_bytes},
          {"weight_bytes", m.weight_bytes},
          {"active_weight_bytes", m.active_weight_bytes},
          {"file_memory", m.file_memory}};
}

double estimate_flops(const ModelInfo& m, int64_t n, int64_t decode) {
  const double total = double(n + decode);
  // Weights: about 2 bytes per parameter for the F16 models benched most;
  // a token multiplies the weights it reads.
  const double weights = 2.0 * (double(m.active_weight_bytes) / 2.0) * total;
  const double attention =
      2.0 * total * total * m.n_layers * double(m.n_heads) * m.head_dim;  // sum over positions
  return weights + attention + 1e6;
}

Json request_base(const CommonOptions& o, const std::string& protocol) {
  return {{"protocol", protocol},
          {"model", o.model},
          {"weights", o.weights},
          {"threads", o.threads},
          {"ubatch", o.ubatch}};
}

}  // namespace tkv::bench
