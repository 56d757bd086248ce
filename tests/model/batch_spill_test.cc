// Model::eval_batch with the pool's disk tier: a page that cannot be read
// back (here: the page file of one sequence's pool overwritten) fails only
// that item, part-way through the step, as kSpillError with its sequence
// cleared; the other items' logits are bit-identical to running them alone
// without a disk tier, and the failed sequence can be fed again.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/test_util.h"
#include "kv/kv_cache.h"
#include "model/context.h"
#include "model/model.h"
#include "model/synth.h"
#include "test_models.h"

namespace tkv::model {
namespace {

namespace fs = std::filesystem;
using Logit = std::vector<float>;
using test::page_file_fd;
using test::same_bits;

Logit run_alone(const Model& m, ExecutionContext& ctx, kv::KvCache& seq,
                std::span<const int32_t> tokens, ThreadPool& pool) {
  const BatchItem item{&seq, tokens, Logits::kLast};
  const auto st = m.eval_batch(ctx, std::span<const BatchItem>(&item, 1), pool);
  EXPECT_TRUE(st[0].ok()) << st[0].message;
  const auto l = ctx.logits(0);
  return Logit(l.begin(), l.end());
}

// Feeds `prompt` in chunks of kChunk tokens (one item per call); the last chunk's logits.
constexpr int kChunk = 128;
Logit prefill(const Model& m, ExecutionContext& ctx, kv::KvCache& seq,
              std::span<const int32_t> prompt, ThreadPool& pool) {
  Logit last;
  for (size_t done = 0; done < prompt.size(); done += kChunk)
    last = run_alone(m, ctx, seq,
                     prompt.subspan(done, std::min<size_t>(kChunk, prompt.size() - done)), pool);
  return last;
}

kv::KvConfig k4v2() {
  kv::KvConfig config;
  EXPECT_TRUE(kv::parse_kv_shorthand("k4v2", config.k, config.v));
  return config;
}

std::string spill_dir(int i) {
  const std::string dir =
      test::temp_dir() + "/batch_spill_" + std::to_string(i) + "_" + std::to_string(::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(BatchSpill, UnreadablePageFailsOnlyItsItem) {
  const std::string path = test::write_model(test::small_spec("llama-3.2-1b"), "q8_0");
  const auto model = Model::load(path);
  const int vocab = model->config().n_vocab;
  ThreadPool pool(2);
  ExecutionContext ctx, alone_ctx;
  const kv::KvConfig config = k4v2();
  constexpr int kSeqs = 3, kPrompt = 700;

  std::vector<std::unique_ptr<kv::KvCache>> plain, spilled;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Logit> prompt_logits;
  std::vector<int32_t> next;
  for (int i = 0; i < kSeqs; ++i) {
    prompts.push_back(test::random_tokens(kPrompt, vocab, uint32_t(5 + i)));
    plain.push_back(std::make_unique<kv::KvCache>(model->kv_shape(4096), config));
    prompt_logits.push_back(prefill(*model, alone_ctx, *plain.back(), prompts.back(), pool));
    next.push_back(int32_t(i + 1));
  }
  // Each sequence in its own pool with a disk tier holding a quarter of its pages in RAM.
  const kv::KvStats full = plain[0]->stats();
  kv::KvConfig tiered = config;
  tiered.budget_bytes = full.f16_bytes + full.page_bytes / 4;
  std::vector<std::string> dirs;
  for (int i = 0; i < kSeqs; ++i) {
    dirs.push_back(spill_dir(i));
    tiered.spill_dir = dirs.back();
    spilled.push_back(std::make_unique<kv::KvCache>(model->kv_shape(4096), tiered));
    EXPECT_TRUE(same_bits(prefill(*model, ctx, *spilled.back(), prompts[size_t(i)], pool),
                          prompt_logits[size_t(i)]));
    ASSERT_GT(spilled.back()->pool()->stats().spilled_pages, 0);
  }

  // Sequence 1's page file is overwritten: every page of it on disk is unreadable.
  const int fd = page_file_fd(dirs[1]);
  ASSERT_GE(fd, 0);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  ASSERT_GT(size, 0);
  const std::vector<uint8_t> zeros(size_t(size), 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), 0), ssize_t(size));

  std::vector<BatchItem> items;
  for (int i = 0; i < kSeqs; ++i)
    items.push_back({spilled[size_t(i)].get(), {&next[size_t(i)], 1}, Logits::kLast});
  auto st = model->eval_batch(ctx, items, pool);
  EXPECT_EQ(st[1].code, ItemStatus::Code::kSpillError);
  EXPECT_NE(st[1].message.find("checksum"), std::string::npos) << st[1].message;
  EXPECT_TRUE(st[1].error != nullptr);
  EXPECT_TRUE(ctx.logits(1).empty());
  EXPECT_EQ(spilled[1]->n_tokens(), 0);  // cleared, usable
  EXPECT_EQ(spilled[1]->stats().pages_allocated, 0);
  for (int i : {0, 2}) {
    ASSERT_TRUE(st[size_t(i)].ok()) << st[size_t(i)].message;
    const Logit want = run_alone(*model, alone_ctx, *plain[size_t(i)], {&next[size_t(i)], 1}, pool);
    EXPECT_TRUE(same_bits(ctx.logits(size_t(i)), want)) << "sequence " << i;
  }

  // The next step: the others decode on, the cleared one is fed the start of its prompt again.
  for (int i : {0, 2}) next[size_t(i)] = int32_t(10 + i);
  const std::span<const int32_t> start(prompts[1].data(), kChunk);
  items[1].tokens = start;
  st = model->eval_batch(ctx, items, pool);
  for (int i = 0; i < kSeqs; ++i) ASSERT_TRUE(st[size_t(i)].ok()) << st[size_t(i)].message;
  kv::KvCache fresh(model->kv_shape(4096), config);
  EXPECT_TRUE(same_bits(ctx.logits(1), run_alone(*model, alone_ctx, fresh, start, pool)));
  EXPECT_EQ(spilled[1]->n_tokens(), kChunk);
  for (int i : {0, 2}) {
    const Logit want = run_alone(*model, alone_ctx, *plain[size_t(i)], {&next[size_t(i)], 1}, pool);
    EXPECT_TRUE(same_bits(ctx.logits(size_t(i)), want)) << "sequence " << i;
  }
  // The single-sequence eval passes the error on, the sequence cleared the same way.
  prefill(*model, ctx, *spilled[1], std::span<const int32_t>(prompts[1]).subspan(kChunk), pool);
  ASSERT_GE(spilled[1]->pool()->stats().spilled_pages, 1);
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), 0), ssize_t(size));
  const int32_t one = 3;
  EXPECT_THROW(model->eval_last(*spilled[1], {&one, 1}, pool), kv::KvSpillError);
  EXPECT_EQ(spilled[1]->n_tokens(), 0);
  for (const auto& d : dirs) fs::remove_all(d);
}

// A hybrid model's recurrent states move to the disk tier like pages: three
// tiny-qwen35 sequences in one pool whose budget holds fewer states than
// they have (each step's states come back from disk) give the logits they
// give without a disk tier, bit for bit; a state that cannot be read back
// fails only its item.
TEST(BatchSpill, HybridStatesOnDiskGiveTheSameLogits) {
  const std::string path = test::write_model(model::synth_preset("tiny-qwen35"));
  const auto model = Model::load(path);
  const int vocab = model->config().n_vocab;
  ThreadPool pool(2);
  ExecutionContext ctx, alone_ctx;
  const kv::KvConfig config = k4v2();
  constexpr int kSeqs = 3, kPrompt = 300;
  std::vector<std::unique_ptr<kv::KvCache>> plain;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<Logit> want;
  for (int i = 0; i < kSeqs; ++i) {
    prompts.push_back(test::random_tokens(kPrompt, vocab, uint32_t(21 + i)));
    plain.push_back(std::make_unique<kv::KvCache>(model->kv_shape(1024), config));
    want.push_back(prefill(*model, alone_ctx, *plain.back(), prompts.back(), pool));
  }
  const kv::KvStats one = plain[0]->stats();
  ASSERT_GT(one.state_bytes, 0u);
  // Room for every sequence's sinks, ring and pages, and one sequence's states.
  const std::string dir = spill_dir(9);
  auto shared = std::make_shared<kv::PagePool>(
      kSeqs * (one.persistent_bytes - one.state_bytes) + one.state_bytes + one.state_bytes / 2,
      dir);
  std::vector<std::unique_ptr<kv::KvCache>> spilled;
  for (int i = 0; i < kSeqs; ++i)
    spilled.push_back(std::make_unique<kv::KvCache>(model->kv_shape(1024), config, shared));
  // Chunk by chunk in turn: each sequence's states went to disk for the others'.
  std::vector<Logit> got(kSeqs);
  for (size_t done = 0; done < size_t(kPrompt); done += kChunk)
    for (int i = 0; i < kSeqs; ++i) {
      const auto part = std::span<const int32_t>(prompts[size_t(i)])
                            .subspan(done, std::min<size_t>(kChunk, kPrompt - done));
      got[size_t(i)] = run_alone(*model, ctx, *spilled[size_t(i)], part, pool);
    }
  EXPECT_GT(shared->stats().spill_reads, 0);
  for (int i = 0; i < kSeqs; ++i)
    EXPECT_TRUE(same_bits(got[size_t(i)], want[size_t(i)])) << "sequence " << i;

  // Every page and state on disk unreadable: the next step fails the items
  // whose memory is there, with their sequences cleared and usable.
  const int fd = page_file_fd(dir);
  ASSERT_GE(fd, 0);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  const std::vector<uint8_t> zeros(size_t(size), 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), 0), ssize_t(size));
  std::vector<int32_t> next = {1, 2, 3};
  std::vector<BatchItem> items;
  for (int i = 0; i < kSeqs; ++i)
    items.push_back({spilled[size_t(i)].get(), {&next[size_t(i)], 1}, Logits::kLast});
  const auto st = model->eval_batch(ctx, items, pool);
  int failed = 0;
  for (int i = 0; i < kSeqs; ++i) {
    if (st[size_t(i)].ok()) continue;
    ++failed;
    EXPECT_EQ(st[size_t(i)].code, ItemStatus::Code::kSpillError) << st[size_t(i)].message;
    EXPECT_EQ(spilled[size_t(i)]->n_tokens(), 0);
  }
  EXPECT_GE(failed, 1);
  const std::span<const int32_t> start(prompts[0].data(), kChunk);
  kv::KvCache fresh(model->kv_shape(1024), config);
  spilled[0]->clear();
  EXPECT_TRUE(same_bits(run_alone(*model, ctx, *spilled[0], start, pool),
                        run_alone(*model, alone_ctx, fresh, start, pool)));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tkv::model
