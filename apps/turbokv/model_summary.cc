#include "model_summary.h"

#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/sys_info.h"
#include "gguf/gguf.h"
#include "kv/codec/codec.h"
#include "kv/kv_config.h"
#include "model/config.h"
#include "model/weights.h"

namespace tkv::cli {

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += " x ";
    s += std::to_string(shape[i]);
  }
  return s;
}

std::string params_string(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.2fB", double(n) / 1e9);
  else if (n >= 1000000ull)
    std::snprintf(buf, sizeof buf, "%.2fM", double(n) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1fK", double(n) / 1e3);
  return buf;
}

// Bytes one token costs in one layer's KV pages (K and V of every KV head),
// from the codecs' page layouts at the default page size.
double kv_bytes_per_token_layer(const kv::CodecSpec& k, const kv::CodecSpec& v, int k_dim,
                                int v_dim, int n_kv_heads) {
  const kv::KvConfig defaults;
  auto rotation = std::make_shared<const kv::Rotation>(k_dim, kv::rotation_seed(defaults, 0));
  auto v_rotation =
      v_dim == k_dim ? rotation
                     : std::make_shared<const kv::Rotation>(v_dim, kv::rotation_seed(defaults, 0));
  const auto kc = kv::make_codec(k, k_dim, rotation);
  const auto vc = kv::make_codec(v, v_dim, v_rotation);
  return (kc->bytes_per_vector(defaults.page_tokens) + vc->bytes_per_vector(defaults.page_tokens)) *
         n_kv_heads;
}

// Of every layer that keeps K/V of its own (not recurrent, not reading
// another layer's), each with its own geometry.
double kv_bytes_per_token(const model::ModelConfig& c, const kv::CodecSpec& k,
                          const kv::CodecSpec& v) {
  double total = 0;
  for (const model::LayerSpec& s : c.layers) {
    const model::AttentionSpec& at = s.attention;
    if (at.kind == model::AttentionKind::Recurrent || at.kind == model::AttentionKind::SharedKv)
      continue;
    total += kv_bytes_per_token_layer(k, v, at.k_dim, at.v_dim, at.n_kv_heads);
  }
  return total;
}

}  // namespace

std::string experts_line(const gguf::GgufFile& file) {
  const model::ActiveWeights a = model::active_weights(file);
  if (a.n_experts == 0) return "";
  return str("  experts: ", a.n_used, " of ", a.n_experts, " per token; active per token ",
             params_string(a.params), " of ", params_string(a.total_params), " parameters, ",
             format_bytes(a.bytes), " of ", format_bytes(a.total_bytes),
             " read at the file's types\n");
}

std::string describe_model(const gguf::GgufFile& file) {
  // Vocabulary files from llama.cpp carry a full model's metadata but no tensors.
  if (!file.find_tensor("token_embd.weight"))
    fail("no token_embd.weight tensor: a vocabulary or session file, not a model");
  const model::ModelConfig c = model::ModelConfig::from_gguf(file);
  uint64_t n_params = 0, n_bytes = 0;
  for (const auto& t : file.tensors()) {
    n_params += uint64_t(t.n_elements());
    n_bytes += t.n_bytes;
  }
  std::string out = "model:\n";
  out += str("  ", c.describe(), "\n");
  const bool show_name = !c.name.empty() && c.name != c.arch_name;
  out += str("  architecture ", c.arch_name, show_name ? " (" + c.name + ")" : "", ", ",
             params_string(n_params), " parameters, ", format_bytes(n_bytes), " of tensors\n");
  out += experts_line(file);
  out += str("  layers ", c.n_layers, ", embedding ", c.n_embd, ", heads ", c.n_heads, " (KV ",
             c.n_kv_heads, ", head dim ", c.head_dim, "), feed-forward ", c.n_ff, ", vocabulary ",
             c.n_vocab, ", trained context ", c.n_ctx_train, "\n");
  out += str("  rope base ", c.rope_base, " over ", c.n_rot, " dims",
             c.rope_style == model::RopeStyle::Neox ? " (neox)" : "", ", rms eps ", c.rms_eps,
             c.tied_output ? ", output tied to the embedding" : "", c.qkv_bias ? ", QKV bias" : "",
             c.qk_norm ? ", QK norm" : "",
             c.sliding_window ? str(", sliding window ", c.sliding_window) : std::string(), "\n");

  out += "  per layer (blk.0):\n";
  const std::string prefix = "blk.0.";
  for (const auto& t : file.tensors()) {
    if (t.name.rfind(prefix, 0) != 0) continue;
    char line[160];
    std::snprintf(line, sizeof line, "    %-22s %-6s %s\n", t.name.substr(prefix.size()).c_str(),
                  std::string(dtype_name(t.type)).c_str(), shape_string(t.shape).c_str());
    out += line;
  }

  int kv_layers = 0;
  for (const model::LayerSpec& s : c.layers)
    kv_layers += s.attention.kind != model::AttentionKind::Recurrent &&
                 s.attention.kind != model::AttentionKind::SharedKv;
  out += str("  KV cache per token (the ", kv_layers, " of ", c.n_layers,
             " layers with K/V of their own; codec pages only, policies' f16 tokens not "
             "counted):\n");
  const double f16_bytes = kv_bytes_per_token(c, *kv::parse_codec("f16"), *kv::parse_codec("f16"));
  const std::pair<const char*, const char*> configs[] = {
      {"f16", "f16"}, {"q8_0", "q8_0"}, {"tq4", "tq4"}, {"tq4", "tq2"}};
  const char* labels[] = {"f16", "q8_0", "k4v4", "k4v2"};
  for (size_t i = 0; i < std::size(configs); ++i) {
    std::string line;
    try {
      const double total = kv_bytes_per_token(c, *kv::parse_codec(configs[i].first),
                                              *kv::parse_codec(configs[i].second));
      char buf[200];
      std::snprintf(buf, sizeof buf, "    %-5s %10.0f bytes/token, %s at %d tokens", labels[i],
                    total, format_bytes(uint64_t(total * c.n_ctx_train)).c_str(), c.n_ctx_train);
      line = buf;
      if (i > 0) {
        std::snprintf(buf, sizeof buf, ", %.2fx less than f16", f16_bytes / total);
        line += buf;
      }
      line += "\n";
    } catch (const Error& e) {
      line = str("    ", labels[i], "   not available: ", e.what(), "\n");
    }
    out += line;
  }
  return out;
}

}  // namespace tkv::cli
