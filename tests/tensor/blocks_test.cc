// Hand-built blocks with known scales and quants -> known floats, one or more
// per type, checked against both the scalar reference and the SIMD
// dequantizer on every compiled target. The expected values are written out
// from the block layouts in tensor/blocks.h, not computed by library code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/f16.h"
#include "tensor/blocks.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"
#include "tensor_test_util.h"

namespace tkv {
namespace {

template <typename Block>
std::vector<uint8_t> bytes_of(const Block& b) {
  std::vector<uint8_t> v(sizeof(Block));
  std::memcpy(v.data(), &b, sizeof(Block));
  return v;
}

// Dequantizes with the reference and with every SIMD target; all must equal
// `expected` exactly.
void expect_decodes_to(DType type, const std::vector<uint8_t>& bytes,
                       const std::vector<float>& expected) {
  const int64_t n = int64_t(expected.size());
  std::vector<float> got(expected.size());
  dequantize_row_ref(type, bytes.data(), got.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got[static_cast<size_t>(i)], expected[static_cast<size_t>(i)])
        << dtype_name(type) << " reference, value " << i;
  test::for_each_simd_target([&](const std::string& target) {
    std::fill(got.begin(), got.end(), -12345.0f);
    dequantize_row(type, bytes.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[static_cast<size_t>(i)], expected[static_cast<size_t>(i)])
          << dtype_name(type) << " on " << target << ", value " << i;
  });
}

constexpr uint16_t kHalfOne = 0x3C00, kHalfHalf = 0x3800, kHalfQuarter = 0x3400, kHalfTwo = 0x4000,
                   kHalfMinusOne = 0xBC00, kHalfEighth = 0x3000;

TEST(Blocks, Q4_0) {
  BlockQ4_0 b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[static_cast<size_t>(j)] = float(j - 8) * 0.5f;       // low nibbles: -4 .. 3.5
    want[static_cast<size_t>(j + 16)] = float(7 - j) * 0.5f;  // high nibbles: 3.5 .. -4
  }
  expect_decodes_to(DType::Q4_0, bytes_of(b), want);
}

TEST(Blocks, Q4_1) {
  BlockQ4_1 b{};
  b.d = kHalfQuarter;
  b.m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[static_cast<size_t>(j)] = 0.25f * float(j) - 1.0f;
    want[static_cast<size_t>(j + 16)] = 0.25f * float(15 - j) - 1.0f;
  }
  expect_decodes_to(DType::Q4_1, bytes_of(b), want);
}

TEST(Blocks, Q5_0) {
  BlockQ5_0 b{};
  b.d = kHalfOne;
  const uint32_t qh = 0xAAAA5555u;  // fifth bit set for even j < 16, odd j >= 16
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[static_cast<size_t>(j)] = float(j + (j % 2 == 0 ? 16 : 0) - 16);
    want[static_cast<size_t>(j + 16)] = float((15 - j) + (j % 2 == 1 ? 16 : 0) - 16);
  }
  expect_decodes_to(DType::Q5_0, bytes_of(b), want);
}

TEST(Blocks, Q5_1) {
  BlockQ5_1 b{};
  b.d = kHalfHalf;
  b.m = kHalfTwo;
  const uint32_t qh = 0xFFFF0000u;  // fifth bit only on the high nibbles
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | (j << 4));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[static_cast<size_t>(j)] = 0.5f * float(j) + 2.0f;
    want[static_cast<size_t>(j + 16)] = 0.5f * float(j + 16) + 2.0f;
  }
  expect_decodes_to(DType::Q5_1, bytes_of(b), want);
}

TEST(Blocks, Q8_0) {
  BlockQ8_0 b{};
  b.d = kHalfEighth;
  for (int j = 0; j < 32; ++j) b.qs[j] = int8_t(j * 8 - 128);
  std::vector<float> want(32);
  for (int j = 0; j < 32; ++j) want[static_cast<size_t>(j)] = float(j * 8 - 128) / 8.0f;
  expect_decodes_to(DType::Q8_0, bytes_of(b), want);
}

TEST(Blocks, IQ4_NL) {
  BlockIQ4_NL b{};
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  const float levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                            1,    13,   25,  38,  53,  69,  89,  113};
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[static_cast<size_t>(j)] = 0.5f * levels[j];
    want[static_cast<size_t>(j + 16)] = 0.5f * levels[15 - j];
  }
  expect_decodes_to(DType::IQ4_NL, bytes_of(b), want);
}

// E2M1 as the OCP MX spec writes it: code c is (-1)^(c >> 3) times
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 for c & 7.
constexpr float kE2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

// An MXFP4 block with scale exponent e: y = E2M1(code) * 2^(e - 127).
// Codes j (low nibbles) and 15 - j (high nibbles), so each of the 16 codes
// occurs in both halves.
void expect_mxfp4_block(uint8_t e) {
  BlockMXFP4 b{};
  b.e = e;
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[static_cast<size_t>(j)] = std::ldexp(kE2M1[j], int(e) - 127);
    want[static_cast<size_t>(j + 16)] = std::ldexp(kE2M1[15 - j], int(e) - 127);
  }
  SCOPED_TRACE(int(e));
  expect_decodes_to(DType::MXFP4, bytes_of(b), want);
}

TEST(Blocks, MXFP4) {
  // e = 127: scale 1, the E2M1 values themselves.
  expect_mxfp4_block(127);
  // Small and large binades; e = 0 and 1 make 2^-128 and 2^-127 half-scales
  // (subnormal f32), whose products stay exact subnormals.
  for (uint8_t e : {0, 1, 2, 100, 130, 200}) expect_mxfp4_block(e);
  // The table and the half-scale, pinned directly (ggml's kvalues_mxfp4 and
  // GGML_E8M0_TO_FP32_HALF).
  for (int c = 0; c < 16; ++c) EXPECT_EQ(float(kMXFP4Values[c]), 2 * kE2M1[c]) << c;
  EXPECT_EQ(e8m0_half_to_f32(127), 0.5f);
  EXPECT_EQ(e8m0_half_to_f32(128), 1.0f);
  EXPECT_EQ(e8m0_half_to_f32(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(e8m0_half_to_f32(1), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0_half_to_f32(2), std::ldexp(1.0f, -126));
  EXPECT_EQ(e8m0_half_to_f32(254), std::ldexp(1.0f, 126));
  EXPECT_EQ(e8m0_half_to_f32(255), std::ldexp(1.0f, 127));  // E8M0's NaN code, as ggml reads it
}

TEST(Blocks, MXFP4HandBuiltBlock) {
  // e = 126 (scale 1/2); codes 0x7 (6 -> 3), 0xF (-6 -> -3), 0x1 (0.5 ->
  // 0.25), 0x9 (-0.5 -> -0.25) in value 0, 16, 1, 17; zeros elsewhere.
  BlockMXFP4 b{};
  b.e = 126;
  b.qs[0] = 0xF7;
  b.qs[1] = 0x91;
  std::vector<float> want(32, 0.0f);
  want[0] = 3.0f;
  want[16] = -3.0f;
  want[1] = 0.25f;
  want[17] = -0.25f;
  expect_decodes_to(DType::MXFP4, bytes_of(b), want);
  // The bytes exactly as a GGUF file holds them: e first, then qs.
  const auto bytes = bytes_of(b);
  ASSERT_EQ(bytes.size(), 17u);
  EXPECT_EQ(bytes[0], 126);
  EXPECT_EQ(bytes[1], 0xF7);
  EXPECT_EQ(bytes[2], 0x91);
}

// ggml's quantize_row_mxfp4_ref, worked by hand: amax = 5 gives
// e = floor(log2 5) - 2 + 127 = 127 (levels 0 .. 6 in steps of E2M1), each
// value the nearest level, ties to the first (lower-index) one.
TEST(Blocks, MXFP4QuantizesLikeGgml) {
  std::vector<float> x(32, 0.0f);
  x[0] = 5.0f;    // between 4 and 6: a tie, the first level (4, code 6)
  x[1] = -2.4f;   // nearest -2 (code 12)
  x[2] = 0.25f;   // between 0 and 0.5: a tie, code 0
  x[16] = 1.3f;   // nearest 1.5 (code 3)
  x[17] = -0.8f;  // nearest -1 (code 10)
  std::vector<uint8_t> q(17);
  quantize_row(DType::MXFP4, x.data(), q.data(), 32);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 0x36);
  EXPECT_EQ(q[2], 0xAC);
  EXPECT_EQ(q[3], 0x00);
  // amax 0: e = 0, every code 0.
  std::vector<float> zeros(32, 0.0f);
  quantize_row(DType::MXFP4, zeros.data(), q.data(), 32);
  EXPECT_EQ(q, std::vector<uint8_t>(17, 0));
}

TEST(Blocks, Q2_K) {
  BlockQ2_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  for (auto& s : b.scales) s = 0x21;  // scale 1, min 2
  for (auto& q : b.qs) q = 0xE4;      // 2-bit fields 0, 1, 2, 3 at shifts 0, 2, 4, 6
  std::vector<float> want(256);
  // The 2-bit field at shift 2j of quarter j of each 128-value half is j:
  // y = 1 * 1 * j - 0.5 * 2.
  for (int i = 0; i < 256; ++i) want[static_cast<size_t>(i)] = float((i % 128) / 32) - 1.0f;
  expect_decodes_to(DType::Q2_K, bytes_of(b), want);
}

TEST(Blocks, Q3_K) {
  BlockQ3_K b{};
  b.d = kHalfTwo;
  // Every group's 6-bit scale is 33 (= 0b10'0001): low nibbles 1, high bits 2,
  // so the signed scale is 33 - 32 = 1.
  for (int i = 0; i < 8; ++i) b.scales[i] = 0x11;
  for (int i = 8; i < 12; ++i) b.scales[i] = 0xAA;
  for (auto& q : b.qs) q = 0xE4;     // low 2 bits of quarter j = j
  for (auto& h : b.hmask) h = 0x0F;  // high bit set for i < 128 only
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) {
    const int j = (i % 128) / 32;
    want[static_cast<size_t>(i)] = 2.0f * float(i < 128 ? j : j - 4);
  }
  expect_decodes_to(DType::Q3_K, bytes_of(b), want);
}

TEST(Blocks, K4ScaleMinPacking) {
  // Group 5 with scale 53 (0b11'0101) and min 46 (0b10'1110) needs the high
  // bits stored in bytes 1 and 5.
  uint8_t s[12] = {};
  s[9] = uint8_t(5 | (14 << 4));
  s[1] = 3 << 6;
  s[5] = 2 << 6;
  uint8_t sc = 0, m = 0;
  k4_scale_min(5, s, &sc, &m);
  EXPECT_EQ(sc, 53);
  EXPECT_EQ(m, 46);
  k4_scale_min(1, s, &sc, &m);  // low 6 bits of bytes 1 and 5: both 0
  EXPECT_EQ(sc, 0);
  EXPECT_EQ(m, 0);
}

// Scales g + 1 and mins g for group g (all below 16, so no high bits).
void fill_k4_scales(uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t(j + 1);
    s[j + 4] = uint8_t(j);
  }
  for (int j = 4; j < 8; ++j) s[j + 4] = uint8_t((j + 1) | (j << 4));
}

TEST(Blocks, Q4_K) {
  BlockQ4_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  fill_k4_scales(b.scales);
  for (auto& q : b.qs) q = 0x5A;  // low nibble 10, high nibble 5
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) {
    const int g = i / 32, q = g % 2 == 0 ? 10 : 5;
    want[static_cast<size_t>(i)] = float((g + 1) * q) - 0.5f * float(g);
  }
  expect_decodes_to(DType::Q4_K, bytes_of(b), want);

  // Same block with group 5's scale/min raised to 53/46 (high bits in use).
  b.scales[9] = uint8_t(5 | (14 << 4));
  b.scales[1] |= 3 << 6;
  b.scales[5] |= 2 << 6;
  for (int l = 0; l < 32; ++l) want[static_cast<size_t>(5 * 32 + l)] = 53.0f * 5 - 0.5f * 46;
  expect_decodes_to(DType::Q4_K, bytes_of(b), want);
}

TEST(Blocks, Q5_K) {
  BlockQ5_K b{};
  b.d = kHalfOne;
  b.dmin = kHalfOne;
  fill_k4_scales(b.scales);
  for (auto& q : b.qs) q = 0x5A;
  for (int l = 0; l < 32; ++l) b.qh[l] = l % 2 == 0 ? 0xFF : 0x00;  // +16 on even l
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) {
    const int g = i / 32, l = i % 32;
    const int q = (g % 2 == 0 ? 10 : 5) + (l % 2 == 0 ? 16 : 0);
    want[static_cast<size_t>(i)] = float((g + 1) * q) - float(g);
  }
  expect_decodes_to(DType::Q5_K, bytes_of(b), want);
}

TEST(Blocks, Q6_K) {
  BlockQ6_K b{};
  b.d = kHalfHalf;
  for (int g = 0; g < 16; ++g) b.scales[g] = int8_t(g - 8);
  for (auto& q : b.ql) q = 0x21;  // low nibble 1, high nibble 2
  for (auto& q : b.qh) q = 0xE4;  // 2-bit field k = k
  // Quarter k of each half: low 4 bits (1 for k < 2, else 2) | k << 4, minus 32.
  const int q_of_k[4] = {1 - 32, 17 - 32, 34 - 32, 50 - 32};
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const int g = 8 * h + 2 * k + l / 16;
    want[static_cast<size_t>(i)] = 0.5f * float(g - 8) * float(q_of_k[k]);
  }
  expect_decodes_to(DType::Q6_K, bytes_of(b), want);
}

TEST(Blocks, IQ4_XS) {
  BlockIQ4_XS b{};
  b.d = kHalfHalf;
  // Group g has 6-bit scale 33 + g (signed g + 1): low nibbles 1 .. 8, high bits 2.
  b.scales_h = 0xAAAA;
  b.scales_l[0] = 0x21;
  b.scales_l[1] = 0x43;
  b.scales_l[2] = 0x65;
  b.scales_l[3] = 0x87;
  for (auto& q : b.qs) q = 0xF0;  // low nibble 0 (-127), high nibble 15 (113)
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) {
    const int g = i / 32, l = i % 32;
    want[static_cast<size_t>(i)] = 0.5f * float(g + 1) * (l < 16 ? -127.0f : 113.0f);
  }
  expect_decodes_to(DType::IQ4_XS, bytes_of(b), want);
}

TEST(Blocks, FloatRows) {
  // f16: 1, -2, 65504 (largest), 2^-24 (smallest subnormal), 0.
  const uint16_t h[5] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0000};
  std::vector<uint8_t> hb(10);
  std::memcpy(hb.data(), h, 10);
  expect_decodes_to(DType::F16, hb, {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, 0.0f});
  // bf16: 1, -3, 0.5.
  const uint16_t bf[3] = {0x3F80, 0xC040, 0x3F00};
  std::vector<uint8_t> bb(6);
  std::memcpy(bb.data(), bf, 6);
  expect_decodes_to(DType::BF16, bb, {1.0f, -3.0f, 0.5f});
  const float f[3] = {1.5f, -0.0f, 3e38f};
  std::vector<uint8_t> fb(12);
  std::memcpy(fb.data(), f, 12);
  expect_decodes_to(DType::F32, fb, {1.5f, -0.0f, 3e38f});
}

TEST(Blocks, EveryDeclaredSizeMatchesTheTraits) {
  EXPECT_EQ(traits(DType::Q4_0).block_bytes, sizeof(BlockQ4_0));
  EXPECT_EQ(traits(DType::Q4_1).block_bytes, sizeof(BlockQ4_1));
  EXPECT_EQ(traits(DType::Q5_0).block_bytes, sizeof(BlockQ5_0));
  EXPECT_EQ(traits(DType::Q5_1).block_bytes, sizeof(BlockQ5_1));
  EXPECT_EQ(traits(DType::Q8_0).block_bytes, sizeof(BlockQ8_0));
  EXPECT_EQ(traits(DType::Q2_K).block_bytes, sizeof(BlockQ2_K));
  EXPECT_EQ(traits(DType::Q3_K).block_bytes, sizeof(BlockQ3_K));
  EXPECT_EQ(traits(DType::Q4_K).block_bytes, sizeof(BlockQ4_K));
  EXPECT_EQ(traits(DType::Q5_K).block_bytes, sizeof(BlockQ5_K));
  EXPECT_EQ(traits(DType::Q6_K).block_bytes, sizeof(BlockQ6_K));
  EXPECT_EQ(traits(DType::IQ4_NL).block_bytes, sizeof(BlockIQ4_NL));
  EXPECT_EQ(traits(DType::IQ4_XS).block_bytes, sizeof(BlockIQ4_XS));
  EXPECT_EQ(traits(DType::MXFP4).block_bytes, sizeof(BlockMXFP4));
  EXPECT_EQ(traits(DType::MXFP4).block_size, uint32_t(BlockMXFP4::kValues));
  EXPECT_EQ(traits(DType::Q4_K).block_size, uint32_t(BlockQ4_K::kValues));
  EXPECT_EQ(test::supported_types().size(), 16u);
}

}  // namespace
}  // namespace tkv
