#include "model/synth.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <memory>
#include <numbers>

#include "common/error.h"
#include "gguf/gguf.h"
#include "model/synth_plan.h"
#include "tensor/dtype.h"
#include "tensor/matmul.h"

namespace tkv::model {

std::vector<float> llama3_rope_freq_factors(int head_dim, float rope_base, float factor,
                                            float low_freq_factor, float high_freq_factor,
                                            int orig_ctx) {
  // Wavelengths longer than orig_ctx / low_freq_factor are slowed by `factor`,
  // shorter than orig_ctx / high_freq_factor are kept, and the band between
  // is interpolated smoothly (Meta's llama3 rope_scaling).
  const double low_freq_wavelen = orig_ctx / double(low_freq_factor);
  const double high_freq_wavelen = orig_ctx / double(high_freq_factor);
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(double(rope_base), double(i) / head_dim);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double f;
    if (wavelen < high_freq_wavelen) {
      f = 1.0;
    } else if (wavelen > low_freq_wavelen) {
      f = factor;
    } else {
      const double smooth = (orig_ctx / wavelen - low_freq_factor) /
                            (double(high_freq_factor) - double(low_freq_factor));
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out.push_back(float(f));
  }
  return out;
}

// ---- weights -----------------------------------------------------------------

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Fills out[0..n) with uniform values in [-1, 1): two 24-bit values per
// splitmix64 output.
void uniform_row(uint64_t seed, float* out, int64_t n) {
  uint64_t state = seed;
  constexpr float kScale = 2.0f / float(1 << 24);
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const uint64_t r = splitmix64(state);
    out[i] = float(r >> 40) * kScale - 1.0f;
    out[i + 1] = float((r >> 8) & 0xffffff) * kScale - 1.0f;
  }
  if (i < n) out[i] = float(splitmix64(state) >> 40) * kScale - 1.0f;
}

}  // namespace

// ---- the tensor plan ---------------------------------------------------------

namespace synth_detail {

SynthSpec make_spec(std::string preset, std::string arch, int embd, int layers, int heads,
                    int kv_heads, int head_dim, int ff, int vocab, int ctx, float rope_base,
                    float eps, bool tied) {
  SynthSpec s;
  s.preset = std::move(preset);
  s.arch = std::move(arch);
  s.n_embd = embd;
  s.n_layers = layers;
  s.n_heads = heads;
  s.n_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.n_ff = ff;
  s.n_vocab = vocab;
  s.n_ctx = ctx;
  s.rope_base = rope_base;
  s.rms_eps = eps;
  s.tied_output = tied;
  return s;
}

TypePlan TypePlan::parse(const std::string& name) {
  TypePlan p;
  std::string lower = name;
  for (auto& ch : lower) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "q4_k_m") {
    p.base = DType::Q4_K;
    p.q4_k_m = true;
    return p;
  }
  if (lower == "mxfp4_moe") {
    p.base = DType::Q8_0;
    p.mxfp4_moe = true;
    if (!traits(DType::MXFP4).supported) fail("synth: weight type mxfp4 is not supported");
    return p;
  }
  const auto t = parse_dtype(name);
  if (!t) fail("synth: unknown weight type '", name, "' (f32, f16, bf16, q8_0, q4_0, q4_K, ...)");
  if (!traits(*t).supported) fail("synth: weight type ", dtype_name(*t), " is not supported");
  p.base = *t;
  return p;
}

namespace {

// llama.cpp's use_more_bits(): the first and last eighth of the layers and
// every third one between get more bits in the _M mixes.
bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

}  // namespace

DType TypePlan::pick(std::string_view kind, int layer, int n_layers, int64_t cols) const {
  DType t = base;
  if (q4_k_m) {
    if (kind == "output") t = DType::Q6_K;
    if ((kind == "attn_v" || kind.rfind("ffn_down", 0) == 0) && use_more_bits(layer, n_layers)) {
      t = DType::Q6_K;
    }
  }
  if (mxfp4_moe && kind.find("_exps") != std::string_view::npos) t = DType::MXFP4;
  if (cols % traits(t).block_size != 0) t = DType::F16;  // as llama.cpp falls back
  return t;
}

void PlanBuilder::matrix(std::string name, std::string_view kind, int layer, int64_t cols,
                         int64_t rows, int64_t mats) {
  plan.push_back({std::move(name),
                  types.pick(kind, layer, s.n_layers, cols),
                  cols,
                  rows,
                  Fill::Matrix,
                  {},
                  mats});
}

void PlanBuilder::vec(std::string name, int64_t cols, Fill fill, int64_t rows) {
  plan.push_back({std::move(name), DType::F32, cols, rows, fill, {}, 1});
}

void PlanBuilder::f32_matrix(std::string name, int64_t cols, int64_t rows) {
  plan.push_back({std::move(name), DType::F32, cols, rows, Fill::Matrix, {}, 1});
}

void PlanBuilder::uniform(std::string name, int64_t cols, float center, float amplitude) {
  plan.push_back({std::move(name), DType::F32, cols, 1, Fill::Uniform, {}, 1, center, amplitude});
}

}  // namespace synth_detail

namespace {

using synth_detail::Fill;
using synth_detail::PlanBuilder;
using synth_detail::TensorPlan;
using synth_detail::TypePlan;

void validate(const SynthSpec& s) {
  static constexpr std::string_view kArchs[] = {"llama",   "qwen2",    "qwen3",  "qwen3moe",
                                                "gpt-oss", "gemma2",   "gemma3", "gemma4",
                                                "qwen35",  "qwen35moe"};
  if (std::find(std::begin(kArchs), std::end(kArchs), s.arch) == std::end(kArchs)) {
    fail("synth: unsupported architecture '", s.arch,
         "' (llama, qwen2, qwen3, qwen3moe, gpt-oss, gemma2, gemma3, gemma4, qwen35, qwen35moe)");
  }
  if (s.swa_period < 0 || (s.swa_period > 0 && s.sliding_window < 1))
    fail("synth: ", s.preset, ": a window-layer period needs a positive sliding window");
  const bool moe_arch = s.arch == "qwen3moe" || s.arch == "gpt-oss" || s.arch == "qwen35moe";
  if ((moe_arch && s.n_experts == 0) || (!moe_arch && s.arch != "gemma4" && s.n_experts > 0))
    fail("synth: ", s.preset,
         ": experts go with the qwen3moe, gpt-oss, gemma4 and qwen35moe architectures");
  if (s.n_kv_shared_layers < 0 ||
      (s.n_kv_shared_layers > 0 && (s.arch != "gemma4" || s.n_layers - s.n_kv_shared_layers < 2)))
    fail("synth: ", s.preset, ": ", s.n_kv_shared_layers, " KV-shared layers of ", s.n_layers,
         " (gemma4 only, and at least two layers must have their own K/V)");
  if (s.n_experts > 0 &&
      (s.n_experts_used < 1 || s.n_experts_used > s.n_experts || s.n_ff_expert < 1))
    fail("synth: ", s.preset, ": ", s.n_experts_used, " of ", s.n_experts, " experts of width ",
         s.n_ff_expert, " is not a valid mixture");
  if (s.n_embd < 1 || s.n_layers < 1 || s.n_heads < 1 || s.n_kv_heads < 1 || s.n_ff < 1 ||
      s.n_ctx < 1 || s.head_dim < 2 || s.head_dim % 2 != 0) {
    fail("synth: ", s.preset, " has a non-positive dimension or an odd head_dim");
  }
  if (s.n_heads % s.n_kv_heads != 0) {
    fail("synth: ", s.n_heads, " heads are not a multiple of ", s.n_kv_heads, " KV heads");
  }
  for (const auto* a : {&s.layer_kv_heads, &s.layer_ff})
    if (!a->empty() && int(a->size()) != s.n_layers)
      fail("synth: ", a->size(), " per-layer values for ", s.n_layers, " layers");
  if (s.n_kv_heads_swa < 0 || (s.n_kv_heads_swa > 0 && s.n_heads % s.n_kv_heads_swa != 0))
    fail("synth: ", s.n_heads, " heads are not a multiple of ", s.n_kv_heads_swa, " KV heads");
  if (s.head_dim_swa < 0 || s.head_dim_swa % 2 != 0)
    fail("synth: ", s.preset, ": the window layers' head_dim must be even");
  for (int kv : s.layer_kv_heads)
    if (kv < 1 || s.n_heads % kv != 0)
      fail("synth: ", s.n_heads, " heads are not a multiple of ", kv, " KV heads");
  for (int ff : s.layer_ff)
    if (ff < 1) fail("synth: a layer's FFN width ", ff, " is not positive");
  if (s.rope_dims < 0 || s.rope_dims > s.head_dim || s.rope_dims % 2 != 0)
    fail("synth: ", s.preset, ": ", s.rope_dims, " rotated dims of a head of ", s.head_dim);
  synth_detail::validate_hybrid(s);
}

bool is_gemma(const SynthSpec& s) {
  return s.arch == "gemma2" || s.arch == "gemma3" || s.arch == "gemma4";
}

// A window layer (Gemma's 5 window layers, then 1 global).
bool is_swa(const SynthSpec& s, int l) {
  return s.swa_period > 0 && (l + 1) % s.swa_period != 0;
}

// The first of the layers that reuse earlier layers' K/V (gemma4).
int first_kv_shared(const SynthSpec& s) {
  return s.n_layers - s.n_kv_shared_layers;
}

int head_dim_swa(const SynthSpec& s) {
  return s.head_dim_swa > 0 ? s.head_dim_swa : s.head_dim;
}

int head_dim_of(const SynthSpec& s, int l) {
  return is_swa(s, l) ? head_dim_swa(s) : s.head_dim;
}

int kv_heads_of(const SynthSpec& s, int l) {
  if (s.n_kv_heads_swa > 0 && is_swa(s, l)) return s.n_kv_heads_swa;
  return s.layer_kv_heads.empty() ? s.n_kv_heads : s.layer_kv_heads[size_t(l)];
}

int ff_of(const SynthSpec& s, int l) {
  if (s.double_wide_kv_shared_ff && l >= first_kv_shared(s)) return 2 * s.n_ff;
  return s.layer_ff.empty() ? s.n_ff : s.layer_ff[size_t(l)];
}

// Generates one tensor into dst, rows in parallel; each row from its own seed.
void generate(const TensorPlan& t, uint64_t seed, uint8_t* dst, ThreadPool* pool) {
  const size_t rb = row_bytes(t.type, t.cols);
  const uint64_t tensor_seed = seed ^ name_hash(t.name);
  const int64_t n_rows = t.rows * t.mats;
  // Matrices: uniform with variance 1/fan_in; norms 1 +- 0.1; biases +- 0.1.
  const float amplitude = t.fill == Fill::Matrix    ? std::sqrt(3.0f / float(t.cols))
                          : t.fill == Fill::Uniform ? t.amplitude
                                                    : 0.1f;
  const float center = t.fill == Fill::Norm ? 1.0f : t.fill == Fill::Uniform ? t.center : 0.0f;
  auto rows = [&](int64_t begin, int64_t end) {
    std::vector<float> buf(size_t(t.cols));
    for (int64_t r = begin; r < end; ++r) {
      if (t.fill == Fill::Constant) {
        buf = t.constant;
      } else {
        uint64_t row_seed = tensor_seed + uint64_t(r) * 0xd1b54a32d192ed03ull;
        uniform_row(splitmix64(row_seed), buf.data(), t.cols);
        for (auto& v : buf) v = center + amplitude * v;
      }
      quantize_row(t.type, buf.data(), dst + size_t(r) * rb, t.cols);
    }
  };
  if (pool && n_rows > 1) {
    pool->parallel_for(n_rows, 16, [&](int64_t b, int64_t e, int) { rows(b, e); });
  } else {
    rows(0, n_rows);
  }
}

// The tensors of a spec, in the order llama.cpp's converter writes them.
class Planner {
 public:
  Planner(const SynthSpec& s, const TypePlan& types) : s_(s), b_{s, types, {}} {}

  std::vector<TensorPlan> plan() {
    const int64_t E = s_.n_embd;
    matrix("token_embd.weight", "token_embd", 0, E, s_.n_vocab);
    if (s_.llama3_factor > 0.0f) {
      auto factors = llama3_rope_freq_factors(s_.head_dim, s_.rope_base, s_.llama3_factor,
                                              s_.llama3_low_freq_factor, s_.llama3_high_freq_factor,
                                              s_.llama3_orig_ctx);
      b_.plan.push_back({"rope_freqs.weight", DType::F32, int64_t(factors.size()), 1,
                         Fill::Constant, std::move(factors)});
    }
    vec("output_norm.weight", E, Fill::Norm);
    if (!s_.tied_output) matrix("output.weight", "output", 0, E, s_.n_vocab);
    if (is_gemma(s_)) {
      gemma_globals();
      for (int l = 0; l < s_.n_layers; ++l) gemma_layer(l);
    } else if (synth_detail::is_hybrid(s_)) {
      synth_detail::plan_hybrid_layers(b_);
    } else {
      for (int l = 0; l < s_.n_layers; ++l) {
        attention(l);
        ffn(l);
      }
    }
    return std::move(b_.plan);
  }

 private:
  void matrix(std::string name, std::string_view kind, int layer, int64_t cols, int64_t rows,
              int64_t mats = 1) {
    b_.matrix(std::move(name), kind, layer, cols, rows, mats);
  }
  void vec(std::string name, int64_t cols, Fill fill, int64_t rows = 1) {
    b_.vec(std::move(name), cols, fill, rows);
  }

  void attention(int l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t E = s_.n_embd, Q = int64_t(s_.n_heads) * s_.head_dim;
    const int64_t K = int64_t(kv_heads_of(s_, l)) * s_.head_dim;
    const bool oss = s_.arch == "gpt-oss";
    vec(p + "attn_norm.weight", E, Fill::Norm);
    matrix(p + "attn_q.weight", "attn_q", l, E, Q);
    matrix(p + "attn_k.weight", "attn_k", l, E, K);
    matrix(p + "attn_v.weight", "attn_v", l, E, K);
    if (s_.arch == "qwen2" || oss) {
      vec(p + "attn_q.bias", Q, Fill::Bias);
      vec(p + "attn_k.bias", K, Fill::Bias);
      vec(p + "attn_v.bias", K, Fill::Bias);
    }
    if (s_.arch == "qwen3" || s_.arch == "qwen3moe") {
      vec(p + "attn_q_norm.weight", s_.head_dim, Fill::Norm);
      vec(p + "attn_k_norm.weight", s_.head_dim, Fill::Norm);
    }
    matrix(p + "attn_output.weight", "attn_output", l, Q, E);
    if (oss) {  // output bias, one learned sink logit per head
      vec(p + "attn_output.bias", E, Fill::Bias);
      vec(p + "attn_sinks.weight", s_.n_heads, Fill::Bias);
    }
  }

  void ffn(int l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t E = s_.n_embd, F = ff_of(s_, l);
    const bool oss = s_.arch == "gpt-oss";
    // gpt-oss calls the FFN's input norm the post-attention norm.
    vec(p + (oss ? "post_attention_norm.weight" : "ffn_norm.weight"), E, Fill::Norm);
    if (s_.n_experts == 0) {
      matrix(p + "ffn_gate.weight", "ffn_gate", l, E, F);
      matrix(p + "ffn_up.weight", "ffn_up", l, E, F);
      matrix(p + "ffn_down.weight", "ffn_down", l, F, E);
      return;
    }
    // The router stays f32 (llama-quantize leaves ffn_gate_inp alone).
    const int64_t X = s_.n_experts, G = s_.n_ff_expert;
    b_.f32_matrix(p + "ffn_gate_inp.weight", E, X);
    matrix(p + "ffn_gate_exps.weight", "ffn_gate_exps", l, E, G, X);
    matrix(p + "ffn_up_exps.weight", "ffn_up_exps", l, E, G, X);
    matrix(p + "ffn_down_exps.weight", "ffn_down_exps", l, G, E, X);
    if (oss) {  // biases of the router and of every expert's three products
      vec(p + "ffn_gate_inp.bias", X, Fill::Bias);
      vec(p + "ffn_gate_exps.bias", G, Fill::Bias, X);
      vec(p + "ffn_up_exps.bias", G, Fill::Bias, X);
      vec(p + "ffn_down_exps.bias", E, Fill::Bias, X);
    }
  }

  // gemma4: the global layers' rope_freqs (proportional rope: the pairs past
  // the rotated fraction get a divisor of 1e30, i.e. no rotation) and the
  // per-layer embeddings' tables.
  void gemma_globals() {
    bool any_global = false;
    for (int l = 0; l < s_.n_layers; ++l) any_global = any_global || !is_swa(s_, l);
    // Only the global layers use it, and llama.cpp rejects a tensor no layer
    // uses (a cut of window layers only).
    if (s_.rope_partial_global > 0.0f && any_global) {
      const int pairs = s_.head_dim / 2;
      const int rotated = int(float(s_.head_dim) * s_.rope_partial_global / 2.0f);
      std::vector<float> f(size_t(pairs), 1e30f);
      std::fill(f.begin(), f.begin() + rotated, 1.0f);
      b_.plan.push_back({"rope_freqs.weight", DType::F32, pairs, 1, Fill::Constant, std::move(f)});
    }
    if (s_.n_embd_per_layer > 0) {
      const int64_t PL = int64_t(s_.n_embd_per_layer) * s_.n_layers;
      matrix("per_layer_token_embd.weight", "per_layer_token_embd", 0, PL, s_.n_vocab);
      matrix("per_layer_model_proj.weight", "per_layer_model_proj", 0, s_.n_embd, PL);
      vec("per_layer_proj_norm.weight", s_.n_embd_per_layer, Fill::Norm);
    }
  }

  // A Gemma 2 / 3 / 4 layer: norms after the attention and after the FFN;
  // gemma3 and gemma4 add QK norms, gemma4 global layers whose V is K,
  // experts beside the dense FFN, per-layer inputs and an output scale.
  // The KV-shared layers keep their K/V weights: the checkpoints hold them
  // and the converter writes them (llama.cpp loads them and does not use
  // them).
  void gemma_layer(int l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t E = s_.n_embd, D = head_dim_of(s_, l);
    const int64_t Q = int64_t(s_.n_heads) * D, K = int64_t(kv_heads_of(s_, l)) * D;
    vec(p + "attn_norm.weight", E, Fill::Norm);
    matrix(p + "attn_q.weight", "attn_q", l, E, Q);
    matrix(p + "attn_k.weight", "attn_k", l, E, K);
    if (!(s_.global_v_from_k && !is_swa(s_, l))) matrix(p + "attn_v.weight", "attn_v", l, E, K);
    if (s_.arch != "gemma2") {
      vec(p + "attn_q_norm.weight", D, Fill::Norm);
      vec(p + "attn_k_norm.weight", D, Fill::Norm);
    }
    matrix(p + "attn_output.weight", "attn_output", l, Q, E);
    vec(p + "post_attention_norm.weight", E, Fill::Norm);
    const int64_t F = ff_of(s_, l);
    vec(p + "ffn_norm.weight", E, Fill::Norm);
    matrix(p + "ffn_gate.weight", "ffn_gate", l, E, F);
    matrix(p + "ffn_up.weight", "ffn_up", l, E, F);
    matrix(p + "ffn_down.weight", "ffn_down", l, F, E);
    vec(p + "post_ffw_norm.weight", E, Fill::Norm);
    if (s_.n_experts > 0) gemma_experts(p, l);
    if (s_.n_embd_per_layer > 0) {
      matrix(p + "inp_gate.weight", "inp_gate", l, E, s_.n_embd_per_layer);
      matrix(p + "proj.weight", "proj", l, s_.n_embd_per_layer, E);
      vec(p + "post_norm.weight", E, Fill::Norm);
    }
    if (s_.arch == "gemma4") vec(p + "layer_output_scale.weight", 1, Fill::Norm);
  }

  // gemma4's experts beside the dense FFN (which then acts as a shared
  // expert): each branch has its own norms, the router its input scale.
  void gemma_experts(const std::string& p, int l) {
    const int64_t E = s_.n_embd, X = s_.n_experts, G = s_.n_ff_expert;
    b_.f32_matrix(p + "ffn_gate_inp.weight", E, X);
    vec(p + "ffn_gate_inp.scale", E, Fill::Norm);
    vec(p + "pre_ffw_norm_2.weight", E, Fill::Norm);
    vec(p + "post_ffw_norm_1.weight", E, Fill::Norm);
    vec(p + "post_ffw_norm_2.weight", E, Fill::Norm);
    matrix(p + "ffn_gate_up_exps.weight", "ffn_gate_up_exps", l, E, 2 * G, X);
    matrix(p + "ffn_down_exps.weight", "ffn_down_exps", l, G, E, X);
    vec(p + "ffn_down_exps.scale", X, Fill::Norm);
  }

  const SynthSpec& s_;
  PlanBuilder b_;
};

// The KV-shared layers of a model cut to `layers`: the same share of the
// layers, rounded so that the layers with their own K/V are whole periods
// (llama.cpp's shared layers reuse the last window and the last global layer
// before them) and at least one period.
int cut_kv_shared_layers(const SynthSpec& s, int layers) {
  if (s.n_kv_shared_layers == 0 || s.n_layers < 1) return 0;
  const int period = std::max(s.swa_period, 1);
  int own = int(int64_t(layers) * (s.n_layers - s.n_kv_shared_layers) / s.n_layers);
  own = std::max(period, own / period * period);
  return std::max(0, layers - own);
}

// Gemma's window layers, rope bases and scaling, logit softcap; for gemma4
// also the window layers' head shapes, the KV-shared layers and the
// per-layer embeddings' width (keys llama.cpp's gemma4 loader requires).
void add_gemma_metadata(const SynthSpec& s, gguf::GgufWriter& w) {
  const std::string a = s.arch + ".";
  if (s.sliding_window > 0) w.set_u32(a + "attention.sliding_window", uint32_t(s.sliding_window));
  if (s.rope_base_swa > 0.0f) w.set_f32(a + "rope.freq_base_swa", s.rope_base_swa);
  if (s.rope_linear_factor > 0.0f) {
    w.set_string(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", s.rope_linear_factor);
  }
  if (s.final_logit_softcap > 0.0f) w.set_f32(a + "final_logit_softcapping", s.final_logit_softcap);
  if (s.attn_logit_softcap > 0.0f) w.set_f32(a + "attn_logit_softcapping", s.attn_logit_softcap);
  if (s.arch == "gemma2") return;  // llama.cpp's period 2
  if (s.arch == "gemma3") {
    if (s.swa_period > 0) w.set_u32(a + "attention.sliding_window_pattern", uint32_t(s.swa_period));
    return;
  }
  std::vector<bool> swa(size_t(s.n_layers));
  for (int l = 0; l < s.n_layers; ++l) swa[size_t(l)] = is_swa(s, l);
  w.set(a + "attention.sliding_window_pattern", gguf::Value::make_bools(swa));
  const int hd_swa = head_dim_swa(s);
  w.set_u32(a + "attention.key_length_swa", uint32_t(hd_swa));
  w.set_u32(a + "attention.value_length_swa", uint32_t(hd_swa));
  w.set_u32(a + "rope.dimension_count_swa", uint32_t(hd_swa));
  w.set_u32(a + "attention.shared_kv_layers", uint32_t(s.n_kv_shared_layers));
  w.set_u32(a + "embedding_length_per_layer_input", uint32_t(s.n_embd_per_layer));
  if (s.n_kv_heads_swa > 0) {
    std::vector<int> kv(size_t(s.n_layers));
    for (int l = 0; l < s.n_layers; ++l) kv[size_t(l)] = kv_heads_of(s, l);
    w.set(a + "attention.head_count_kv", gguf::Value::make_i32s(kv));
  }
  if (s.double_wide_kv_shared_ff) {
    std::vector<int> ff(size_t(s.n_layers));
    for (int l = 0; l < s.n_layers; ++l) ff[size_t(l)] = ff_of(s, l);
    w.set(a + "feed_forward_length", gguf::Value::make_i32s(ff));
  }
}

// The model's metadata keys, as llama.cpp's converter writes them.
void write_metadata(const SynthSpec& s, const SynthOptions& opts, gguf::GgufWriter& w) {
  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", "turbokv synth " + s.preset);
  w.set_u32(a + "context_length", uint32_t(s.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(s.n_embd));
  w.set_u32(a + "block_count", uint32_t(s.n_layers + s.n_nextn_layers));
  if (s.layer_ff.empty()) {
    w.set_u32(a + "feed_forward_length", uint32_t(s.n_ff));
  } else {
    w.set(a + "feed_forward_length", gguf::Value::make_i32s(s.layer_ff));
  }
  w.set_u32(a + "attention.head_count", uint32_t(s.n_heads));
  if (s.layer_kv_heads.empty()) {
    w.set_u32(a + "attention.head_count_kv", uint32_t(s.n_kv_heads));
  } else {
    w.set(a + "attention.head_count_kv", gguf::Value::make_i32s(s.layer_kv_heads));
  }
  w.set_u32(a + "attention.key_length", uint32_t(s.head_dim));
  w.set_u32(a + "attention.value_length", uint32_t(s.head_dim));
  w.set_u32(a + "rope.dimension_count", uint32_t(s.rope_dims > 0 ? s.rope_dims : s.head_dim));
  w.set_f32(a + "rope.freq_base", s.rope_base);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_u32(a + "vocab_size", uint32_t(s.n_vocab));
  if (s.sliding_window > 0) w.set_u32(a + "attention.sliding_window", uint32_t(s.sliding_window));
  if (s.yarn_factor > 0.0f) {  // gpt-oss's YaRN rope scaling
    w.set_string(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", s.yarn_factor);
    w.set_u32(a + "rope.scaling.original_context_length", uint32_t(s.yarn_orig_ctx));
  }
  if (s.n_experts > 0) {
    w.set_u32(a + "expert_count", uint32_t(s.n_experts));
    w.set_u32(a + "expert_used_count", uint32_t(s.n_experts_used));
    w.set_u32(a + "expert_feed_forward_length", uint32_t(s.n_ff_expert));
  }
  if (is_gemma(s)) add_gemma_metadata(s, w);
  if (synth_detail::is_hybrid(s)) synth_detail::add_hybrid_metadata(s, w);
  w.set_string("turbokv.synth.preset", s.preset);
  w.set_string("turbokv.synth.type", opts.type);
  w.set("turbokv.synth.seed", gguf::Value::make_u64(opts.seed));
}

}  // namespace

SynthResult build_synth_model(const SynthSpec& spec_in, const SynthOptions& opts,
                              gguf::GgufWriter& w) {
  SynthResult result;
  SynthSpec s = spec_in;
  if (opts.layers > 0) {
    s.n_kv_shared_layers = cut_kv_shared_layers(s, opts.layers);
    s.n_layers = opts.layers;
  }
  if (opts.experts > 0) s.n_experts = opts.experts;
  if (opts.experts_used > 0) s.n_experts_used = opts.experts_used;
  if (opts.expert_ff > 0) s.n_ff_expert = opts.expert_ff;
  validate(s);
  const TypePlan types = TypePlan::parse(opts.type);

  // Vocabulary first: a copied one decides n_vocab.
  if (!opts.vocab_from.empty()) {
    s.n_vocab = copy_vocab(w, opts.vocab_from);
  } else {
    add_invented_vocab(w, s.n_vocab);
  }

  write_metadata(s, opts, w);

  std::vector<TensorPlan> plan = Planner(s, types).plan();
  for (const auto& t : plan) {
    result.tensor_bytes += uint64_t(t.rows * t.mats) * row_bytes(t.type, t.cols);
    result.n_params += uint64_t(t.rows * t.mats) * uint64_t(t.cols);
  }
  result.n_tensors = plan.size();

  // Shared by the fillers, which run later, inside GgufWriter::write().
  struct Progress {
    std::atomic<uint64_t> done{0};
    uint64_t total = 0;
    std::function<void(uint64_t, uint64_t)> callback;
  };
  auto progress = std::make_shared<Progress>();
  progress->total = result.tensor_bytes;
  progress->callback = opts.progress;
  const uint64_t seed = opts.seed;
  ThreadPool* pool = opts.pool;
  for (auto& t : plan) {
    std::vector<int64_t> shape = t.mats > 1    ? std::vector<int64_t>{t.cols, t.rows, t.mats}
                                 : t.rows == 1 ? std::vector<int64_t>{t.cols}
                                               : std::vector<int64_t>{t.cols, t.rows};
    auto tensor = std::make_shared<TensorPlan>(std::move(t));
    w.add_tensor(tensor->name, tensor->type, std::move(shape),
                 [tensor, seed, pool, progress](uint8_t* dst, size_t n_bytes) {
                   TKV_CHECK(n_bytes == size_t(tensor->rows * tensor->mats) *
                                            row_bytes(tensor->type, tensor->cols));
                   generate(*tensor, seed, dst, pool);
                   const uint64_t done = progress->done += n_bytes;
                   if (progress->callback) progress->callback(done, progress->total);
                 });
  }
  result.spec = s;
  return result;
}

SynthResult write_synth_model(const SynthSpec& spec, const SynthOptions& opts,
                              const std::string& out_path) {
  gguf::GgufWriter writer;
  SynthResult r = build_synth_model(spec, opts, writer);
  writer.write(out_path);
  return r;
}

}  // namespace tkv::model
