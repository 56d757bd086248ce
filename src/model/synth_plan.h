// synth's tensor plan, shared by synth.cc (every architecture),
// synth_presets.cc (the presets' shapes) and synth_hybrid.cc (the Qwen3.5 /
// Qwen3.6 hybrids' layers, metadata and presets).
// Internal to src/model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/synth.h"
#include "tensor/dtype.h"

namespace tkv::gguf {
class GgufWriter;
}

namespace tkv::model::synth_detail {

// What a generated tensor holds: a matrix (uniform, variance 1/fan_in), a
// norm weight (1 +- 0.1), a bias (+- 0.1), fixed values (rope_freqs), or
// uniform values in [center - amplitude, center + amplitude) (parameters
// whose range the model's math constrains, e.g. a decay rate's sign).
enum class Fill { Matrix, Norm, Bias, Constant, Uniform };

struct TensorPlan {
  std::string name;
  DType type;
  int64_t cols, rows;  // a vector: rows == 1
  Fill fill;
  std::vector<float> constant;            // Fill::Constant (rope_freqs)
  int64_t mats = 1;                       // > 1: a 3-D tensor of `mats` matrices (experts)
  float center = 0.0f, amplitude = 0.0f;  // Fill::Uniform
};

// The weight type plan: one type for every matrix, or one of llama.cpp's
// mixes: Q4_K_M, or MXFP4_MOE (expert tensors MXFP4, every other matrix
// Q8_0, as gpt-oss is published).
struct TypePlan {
  DType base = DType::F16;
  bool q4_k_m = false;
  bool mxfp4_moe = false;

  static TypePlan parse(const std::string& name);

  // kind: the tensor's name without "blk.N." and ".weight" ("output",
  // "attn_v", "ffn_down_exps", ...).
  DType pick(std::string_view kind, int layer, int n_layers, int64_t cols) const;
};

// Appends tensors to a plan in the order they are added.
struct PlanBuilder {
  const SynthSpec& s;
  const TypePlan& types;
  std::vector<TensorPlan> plan;

  // A weight matrix of `rows` rows of `cols` (mats > 1: that many of them),
  // of the type the type plan picks for `kind`.
  void matrix(std::string name, std::string_view kind, int layer, int64_t cols, int64_t rows,
              int64_t mats = 1);
  // A float tensor of rows x cols values (a vector when rows == 1).
  void vec(std::string name, int64_t cols, Fill fill, int64_t rows = 1);
  // An f32 matrix with the variance of N(0, 1/cols) (tensors llama-quantize
  // leaves alone: routers, small convolutions).
  void f32_matrix(std::string name, int64_t cols, int64_t rows);
  // An f32 vector of uniform values in [center - amplitude, center + amplitude).
  void uniform(std::string name, int64_t cols, float center, float amplitude);
};

// ---- the Qwen3.5 / Qwen3.6 hybrids (synth_hybrid.cc) ----

// qwen3.5-9b, qwen3.6-27b, qwen3.6-35b-a3b, tiny-qwen35, tiny-qwen35moe.
// A preset's shapes; the rest of the spec keeps its defaults.
SynthSpec make_spec(std::string preset, std::string arch, int embd, int layers, int heads,
                    int kv_heads, int head_dim, int ff, int vocab, int ctx, float rope_base,
                    float eps, bool tied);
void add_qwen35_presets(std::vector<SynthSpec>& p);
bool is_hybrid(const SynthSpec& s);
// Throws tkv::Error for a hybrid spec llama.cpp could not load.
void validate_hybrid(const SynthSpec& s);
// Layer l of the trunk is a Gated DeltaNet layer.
bool is_linear_layer(const SynthSpec& s, int l);
// The hybrids' keys beyond the common ones (ssm.*, full_attention_interval,
// rope sections, the shared expert, nextn_predict_layers).
void add_hybrid_metadata(const SynthSpec& s, gguf::GgufWriter& w);
// Every layer of a hybrid, the trunk's then the multi-token-prediction ones.
void plan_hybrid_layers(PlanBuilder& b);

}  // namespace tkv::model::synth_detail
