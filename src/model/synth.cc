#include "model/synth.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <memory>
#include <numbers>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tensor/dtype.h"
#include "tensor/matmul.h"

namespace tkv::model {

// ---- presets ---------------------------------------------------------------

namespace {

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

SynthSpec with_llama3_rope(SynthSpec s, float factor) {
  s.llama3_factor = factor;
  s.llama3_low_freq_factor = 1.0f;
  s.llama3_high_freq_factor = 4.0f;
  s.llama3_orig_ctx = 8192;
  return s;
}

SynthSpec with_experts(SynthSpec s, int n, int used, int ff) {
  s.n_experts = n;
  s.n_experts_used = used;
  s.n_ff_expert = ff;
  return s;
}

// The shapes of the real models' config.json.
std::vector<SynthSpec> all_presets() {
  std::vector<SynthSpec> p;
  p.push_back(make_spec("tiny", "llama", 256, 2, 4, 2, 64, 768, 512, 2048, 10000.0f, 1e-5f, false));
  p.push_back(with_llama3_rope(make_spec("llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 128256,
                                         131072, 500000.0f, 1e-5f, true),
                               32.0f));
  p.push_back(with_llama3_rope(make_spec("llama-3.2-3b", "llama", 3072, 28, 24, 8, 128, 8192,
                                         128256, 131072, 500000.0f, 1e-5f, true),
                               32.0f));
  p.push_back(with_llama3_rope(make_spec("llama-3.1-8b", "llama", 4096, 32, 32, 8, 128, 14336,
                                         128256, 131072, 500000.0f, 1e-5f, false),
                               8.0f));
  p.push_back(make_spec("qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 151936, 32768, 1e6f,
                        1e-6f, true));
  p.push_back(make_spec("qwen2.5-7b", "qwen2", 3584, 28, 28, 4, 128, 18944, 152064, 32768, 1e6f,
                        1e-6f, false));
  p.push_back(make_spec("qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 151936, 40960, 1e6f,
                        1e-6f, false));
  p.push_back(make_spec("mistral-7b", "llama", 4096, 32, 32, 8, 128, 14336, 32768, 32768, 1e6f,
                        1e-5f, false));
  p.push_back(with_experts(make_spec("qwen3-30b-a3b", "qwen3moe", 2048, 48, 32, 4, 128, 6144,
                                     151936, 40960, 1e6f, 1e-6f, false),
                           128, 8, 768));
  SynthSpec oss = with_experts(make_spec("gpt-oss-20b", "gpt-oss", 2880, 24, 64, 8, 64, 2880,
                                         201088, 131072, 150000.0f, 1e-5f, false),
                               32, 4, 2880);
  oss.sliding_window = 128;
  oss.yarn_factor = 32.0f;
  oss.yarn_orig_ctx = 4096;
  p.push_back(oss);
  p.push_back(with_experts(
      make_spec("tiny-moe", "qwen3moe", 256, 2, 4, 2, 64, 768, 512, 2048, 1e6f, 1e-6f, false), 8, 2,
      128));
  SynthSpec v01 = make_spec("mistral-7b-v0.1", "llama", 4096, 32, 32, 8, 128, 14336, 32000, 32768,
                            10000.0f, 1e-5f, false);
  v01.sliding_window = 4096;
  p.push_back(v01);
  return p;
}

}  // namespace

std::vector<std::string> synth_preset_names() {
  std::vector<std::string> names;
  for (const auto& s : all_presets()) names.push_back(s.preset);
  return names;
}

SynthSpec synth_preset(std::string_view name) {
  std::string known;
  for (const auto& s : all_presets()) {
    if (s.preset == name) return s;
    known += (known.empty() ? "" : ", ") + s.preset;
  }
  fail("synth: unknown model '", name, "' (known: ", known, ")");
}

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

// What a generated tensor holds.
enum class Fill { Matrix, Norm, Bias, Constant };

struct TensorPlan {
  std::string name;
  DType type;
  int64_t cols, rows;  // a vector: rows == 1
  Fill fill;
  std::vector<float> constant;  // Fill::Constant (rope_freqs)
  int64_t mats = 1;             // > 1: a 3-D tensor of `mats` matrices (experts)
};

// The weight type plan: one type for every matrix, or one of llama.cpp's
// mixes: Q4_K_M, or MXFP4_MOE (expert tensors MXFP4, every other matrix
// Q8_0, as gpt-oss is published).
struct TypePlan {
  DType base = DType::F16;
  bool q4_k_m = false;
  bool mxfp4_moe = false;

  static TypePlan parse(const std::string& name) {
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

  // llama.cpp's use_more_bits(): the first and last eighth of the layers and
  // every third one between get more bits in the _M mixes.
  static bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
  }

  // kind: the tensor's name without "blk.N." and ".weight" ("output",
  // "attn_v", "ffn_down_exps", ...).
  DType pick(std::string_view kind, int layer, int n_layers, int64_t cols) const {
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
};

void validate(const SynthSpec& s) {
  if (s.arch != "llama" && s.arch != "qwen2" && s.arch != "qwen3" && s.arch != "qwen3moe" &&
      s.arch != "gpt-oss") {
    fail("synth: unsupported architecture '", s.arch, "' (llama, qwen2, qwen3, qwen3moe, gpt-oss)");
  }
  if ((s.arch == "qwen3moe" || s.arch == "gpt-oss") != (s.n_experts > 0))
    fail("synth: ", s.preset, ": experts go with the qwen3moe and gpt-oss architectures");
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
  for (int kv : s.layer_kv_heads)
    if (kv < 1 || s.n_heads % kv != 0)
      fail("synth: ", s.n_heads, " heads are not a multiple of ", kv, " KV heads");
  for (int ff : s.layer_ff)
    if (ff < 1) fail("synth: a layer's FFN width ", ff, " is not positive");
}

int kv_heads_of(const SynthSpec& s, int l) {
  return s.layer_kv_heads.empty() ? s.n_kv_heads : s.layer_kv_heads[size_t(l)];
}

int ff_of(const SynthSpec& s, int l) {
  return s.layer_ff.empty() ? s.n_ff : s.layer_ff[size_t(l)];
}

// Generates one tensor into dst, rows in parallel; each row from its own seed.
void generate(const TensorPlan& t, uint64_t seed, uint8_t* dst, ThreadPool* pool) {
  const size_t rb = row_bytes(t.type, t.cols);
  const uint64_t tensor_seed = seed ^ name_hash(t.name);
  const int64_t n_rows = t.rows * t.mats;
  // Matrices: uniform with variance 1/fan_in; norms 1 +- 0.1; biases +- 0.1.
  const float amplitude = t.fill == Fill::Matrix ? std::sqrt(3.0f / float(t.cols)) : 0.1f;
  auto rows = [&](int64_t begin, int64_t end) {
    std::vector<float> buf(size_t(t.cols));
    for (int64_t r = begin; r < end; ++r) {
      if (t.fill == Fill::Constant) {
        buf = t.constant;
      } else {
        uint64_t row_seed = tensor_seed + uint64_t(r) * 0xd1b54a32d192ed03ull;
        uniform_row(splitmix64(row_seed), buf.data(), t.cols);
        for (auto& v : buf) v = (t.fill == Fill::Norm ? 1.0f : 0.0f) + amplitude * v;
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
  Planner(const SynthSpec& s, const TypePlan& types) : s_(s), types_(types) {}

  std::vector<TensorPlan> plan() {
    const int64_t E = s_.n_embd;
    matrix("token_embd.weight", "token_embd", 0, E, s_.n_vocab);
    if (s_.llama3_factor > 0.0f) {
      auto factors = llama3_rope_freq_factors(s_.head_dim, s_.rope_base, s_.llama3_factor,
                                              s_.llama3_low_freq_factor, s_.llama3_high_freq_factor,
                                              s_.llama3_orig_ctx);
      plan_.push_back({"rope_freqs.weight", DType::F32, int64_t(factors.size()), 1, Fill::Constant,
                       std::move(factors)});
    }
    vec("output_norm.weight", E, Fill::Norm);
    if (!s_.tied_output) matrix("output.weight", "output", 0, E, s_.n_vocab);
    for (int l = 0; l < s_.n_layers; ++l) {
      attention(l);
      ffn(l);
    }
    return std::move(plan_);
  }

 private:
  void matrix(std::string name, std::string_view kind, int layer, int64_t cols, int64_t rows,
              int64_t mats = 1) {
    plan_.push_back({std::move(name),
                     types_.pick(kind, layer, s_.n_layers, cols),
                     cols,
                     rows,
                     Fill::Matrix,
                     {},
                     mats});
  }
  // A float tensor of rows x cols values (a vector when rows == 1).
  void vec(std::string name, int64_t cols, Fill fill, int64_t rows = 1) {
    plan_.push_back({std::move(name), DType::F32, cols, rows, fill, {}, 1});
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
    plan_.push_back({p + "ffn_gate_inp.weight", DType::F32, E, X, Fill::Matrix, {}, 1});
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

  const SynthSpec& s_;
  const TypePlan& types_;
  std::vector<TensorPlan> plan_;
};

}  // namespace

SynthResult build_synth_model(const SynthSpec& spec_in, const SynthOptions& opts,
                              gguf::GgufWriter& w) {
  SynthResult result;
  SynthSpec s = spec_in;
  if (opts.layers > 0) s.n_layers = opts.layers;
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

  const std::string a = s.arch + ".";
  w.set_string("general.architecture", s.arch);
  w.set_string("general.name", "turbokv synth " + s.preset);
  w.set_u32(a + "context_length", uint32_t(s.n_ctx));
  w.set_u32(a + "embedding_length", uint32_t(s.n_embd));
  w.set_u32(a + "block_count", uint32_t(s.n_layers));
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
  w.set_u32(a + "rope.dimension_count", uint32_t(s.head_dim));
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
  w.set_string("turbokv.synth.preset", s.preset);
  w.set_string("turbokv.synth.type", opts.type);
  w.set("turbokv.synth.seed", gguf::Value::make_u64(opts.seed));

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
