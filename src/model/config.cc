#include "model/config.h"

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
  }
  return "?";
}

// llama.cpp's llama_model_rope_type(): LLAMA -> NORM, QWEN2/QWEN3 -> NEOX.
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

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::GgufFile& f) {
  ModelConfig c;
  c.arch_name = f.require_string("general.architecture");
  if (c.arch_name == "llama") {
    c.arch = Arch::Llama;
  } else if (c.arch_name == "qwen2") {
    c.arch = Arch::Qwen2;
  } else if (c.arch_name == "qwen3") {
    c.arch = Arch::Qwen3;
  } else {
    fail(f.path(), ": unsupported architecture '", gguf::escape(c.arch_name),
         "' (supported: llama, qwen2, qwen3)");
  }
  c.name = f.get_string("general.name").value_or("");
  const std::string a = c.arch_name + ".";

  c.n_embd = int_param(f, a + "embedding_length", std::nullopt, 1, 1 << 17);
  c.n_layers = int_param(f, a + "block_count", std::nullopt, 1, 4096);
  c.n_heads = int_param(f, a + "attention.head_count", std::nullopt, 1, 4096);
  c.n_kv_heads = int_param(f, a + "attention.head_count_kv", c.n_heads, 1, c.n_heads);
  if (c.n_heads % c.n_kv_heads != 0) {
    fail(f.path(), ": attention.head_count ", c.n_heads, " is not a multiple of head_count_kv ",
         c.n_kv_heads);
  }
  std::optional<int64_t> default_head_dim;
  if (c.n_embd % c.n_heads == 0) default_head_dim = c.n_embd / c.n_heads;
  c.head_dim = int_param(f, a + "attention.key_length", default_head_dim, 2, 1024);
  const int value_length = int_param(f, a + "attention.value_length", c.head_dim, 1, 1024);
  if (value_length != c.head_dim) {
    fail(f.path(), ": attention.value_length ", value_length, " differs from key_length ",
         c.head_dim, " (not supported)");
  }
  c.n_ff = int_param(f, a + "feed_forward_length", std::nullopt, 1, 1 << 20);
  c.n_ctx_train = int_param(f, a + "context_length", std::nullopt, 1, 1 << 26);

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
  } else if (scaling != "linear") {
    fail(f.path(), ": rope scaling type '", gguf::escape(scaling),
         "' is not supported (none, linear)");
  }
  if (factor != 0.0 && factor != 1.0) {
    if (!(factor > 0.0) || !std::isfinite(factor)) {
      fail(f.path(), ": rope scaling factor ", factor, " is not positive");
    }
    c.rope_scaling = RopeScalingType::Linear;
    c.rope_freq_scale = float(1.0 / factor);
  }
  c.rope_orig_ctx = int_param(f, a + "rope.scaling.original_context_length", 0, 0, 1 << 26);

  const double eps = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(-1.0);
  if (eps < 0.0) fail(f.path(), ": missing metadata key '", a, "attention.layer_norm_rms_epsilon'");
  if (!(eps > 0.0 && eps < 1.0)) fail(f.path(), ": layer_norm_rms_epsilon ", eps, " is invalid");
  c.rms_eps = float(eps);
  c.sliding_window = int_param(f, a + "attention.sliding_window", 0, 0, 1 << 26);

  // Vocabulary size: the token list is the authority (llama.cpp requires the
  // embedding to match it); without one, the embedding's row count.
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

  c.tied_output = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = c.arch == Arch::Qwen2 ||
               (c.arch == Arch::Llama && f.find_tensor("blk.0.attn_q.bias") != nullptr);
  c.qk_norm = c.arch == Arch::Qwen3;
  return c;
}

std::string ModelConfig::describe() const {
  std::ostringstream os;
  os << arch_name << " " << n_layers << "L d" << n_embd << " heads " << n_heads << "/" << n_kv_heads
     << "x" << head_dim << " ff" << n_ff << " vocab " << n_vocab << " ctx " << n_ctx_train
     << " rope " << (rope_style == RopeStyle::Neox ? "neox" : "normal") << " base " << rope_base;
  if (n_rot != head_dim) os << " n_rot " << n_rot;
  if (rope_scaling == RopeScalingType::Linear) os << " linear-scale " << 1.0f / rope_freq_scale;
  if (sliding_window > 0) os << " swa " << sliding_window;
  if (qkv_bias) os << " qkv-bias";
  if (qk_norm) os << " qk-norm";
  if (tied_output) os << " tied";
  return os.str();
}

}  // namespace tkv::model
