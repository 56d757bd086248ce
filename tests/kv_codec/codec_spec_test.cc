// Codec names, parsing and the factory's argument checks.
#include <gtest/gtest.h>

#include "codec_test_util.h"
#include "common/error.h"
#include "kv/codec/codec.h"

namespace tkv::kv {
namespace {

TEST(CodecSpec, EveryCanonicalNameRoundTrips) {
  for (const std::string& name : test::all_codec_names()) {
    const auto spec = parse_codec(name);
    ASSERT_TRUE(spec.has_value()) << name;
    EXPECT_EQ(spec->name(), name);
  }
}

TEST(CodecSpec, ParsingIsCaseInsensitiveAndFillsTheFields) {
  const auto tq4r = parse_codec("TQ4R");
  ASSERT_TRUE(tq4r.has_value());
  EXPECT_EQ(tq4r->kind, CodecKind::TQ);
  EXPECT_EQ(tq4r->bits, 4);
  EXPECT_TRUE(tq4r->norm_correction);
  EXPECT_TRUE(tq4r->quantized());
  const auto q4h = parse_codec("Q4_0H");
  ASSERT_TRUE(q4h.has_value());
  EXPECT_EQ(q4h->kind, CodecKind::Q4_0);
  EXPECT_TRUE(q4h->rotate);
  EXPECT_FALSE(parse_codec("f16")->quantized());
}

TEST(CodecSpec, UnknownNamesAreRejected) {
  for (const char* bad : {"", "f8", "tq0", "tq5", "tq4x", "q8", "q4_1", "tq", "tq44", "f16 "})
    EXPECT_FALSE(parse_codec(bad).has_value()) << bad;
}

TEST(MakeCodec, RotatingCodecsNeedAMatchingRotation) {
  for (const char* name : {"tq4", "q8_0h", "q4_0h"}) {
    EXPECT_THROW(make_codec(*parse_codec(name), 64, nullptr), Error) << name;
    auto wrong = std::make_shared<const Rotation>(128, 1);
    EXPECT_THROW(make_codec(*parse_codec(name), 64, wrong), Error) << name;
  }
  // Non-rotating codecs ignore the rotation argument.
  EXPECT_NO_THROW(make_codec(*parse_codec("f16"), 64, nullptr));
  EXPECT_NO_THROW(make_codec(*parse_codec("q8_0"), 64, nullptr));
}

TEST(MakeCodec, BadArgumentsGiveErrorsNamingTheProblem) {
  try {
    make_codec(CodecSpec{CodecKind::TQ, 7, true}, 64, std::make_shared<const Rotation>(64, 1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bits"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_codec(*parse_codec("f16"), 0, nullptr), Error);
  EXPECT_THROW(make_codec(*parse_codec("f16"), -8, nullptr), Error);
}

TEST(MakeCodec, SlotAndRangeMisuseIsAnError) {
  auto c = make_codec(*parse_codec("f16"), 8, nullptr);
  std::vector<uint8_t> page(c->page_bytes(16));
  std::vector<float> x(8, 1.0f), scores(64);
  EXPECT_THROW(c->encode(x.data(), page.data(), 16, 16), Error);
  EXPECT_THROW(c->encode(x.data(), page.data(), 16, -1), Error);
  EXPECT_THROW(c->decode(page.data(), 16, 99, x.data()), Error);
  std::vector<float> q(8, 1.0f);
  EXPECT_THROW(c->score(q.data(), 1, page.data(), 16, 4, 17, scores.data(), 64), Error);
  EXPECT_THROW(c->score(q.data(), 1, page.data(), 16, 5, 4, scores.data(), 64), Error);
}

}  // namespace
}  // namespace tkv::kv
