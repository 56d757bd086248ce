// Every codec at every head dim: encode -> decode of Gaussian vectors stays
// within the codec's expected error, and a 100x outlier channel does not
// break it (the rotated codecs spread it, the float ones store it).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codec_test_util.h"

namespace tkv::kv {
namespace {

// Normalized MSE bound per codec (tq: 1.1 x the Lloyd-Max distortion; tqNr a
// little above it, see tq_codec_test; q4_0: a 16-level uniform grid over
// +-amax of 32 Gaussian values).
double mse_bound(const std::string& name) {
  if (name == "f32") return 0;
  if (name == "f16") return 1e-6;
  if (name.rfind("q8_0", 0) == 0) return 1e-4;
  if (name.rfind("q4_0", 0) == 0) return 0.02;
  const double theory[5] = {0, 0.3634, 0.1175, 0.03454, 0.009497};
  const int bits = name[2] - '0';
  return (name.size() == 4 ? 1.2 : 1.1) * theory[bits];
}

class RoundTrip : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(RoundTrip, GaussianAndOutlierVectors) {
  const auto& [name, d] = GetParam();
  const auto c = test::make_test_codec(name, d, 40 + d);
  std::mt19937_64 rng(d);
  const int P = 64;
  std::vector<uint8_t> page(c.codec->page_bytes(P));
  std::vector<float> out(d);
  for (float outlier : {1.0f, 100.0f}) {
    double total = 0;
    const int n = 1024;
    for (int v = 0; v < n; ++v) {
      auto x = test::gaussian_vector(rng, d);
      x[(v * 7) % d] *= outlier;
      c.codec->encode(x.data(), page.data(), P, v % P);
      c.codec->decode(page.data(), P, v % P, out.data());
      total += test::normalized_sq_error(x.data(), out.data(), d);
    }
    // An outlier leaves plain q8_0 / q4_0 with one coarse block (a
    // rotation spreads it); at d = 8 the whole vector is one block.
    const bool unrotated_block = name == "q8_0" || name == "q4_0";
    const double bound =
        mse_bound(name) * (outlier > 1 && (unrotated_block || (d == 8 && name[0] == 'q')) ? 4 : 1);
    EXPECT_LE(total / n, bound) << name << " d=" << d << " outlier x" << outlier;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, RoundTrip,
                         ::testing::Combine(::testing::ValuesIn(test::all_codec_names()),
                                            ::testing::Values(8, 64, 96, 128, 256)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace tkv::kv
