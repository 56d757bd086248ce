// The model as a stack of layers: models whose layers differ in KV heads and
// FFN width run each layer with its own geometry (against the independent
// reference forward), a per-layer array of equal values is the scalar form
// bit for bit, and layer kinds the forward does not run are refused at load.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "common/test_util.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "reference_forward.h"
#include "test_models.h"

namespace tkv::model {
namespace {

SynthSpec per_layer_spec(const std::string& preset) {
  SynthSpec s = test::small_spec(preset);
  s.n_layers = 3;
  s.layer_kv_heads = {4, 1, 2};
  s.layer_ff = {768, 384, 512};
  return s;
}

TEST(LayerStack, PerLayerGeometryMatchesTheReferenceForward) {
  for (const char* preset : {"tiny", "qwen2.5-7b", "qwen3-8b"}) {
    const std::string path = test::write_model(per_layer_spec(preset));
    const auto m = Model::load(path);
    const ModelConfig& c = m->config();
    ASSERT_EQ(c.layers.size(), 3u);
    EXPECT_EQ(c.layers[1].attention.n_kv_heads, 1);
    EXPECT_EQ(c.layers[1].ffn.n_ff, 384);
    EXPECT_EQ(c.layers[2].attention.n_kv_heads, 2);
    const kv::KvShape shape = m->kv_shape(64);
    EXPECT_FALSE(shape.uniform());
    EXPECT_EQ(shape.layer(1), (kv::KvLayerShape{4, 1, 64, 64}));
    EXPECT_EQ(shape.n_kv_heads, 4);
    EXPECT_LE(test::max_logit_error(path, 17, 5, 2), 1e-3) << preset;

    // A cache of the widest layer's uniform geometry is another model's.
    kv::KvCache wrong(kv::KvShape(3, 4, 4, 64, 64), kv::KvConfig{});
    ThreadPool pool(1);
    std::string e;
    try {
      m->eval_last(wrong, std::vector<int32_t>{1, 2}, pool);
    } catch (const Error& err) {
      e = err.what();
    }
    EXPECT_NE(e.find("does not match the model"), std::string::npos) << e;
  }
}

// The same weights with head_count_kv and feed_forward_length written as
// arrays of one value per layer: the same model, bit for bit.
TEST(LayerStack, ArraysOfEqualValuesAreTheScalarForm) {
  SynthSpec scalar = test::small_spec("llama-3.1-8b");
  SynthSpec arrays = scalar;
  arrays.layer_kv_heads = {scalar.n_kv_heads, scalar.n_kv_heads};
  arrays.layer_ff = {scalar.n_ff, scalar.n_ff};
  const auto a = Model::load(test::write_model(scalar));
  const auto b = Model::load(test::write_model(arrays));
  EXPECT_TRUE(b->kv_shape().uniform());
  EXPECT_TRUE(b->kv_shape().layers.empty());
  const auto tokens = test::random_tokens(20, a->config().n_vocab, 9);
  ThreadPool pool(2);
  kv::KvCache ca(a->kv_shape(64), kv::KvConfig{}), cb(b->kv_shape(64), kv::KvConfig{});
  EXPECT_TRUE(
      test::same_bits(a->eval_last(ca, tokens, pool, 8), b->eval_last(cb, tokens, pool, 8)));
  EXPECT_TRUE(test::same_bits(a->eval_last(ca, std::vector<int32_t>{3}, pool),
                              b->eval_last(cb, std::vector<int32_t>{3}, pool)));
}

std::string load_error(const std::string& path) {
  try {
    Model::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// V from the K projection is gemma4's (attention_k_eq_v); a llama file
// without attn_v is broken, and says which tensor is missing.
TEST(LayerStack, MissingValueProjectionIsABrokenFileOutsideGemma4) {
  const std::string src = test::write_model(test::small_spec("tiny"));
  const std::string no_v = test::temp_dir() + "/no-v.gguf";
  test::rewrite_gguf(
      src, no_v, [](auto&) {}, [](test::TensorCopy& t) { return t.name != "blk.0.attn_v.weight"; });
  const std::string e = load_error(no_v);
  EXPECT_NE(e.find("missing tensor blk.0.attn_v.weight"), std::string::npos) << e;
}

}  // namespace
}  // namespace tkv::model
