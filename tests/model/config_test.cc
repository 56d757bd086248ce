// ModelConfig from GGUF metadata: every field, defaults, and clear errors.
#include "model/config.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "gguf/gguf.h"

namespace tkv::model {
namespace {

// Metadata of a small llama model (no tensors: from_gguf reads keys only,
// plus the presence of output.weight / attn_q.bias, which we add on demand).
gguf::GgufWriter llama_writer(const std::string& arch = "llama") {
  gguf::GgufWriter w;
  const std::string a = arch + ".";
  w.set_string("general.architecture", arch);
  w.set_string("general.name", "unit");
  w.set_u32(a + "embedding_length", 512);
  w.set_u32(a + "block_count", 6);
  w.set_u32(a + "attention.head_count", 4);
  w.set_u32(a + "attention.head_count_kv", 2);
  w.set_u32(a + "feed_forward_length", 1536);
  w.set_u32(a + "context_length", 4096);
  w.set_f32(a + "rope.freq_base", 100000.0f);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set("tokenizer.ggml.tokens", gguf::Value::make_strings(std::vector<std::string>(300, "x")));
  return w;
}

ModelConfig parse(const gguf::GgufWriter& w) {
  static std::vector<uint8_t> bytes;  // parse() needs the bytes to outlive the file
  bytes = w.to_bytes();
  const auto f = gguf::GgufFile::parse(bytes.data(), bytes.size(), "unit.gguf");
  return ModelConfig::from_gguf(f);
}

std::string error_of(const gguf::GgufWriter& w) {
  try {
    parse(w);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, LlamaFieldsAndDefaults) {
  const ModelConfig c = parse(llama_writer());
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.name, "unit");
  EXPECT_EQ(c.n_embd, 512);
  EXPECT_EQ(c.n_layers, 6);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 128);  // default: embedding_length / head_count
  EXPECT_EQ(c.n_rot, 128);     // default: head_dim
  EXPECT_EQ(c.n_ff, 1536);
  EXPECT_EQ(c.n_ctx_train, 4096);
  EXPECT_EQ(c.n_vocab, 300);  // from the token list
  EXPECT_FLOAT_EQ(c.rope_base, 100000.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_style, RopeStyle::Normal);
  EXPECT_EQ(c.rope_scaling, RopeScalingType::None);
  EXPECT_TRUE(c.tied_output);  // no output.weight
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_NE(c.describe().find("llama 6L d512"), std::string::npos) << c.describe();
}

TEST(ModelConfig, ExplicitHeadDimRopeDimsAndSlidingWindow) {
  auto w = llama_writer();
  w.set_u32("llama.attention.key_length", 64);
  w.set_u32("llama.attention.value_length", 64);
  w.set_u32("llama.rope.dimension_count", 32);
  w.set_u32("llama.attention.sliding_window", 4096);
  w.set_f32("llama.rope.scaling.factor", 4.0f);
  w.set_string("llama.rope.scaling.type", "linear");
  w.set_u32("llama.rope.scaling.original_context_length", 1024);
  const ModelConfig c = parse(w);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.q_dim(), 256);
  EXPECT_EQ(c.kv_dim(), 128);
  EXPECT_EQ(c.n_rot, 32);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.rope_scaling, RopeScalingType::Linear);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.rope_orig_ctx, 1024);
}

TEST(ModelConfig, QwenArchitectures) {
  const ModelConfig q2 = parse(llama_writer("qwen2"));
  EXPECT_EQ(q2.arch, Arch::Qwen2);
  EXPECT_EQ(q2.rope_style, RopeStyle::Neox);
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.qk_norm);
  const ModelConfig q3 = parse(llama_writer("qwen3"));
  EXPECT_EQ(q3.arch, Arch::Qwen3);
  EXPECT_EQ(q3.rope_style, RopeStyle::Neox);
  EXPECT_FALSE(q3.qkv_bias);
  EXPECT_TRUE(q3.qk_norm);
}

TEST(ModelConfig, SeparateOutputAndLlamaBiasFromTensors) {
  auto w = llama_writer();
  const float zeros[512] = {};
  w.add_tensor("output.weight", DType::F32, {512, 1}, zeros, sizeof zeros);
  w.add_tensor("blk.0.attn_q.bias", DType::F32, {512}, zeros, sizeof zeros);
  const ModelConfig c = parse(w);
  EXPECT_FALSE(c.tied_output);
  EXPECT_TRUE(c.qkv_bias);
}

TEST(ModelConfig, VocabSizeWithoutTokenList) {
  gguf::GgufWriter plain;  // no token list: the vocabulary size comes from llama.vocab_size
  plain.set_string("general.architecture", "llama");
  for (const char* k :
       {"embedding_length", "block_count", "feed_forward_length", "context_length"}) {
    plain.set_u32(std::string("llama.") + k, 64);
  }
  plain.set_u32("llama.attention.head_count", 4);
  plain.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  plain.set_u32("llama.vocab_size", 777);
  EXPECT_EQ(parse(plain).n_vocab, 777);
  EXPECT_EQ(parse(plain).n_kv_heads, 4);  // default: head_count
}

TEST(ModelConfig, UnknownArchitectureIsNamed) {
  auto w = llama_writer();
  w.set_string("general.architecture", "gpt2");
  const std::string e = error_of(w);
  EXPECT_NE(e.find("unsupported architecture 'gpt2'"), std::string::npos) << e;
  EXPECT_NE(e.find("unit.gguf"), std::string::npos) << e;
}

TEST(ModelConfig, MissingKeyIsNamed) {
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.embedding_length", 64);
  const std::string e = error_of(w);
  EXPECT_NE(e.find("llama.block_count"), std::string::npos) << e;
}

TEST(ModelConfig, InconsistentValuesAreRejected) {
  struct Case {
    const char* key;
    uint32_t value;
    const char* expect;
  };
  const Case cases[] = {
      {"llama.attention.head_count_kv", 3, "not a multiple"},
      {"llama.attention.head_count_kv", 8, "out of range"},
      {"llama.block_count", 0, "out of range"},
      {"llama.embedding_length", 1u << 30, "out of range"},
      {"llama.rope.dimension_count", 7, "odd"},
      {"llama.rope.dimension_count", 256, "out of range"},
  };
  for (const auto& c : cases) {
    auto w = llama_writer();
    w.set_u32(c.key, c.value);
    const std::string e = error_of(w);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.key << "=" << c.value << ": " << e;
  }
  auto w = llama_writer();
  w.set_u32("llama.attention.key_length", 64);
  w.set_u32("llama.attention.value_length", 32);
  EXPECT_NE(error_of(w).find("value_length"), std::string::npos);
  auto y = llama_writer();
  y.set_string("llama.rope.scaling.type", "longrope");
  y.set_f32("llama.rope.scaling.factor", 4.0f);
  EXPECT_NE(error_of(y).find("rope scaling type 'longrope' is not supported (none, linear, yarn)"),
            std::string::npos)
      << error_of(y);
  auto s = llama_writer();
  s.set_string("llama.block_count", "six");  // wrong value type
  EXPECT_NE(error_of(s).find("block_count"), std::string::npos) << error_of(s);
}

TEST(ModelConfig, EveryLayerIsFullAttentionAndADenseFfnOfTheModelsGeometry) {
  auto w = llama_writer("qwen3");
  w.set_u32("qwen3.rope.dimension_count", 64);
  const ModelConfig c = parse(w);
  ASSERT_EQ(c.layers.size(), 6u);
  for (const LayerSpec& s : c.layers) {
    EXPECT_EQ(s.attention.kind, AttentionKind::Full);
    EXPECT_EQ(s.attention.n_heads, 4);
    EXPECT_EQ(s.attention.n_kv_heads, 2);
    EXPECT_EQ(s.attention.k_dim, 128);
    EXPECT_EQ(s.attention.v_dim, 128);
    EXPECT_EQ(s.attention.rope, c.rope_spec(false));
    EXPECT_EQ(s.attention.rope.n_rot, 64);
    EXPECT_EQ(s.attention.rope.style, RopeStyle::Neox);
    EXPECT_TRUE(s.attention.qk_norm);
    EXPECT_FALSE(s.attention.qkv_bias || s.attention.sink || s.attention.v_from_k);
    EXPECT_EQ(s.ffn.kind, FfnKind::Dense);
    EXPECT_EQ(s.ffn.n_ff, 1536);
    EXPECT_EQ(s.per_layer_input, 0);
    EXPECT_EQ(unsupported_reason(s, 0), "");
  }
  EXPECT_EQ(c.max_q_width(), 512);
  EXPECT_EQ(c.max_kv_width(), 256);
  EXPECT_EQ(c.max_rope_pairs(), 32);
}

TEST(ModelConfig, PerLayerHeadCountsAndFfnWidthsFromArrays) {
  auto w = llama_writer();
  w.set("llama.attention.head_count_kv", gguf::Value::make_i32s({2, 1, 4, 2, 2, 1}));
  w.set("llama.feed_forward_length", gguf::Value::make_i32s({1536, 1024, 1536, 2048, 1536, 1536}));
  const ModelConfig c = parse(w);
  EXPECT_EQ(c.layers[1].attention.n_kv_heads, 1);
  EXPECT_EQ(c.layers[2].attention.n_kv_heads, 4);
  EXPECT_EQ(c.layers[3].ffn.n_ff, 2048);
  EXPECT_EQ(c.layers[1].ffn.n_ff, 1024);
  EXPECT_EQ(c.n_kv_heads, 4);  // the widest layer's
  EXPECT_EQ(c.n_ff, 2048);
  EXPECT_EQ(c.max_kv_width(), 4 * 128);
  EXPECT_EQ(c.max_ff(), 2048);

  auto n = llama_writer();
  n.set("llama.attention.head_count_kv", gguf::Value::make_i32s({2, 2}));
  EXPECT_NE(error_of(n).find("head_count_kv has 2 entries, the model has 6 layers"),
            std::string::npos)
      << error_of(n);
  auto g = llama_writer();
  g.set("llama.attention.head_count_kv", gguf::Value::make_i32s({2, 3, 2, 2, 2, 2}));
  EXPECT_NE(error_of(g).find("not a multiple of head_count_kv 3 (layer 1)"), std::string::npos)
      << error_of(g);
  auto r = llama_writer();
  r.set("llama.attention.head_count_kv", gguf::Value::make_i32s({2, 2, 2, 8, 2, 2}));
  EXPECT_NE(error_of(r).find("head_count_kv[3] = 8 is out of range [1, 4]"), std::string::npos)
      << error_of(r);
}

// Kinds the forward does not run yet, and bad values, are refused at load, naming the layer,
// the kind and the metadata that asked for it.
TEST(ModelConfig, UnsupportedLayerKindsAreNamed) {
  struct Case {
    const char* key;
    gguf::Value value;
    const char* expect;
  };
  const Case cases[] = {
      {"llama.attention.sliding_window_pattern", gguf::Value::make_u32(6),
       "layer 0: sliding-window attention without a window size (attention.sliding_window is "
       "missing or 0)"},
      {"llama.attention.shared_kv_layers", gguf::Value::make_u32(5),
       "attention.shared_kv_layers 5 leaves 1 layers with their own K/V (at least 2 needed)"},
      {"llama.full_attention_interval", gguf::Value::make_u32(4),
       "layer 0: recurrent (Gated DeltaNet) state (full_attention_interval)"},
      {"llama.attn_logit_softcapping", gguf::Value::make_f32(-1.0f),
       "attn_logit_softcapping -1 is invalid"},
  };
  for (const auto& c : cases) {
    auto w = llama_writer();
    w.set(c.key, c.value);
    const std::string e = error_of(w);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.key << ": " << e;
    EXPECT_EQ(e.rfind("unit.gguf: ", 0), 0u) << e;
  }
}

// An attention soft-cap (gemma2's) applies to every attention layer; gemma2
// caps at 50 without the key (window_models_test), others only with it.
TEST(ModelConfig, AttentionSoftCapFromTheKey) {
  auto w = llama_writer();
  EXPECT_EQ(parse(w).layers[0].attention.softcap, 0.0f);
  w.set_f32("llama.attn_logit_softcapping", 20.0f);
  const ModelConfig c = parse(w);
  for (const auto& l : c.layers) EXPECT_EQ(l.attention.softcap, 20.0f);
}

// KV-shared layers read the last earlier layer of their own kind (llama.cpp's
// reuse rule); a pattern that pairs a window layer with a global source is
// refused, naming both layers.
TEST(ModelConfig, SharedKvLayersReadTheLastLayerOfTheirKind) {
  auto w = llama_writer();
  w.set_u32("llama.attention.sliding_window", 16);
  w.set("llama.attention.sliding_window_pattern",
        gguf::Value::make_bools({true, true, true, false, true, false}));
  w.set_u32("llama.attention.shared_kv_layers", 2);
  const ModelConfig c = parse(w);
  EXPECT_EQ(c.layers[4].attention.kind, AttentionKind::SharedKv);
  EXPECT_EQ(c.layers[4].attention.kv_source, 2);
  EXPECT_EQ(c.layers[4].attention.window, 16);
  EXPECT_EQ(c.layers[5].attention.kv_source, 3);
  EXPECT_EQ(c.layers[5].attention.window, 0);
  w.set_u32("llama.attention.shared_kv_layers", 3);  // layer 3 (window) would read layer 1's
  w.set("llama.attention.sliding_window_pattern",
        gguf::Value::make_bools({true, false, true, true, true, false}));
  EXPECT_NE(error_of(w).find("layer 3 reads the K/V of layer 1, which has no sliding window"),
            std::string::npos)
      << error_of(w);
}

// llama with experts is Mixtral: softmax routing over expert_count experts,
// expert_used_count chosen and renormalized, after any leading dense layers.
TEST(ModelConfig, ExpertsMakeMixtureOfExpertsLayers) {
  auto w = llama_writer();
  w.set_u32("llama.expert_count", 8);
  EXPECT_NE(error_of(w).find("missing metadata key 'llama.expert_used_count'"), std::string::npos)
      << error_of(w);
  w.set_u32("llama.expert_used_count", 9);
  EXPECT_NE(error_of(w).find("expert_used_count = 9 is out of range [1, 8]"), std::string::npos)
      << error_of(w);
  w.set_u32("llama.expert_used_count", 2);
  w.set_u32("llama.leading_dense_block_count", 3);
  w.set_f32("llama.expert_weights_scale", 2.5f);
  const ModelConfig c = parse(w);
  for (int l = 0; l < c.n_layers; ++l) {
    const FfnSpec& f = c.layers[size_t(l)].ffn;
    EXPECT_EQ(f.kind, l < 3 ? FfnKind::Dense : FfnKind::Moe) << l;
    if (l < 3) continue;
    EXPECT_EQ(f.moe.n_experts, 8);
    EXPECT_EQ(f.moe.n_used, 2);
    EXPECT_EQ(f.moe.n_ff, c.n_ff / 2);  // no expert_feed_forward_length: n_ff / n_used
    EXPECT_TRUE(f.moe.normalize);
    EXPECT_EQ(f.moe.gating, MoeGating::Softmax);
    EXPECT_FLOAT_EQ(f.moe.weights_scale, 2.5f);
    EXPECT_EQ(f.n_ff, 0);
  }
  w.set_u32("llama.expert_feed_forward_length", 96);
  EXPECT_EQ(parse(w).layers[4].ffn.moe.n_ff, 96);
}

// Architectures whose attention is not in yet are refused in one line that
// says what is missing.
TEST(ModelConfig, KnownArchitecturesSayWhatIsMissing) {
  for (const char* arch : {"qwen3next"}) {
    gguf::GgufWriter w;
    w.set_string("general.architecture", arch);
    const std::string e = error_of(w);
    EXPECT_NE(e.find(std::string("architecture '") + arch +
                     "' is not supported yet: its attention needs"),
              std::string::npos)
        << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace tkv::model
