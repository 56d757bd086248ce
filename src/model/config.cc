#include "model/config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "gguf/gguf.h"

namespace tkv::model {

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::Llama:
      return "llama";
    case Arch::Qwen2:
      return "qwen2";
    case Arch::Qwen3:
      return "qwen3";
    case Arch::Qwen3Moe:
      return "qwen3moe";
    case Arch::Gemma2:
      return "gemma2";
    case Arch::Gemma3:
      return "gemma3";
    case Arch::Gemma4:
      return "gemma4";
    case Arch::GptOss:
      return "gpt-oss";
    case Arch::Qwen35:
      return "qwen35";
    case Arch::Qwen35Moe:
      return "qwen35moe";
  }
  return "?";
}

// llama.cpp's llama_model_rope_type(): LLAMA -> NORM, the Qwens, GEMMA2,
// GEMMA3, GEMMA4 and OPENAI_MOE -> NEOX.
RopeStyle rope_style_of(Arch a) {
  return a == Arch::Llama ? RopeStyle::Normal : RopeStyle::Neox;
}

namespace {

// Reads an integer hyper-parameter and checks it lies in [lo, hi]: the
// bounds keep a corrupt file from asking for absurd scratch sizes later.
int int_param(const gguf::GgufFile& f, const std::string& key, std::optional<int64_t> fallback,
              int64_t lo, int64_t hi) {
  std::optional<int64_t> v = f.get_int(key);
  if (!v) {
    if (!fallback) fail(f.path(), ": missing metadata key '", key, "'");
    v = fallback;
  }
  if (*v < lo || *v > hi) {
    fail(f.path(), ": metadata ", key, " = ", *v, " is out of range [", lo, ", ", hi, "]");
  }
  return int(*v);
}

// A hyper-parameter that llama.cpp allows as one number or as an array of
// one per layer (get_key_or_arr): the per-layer values, each in [lo, hi]
// (hi_of(l): a bound that depends on the layer, e.g. its query heads).
template <class HiOf>
std::vector<int> per_layer_param(const gguf::GgufFile& f, const std::string& key, int n_layers,
                                 std::optional<int64_t> fallback, int64_t lo, HiOf hi_of) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr || !v->is_array()) {
    // One value for every layer; the bound of the smallest layer applies.
    int64_t hi = int64_t(hi_of(0));
    for (int l = 1; l < n_layers; ++l) hi = std::min(hi, int64_t(hi_of(l)));
    return std::vector<int>(size_t(n_layers), int_param(f, key, fallback, lo, hi));
  }
  const std::optional<std::vector<int64_t>> a = f.get_ints(key);
  if (!a) fail(f.path(), ": metadata ", key, " is not an array of integers");
  if (int64_t(a->size()) != n_layers)
    fail(f.path(), ": metadata ", key, " has ", a->size(), " entries, the model has ", n_layers,
         " layers");
  std::vector<int> out;
  for (int l = 0; l < n_layers; ++l) {
    const int64_t x = (*a)[size_t(l)];
    if (x < lo || x > int64_t(hi_of(l)))
      fail(f.path(), ": metadata ", key, "[", l, "] = ", x, " is out of range [", lo, ", ",
           hi_of(l), "]");
    out.push_back(int(x));
  }
  return out;
}

int max_of(const std::vector<int>& v) {
  return *std::max_element(v.begin(), v.end());
}

Arch parse_arch(const gguf::GgufFile& f, const std::string& name) {
  if (name == "llama") return Arch::Llama;
  if (name == "qwen2") return Arch::Qwen2;
  if (name == "qwen3") return Arch::Qwen3;
  if (name == "qwen3moe") return Arch::Qwen3Moe;
  if (name == "gemma2") return Arch::Gemma2;
  if (name == "gemma3") return Arch::Gemma3;
  if (name == "gemma4") return Arch::Gemma4;
  if (name == "gpt-oss") return Arch::GptOss;
  if (name == "qwen35") return Arch::Qwen35;
  if (name == "qwen35moe") return Arch::Qwen35Moe;
  // Architectures whose FFN the forward runs but whose attention it does not
  // yet: say what is missing.
  struct Missing {
    const char* arch;
    const char* what;
  };
  static constexpr Missing kMissing[] = {
      {"qwen3next", "its fused Gated DeltaNet projections (ssm_in, ssm_ba)"},
  };
  for (const Missing& m : kMissing)
    if (name == m.arch)
      fail(f.path(), ": architecture '", name, "' is not supported yet: its attention needs ",
           m.what);
  fail(f.path(), ": unsupported architecture '", gguf::escape(name),
       "' (supported: llama, qwen2, qwen3, qwen3moe, gemma2, gemma3, gemma4, gpt-oss, qwen35, ",
       "qwen35moe)");
}

// Heads and head dims; per layer where the file has arrays.
void read_attention_dims(const gguf::GgufFile& f, const std::string& a, ModelConfig& c,
                         std::vector<int>& heads, std::vector<int>& kv_heads) {
  const int L = c.n_layers;
  heads = per_layer_param(f, a + "attention.head_count", L, std::nullopt, 1,
                          [](int) { return int64_t(4096); });
  c.n_heads = max_of(heads);
  const auto heads_of = [&](int l) { return int64_t(heads[size_t(l)]); };
  const std::string kv_key = a + "attention.head_count_kv";
  kv_heads = f.find(kv_key) ? per_layer_param(f, kv_key, L, std::nullopt, 1, heads_of) : heads;
  const bool arrays = f.find(a + "attention.head_count")->is_array() ||
                      (f.find(kv_key) && f.find(kv_key)->is_array());
  for (int l = 0; l < L; ++l) {
    if (heads[size_t(l)] % kv_heads[size_t(l)] != 0) {
      fail(f.path(), ": attention.head_count ", heads[size_t(l)],
           " is not a multiple of head_count_kv ", kv_heads[size_t(l)],
           arrays ? str(" (layer ", l, ")") : std::string());
    }
  }
  c.n_kv_heads = max_of(kv_heads);
  std::optional<int64_t> default_head_dim;
  if (c.n_embd % c.n_heads == 0) default_head_dim = c.n_embd / c.n_heads;
  c.head_dim = int_param(f, a + "attention.key_length", default_head_dim, 2, 1024);
  const int value_length = int_param(f, a + "attention.value_length", c.head_dim, 1, 1024);
  // llama.cpp's llama and qwen graphs take one head dim for K and V too.
  if (value_length != c.head_dim) {
    fail(f.path(), ": attention.value_length ", value_length, " differs from key_length ",
         c.head_dim, " (not supported)");
  }
}

void read_rope(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  c.n_rot = int_param(f, a + "rope.dimension_count", c.head_dim, 2, c.head_dim);
  if (c.n_rot % 2 != 0) fail(f.path(), ": rope.dimension_count ", c.n_rot, " is odd");
  c.rope_base = float(f.get_float(a + "rope.freq_base").value_or(10000.0));
  if (!(c.rope_base > 1.0f) || !std::isfinite(c.rope_base)) {
    fail(f.path(), ": rope.freq_base ", c.rope_base, " is not a valid base");
  }
  c.rope_style = rope_style_of(c.arch);

  // Rope scaling as llama.cpp reads it: a factor (rope.scaling.factor, or
  // the older rope.scale_linear) with type "linear" unless stated otherwise.
  // Llama 3's frequency-dependent scaling is not metadata: it is the
  // rope_freqs tensor, bound by the loader.
  double factor = f.get_float(a + "rope.scaling.factor").value_or(0.0);
  if (factor == 0.0) factor = f.get_float(a + "rope.scale_linear").value_or(0.0);
  const std::string scaling = f.get_string(a + "rope.scaling.type").value_or("linear");
  if (scaling == "none") {
    factor = 0.0;
  } else if (scaling != "linear" && scaling != "yarn") {
    fail(f.path(), ": rope scaling type '", gguf::escape(scaling),
         "' is not supported (none, linear, yarn)");
  }
  if (factor != 0.0 && factor != 1.0) {
    if (!(factor > 0.0) || !std::isfinite(factor)) {
      fail(f.path(), ": rope scaling factor ", factor, " is not positive");
    }
    c.rope_scaling = RopeScalingType::Linear;
    c.rope_freq_scale = float(1.0 / factor);
  }
  c.rope_orig_ctx = int_param(f, a + "rope.scaling.original_context_length", 0, 0, 1 << 26);
  const double attn_factor = f.get_float(a + "rope.scaling.attn_factor").value_or(1.0);
  if (!(attn_factor > 0.0) || !std::isfinite(attn_factor))
    fail(f.path(), ": rope.scaling.attn_factor ", attn_factor, " is not positive");
  c.rope_attn_factor = float(attn_factor);
  if (scaling == "yarn") {
    // llama_context's YaRN set-up: ext_factor 1 and an attention factor of
    // get_mscale(factor) / (1 + 0.1 ln factor) (rope_yarn multiplies the
    // second back in), times rope.scaling.attn_factor. The rope scales even
    // at factor 1 (ext_factor 1 with freq_scale 1 is the identity blend).
    c.rope_scaling = RopeScalingType::Yarn;
    const float fac = 1.0f / c.rope_freq_scale;
    const float mscale = fac <= 1.0f ? 1.0f : 0.1f * std::log(fac) + 1.0f;
    c.rope_attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(fac))) * float(attn_factor);
  }
}

// Vocabulary size: the token list is the authority (llama.cpp requires the
// embedding to match it); without one, the embedding's row count.
void read_vocab(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  constexpr int64_t kMaxVocab = 1 << 24;
  if (const auto* tokens = f.get_strings("tokenizer.ggml.tokens")) {
    if (tokens->empty() || int64_t(tokens->size()) > kMaxVocab) {
      fail(f.path(), ": tokenizer.ggml.tokens has ", tokens->size(), " entries");
    }
    c.n_vocab = int(tokens->size());
  } else if (f.get_int(a + "vocab_size")) {
    c.n_vocab = int_param(f, a + "vocab_size", std::nullopt, 1, kMaxVocab);
  } else if (const auto* emb = f.find_tensor("token_embd.weight"); emb && emb->shape.size() == 2) {
    if (emb->shape[1] < 1 || emb->shape[1] > kMaxVocab) {
      fail(f.path(), ": tensor token_embd.weight has ", emb->shape[1], " rows");
    }
    c.n_vocab = int(emb->shape[1]);
  } else {
    fail(f.path(), ": cannot tell the vocabulary size (no tokenizer.ggml.tokens, ", a,
         "vocab_size or token_embd.weight)");
  }
}

// The experts of a MoE layer as llama.cpp's graph for the architecture
// builds them (llama / Mixtral and qwen3moe: softmax gating, the chosen
// weights renormalized, SwiGLU experts).
MoeSpec read_moe(const gguf::GgufFile& f, const std::string& a) {
  MoeSpec m;
  m.n_experts = int_param(f, a + "expert_count", 0, 0, 4096);
  if (m.n_experts == 0) return m;
  m.n_used = int_param(f, a + "expert_used_count", std::nullopt, 1, m.n_experts);
  m.gating = MoeGating::Softmax;
  m.activation = GatedActivation::SwiGlu;
  m.normalize = true;
  const double scale = f.get_float(a + "expert_weights_scale").value_or(0.0);
  if (!std::isfinite(scale) || scale < 0.0)
    fail(f.path(), ": metadata ", a, "expert_weights_scale = ", scale, " is invalid");
  m.weights_scale = scale == 0.0 ? 1.0f : float(scale);
  return m;
}

// Each MoE layer's expert width: expert_feed_forward_length (a number or one
// per layer), else feed_forward_length / expert_used_count as llama.cpp.
std::vector<int> read_expert_ff(const gguf::GgufFile& f, const std::string& a, const ModelConfig& c,
                                const MoeSpec& moe) {
  if (moe.n_experts == 0) return std::vector<int>(size_t(c.n_layers), 0);
  const std::string key = a + "expert_feed_forward_length";
  if (f.find(key))
    return per_layer_param(f, key, c.n_layers, std::nullopt, 1, [](int) { return 1 << 20; });
  return std::vector<int>(size_t(c.n_layers), std::max(1, c.n_ff / moe.n_used));
}

bool is_hybrid(Arch a) {
  return a == Arch::Qwen35 || a == Arch::Qwen35Moe;
}

// Which layers are recurrent: attention.recurrent_layers (one flag per
// block, MTP blocks included), else every layer but each
// full_attention_interval-th (default 4 for qwen35, none elsewhere).
std::vector<bool> read_recurrent_layers(const gguf::GgufFile& f, const std::string& a,
                                        const ModelConfig& c) {
  const int L = c.n_layers;
  std::vector<bool> out(size_t(L), false);
  if (const gguf::Value* v = f.find(a + "attention.recurrent_layers"); v && v->is_array()) {
    std::vector<int64_t> flags;
    if (!v->bools.empty()) {
      flags.assign(v->bools.begin(), v->bools.end());
    } else if (auto ints = f.get_ints(a + "attention.recurrent_layers")) {
      flags = *ints;
    }
    if (int64_t(flags.size()) < L)
      fail(f.path(), ": metadata ", a, "attention.recurrent_layers has ", flags.size(),
           " entries, the model has ", L, " layers");
    for (int l = 0; l < L; ++l) out[size_t(l)] = flags[size_t(l)] != 0;
    return out;
  }
  const int every =
      int_param(f, a + "full_attention_interval", is_hybrid(c.arch) ? 4 : 0, 0, 1 << 16);
  for (int l = 0; l < L; ++l) out[size_t(l)] = every > 0 && (l + 1) % every != 0;
  return out;
}

// The kinds llama.cpp's metadata and tensors give each layer beyond full
// attention + a dense FFN (layer_spec.h lists the keys): mixture-of-experts
// FFNs, which the forward runs, and the attention kinds it does not run yet,
// recorded so that the rejection names them.
void read_layer_kinds(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  const int L = c.n_layers;
  const int64_t leading_dense = int_param(f, a + "leading_dense_block_count", 0, 0, L);
  const MoeSpec moe = read_moe(f, a);
  const std::vector<int> expert_ff = read_expert_ff(f, a, c, moe);
  const int64_t shared_kv = int_param(f, a + "attention.shared_kv_layers", 0, 0, L);
  // llama.cpp's layer reuse (llama_model::create_memory): a KV-shared window
  // layer reads layer kv_from - 2, a global one kv_from - 1, kv_from being
  // the first shared layer.
  const int64_t kv_from = L - shared_kv;
  if (shared_kv > 0 && kv_from < 2)
    fail(f.path(), ": ", a, "attention.shared_kv_layers ", shared_kv, " leaves ", kv_from,
         " layers with their own K/V (at least 2 needed)");
  const std::vector<bool> recurrent = read_recurrent_layers(f, a, c);
  // Which layers are windowed: one flag per layer, or a period n (llama.cpp's
  // set_swa_pattern: every n-th layer has full attention), by default 6 for
  // gemma3 (with a window) and 2 for gemma2 and gpt-oss.
  std::vector<bool> windowed(size_t(L), false);
  int64_t default_period = 0;
  if (c.arch == Arch::Gemma3 && c.sliding_window > 0) default_period = 6;
  if (c.arch == Arch::Gemma2 || c.arch == Arch::GptOss) default_period = 2;
  if (default_period > 0)
    for (int l = 0; l < L; ++l) windowed[size_t(l)] = l % default_period < default_period - 1;
  if (const gguf::Value* p = f.find(a + "attention.sliding_window_pattern")) {
    if (p->is_array() && !p->bools.empty()) {
      for (size_t l = 0; l < p->bools.size() && l < windowed.size(); ++l) windowed[l] = p->bools[l];
    } else if (p->is_array()) {
      const auto flags = f.get_ints(a + "attention.sliding_window_pattern");
      for (size_t l = 0; l < flags->size() && l < windowed.size(); ++l)
        windowed[l] = (*flags)[l] != 0;
    } else {
      const int64_t n = std::max<int64_t>(0, *f.get_int(a + "attention.sliding_window_pattern"));
      for (int l = 0; l < L; ++l) windowed[size_t(l)] = n == 0 || l % n < n - 1;
    }
  }
  const double scale = f.get_float(a + "attention.scale").value_or(0.0);
  // gemma2 caps its scores always (llama.cpp: attn_soft_cap, 50 unless given).
  const double softcap =
      f.get_float(a + "attn_logit_softcapping").value_or(c.arch == Arch::Gemma2 ? 50.0 : 0.0);
  if (!(softcap >= 0.0) || !std::isfinite(softcap))
    fail(f.path(), ": attn_logit_softcapping ", softcap, " is invalid");
  const int per_layer_input = int_param(f, a + "embedding_length_per_layer_input", 0, 0, 1 << 16);
  for (int l = 0; l < L; ++l) {
    LayerSpec& s = c.layers[size_t(l)];
    AttentionSpec& at = s.attention;
    const std::string p = str("blk.", l, ".");
    if (windowed[size_t(l)]) {
      at.kind = AttentionKind::Window;
      at.window = c.sliding_window;
    }
    if (l >= kv_from) {
      at.kind = AttentionKind::SharedKv;
      at.kv_source = int(kv_from - (windowed[size_t(l)] ? 2 : 1));
      if (windowed[size_t(l)] != windowed[size_t(at.kv_source)])
        fail(f.path(), ": layer ", l, " reads the K/V of layer ", at.kv_source,
             (windowed[size_t(l)] ? ", which has no sliding window"
                                  : ", which has a sliding window"),
             " (attention.shared_kv_layers with this sliding_window_pattern)");
    }
    if (recurrent[size_t(l)]) at.kind = AttentionKind::Recurrent;
    at.scale = float(scale);
    at.softcap = float(softcap);
    at.sink = f.find_tensor(p + "attn_sinks.weight") != nullptr;
    // gemma4's attention_k_eq_v; elsewhere a missing attn_v is a broken file.
    at.v_from_k = c.arch == Arch::Gemma4 && at.kind != AttentionKind::SharedKv &&
                  f.find_tensor(p + "attn_k.weight") != nullptr &&
                  f.find_tensor(p + "attn_v.weight") == nullptr;
    // gemma4: experts where a layer has a router, beside its dense FFN.
    const bool beside_dense = c.arch == Arch::Gemma4;
    if (moe.n_experts > 0 && l >= leading_dense &&
        (!beside_dense || f.find_tensor(p + "ffn_gate_inp.weight") != nullptr)) {
      s.ffn.kind = beside_dense ? FfnKind::MoePlusDense : FfnKind::Moe;
      if (!beside_dense) s.ffn.n_ff = 0;
      s.ffn.moe = moe;
      s.ffn.moe.n_ff = expert_ff[size_t(l)];
    }
    s.per_layer_input = per_layer_input;
    s.output_scale = f.find_tensor(p + "layer_output_scale.weight") != nullptr;
  }
}

// gemma4's window layers (llama.cpp's src/models/gemma4.cpp and
// llama_hparams: key_length_swa, rope.dimension_count_swa): their head dims
// and rotated dims, no frequency factors (only the global layers'
// proportional RoPE has them); and what every gemma4 layer does beyond
// gemma3's: a score scale of 1 and weightless RMSNorm of V.
void read_gemma4_layers(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  const int k_swa = int_param(f, a + "attention.key_length_swa", c.head_dim, 2, 1024);
  const int v_swa = int_param(f, a + "attention.value_length_swa", k_swa, 1, 1024);
  if (v_swa != k_swa)
    fail(f.path(), ": attention.value_length_swa ", v_swa, " differs from key_length_swa ", k_swa,
         " (not supported)");
  const int rot_swa =
      int_param(f, a + "rope.dimension_count_swa", std::min(c.n_rot, k_swa), 2, k_swa);
  if (rot_swa % 2 != 0) fail(f.path(), ": rope.dimension_count_swa ", rot_swa, " is odd");
  for (LayerSpec& s : c.layers) {
    AttentionSpec& at = s.attention;
    at.scale = 1.0f;
    at.v_norm = true;
    if (at.window > 0) {
      at.k_dim = at.v_dim = k_swa;
      at.rope.n_rot = rot_swa;
      at.rope.freq_factors = false;
    }
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const AttentionSpec& at = c.layers[size_t(l)].attention;
    if (at.kind != AttentionKind::SharedKv) continue;
    const AttentionSpec& src = c.layers[size_t(at.kv_source)].attention;
    if (src.n_kv_heads != at.n_kv_heads || src.k_dim != at.k_dim)
      fail(f.path(), ": layer ", l, " reads the K/V of layer ", at.kv_source, ", whose heads (",
           src.n_kv_heads, " x ", src.k_dim, ") are not its own (", at.n_kv_heads, " x ", at.k_dim,
           ")");
  }
}

// What gemma2, gemma3, gemma4 and gpt-oss compute beyond the llama layer,
// as llama.cpp's src/models/gemma2.cpp, gemma3.cpp, gemma4.cpp and
// openai-moe.cpp do: window layers' own RoPE, norms, activations, biases,
// scales and the MoE variants.
void read_arch_specifics(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  const bool gemma = c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3 || c.arch == Arch::Gemma4;
  if (!gemma && c.arch != Arch::GptOss) return;
  // Window layers rotate with rope.freq_base_swa (gemma3/4: 10000 unless
  // given, unscaled; gemma2 and gpt-oss: the model's base and scaling
  // unless given).
  const bool own_swa_rope = c.arch == Arch::Gemma3 || c.arch == Arch::Gemma4;
  const double base_swa =
      f.get_float(a + "rope.freq_base_swa").value_or(own_swa_rope ? 10000.0 : double(c.rope_base));
  if (!(base_swa > 1.0) || !std::isfinite(base_swa))
    fail(f.path(), ": rope.freq_base_swa ", base_swa, " is not a valid base");
  // Gemma 2 27B (46 layers) and Gemma 3 27B (62) scale queries by
  // 1/sqrt(n_embd / n_heads), the others by 1/sqrt(head_dim) (llama.cpp
  // keys it on the layer count).
  const bool by_width =
      (c.arch == Arch::Gemma2 && c.n_layers == 46) || (c.arch == Arch::Gemma3 && c.n_layers == 62);
  const float gemma_scale = by_width ? 1.0f / std::sqrt(float(c.n_embd / c.n_heads))
                                     : 1.0f / std::sqrt(float(c.head_dim));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerSpec& s = c.layers[size_t(l)];
    AttentionSpec& at = s.attention;
    const std::string p = str("blk.", l, ".");
    if (at.window > 0) {  // window layers, and KV-shared layers reading one
      at.rope.base = float(base_swa);
      if (own_swa_rope) at.rope.freq_scale = 1.0f;
    }
    at.qkv_bias = f.find_tensor(p + "attn_q.bias") != nullptr;
    at.out_bias = f.find_tensor(p + "attn_output.bias") != nullptr;
    if (gemma) {
      at.qk_norm = c.arch != Arch::Gemma2;
      at.post_norm = true;
      at.scale = gemma_scale;
      s.ffn.activation = GatedActivation::GeGlu;
      s.ffn.post_norm = true;
      s.ffn.moe.activation = GatedActivation::GeGlu;  // gemma4's experts
    } else if (s.ffn.kind == FfnKind::Moe) {
      MoeSpec& m = s.ffn.moe;
      m.gating = MoeGating::SoftmaxChosen;
      m.activation = GatedActivation::SwiGluOai;
      m.normalize = false;
      m.router_bias = f.find_tensor(p + "ffn_gate_inp.bias") != nullptr;
      m.expert_bias = f.find_tensor(p + "ffn_gate_exps.bias") != nullptr;
    }
  }
  if (c.arch == Arch::Gemma4) read_gemma4_layers(f, a, c);
  if (gemma) {
    c.qk_norm = c.arch != Arch::Gemma2;
    c.embed_scale = std::sqrt(float(c.n_embd));
    // gemma2 caps its logits always (llama.cpp: 30 unless given).
    const double cap =
        f.get_float(a + "final_logit_softcapping").value_or(c.arch == Arch::Gemma2 ? 30.0 : 0.0);
    if (!(cap >= 0.0) || !std::isfinite(cap))
      fail(f.path(), ": final_logit_softcapping ", cap, " is invalid");
    c.final_softcap = float(cap);
  }
}

// A recurrent layer's geometry (ssm.*), checked as llama.cpp's delta-rule
// kernel needs it: value heads as wide as the key heads, a whole number of
// value heads per key head.
AttentionSpec read_recurrent_spec(const gguf::GgufFile& f, const std::string& a) {
  AttentionSpec at;
  at.kind = AttentionKind::Recurrent;
  at.conv_kernel = int_param(f, a + "ssm.conv_kernel", std::nullopt, 2, 64);
  at.state_size = int_param(f, a + "ssm.state_size", std::nullopt, 1, 1024);
  at.n_groups = int_param(f, a + "ssm.group_count", std::nullopt, 1, 4096);
  at.n_v_heads = int_param(f, a + "ssm.time_step_rank", std::nullopt, 1, 4096);
  at.inner_size = int_param(f, a + "ssm.inner_size", std::nullopt, 1, 1 << 20);
  if (at.inner_size != at.n_v_heads * at.state_size)
    fail(f.path(), ": ssm.inner_size ", at.inner_size, " is not ssm.time_step_rank ", at.n_v_heads,
         " x ssm.state_size ", at.state_size, " (value heads must be as wide as key heads)");
  if (at.n_v_heads % at.n_groups != 0)
    fail(f.path(), ": ssm.time_step_rank ", at.n_v_heads, " is not a multiple of ssm.group_count ",
         at.n_groups);
  return at;
}

// qwen35 / qwen35moe as llama.cpp's src/models/qwen35*.cpp build them: the
// recurrent layers' geometry; full layers with QK norm, the output gate
// and interleaved M-RoPE (rope.dimension_sections); the gated shared expert.
void read_hybrid(const gguf::GgufFile& f, const std::string& a, ModelConfig& c) {
  if (!is_hybrid(c.arch)) return;
  const AttentionSpec recurrent = read_recurrent_spec(f, a);
  std::array<int, 4> sections{};
  if (const auto secs = f.get_ints(a + "rope.dimension_sections")) {
    int sum = 0;
    for (size_t i = 0; i < secs->size() && i < 4; ++i) {
      if ((*secs)[i] < 0 || (*secs)[i] > 4096)
        fail(f.path(), ": rope.dimension_sections[", i, "] = ", (*secs)[i], " is invalid");
      sections[i] = int((*secs)[i]);
      sum += sections[i];
    }
    if (sum == 0 || 2 * sum > c.head_dim)
      fail(f.path(), ": rope.dimension_sections sum to ", sum, " pairs for heads of ", c.head_dim);
  }
  const double shared_ff = double(f.get_int(a + "expert_shared_feed_forward_length").value_or(0));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerSpec& s = c.layers[size_t(l)];
    const std::string p = str("blk.", l, ".");
    if (s.attention.kind == AttentionKind::Recurrent) {
      s.attention = recurrent;
    } else {
      s.attention.qk_norm = true;
      s.attention.output_gate = true;
      s.attention.rope.sections = sections;
      s.attention.rope.interleaved = true;
    }
    if (s.ffn.kind == FfnKind::Moe && f.find_tensor(p + "ffn_up_shexp.weight")) {
      s.ffn.moe.n_ff_shared = shared_ff > 0 ? int(shared_ff) : std::max(c.n_ff, 1);
      s.ffn.moe.shared_gate = f.find_tensor(p + "ffn_gate_inp_shexp.weight") != nullptr;
    }
  }
  c.qk_norm = true;
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  c.arch_name = f.require_string("general.architecture");
  c.arch = parse_arch(f, c.arch_name);
  c.name = f.get_string("general.name").value_or("");
  const std::string a = c.arch_name + ".";

  c.n_embd = int_param(f, a + "embedding_length", std::nullopt, 1, 1 << 17);
  c.n_layers = int_param(f, a + "block_count", std::nullopt, 1, 4096);
  // MTP blocks (a draft head) follow the trunk; the forward does not run them.
  if (is_hybrid(c.arch))
    c.n_layers -= int_param(f, a + "nextn_predict_layers", 0, 0, c.n_layers - 1);
  std::vector<int> heads, kv_heads;
  read_attention_dims(f, a, c, heads, kv_heads);
  const std::vector<int> ff = per_layer_param(f, a + "feed_forward_length", c.n_layers,
                                              std::nullopt, 1, [](int) { return 1 << 20; });
  c.n_ff = max_of(ff);
  c.n_ctx_train = int_param(f, a + "context_length", std::nullopt, 1, 1 << 26);
  read_rope(f, a, c);

  const double eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(-1.0);
  if (eps < 0.0) fail(f.path(), ": missing metadata key '", a, "attention.layer_norm_rms_epsilon'");
  if (!(eps > 0.0 && eps < 1.0)) fail(f.path(), ": layer_norm_rms_epsilon ", eps, " is invalid");
  c.rms_eps = float(eps);
  // gemma2's window is 4096 unless given (llama.cpp's default).
  c.sliding_window =
      int_param(f, a + "attention.sliding_window", c.arch == Arch::Gemma2 ? 4096 : 0, 0, 1 << 26);
  read_vocab(f, a, c);

  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = c.arch == Arch::Qwen2 || ((c.arch == Arch::Llama || c.arch == Arch::GptOss) &&
                                         f.find_tensor("blk.0.attn_q.bias") != nullptr);
  c.qk_norm = c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe;

  // Every layer: full attention and a dense SwiGLU FFN of its geometry.
  c.layers.resize(size_t(c.n_layers));
  const bool freq_factors = f.find_tensor("rope_freqs.weight") != nullptr;
  for (int l = 0; l < c.n_layers; ++l) {
    LayerSpec& s = c.layers[size_t(l)];
    s.attention.n_heads = heads[size_t(l)];
    s.attention.n_kv_heads = kv_heads[size_t(l)];
    s.attention.k_dim = s.attention.v_dim = c.head_dim;
    s.attention.rope = c.rope_spec(freq_factors);
    s.attention.qkv_bias = c.qkv_bias;
    s.attention.qk_norm = c.qk_norm;
    s.ffn.n_ff = ff[size_t(l)];
  }
  read_layer_kinds(f, a, c);
  read_arch_specifics(f, a, c);
  read_hybrid(f, a, c);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string why = unsupported_reason(c.layers[size_t(l)], l);
    if (!why.empty()) fail(f.path(), ": ", why);
  }
  return c;
}

RopeSpec ModelConfig::rope_spec(bool freq_factors) const {
  RopeSpec r;
  r.n_rot = n_rot;
  r.base = rope_base;
  r.style = rope_style;
  r.freq_scale = rope_freq_scale;
  r.freq_factors = freq_factors;
  r.attn_factor = rope_attn_factor;
  if (rope_scaling == RopeScalingType::Yarn) {
    r.ext_factor = 1.0f;
    r.orig_ctx = rope_orig_ctx > 0 ? rope_orig_ctx : n_ctx_train;
  }
  return r;
}

namespace {
template <class Fn>
int widest(const std::vector<LayerSpec>& layers, Fn fn) {
  int w = 0;
  for (const LayerSpec& s : layers) w = std::max(w, fn(s));
  return w;
}
}  // namespace

int ModelConfig::max_q_width() const {
  return widest(layers, [](const LayerSpec& s) { return s.attention.q_width(); });
}
int ModelConfig::max_kv_width() const {
  return widest(layers, [](const LayerSpec& s) {
    return std::max(s.attention.k_width(), s.attention.v_width());
  });
}
int ModelConfig::max_out_width() const {
  return widest(layers, [](const LayerSpec& s) { return s.attention.out_width(); });
}
int ModelConfig::max_ff() const {
  return widest(layers, [](const LayerSpec& s) { return s.ffn.n_ff; });
}
int ModelConfig::max_conv_channels() const {
  return widest(layers, [](const LayerSpec& s) {
    return s.attention.kind == AttentionKind::Recurrent ? s.attention.conv_channels() : 0;
  });
}
int ModelConfig::max_recurrent_v() const {
  return widest(layers, [](const LayerSpec& s) {
    return s.attention.kind == AttentionKind::Recurrent ? s.attention.inner_size : 0;
  });
}
int ModelConfig::n_recurrent() const {
  return int(std::count_if(layers.begin(), layers.end(), [](const LayerSpec& s) {
    return s.attention.kind == AttentionKind::Recurrent;
  }));
}

int ModelConfig::max_rope_pairs() const {
  return widest(layers, [](const LayerSpec& s) { return s.attention.rope.n_rot / 2; });
}

std::string ModelConfig::describe() const {
  std::ostringstream os;
  os << arch_name << " " << n_layers << "L d" << n_embd << " heads " << n_heads << "/" << n_kv_heads
     << "x" << head_dim << " ff" << n_ff << " vocab " << n_vocab << " ctx " << n_ctx_train
     << " rope " << (rope_style == RopeStyle::Neox ? "neox" : "normal") << " base " << rope_base;
  if (n_rot != head_dim) os << " n_rot " << n_rot;
  if (rope_scaling == RopeScalingType::Linear) os << " linear-scale " << 1.0f / rope_freq_scale;
  if (rope_scaling == RopeScalingType::Yarn) os << " yarn " << 1.0f / rope_freq_scale;
  if (sliding_window > 0) os << " swa " << sliding_window;
  if (qkv_bias) os << " qkv-bias";
  if (qk_norm) os << " qk-norm";
  if (tied_output) os << " tied";
  for (const LayerSpec& s : layers) {
    if (s.ffn.kind == FfnKind::Dense) continue;
    os << " experts " << s.ffn.moe.n_used << "/" << s.ffn.moe.n_experts << "x" << s.ffn.moe.n_ff;
    break;
  }
  return os.str();
}

}  // namespace tkv::model
