// The project's trained test model (head_dim 128, F16 weights), when present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "common/atomic_file.h"
#include "common/test_util.h"
#include "common/vec_math.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/ops.h"
#include "tokenizer/tokenizer.h"

namespace tkv::model {
namespace {

TEST(TkvTestModel, LoadsWithItsShapes) {
  TKV_REQUIRE_FIXTURE(path, "tkv-test-23M.gguf");
  const auto m = Model::load(path);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.n_embd, 512);
  EXPECT_EQ(c.n_layers, 6);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.n_ff, 1536);
  EXPECT_EQ(c.n_vocab, 4096);
  EXPECT_EQ(c.n_ctx_train, 4096);
  EXPECT_FLOAT_EQ(c.rope_base, 100000.0f);
  EXPECT_FALSE(c.tied_output);
  EXPECT_EQ(m->weights().layers[0].wq.type, DType::F16);
  EXPECT_EQ(m->weights().output.type, DType::F16);
}

// Teacher-forced over its own greedy continuation, a trained model is
// confident: the mean probability of its argmax is high and every logit is
// finite, through f16 KV at head_dim 128.
TEST(TkvTestModel, GreedyContinuationIsConfident) {
  TKV_REQUIRE_FIXTURE(path, "tkv-test-23M.gguf");
  const auto m = Model::load(path);
  kv::KvCache cache(m->kv_shape(256), kv::KvConfig{});
  ThreadPool pool(1);
  std::vector<int32_t> ids = {1};
  std::vector<float> logits = m->eval_last(cache, ids, pool);
  double sum_p = 0;
  for (int i = 0; i < 64; ++i) {
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    const int32_t next = int32_t(tkv::argmax(logits.data(), int64_t(logits.size())));
    sum_p += std::exp(double(logits[size_t(next)]) -
                      tkv::log_sum_exp(logits.data(), int64_t(logits.size())));
    ids.push_back(next);
    logits = m->eval_last(cache, std::span<const int32_t>(&ids.back(), 1), pool);
  }
  EXPECT_GT(sum_p / 64, 0.3) << "mean top-1 probability";
}

// Perplexity of the first 1024 tokens of the held-out text, every past token
// read back from the f16 pages. Training measured 18.07 on 1024-token windows
// of the same kind of text (mean over many windows; one window varies).
TEST(TkvTestModel, HeldOutPerplexityIsSane) {
  TKV_REQUIRE_FIXTURE(path, "tkv-test-23M.gguf");
  TKV_REQUIRE_FIXTURE(text_path, "tkv-test-heldout.txt");
  const auto m = Model::load(path);
  const auto tok = tok::Tokenizer::from_gguf(m->gguf());
  const std::string text = read_file(text_path).substr(0, 16384);
  auto ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  ASSERT_GE(ids.size(), 1024u);
  ASSERT_EQ(ids[0], tok.bos());
  ids.resize(1024);

  double ppl_by_kv[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    kv::KvConfig cfg;
    cfg.k = cfg.v = kv::CodecSpec{i == 0 ? kv::CodecKind::F16 : kv::CodecKind::F32};
    kv::KvCache cache(m->kv_shape(1024), cfg);
    ThreadPool pool(1);
    double nll = 0;
    EvalOptions opts;
    opts.all_logits = true;
    m->eval(
        cache, ids, pool,
        [&](int64_t pos, std::span<const float> logits) {
          if (pos + 1 >= int64_t(ids.size())) return;
          const float lse = tkv::log_sum_exp(logits.data(), int64_t(logits.size()));
          nll += double(lse) - double(logits[size_t(ids[size_t(pos) + 1])]);
        },
        opts);
    ppl_by_kv[i] = std::exp(nll / double(ids.size() - 1));
  }
  std::printf("tkv-test-23M perplexity, first 1024 held-out tokens: %.3f (f16 KV), %.3f (f32 KV)\n",
              ppl_by_kv[0], ppl_by_kv[1]);
  EXPECT_GT(ppl_by_kv[0], 10.0);
  EXPECT_LT(ppl_by_kv[0], 40.0);
  EXPECT_NEAR(ppl_by_kv[0], ppl_by_kv[1], 0.01 * ppl_by_kv[1]);
}

}  // namespace
}  // namespace tkv::model
