// The Qwen3.5 hybrids (qwen35, qwen35moe: three Gated DeltaNet layers then
// one gated full-attention layer) against the independent double-precision
// forward, and the recurrent state as a sequence's memory: independent of
// how a prompt is cut into chunks, shared by a fork copy-on-write, not
// truncatable except to 0, restored exactly by a session file, counted in
// the cache's statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/sequence.h"
#include "test_models.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tkv::test {
namespace {

using States = std::vector<std::vector<float>>;

model::SynthSpec qwen35() {
  return model::synth_preset("tiny-qwen35");
}
model::SynthSpec qwen35moe() {
  return model::synth_preset("tiny-qwen35moe");
}

// The logits of the last token of `tokens`, fed in chunks of `ubatch`.
std::vector<float> feed(const model::Model& m, kv::KvCache& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, int ubatch = 4) {
  std::vector<float> out;
  model::EvalOptions opts;
  opts.ubatch = ubatch;
  m.eval(
      seq, tokens, pool, [&](int64_t, std::span<const float> l) { out.assign(l.begin(), l.end()); },
      opts);
  return out;
}

States states_of(const kv::KvCache& seq) {
  States out;
  const auto& sizes = seq.shape().recurrent;
  for (size_t r = 0; r < sizes.size(); ++r)
    out.emplace_back(seq.state(int(r)), seq.state(int(r)) + sizes[r]);
  return out;
}

double max_abs(std::span<const float> a) {
  double m = 0;
  for (float v : a) m = std::max(m, double(std::fabs(v)));
  return m;
}

double max_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
  return m;
}

std::span<const int32_t> first(const std::vector<int32_t>& t, size_t n) {
  return std::span<const int32_t>(t.data(), n);
}
std::span<const int32_t> from(const std::vector<int32_t>& t, size_t n) {
  return std::span<const int32_t>(t.data() + n, t.size() - n);
}

// One state's floats as the architecture defines it (llama.cpp's
// n_embd_r + n_embd_s): the conv's K-1 inputs of every q, k and v channel,
// then an S x S matrix per value head.
int64_t state_floats(const model::SynthSpec& s) {
  const int64_t S = s.ssm_state_size, G = s.ssm_group_count, Hv = s.ssm_time_step_rank;
  return (s.ssm_conv_kernel - 1) * (2 * G * S + Hv * S) + Hv * S * S;
}

TEST(HybridModels, LayerKindsAndStateShape) {
  for (const model::SynthSpec& spec : {qwen35(), qwen35moe()}) {
    auto m = model::Model::load(write_model(spec, "f32"));
    const auto& layers = m->config().layers;
    ASSERT_EQ(layers.size(), 4u) << spec.preset;
    for (int l = 0; l < 3; ++l) {
      const model::AttentionSpec& at = layers[size_t(l)].attention;
      EXPECT_EQ(at.kind, model::AttentionKind::Recurrent) << spec.preset << " layer " << l;
      EXPECT_EQ(at.conv_kernel, spec.ssm_conv_kernel);
      EXPECT_EQ(at.state_size, spec.ssm_state_size);
      EXPECT_EQ(at.n_groups, spec.ssm_group_count);
      EXPECT_EQ(at.n_v_heads, spec.ssm_time_step_rank);
    }
    EXPECT_EQ(layers[3].attention.kind, model::AttentionKind::Full) << spec.preset;
    EXPECT_TRUE(layers[3].attention.output_gate);
    EXPECT_TRUE(layers[3].attention.qk_norm);
    const kv::KvShape shape = m->kv_shape(256);
    EXPECT_EQ(shape.n_layers, 1) << "only the full-attention layer keeps K and V";
    EXPECT_EQ(shape.recurrent, std::vector<int64_t>(3, state_floats(spec)));
  }
}

TEST(HybridModels, Qwen35MatchesTheReference) {
  EXPECT_LE(max_logit_error(write_model(qwen35(), "f32"), 40, 7, 2), 1e-3);
}

TEST(HybridModels, Qwen35MoeMatchesTheReference) {
  EXPECT_LE(max_logit_error(write_model(qwen35moe(), "f32"), 40, 7, 2), 1e-3);
}

// Quantized weights: the reference quantizes activations as the kernels
// do, in double; a value at a rounding boundary may land one step apart
// (one such step moves a logit by ~1e-3), hence the looser bound.
TEST(HybridModels, QuantizedMatchTheReference) {
  EXPECT_LE(max_logit_error(write_model(qwen35(), "q8_0"), 40, 7, 2), 0.05);
  EXPECT_LE(max_logit_error(write_model(qwen35moe(), "q8_0"), 40, 7, 2), 0.05);
}

// Sections [2, 2, 1, 3] over 8 rotary pairs: interleaved, pairs 5, 6 and 7
// fall in the fourth section, which text does not rotate. The model must
// match the reference, and differ from the same weights with every pair
// rotating (so the sections are not ignored on either side). A RoPE base
// of 100 makes those slow pairs turn by radians over the sequence.
TEST(HybridModels, FourthRopeSectionDoesNotRotate) {
  model::SynthSpec spec = qwen35(), all_rotate = qwen35();
  spec.rope_base = all_rotate.rope_base = 100.0f;
  spec.rope_sections = {2, 2, 1, 3};
  const std::string path = write_model(spec, "f32");
  EXPECT_LE(max_logit_error(path, 24, 7, 2), 1e-3);
  auto with = model::Model::load(path);
  auto without = model::Model::load(write_model(all_rotate, "f32"));
  ThreadPool pool(2);
  const auto tokens = random_tokens(24, spec.n_vocab, 3);
  kv::KvCache a(with->kv_shape(64), kv::KvConfig{}), b(without->kv_shape(64), kv::KvConfig{});
  EXPECT_GT(max_diff(feed(*with, a, tokens, pool), feed(*without, b, tokens, pool)), 1e-3);
}

// One chunk, or chunks of 1, 3 and 16 tokens: the delta rule runs token by
// token either way; only the weight products' kernels differ (exact for
// small chunks, the prefill GEMM for large), so logits and states agree to
// float rounding.
TEST(HybridModels, PrefillChunkingAgrees) {
  for (const model::SynthSpec& spec : {qwen35(), qwen35moe()}) {
    auto m = model::Model::load(write_model(spec, "f32"));
    ThreadPool pool(2);
    const auto tokens = random_tokens(40, spec.n_vocab, 11);
    kv::KvCache whole(m->kv_shape(64), kv::KvConfig{});
    const auto want = feed(*m, whole, tokens, pool, 40);
    const States want_states = states_of(whole);
    for (int ubatch : {1, 3, 16}) {
      kv::KvCache seq(m->kv_shape(64), kv::KvConfig{});
      const auto got = feed(*m, seq, tokens, pool, ubatch);
      EXPECT_LE(max_diff(got, want), 1e-4 * std::max(1.0, max_abs(want)))
          << spec.preset << " ubatch " << ubatch;
      const States got_states = states_of(seq);
      ASSERT_EQ(got_states.size(), 3u);
      for (size_t r = 0; r < got_states.size(); ++r) {
        EXPECT_GT(max_abs(want_states[r]), 0.0) << "the state moved";
        EXPECT_LE(max_diff(got_states[r], want_states[r]), 1e-5 * max_abs(want_states[r]))
            << spec.preset << " ubatch " << ubatch << " state " << r;
      }
    }
  }
}

// A fork at position 20 continued with the original's tokens and chunking
// gives the original's bits.
TEST(HybridModels, ForkContinuesAsTheOriginal) {
  for (const model::SynthSpec& spec : {qwen35(), qwen35moe()}) {
    auto m = model::Model::load(write_model(spec, "f32"));
    ThreadPool pool(2);
    const auto tokens = random_tokens(32, spec.n_vocab, 12);
    kv::KvCache a(m->kv_shape(64), kv::KvConfig{});
    feed(*m, a, first(tokens, 20), pool);
    auto b = a.fork();
    EXPECT_EQ(b->n_tokens(), 20);
    EXPECT_EQ(states_of(*b), states_of(a));
    const auto la = feed(*m, a, from(tokens, 20), pool);
    const auto lb = feed(*m, *b, from(tokens, 20), pool);
    EXPECT_TRUE(same_bits(la, lb)) << spec.preset;
    EXPECT_EQ(states_of(*b), states_of(a)) << spec.preset;
  }
}

// Copy-on-write: a child that runs other tokens leaves its parent's state
// alone; the parent then goes on exactly as an independent sequence fed
// the same tokens.
TEST(HybridModels, ForkDoesNotDisturbItsParent) {
  for (const model::SynthSpec& spec : {qwen35(), qwen35moe()}) {
    auto m = model::Model::load(write_model(spec, "f32"));
    ThreadPool pool(2);
    const auto tokens = random_tokens(21, spec.n_vocab, 13);
    const auto other = random_tokens(9, spec.n_vocab, 14);
    kv::KvCache parent(m->kv_shape(64), kv::KvConfig{}), alone(m->kv_shape(64), kv::KvConfig{});
    feed(*m, parent, first(tokens, 20), pool);
    feed(*m, alone, first(tokens, 20), pool);
    const States before = states_of(parent);
    auto child = parent.fork();
    const auto child_logits = feed(*m, *child, other, pool);
    EXPECT_NE(states_of(*child), before) << "the child's own state moved";
    EXPECT_EQ(states_of(parent), before) << spec.preset;
    const auto got = feed(*m, parent, from(tokens, 20), pool);
    const auto want = feed(*m, alone, from(tokens, 20), pool);
    EXPECT_TRUE(same_bits(got, want)) << spec.preset;
    EXPECT_FALSE(same_bits(got, child_logits));
  }
}

// The state holds one position: truncating into the sequence is refused
// with nothing changed; truncating to 0 is the empty sequence.
TEST(HybridModels, TruncateOnlyToTheEndOrZero) {
  auto m = model::Model::load(write_model(qwen35(), "f32"));
  ThreadPool pool(2);
  const auto tokens = random_tokens(21, m->config().n_vocab, 15);
  const auto again = random_tokens(10, m->config().n_vocab, 16);
  kv::KvCache seq(m->kv_shape(64), kv::KvConfig{}), alone(m->kv_shape(64), kv::KvConfig{});
  feed(*m, seq, first(tokens, 20), pool);
  feed(*m, alone, first(tokens, 20), pool);
  const States before = states_of(seq);
  EXPECT_FALSE(seq.can_truncate(10));
  EXPECT_TRUE(seq.can_truncate(20));
  EXPECT_TRUE(seq.can_truncate(0));
  try {
    seq.truncate(10);
    ADD_FAILURE() << "truncate(10) of a hybrid model's sequence did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("recurrent"), std::string::npos) << e.what();
  }
  EXPECT_EQ(seq.n_tokens(), 20);
  EXPECT_EQ(states_of(seq), before);
  seq.truncate(20);  // nothing to do
  EXPECT_TRUE(
      same_bits(feed(*m, seq, from(tokens, 20), pool), feed(*m, alone, from(tokens, 20), pool)));

  seq.truncate(0);
  EXPECT_EQ(seq.n_tokens(), 0);
  for (const auto& s : states_of(seq))
    EXPECT_TRUE(std::all_of(s.begin(), s.end(), [](float v) { return v == 0.0f; }));
  kv::KvCache fresh(m->kv_shape(64), kv::KvConfig{});
  EXPECT_TRUE(same_bits(feed(*m, seq, again, pool), feed(*m, fresh, again, pool)));
  EXPECT_EQ(states_of(seq), states_of(fresh));
}

TEST(HybridModels, SaveLoadRestoresTheState) {
  for (const model::SynthSpec& spec : {qwen35(), qwen35moe()}) {
    auto m = model::Model::load(write_model(spec, "f32"));
    ThreadPool pool(2);
    const auto tokens = random_tokens(26, spec.n_vocab, 17);
    kv::KvCache seq(m->kv_shape(64), kv::KvConfig{});
    feed(*m, seq, first(tokens, 25), pool);
    const std::string path = temp_dir() + "/" + spec.preset + ".session";
    seq.save(path, m->fingerprint());
    kv::KvCache loaded(m->kv_shape(64), kv::KvConfig{});
    feed(*m, loaded, first(tokens, 3), pool);  // a state the load must replace
    loaded.load(path, m->fingerprint());
    EXPECT_EQ(loaded.n_tokens(), 25);
    EXPECT_EQ(states_of(loaded), states_of(seq)) << spec.preset;
    EXPECT_TRUE(
        same_bits(feed(*m, loaded, from(tokens, 25), pool), feed(*m, seq, from(tokens, 25), pool)))
        << spec.preset;
  }
}

// Every recurrent layer's state is in the sequence's bytes from the start
// (fixed size), shared after a fork until either side runs a chunk.
TEST(HybridModels, StateBytesAreCounted) {
  const model::SynthSpec spec = qwen35();
  auto m = model::Model::load(write_model(spec, "f32"));
  ThreadPool pool(2);
  const uint64_t want = 3 * uint64_t(state_floats(spec)) * sizeof(float);
  kv::KvCache seq(m->kv_shape(64), kv::KvConfig{});
  EXPECT_EQ(seq.stats().state_bytes, want);
  feed(*m, seq, random_tokens(20, spec.n_vocab, 18), pool);
  const kv::KvStats s = seq.stats();
  EXPECT_EQ(s.state_bytes, want);
  EXPECT_EQ(s.persistent_bytes, s.page_bytes + s.f16_bytes + s.summary_bytes + s.state_bytes);
  EXPECT_EQ(s.shared_bytes, 0u);
  ASSERT_GT(s.page_bytes, 0u);
  ASSERT_LT(20, kv::KvConfig{}.page_tokens);

  auto child = seq.fork();
  // Every page and every state is shared (the f16 sinks and ring are copied).
  EXPECT_EQ(child->stats().shared_bytes, s.page_bytes + want);
  EXPECT_EQ(seq.stats().shared_bytes, s.page_bytes + want);
  EXPECT_EQ(child->stats().state_bytes, want);
  feed(*m, *child, random_tokens(1, spec.n_vocab, 19), pool);
  // The child's chunk copied the states and the partly filled page it wrote
  // into (20 tokens: one page): nothing is shared any more.
  EXPECT_EQ(seq.stats().shared_bytes, 0u);
  EXPECT_EQ(child->stats().shared_bytes, 0u);
  EXPECT_EQ(child->stats().state_bytes, want);
  EXPECT_EQ(seq.stats().state_bytes, want);
}

// A snapshot brings the sequence back to its position: truncating there
// and going on gives the bits of a sequence that stopped there (the same
// chunks), later snapshots go, and the newest state_snapshots are kept.
TEST(HybridModels, TruncateToASnapshotGoesOnExactly) {
  auto m = model::Model::load(write_model(qwen35(), "f32"));
  ThreadPool pool(2);
  const auto a = random_tokens(12, m->config().n_vocab, 21);
  const auto b = random_tokens(8, m->config().n_vocab, 22);
  const auto c = random_tokens(8, m->config().n_vocab, 23);
  kv::KvConfig config;
  config.state_snapshots = 2;
  kv::KvCache seq(m->kv_shape(64), config), alone(m->kv_shape(64), config);
  feed(*m, seq, a, pool);
  seq.snapshot();
  feed(*m, alone, a, pool);
  EXPECT_EQ(seq.stats().snapshot_bytes, 0u);  // shared with the state until a chunk runs
  feed(*m, seq, b, pool);
  EXPECT_EQ(seq.stats().snapshot_bytes, seq.stats().state_bytes);
  EXPECT_EQ(seq.restore_point(17), 12);
  EXPECT_EQ(seq.restore_point(11), 0);
  EXPECT_TRUE(seq.can_truncate(12));
  seq.truncate(12);
  EXPECT_EQ(seq.n_tokens(), 12);
  EXPECT_EQ(states_of(seq), states_of(alone));
  EXPECT_TRUE(same_bits(feed(*m, seq, c, pool), feed(*m, alone, c, pool)));

  // Three more snapshots: the oldest (12) goes.
  for (uint64_t i = 0; i < 3; ++i) {
    seq.snapshot();
    feed(*m, seq, random_tokens(4, m->config().n_vocab, 30 + i), pool);
  }
  EXPECT_EQ(seq.stats().snapshots, 2);
  EXPECT_EQ(seq.restore_point(25), 24);
  EXPECT_FALSE(seq.can_truncate(12));
  // Forks and session files keep them.
  auto child = seq.fork();
  EXPECT_EQ(child->restore_point(25), 24);
  const std::string path = temp_dir() + "/snapshots.session";
  seq.save(path, m->fingerprint());
  kv::KvCache loaded(m->kv_shape(64), config);
  loaded.load(path, m->fingerprint());
  EXPECT_EQ(loaded.stats().snapshots, 2);
  loaded.truncate(28);
  child->truncate(28);
  EXPECT_EQ(states_of(loaded), states_of(*child));
}

// runtime::Sequence snapshots each prompt's start and end: truncating into
// the second prompt goes back to its start and feeds the rest again, so
// the next logits are a fresh sequence's (fed in the same chunks).
TEST(HybridModels, SequenceTruncateFeedsFromTheNearestSnapshot) {
  auto m = model::Model::load(write_model(qwen35(), "f32"));
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(m->gguf());
  const auto p1 = random_tokens(12, m->config().n_vocab, 41);
  const auto p2 = random_tokens(10, m->config().n_vocab, 42);
  const auto next = random_tokens(6, m->config().n_vocab, 43);
  runtime::Sequence seq(*m, tokenizer, 128, kv::KvConfig{}, 2, 4);
  seq.feed(p1);
  seq.feed(p2);
  EXPECT_EQ(seq.cache().stats().snapshots, 2);  // at 12 (p1's end, p2's start) and 22
  seq.truncate(17);
  EXPECT_EQ(seq.tokens().size(), 17u);
  EXPECT_EQ(seq.cache().n_tokens(), 17);
  seq.feed(next);

  runtime::Sequence fresh(*m, tokenizer, 128, kv::KvConfig{}, 2, 4);
  fresh.feed(p1);
  fresh.feed(std::span<const int32_t>(p2.data(), 5));
  fresh.feed(next);
  EXPECT_TRUE(same_bits(seq.logits(), fresh.logits()));
}

// Within a long prompt, a snapshot past every multiple of the spacing (8
// here, chunks of 4): a cut inside it feeds again fewer tokens than the
// spacing, with a fresh sequence's bits. Beyond the count the newest two
// stay and the older ones thin out evenly.
TEST(HybridModels, SequenceSnapshotsWithinALongPrompt) {
  auto m = model::Model::load(write_model(qwen35(), "f32"));
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(m->gguf());
  const auto p1 = random_tokens(30, m->config().n_vocab, 51);
  const auto p2 = random_tokens(10, m->config().n_vocab, 52);
  const auto next = random_tokens(5, m->config().n_vocab, 53);
  kv::KvConfig config;
  config.state_snapshot_spacing = 8;
  runtime::Sequence seq(*m, tokenizer, 128, config, 2, 4);
  seq.feed(p1);
  EXPECT_EQ(seq.cache().stats().snapshots, 4);  // 8, 16, 24 and the end, 30
  EXPECT_EQ(seq.cache().restore_point(13), 8);
  EXPECT_EQ(seq.cache().restore_point(29), 24);
  // p2's chunks end at 34 (past 32), 38 and 40 (its end): with 34, 24 goes
  // (its neighbours, 16 and 30, lie closest); with 40, 8 goes.
  seq.feed(p2);
  EXPECT_EQ(seq.cache().stats().snapshots, 4);
  EXPECT_EQ(seq.cache().restore_point(15), 0);
  EXPECT_EQ(seq.cache().restore_point(29), 16);
  EXPECT_EQ(seq.cache().restore_point(31), 30);
  EXPECT_EQ(seq.cache().restore_point(39), 34);
  seq.truncate(27);
  EXPECT_EQ(seq.cache().n_tokens(), 27);
  seq.feed(next);

  runtime::Sequence fresh(*m, tokenizer, 128, config, 2, 4);
  fresh.feed(std::span<const int32_t>(p1.data(), 27));
  fresh.feed(next);
  EXPECT_TRUE(same_bits(seq.logits(), fresh.logits()));
}

}  // namespace
}  // namespace tkv::test
