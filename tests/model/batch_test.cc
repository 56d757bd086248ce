// Model::eval_batch: many sequences through one forward pass. A sequence's
// logits must be bit-identical whether its item runs alone or in a batch
// (tested on quantized synthesized models, where the integer kernels hold
// it, on F16 weights, where decode rows take one matvec each, and on the
// real stories260K, F32); a budget failure stays with its item; several
// threads with their own contexts on one Model agree with one thread.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "common/test_util.h"
#include "common/vec_math.h"
#include "kv/kv_cache.h"
#include "model/context.h"
#include "model/model.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/gemm_amx.h"
#include "tensor/matmul.h"
#include "test_models.h"

namespace tkv::model {
namespace {

using Logit = std::vector<float>;
using test::same_bits;

kv::KvConfig kv_config(const std::string& shorthand) {
  kv::KvConfig c;
  EXPECT_TRUE(kv::parse_kv_shorthand(shorthand, c.k, c.v)) << shorthand;
  return c;
}

int32_t argmax_of(std::span<const float> l) {
  return int32_t(tkv::argmax(l.data(), int64_t(l.size())));
}

// One item alone through eval_batch; returns its kLast logits.
Logit run_alone(const Model& m, ExecutionContext& ctx, kv::KvCache& seq,
                std::span<const int32_t> tokens, ThreadPool& pool) {
  const BatchItem item{&seq, tokens, Logits::kLast};
  const auto st = m.eval_batch(ctx, std::span<const BatchItem>(&item, 1), pool);
  EXPECT_TRUE(st[0].ok()) << st[0].message;
  const auto l = ctx.logits(0);
  return Logit(l.begin(), l.end());
}

class Batch : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string which = GetParam();
    if (which == "stories") {
      path_ = test::model_path("stories260K.gguf");
      if (path_.empty())
        TKV_MISSING_FIXTURE << "fixture stories260K.gguf not found under " << test::models_dir();
      codecs_ = {"f16", "f32"};  // head_dim 8: no block or rotation codec fits
    } else if (which.rfind("gemma3_", 0) == 0 || which.rfind("oss_", 0) == 0) {
      // Sliding-window layers (8 tokens: the prompts span many windows),
      // sinks and YaRN (gpt-oss), post norms and GeGLU (gemma3).
      const bool gemma = which[0] == 'g';
      model::SynthSpec spec = test::small_spec(gemma ? "tiny-gemma3" : "gpt-oss-20b");
      spec.sliding_window = 8;
      spec.swa_period = 2;  // a window layer, then a global one
      path_ = test::write_model(spec, which.substr(which.find('_') + 1));
      codecs_ = {"f16", "q8_0", "k4v2", "k8v4", "f32", "k3v2", "k4v4", "q8_0"};
    } else if (which.rfind("moe_", 0) == 0) {  // mixture of experts: qwen3moe
      path_ = test::write_model(test::small_spec("qwen3-30b-a3b"), which.substr(4));
      codecs_ = {"f16", "q8_0", "k4v2", "k8v4", "f32", "k3v2", "k4v4", "q8_0"};
    } else {
      path_ = test::write_model(test::small_spec("llama-3.2-1b"), which);
      codecs_ = {"f16", "q8_0", "k4v2", "k8v4", "f32", "k3v2", "k4v4", "q8_0"};
    }
    model_ = Model::load(path_);
  }
  std::unique_ptr<kv::KvCache> sequence(size_t i, std::shared_ptr<kv::PagePool> pool = nullptr) {
    const kv::KvConfig c = kv_config(codecs_[i % codecs_.size()]);
    if (pool) return std::make_unique<kv::KvCache>(model_->kv_shape(4096), c, pool);
    return std::make_unique<kv::KvCache>(model_->kv_shape(4096), c);
  }
  int vocab() const { return model_->config().n_vocab; }

  std::string path_;
  std::vector<std::string> codecs_;
  std::unique_ptr<Model> model_;
};

// 8 sequences of different lengths and codecs decode together; each step's
// logits equal those of the same sequence decoding alone, bit for bit.
TEST_P(Batch, DecodeOfEightEqualsEachAlone) {
  const int lengths[8] = {3, 17, 40, 70, 5, 100, 64, 130};
  ThreadPool pool(2);
  ExecutionContext alone_ctx, batch_ctx;
  std::vector<std::unique_ptr<kv::KvCache>> alone, batched;
  std::vector<int32_t> next(8);
  for (size_t i = 0; i < 8; ++i) {
    alone.push_back(sequence(i));
    batched.push_back(sequence(i));
    const auto prompt = test::random_tokens(lengths[i], vocab(), uint32_t(i + 1));
    const Logit a = run_alone(*model_, alone_ctx, *alone[i], prompt, pool);
    const Logit b = run_alone(*model_, batch_ctx, *batched[i], prompt, pool);
    ASSERT_TRUE(same_bits(a, b));
    next[i] = argmax_of(a);
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<BatchItem> items;
    for (size_t i = 0; i < 8; ++i)
      items.push_back({batched[i].get(), {&next[i], 1}, Logits::kLast});
    const auto st = model_->eval_batch(batch_ctx, items, pool);
    for (size_t i = 0; i < 8; ++i) {
      ASSERT_TRUE(st[i].ok()) << st[i].message;
      const Logit a = run_alone(*model_, alone_ctx, *alone[i], {&next[i], 1}, pool);
      EXPECT_TRUE(same_bits(a, batch_ctx.logits(i)))
          << "sequence " << i << " (" << codecs_[i % codecs_.size()] << ") step " << step;
      next[i] = argmax_of(a);
    }
  }
  // The single-sequence Model::eval decodes to the same logits too.
  kv::KvCache via_eval(model_->kv_shape(1024), kv_config(codecs_[0]));
  const auto prompt = test::random_tokens(lengths[0], vocab(), 1);
  model_->eval_last(via_eval, prompt, pool);
  kv::KvCache via_batch(model_->kv_shape(1024), kv_config(codecs_[0]));
  const Logit first = run_alone(*model_, alone_ctx, via_batch, prompt, pool);
  const int32_t t = argmax_of(first);
  EXPECT_TRUE(same_bits(model_->eval_last(via_eval, {&t, 1}, pool),
                        run_alone(*model_, alone_ctx, via_batch, {&t, 1}, pool)));
  EXPECT_GT(batch_ctx.bytes(), 0u);
  EXPECT_GE(batch_ctx.peak_bytes(), batch_ctx.bytes());
}

// Prefill chunks (short and long, last and every-token logits) mixed with
// decode tokens in one batch: every item's logits equal its run alone.
TEST_P(Batch, MixedPrefillAndDecodeEqualsEachAlone) {
  ThreadPool pool(2);
  ExecutionContext ctx;
  const int prompt_len[6] = {20, 33, 9, 0, 0, 0};  // 0: a decoding sequence
  std::vector<std::unique_ptr<kv::KvCache>> alone, batched;
  std::vector<std::vector<int32_t>> toks(6);
  for (size_t i = 0; i < 6; ++i) {
    alone.push_back(sequence(i));
    batched.push_back(sequence(i));
    const auto history = test::random_tokens(30 + 7 * int(i), vocab(), uint32_t(40 + i));
    run_alone(*model_, ctx, *alone[i], history, pool);
    run_alone(*model_, ctx, *batched[i], history, pool);
    toks[i] = test::random_tokens(prompt_len[i] > 0 ? prompt_len[i] : 1, vocab(), uint32_t(90 + i));
  }
  const Logits want[6] = {Logits::kLast, Logits::kAll,  Logits::kLast,
                          Logits::kLast, Logits::kNone, Logits::kAll};
  std::vector<BatchItem> items;
  for (size_t i = 0; i < 6; ++i) items.push_back({batched[i].get(), toks[i], want[i]});
  std::vector<std::vector<std::pair<int64_t, Logit>>> got(6);
  const auto st = model_->eval_batch(ctx, items, pool, [&](size_t item, int64_t pos, auto l) {
    got[item].emplace_back(pos, Logit(l.begin(), l.end()));
  });
  std::vector<Logit> last(6);
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(st[i].ok()) << st[i].message;
    const auto l = ctx.logits(i);
    last[i].assign(l.begin(), l.end());
  }
  ExecutionContext alone_ctx;
  for (size_t i = 0; i < 6; ++i) {
    const BatchItem item{alone[i].get(), toks[i], want[i]};
    std::vector<std::pair<int64_t, Logit>> expect;
    const auto s = model_->eval_batch(
        alone_ctx, std::span<const BatchItem>(&item, 1), pool,
        [&](size_t, int64_t pos, auto l) { expect.emplace_back(pos, Logit(l.begin(), l.end())); });
    ASSERT_TRUE(s[0].ok());
    ASSERT_EQ(got[i].size(), expect.size()) << "item " << i;
    for (size_t r = 0; r < expect.size(); ++r) {
      EXPECT_EQ(got[i][r].first, expect[r].first);
      EXPECT_TRUE(same_bits(got[i][r].second, expect[r].second)) << "item " << i << " row " << r;
    }
    EXPECT_EQ(want[i] == Logits::kLast, !last[i].empty());
    if (want[i] == Logits::kLast) {
      EXPECT_TRUE(same_bits(last[i], alone_ctx.logits(0)));
    }
    EXPECT_EQ(batched[i]->n_tokens(), alone[i]->n_tokens());
  }
  EXPECT_EQ(got[1].size(), toks[1].size());  // every row of a kAll prefill chunk
  EXPECT_TRUE(got[4].empty());
}

// Prefill chunks run in layer parts over several calls, next to decode
// tokens that run every layer in each call: the chunks' logits, and the
// decode tokens' after them, equal the same chunks run whole, bit for bit
// (a small chunk on the exact kernels and a large one on the GEMM).
TEST_P(Batch, LayerSplitChunkEqualsWhole) {
  ThreadPool pool(2);
  ExecutionContext ctx, whole_ctx;
  const int n_layers = model_->config().n_layers;
  ASSERT_GE(n_layers, 2);
  const int chunk_len[2] = {16, 40};
  std::vector<std::unique_ptr<kv::KvCache>> split, whole;
  std::vector<std::vector<int32_t>> chunks;
  for (size_t i = 0; i < 3; ++i) {  // 0, 1: prefilling in parts; 2: decoding
    split.push_back(sequence(i));
    whole.push_back(sequence(i));
    const auto history = test::random_tokens(20 + 5 * int(i), vocab(), uint32_t(60 + i));
    run_alone(*model_, ctx, *split[i], history, pool);
    run_alone(*model_, whole_ctx, *whole[i], history, pool);
  }
  for (size_t i = 0; i < 2; ++i)
    chunks.push_back(test::random_tokens(chunk_len[i], vocab(), uint32_t(70 + i)));
  // The whole chunks, then one decode token each.
  std::vector<Logit> expect(2);
  for (size_t i = 0; i < 2; ++i)
    expect[i] = run_alone(*model_, whole_ctx, *whole[i], chunks[i], pool);
  int32_t next = 5;
  // Parts: chunk 0 in layer parts of 1, 2, ...; chunk 1 in two halves,
  // starting a call later; the decoding sequence in every call.
  ChunkParts parts[2];
  int done[2] = {0, 0};
  for (int call = 0; done[0] < n_layers || done[1] < n_layers; ++call) {
    std::vector<BatchItem> items;
    items.push_back({split[2].get(), {&next, 1}, Logits::kLast});
    const int want[2] = {std::min(n_layers, done[0] + call + 1),
                         call == 0 ? 0 : std::min(n_layers, done[1] + (n_layers + 1) / 2)};
    std::vector<size_t> slot(2, 0);
    for (size_t i = 0; i < 2; ++i) {
      if (want[i] <= done[i]) continue;
      slot[i] = items.size();
      EXPECT_EQ(parts[i].layers_done(), done[i]);
      parts[i].run_until(want[i] == n_layers ? 0 : want[i]);
      items.push_back({split[i].get(), chunks[i],
                       want[i] == n_layers ? Logits::kLast : Logits::kNone, &parts[i]});
    }
    const auto st = model_->eval_batch(ctx, items, pool);
    for (const auto& s : st) ASSERT_TRUE(s.ok()) << s.message;
    const Logit decode(ctx.logits(0).begin(), ctx.logits(0).end());
    EXPECT_TRUE(same_bits(decode, run_alone(*model_, whole_ctx, *whole[2], {&next, 1}, pool)))
        << "call " << call;
    for (size_t i = 0; i < 2; ++i) {
      if (want[i] <= done[i]) continue;
      done[i] = want[i];
      if (done[i] < n_layers) {
        EXPECT_EQ(split[i]->n_tokens(), whole[i]->n_tokens() - chunk_len[i]);  // mid-chunk
        EXPECT_TRUE(ctx.logits(slot[i]).empty());
      } else {
        EXPECT_TRUE(same_bits(ctx.logits(slot[i]), expect[i])) << "chunk " << i;
      }
    }
    next = argmax_of(decode);
  }
  // Decoding on after the split chunks: still the whole chunks' bits.
  for (size_t i = 0; i < 2; ++i) {
    const int32_t t = argmax_of(expect[i]);
    EXPECT_TRUE(same_bits(run_alone(*model_, ctx, *split[i], {&t, 1}, pool),
                          run_alone(*model_, whole_ctx, *whole[i], {&t, 1}, pool)));
  }
}

// The last layer runs its output projection and FFN only for the rows
// whose logits are wanted. A 12-token chunk (exact kernels) asking for every
// row's logits keeps all 12 rows, asking for the last keeps one, asking for
// none keeps none: the last row's logits are the same bits. A 40-token chunk
// (GEMM) projects every-row logits with the GEMM and the last row's with
// matvec, so those agree within rounding (the bits of the kept row itself:
// Matmul.TokenResultsDoNotDependOnBatchSize). Either way every row's K/V are in
// the sequence: the next token decodes to the same bits after each.
TEST_P(Batch, LastLayerKeepsOnlyTheRowsWhoseLogitsAreWanted) {
  ThreadPool pool(2);
  ExecutionContext ctx;
  for (const int len : {12, 40}) {
    const auto chunk = test::random_tokens(len, vocab(), uint32_t(100 + len));
    std::vector<Logit> last(3);
    std::vector<std::unique_ptr<kv::KvCache>> seqs;
    for (const Logits want : {Logits::kLast, Logits::kAll, Logits::kNone}) {
      seqs.push_back(sequence(0));
      const BatchItem item{seqs.back().get(), chunk, want};
      const auto st = model_->eval_batch(ctx, std::span<const BatchItem>(&item, 1), pool,
                                         [&](size_t, int64_t pos, auto l) {
                                           if (pos == len - 1)
                                             last[seqs.size() - 1].assign(l.begin(), l.end());
                                         });
      ASSERT_TRUE(st[0].ok()) << st[0].message;
      EXPECT_EQ(seqs.back()->n_tokens(), len);
    }
    ASSERT_EQ(last[0].size(), size_t(vocab()));
    ASSERT_EQ(last[1].size(), size_t(vocab()));
    EXPECT_TRUE(last[2].empty());
    if (len <= kIntMatmulMaxTokens) {
      EXPECT_TRUE(same_bits(last[0], last[1])) << len << " tokens";
    } else {
      float scale = 0, diff = 0;
      for (size_t i = 0; i < last[0].size(); ++i) {
        scale = std::max(scale, std::fabs(last[0][i]));
        diff = std::max(diff, std::fabs(last[0][i] - last[1][i]));
      }
      // Quantized weights: the GEMM's f32 activations against matvec's
      // quantized ones (~1% here); another row's logits would differ by ~scale.
      EXPECT_LE(diff, 0.05f * scale) << len << " tokens";
    }
    const int32_t next = argmax_of(last[0]);
    const Logit after = run_alone(*model_, ctx, *seqs[0], {&next, 1}, pool);
    for (size_t i = 1; i < 3; ++i)
      EXPECT_TRUE(same_bits(after, run_alone(*model_, ctx, *seqs[i], {&next, 1}, pool)))
          << len << " tokens, logits mode " << i;
  }
}

// A bad layer range or carry is the item's error; the others run.
TEST_P(Batch, BadLayerSplitItemsFailAlone) {
  ThreadPool pool(1);
  ExecutionContext ctx;
  const int n_layers = model_->config().n_layers;
  auto a = sequence(0), b = sequence(1), d = sequence(2), e = sequence(3);
  const auto toks = test::random_tokens(4, vocab(), 3);
  // a: a chunk begun in parts, continued with other tokens than its carry's.
  ChunkParts pa, pb, pd;
  pa.run_until(1);
  const BatchItem first_part[] = {{a.get(), toks, Logits::kNone, &pa}};
  ASSERT_TRUE(model_->eval_batch(ctx, first_part, pool)[0].ok());
  ASSERT_EQ(pa.layers_done(), 1);
  pa.run_until(0);
  pb.run_until(1);             // logits before the last layer
  pd.run_until(n_layers + 1);  // past the last layer
  const std::vector<BatchItem> items = {
      {a.get(), std::span<const int32_t>(toks).first(3), Logits::kLast, &pa},
      {b.get(), toks, Logits::kLast, &pb},
      {d.get(), toks, Logits::kNone, &pd},
      {e.get(), toks, Logits::kLast}};
  const auto st = model_->eval_batch(ctx, items, pool);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(st[i].code, ItemStatus::Code::kInvalid) << i;
    EXPECT_FALSE(st[i].message.empty());
  }
  EXPECT_NE(st[0].message.find("carry"), std::string::npos) << st[0].message;
  EXPECT_NE(st[1].message.find("no logits"), std::string::npos) << st[1].message;
  EXPECT_NE(st[2].message.find("layers"), std::string::npos) << st[2].message;
  EXPECT_TRUE(st[3].ok());
  EXPECT_EQ(a->n_tokens(), 0);
  EXPECT_EQ(e->n_tokens(), 4);
}

// In a shared pool with a small budget, an item whose pages do not fit fails
// alone: its sequence and the pool unchanged, the other items' logits as if
// they had run without it, and everything goes on afterwards.
TEST_P(Batch, ItemOverBudgetFailsAlone) {
  ThreadPool pool(2);
  ExecutionContext ctx, alone_ctx;
  auto shared = std::make_shared<kv::PagePool>(512u << 10);
  std::vector<std::unique_ptr<kv::KvCache>> seqs, alone;
  std::vector<int32_t> next(4);
  for (size_t i = 0; i < 4; ++i) {
    seqs.push_back(sequence(i, shared));
    alone.push_back(sequence(i));
    const auto prompt = test::random_tokens(12 + int(i), vocab(), uint32_t(7 + i));
    run_alone(*model_, ctx, *seqs[i], prompt, pool);
    next[i] = argmax_of(run_alone(*model_, alone_ctx, *alone[i], prompt, pool));
  }
  const auto huge = test::random_tokens(3000, vocab(), 99);  // far more pages than the budget holds
  const int64_t before_tokens = seqs[3]->n_tokens();
  const uint64_t before_bytes = shared->stats().bytes_in_use;
  std::vector<BatchItem> items;
  for (size_t i = 0; i < 3; ++i) items.push_back({seqs[i].get(), {&next[i], 1}, Logits::kLast});
  items.push_back({seqs[3].get(), huge, Logits::kLast});
  auto st = model_->eval_batch(ctx, items, pool);
  EXPECT_EQ(st[3].code, ItemStatus::Code::kBudgetExceeded);
  EXPECT_FALSE(st[3].message.empty());
  EXPECT_TRUE(ctx.logits(3).empty());
  EXPECT_EQ(seqs[3]->n_tokens(), before_tokens);
  EXPECT_GE(shared->stats().bytes_in_use, before_bytes);  // the others' new pages
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(st[i].ok()) << st[i].message;
    const Logit a = run_alone(*model_, alone_ctx, *alone[i], {&next[i], 1}, pool);
    EXPECT_TRUE(same_bits(a, ctx.logits(i))) << "sequence " << i;
    next[i] = argmax_of(a);
  }
  // The failed sequence goes on with a decode token like the others.
  next[3] = argmax_of(run_alone(*model_, alone_ctx, *alone[3], {&next[3], 1}, pool));
  items.clear();
  for (size_t i = 0; i < 4; ++i) items.push_back({seqs[i].get(), {&next[i], 1}, Logits::kLast});
  st = model_->eval_batch(ctx, items, pool);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_TRUE(st[i].ok()) << st[i].message;
    if (i < 3) {
      EXPECT_TRUE(
          same_bits(run_alone(*model_, alone_ctx, *alone[i], {&next[i], 1}, pool), ctx.logits(i)));
    }
  }
  // And the KvBudgetExceeded reaches the caller of the single-sequence eval.
  EXPECT_THROW(model_->eval_last(*seqs[3], huge, pool), kv::KvBudgetExceeded);
}

// Bad items are reported, not thrown, and do not stop the rest.
TEST_P(Batch, InvalidItemsFailAlone) {
  ThreadPool pool(1);
  ExecutionContext ctx;
  auto a = sequence(0), b = sequence(1);
  const int32_t bad = vocab();
  const int32_t good = 1;
  const std::vector<BatchItem> items = {{a.get(), {&bad, 1}, Logits::kLast},
                                        {b.get(), {&good, 1}, Logits::kLast},
                                        {b.get(), {&good, 1}, Logits::kLast},
                                        {nullptr, {&good, 1}, Logits::kLast}};
  const auto st = model_->eval_batch(ctx, items, pool);
  EXPECT_EQ(st[0].code, ItemStatus::Code::kInvalid);
  EXPECT_NE(st[0].message.find("outside the vocabulary"), std::string::npos) << st[0].message;
  EXPECT_TRUE(st[1].ok());
  EXPECT_EQ(st[2].code, ItemStatus::Code::kInvalid);
  EXPECT_NE(st[2].message.find("same sequence"), std::string::npos) << st[2].message;
  EXPECT_EQ(st[3].code, ItemStatus::Code::kInvalid);
  EXPECT_EQ(a->n_tokens(), 0);
  EXPECT_EQ(b->n_tokens(), 1);
}

// Four threads, each with its own context and thread pool, decode their own
// sequences on one Model at once: the same logits as one thread doing all.
TEST_P(Batch, ThreadsWithOwnContextsAgreeWithOne) {
  constexpr int kThreads = 4, kSteps = 6;
  auto run = [&](size_t i, ExecutionContext& ctx, ThreadPool& pool) {
    auto seq = sequence(i);
    std::vector<Logit> out;
    Logit l = run_alone(*model_, ctx, *seq,
                        test::random_tokens(20 + 9 * int(i), vocab(), uint32_t(i)), pool);
    for (int s = 0; s < kSteps; ++s) {
      const int32_t t = argmax_of(l);
      l = run_alone(*model_, ctx, *seq, {&t, 1}, pool);
      out.push_back(l);
    }
    return out;
  };
  std::vector<std::vector<Logit>> serial(kThreads), parallel(kThreads);
  {
    ThreadPool pool(1);
    ExecutionContext ctx;
    for (size_t i = 0; i < kThreads; ++i) serial[i] = run(i, ctx, pool);
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ThreadPool pool(1);
      ExecutionContext ctx;
      parallel[i] = run(i, ctx, pool);
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < kThreads; ++i) {
    ASSERT_EQ(parallel[i].size(), size_t(kSteps));
    for (int s = 0; s < kSteps; ++s) EXPECT_TRUE(same_bits(serial[i][s], parallel[i][s]));
  }
}

// The float small-batch product equals matvec token by token, bit for bit,
// whatever the column count (vector steps, one extra vector, scalar tail),
// the batch size and the thread count.
TEST(MatvecBatch, FloatWeightsEqualMatvecPerToken) {
  for (const DType type : {DType::F32, DType::F16, DType::BF16}) {
    for (const int64_t cols : {64, 72, 172, 1000}) {
      const int64_t rows = 37;
      std::vector<float> wf(size_t(rows * cols));
      uint32_t s = 5;
      for (auto& v : wf) {
        s = s * 1664525u + 1013904223u;
        v = float(int32_t(s >> 9) - (1 << 22)) / float(1 << 22);
      }
      std::vector<uint8_t> bytes(row_bytes(type, cols) * size_t(rows));
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(type, wf.data() + r * cols, bytes.data() + size_t(r) * row_bytes(type, cols),
                     cols);
      const WeightMatrix w = make_weight(type, bytes.data(), rows, cols);
      for (const int threads : {1, 2}) {
        ThreadPool pool(threads);
        for (const int64_t n : {1, 3, 4, 9}) {
          std::vector<float> x(size_t(n * cols)), y(size_t(n * rows)),
              one(static_cast<size_t>(rows));
          for (auto& v : x) {
            s = s * 1664525u + 1013904223u;
            v = float(int32_t(s >> 9) - (1 << 22)) / float(1 << 21);
          }
          matvec_batch(w, x.data(), n, y.data(), pool);
          for (int64_t t = 0; t < n; ++t) {
            matvec(w, x.data() + t * cols, one.data(), pool);
            EXPECT_TRUE(same_bits(one, std::span<const float>(y.data() + t * rows, size_t(rows))))
                << dtype_name(type) << " cols " << cols << " n " << n << " token " << t;
          }
        }
      }
    }
  }
}

// The FFN's rows per product call follow the AMX preference (512 where F16
// weights take AMX, else 128): a context sized under one keeps a chunk's
// FFN rows under the other, with the logits of a fresh context.
TEST(BatchFfnRows, AContextFollowsTheRowsPerCallAsTheyGrow) {
  const bool before = test::set_kernel_switch(&KernelConfig::amx, true);
  if (!kernels::amx_gemm_active()) {
    test::set_kernel_switch(&KernelConfig::amx, before);
    GTEST_SKIP() << "no AMX on this CPU or target: the rows per call never change";
  }
  auto model = Model::load(test::write_model(test::small_spec("llama-3.2-1b"), "f16"));
  const auto prompt = test::random_tokens(300, model->config().n_vocab, 5);
  ThreadPool pool(2);
  auto cache = [&] { return kv::KvCache(model->kv_shape(512), kv_config("f16")); };
  ExecutionContext reused, fresh;
  test::set_kernel_switch(&KernelConfig::amx, false);
  kv::KvCache first = cache();
  run_alone(*model, reused, first, prompt, pool);  // FFN buffers for 128 rows
  test::set_kernel_switch(&KernelConfig::amx, true);
  kv::KvCache a = cache(), b = cache();
  const Logit expected = run_alone(*model, fresh, a, prompt, pool);
  const Logit got = run_alone(*model, reused, b, prompt, pool);
  test::set_kernel_switch(&KernelConfig::amx, before);
  EXPECT_TRUE(same_bits(expected, got));
}

INSTANTIATE_TEST_SUITE_P(Models, Batch,
                         ::testing::Values("q8_0", "q4_K_M", "f16", "stories", "moe_q4_K_M",
                                           "moe_f16", "gemma3_q8_0", "oss_f16"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tkv::model
