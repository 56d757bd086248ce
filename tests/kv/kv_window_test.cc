// Layers with the model's own sliding window (KvLayerShape::window) and
// learned attention sinks (the sinks argument of attend()): attention
// against the reference (which hides everything older than the window, the
// cache's f16 sinks included, and adds exp(sink) to each head's
// denominator), truncation deep inside the history, the history kept in
// pages, session files recording the windows, and selection leaving window
// layers dense.
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

// A global layer, a 40-token window layer with K and V of different widths,
// and a 100-token window layer with one KV head.
KvShape window_shape(int max_tokens = 4096) {
  return KvShape::of_layers({{8, 4, 64, 64, 0}, {4, 2, 32, 48, 40}, {8, 1, 128, 128, 100}},
                            max_tokens);
}

// Sink logits per layer: none on layer 0, moderate ones on layer 1, and on
// layer 2 values from far below to far above any score (exp of them would
// overflow a float without the max shift).
std::vector<std::vector<float>> sink_logits() {
  return {{}, {0.5f, -1.0f, 2.0f, 0.0f}, {-30.0f, 1.0f, 3.0f, 90.0f, -2.0f, 0.25f, 6.0f, -0.5f}};
}

TEST(KvWindow, AttentionMatchesTheReference) {
  const KvShape shape = window_shape();
  const RandomInputs in(shape, 400, 21);
  for (const char* kv : {"f16", "k4v2", "q8_0h"}) {
    for (int threads : {1, 3}) {
      for (bool sinks : {false, true}) {
        Scenario s;
        s.shape = shape;
        s.config = kv_config(kv);
        s.chunks = {70, 1, 1, 130, 1, 64, 1};  // prefill chunks longer than the windows
        s.threads = threads;
        if (sinks) s.sinks = sink_logits();
        const ScenarioResult r = run_scenario(s, in);
        EXPECT_EQ(r.queries, 268 * 3);
        EXPECT_LT(r.max_rel_error, kTolerance)
            << kv << " threads " << threads << " sinks " << sinks;
      }
    }
  }
}

// Soft-capped scores (gemma2): each q.k / sqrt(d) becomes c tanh(s / c)
// before the mask and the softmax, with sinks and windows beside it. A cap
// of 1.5 bites on these N(0, 1) scores.
TEST(KvWindow, SoftCappedScoresMatchTheReference) {
  const KvShape shape = window_shape();
  const RandomInputs in(shape, 400, 23);
  for (const char* kv : {"f16", "k4v2", "q8_0h"}) {
    Scenario s;
    s.shape = shape;
    s.config = kv_config(kv);
    s.chunks = {70, 1, 1, 130, 1, 64, 1};
    s.threads = 3;
    s.sinks = sink_logits();
    s.softcap = 1.5f;
    const ScenarioResult capped = run_scenario(s, in);
    EXPECT_EQ(capped.queries, 268 * 3);
    EXPECT_LT(capped.max_rel_error, kTolerance) << kv;
    s.softcap = 0.0f;  // the cap changed the outputs
    EXPECT_NE(run_scenario(s, in, false).outputs, capped.outputs) << kv;
  }
}

// The whole history stays: truncating to a point long out of every window
// and going on matches a sequence that only ever held those tokens.
TEST(KvWindow, TruncateAnywhereMatchesTheReference) {
  const KvShape shape = window_shape();
  const RandomInputs in(shape, 700, 4);
  for (const char* kv : {"f16", "k4v2"}) {
    Scenario s;
    s.shape = shape;
    s.config = kv_config(kv);
    s.chunks = {300, 1, 1, 50, 1, 120, 1};
    s.truncations = {{3, 250}, {5, 10}};
    s.sinks = sink_logits();
    EXPECT_LT(run_scenario(s, in).max_rel_error, kTolerance) << kv;
  }
}

TEST(KvWindow, WindowLayersKeepTheirHistoryInPages) {
  const RandomInputs in(window_shape(), 600, 3);
  ThreadPool pool(1);
  kv::KvCache windowed(window_shape(), kv_config("k4v2"));
  kv::KvCache full(KvShape::of_layers({{8, 4, 64, 64}, {4, 2, 32, 48}, {8, 1, 128, 128}}, 4096),
                   kv_config("k4v2"));
  feed_chunk(windowed, in, pool, 0, 600);
  feed_chunk(full, in, pool, 0, 600);
  EXPECT_GT(windowed.stats().page_bytes, 0u);
  EXPECT_EQ(windowed.stats().page_bytes, full.stats().page_bytes);
  EXPECT_EQ(windowed.stats().pages_allocated, full.stats().pages_allocated);
}

// A decode step of a window layer reads the pages its window reaches,
// however deep the sequence (KvStats::page_bytes_read); a global layer's
// reads grow with the depth.
TEST(KvWindow, DecodeReadsOnlyTheWindowsPages) {
  ThreadPool pool(1);
  const auto step_reads = [&](const KvShape& shape, int64_t depth) {
    const RandomInputs in(shape, depth + 1, 2);
    kv::KvCache c(shape, kv_config("k4v2"));
    feed_chunk(c, in, pool, 0, int(depth));
    const uint64_t before = c.stats().page_bytes_read;
    feed_chunk(c, in, pool, depth, 1);
    return c.stats().page_bytes_read - before;
  };
  const KvShape windowed = KvShape::of_layers({{4, 2, 64, 64, 40}, {4, 2, 64, 64, 100}}, 4096);
  const KvShape global = KvShape::of_layers({{4, 2, 64, 64}, {4, 2, 64, 64}}, 4096);
  const uint64_t shallow = step_reads(windowed, 400), deep = step_reads(windowed, 1500);
  EXPECT_GT(shallow, 0u);
  EXPECT_EQ(shallow, deep);
  EXPECT_GT(step_reads(global, 1500), 3 * step_reads(global, 400));
}

// Selection reads a subset of the pages of the layers that keep summaries;
// a window layer keeps none and reads its window as without selection.
TEST(KvWindow, SelectionLeavesWindowLayersDense) {
  const KvShape shape = window_shape();
  const RandomInputs in(shape, 700, 6);
  Scenario dense;
  dense.shape = shape;
  dense.config = kv_config("k4v2");
  dense.chunks = {600, 1, 1, 1};
  dense.sinks = sink_logits();
  Scenario selecting = dense;
  selecting.config.select = 128;
  selecting.config.select_dense_layers = 0;
  const ScenarioResult a = run_scenario(dense, in, false);
  const ScenarioResult b = run_scenario(selecting, in, false);
  EXPECT_NE(a.outputs[0], b.outputs[0]);  // the global layer selected
  EXPECT_EQ(a.outputs[1], b.outputs[1]);
  EXPECT_EQ(a.outputs[2], b.outputs[2]);
  kv::KvConfig c = selecting.config;
  kv::KvCache with_windows(shape, c);
  kv::KvCache without(KvShape::of_layers({{8, 4, 64, 64}, {4, 2, 32, 48}, {8, 1, 128, 128}}, 4096),
                      c);
  ThreadPool pool(1);
  feed_chunk(with_windows, in, pool, 0, 300);
  feed_chunk(without, in, pool, 0, 300);
  EXPECT_GT(with_windows.stats().summary_bytes, 0u);
  EXPECT_LT(with_windows.stats().summary_bytes, without.stats().summary_bytes);
}

TEST(KvWindow, SessionFilesRecordTheWindows) {
  const KvShape shape = window_shape();
  const RandomInputs in(shape, 260, 8);
  ThreadPool pool(2);
  const std::string path = temp_dir() + "/window.tkvs";
  kv::KvCache a(shape, kv_config("k4v2"));
  feed_chunk(a, in, pool, 0, 200);
  a.save(path, "model-W");
  std::vector<float> expect, got;
  for (int t = 200; t < 210; ++t) feed_chunk(a, in, pool, t, 1, &expect);
  kv::KvCache b(shape, kv_config("k4v2"));
  b.load(path, "model-W");
  for (int t = 200; t < 210; ++t) feed_chunk(b, in, pool, t, 1, &got);
  EXPECT_EQ(expect, got);

  // The same heads with another window are another shape.
  kv::KvCache other(
      KvShape::of_layers({{8, 4, 64, 64}, {4, 2, 32, 48, 41}, {8, 1, 128, 128, 100}}, 4096),
      kv_config("k4v2"));
  std::string e;
  try {
    other.load(path, "model-W");
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("KV shape 3x8x4x128:8/4/64/64,4/2/32/48/w40,8/1/128/128/w100 differs"),
            std::string::npos)
      << e;
  EXPECT_EQ(other.n_tokens(), 0);
  std::filesystem::remove(path);
}

// swa_window_only: a window layer drops the pages its window left behind;
// what queries see is unchanged, so attention still matches the reference.
TEST(KvWindow, WindowOnlyDropsWhatTheWindowLeft) {
  const KvShape shape = window_shape();
  const RandomInputs in(shape, 700, 12);
  for (const char* kv : {"f16", "k4v2"}) {
    Scenario s;
    s.shape = shape;
    s.config = kv_config(kv);
    s.config.swa_window_only = true;
    s.chunks = {300, 1, 1, 130, 1, 64, 1};
    s.sinks = sink_logits();
    EXPECT_LT(run_scenario(s, in).max_rel_error, kTolerance) << kv;
  }
  ThreadPool pool(1);
  kv::KvConfig only = kv_config("k4v2");
  only.swa_window_only = true;
  kv::KvCache windowed(shape, only), full(shape, kv_config("k4v2"));
  feed_chunk(windowed, in, pool, 0, 600);
  feed_chunk(full, in, pool, 0, 600);
  // Layer 0 keeps all 600 tokens either way; layers 1 and 2 keep a page or
  // three: well under two thirds of the full history's pages.
  EXPECT_LT(windowed.stats().page_bytes * 3, full.stats().page_bytes * 2);
  EXPECT_LT(windowed.stats().pages_allocated, full.stats().pages_allocated);

  // A branch inside the windows it still holds works; one older is refused
  // in one line, the sequence unchanged.
  std::string e;
  try {
    windowed.truncate(100);
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("cannot truncate to 100 tokens: window layer 1 (--kv-swa window) already "
                   "dropped positions"),
            std::string::npos)
      << e;
  EXPECT_EQ(windowed.n_tokens(), 600);
  windowed.truncate(590);
  EXPECT_EQ(windowed.n_tokens(), 590);

  // Session files keep the dropped layers' page tables.
  const std::string path = temp_dir() + "/window-only.tkvs";
  windowed.save(path, "model-W");
  kv::KvCache loaded(shape, only);
  loaded.load(path, "model-W");
  std::vector<float> expect, got;
  feed_chunk(windowed, in, pool, 600, 1, &expect);
  feed_chunk(loaded, in, pool, 600, 1, &got);
  EXPECT_EQ(expect, got);
  kv::KvCache other_setting(shape, kv_config("k4v2"));
  EXPECT_THROW(other_setting.load(path, "model-W"), Error);
  std::filesystem::remove(path);
}

TEST(KvWindow, NegativeWindowIsRefused) {
  std::string e;
  try {
    kv::KvCache c(KvShape::of_layers({{4, 2, 64, 64, -1}}, 64), kv::KvConfig{});
  } catch (const Error& err) {
    e = err.what();
  }
  EXPECT_NE(e.find("window -1"), std::string::npos) << e;
}

}  // namespace
}  // namespace tkv::test
