// AVX-512 block dot products for every quantized type.
//
// Why special code: the generic decoders of decode-inl.h spend ~6.5 uops per
// 16 weights (widen, mask, int->float convert, scale FMA, dot FMA, plus a
// scalar f16 convert and broadcast per block), and with 512-bit vectors only
// ports 0 and 5 execute them, which caps Q4_0 at ~6 GB/s per core, under
// half the memory bandwidth. Here:
// - 4-bit types look their weights up in a 16-entry f32 table held in one
//   register (vpermps uses the low 4 bits of each lane as the index, so the
//   low nibble needs no mask): table = levels * d, v * d + m, or dl * v - ml
//   per Q4_K group, built with one multiply/FMA per block or group. The
//   entries are exactly the dequantized weights (same single rounding as
//   ggml). 5-bit types use a 32-entry table in two registers (vpermt2ps);
//   Q2_K/Q3_K tables repeat every 4/8 entries so that bits above the field
//   need no masking.
// - Block scales come from the f16 -> f32 table (kernels.h), a load that
//   the multiply broadcasts for free.
// - Q8_0 sums q * x per block and applies d once (mathematically the same
//   sum; the rounding stays within the documented bound).
// - Q6_K assembles its 6-bit quants for a whole super-block with 512-bit byte
//   operations first, then widens and converts 16 at a time.
//
// FastDot<T> (kEnabled says whether a type has one on the current target):
//   Prepare(block, f16_table, scratch) decodes what a block needs besides
//     its quants (scales, for Q6_K the assembled quants) into kScratch floats;
//   Accumulate(block, scratch, x, f16_table, acc0, acc1) adds the block's
//     products to two accumulators.
// The caller prepares a run of blocks before accumulating them, so the
// scratch is read long after it was written (no store-forwarding stalls on
// the critical path). Compiled per target (Highway -inl.h convention).
#if defined(TKV_TENSOR_DOT_AVX512_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_TENSOR_DOT_AVX512_INL_H_
#undef TKV_TENSOR_DOT_AVX512_INL_H_
#else
#define TKV_TENSOR_DOT_AVX512_INL_H_
#endif

#include <cstring>

#include "tensor/kernels/decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

template <DType T>
struct FastDot {
  static constexpr bool kEnabled = false;
  static constexpr size_t kScratch = 0;
};

// Types whose blocks need no preparation.
struct NoPrepare {
  static constexpr bool kEnabled = true;
  static constexpr size_t kScratch = 0;
  static HWY_INLINE void Prepare(const uint8_t*, const float*, float*) {}
};

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3

HWY_INLINE uint16_t U16At(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
HWY_INLINE __m512i Widen16U(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
HWY_INLINE __m512i Widen16S(const void* p) {
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// 32-value block with nibbles as Q4_0: weight = table[nibble].
HWY_INLINE void NibbleTableDot(const uint8_t* qs, __m512 table, const float* xb, VF& acc0,
                               VF& acc1) {
  const __m512i q = Widen16U(qs);
  const __m512 w_lo = _mm512_permutexvar_ps(q, table);
  const __m512 w_hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
  acc0.raw = _mm512_fmadd_ps(w_lo, _mm512_loadu_ps(xb), acc0.raw);
  acc1.raw = _mm512_fmadd_ps(w_hi, _mm512_loadu_ps(xb + 16), acc1.raw);
}

template <>
struct FastDot<DType::Q4_0> : NoPrepare {
  static HWY_INLINE void Accumulate(const uint8_t* p, const float*, const float* xb,
                                    const float* lut, VF& acc0, VF& acc1) {
    const __m512 levels = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    const __m512 table = _mm512_mul_ps(levels, _mm512_set1_ps(lut[U16At(p)]));
    NibbleTableDot(p + offsetof(BlockQ4_0, qs), table, xb, acc0, acc1);
  }
};

HWY_INLINE __m512 IQ4Levels512() {
  return _mm512_cvtepi32_ps(Widen16S(kIQ4NLValues));
}

template <>
struct FastDot<DType::IQ4_NL> : NoPrepare {
  static HWY_INLINE void Accumulate(const uint8_t* p, const float*, const float* xb,
                                    const float* lut, VF& acc0, VF& acc1) {
    const __m512 table = _mm512_mul_ps(IQ4Levels512(), _mm512_set1_ps(lut[U16At(p)]));
    NibbleTableDot(p + offsetof(BlockIQ4_NL, qs), table, xb, acc0, acc1);
  }
};

template <>
struct FastDot<DType::Q4_1> : NoPrepare {
  static HWY_INLINE void Accumulate(const uint8_t* p, const float*, const float* xb,
                                    const float* lut, VF& acc0, VF& acc1) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // v * d + m: one rounding, as ggml.
    const __m512 table =
        _mm512_fmadd_ps(iota, _mm512_set1_ps(lut[U16At(p)]), _mm512_set1_ps(lut[U16At(p + 2)]));
    NibbleTableDot(p + offsetof(BlockQ4_1, qs), table, xb, acc0, acc1);
  }
};

// 32-value block with 5-bit quants as Q5_0/Q5_1: the 32 dequantized values
// sit in two registers; vpermt2ps indexes them with the nibble plus bit j of
// qh (set through a mask register straight from qh's bits).
HWY_INLINE void FiveBitTableDot(const uint8_t* qh_bytes, const uint8_t* qs, __m512 t_lo,
                                __m512 t_hi, const float* xb, VF& acc0, VF& acc1) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m512i q = Widen16U(qs), sixteen = _mm512_set1_epi32(16);
  const __m512i n_lo = _mm512_and_si512(q, _mm512_set1_epi32(15));
  const __m512i n_hi = _mm512_srli_epi32(q, 4);
  const __m512i i_lo = _mm512_mask_or_epi32(n_lo, __mmask16(qh & 0xFFFF), n_lo, sixteen);
  const __m512i i_hi = _mm512_mask_or_epi32(n_hi, __mmask16(qh >> 16), n_hi, sixteen);
  acc0.raw =
      _mm512_fmadd_ps(_mm512_permutex2var_ps(t_lo, i_lo, t_hi), _mm512_loadu_ps(xb), acc0.raw);
  acc1.raw =
      _mm512_fmadd_ps(_mm512_permutex2var_ps(t_lo, i_hi, t_hi), _mm512_loadu_ps(xb + 16), acc1.raw);
}

template <>
struct FastDot<DType::Q5_0> : NoPrepare {
  static HWY_INLINE void Accumulate(const uint8_t* p, const float*, const float* xb,
                                    const float* lut, VF& acc0, VF& acc1) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 d = _mm512_set1_ps(lut[U16At(p)]);
    // q in 0..15 -> (q - 16) * d, q in 16..31 -> (q - 16) * d: both exact.
    const __m512 t_lo = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(16.0f)), d);
    const __m512 t_hi = _mm512_mul_ps(iota, d);
    FiveBitTableDot(p + offsetof(BlockQ5_0, qh), p + offsetof(BlockQ5_0, qs), t_lo, t_hi, xb, acc0,
                    acc1);
  }
};

template <>
struct FastDot<DType::Q5_1> : NoPrepare {
  static HWY_INLINE void Accumulate(const uint8_t* p, const float*, const float* xb,
                                    const float* lut, VF& acc0, VF& acc1) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 d = _mm512_set1_ps(lut[U16At(p)]), m = _mm512_set1_ps(lut[U16At(p + 2)]);
    const __m512 t_lo = _mm512_fmadd_ps(iota, d, m);
    const __m512 t_hi = _mm512_fmadd_ps(_mm512_add_ps(iota, _mm512_set1_ps(16.0f)), d, m);
    FiveBitTableDot(p + offsetof(BlockQ5_1, qh), p + offsetof(BlockQ5_1, qs), t_lo, t_hi, xb, acc0,
                    acc1);
  }
};

template <>
struct FastDot<DType::Q8_0> : NoPrepare {
  static HWY_INLINE void Accumulate(const uint8_t* p, const float*, const float* xb,
                                    const float* lut, VF& acc0, VF& /*acc1*/) {
    const uint8_t* qs = p + offsetof(BlockQ8_0, qs);
    const __m512 q0 = _mm512_cvtepi32_ps(Widen16S(qs));
    const __m512 q1 = _mm512_cvtepi32_ps(Widen16S(qs + 16));
    __m512 t = _mm512_mul_ps(q0, _mm512_loadu_ps(xb));
    t = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xb + 16), t);
    acc0.raw = _mm512_fmadd_ps(t, _mm512_set1_ps(lut[U16At(p)]), acc0.raw);
  }
};

// Q2_K: 2-bit quants, 16 groups of 16 with 4-bit scale and min. The table
// has period 4 (entry e holds the value of quant e % 4), so the 2-bit field
// can index it straight after a shift, whatever the bits above it hold.
template <>
struct FastDot<DType::Q2_K> {
  static constexpr bool kEnabled = true;
  static constexpr size_t kScratch = 32;
  // s[g] = d * (sc_g & 15), s[16 + g] = dmin * (sc_g >> 4).
  static HWY_INLINE void Prepare(const uint8_t* p, const float* lut, float* s) {
    const __m512i sc = Widen16U(p + offsetof(BlockQ2_K, scales));
    const __m512 scale = _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(15)));
    const __m512 min = _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4));
    _mm512_store_ps(s,
                    _mm512_mul_ps(scale, _mm512_set1_ps(lut[U16At(p + offsetof(BlockQ2_K, d))])));
    _mm512_store_ps(s + 16,
                    _mm512_mul_ps(min, _mm512_set1_ps(lut[U16At(p + offsetof(BlockQ2_K, dmin))])));
  }
  static HWY_INLINE void Accumulate(const uint8_t* p, const float* s, const float* xb, const float*,
                                    VF& acc0, VF& acc1) {
    const __m512 mod4 = _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    const uint8_t* qs = p + offsetof(BlockQ2_K, qs);
    for (int h = 0; h < 2; ++h) {
      const __m512i q0 = Widen16U(qs + 32 * h), q1 = Widen16U(qs + 32 * h + 16);
      for (int j = 0; j < 4; ++j) {
        const int g = 8 * h + 2 * j;
        const __m512 t0 = _mm512_fmsub_ps(mod4, _mm512_set1_ps(s[g]), _mm512_set1_ps(s[16 + g]));
        const __m512 t1 =
            _mm512_fmsub_ps(mod4, _mm512_set1_ps(s[g + 1]), _mm512_set1_ps(s[17 + g]));
        const float* xg = xb + 128 * h + 32 * j;
        acc0.raw = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(q0, 2 * j), t0),
                                   _mm512_loadu_ps(xg), acc0.raw);
        acc1.raw = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(q1, 2 * j), t1),
                                   _mm512_loadu_ps(xg + 16), acc1.raw);
      }
    }
  }
};

// Q3_K: index e = 2-bit field | high bit << 2 into a period-8 table holding
// dl * (e % 8 - 4): a set high bit means "no -4", as in ggml.
template <>
struct FastDot<DType::Q3_K> {
  static constexpr bool kEnabled = true;
  static constexpr size_t kScratch = 16;
  // dl[g] = d * (s_g - 32), the 6-bit scales unpacked four at a time.
  static HWY_INLINE void Prepare(const uint8_t* p, const float* lut, float* dl) {
    uint32_t a[4];
    std::memcpy(a, p + offsetof(BlockQ3_K, scales), 12);
    constexpr uint32_t kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
    const uint32_t top = a[2];
    a[2] = ((a[0] >> 4) & kLow4) | (((top >> 4) & kLow2) << 4);
    a[3] = ((a[1] >> 4) & kLow4) | (((top >> 6) & kLow2) << 4);
    a[0] = (a[0] & kLow4) | ((top & kLow2) << 4);
    a[1] = (a[1] & kLow4) | (((top >> 2) & kLow2) << 4);
    const __m512i sc =
        _mm512_sub_epi32(Widen16U(reinterpret_cast<const uint8_t*>(a)), _mm512_set1_epi32(32));
    _mm512_store_ps(dl, _mm512_mul_ps(_mm512_cvtepi32_ps(sc),
                                      _mm512_set1_ps(lut[U16At(p + offsetof(BlockQ3_K, d))])));
  }
  static HWY_INLINE void Accumulate(const uint8_t* p, const float* dl, const float* xb,
                                    const float*, VF& acc0, VF& acc1) {
    const __m512 levels = _mm512_setr_ps(-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3);
    const uint8_t* qs = p + offsetof(BlockQ3_K, qs);
    const uint8_t* hmask = p + offsetof(BlockQ3_K, hmask);
    const __m512i low2 = _mm512_set1_epi32(3);
    // hmask bytes of l = 0..15 / 16..31, shifted up so bit b sits at b + 2.
    const __m512i hm0 = _mm512_slli_epi32(Widen16U(hmask), 2);
    const __m512i hm1 = _mm512_slli_epi32(Widen16U(hmask + 16), 2);
    for (int h = 0; h < 2; ++h) {
      const __m512i q0 = Widen16U(qs + 32 * h), q1 = Widen16U(qs + 32 * h + 16);
      for (int j = 0; j < 4; ++j) {
        const int g = 8 * h + 2 * j, bit = 4 * h + j;
        // idx = (q >> 2j) & 3 | (hmask bit `bit`) << 2; bit 3 is don't-care.
        const __m512i i0 = _mm512_ternarylogic_epi32(_mm512_srli_epi32(q0, 2 * j),
                                                     _mm512_srli_epi32(hm0, bit), low2, 0xE4);
        const __m512i i1 = _mm512_ternarylogic_epi32(_mm512_srli_epi32(q1, 2 * j),
                                                     _mm512_srli_epi32(hm1, bit), low2, 0xE4);
        const float* xg = xb + 128 * h + 32 * j;
        acc0.raw =
            _mm512_fmadd_ps(_mm512_permutexvar_ps(i0, _mm512_mul_ps(levels, _mm512_set1_ps(dl[g]))),
                            _mm512_loadu_ps(xg), acc0.raw);
        acc1.raw = _mm512_fmadd_ps(
            _mm512_permutexvar_ps(i1, _mm512_mul_ps(levels, _mm512_set1_ps(dl[g + 1]))),
            _mm512_loadu_ps(xg + 16), acc1.raw);
      }
    }
  }
};

// Scales of a Q4_K or Q5_K block (same header layout): s[g] = d * sc_g,
// s[8 + g] = dmin * m_g (exact f32 products).
HWY_INLINE void K4Scales(const uint8_t* p, const float* lut, float* s) {
  // Unpack the 6-bit scales and mins of the 8 groups into bytes sc[0..7],
  // m[0..7] (the same fields k4_scale_min reads, four at a time).
  uint32_t u[4];
  std::memcpy(u, p + offsetof(BlockQ4_K, scales), 12);  // == Q5_K's
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
  const uint32_t m_low = u[1] & kLow6;
  u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
  u[2] = m_low;
  u[0] &= kLow6;
  const __m512 sc_m = _mm512_cvtepi32_ps(Widen16U(reinterpret_cast<const uint8_t*>(u)));
  const __m512 d_dmin = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(lut[U16At(p)]),
                                             _mm512_set1_ps(lut[U16At(p + 2)]));
  _mm512_store_ps(s, _mm512_mul_ps(sc_m, d_dmin));
}

template <>
struct FastDot<DType::Q4_K> {
  static constexpr bool kEnabled = true;
  static constexpr size_t kScratch = 16;
  static HWY_INLINE void Prepare(const uint8_t* p, const float* lut, float* s) {
    K4Scales(p, lut, s);
  }
  static HWY_INLINE void Accumulate(const uint8_t* p, const float* s, const float* xb, const float*,
                                    VF& acc0, VF& acc1) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const uint8_t* qs = p + offsetof(BlockQ4_K, qs);
    for (int pair = 0; pair < 4; ++pair) {
      const int g = 2 * pair;
      const __m512i b0 = Widen16U(qs + 32 * pair), b1 = Widen16U(qs + 32 * pair + 16);
      // table = dl * v - ml: the dequantized value of nibble v, one rounding.
      const __m512 t_lo = _mm512_fmsub_ps(iota, _mm512_set1_ps(s[g]), _mm512_set1_ps(s[8 + g]));
      const __m512 t_hi = _mm512_fmsub_ps(iota, _mm512_set1_ps(s[g + 1]), _mm512_set1_ps(s[9 + g]));
      const float* xg = xb + 64 * pair;
      acc0.raw = _mm512_fmadd_ps(_mm512_permutexvar_ps(b0, t_lo), _mm512_loadu_ps(xg), acc0.raw);
      acc1.raw =
          _mm512_fmadd_ps(_mm512_permutexvar_ps(b1, t_lo), _mm512_loadu_ps(xg + 16), acc1.raw);
      acc0.raw = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(b0, 4), t_hi),
                                 _mm512_loadu_ps(xg + 32), acc0.raw);
      acc1.raw = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(b1, 4), t_hi),
                                 _mm512_loadu_ps(xg + 48), acc1.raw);
    }
  }
};

template <>
struct FastDot<DType::Q6_K> {
  static constexpr bool kEnabled = true;
  // dl[16] floats, then the 256 quants minus 32 as signed bytes.
  static constexpr size_t kScratch = 16 + 256 / 4;
  static HWY_INLINE void Prepare(const uint8_t* p, const float* lut, float* scratch) {
    const BlockQ6_K* b = reinterpret_cast<const BlockQ6_K*>(p);
    // dl[g] = d * scales[g] for the 16 groups of 16 values.
    _mm512_store_ps(scratch, _mm512_mul_ps(_mm512_cvtepi32_ps(Widen16S(b->scales)),
                                           _mm512_set1_ps(lut[U16At(p + offsetof(BlockQ6_K, d))])));
    // q[v] - 32 for the 256 values in order, as signed bytes. Byte-wise
    // shifts are done on 16-bit lanes; the masks drop what crosses a byte.
    int8_t* q = reinterpret_cast<int8_t*>(scratch + 16);
    // Per half h (128 values): bytes 0..63 of `lo` are quarters k = 0, 1
    // (low nibbles of ql), of `hi` quarters 2, 3 (high nibbles). Quarter k's
    // top 2 bits are bits 2k..2k+1 of qh, moved to bits 4..5 by a variable
    // 16-bit shift per 256-bit half (qh << 4, << 2; >> 0, >> 2) and merged
    // with one ternary-logic op: a | (b & 0x30).
    const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30),
                  bias = _mm512_set1_epi8(32);
    const __m512i shl_01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i shr_23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b->qh + 32 * h)));
      const __m512i lo = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, low4),
                                                   _mm512_sllv_epi16(qh, shl_01), bits45, 0xF8);
      const __m512i hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4),
                                                   _mm512_srlv_epi16(qh, shr_23), bits45, 0xF8);
      _mm512_store_si512(q + 128 * h, _mm512_sub_epi8(lo, bias));
      _mm512_store_si512(q + 128 * h + 64, _mm512_sub_epi8(hi, bias));
    }
  }
  static HWY_INLINE void Accumulate(const uint8_t*, const float* scratch, const float* xb,
                                    const float*, VF& acc0, VF& acc1) {
    const float* dl = scratch;
    const int8_t* q = reinterpret_cast<const int8_t*>(scratch + 16);
    for (int g = 0; g < 16; g += 2) {
      const __m512 w0 =
          _mm512_mul_ps(_mm512_cvtepi32_ps(Widen16S(q + 16 * g)), _mm512_set1_ps(dl[g]));
      const __m512 w1 =
          _mm512_mul_ps(_mm512_cvtepi32_ps(Widen16S(q + 16 * g + 16)), _mm512_set1_ps(dl[g + 1]));
      acc0.raw = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xb + 16 * g), acc0.raw);
      acc1.raw = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xb + 16 * g + 16), acc1.raw);
    }
  }
};

template <>
struct FastDot<DType::Q5_K> {
  static constexpr bool kEnabled = true;
  static constexpr size_t kScratch = 16;
  static HWY_INLINE void Prepare(const uint8_t* p, const float* lut, float* s) {
    K4Scales(p, lut, s);
  }
  // 5-bit quants index a 32-entry table split over two registers
  // (vpermt2ps uses index bits 0-4): bits 0-3 are the nibble, bit 4 is bit g
  // of qh, moved into place by a shift and merged with one ternary-logic op.
  static HWY_INLINE void Accumulate(const uint8_t* p, const float* s, const float* xb, const float*,
                                    VF& acc0, VF& acc1) {
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 iota16 = _mm512_add_ps(iota, _mm512_set1_ps(16.0f));
    const uint8_t* qs = p + offsetof(BlockQ5_K, qs);
    const uint8_t* qh = p + offsetof(BlockQ5_K, qh);
    // qh bytes of values l = 0..15 and 16..31, shifted so bit g lands at bit 4 + g.
    const __m512i h0 = _mm512_slli_epi32(Widen16U(qh), 4),
                  h1 = _mm512_slli_epi32(Widen16U(qh + 16), 4);
    const __m512i low4 = _mm512_set1_epi32(0x0F);
    for (int g = 0; g < 8; ++g) {
      const __m512i b0 = Widen16U(qs + 32 * (g / 2)), b1 = Widen16U(qs + 32 * (g / 2) + 16);
      const __m512i n0 = g & 1 ? _mm512_srli_epi32(b0, 4) : b0;
      const __m512i n1 = g & 1 ? _mm512_srli_epi32(b1, 4) : b1;
      // idx = (n & 15) | (h >> g & ~15): 0xE4 selects A where C is set, else B.
      const __m512i i0 = _mm512_ternarylogic_epi32(n0, _mm512_srli_epi32(h0, g), low4, 0xE4);
      const __m512i i1 = _mm512_ternarylogic_epi32(n1, _mm512_srli_epi32(h1, g), low4, 0xE4);
      const __m512 dl = _mm512_set1_ps(s[g]), ml = _mm512_set1_ps(s[8 + g]);
      const __m512 t_lo = _mm512_fmsub_ps(iota, dl, ml), t_hi = _mm512_fmsub_ps(iota16, dl, ml);
      acc0.raw = _mm512_fmadd_ps(_mm512_permutex2var_ps(t_lo, i0, t_hi),
                                 _mm512_loadu_ps(xb + 32 * g), acc0.raw);
      acc1.raw = _mm512_fmadd_ps(_mm512_permutex2var_ps(t_lo, i1, t_hi),
                                 _mm512_loadu_ps(xb + 32 * g + 16), acc1.raw);
    }
  }
};

template <>
struct FastDot<DType::IQ4_XS> {
  static constexpr bool kEnabled = true;
  static constexpr size_t kScratch = 8;
  // dl[g] = d * (ls_g - 32) for the 8 groups of 32 values; the 6-bit ls_g
  // (nibble g of scales_l, bits 2g..2g+1 of scales_h) unpacked 8 at a time.
  static HWY_INLINE void Prepare(const uint8_t* p, const float* lut, float* dl) {
    uint32_t low;
    std::memcpy(&low, p + offsetof(BlockIQ4_XS, scales_l), 4);
    const __m256i g = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i lo = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(int32_t(low)), _mm256_slli_epi32(g, 2)),
        _mm256_set1_epi32(0xF));
    const __m256i hi = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(U16At(p + offsetof(BlockIQ4_XS, scales_h))),
                          _mm256_add_epi32(g, g)),
        _mm256_set1_epi32(3));
    const __m256i ls =
        _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    _mm256_storeu_ps(dl, _mm256_mul_ps(_mm256_cvtepi32_ps(ls), _mm256_set1_ps(lut[U16At(p)])));
  }
  static HWY_INLINE void Accumulate(const uint8_t* p, const float* dl, const float* xb,
                                    const float*, VF& acc0, VF& acc1) {
    const __m512 levels = IQ4Levels512();
    const uint8_t* qs = p + offsetof(BlockIQ4_XS, qs);
    for (int g = 0; g < 8; ++g)
      NibbleTableDot(qs + 16 * g, _mm512_mul_ps(levels, _mm512_set1_ps(dl[g])), xb + 32 * g, acc0,
                     acc1);
  }
};

#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_DOT_AVX512_INL_H_
