// IEEE binary16 <-> binary32 conversion, scalar and exact (round to nearest
// even). Bulk conversions in kernels use Highway's PromoteTo/DemoteTo; these
// are for reference code, codecs' scalar paths and tests.
#pragma once

#include <cstdint>
#include <cstring>

namespace tkv {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // Inf or NaN
    return uint16_t(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  }
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow -> Inf
  if (absx < 0x38800000u) {                                 // result is subnormal or zero
    if (absx < 0x33000000u) return uint16_t(sign);
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14 + (113 - e)
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = ((absx >> 13) - (112u << 10));
  const uint32_t rem = absx & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return uint16_t(sign | r);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

// Rounds through f16 and back: what a value looks like after an f16 store.
inline float round_f16(float f) {
  return f16_to_f32(f32_to_f16(f));
}

}  // namespace tkv
