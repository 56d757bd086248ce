// The generation loop (runtime/generation.h) on the real stories260K model:
// max tokens, stop strings that straddle token boundaries, cancelling from
// the text callback.
#include "runtime/generation.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/fault_points.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tkv::runtime {
namespace {

using Fixture = ModelFixture;

Fixture load(const std::string& path) {
  return load_model_fixture(path, 256, "Once upon a time");
}

sample::SamplerConfig greedy() {
  sample::SamplerConfig s;
  s.temperature = 0;
  return s;
}

// Greedy text after the prompt, one piece per on_text call.
struct Streamed {
  TextGenerateResult result;
  std::vector<std::string> pieces;
  std::string text;
};

Streamed stream(Fixture& f, int64_t max_tokens, const std::vector<std::string>& stops,
                int cancel_after = -1) {
  f.session->clear();
  f.session->feed(f.prompt);
  f.session->set_sampler(greedy());
  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.stop_at_eog = false;
  Streamed s;
  const ReplyText text{
      .stops = stops, .start = tok::StreamDecoder::Start::kTextStart, .spelled_after = f.prompt};
  s.result = generate_text(*f.session, options, text, [&](std::string_view t) {
    s.pieces.emplace_back(t);
    s.text += t;
    return cancel_after < 0 || int(s.pieces.size()) < cancel_after;
  });
  return s;
}

TEST(Generation, MaxTokensGeneratesExactlyThatManyAndFeedsAllButTheLast) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  const Streamed s = stream(f, 7, {});
  EXPECT_EQ(s.result.generation.reason, StopReason::kLength);
  EXPECT_EQ(s.result.generation.n_generated, 7);
  EXPECT_EQ(s.result.generation.n_decoded, 6);
  EXPECT_EQ(f.session->tokens().size(), f.prompt.size() + 6);
  EXPECT_FALSE(s.text.empty());
}

TEST(Generation, StopStringAcrossATokenBoundaryIsNeverShown) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  const Streamed full = stream(f, 40, {});
  // A stop string made of the end of one token's text and the start of the
  // next one's, at its first occurrence in the text.
  std::string stop;
  size_t at = 0, offset = 0;
  for (size_t i = 0; i + 1 < full.pieces.size() && stop.empty();
       offset += full.pieces[i++].size()) {
    const std::string& a = full.pieces[i];
    const std::string& b = full.pieces[i + 1];
    if (a.size() < 2 || b.size() < 2) continue;
    const std::string candidate = a.substr(a.size() - 2) + b.substr(0, 2);
    if (full.text.find(candidate) == offset + a.size() - 2) {
      stop = candidate;
      at = offset + a.size() - 2;
    }
  }
  ASSERT_FALSE(stop.empty()) << full.text;
  const Streamed cut = stream(f, 40, {stop});
  EXPECT_EQ(cut.result.generation.reason, StopReason::kStopString);
  EXPECT_EQ(cut.result.stop_string, stop);
  EXPECT_EQ(cut.text, full.text.substr(0, at));
  EXPECT_LT(cut.result.generation.n_generated, full.result.generation.n_generated);
}

TEST(Generation, OnTextReturningFalseCancels) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  const Streamed s = stream(f, 40, {}, /*cancel_after=*/3);
  EXPECT_EQ(s.result.generation.reason, StopReason::kCancelled);
  EXPECT_EQ(s.pieces.size(), 3u);
  // The token whose text cancelled was not fed back.
  EXPECT_EQ(int64_t(f.session->tokens().size()),
            int64_t(f.prompt.size()) + s.result.generation.n_generated - 1);
  EXPECT_STREQ(stop_reason_name(StopReason::kCancelled), "cancelled");
}

TEST(Generation, InterruptFlagStopsBeforeSampling) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  f.session->feed(f.prompt);
  f.session->set_sampler(greedy());
  std::atomic<bool> interrupt{true};
  GenerateOptions options;
  options.interrupt = &interrupt;
  const GenerateResult r = generate(*f.session, options, [](int32_t) { return true; });
  EXPECT_EQ(r.reason, StopReason::kInterrupted);
  EXPECT_EQ(r.n_generated, 0);
}

// A feed whose page read back fails part-way (the disk tier's fault point)
// throws KvSpillError and leaves the session empty, its history in step with
// its cleared cache; it can be fed again.
TEST(Generation, DiskTierFailureMidFeedClearsTheSession) {
  TKV_REQUIRE_FIXTURE(path, "stories260K.gguf");
  Fixture f = load(path);
  kv::KvConfig kv;
  kv.budget_bytes = 24 << 10;  // a few of the prompt's pages in RAM
  kv.spill_dir = test::temp_dir() + "/session_spill_" + std::to_string(::getpid());
  std::filesystem::create_directories(kv.spill_dir);
  std::vector<int32_t> prompt = f.prompt;
  while (prompt.size() < 240) prompt.insert(prompt.end(), f.prompt.begin() + 1, f.prompt.end());
  prompt.resize(240);
  kv.read_ahead = false;  // a failed read-ahead is retried by the pin: reads on demand only
  const std::span<const int32_t> first(prompt.data(), 16), rest(prompt.data() + 16, 224);
  int64_t reads_of_first = 0;  // page reads back the first feed makes (the same every time)
  {
    Sequence probe(*f.model, *f.tokenizer, 256, kv, 1, 16);
    probe.feed(first);
    reads_of_first = probe.cache().pool()->stats().spill_reads;
  }
  // The first read back after the first feed fails.
  FaultPoints faults;
  faults.spill_read_fail_at = reads_of_first + 1;
  set_fault_points(faults);
  Sequence session(*f.model, *f.tokenizer, 256, kv, 1, 16);
  set_fault_points({});
  session.feed(first);
  EXPECT_EQ(session.tokens().size(), 16u);
  EXPECT_THROW(session.feed(rest), kv::KvSpillError);
  EXPECT_EQ(session.cache().n_tokens(), 0);
  EXPECT_TRUE(session.tokens().empty());
  session.feed(prompt);  // the fault fired once: the same prompt goes in whole now
  EXPECT_EQ(session.tokens().size(), prompt.size());
  EXPECT_EQ(session.cache().n_tokens(), int64_t(prompt.size()));
  EXPECT_GT(session.cache().pool()->stats().spill_reads, 0);
  std::filesystem::remove_all(kv.spill_dir);
}

}  // namespace
}  // namespace tkv::runtime
