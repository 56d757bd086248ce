// Byte layouts of ggml's weight blocks, exactly as GGUF files store them
// (ggml-common.h). Every struct is packed by construction (only uint8_t and
// uint16_t members, 2-byte aligned; BlockMXFP4 only uint8_t ones, so its
// 17-byte blocks and rows may start at any address) and its size is pinned
// by a static_assert. Multi-byte fields are little-endian; `d`/`m`/`dmin`
// are IEEE binary16 bits.
//
// A row of `cols` values is cols / kValues consecutive blocks. Formulas below
// give the dequantized value y[i] of value index i inside one block; scales
// are always folded in f32 exactly as ggml's dequantize_row_* does it (see
// docs/WEIGHTS.md for the tables and the kernels' strategy).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace tkv {

// Values of one K-quant super-block.
inline constexpr int kQK = 256;

// Q4_0: y[i] = d * (q[i] - 8); q[i] = low nibble of qs[i] for i < 16, high
// nibble of qs[i - 16] otherwise.
struct BlockQ4_0 {
  static constexpr int kValues = 32;
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: y[i] = d * q[i] + m, nibbles as Q4_0.
struct BlockQ4_1 {
  static constexpr int kValues = 32;
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: y[i] = d * (q[i] - 16); q[i] = nibble as Q4_0 | (bit i of qh) << 4,
// qh read as a little-endian uint32.
struct BlockQ5_0 {
  static constexpr int kValues = 32;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: y[i] = d * q[i] + m, q[i] as Q5_0.
struct BlockQ5_1 {
  static constexpr int kValues = 32;
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_0: y[i] = d * qs[i].
struct BlockQ8_0 {
  static constexpr int kValues = 32;
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q2_K: 16 groups of 16 values. Value i: h = i / 128, j = (i % 128) / 32,
// l = i % 32; q = (qs[32h + l] >> 2j) & 3; group g = 8h + 2j + l / 16;
// y = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4).
struct BlockQ2_K {
  static constexpr int kValues = kQK;
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 16 groups of 16 values with signed 6-bit scales. Value i: h, j, l as
// Q2_K; q = ((qs[32h + l] >> 2j) & 3) - (bit (i / 32) of hmask[l] ? 0 : 4);
// group g = 8h + 2j + l / 16 has scale s_g - 32 where s_g's low 4 bits are
// the low (g < 8) or high (g >= 8) nibble of scales[g % 8] and its high 2
// bits are bits 2 * (g / 4) .. +1 of scales[8 + g % 4]; y = d * (s_g - 32) * q.
struct BlockQ3_K {
  static constexpr int kValues = kQK;
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Packed 6-bit scales and mins of Q4_K and Q5_K (ggml's get_scale_min_k4):
// group j < 4: sc = s[j] & 63, m = s[j + 4] & 63; j >= 4:
// sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4, m = (s[j + 4] >> 4) | (s[j] >> 6) << 4.
inline void k4_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Q4_K: 8 groups of 32 values. Value i: g = i / 32, q = low (g even) or high
// (g odd) nibble of qs[32 * (g / 2) + i % 32]; y = d * sc_g * q - dmin * m_g.
struct BlockQ4_K {
  static constexpr int kValues = kQK;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: as Q4_K plus a fifth bit: q += 16 * (bit g of qh[i % 32]).
struct BlockQ5_K {
  static constexpr int kValues = kQK;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 groups of 16 values, signed 8-bit scales. Value i: h = i / 128,
// k = (i % 128) / 32, l = i % 32; low 4 bits = low (k < 2) or high (k >= 2)
// nibble of ql[64h + 32 (k & 1) + l]; high 2 bits = (qh[32h + l] >> 2k) & 3;
// y = d * scales[8h + 2k + l / 16] * (q - 32).
struct BlockQ6_K {
  static constexpr int kValues = kQK;
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// The 16 non-uniform levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_NL: y[i] = d * kIQ4NLValues[q[i]], nibbles as Q4_0.
struct BlockIQ4_NL {
  static constexpr int kValues = 32;
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: 8 groups of 32 values with 6-bit scales: group g has
// ls = ((scales_l[g / 2] >> 4 (g % 2)) & 15) | ((scales_h >> 2g) & 3) << 4;
// within the group nibbles are laid out as IQ4_NL over qs[16g .. 16g + 15];
// y = d * (ls - 32) * kIQ4NLValues[q].
struct BlockIQ4_XS {
  static constexpr int kValues = kQK;
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// The 16 E2M1 values of MXFP4, doubled so that they are integers (ggml's
// kvalues_mxfp4): code c is sign (c >> 3), magnitude 0, 0.5, 1, 1.5, 2, 3,
// 4, 6 for c & 7, here times 2.
inline constexpr int8_t kMXFP4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// Half of the E8M0 scale e, 2^(e - 127) / 2 = 2^(e - 128), which undoes the
// doubling of kMXFP4Values (ggml's GGML_E8M0_TO_FP32_HALF, bit for bit):
// e = 0 and 1 give the subnormals 2^-128 and 2^-127; e = 255 (E8M0's NaN)
// gives 2^127, as in ggml.
constexpr float e8m0_half_to_f32(uint8_t e) {
  return std::bit_cast<float>(e < 2 ? uint32_t(0x00200000) << e : uint32_t(e - 1) << 23);
}
// The same by exponent byte, for the kernels: a block's scale is then one
// load (a broadcast load where a vector wants it) rather than integer work
// and a move into a vector register.
alignas(64) inline constexpr auto kE8M0HalfScales = [] {
  std::array<float, 256> t{};
  for (int e = 0; e < 256; ++e) t[size_t(e)] = e8m0_half_to_f32(uint8_t(e));
  return t;
}();

// MXFP4 (gpt-oss's expert weights): y[i] = e8m0_half_to_f32(e) *
// kMXFP4Values[q[i]], nibbles as Q4_0. 17 bytes, alignment 1.
struct BlockMXFP4 {
  static constexpr int kValues = 32;
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17 && alignof(BlockMXFP4) == 1);

// Float rows have no blocks: F32 is IEEE binary32, F16 binary16 and BF16 the
// upper half of a binary32, each value stored little-endian, one after another.

}  // namespace tkv
