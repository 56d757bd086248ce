// A sequence truncated to a position inside a page writes that page's slots
// again. Codec::encode() must therefore overwrite every byte of its slot and
// no byte of another slot, whatever the page held before: a page rewritten
// from slot s over old contents is byte-identical to one written from
// scratch with the same vectors (every codec, head dims with and without
// tails, slots inside and at the edge of a 16-token tile).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codec_test_util.h"

namespace tkv::kv {
namespace {

class RewriteSlots : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(RewriteSlots, RewritingFromAnySlotMatchesAFreshPage) {
  const auto& [name, d] = GetParam();
  const auto c = test::make_test_codec(name, d, 7 + d);
  constexpr int P = 64;
  std::mt19937_64 rng(d);
  std::vector<std::vector<float>> old_v, new_v;
  for (int t = 0; t < P; ++t) {
    old_v.push_back(test::gaussian_vector(rng, d));
    new_v.push_back(test::gaussian_vector(rng, d, 3.0f));
  }
  const size_t bytes = c.codec->page_bytes(P);
  for (int from : {0, 1, 15, 16, 17, 33, 63}) {
    // Fresh: slots [0, from) old, [from, P) new, on a zeroed page.
    std::vector<uint8_t> fresh(bytes, 0), rewritten(bytes, 0xA5);
    for (int t = 0; t < P; ++t)
      c.codec->encode((t < from ? old_v : new_v)[size_t(t)].data(), fresh.data(), P, t);
    // Rewritten: every slot old first (stale bytes beyond `from`), then
    // [from, P) written again.
    for (int t = 0; t < P; ++t) c.codec->encode(old_v[size_t(t)].data(), rewritten.data(), P, t);
    for (int t = from; t < P; ++t) c.codec->encode(new_v[size_t(t)].data(), rewritten.data(), P, t);
    std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
    for (int t = 0; t < P; ++t) {
      c.codec->decode(fresh.data(), P, t, a.data());
      c.codec->decode(rewritten.data(), P, t, b.data());
      ASSERT_EQ(a, b) << name << " d=" << d << " from " << from << " slot " << t;
    }
    // Every byte that belongs to some slot is the same (the fresh page had
    // all slots written, so nothing but layout padding can differ).
    std::vector<uint8_t> fresh2(bytes, 0xFF);
    for (int t = 0; t < P; ++t)
      c.codec->encode((t < from ? old_v : new_v)[size_t(t)].data(), fresh2.data(), P, t);
    for (size_t i = 0; i < bytes; ++i)
      if (fresh[i] == fresh2[i]) {
        EXPECT_EQ(rewritten[i], fresh[i]) << name << " byte " << i;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, RewriteSlots,
                         ::testing::Combine(::testing::ValuesIn(test::all_codec_names()),
                                            ::testing::Values(40, 56, 64, 128)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_d" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace tkv::kv
