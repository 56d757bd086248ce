// Recall prompts and cells: structure on stories260K, and the real thing on
// tkv-test-23M (trained on the fact format) when it is present.
#include <gtest/gtest.h>

#include "bench/cell.h"
#include "bench/kv_configs.h"
#include "bench/recall_prompt.h"
#include "bench/recall_protocol.h"
#include "bench_test_util.h"
#include "common/atomic_file.h"
#include "gguf/gguf.h"
#include "model/synth.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace tkv::bench {
namespace {

Json recall_request(const std::string& protocol, const std::string& model, const std::string& kv,
                    const std::string& filler, int64_t ctx) {
  Json req = test::cell_request(protocol, model, kv);
  const RecallTemplates t;
  req["ctx"] = ctx;
  req["seeds"] = {1};
  req["filler_file"] = filler;
  req["fact_template"] = t.fact;
  req["question_template"] = t.question;
  req["chat"] = "";
  req["answer_tokens"] = 8;
  return req;
}

TEST(RecallDocument, FactsLandAtTheirDepthsWithinTheBudget) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const auto file = gguf::GgufFile::open(model);
  const tok::Tokenizer tok = tok::Tokenizer::from_gguf(file);
  const Filler filler(read_file(test::write_story_text(::tkv::test::temp_dir())), "stories");
  const auto facts = make_facts(3, 5);
  const std::vector<FactPlacement> place{
      {facts[0], 0.0, "0%", -1}, {facts[1], 0.5, "50%", -1}, {facts[2], 1.0, "100%", -1}};
  const Document doc = build_document(tok, filler, 3, place, RecallTemplates{}, 400);
  EXPECT_LE(doc.tokens, 400);
  EXPECT_GT(doc.tokens, 300);
  ASSERT_EQ(doc.facts.size(), 3u);
  EXPECT_EQ(doc.facts[0].token_pos, 1);  // right after BOS
  EXPECT_GT(doc.facts[1].token_pos, doc.tokens / 3);
  EXPECT_LT(doc.facts[1].token_pos, 2 * doc.tokens / 3);
  EXPECT_GT(doc.facts[2].token_pos, doc.tokens - 60);  // the last line is the fact itself
  for (size_t i = 0; i + 1 < facts.size(); ++i) {
    const std::string line = "The access code for " + facts[i].name + " is " + facts[i].code + ".";
    EXPECT_NE(doc.text.find(line), std::string::npos) << line;
  }
  EXPECT_EQ(doc.text.find(facts.back().name), std::string::npos);  // the control is never planted
  // The document ends with the last fact: the question follows after one space.
  EXPECT_EQ(doc.text.substr(doc.text.size() - 1), ".");
}

TEST(RecallCell, StructureOnStories) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string filler = test::write_story_text(::tkv::test::temp_dir());
  Json req = recall_request("recall", model, "k4v2", filler, 400);
  req["trials"] = Json::array(
      {Json::array({{{"depth", 0.0}, {"label", "0%"}}, {{"depth", 1.0}, {"label", "100%"}}})});
  const Json r = run_cell(req);
  ASSERT_EQ(r["status"], "ok") << r.dump();
  ASSERT_EQ(r["trials"].size(), 1u);
  const Json& t = r["trials"][0];
  ASSERT_EQ(t["facts"].size(), 2u);
  for (const auto& f : t["facts"]) {
    EXPECT_TRUE(f["correct"].is_boolean());
    EXPECT_EQ(f["code"].get<std::string>().size(), 5u);
    EXPECT_GT(f["tokens_after"].get<int64_t>(), 0);
  }
  EXPECT_TRUE(t["control"]["planted_code_hit"].is_boolean());
  EXPECT_EQ(r["questions"], 2);
  int correct = 0;
  for (const auto& f : t["facts"]) correct += f["correct"].get<bool>() ? 1 : 0;
  EXPECT_DOUBLE_EQ(r["accuracy"].get<double>(), correct / 2.0);
  EXPECT_LE(t["document_tokens"].get<int64_t>(), 400);
}

TEST(RecallCell, MultiTurnCountsScrolledOutFacts) {
  TKV_REQUIRE_FIXTURE(model, "stories260K.gguf");
  const std::string filler = test::write_story_text(::tkv::test::temp_dir());
  Json req = recall_request("recall_multi_turn", model, "f16:w128", filler, 480);
  req["turns"] = 4;
  req["scroll_window"] = 128;
  const Json r = run_cell(req);
  ASSERT_EQ(r["status"], "ok") << r.dump();
  EXPECT_EQ(r["cap"], 128);
  EXPECT_EQ(r["scrolled_out"]["total"].get<int>() + r["in_window"]["total"].get<int>(), 4);
  EXPECT_GE(r["scrolled_out"]["total"].get<int>(), 2);  // ~110-token turns, window 128
  const Json& conv = r["conversations"][0];
  // The window keeps sinks + the newest 128 tokens only.
  EXPECT_LE(conv["kv_tokens_kept"].get<int64_t>(), 128 + 4);
  EXPECT_GT(conv["tokens"].get<int64_t>(), 300);
}

// The models README: one fact at 10..90% depth is recalled 20/20 with
// llama.cpp's f16 cache on ~3.2K-token prompts. Here at 1K tokens (cheaper,
// and recall at ~3K depends strongly on the filler region; see
// docs/BENCHMARKS.md).
// Chat-template mode, single document and multi-turn: a tiny random-weight
// model with Llama 3's real tokenizer and its llama3 chat template.
TEST(RecallCell, ChatTemplateModeRunsBothVariants) {
  TKV_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-bpe.gguf");
  const std::string dir = ::tkv::test::temp_dir();
  const std::string model = dir + "/tiny-llama3.gguf";
  model::SynthOptions so;
  so.vocab_from = vocab;
  model::synth("tiny", model, so);
  const std::string filler = test::write_story_text(dir);

  Json req = recall_request("recall", model, "k4v2", filler, 600);
  req["chat"] = "llama3";
  req["answer_tokens"] = 4;
  req["question_template"] = "What is the access code for {name}? Reply with the code only.";
  req["keep_prompts"] = true;
  req["trials"] = Json::array({Json::array({{{"depth", 0.5}, {"label", "50%"}}})});
  const Json r = run_cell(req);
  ASSERT_EQ(r["status"], "ok") << r.dump();
  EXPECT_EQ(r["questions"], 1);
  EXPECT_LE(r["trials"][0]["document_tokens"].get<int64_t>(), 600);

  Json mt = recall_request("recall_multi_turn", model, "f16:w256", filler, 600);
  mt["chat"] = "llama3";
  mt["answer_tokens"] = 4;
  mt["question_template"] = req["question_template"];
  mt["turns"] = 3;
  mt["scroll_window"] = 256;
  const Json m = run_cell(mt);
  ASSERT_EQ(m["status"], "ok") << m.dump();
  EXPECT_EQ(m["scrolled_out"]["total"].get<int>() + m["in_window"]["total"].get<int>(), 3);
  EXPECT_GE(m["scrolled_out"]["total"].get<int>(), 1);
}

TEST(RecallOnTestModel, F16RecallsOneFactAtThreeDepths) {
  TKV_REQUIRE_FIXTURE(model, "tkv-test-23M.gguf");
  TKV_REQUIRE_FIXTURE(filler, "tkv-test-heldout.txt");
  Json req = recall_request("recall", model, "f16", filler, 1024);
  req["threads"] = 2;
  req["ubatch"] = 512;
  req["trials"] = Json::array();
  for (double d : {0.1, 0.5, 0.9})
    req["trials"].push_back(Json::array({{{"depth", d}, {"label", depth_label(d)}}}));
  const Json r = run_cell(req);
  ASSERT_EQ(r["status"], "ok") << r.dump();
  EXPECT_EQ(r["questions"], 3);
  EXPECT_EQ(r["correct"], 3) << r["trials"].dump(1);
}

}  // namespace
}  // namespace tkv::bench
