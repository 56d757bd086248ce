// f32 / f16 codecs: layout, round trip, the NaN/Inf and f16-range policy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "codec_test_util.h"
#include "common/error.h"
#include "common/f16.h"

namespace tkv::kv {
namespace {

TEST(FloatCodecs, PageBytesAreRowMajorWithoutOverhead) {
  for (int d : {8, 64, 96, 128, 256}) {
    EXPECT_EQ(make_codec(*parse_codec("f32"), d, nullptr)->page_bytes(64), size_t(64) * d * 4);
    EXPECT_EQ(make_codec(*parse_codec("f16"), d, nullptr)->page_bytes(64), size_t(64) * d * 2);
    // Any capacity works (the store's sink area may hold 4 tokens).
    EXPECT_EQ(make_codec(*parse_codec("f16"), d, nullptr)->page_bytes(4), size_t(4) * d * 2);
  }
}

TEST(FloatCodecs, RoundTripAtEveryHeadDim) {
  std::mt19937_64 rng(7);
  for (int d : {8, 64, 96, 128, 256}) {
    auto f32 = make_codec(*parse_codec("f32"), d, nullptr);
    auto f16 = make_codec(*parse_codec("f16"), d, nullptr);
    auto p32 = test::fill_page(*f32, 16, rng);
    auto p16 = test::fill_page(*f16, 16, rng);
    std::vector<float> out(d);
    for (int t = 0; t < 16; ++t) {
      f32->decode(p32.page, 16, t, out.data());
      EXPECT_EQ(0, std::memcmp(out.data(), &p32.inputs[size_t(t) * d], sizeof(float) * d));
      f16->decode(p16.page, 16, t, out.data());
      for (int i = 0; i < d; ++i) EXPECT_EQ(out[i], round_f16(p16.inputs[size_t(t) * d + i]));
    }
  }
}

TEST(FloatCodecs, CopySlotEqualsDecodeThenEncode) {
  // The residual ring is refilled with copy_slot(); it must leave exactly
  // the bytes that decode() + encode() into the same slot would.
  std::mt19937_64 rng(11);
  for (const char* name : {"f32", "f16", "q8_0"}) {
    SCOPED_TRACE(name);
    const int d = 64;
    auto codec = make_codec(*parse_codec(name), d, nullptr);
    auto src = test::fill_page(*codec, 16, rng);
    for (int slot : {0, 5, 15}) {
      std::vector<uint8_t> copied(codec->page_bytes(32), 0), round_trip(codec->page_bytes(32), 0);
      std::vector<float> x(d);
      codec->copy_slot(src.page, 16, slot, copied.data(), 32, 31 - slot);
      codec->decode(src.page, 16, slot, x.data());
      codec->encode(x.data(), round_trip.data(), 32, 31 - slot);
      EXPECT_EQ(copied, round_trip) << "slot " << slot;
    }
  }
}

TEST(FloatCodecs, F16EncodingIsRoundToNearestEvenOnEveryTarget) {
  // Normal, subnormal, tiny, halfway and near-overflow values: every SIMD
  // target must write the bytes of the exact scalar conversion.
  std::mt19937_64 rng(19);
  std::uniform_real_distribution<float> exponent(-30.0f, 16.0f);
  std::vector<float> x(256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = ((i % 2) ? -1.0f : 1.0f) * std::exp2(exponent(rng));
  x[0] = 65519.0f;
  x[1] = 1.0f + 1.0f / 2048;  // halfway between two f16 values: rounds to even
  x[2] = 5.96e-8f;            // smallest subnormal
  x[3] = 0.0f;
  auto f16 = make_codec(*parse_codec("f16"), 256, nullptr);
  std::vector<uint8_t> page(f16->page_bytes(1));
  test::for_each_simd_target([&](const std::string&) {
    f16->encode(x.data(), page.data(), 1, 0);
    for (int i = 0; i < 256; ++i) {
      const uint16_t got = uint16_t(page[2 * i] | (page[2 * i + 1] << 8));
      ASSERT_EQ(got, f32_to_f16(x[i])) << "value " << x[i];
    }
  });
}

TEST(FloatCodecs, F16BytesAreLittleEndianBinary16InSlotOrder) {
  auto f16 = make_codec(*parse_codec("f16"), 8, nullptr);
  std::vector<uint8_t> page(f16->page_bytes(4), 0);
  const float x[8] = {1.0f, -2.0f, 0.5f, 0, 65504.0f, -0.25f, 3.0f, 1024.0f};
  f16->encode(x, page.data(), 4, 2);
  for (int i = 0; i < 8; ++i) {
    const uint8_t* b = &page[(2 * 8 + i) * 2];
    EXPECT_EQ(uint16_t(b[0] | (b[1] << 8)), f32_to_f16(x[i])) << i;
  }
}

TEST(FloatCodecs, NonFiniteInputIsRejected) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (const char* name : {"f32", "f16"}) {
    auto c = make_codec(*parse_codec(name), 8, nullptr);
    std::vector<uint8_t> page(c->page_bytes(16));
    for (float b : bad) {
      std::vector<float> x(8, 0.5f);
      x[5] = b;
      try {
        c->encode(x.data(), page.data(), 16, 0);
        FAIL() << name << " accepted " << b;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("coordinate 5"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(FloatCodecs, F16RejectsFiniteValuesBeyondItsRange) {
  auto f16 = make_codec(*parse_codec("f16"), 8, nullptr);
  auto f32 = make_codec(*parse_codec("f32"), 8, nullptr);
  std::vector<uint8_t> page(f32->page_bytes(16));
  std::vector<float> x(8, 1.0f);
  x[3] = 1e30f;
  test::for_each_simd_target(
      [&](const std::string&) { EXPECT_THROW(f16->encode(x.data(), page.data(), 16, 0), Error); });
  EXPECT_NO_THROW(f32->encode(x.data(), page.data(), 16, 0));
  // 65504 is the largest f16 and is kept exactly; 65519 rounds down to it.
  x[3] = 65519.0f;
  f16->encode(x.data(), page.data(), 16, 1);
  std::vector<float> out(8);
  f16->decode(page.data(), 16, 1, out.data());
  EXPECT_EQ(out[3], 65504.0f);
}

TEST(FloatCodecs, ZeroVectorAndOutlierChannelRoundTrip) {
  auto f16 = make_codec(*parse_codec("f16"), 64, nullptr);
  std::vector<uint8_t> page(f16->page_bytes(16));
  std::vector<float> zero(64, 0.0f), out(64, 1.0f);
  f16->encode(zero.data(), page.data(), 16, 0);
  f16->decode(page.data(), 16, 0, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
  std::mt19937_64 rng(3);
  auto x = test::gaussian_vector(rng, 64);
  x[17] *= 100;
  f16->encode(x.data(), page.data(), 16, 1);
  f16->decode(page.data(), 16, 1, out.data());
  EXPECT_LT(test::normalized_sq_error(x.data(), out.data(), 64), 1e-6);
}

}  // namespace
}  // namespace tkv::kv
