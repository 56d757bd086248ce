// Model-level quality through the real compressed cache: next-token
// distributions on held-out text, every past token read back from the pages,
// against the f16 cache. These pin the figures docs/BENCHMARKS.md reports
// for tkv-test-23M, so that a codec, policy or attention change that hurts
// the model fails here and not only in a benchmark someone has to run.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "bench/text_eval.h"
#include "common/test_util.h"
#include "kv/kv_config.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tkv::model {
namespace {

// Mean KL(f16 || tested) over the scored half of one fixed 2048-token window
// (the first of tkv-test-heldout.txt).
double mean_kl_on_heldout(const std::string& model_path, const std::string& text_path,
                          const std::string& kv_flag) {
  const auto model = Model::load(model_path);
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_gguf(model->gguf());
  std::ifstream in(text_path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const bench::TextWindows windows =
      bench::make_text_windows(tokenizer, text.str(), 2048, 1, text_path);

  kv::KvConfig tested, baseline;
  EXPECT_TRUE(kv::parse_kv_shorthand(kv_flag, tested.k, tested.v)) << kv_flag;
  ThreadPool pool(2);
  bench::TextEvalOptions opts;
  opts.baseline = &baseline;
  const auto scores = bench::evaluate_text(*model, pool, tested, windows, opts);
  EXPECT_EQ(scores.size(), 1u);
  double sum = 0;
  for (double kl : scores[0].kl) sum += kl;
  EXPECT_EQ(scores[0].kl.size(), 1023u);
  return sum / double(scores[0].kl.size());
}

TEST(CacheQuality, K4V2DefaultPolicyMeanKlOnHeldOutText) {
  TKV_REQUIRE_FIXTURE(model, "tkv-test-23M.gguf");
  TKV_REQUIRE_FIXTURE(text, "tkv-test-heldout.txt");
  const double kl = mean_kl_on_heldout(model, text, "k4v2");
  if (HasFailure()) return;
  RecordProperty("mean_kl", std::to_string(kl));
  EXPECT_GT(kl, 0.0);  // the cache really is lossy: the comparison is not vacuous
  EXPECT_LE(kl, 0.015);
}

TEST(CacheQuality, Q8_0MeanKlOnHeldOutText) {
  TKV_REQUIRE_FIXTURE(model, "tkv-test-23M.gguf");
  TKV_REQUIRE_FIXTURE(text, "tkv-test-heldout.txt");
  const double kl = mean_kl_on_heldout(model, text, "q8_0");
  if (HasFailure()) return;
  RecordProperty("mean_kl", std::to_string(kl));
  EXPECT_GT(kl, 0.0);
  EXPECT_LE(kl, 0.002);
}

}  // namespace
}  // namespace tkv::model
