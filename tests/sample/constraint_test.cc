// The sampler's token constraint hook (sample/constraint.h) with a toy
// constraint: the mask comes before every filter, accepted tokens reach it,
// and the prompt accepted before it was set does not.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/error.h"
#include "sample/sampler.h"

namespace tkv::sample {
namespace {

// Allows tokens of one parity, switching after each accepted token.
class Alternating : public TokenConstraint {
 public:
  void mask(float* logits, int n_vocab) override {
    ++masks;
    for (int t = 0; t < n_vocab; ++t)
      if (t % 2 != parity) logits[t] = -std::numeric_limits<float>::infinity();
  }
  void accept(int32_t token) override {
    accepted.push_back(token);
    parity = 1 - parity;
  }
  int parity = 0;
  int masks = 0;
  std::vector<int32_t> accepted;
};

SamplerConfig config(float temperature, int top_k) {
  SamplerConfig c;
  c.temperature = temperature;
  c.top_k = top_k;
  c.top_p = 1.0f;
  c.min_p = 0.0f;
  c.seed = 5;
  return c;
}

TEST(SamplerConstraint, GreedyPicksTheBestAllowedToken) {
  Sampler s(config(0.0f, 0));
  auto c = std::make_shared<Alternating>();
  s.set_constraint(c);
  const std::vector<float> logits = {1.0f, 9.0f, 3.0f, 8.0f, 2.0f};
  EXPECT_EQ(s.sample(logits.data(), 5), 2);  // 1 and 3 are odd
  s.accept(2);
  EXPECT_EQ(s.sample(logits.data(), 5), 1);  // now odd ones only
  EXPECT_EQ(c->accepted, std::vector<int32_t>{2});
}

TEST(SamplerConstraint, TopKSeesOnlyAllowedTokens) {
  // top_k = 1 after the mask: the best even token, never the best token.
  Sampler s(config(1.0f, 1));
  s.set_constraint(std::make_shared<Alternating>());
  const std::vector<float> logits = {0.0f, 50.0f, 1.0f, 40.0f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits.data(), 4), 2);
  const std::vector<TokenProb> d = s.distribution(logits.data(), 4);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].token, 2);
}

TEST(SamplerConstraint, DrawsStayAllowedAndPromptTokensAreNotPassedOn) {
  Sampler s(config(1.0f, 0));
  auto c = std::make_shared<Alternating>();
  s.accept(7);  // a prompt token, before the constraint
  s.set_constraint(c);
  std::vector<float> logits(64, 0.0f);
  for (int i = 0; i < 50; ++i) {
    const int32_t t = s.sample(logits.data(), 64);
    EXPECT_EQ(t % 2, c->parity);
    s.accept(t);
  }
  EXPECT_EQ(c->accepted.size(), 50u);
  EXPECT_EQ(c->masks, 50);
  // The caller's logits are never written.
  for (float x : logits) EXPECT_EQ(x, 0.0f);
  s.set_constraint(nullptr);
  s.accept(3);
  EXPECT_EQ(c->accepted.size(), 50u);
}

TEST(SamplerConstraint, NoBiasOrPenaltyReEnablesAForbiddenToken) {
  // The mask comes after the bias and the penalties: +100 on an odd token and
  // a negative presence penalty on the odd token already in the reply leave
  // both at -inf, while the bias still moves the allowed ones.
  SamplerConfig cfg = config(0.0f, 0);
  cfg.logit_bias = {{3, 100.0f}, {4, 5.0f}};
  cfg.presence_penalty = -50.0f;
  Sampler s(cfg);
  auto c = std::make_shared<Alternating>();
  c->parity = 1;
  s.set_constraint(c);
  s.accept(1);  // parity now 0: even tokens only
  const std::vector<float> logits = {1.0f, 9.0f, 3.0f, 8.0f, 2.0f};
  EXPECT_EQ(s.sample(logits.data(), 5), 4);  // 2 + 5 beats 3
  const std::vector<TokenProb> d = s.distribution(logits.data(), 5);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].token, 4);
}

}  // namespace
}  // namespace tkv::sample
