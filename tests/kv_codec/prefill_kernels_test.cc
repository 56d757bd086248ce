// The codecs' score()/accumulate() with a prefill-sized group of query rows
// (the attention driver passes up to 64 rows: query tokens x GQA heads),
// where some targets take register-blocked kernels, against the same rows
// one at a time (the decode path), on every compiled Highway target: every
// row-block size and its remainders (64 = 10 x 6 + 4, 11 = 6 + 4 + 1),
// whole and partial key ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codec_test_util.h"

namespace tkv::kv {
namespace {

void check_rows(const Codec& codec, int G, uint64_t seed) {
  constexpr int kPage = 64;
  const int d = codec.head_dim();
  std::mt19937_64 rng(seed);
  const auto filled = test::fill_page(codec, kPage, rng);
  const auto q = test::gaussian_vector(rng, G * d);
  const size_t pq = codec.prepared_query_floats();
  std::vector<float> prepared(G * pq);
  codec.prepare_queries(q.data(), G, prepared.data());
  const size_t stride = kPage + 3;
  const auto p = test::uniform_vector(rng, int(G * stride));
  const auto acc0 = test::gaussian_vector(rng, G * d);

  for (auto [b, e] : std::vector<std::pair<int, int>>{{0, kPage}, {5, 50}, {16, 33}, {63, 64}}) {
    SCOPED_TRACE("G " + std::to_string(G) + " range [" + std::to_string(b) + ", " +
                 std::to_string(e) + ")");
    std::vector<float> scores(G * stride, 0.0f);
    codec.score(prepared.data(), G, filled.page, kPage, b, e, scores.data(), stride);
    std::vector<float> acc = acc0;
    codec.accumulate(p.data(), G, stride, filled.page, kPage, b, e, acc.data());
    for (int g = 0; g < G; ++g) {
      std::vector<float> one(stride, 0.0f);
      codec.score(prepared.data() + g * pq, 1, filled.page, kPage, b, e, one.data(), stride);
      for (int t = 0; t < e - b; ++t) {
        double mag = 0;
        for (int i = 0; i < d; ++i) mag += double(q[g * d + i]) * q[g * d + i];
        ASSERT_NEAR(scores[g * stride + t], one[t], 1e-5 * std::sqrt(mag * d) + 1e-30)
            << "score, row " << g << " key " << (b + t);
      }
      std::vector<float> acc_one(acc0.begin() + g * d, acc0.begin() + (g + 1) * d);
      codec.accumulate(p.data() + g * stride, 1, stride, filled.page, kPage, b, e, acc_one.data());
      for (int i = 0; i < d; ++i)
        ASSERT_NEAR(acc[g * d + i], acc_one[i], 1e-5 * (std::fabs(acc_one[i]) + e - b))
            << "accumulate, row " << g << " coordinate " << i;
    }
  }
}

class PrefillKernels : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(PrefillKernels, ManyRowsMatchOneRowAtATimeOnEveryTarget) {
  const auto& [name, d] = GetParam();
  const auto c = test::make_test_codec(name, d, 7 + d);
  test::for_each_simd_target([&](const std::string&) {
    for (int G : {64, 11}) {
      check_rows(*c.codec, G, uint64_t(G));
      if (HasFatalFailure()) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Codecs, PrefillKernels,
                         ::testing::Combine(::testing::Values("f16", "f32", "tq2", "tq3", "tq4"),
                                            ::testing::Values(64, 128)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace tkv::kv
