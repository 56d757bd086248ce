#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "common/error.h"
#include "sample_test_util.h"

namespace tkv::sample {
namespace {

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(float(std::log(x)));
  return l;
}

std::vector<int32_t> tokens_of(const std::vector<TokenProb>& d) {
  std::vector<int32_t> t;
  for (const TokenProb& x : d) t.push_back(x.token);
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- An independent reference: full sort, straight from the llama.cpp semantics.

std::vector<TokenProb> reference_distribution(const std::vector<float>& logits,
                                              const SamplerConfig& cfg,
                                              const std::vector<int32_t>& history) {
  std::vector<std::pair<int32_t, float>> c;
  for (size_t i = 0; i < logits.size(); ++i) c.emplace_back(int32_t(i), logits[i]);
  std::vector<int32_t> window = history;
  if (cfg.repeat_last_n >= 0 && window.size() > size_t(cfg.repeat_last_n))
    window.erase(window.begin(), window.end() - cfg.repeat_last_n);
  std::sort(window.begin(), window.end());
  window.erase(std::unique(window.begin(), window.end()), window.end());
  for (int32_t t : window) {
    float& l = c[size_t(t)].second;
    l = l > 0 ? l / cfg.repeat_penalty : l * cfg.repeat_penalty;
  }
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  });
  if (cfg.temperature <= 0) return {{c[0].first, 1.0}};
  if (cfg.top_k > 0 && size_t(cfg.top_k) < c.size()) c.resize(size_t(cfg.top_k));
  auto softmax = [&](double t) {
    std::vector<double> p;
    double total = 0;
    for (auto& x : c) total += p.emplace_back(std::exp((double(x.second) - c[0].second) / t));
    for (double& x : p) x /= total;
    return p;
  };
  if (cfg.top_p < 1) {
    const auto p = softmax(1.0);
    double cum = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      cum += p[i];
      if (cum >= cfg.top_p) {
        c.resize(i + 1);
        break;
      }
    }
  }
  if (cfg.min_p > 0) {
    const float threshold = c[0].second + std::log(cfg.min_p);
    while (c.back().second < threshold) c.pop_back();
  }
  const auto p = softmax(cfg.temperature);
  std::vector<TokenProb> out;
  for (size_t i = 0; i < c.size(); ++i) out.push_back({c[i].first, p[i]});
  return out;
}

void expect_same_distribution(const std::vector<TokenProb>& got,
                              const std::vector<TokenProb>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token) << "rank " << i;
    EXPECT_NEAR(got[i].p, want[i].p, 1e-7 + 1e-5 * want[i].p) << "rank " << i;
  }
}

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  SamplerConfig cfg;
  cfg.temperature = 0;
  for (uint32_t seed = 0; seed < 20; ++seed) {
    const auto logits = random_logits(1000, seed);
    cfg.seed = seed;  // irrelevant when greedy
    Sampler s(cfg);
    const auto want = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(s.sample(logits.data(), int(logits.size())), want);
    const auto d = s.distribution(logits.data(), int(logits.size()));
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].token, want);
    EXPECT_EQ(d[0].p, 1.0);
  }
  Sampler s(cfg);
  const std::vector<float> ties = {0, 5, 1, 5, 5, -3};
  EXPECT_EQ(s.sample(ties.data(), 6), 1);
}

TEST(Sampler, TopKKeepsTheKLargest) {
  SamplerConfig cfg = plain();
  cfg.top_k = 3;
  const std::vector<float> logits = {0.5f, 3, 1, 2.5f, -1, 2, 0};
  const auto d = Sampler(cfg).distribution(logits.data(), 7);
  EXPECT_EQ(tokens_of(d), (std::vector<int32_t>{1, 3, 5}));
  const double z = std::exp(3.0) + std::exp(2.5) + std::exp(2.0);
  EXPECT_NEAR(d[0].p, std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(d[2].p, std::exp(2.0) / z, 1e-6);
  // Ties at the boundary: lower ids are kept.
  const std::vector<float> flat(10, 1.0f);
  EXPECT_EQ(tokens_of(Sampler(cfg).distribution(flat.data(), 10)), (std::vector<int32_t>{0, 1, 2}));
  cfg.top_k = 100;  // larger than the vocabulary: no effect
  EXPECT_EQ(Sampler(cfg).distribution(logits.data(), 7).size(), 7u);
}

TEST(Sampler, TopPKeepsTheShortestPrefixReachingP) {
  const auto logits = log_probs({0.1, 0.4, 0.2, 0.3});
  SamplerConfig cfg = plain();
  cfg.top_p = 0.6f;  // 0.4 + 0.3 >= 0.6
  auto d = Sampler(cfg).distribution(logits.data(), 4);
  EXPECT_EQ(tokens_of(d), (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(d[0].p, 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(d[1].p, 0.3 / 0.7, 1e-6);
  cfg.top_p = 0.75f;  // needs the 0.2 too
  EXPECT_EQ(tokens_of(Sampler(cfg).distribution(logits.data(), 4)),
            (std::vector<int32_t>{1, 3, 2}));
  cfg.top_p = 0.35f;  // the top token alone
  EXPECT_EQ(tokens_of(Sampler(cfg).distribution(logits.data(), 4)), (std::vector<int32_t>{1}));
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheTop) {
  const auto logits = log_probs({0.15, 0.5, 0.05, 0.3});
  SamplerConfig cfg = plain();
  cfg.min_p = 0.2f;  // threshold 0.1: drops 0.05
  auto d = Sampler(cfg).distribution(logits.data(), 4);
  EXPECT_EQ(tokens_of(d), (std::vector<int32_t>{1, 3, 0}));
  EXPECT_NEAR(d[0].p, 0.5 / 0.95, 1e-6);
  cfg.min_p = 0.65f;  // 0.3 / 0.5 = 0.6 < 0.65
  EXPECT_EQ(tokens_of(Sampler(cfg).distribution(logits.data(), 4)), (std::vector<int32_t>{1}));
}

TEST(Sampler, TemperatureScalesLogits) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.0f, -1.0f};
  for (float t : {0.25f, 0.5f, 1.0f, 2.0f, 10.0f}) {
    SamplerConfig cfg = plain();
    cfg.temperature = t;
    const auto d = Sampler(cfg).distribution(logits.data(), 4);
    double z = 0;
    for (float l : logits) z += std::exp(l / t);
    ASSERT_EQ(d.size(), 4u);
    for (const TokenProb& x : d) EXPECT_NEAR(x.p, std::exp(logits[x.token] / t) / z, 1e-6) << t;
  }
  // A tiny temperature concentrates all mass on the top token without overflow.
  SamplerConfig cfg = plain();
  cfg.temperature = 1e-30f;
  const auto d = Sampler(cfg).distribution(logits.data(), 4);
  EXPECT_EQ(d[0].token, 1);
  EXPECT_EQ(d[0].p, 1.0);
}

TEST(Sampler, FiltersRunInLlamaCppOrder) {
  // top-p sees the top-k survivors' renormalized probabilities: over the full
  // distribution 0.35 < 0.55 would keep two tokens; over the top 2 (0.58, 0.42)
  // the first alone reaches 0.55.
  const auto logits = log_probs({0.35, 0.25, 0.2, 0.2});
  SamplerConfig cfg = plain();
  cfg.top_p = 0.55f;
  EXPECT_EQ(Sampler(cfg).distribution(logits.data(), 4).size(), 2u);
  cfg.top_k = 2;
  EXPECT_EQ(Sampler(cfg).distribution(logits.data(), 4).size(), 1u);
  // Temperature comes last: it does not change what top-p keeps.
  cfg = plain();
  cfg.top_p = 0.55f;  // 0.35 + 0.25 reaches it at T = 1; at T = 5 it would need three
  cfg.temperature = 5.0f;
  EXPECT_EQ(Sampler(cfg).distribution(logits.data(), 4).size(), 2u);
}

TEST(Sampler, MatchesAFullSortReferenceOnRandomInputs) {
  std::mt19937 rng(7);
  const size_t sizes[] = {1, 2, 10, 1000, 32000, 128256};
  for (size_t n : sizes) {
    for (int trial = 0; trial < (n > 10000 ? 4 : 20); ++trial) {
      SamplerConfig cfg;
      cfg.temperature = std::array{0.0f, 0.3f, 0.8f, 1.0f, 1.7f}[rng() % 5];
      cfg.top_k = std::array{0, 1, 5, 40, 2000}[rng() % 5];
      cfg.top_p = std::array{1.0f, 0.95f, 0.5f, 0.1f, 0.999f}[rng() % 5];
      cfg.min_p = std::array{0.0f, 0.05f, 0.3f, 1e-6f}[rng() % 4];
      cfg.repeat_penalty = std::array{1.0f, 1.1f, 1.5f, 0.8f}[rng() % 4];
      cfg.repeat_last_n = std::array{0, 3, 64, -1}[rng() % 4];
      // Flat and peaked logits: top-p needs few or many tokens.
      const auto logits = random_logits(n, rng(), rng() % 2 ? 0.3f : 4.0f);
      Sampler s(cfg);
      std::vector<int32_t> history;
      for (int k = 0; k < 10; ++k) history.push_back(int32_t(rng() % n));
      for (int32_t t : history) s.accept(t);
      std::vector<int32_t> effective = cfg.repeat_last_n == 0 ? std::vector<int32_t>{} : history;
      SCOPED_TRACE(testing::Message() << "n=" << n << " T=" << cfg.temperature << " k=" << cfg.top_k
                                      << " p=" << cfg.top_p << " min_p=" << cfg.min_p << " rp="
                                      << cfg.repeat_penalty << " last_n=" << cfg.repeat_last_n);
      expect_same_distribution(s.distribution(logits.data(), int(n)),
                               reference_distribution(logits, cfg, effective));
      // A drawn token is always one the distribution allows.
      const int32_t t = s.sample(logits.data(), int(n));
      const auto allowed = tokens_of(s.distribution(logits.data(), int(n)));
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), t), allowed.end()) << t;
    }
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
  const auto logits = random_logits(500, 3, 1.0f);
  auto run = [&](Sampler& s) {
    std::vector<int32_t> out;
    for (int k = 0; k < 200; ++k) {
      const int32_t t = s.sample(logits.data(), 500);
      s.accept(t);
      out.push_back(t);
    }
    return out;
  };
  SamplerConfig cfg;  // the defaults: every filter on
  cfg.repeat_penalty = 1.1f;
  cfg.seed = 42;
  Sampler a(cfg), b(cfg);
  const auto first = run(a);
  EXPECT_EQ(first, run(b));
  a.reset();
  EXPECT_EQ(first, run(a));  // reset restores the seeded state
  cfg.seed = 43;
  Sampler c(cfg);
  const auto other = run(c);
  EXPECT_NE(first, other);
  // Not just a shift: most positions differ.
  size_t same = 0;
  for (size_t k = 0; k < first.size(); ++k) same += first[k] == other[k];
  EXPECT_LT(same, first.size() / 4);
}

TEST(Sampler, SampledFrequenciesFollowTheDistribution) {
  // Fixed seed: deterministic, cannot flake; bounds are ~5 standard deviations.
  const std::vector<double> p = {0.5, 0.25, 0.15, 0.07, 0.03};
  const auto logits = log_probs(p);
  Sampler s(plain(12345));
  const int n = 40000;
  std::vector<int> count(p.size(), 0);
  for (int k = 0; k < n; ++k) ++count[size_t(s.sample(logits.data(), int(p.size())))];
  double chi2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double freq = double(count[i]) / n;
    EXPECT_NEAR(freq, p[i], 5 * std::sqrt(p[i] * (1 - p[i]) / n)) << "token " << i;
    chi2 += (count[i] - n * p[i]) * (count[i] - n * p[i]) / (n * p[i]);
  }
  EXPECT_LT(chi2, 23.5);  // chi-square, 4 degrees of freedom, p = 1e-4

  // With filters on, sample() draws from what distribution() reports.
  SamplerConfig cfg = plain(99);
  cfg.top_k = 4;
  cfg.min_p = 0.2f;  // drops 0.07 / 0.5 < 0.2
  cfg.temperature = 0.7f;
  Sampler f(cfg);
  const auto d = f.distribution(logits.data(), int(p.size()));
  ASSERT_EQ(d.size(), 3u);
  std::vector<int> c2(p.size(), 0);
  for (int k = 0; k < n; ++k) ++c2[size_t(f.sample(logits.data(), int(p.size())))];
  for (const TokenProb& x : d)
    EXPECT_NEAR(double(c2[size_t(x.token)]) / n, x.p, 5 * std::sqrt(x.p * (1 - x.p) / n));
  EXPECT_EQ(c2[3] + c2[4], 0);
}

TEST(Sampler, RepetitionPenalty) {
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 1.9f};
  SamplerConfig cfg = plain();
  cfg.repeat_penalty = 1.5f;
  Sampler s(cfg);
  s.accept(0);
  s.accept(1);
  s.accept(0);  // counted once
  const std::vector<float> penalized = {2.0f / 1.5f, -1.0f * 1.5f, 0.5f, 1.9f};
  double z = 0;
  for (float l : penalized) z += std::exp(l);
  for (const TokenProb& x : s.distribution(logits.data(), 4))
    EXPECT_NEAR(x.p, std::exp(penalized[x.token]) / z, 1e-6) << x.token;

  // Greedy picks the runner-up once the leader has been used.
  cfg.temperature = 0;
  cfg.repeat_last_n = 2;
  Sampler g(cfg);
  EXPECT_EQ(g.sample(logits.data(), 4), 0);
  g.accept(0);
  EXPECT_EQ(g.sample(logits.data(), 4), 3);
  g.accept(2);
  g.accept(2);  // token 0 has left the 2-token window
  EXPECT_EQ(g.sample(logits.data(), 4), 0);

  cfg.repeat_last_n = 0;  // off
  Sampler off(cfg);
  off.accept(0);
  EXPECT_EQ(off.sample(logits.data(), 4), 0);

  cfg.repeat_last_n = -1;  // everything since reset
  Sampler all(cfg);
  all.accept(0);
  for (int k = 0; k < 1000; ++k) all.accept(2);
  EXPECT_EQ(all.sample(logits.data(), 4), 3);
  all.reset();
  EXPECT_EQ(all.sample(logits.data(), 4), 0);
}

TEST(Sampler, ConfigValidation) {
  auto err = [](auto edit) {
    SamplerConfig c;
    edit(c);
    return error_of([&] { Sampler s(c); });
  };
  EXPECT_EQ(err([](SamplerConfig&) {}), "(no error)");
  EXPECT_EQ(err([](SamplerConfig& c) { c.temperature = -0.5f; }),
            "sampler: temperature -0.5 must be a finite number >= 0");
  EXPECT_EQ(err([](SamplerConfig& c) { c.temperature = std::nanf(""); }),
            "sampler: temperature nan must be a finite number >= 0");
  EXPECT_EQ(err([](SamplerConfig& c) { c.top_k = -1; }),
            "sampler: top_k -1 must be >= 0 (0 turns it off)");
  EXPECT_EQ(err([](SamplerConfig& c) { c.top_p = 0; }),
            "sampler: top_p 0 must be in (0, 1] (1 turns it off)");
  EXPECT_EQ(err([](SamplerConfig& c) { c.top_p = 1.5f; }),
            "sampler: top_p 1.5 must be in (0, 1] (1 turns it off)");
  EXPECT_EQ(err([](SamplerConfig& c) { c.min_p = -0.1f; }),
            "sampler: min_p -0.1 must be in [0, 1] (0 turns it off)");
  EXPECT_EQ(err([](SamplerConfig& c) { c.repeat_penalty = 0; }),
            "sampler: repeat_penalty 0 must be a finite number > 0");
  EXPECT_EQ(err([](SamplerConfig& c) { c.repeat_last_n = -2; }),
            "sampler: repeat_last_n -2 must be >= -1 (-1: all, 0: off)");
}

TEST(Sampler, BadInputIsAClearError) {
  Sampler s(plain());
  std::vector<float> logits = {1, 2, 3};
  EXPECT_EQ(error_of([&] { s.sample(logits.data(), 0); }),
            "sampler: vocabulary size 0 must be positive");
  EXPECT_EQ(error_of([&] { s.sample(nullptr, 3); }), "sampler: no logits");
  logits[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(error_of([&] { s.sample(logits.data(), 3); }), "sampler: logit of token 1 is nan");
  logits[1] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(error_of([&] { s.sample(logits.data(), 3); }), "sampler: logit of token 1 is inf");
  const std::vector<float> masked(3, -std::numeric_limits<float>::infinity());
  EXPECT_EQ(error_of([&] { s.sample(masked.data(), 3); }), "sampler: every logit is -inf");
  EXPECT_EQ(error_of([&] { s.accept(-1); }), "sampler: cannot accept negative token id -1");
  SamplerConfig cfg = plain();
  cfg.repeat_penalty = 1.2f;
  Sampler p(cfg);
  p.accept(7);
  const std::vector<float> ok = {1, 2, 3};
  EXPECT_EQ(error_of([&] { p.sample(ok.data(), 3); }),
            "sampler: accepted token 7 is outside the vocabulary of 3");
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  // -inf logits (e.g. a grammar mask) have probability 0, at any temperature.
  std::vector<float> logits(50, -std::numeric_limits<float>::infinity());
  logits[10] = 0.0f;
  logits[20] = 0.5f;
  SamplerConfig cfg = plain(5);
  cfg.temperature = 3.0f;
  Sampler s(cfg);
  for (int k = 0; k < 1000; ++k) {
    const int32_t t = s.sample(logits.data(), 50);
    ASSERT_TRUE(t == 10 || t == 20) << t;
  }
}

TEST(Sampler, UniformFromRawEngineBits) {
  EXPECT_EQ(Sampler::uniform_from_bits(0), 0.0);
  EXPECT_EQ(Sampler::uniform_from_bits(~0ull), 1.0 - 0x1.0p-53);
  EXPECT_EQ(Sampler::uniform_from_bits(1ull << 63), 0.5);
  // std::mt19937_64's sequence is fixed by the standard ([rand.predef]):
  // the 10000th output of a default-constructed engine.
  std::mt19937_64 e;
  e.discard(9999);
  EXPECT_EQ(e(), 9981545732273789042ull);
}

}  // namespace
}  // namespace tkv::sample
