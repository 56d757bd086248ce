// Models with sliding-window layers: gemma2 (every other layer a window,
// attention scores soft-capped), gemma3 (five window layers of six,
// their own RoPE base, post norms, GeGLU, scaled embeddings), gemma4 (the
// window layers' own head dims, V from K, experts beside the dense FFN,
// KV-shared layers, per-layer inputs) and gpt-oss (every other layer a
// window, learned sinks, YaRN, biases, its MoE)
// against the independent double-precision forward over sequences several
// windows long, and a sequence truncated far outside the window going on
// exactly as a fresh one.
#include <gtest/gtest.h>

#include <span>

#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "test_models.h"
#include "test_util.h"

namespace tkv::test {
namespace {

model::SynthSpec gemma3_spec() {
  model::SynthSpec s = model::synth_preset("tiny-gemma3");
  s.sliding_window = 8;  // sequences of 40 tokens span five windows
  return s;
}

// tiny-gemma4: window layers of head size 32, a global layer whose V is K,
// experts beside every dense FFN. tiny-gemma4-e: every fourth layer global,
// the last four reading layers 2 (window) and 3 (global), per-layer inputs.
model::SynthSpec gemma4_spec(const char* preset) {
  model::SynthSpec s = model::synth_preset(preset);
  s.sliding_window = 8;
  return s;
}

// tiny-gemma2 with its scores capped at 2 (the model's 50 would leave a
// random model's small scores as they are): a forward that skipped the cap
// would be far from the reference's.
model::SynthSpec gemma2_spec() {
  model::SynthSpec s = model::synth_preset("tiny-gemma2");
  s.sliding_window = 8;
  s.attn_logit_softcap = 2.0f;
  return s;
}

model::SynthSpec oss_spec() {
  model::SynthSpec s = small_spec("gpt-oss-20b");
  s.sliding_window = 8;
  return s;
}

TEST(WindowModels, Gemma3MatchesTheReference) {
  const std::string path = write_model(gemma3_spec(), "f32");
  auto m = model::Model::load(path);
  int windows = 0;
  for (const auto& l : m->config().layers)
    windows += l.attention.kind == model::AttentionKind::Window;
  EXPECT_EQ(windows, 5);
  EXPECT_LE(max_logit_error(path, 40, 7, 2), 1e-3);
}

TEST(WindowModels, Gemma2MatchesTheReference) {
  const std::string path = write_model(gemma2_spec(), "f32");
  auto m = model::Model::load(path);
  const auto& layers = m->config().layers;
  EXPECT_EQ(layers[0].attention.kind, model::AttentionKind::Window);
  EXPECT_EQ(layers[1].attention.kind, model::AttentionKind::Full);
  EXPECT_FLOAT_EQ(layers[1].attention.softcap, 2.0f);
  EXPECT_FALSE(layers[1].attention.qk_norm);
  EXPECT_FLOAT_EQ(m->config().final_softcap, 30.0f);
  EXPECT_LE(max_logit_error(path, 40, 7, 2), 1e-3);
  // Without the keys, llama.cpp's gemma2 defaults: scores at 50, logits at 30.
  model::SynthSpec bare = gemma2_spec();
  bare.attn_logit_softcap = bare.final_logit_softcap = 0.0f;
  bare.preset = "tiny-gemma2-bare";
  auto defaults = model::Model::load(write_model(bare, "f32"));
  EXPECT_FLOAT_EQ(defaults->config().layers[0].attention.softcap, 50.0f);
  EXPECT_FLOAT_EQ(defaults->config().final_softcap, 30.0f);
}

TEST(WindowModels, GptOssMatchesTheReference) {
  const std::string path = write_model(oss_spec(), "f32");
  auto m = model::Model::load(path);
  EXPECT_EQ(m->config().layers[0].attention.kind, model::AttentionKind::Window);
  EXPECT_EQ(m->config().layers[1].attention.kind, model::AttentionKind::Full);
  EXPECT_TRUE(m->config().layers[1].attention.sink);
  EXPECT_LE(max_logit_error(path, 40, 7, 2), 1e-3);
}

TEST(WindowModels, Gemma4MatchesTheReference) {
  const std::string path = write_model(gemma4_spec("tiny-gemma4"), "f32");
  auto m = model::Model::load(path);
  const auto& layers = m->config().layers;
  EXPECT_EQ(layers[0].attention.kind, model::AttentionKind::Window);
  EXPECT_EQ(layers[0].attention.k_dim, 32);
  EXPECT_EQ(layers[5].attention.kind, model::AttentionKind::Full);
  EXPECT_EQ(layers[5].attention.k_dim, 64);
  EXPECT_TRUE(layers[5].attention.v_from_k);
  EXPECT_TRUE(layers[5].attention.v_norm);
  EXPECT_FLOAT_EQ(layers[5].attention.scale, 1.0f);
  EXPECT_EQ(layers[3].ffn.kind, model::FfnKind::MoePlusDense);
  EXPECT_TRUE(layers[3].output_scale);
  EXPECT_LE(max_logit_error(path, 40, 7, 2), 1e-3);
}

// Layers 4-7 read layers 2 and 3's K/V (the sequence holds 4 layers of
// K/V), the chunk's queries of each reader seeing what the first saw; every
// layer mixes in an input of its own.
TEST(WindowModels, Gemma4SharedKvAndPerLayerInputsMatchTheReference) {
  const std::string path = write_model(gemma4_spec("tiny-gemma4-e"), "f32");
  auto m = model::Model::load(path);
  const auto& layers = m->config().layers;
  for (int l = 4; l < 8; ++l) {
    EXPECT_EQ(layers[size_t(l)].attention.kind, model::AttentionKind::SharedKv) << l;
    EXPECT_EQ(layers[size_t(l)].attention.kv_source, l == 7 ? 3 : 2) << l;
    EXPECT_EQ(layers[size_t(l)].per_layer_input, 64) << l;
  }
  EXPECT_EQ(layers[7].ffn.n_ff, 2 * layers[0].ffn.n_ff);
  EXPECT_EQ(m->kv_shape().n_layers, 4);
  EXPECT_LE(max_logit_error(path, 40, 7, 2), 1e-3);
}

// Quantized weights: the reference quantizes activations as the kernels
// do, in double; a value at a rounding boundary may land one step apart
// (synth_test.cc says more), hence the looser bound.
TEST(WindowModels, QuantizedMatchTheReference) {
  EXPECT_LE(max_logit_error(write_model(gemma3_spec(), "q8_0"), 30, 7, 2), 0.1);
  EXPECT_LE(max_logit_error(write_model(gemma2_spec(), "q8_0"), 30, 7, 2), 0.1);
  EXPECT_LE(max_logit_error(write_model(oss_spec(), "q8_0"), 30, 7, 2), 0.1);
}

// gemma4 scores q.k unscaled over RMS-normed heads: with random weights a
// query's attention is nearly one-hot, so an activation that lands one
// quantization step apart (above) can move which key wins and a position's
// logits by a few tenths (F32 weights agree to 1e-3: Gemma4MatchesTheReference).
TEST(WindowModels, QuantizedGemma4MatchesTheReference) {
  EXPECT_LE(max_logit_error(write_model(gemma4_spec("tiny-gemma4"), "q8_0"), 30, 7, 2), 0.5);
  EXPECT_LE(max_logit_error(write_model(gemma4_spec("tiny-gemma4-e"), "q8_0"), 30, 7, 2), 0.5);
}

// Chunks of 4 tokens, so that both sequences run their common prefix
// through the same kernels (a row's bits depend on its chunk taking the
// exact or the prefill kernels, not on anything else).
std::vector<float> last_logits(const model::Model& m, kv::KvCache& seq,
                               std::span<const int32_t> tokens, ThreadPool& pool) {
  std::vector<float> out;
  model::EvalOptions opts;
  opts.ubatch = 4;
  m.eval(
      seq, tokens, pool, [&](int64_t, std::span<const float> l) { out.assign(l.begin(), l.end()); },
      opts);
  return out;
}

// The window layers keep their whole history: a sequence truncated to a
// point far older than any window and continued gives the bits of a fresh
// sequence fed the same tokens.
TEST(WindowModels, TruncateFarOutsideTheWindowContinuesExactly) {
  for (const model::SynthSpec& spec :
       {gemma2_spec(), gemma3_spec(), oss_spec(), gemma4_spec("tiny-gemma4-e")}) {
    auto m = model::Model::load(write_model(spec, "f16"));
    ThreadPool pool(2);
    const auto a = random_tokens(60, m->config().n_vocab, 5);
    const auto b = random_tokens(12, m->config().n_vocab, 6);
    kv::KvConfig f16;  // f16 K and V, no residual: every position in its one stored form
    kv::KvCache reused(m->kv_shape(512), f16);
    last_logits(*m, reused, a, pool);
    reused.truncate(20);
    std::vector<int32_t> fresh_tokens(a.begin(), a.begin() + 20);
    fresh_tokens.insert(fresh_tokens.end(), b.begin(), b.end());
    kv::KvCache fresh(m->kv_shape(512), f16);
    last_logits(*m, fresh, std::span<const int32_t>(fresh_tokens.data(), 20), pool);
    const auto want = last_logits(*m, fresh, b, pool);
    const auto got = last_logits(*m, reused, b, pool);
    EXPECT_EQ(got, want) << spec.preset;
  }
}

// A KV-shared layer with a query bias (attn_q.bias; gemma4's converter
// writes none, a hand-made file may): the bias is bound and added, so a
// zero one leaves the logits as they were. The bias takes the place of
// that layer's attn_k, which a KV-shared layer does not read.
TEST(WindowModels, KvSharedLayerWithAQueryBias) {
  const std::string path = write_model(gemma4_spec("tiny-gemma4-e"), "f32");
  const std::string biased = temp_dir() + "/gemma4-e-q-bias.gguf";
  rewrite_gguf(path, biased, nullptr, [](TensorCopy& t) {
    if (t.name != "blk.4.attn_k.weight") return true;
    t.name = "blk.4.attn_q.bias";
    t.type = DType::F32;
    t.shape = {4 * 32};
    t.bytes.assign(4 * 32 * sizeof(float), 0);
    return true;
  });
  auto plain = model::Model::load(path);
  auto with_bias = model::Model::load(biased);
  EXPECT_TRUE(with_bias->config().layers[4].attention.qkv_bias);
  ThreadPool pool(2);
  const auto tokens = random_tokens(30, plain->config().n_vocab, 9);
  kv::KvConfig f16;
  kv::KvCache a(plain->kv_shape(128), f16), b(with_bias->kv_shape(128), f16);
  EXPECT_EQ(last_logits(*with_bias, b, tokens, pool), last_logits(*plain, a, tokens, pool));
}

}  // namespace
}  // namespace tkv::test
