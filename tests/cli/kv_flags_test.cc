// KvFlags: the KV configuration the CLI builds, including a model's own
// sliding-window attention.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/common_flags.h"
#include "common/error.h"

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

TEST(KvFlagsSwa, WindowLayersKeepTheirHistoryUnlessAsked) {
  KvFlags flags;
  EXPECT_FALSE(flags.config().swa_window_only);
  flags.swa = "window";
  EXPECT_TRUE(flags.config().swa_window_only);
  EXPECT_NE(flags.config().describe_storage().find(" swa=window"), std::string::npos);
  flags.swa = "full";
  EXPECT_FALSE(flags.config().swa_window_only);
  flags.swa = "some";
  try {
    flags.config();
    ADD_FAILURE() << "--kv-swa some was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-swa 'some': must be 'full' or 'window'"),
              std::string::npos)
        << e.what();
  }
}

// --kv-snapshots sets how many recurrent-state snapshots a sequence keeps;
// unset, the cache's default stands.
TEST(KvFlagsSnapshots, CountReachesTheConfig) {
  KvFlags flags;
  EXPECT_EQ(flags.config().state_snapshots, kv::KvConfig{}.state_snapshots);
  flags.snapshots = 0;
  EXPECT_EQ(flags.config().state_snapshots, 0);
  flags.snapshots = 9;
  EXPECT_EQ(flags.config().state_snapshots, 9);
}

std::string config_error(KvFlags flags) {
  try {
    flags.config();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(KvFlags, OneConfigurationFromEveryFlag) {
  KvFlags flags;
  FlagParser parser("run", "turbokv run");
  flags.add_to(parser);
  ASSERT_TRUE(parser.parse(std::vector<std::string>{"--kv", "k4v2:s2", "-ctv", "q8_0", "--kv-sinks",
                                                    "8", "--kv-residual", "16", "--kv-page", "32",
                                                    "--kv-budget", "1M", "--kv-layer-override",
                                                    "0:k8v8", "--kv-layer-override", "-1:f16"}));
  const kv::KvConfig c = flags.config();
  EXPECT_EQ(c.k.name(), "tq4");
  EXPECT_EQ(c.v.name(), "q8_0");          // -ctv overrides the half
  EXPECT_EQ(c.effective_sinks(), 2);      // the policy written in --kv wins
  EXPECT_EQ(c.effective_residual(), 16);  // the flag fills what it leaves out
  EXPECT_EQ(c.page_tokens, 32);
  EXPECT_EQ(c.budget_bytes, uint64_t(1) << 20);
  EXPECT_EQ(c.overrides.size(), 2u);  // repeatable
}

TEST(KvFlags, ErrorsNameTheFlag) {
  KvFlags spec;
  spec.shorthand = "k5v9";
  EXPECT_EQ(config_error(spec).rfind("--kv: unknown KV spec 'k5v9'", 0), 0u) << config_error(spec);
  KvFlags ctk;
  ctk.cache_type_k = "q3";
  EXPECT_EQ(config_error(ctk).rfind("-ctk: unknown KV codec 'q3'", 0), 0u);
  KvFlags page;
  page.page = 24;
  EXPECT_EQ(config_error(page), "--kv-page 24: must be a multiple of 16 in [16, 4096]");
  KvFlags window;
  window.shorthand = "k4v2";
  window.window = 32;
  EXPECT_EQ(config_error(window),
            "--kv-window 32 must be larger than the residual window (64 tokens; set "
            "--kv-residual lower)");
  KvFlags layers;
  layers.layer_overrides = {"0:zz"};
  EXPECT_EQ(config_error(layers).rfind("--kv-layer-override: layer override '0:zz'", 0), 0u)
      << config_error(layers);
  KvFlags budget;
  budget.budget = "lots";
  EXPECT_EQ(config_error(budget).rfind("--kv-budget: ", 0), 0u);
  KvFlags zero;
  zero.budget = "0";
  EXPECT_EQ(config_error(zero), "--kv-budget: must be larger than 0");

  KvFlags deep;
  deep.layer_overrides = {"7:k4v4"};
  const kv::KvConfig c = deep.config();
  try {
    deep.check_layers(c, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--kv-layer-override: layer 7 does not exist (the model has 2 layers)");
  }
  EXPECT_NO_THROW(deep.check_layers(c, 8));
}

TEST(KvFlags, ListFormItemsStartFromThePolicyFlags) {
  KvFlags flags;
  FlagParser parser("bench memory", "turbokv bench memory");
  flags.add_to(parser, KvFlags::Form::kList);
  ASSERT_TRUE(
      parser.parse(std::vector<std::string>{"--kv", "f16,k4v2:s1,tq4/tq2", "--kv-residual", "16"}));
  const auto list = flags.configs(flags.list());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].label, "k4v2:s1");
  EXPECT_EQ(list[1].config.effective_sinks(), 1);
  EXPECT_EQ(list[1].config.effective_residual(), 16);
  EXPECT_EQ(list[2].config.k.name(), "tq4");
  EXPECT_EQ(list[2].config.v.name(), "tq2");
  // A protocol's own list names its flag in errors.
  try {
    flags.configs("f16,f16", "--recall-kv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--recall-kv: 'f16' is listed twice");
  }
}

TEST(KvFlags, ListFormTakesOneConfigurationAsCtkCtv) {
  KvFlags flags;
  FlagParser parser("bench speed", "turbokv bench speed");
  flags.add_to(parser, KvFlags::Form::kList);
  ASSERT_TRUE(parser.parse(std::vector<std::string>{"-ctk", "q8_0", "-ctv", "tq2"}));
  EXPECT_EQ(flags.list(), "q8_0/tq2");
  EXPECT_EQ(flags.configs(flags.list()).at(0).config.v.name(), "tq2");
  flags.shorthand = "f16";  // and --kv: which one?
  EXPECT_THROW(flags.list(), Error);
}

}  // namespace
}  // namespace tkv::cli
