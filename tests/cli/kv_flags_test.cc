// KvFlags: the KV configuration the CLI builds, including a model's own
// sliding-window attention.
#include <gtest/gtest.h>

#include "cli/common_flags.h"

namespace tkv::cli {
namespace {

TEST(KvFlagsModelWindow, SlidingWindowBecomesTheWindowPolicyWithoutSinks) {
  KvFlags flags;
  flags.shorthand = "k4v2";
  kv::KvConfig c = flags.config();
  const std::string note = flags.apply_model_window(4096, c);
  EXPECT_EQ(c.window, 4096);
  EXPECT_EQ(c.effective_sinks(), 0);      // exactly the newest W positions
  EXPECT_EQ(c.effective_residual(), 64);  // storage policy, unchanged
  EXPECT_NE(note.find("sliding-window attention over 4096"), std::string::npos) << note;
}

TEST(KvFlagsModelWindow, FullAttentionModelsAreUntouched) {
  KvFlags flags;
  kv::KvConfig c = flags.config();
  EXPECT_EQ(flags.apply_model_window(0, c), "");
  EXPECT_EQ(c.window, 0);
  EXPECT_EQ(c.sinks, -1);
}

TEST(KvFlagsModelWindow, UserWindowAndSinksWin) {
  KvFlags flags;
  flags.window = 1024;
  kv::KvConfig c = flags.config();
  EXPECT_EQ(flags.apply_model_window(4096, c), "");
  EXPECT_EQ(c.window, 1024);

  KvFlags sinks;
  sinks.sinks = 4;
  kv::KvConfig d = sinks.config();
  EXPECT_FALSE(sinks.apply_model_window(4096, d).empty());
  EXPECT_EQ(d.window, 4096);
  EXPECT_EQ(d.effective_sinks(), 4);  // asked for explicitly
}

}  // namespace
}  // namespace tkv::cli
