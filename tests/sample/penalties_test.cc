// Logit bias and presence / frequency penalties (sampler.h): what they do to
// the distribution, how they combine with the repetition penalty, and that a
// seeded sampler stays deterministic with them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "common/error.h"
#include "sample/sampler.h"
#include "sample_test_util.h"

namespace tkv::sample {
namespace {

// Probability of every token under the sampler's distribution (0 for the
// filtered ones).
std::vector<double> probs(const Sampler& s, const std::vector<float>& logits) {
  std::vector<double> p(logits.size(), 0.0);
  for (const TokenProb& t : s.distribution(logits.data(), int(logits.size())))
    p[size_t(t.token)] = t.p;
  return p;
}

// The plain softmax of `logits`.
std::vector<double> softmax(const std::vector<float>& logits) {
  double mx = -INFINITY, total = 0;
  for (float l : logits) mx = std::max(mx, double(l));
  std::vector<double> p;
  for (float l : logits) total += std::exp(double(l) - mx);
  for (float l : logits) p.push_back(std::exp(double(l) - mx) / total);
  return p;
}

TEST(Penalties, LogitBiasIsAddedToTheLogits) {
  const std::vector<float> logits = random_logits(50, 3, 2.0f);
  SamplerConfig c = plain();
  c.logit_bias = {{7, 5.0f}, {11, -100.0f}, {2, 0.5f}};
  const Sampler s(c);
  std::vector<float> expect = logits;
  expect[7] += 5.0f;
  expect[11] -= 100.0f;
  expect[2] += 0.5f;
  const std::vector<double> want = softmax(expect), got = probs(s, logits);
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * want[i] + 1e-12) << i;
  EXPECT_LT(got[11], 1e-30);
}

TEST(Penalties, LogitBiasSteersGreedy) {
  const std::vector<float> logits = random_logits(50, 4, 2.0f);
  SamplerConfig c = plain();
  c.temperature = 0;
  c.logit_bias = {{13, 100.0f}};
  Sampler s(c);
  EXPECT_EQ(s.sample(logits.data(), 50), 13);
}

TEST(Penalties, PresenceAndFrequencyFollowOpenAIsFormula) {
  const std::vector<float> logits = random_logits(40, 5, 2.0f);
  SamplerConfig c = plain();
  c.presence_penalty = 0.7f;
  c.frequency_penalty = 0.3f;
  Sampler s(c);
  // The prompt is not counted, the reply is: 3 twice, 9 once.
  for (int32_t t : {3, 5, 5, 5}) s.accept_prompt(t);
  for (int32_t t : {3, 9, 3}) s.accept(t);
  std::vector<float> expect = logits;
  expect[3] -= 0.7f + 2 * 0.3f;
  expect[9] -= 0.7f + 1 * 0.3f;
  const std::vector<double> want = softmax(expect), got = probs(s, logits);
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6 * want[i] + 1e-12) << i;
}

TEST(Penalties, NegativePenaltiesRaiseRepeatedTokens) {
  const std::vector<float> logits = random_logits(40, 6, 2.0f);
  SamplerConfig c = plain();
  c.frequency_penalty = -2.0f;
  Sampler s(c);
  s.accept(17);
  EXPECT_GT(probs(s, logits)[17], softmax(logits)[17]);
}

TEST(Penalties, RepetitionThenPresenceInLlamaCppsOrder) {
  // llama.cpp's penalties sampler: the repetition penalty scales the logit,
  // then frequency and presence subtract; the bias comes before both.
  std::vector<float> logits(8, 0.0f);
  logits[1] = 2.0f;
  logits[2] = -1.0f;
  SamplerConfig c = plain();
  c.temperature = 0;
  c.repeat_penalty = 2.0f;
  c.repeat_last_n = 4;
  c.presence_penalty = 0.5f;
  c.logit_bias = {{1, 2.0f}};
  Sampler s(c);
  s.accept(1);
  s.accept(2);
  // Token 1: (2 + 2) / 2 - 0.5 = 1.5; token 2: -1 * 2 - 0.5 = -2.5; the
  // others 0. Greedy takes 1.
  EXPECT_EQ(s.sample(logits.data(), 8), 1);
  logits[3] = 1.6f;
  EXPECT_EQ(s.sample(logits.data(), 8), 3);
  logits[3] = 1.4f;
  EXPECT_EQ(s.sample(logits.data(), 8), 1);
}

TEST(Penalties, RepeatWindowSeesThePromptButPresenceDoesNot) {
  std::vector<float> logits(4, 0.0f);
  logits[0] = 1.0f;
  SamplerConfig c = plain();
  c.temperature = 0;
  c.presence_penalty = 2.0f;
  Sampler s(c);
  s.accept_prompt(0);
  EXPECT_EQ(s.sample(logits.data(), 4), 0);  // the prompt is not penalized
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data(), 4), 1);  // 1 - 2 < 0: ties go to the lower id
  s.reset();
  EXPECT_EQ(s.sample(logits.data(), 4), 0);  // reset forgets the reply
}

TEST(Penalties, SeededSamplingIsDeterministic) {
  const std::vector<float> logits = random_logits(300, 7, 2.0f);
  SamplerConfig c = plain(42);
  c.presence_penalty = 0.4f;
  c.frequency_penalty = 0.2f;
  c.repeat_penalty = 1.1f;
  c.logit_bias = {{5, 3.0f}, {6, -3.0f}};
  const auto run = [&](SamplerConfig cfg) {
    Sampler s(cfg);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      out.push_back(s.sample(logits.data(), 300));
      s.accept(out.back());
    }
    return out;
  };
  const std::vector<int32_t> a = run(c), b = run(c);
  EXPECT_EQ(a, b);
  c.seed = 43;
  EXPECT_NE(run(c), a);
  // The penalties change the draw: without them, another sequence.
  SamplerConfig off = plain(42);
  EXPECT_NE(run(off), a);
}

TEST(Penalties, FrequencyPenaltySpreadsTheReply) {
  // With a strong frequency penalty no token can dominate a long reply.
  std::vector<float> logits(20, 0.0f);
  logits[0] = 4.0f;
  SamplerConfig c = plain(9);
  c.frequency_penalty = 1.0f;
  Sampler s(c);
  std::map<int32_t, int> counts;
  for (int i = 0; i < 200; ++i) {
    const int32_t t = s.sample(logits.data(), 20);
    ++counts[t];
    s.accept(t);
  }
  EXPECT_LT(counts[0], 40);
  Sampler free_run(plain(9));
  int zeros = 0;
  for (int i = 0; i < 200; ++i) zeros += free_run.sample(logits.data(), 20) == 0;
  EXPECT_GT(zeros, 100);
}

TEST(Penalties, BadSettingsAreRefused) {
  SamplerConfig c = plain();
  c.presence_penalty = INFINITY;
  EXPECT_THROW(Sampler{c}, Error);
  c = plain();
  c.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(Sampler{c}, Error);
  c.logit_bias = {{3, NAN}};
  EXPECT_THROW(Sampler{c}, Error);
  c.logit_bias = {{3, 1.0f}, {3, 2.0f}};
  EXPECT_THROW(Sampler{c}, Error);
  c.logit_bias = {{60, 1.0f}};
  Sampler s(c);
  const std::vector<float> logits(50, 0.0f);
  EXPECT_THROW(s.sample(logits.data(), 50), Error);  // outside the vocabulary
}

}  // namespace
}  // namespace tkv::sample
