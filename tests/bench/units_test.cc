// Flag values, KV configuration lists, tables and statistics.
#include <gtest/gtest.h>

#include "bench/kv_configs.h"
#include "bench/recall_compare.h"
#include "bench/recall_protocol.h"
#include "bench/stats.h"
#include "bench/table.h"
#include "bench/units.h"
#include "cli/kv_spec.h"
#include "common/error.h"
#include "common/sys_info.h"

namespace tkv::bench {
namespace {

TEST(BenchUnits, TokenCounts) {
  EXPECT_EQ(parse_token_count("4k", "--ctx"), 4096);
  EXPECT_EQ(parse_token_count("1.5K", "--ctx"), 1536);
  EXPECT_EQ(parse_token_count("512", "--ctx"), 512);
  EXPECT_EQ(parse_token_counts("0,1k,32k", "--depths"), (std::vector<int64_t>{0, 1024, 32768}));
  EXPECT_THROW(parse_token_count("4m", "--ctx"), Error);
  EXPECT_THROW(parse_token_count("-1", "--ctx"), Error);
  EXPECT_THROW(parse_token_count("0.3", "--ctx"), Error);
  EXPECT_THROW(parse_token_counts("1k,,2k", "--ctx"), Error);
  EXPECT_THROW(parse_token_count("", "--ctx"), Error);
  EXPECT_EQ(token_count_label(65536), "64K");
  EXPECT_EQ(token_count_label(1000), "1000");
}

TEST(BenchUnits, FractionsAndInts) {
  EXPECT_EQ(parse_fractions("0,0.25,1", "--fact-depths", 0, 1), (std::vector<double>{0, 0.25, 1}));
  EXPECT_THROW(parse_fractions("1.5", "--fact-depths", 0, 1), Error);
  EXPECT_THROW(parse_fractions("0.5x", "--fact-depths", 0, 1), Error);
  EXPECT_EQ(parse_ints("1,2", "-t", 1, 8), (std::vector<int>{1, 2}));
  EXPECT_THROW(parse_ints("0", "-t", 1, 8), Error);
  EXPECT_THROW(parse_ints("1.5", "-t", 1, 8), Error);
}

TEST(BenchKvConfigs, ShorthandsPairsAndPolicies) {
  const auto list = cli::parse_kv_spec_list("f16,k4v2,tq4/tq2:none,k4v2:s1+r0,q4_0h:w1024", {});
  ASSERT_EQ(list.size(), 5u);
  EXPECT_EQ(list[0].label, "f16");
  EXPECT_TRUE(is_f16_baseline(list[0].config));
  EXPECT_EQ(list[1].config.k.name(), "tq4");
  EXPECT_EQ(list[1].config.v.name(), "tq2");
  EXPECT_EQ(policy_label(list[1].config), "4+64");  // the default for quantized codecs
  EXPECT_EQ(policy_label(list[2].config), "none");
  EXPECT_EQ(list[3].config.effective_sinks(), 1);
  EXPECT_EQ(list[3].config.effective_residual(), 0);
  EXPECT_EQ(list[4].config.window, 1024);
  EXPECT_EQ(list[4].config.k.name(), "q4_0h");
  EXPECT_FALSE(is_f16_baseline(list[4].config));
}

TEST(BenchKvConfigs, PageSelectionItems) {
  const auto list = cli::parse_kv_spec_list("k4v2,k4v2:sel512,k4v2:s2+sel128+w1024", {});
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].config.select, 0);
  EXPECT_EQ(list[1].config.select, 512);
  EXPECT_EQ(policy_label(list[1].config), "4+64 sel512");
  EXPECT_EQ(list[1].config.describe(), list[0].config.describe() + " select=512");
  EXPECT_EQ(list[1].config.describe_storage(), list[0].config.describe_storage());
  EXPECT_EQ(list[2].config.select, 128);
  EXPECT_EQ(list[2].config.window, 1024);
  EXPECT_EQ(list[2].config.effective_sinks(), 2);
  kv::KvConfig defaults;
  defaults.select = 256;
  defaults.select_prefill = false;
  const BenchKv d = cli::parse_kv_spec("k4v2", defaults);
  EXPECT_EQ(policy_label(d.config), "4+64 sel256 dense-prefill");
  const BenchKv back = bench_kv_from_json(Json::parse(bench_kv_to_json(d).dump()));
  EXPECT_EQ(back.config.select, 256);
  EXPECT_FALSE(back.config.select_prefill);
  EXPECT_EQ(cli::parse_kv_spec("k4v2:sel0", defaults).config.select, 0);
  EXPECT_THROW(cli::parse_kv_spec("k4v2:sel", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec("k4v2:selx", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec("k4v2:sel-4", {}), Error);
}

// A trial's prompt derives from its index: a window configuration's probe
// prompts come after the depth sweep's, so the sweep's prompts (and so the
// rows of k4v2 and k4v2:s2) are the same with or without k4v2:w512.
TEST(RecallPlan, WindowProbesDoNotRenumberTheDepthSweep) {
  ModelInfo info;
  info.n_layers = 2;
  info.n_heads = 4;
  info.n_kv_heads = 2;
  info.head_dim = 64;
  info.n_vocab = 512;
  info.n_ctx_train = 4096;
  RecallOptions r;
  r.facts = 1;
  r.depths = {0.1, 0.5, 0.9};
  r.multi_turn = false;
  finalize_recall_options(r, info);
  CommonOptions without, with;
  without.kv = parse_bench_kv_list("k4v2,k4v2:s2");
  with.kv = parse_bench_kv_list("k4v2,k4v2:s2,k4v2:w512");
  const auto a = plan_recall(without, r, info), b = plan_recall(with, r, info);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 3u);
  const Json& ta = a[0].request["trials"];
  const Json& tb = b[0].request["trials"];
  ASSERT_EQ(ta.size(), 3u);
  ASSERT_EQ(tb.size(), 6u);  // the sweep, then one W512+ probe per depth
  for (size_t i = 0; i < ta.size(); ++i) EXPECT_EQ(tb[i], ta[i]) << i;
  for (size_t i = ta.size(); i < tb.size(); ++i) EXPECT_EQ(tb[i][0]["label"], "W512+") << i;
}

ModelInfo small_model_info() {
  ModelInfo info;
  info.n_layers = 2;
  info.n_heads = 4;
  info.n_kv_heads = 2;
  info.head_dim = 64;
  info.n_vocab = 512;
  info.n_ctx_train = 4096;
  return info;
}

std::vector<std::string> labels_of(const std::vector<PlannedCell>& cells, bool multi_turn) {
  std::vector<std::string> out;
  for (const auto& c : cells)
    if (c.identity.value("multi_turn", false) == multi_turn)
      out.push_back(c.identity["kv"].get<std::string>() +
                    (multi_turn ? " cap " + std::to_string(c.request["scroll_window"].get<int>())
                     : c.identity.value("added", false) ? " added"
                                                        : ""));
  return out;
}

// A selection or cap item runs next to its dense configuration and a window
// of its token budget, added after it unless the list has them already.
TEST(RecallPlan, SelectionAndCapItemsGetDenseAndWindowPartners) {
  const ModelInfo info = small_model_info();
  RecallOptions r;
  r.facts = 1;
  r.depths = {0.5};
  r.multi_turn = true;
  r.multi_turn_window = 1024;
  finalize_recall_options(r, info);
  CommonOptions o;
  o.kv = parse_bench_kv_list("k4v2:sel512,k8v4,k4v2:s2+sel256+budget1M");
  const auto cells = plan_recall(o, r, info);
  const std::vector<std::string> single{
      "k4v2:sel512",   "k4v2 added",        "k4v2:w512 added", "k8v4", "k4v2:s2+sel256+budget1M",
      "k4v2:s2 added", "k4v2:s2+w256 added"};
  EXPECT_EQ(labels_of(cells, false), single);
  const Json& p = cells[0].identity["partners"];
  EXPECT_EQ(p["kind"], "sel");
  EXPECT_EQ(p["token_budget"], 512);
  EXPECT_EQ(p["dense"], "k4v2");
  EXPECT_EQ(p["window"], "k4v2:w512");
  EXPECT_EQ(cells[4].identity["partners"]["kind"], "sel+budget");
  EXPECT_EQ(cells[4].request["kv"]["ram_budget_bytes"], 1 << 20);
  EXPECT_EQ(cells[1].request["kv"]["config"]["select"], 0);
  EXPECT_EQ(cells[2].request["kv"]["config"]["window"], 512);
  // The window partner's probe (a fact just past 512 tokens) is in the prompts.
  bool probe = false;
  for (const auto& t : cells[0].request["trials"]) probe |= t[0]["label"] == "W512+";
  EXPECT_TRUE(probe);
  // Multi-turn: the groups counted at their token budget, the rest as before.
  const std::vector<std::string> multi{"k4v2:sel512 cap 512", "k4v2 cap 512",
                                       "k4v2:w512 cap 512",   "k8v4 cap 1024",
                                       "k8v4:w1024 cap 1024", "k4v2:s2+sel256+budget1M cap 256",
                                       "k4v2:s2 cap 256",     "k4v2:s2+w256 cap 256"};
  EXPECT_EQ(labels_of(cells, true), multi);

  // Partners already listed (under any label) are not added again.
  o.kv = parse_bench_kv_list("k4v2:s4+r64,k4v2:sel512,k4v2:w512");
  const auto again = plan_recall(o, r, info);
  EXPECT_EQ(labels_of(again, false),
            (std::vector<std::string>{"k4v2:s4+r64", "k4v2:sel512", "k4v2:w512"}));
  EXPECT_EQ(again[1].identity["partners"]["dense"], "k4v2:s4+r64");
}

// A cap alone stands for the tokens whose pages fit next to the f16 sinks
// and residual, in whole pages.
TEST(RecallPlan, TokenBudgetOfACap) {
  const ModelInfo info = small_model_info();  // 2 layers x 2 KV heads x 64
  const BenchKv f16 = parse_bench_kv_list("f16:budget1M").front();
  // f16: 1 KiB per token (2 layers x K and V x 2 heads x 64 x 2 B), no sinks or residual.
  EXPECT_EQ(token_budget(f16, info), 1024);
  const BenchKv sel = parse_bench_kv_list("k4v2:sel300+budget1M").front();
  EXPECT_EQ(token_budget(sel, info), 300);
  const BenchKv tiny = parse_bench_kv_list("k4v2:budget4K").front();  // less than sinks + residual
  EXPECT_EQ(token_budget(tiny, info), 0);
  EXPECT_EQ(token_budget(parse_bench_kv_list("k4v2").front(), info), 0);
}

TEST(BenchKvConfigs, RunWideDefaultsApplyWhereThePolicyIsSilent) {
  kv::KvConfig defaults;
  defaults.residual = 32;
  const auto a = cli::parse_kv_spec("k4v2:s2", defaults);
  EXPECT_EQ(a.config.effective_sinks(), 2);
  EXPECT_EQ(a.config.effective_residual(), 32);
}

TEST(BenchKvConfigs, BadItemsAreErrors) {
  EXPECT_THROW(cli::parse_kv_spec("k9v2", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec("tq4/zz", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec("k4v2:x3", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec("k4v2:s", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec("k4v2:s-1", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec_list("f16,,k4v2", {}), Error);
  EXPECT_THROW(cli::parse_kv_spec_list("f16,f16", {}), Error);
}

// budgetSIZE: a RAM cap the cell runs under with a temporary spill
// directory; the rest of the item is the shared grammar.
TEST(BenchKvConfigs, BudgetItems) {
  const auto parse = [](std::string_view list) { return parse_bench_kv_list(list); };
  const auto list = parse("k4v2,k4v2:budget64M,k4v2:sel512+budget1.5G,k4v2:budget2M+w512");
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].ram_budget, 0u);
  EXPECT_EQ(list[1].label, "k4v2:budget64M");
  EXPECT_EQ(list[1].ram_budget, 64ull << 20);
  EXPECT_EQ(list[1].config.describe(), list[0].config.describe());
  EXPECT_EQ(list[1].config.budget_bytes, 0u);  // the cell sets it, with the spill directory
  EXPECT_EQ(policy_label(list[1]), "4+64 budget 64.00 MiB");
  EXPECT_EQ(list[2].config.select, 512);
  EXPECT_EQ(list[2].ram_budget, 3ull << 29);
  EXPECT_EQ(list[3].config.window, 512);
  const BenchKv back = bench_kv_from_json(Json::parse(bench_kv_to_json(list[2]).dump()));
  EXPECT_EQ(back.label, list[2].label);
  EXPECT_EQ(back.ram_budget, list[2].ram_budget);
  EXPECT_EQ(back.config.select, 512);
  for (const char* bad : {"k4v2:budget", "k4v2:budgetlots", "k4v2:budget0",
                          "k4v2:budget1M+budget2M", "k4v2:budget1M+x3", "k4v2,k4v2"})
    EXPECT_THROW(parse(bad), Error) << bad;
  try {
    parse("k4v2:budget1M+budget2M");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv k4v2:budget1M+budget2M: more than one budget part"),
              std::string::npos)
        << e.what();
  }
}

TEST(BenchKvConfigs, JsonRoundTrip) {
  kv::KvConfig defaults;
  defaults.page_tokens = 32;
  defaults.overrides = kv::parse_layer_overrides("0,-1:k8v4");
  const BenchKv a = cli::parse_kv_spec("tq3/tq2:s2+r16+w512", defaults);
  const BenchKv b = bench_kv_from_json(Json::parse(bench_kv_to_json(a).dump()));
  EXPECT_EQ(b.label, a.label);
  EXPECT_EQ(b.config.describe(), a.config.describe());
  EXPECT_EQ(b.config.overrides.size(), 2u);
  EXPECT_EQ(b.config.page_tokens, 32);
  EXPECT_EQ(b.config.seed, a.config.seed);
}

TEST(BenchKvConfigs, BitsPerValueFollowTheLayout) {
  EXPECT_DOUBLE_EQ(codec_bits(*kv::parse_codec("f16"), 128), 16.0);
  // ggml q8_0: 34 bytes per 32 values.
  EXPECT_DOUBLE_EQ(codec_bits(*kv::parse_codec("q8_0"), 128), 8.5);
  // tq4 at head_dim 128: 4-bit codes plus an f16 norm -> a little over 4 bits.
  const double tq4 = codec_bits(*kv::parse_codec("tq4"), 128);
  EXPECT_GT(tq4, 4.0);
  EXPECT_LT(tq4, 4.5);
}

TEST(BenchStats, MedianPercentilesAndExtremes) {
  const Summary s = summarize({5, 1, 3, 2, 4});
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(summarize({4, 1}).median, 2.5);
  EXPECT_DOUBLE_EQ(percentile({0, 10}, 0.99), 9.9);
  EXPECT_EQ(summarize({}).n, 0u);
}

TEST(BenchTable, MarkdownIsAlignedAndEscapesPipes) {
  Table t({"a", "long header"});
  t.add({"x|y", Json(3)});
  t.add({Json("z")});
  const std::string md = t.markdown();
  EXPECT_EQ(md,
            "| a   | long header |\n"
            "| --- | ----------- |\n"
            "| x/y | 3           |\n"
            "| z   |             |\n");
  EXPECT_EQ(fmt_percent(Json(0.985), 1), "98.5%");
  EXPECT_EQ(fmt_fixed(Json(nullptr), 2), "");
  EXPECT_EQ(fmt_bytes(Json(1024)), format_bytes(1024));
  EXPECT_EQ(fmt_bytes(Json("x")), "");
}

}  // namespace
}  // namespace tkv::bench
