// A KV shape whose layers differ (KV heads, K and V head dims per layer):
// attention against the reference, each layer bit for bit what a uniform
// cache of its geometry gives, fork / truncate / save / load round trips,
// the session file's shape string, and bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/error.h"
#include "kv/kv_cache.h"
#include "kv_test_harness.h"
#include "test_util.h"

namespace tkv::test {
namespace {

using kv::KvLayerShape;
using kv::KvShape;

constexpr double kTolerance = 1e-4;

// Three layers: 8/4 heads of 64, 4/2 heads with K 32 and V 48 wide, 8/1
// heads of 128.
KvShape mixed_shape(int max_tokens = 4096) {
  return KvShape::of_layers({{8, 4, 64, 64}, {4, 2, 32, 48}, {8, 1, 128, 128}}, max_tokens);
}

TEST(KvLayerShape, OfLayersKeepsTheWidestAndEachLayer) {
  const KvShape s = mixed_shape();
  EXPECT_EQ(s.n_layers, 3);
  EXPECT_EQ(s.n_heads, 8);
  EXPECT_EQ(s.n_kv_heads, 4);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_FALSE(s.uniform());
  EXPECT_EQ(s.layer(1), (KvLayerShape{4, 2, 32, 48}));
  const KvShape u{2, 4, 2, 64, 100};
  EXPECT_TRUE(u.uniform());
  EXPECT_EQ(u.layer(1), (KvLayerShape{4, 2, 64, 64}));
  // The same geometry spelled per layer is the same shape.
  EXPECT_TRUE(KvShape::of_layers({{4, 2, 64, 64}, {4, 2, 64, 64}}, 100) == u);
  EXPECT_TRUE(KvShape::of_layers({{4, 2, 64, 64}, {4, 2, 64, 64}}, 100).uniform());
  EXPECT_FALSE(s == KvShape(3, 8, 4, 128, 4096));
}

TEST(KvLayerShape, AttentionMatchesTheReference) {
  const KvShape shape = mixed_shape();
  const RandomInputs in(shape, 300, 5);
  for (const char* kv : {"f16", "k4v2", "q8_0h", "q4_0"}) {
    for (int threads : {1, 3}) {
      Scenario s;
      s.shape = shape;
      s.config = kv_config(kv);
      s.chunks = {70, 1, 1, 100, 1, 64};
      s.threads = threads;
      const ScenarioResult r = run_scenario(s, in);
      EXPECT_GT(r.queries, 0);
      EXPECT_LT(r.max_rel_error, kTolerance) << kv << " threads " << threads;
    }
  }
}

TEST(KvLayerShape, TruncateAndReappendMatchTheReference) {
  const KvShape shape = mixed_shape();
  const RandomInputs in(shape, 400, 9);
  for (const char* kv : {"f16", "k4v2"}) {
    Scenario s;
    s.shape = shape;
    s.config = kv_config(kv);
    s.chunks = {150, 1, 1, 40, 1, 30};
    s.truncations = {{3, 100}, {5, 60}};
    EXPECT_LT(run_scenario(s, in).max_rel_error, kTolerance) << kv;
  }
}

// Layer l of the mixed cache holds and returns exactly what layer l of a
// uniform cache of its geometry does (same codecs, same rotation seed, the
// same inputs): outputs bit for bit, and the same bytes.
TEST(KvLayerShape, EachLayerIsTheUniformCacheOfItsGeometry) {
  const KvShape shape = mixed_shape();
  const RandomInputs in(shape, 200, 3);
  ThreadPool pool(2);
  for (const char* kv : {"f16", "k4v2"}) {
    const kv::KvConfig config = kv_config(kv);
    kv::KvCache mixed(shape, config);
    std::vector<float> mixed_out;
    feed_chunk(mixed, in, pool, 0, 130, &mixed_out);
    feed_chunk(mixed, in, pool, 130, 1, &mixed_out);
    size_t at = 0;  // layer l's outputs in mixed_out, per chunk
    std::vector<std::vector<float>> per_layer(size_t(shape.n_layers));
    for (int n : {130, 1})
      for (int l = 0; l < shape.n_layers; ++l) {
        const size_t len = size_t(n) * shape.layer(l).n_heads * shape.layer(l).v_dim;
        per_layer[size_t(l)].insert(per_layer[size_t(l)].end(), mixed_out.begin() + ptrdiff_t(at),
                                    mixed_out.begin() + ptrdiff_t(at + len));
        at += len;
      }
    for (int l = 0; l < shape.n_layers; ++l) {
      const KvLayerShape g = shape.layer(l);
      if (g.k_dim != g.v_dim) continue;  // no uniform shape has it
      const KvShape uniform{shape.n_layers, g.n_heads, g.n_kv_heads, g.k_dim, shape.max_tokens};
      RandomInputs same(uniform, 200, 3);  // every layer gets layer l's inputs
      for (int j = 0; j < shape.n_layers; ++j) {
        same.layers[size_t(j)] = in.layers[size_t(l)];
        same.q[size_t(j)] = in.q[size_t(l)];
      }
      kv::KvCache u(uniform, config);
      std::vector<float> u_out;
      feed_chunk(u, same, pool, 0, 130, &u_out);
      feed_chunk(u, same, pool, 130, 1, &u_out);
      const size_t o = size_t(g.n_heads) * g.v_dim;
      std::vector<float> u_layer;
      at = 0;
      for (int n : {130, 1})
        for (int j = 0; j < shape.n_layers; ++j) {
          if (j == l)
            u_layer.insert(u_layer.end(), u_out.begin() + ptrdiff_t(at),
                           u_out.begin() + ptrdiff_t(at + size_t(n) * o));
          at += size_t(n) * o;
        }
      EXPECT_TRUE(same_bits(per_layer[size_t(l)], u_layer)) << kv << " layer " << l;
      EXPECT_EQ(mixed.stats().layer_bytes[size_t(l)], u.stats().layer_bytes[size_t(l)])
          << kv << " layer " << l;
    }
    // The narrow layer holds fewer bytes than the widest one.
    EXPECT_LT(mixed.stats().layer_bytes[1], mixed.stats().layer_bytes[2]) << kv;
  }
}

TEST(KvLayerShape, ForkContinuesIdentically) {
  const KvShape shape = mixed_shape();
  const RandomInputs in(shape, 260, 4);
  ThreadPool pool(2);
  for (const char* kv : {"f16", "k4v2"}) {
    kv::KvCache a(shape, kv_config(kv));
    feed_chunk(a, in, pool, 0, 150, nullptr);
    auto b = a.fork();
    EXPECT_GT(b->stats().shared_bytes, 0u);
    std::vector<float> from_a, from_b;
    for (int t = 150; t < 170; ++t) {
      feed_chunk(a, in, pool, t, 1, &from_a);
      feed_chunk(*b, in, pool, t, 1, &from_b);
    }
    EXPECT_TRUE(same_bits(from_a, from_b)) << kv;
  }
}

TEST(KvLayerShape, SaveLoadContinuesIdentically) {
  const KvShape shape = mixed_shape();
  const RandomInputs in(shape, 260, 8);
  ThreadPool pool(2);
  const std::string path = temp_dir() + "/mixed.tkvs";
  for (const char* kv : {"f16", "k4v2"}) {
    const kv::KvConfig config = kv_config(kv);
    kv::KvCache a(shape, config);
    feed_chunk(a, in, pool, 0, 200, nullptr);
    a.save(path, "model-M");
    std::vector<float> expect, got;
    for (int t = 200; t < 216; ++t) feed_chunk(a, in, pool, t, 1, &expect);

    kv::KvCache b(shape, config);
    b.load(path, "model-M");
    EXPECT_EQ(b.n_tokens(), 200);
    for (int t = 200; t < 216; ++t) feed_chunk(b, in, pool, t, 1, &got);
    EXPECT_TRUE(same_bits(expect, got)) << kv;

    // Another per-layer shape, or the widest layer's uniform shape, is refused.
    kv::KvCache other(KvShape::of_layers({{8, 4, 64, 64}, {4, 2, 32, 32}, {8, 1, 128, 128}}, 4096),
                      config);
    kv::KvCache wide(KvShape(3, 8, 4, 128, 4096), config);
    for (kv::KvCache* c : {&other, &wide}) {
      std::string e;
      try {
        c->load(path, "model-M");
      } catch (const Error& err) {
        e = err.what();
      }
      EXPECT_NE(e.find("KV shape 3x8x4x128:8/4/64/64,4/2/32/48,8/1/128/128 differs"),
                std::string::npos)
          << e;
      EXPECT_EQ(c->n_tokens(), 0);
    }
  }
  std::filesystem::remove(path);
}

// A uniform shape spelled per layer writes the same shape string as ever,
// so files of uniform models load whichever way the shape was made.
TEST(KvLayerShape, UniformShapeSpelledPerLayerReadsOldFiles) {
  const KvShape plain{2, 4, 2, 64, 1024};
  const KvShape spelled = KvShape::of_layers({{4, 2, 64, 64}, {4, 2, 64, 64}}, 1024);
  const RandomInputs in(plain, 80, 2);
  ThreadPool pool(1);
  const std::string path = temp_dir() + "/plain.tkvs";
  kv::KvCache a(plain, kv_config("k4v2"));
  feed_chunk(a, in, pool, 0, 70, nullptr);
  a.save(path, "model-P");
  kv::KvCache b(spelled, kv_config("k4v2"));
  b.load(path, "model-P");
  std::vector<float> expect, got;
  feed_chunk(a, in, pool, 70, 1, &expect);
  feed_chunk(b, in, pool, 70, 1, &got);
  EXPECT_TRUE(same_bits(expect, got));
  std::filesystem::remove(path);
}

TEST(KvLayerShape, SyntheticFillUsesEachLayersWidths) {
  const KvShape shape = mixed_shape();
  kv::KvCache c(shape, kv_config("k4v2"));
  c.fill_synthetic(300, 11);
  EXPECT_EQ(c.n_tokens(), 300);
  ThreadPool pool(1);
  const RandomInputs in(shape, 1, 1);
  std::vector<float> out;
  feed_chunk(c, in, pool, 0, 1, &out);
  size_t expect = 0;
  for (int l = 0; l < shape.n_layers; ++l)
    expect += size_t(shape.layer(l).n_heads) * shape.layer(l).v_dim;
  ASSERT_EQ(out.size(), expect);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
}

std::string construction_error(const KvShape& s) {
  try {
    kv::KvCache c(s, kv::KvConfig{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KvLayerShape, BadShapesAreRefused) {
  KvShape wrong_count = mixed_shape();
  wrong_count.n_layers = 2;
  EXPECT_NE(construction_error(wrong_count).find("3 layer shapes for 2 layers"), std::string::npos)
      << construction_error(wrong_count);
  EXPECT_NE(construction_error(KvShape::of_layers({{8, 4, 64, 64}, {6, 4, 64, 64}}, 64))
                .find("layer 1: 6 query heads is not a multiple of 4 KV heads"),
            std::string::npos);
  EXPECT_NE(construction_error(KvShape::of_layers({{8, 4, 64, 64}, {8, 4, 0, 64}}, 64))
                .find("invalid shape of layer 1"),
            std::string::npos);
  KvShape narrow = mixed_shape();
  narrow.head_dim = 64;  // not the widest layer's
  EXPECT_NE(construction_error(narrow).find("not the largest"), std::string::npos)
      << construction_error(narrow);
}

}  // namespace
}  // namespace tkv::test
