// Synthesized Qwen3.5 / Qwen3.6 hybrids (qwen35, qwen35moe): the files hold
// the metadata keys llama.cpp's loader reads and exactly the tensors, with
// the shapes, its qwen35 / qwen35moe load_arch_tensors creates.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/test_util.h"
#include "gguf/gguf.h"
#include "model/synth.h"

namespace tkv::model {
namespace {

using Shape = std::vector<int64_t>;
using Shapes = std::map<std::string, Shape>;

Shapes tensor_shapes(const gguf::GgufFile& f) {
  Shapes out;
  for (const auto& t : f.tensors()) out[t.name] = t.shape;
  return out;
}

// The dimensions llama.cpp derives from the metadata.
struct Dims {
  int64_t n_embd, n_vocab, n_head, n_head_kv, head_dim, n_ff;
  int64_t d_conv, d_state, n_group, dt_rank;  // ssm.*
  int64_t n_expert = 0, n_ff_exp = 0, n_ff_shexp = 0;
};

// llama.cpp's qwen35 / qwen35moe load_arch_tensors, written out: a
// recurrent (linear-attention) layer l unless (l + 1) % 4 == 0, and the
// layers from n_layer on are multi-token-prediction blocks.
Shapes expected_shapes(const Dims& d, int n_layer, int n_nextn) {
  const int64_t E = d.n_embd;
  const int64_t key_dim = d.d_state * d.n_group, value_dim = d.d_state * d.dt_rank;
  const int64_t conv_dim = key_dim * 2 + value_dim;
  const int64_t q_dim = d.head_dim * d.n_head, kv_dim = d.head_dim * d.n_head_kv;
  Shapes w = {{"token_embd.weight", {E, d.n_vocab}},
              {"output_norm.weight", {E}},
              {"output.weight", {E, d.n_vocab}}};
  for (int l = 0; l < n_layer + n_nextn; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w[p + "attn_norm.weight"] = {E};
    w[p + "post_attention_norm.weight"] = {E};
    if (l < n_layer && (l + 1) % 4 != 0) {
      w[p + "attn_qkv.weight"] = {E, conv_dim};
      w[p + "attn_gate.weight"] = {E, value_dim};
      w[p + "ssm_conv1d.weight"] = {d.d_conv, conv_dim};
      w[p + "ssm_dt.bias"] = {d.dt_rank};
      w[p + "ssm_a"] = {d.dt_rank};
      w[p + "ssm_beta.weight"] = {E, d.dt_rank};
      w[p + "ssm_alpha.weight"] = {E, d.dt_rank};
      w[p + "ssm_norm.weight"] = {d.d_state};
      w[p + "ssm_out.weight"] = {value_dim, E};
    } else {
      w[p + "attn_q.weight"] = {E, q_dim * 2};  // queries and their output gates
      w[p + "attn_k.weight"] = {E, kv_dim};
      w[p + "attn_v.weight"] = {E, kv_dim};
      w[p + "attn_output.weight"] = {q_dim, E};
      w[p + "attn_q_norm.weight"] = {d.head_dim};
      w[p + "attn_k_norm.weight"] = {d.head_dim};
    }
    if (d.n_expert == 0) {
      w[p + "ffn_gate.weight"] = {E, d.n_ff};
      w[p + "ffn_down.weight"] = {d.n_ff, E};
      w[p + "ffn_up.weight"] = {E, d.n_ff};
    } else {
      w[p + "ffn_gate_inp.weight"] = {E, d.n_expert};
      w[p + "ffn_down_exps.weight"] = {d.n_ff_exp, E, d.n_expert};
      w[p + "ffn_gate_exps.weight"] = {E, d.n_ff_exp, d.n_expert};
      w[p + "ffn_up_exps.weight"] = {E, d.n_ff_exp, d.n_expert};
      w[p + "ffn_gate_inp_shexp.weight"] = {E};
      w[p + "ffn_gate_shexp.weight"] = {E, d.n_ff_shexp};
      w[p + "ffn_up_shexp.weight"] = {E, d.n_ff_shexp};
      w[p + "ffn_down_shexp.weight"] = {d.n_ff_shexp, E};
    }
    if (l >= n_layer) {
      w[p + "nextn.eh_proj.weight"] = {2 * E, E};
      w[p + "nextn.enorm.weight"] = {E};
      w[p + "nextn.hnorm.weight"] = {E};
      w[p + "nextn.shared_head_norm.weight"] = {E};
    }
  }
  return w;
}

const Dims kTiny{.n_embd = 128,
                 .n_vocab = 512,
                 .n_head = 4,
                 .n_head_kv = 2,
                 .head_dim = 64,
                 .n_ff = 256,
                 .d_conv = 4,
                 .d_state = 32,
                 .n_group = 2,
                 .dt_rank = 4};

// The keys llama.cpp's qwen35 hparams loader reads (src/llama-model.cpp and
// src/models/qwen35.cpp), for the tiny presets.
void expect_tiny_metadata(const gguf::GgufFile& f, const std::string& arch) {
  const std::string a = arch + ".";
  EXPECT_EQ(f.get_string("general.architecture"), arch);
  EXPECT_EQ(f.get_int(a + "block_count"), 4);
  EXPECT_EQ(f.get_int(a + "context_length"), 4096);
  EXPECT_EQ(f.get_int(a + "embedding_length"), 128);
  EXPECT_EQ(f.get_int(a + "feed_forward_length"), 256);
  EXPECT_EQ(f.get_int(a + "attention.head_count"), 4);
  EXPECT_EQ(f.get_int(a + "attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int(a + "attention.key_length"), 64);
  EXPECT_EQ(f.get_int(a + "attention.value_length"), 64);
  EXPECT_NEAR(*f.get_float(a + "attention.layer_norm_rms_epsilon"), 1e-6, 1e-12);
  EXPECT_EQ(f.get_float(a + "rope.freq_base"), 1e7);
  EXPECT_EQ(f.get_int(a + "rope.dimension_count"), 16);  // a quarter of each head
  EXPECT_EQ(f.get_ints(a + "rope.dimension_sections"), (std::vector<int64_t>{3, 3, 2, 0}));
  EXPECT_EQ(f.get_int(a + "ssm.conv_kernel"), 4);
  EXPECT_EQ(f.get_int(a + "ssm.state_size"), 32);
  EXPECT_EQ(f.get_int(a + "ssm.group_count"), 2);
  EXPECT_EQ(f.get_int(a + "ssm.time_step_rank"), 4);
  EXPECT_EQ(f.get_int(a + "ssm.inner_size"), 4 * 32);
  EXPECT_EQ(f.get_int(a + "full_attention_interval"), 4);
  EXPECT_EQ(f.find(a + "nextn_predict_layers"), nullptr);
}

// Values: ssm_a is -exp(A_log) (negative), the dt bias makes softplus small,
// so every decay exp(softplus(alpha + dt_bias) * a) lies inside (0, 1) for
// unit-scale alpha; the conv is f32 (ggml's conv reads f32 only); norms ~1.
void expect_sane_linear_values(const gguf::GgufFile& f) {
  const auto& a = f.require_tensor("blk.0.ssm_a");
  const auto& dt = f.require_tensor("blk.0.ssm_dt.bias");
  ASSERT_EQ(a.type, DType::F32);
  ASSERT_EQ(dt.type, DType::F32);
  const float* av = reinterpret_cast<const float*>(a.data);
  const float* dv = reinterpret_cast<const float*>(dt.data);
  for (int h = 0; h < 4; ++h) {
    EXPECT_LT(av[h], 0.0f) << h;
    for (float alpha : {-3.0f, 0.0f, 3.0f}) {
      const double decay = std::exp(std::log1p(std::exp(double(alpha + dv[h]))) * av[h]);
      EXPECT_GT(decay, 0.0) << h;
      EXPECT_LT(decay, 1.0) << h;
      if (alpha <= 0.0f) {  // a typical token keeps much of the state
        EXPECT_GT(decay, 0.1) << h;
      }
    }
  }
  EXPECT_EQ(f.require_tensor("blk.0.ssm_conv1d.weight").type, DType::F32);
  const float* norm =
      reinterpret_cast<const float*>(f.require_tensor("blk.0.ssm_norm.weight").data);
  EXPECT_NEAR(norm[0], 1.0f, 0.1001f);
}

TEST(SynthHybrid, TinyQwen35HasTheTensorsLlamaCppLoads) {
  const std::string path = test::temp_dir() + "/tiny-qwen35.gguf";
  SynthOptions o;
  o.type = "q4_K";
  const auto r = write_synth_model(synth_preset("tiny-qwen35"), o, path);
  const auto f = gguf::GgufFile::open(path);
  expect_tiny_metadata(f, "qwen35");
  EXPECT_EQ(f.find("qwen35.expert_count"), nullptr);
  const Shapes want = expected_shapes(kTiny, 4, 0);
  EXPECT_EQ(tensor_shapes(f), want);
  EXPECT_EQ(r.n_tensors, want.size());
  expect_sane_linear_values(f);
  // 128-wide rows are no whole q4_K block: f16, as llama.cpp falls back;
  // the 256-wide rows of ffn_down take q4_K.
  EXPECT_EQ(f.require_tensor("blk.3.attn_q.weight").type, DType::F16);
  EXPECT_EQ(f.require_tensor("blk.0.ffn_down.weight").type, DType::Q4_K);
}

TEST(SynthHybrid, TinyQwen35MoeHasRoutedAndGatedSharedExperts) {
  const std::string path = test::temp_dir() + "/tiny-qwen35moe.gguf";
  SynthOptions o;
  o.type = "q8_0";
  write_synth_model(synth_preset("tiny-qwen35moe"), o, path);
  const auto f = gguf::GgufFile::open(path);
  expect_tiny_metadata(f, "qwen35moe");
  EXPECT_EQ(f.get_int("qwen35moe.expert_count"), 8);
  EXPECT_EQ(f.get_int("qwen35moe.expert_used_count"), 2);
  EXPECT_EQ(f.get_int("qwen35moe.expert_feed_forward_length"), 128);
  EXPECT_EQ(f.get_int("qwen35moe.expert_shared_feed_forward_length"), 128);
  Dims d = kTiny;
  d.n_expert = 8;
  d.n_ff_exp = 128;
  d.n_ff_shexp = 128;
  EXPECT_EQ(tensor_shapes(f), expected_shapes(d, 4, 0));
  expect_sane_linear_values(f);
  // The router and the shared expert's gate stay f32 (llama-quantize leaves
  // them alone); the rest is q8_0.
  EXPECT_EQ(f.require_tensor("blk.1.ffn_gate_inp.weight").type, DType::F32);
  EXPECT_EQ(f.require_tensor("blk.1.ffn_gate_inp_shexp.weight").type, DType::F32);
  EXPECT_EQ(f.require_tensor("blk.1.ffn_up_exps.weight").type, DType::Q8_0);
  EXPECT_EQ(f.require_tensor("blk.1.attn_qkv.weight").type, DType::Q8_0);
}

// A multi-token-prediction layer follows the trunk: counted in block_count,
// named by nextn_predict_layers, a full-attention layer plus its nextn
// projections; a --layers cut keeps it after the shorter trunk.
TEST(SynthHybrid, NextnLayerFollowsTheTrunk) {
  SynthSpec s = synth_preset("tiny-qwen35moe");
  s.n_nextn_layers = 1;
  SynthOptions o;
  o.layers = 8;
  const std::string path = test::temp_dir() + "/tiny-qwen35moe-mtp.gguf";
  const auto r = write_synth_model(s, o, path);
  EXPECT_EQ(r.spec.n_layers, 8);
  const auto f = gguf::GgufFile::open(path);
  EXPECT_EQ(f.get_int("qwen35moe.block_count"), 9);
  EXPECT_EQ(f.get_int("qwen35moe.nextn_predict_layers"), 1);
  Dims d = kTiny;
  d.n_expert = 8;
  d.n_ff_exp = 128;
  d.n_ff_shexp = 128;
  EXPECT_EQ(tensor_shapes(f), expected_shapes(d, 8, 1));
}

uint64_t n_params(const Shapes& shapes) {
  uint64_t n = 0;
  for (const auto& [name, shape] : shapes) {
    uint64_t elems = 1;
    for (int64_t d : shape) elems *= uint64_t(d);
    n += elems;
  }
  return n;
}

// The real models' shapes (their config.json: hidden_size, layers,
// attention and linear-attention heads, FFN and expert widths; 248320
// tokens, one multi-token-prediction layer): every tensor llama.cpp creates
// for them, and nothing else, at full size (metadata and plan only; nothing
// is generated).
TEST(SynthHybrid, RealPresetsPlanEveryTensorAtFullSize) {
  struct Case {
    const char* preset;
    int layers;
    Dims dims;
  };
  const Case cases[] = {
      {"qwen3.5-9b", 32, Dims{4096, 248320, 16, 4, 256, 12288, 4, 128, 16, 32}},
      {"qwen3.6-27b", 64, Dims{5120, 248320, 24, 4, 256, 17408, 4, 128, 16, 48}},
      {"qwen3.6-35b-a3b", 40, Dims{2048, 248320, 16, 2, 256, 512, 4, 128, 16, 32, 256, 512, 512}},
  };
  for (const Case& c : cases) {
    const SynthSpec s = synth_preset(c.preset);
    EXPECT_EQ(s.arch, c.dims.n_expert > 0 ? "qwen35moe" : "qwen35") << c.preset;
    EXPECT_EQ(s.rope_dims, 64) << c.preset;  // partial_rotary_factor 0.25
    EXPECT_EQ(s.rope_sections, (std::vector<int>{11, 11, 10, 0})) << c.preset;
    EXPECT_EQ(s.n_experts_used, c.dims.n_expert > 0 ? 8 : 0) << c.preset;
    gguf::GgufWriter w;
    const auto r = build_synth_model(s, {}, w);
    const Shapes want = expected_shapes(c.dims, c.layers, 1);
    EXPECT_EQ(r.n_tensors, want.size()) << c.preset;
    EXPECT_EQ(r.n_params, n_params(want)) << c.preset;
  }
}

TEST(SynthHybrid, CopiesTheQwen35Vocabulary) {
  TKV_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-qwen35.gguf");
  SynthOptions o;
  o.vocab_from = vocab;
  const std::string path = test::temp_dir() + "/tiny-qwen35-vocab.gguf";
  const auto r = write_synth_model(synth_preset("tiny-qwen35"), o, path);
  const auto f = gguf::GgufFile::open(path);
  const auto original = gguf::GgufFile::open(vocab);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), original.get_string("tokenizer.ggml.pre"));
  const auto* tokens = original.get_strings("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(r.spec.n_vocab, int(tokens->size()));
  EXPECT_EQ(f.require_tensor("token_embd.weight").shape, (Shape{128, int64_t(tokens->size())}));
}

TEST(SynthHybrid, RejectsLayoutsLlamaCppCannotLoad) {
  const std::string path = test::temp_dir() + "/bad-qwen35.gguf";
  SynthSpec s = synth_preset("tiny-qwen35");
  s.ssm_time_step_rank = 3;  // not a multiple of the 2 q/k heads
  EXPECT_THROW(write_synth_model(s, {}, path), Error);
  s = synth_preset("tiny-qwen35");
  s.rope_sections = {3, 3, 2};  // llama.cpp reads four
  EXPECT_THROW(write_synth_model(s, {}, path), Error);
  s = synth_preset("tiny-qwen35");
  s.n_ff_shared_expert = 64;  // only qwen35moe has one
  EXPECT_THROW(write_synth_model(s, {}, path), Error);
  s = synth_preset("tiny-qwen35moe");
  s.n_ff_shared_expert = 0;  // its loader requires the shared expert
  EXPECT_THROW(write_synth_model(s, {}, path), Error);
  s = synth_preset("tiny");
  s.n_nextn_layers = 1;
  EXPECT_THROW(write_synth_model(s, {}, path), Error);
}

}  // namespace
}  // namespace tkv::model
