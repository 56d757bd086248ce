// The fused primitives against decode(): score() == <q, decode(k_t)> and
// accumulate() + unrotate() == sum_t p_t decode(v_t), for every codec, head
// dim, GQA group size, slot range (tile-aligned or not, every single slot)
// and every compiled Highway target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codec_test_util.h"

namespace tkv::kv {
namespace {

constexpr float kSentinel = 12345.0f;

std::vector<std::pair<int, int>> ranges_for(int page_tokens) {
  const int P = page_tokens;
  std::vector<std::pair<int, int>> r = {{0, P},  {3, P - 2},  {16, 32},   {5, 5},
                                        {0, 17}, {31, P - 1}, {P - 1, P}, {P - 16, P}};
  for (int t = 0; t < page_tokens; ++t) r.push_back({t, t + 1});  // every page position
  return r;
}

void check_codec(const Codec& codec, int page_tokens, uint64_t seed) {
  const int d = codec.head_dim();
  std::mt19937_64 rng(seed);
  const auto filled = test::fill_page(codec, page_tokens, rng);
  std::vector<float> decoded(size_t(page_tokens) * d);
  for (int t = 0; t < page_tokens; ++t)
    codec.decode(filled.page, page_tokens, t, &decoded[size_t(t) * d]);

  for (int G : {1, 2, 3, 4, 8, 13}) {  // 13 = 8 + 4 + 1: every head-chunk size
    SCOPED_TRACE("G = " + std::to_string(G));
    const auto q = test::gaussian_vector(rng, G * d);
    std::vector<float> prepared(G * codec.prepared_query_floats());
    codec.prepare_queries(q.data(), G, prepared.data());
    const size_t stride = page_tokens + 7;
    const auto p = test::uniform_vector(rng, int(G * stride));
    const auto acc0 = test::gaussian_vector(rng, G * d);
    std::vector<float> acc0_plain = acc0;
    codec.unrotate(acc0_plain.data(), G);
    if (!codec.values_rotated()) {
      EXPECT_EQ(acc0_plain, acc0) << "unrotate must be a no-op";
    }

    for (auto [b, e] : ranges_for(page_tokens)) {
      SCOPED_TRACE("range [" + std::to_string(b) + ", " + std::to_string(e) + ")");
      std::vector<float> scores(G * stride, kSentinel);
      codec.score(prepared.data(), G, filled.page, page_tokens, b, e, scores.data(), stride);
      for (int g = 0; g < G; ++g) {
        for (int t = b; t < e; ++t) {
          // Relative to ||q|| ||k||: rotated-domain sums cancel differently
          // from the original-domain ones, so sum |q_i k_i| alone can be
          // smaller than the rounding of an exact rotation.
          double ref = 0, mag = 0, qq = 0, kk = 0;
          for (int i = 0; i < d; ++i) {
            const double qi = q[g * d + i], ki = decoded[size_t(t) * d + i];
            ref += qi * ki;
            mag += std::abs(qi * ki);
            qq += qi * qi;
            kk += ki * ki;
          }
          mag = std::max(mag, std::sqrt(qq * kk));
          ASSERT_NEAR(scores[g * stride + (t - b)], ref, 1e-5 * mag + 1e-30)
              << "g " << g << " slot " << t;
        }
        for (size_t j = e - b; j < stride; ++j)
          ASSERT_EQ(scores[g * stride + j], kSentinel) << "wrote outside the range, g " << g;
      }

      std::vector<float> acc = acc0;
      codec.accumulate(p.data(), G, stride, filled.page, page_tokens, b, e, acc.data());
      codec.unrotate(acc.data(), G);
      for (int g = 0; g < G; ++g) {
        double mag = 0, err2 = 0;
        for (int t = b; t < e; ++t) {
          double n2 = 0;
          for (int i = 0; i < d; ++i)
            n2 += double(decoded[size_t(t) * d + i]) * decoded[size_t(t) * d + i];
          mag += p[g * stride + (t - b)] * std::sqrt(n2);
        }
        double n0 = 0;
        for (int i = 0; i < d; ++i) n0 += double(acc0[g * d + i]) * acc0[g * d + i];
        mag += std::sqrt(n0);
        for (int i = 0; i < d; ++i) {
          double ref = acc0_plain[g * d + i];
          for (int t = b; t < e; ++t)
            ref += double(p[g * stride + (t - b)]) * decoded[size_t(t) * d + i];
          err2 += (acc[g * d + i] - ref) * (acc[g * d + i] - ref);
        }
        ASSERT_LE(std::sqrt(err2), 1e-5 * mag) << "accumulate, g " << g;
      }
    }
  }
}

class FusedKernels : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(FusedKernels, MatchDecodeOnEveryTarget) {
  const auto& [name, d] = GetParam();
  const auto c = test::make_test_codec(name, d, 99 + d);
  test::for_each_simd_target([&](const std::string&) {
    check_codec(*c.codec, 64, 1);
    if (HasFatalFailure()) return;
    check_codec(*c.codec, 32, 2);
  });
}

const std::vector<std::string> kFusedCodecs = test::all_codec_names();

INSTANTIATE_TEST_SUITE_P(AllCodecs, FusedKernels,
                         ::testing::Combine(::testing::ValuesIn(kFusedCodecs),
                                            ::testing::Values(8, 64, 96, 128, 256)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace tkv::kv
