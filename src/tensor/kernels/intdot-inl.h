// Integer-dot block kernels: one weight row against NT tokens' quantized
// activations (act_blocks.h), for matvec (NT = 1) and matmul tiles alike.
//
// Every (row, token) output is computed by the same arithmetic whatever NT
// is, so a token's result never depends on the batch it is in:
// - per block, integer dot products of the weight quants with the int8
//   activations (exact, whatever instructions compute them), giving 8 int32
//   lanes: lane j holds values 4j .. 4j + 3 of each 32-value chunk, already
//   multiplied by the integer sub-block scales of the K-quants;
// - then, in float and in block order, acc = fma(d_w * d_x, float(lanes),
//   acc) into an 8-lane accumulator, and for the types with an offset or a
//   min one scalar accumulator fed from the block sums of the activations;
// - one horizontal sum of the 8 lanes at the end, in a fixed order
//   ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
// The weight quants of a block are unpacked once and reused for the NT
// tokens of the tile.
//
// x86 (AVX2, AVX3, AVX3_DL): 256-bit vpmaddubsw/vpmaddwd as in ggml (s8 x s8
// through the sign trick); on AVX3_DL the signed 32-value types use
// vpdpbusd (AVX512-VNNI). The K-quants keep vpmaddubsw/vpmaddwd there: the
// vpmaddwd applies the sub-block scales for free. Every other target (SSE4,
// EMU128/SCALAR, NEON, SVE) runs the portable scalar version of the same
// lane layout. The int32 lanes are identical on every target; the float
// part uses FMA on x86 and multiply + add elsewhere (this file is compiled
// with -ffp-contract=off so that nothing else fuses).
//
// Per-target include guard (Highway's -inl.h convention).
#if defined(TKV_TENSOR_INTDOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_TENSOR_INTDOT_INL_H_
#undef TKV_TENSOR_INTDOT_INL_H_
#else
#define TKV_TENSOR_INTDOT_INL_H_
#endif

#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "tensor/blocks.h"
#include "tensor/kernels/act_blocks.h"
#include "tensor/kernels/decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

using kernels::ActBlock256;
using kernels::ActBlock32;

// How far ahead of the current block the row stream is prefetched (bytes).
inline constexpr size_t kIntPrefetchAhead = 4096;

// Software prefetch of the weight stream (see kIntPrefetchAhead).
HWY_INLINE void PrefetchRow(const uint8_t* p) {
  hwy::Prefetch(p);
}

// Scales and mins of the eight 32-value groups of a Q4_K block as bytes
// (ggml's get_scale_min_k4 for all groups at once): sc[0..7], m[0..7].
HWY_INLINE void K4ScaleBytes(const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  uint32_t u[3];
  std::memcpy(u, scales, 12);
  const uint32_t s[4] = {u[0] & kLow6, (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4), u[1] & kLow6,
                         ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)};
  std::memcpy(sc, s, 8);
  std::memcpy(m, s + 2, 8);
}

// The 16 signed 6-bit group scales (s_g - 32) of a Q3_K block.
HWY_INLINE void Q3KScales(const uint8_t* scales, int8_t* out) {
  for (int g = 0; g < 16; ++g) {
    const int low = g < 8 ? (scales[g] & 0xF) : (scales[g - 8] >> 4);
    const int high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    out[g] = int8_t((low | (high << 4)) - 32);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

// --- x86 -------------------------------------------------------------------

// Whether DotRowInt adds any range of blocks (x86) or only whole rows.
inline constexpr bool kIntBlockRanges = true;

// The float accumulators of one (row, token) between two block ranges: v
// the 8 lanes of the block products; m the second accumulator of the types
// with mins (q4_K, q5_K: lanes 0..3; q2_K: 8 lanes) or offsets (q4_1, q5_1:
// lane 0). FinishInt turns it into the output; a value-initialized IntAcc
// (IntAcc{}) is zero.
struct IntAcc {
  __m256 v;
  __m256 m;
};

HWY_INLINE float Hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}
HWY_INLINE float ScalarMulAdd(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
HWY_INLINE __m256 AccLanes(__m256 acc, float scale, __m256i lanes) {
  return _mm256_fmadd_ps(_mm256_set1_ps(scale), _mm256_cvtepi32_ps(lanes), acc);
}
HWY_INLINE __m256i Load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
// 32 4-bit codes of a Q4_0-layout qs: values 0..15 low nibbles, 16..31 high.
HWY_INLINE __m256i Nibbles32(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
}

// Sums of u8 x s8 products of 4 consecutive bytes into 8 int32 lanes
// (no saturation: callers keep pairs of products within int16).
HWY_INLINE __m256i DotU8S8(__m256i u, __m256i s) {
#if HWY_TARGET <= HWY_AVX3_DL
  // AVX512-VNNI (EVEX, 256-bit). Highway's AVX3_DL target attribute does
  // not name avx512vnni, so the intrinsic is unavailable; the CPUs it runs
  // on all have it (Highway requires VNNI for AVX3_DL).
  __m256i acc = _mm256_setzero_si256();
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
  return acc;
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

// 32-value types whose weights are signed int8 values times d: the sign
// trick turns s8 x s8 into |w| (u8) x sign(w) x (s8).
template <class Unpack, int R, int NT>
HWY_INLINE void DotSigned32(const uint8_t* const* rows, size_t block_bytes, size_t b0, size_t b1,
                            const ActBlock32* const* x, IntAcc* st, const Unpack& unpack) {
  __m256 acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = st[r * NT + t].v;
  for (size_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * block_bytes;
      if (b % 2 == 0) PrefetchRow(blk + kIntPrefetchAhead);
      const float dw = HalfAt(blk);
      const __m256i w = unpack(blk);
      const __m256i aw = _mm256_sign_epi8(w, w);
      for (int t = 0; t < NT; ++t) {
        const ActBlock32& a = x[t][b];
        const __m256i sx = _mm256_sign_epi8(Load256(a.q), w);
        acc[r][t] = AccLanes(acc[r][t], dw * a.d, DotU8S8(aw, sx));
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) st[r * NT + t].v = acc[r][t];
}

struct UnpackQ4_0 {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    return _mm256_sub_epi8(Nibbles32(p + offsetof(BlockQ4_0, qs)), _mm256_set1_epi8(8));
  }
};
struct UnpackIQ4_NL {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
    return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), Nibbles32(p + offsetof(BlockIQ4_NL, qs)));
  }
};
// 0xFF in byte i where bit i of the 32 bits at p is set, else 0.
HWY_INLINE __m256i BitsToBytes(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)), _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                      0x0101010101010101, 0x0000000000000000));
  const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
  return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}
// Q5_0: q - 16 = nibble - 16 where the fifth bit is clear (nibble | 0xF0).
struct UnpackQ5_0 {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    const __m256i high =
        _mm256_andnot_si256(BitsToBytes(p + offsetof(BlockQ5_0, qh)), _mm256_set1_epi8(char(0xF0)));
    return _mm256_or_si256(Nibbles32(p + offsetof(BlockQ5_0, qs)), high);
  }
};
struct UnpackQ4_1 {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    return Nibbles32(p + offsetof(BlockQ4_1, qs));
  }
};
struct UnpackQ5_1 {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    const __m256i high =
        _mm256_and_si256(BitsToBytes(p + offsetof(BlockQ5_1, qh)), _mm256_set1_epi8(16));
    return _mm256_or_si256(Nibbles32(p + offsetof(BlockQ5_1, qs)), high);
  }
};
struct UnpackQ8_0 {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    return Load256(p + offsetof(BlockQ8_0, qs));
  }
};

// Q4_1 / Q5_1: w = d q + m with unsigned q: sum = d dx sum(q x) + m dx sum(x).
template <class Unpack, int R, int NT>
HWY_INLINE void DotOffset32(const uint8_t* const* rows, size_t block_bytes, size_t b0, size_t b1,
                            const ActBlock32* const* x, IntAcc* st, const Unpack& unpack) {
  __m256 acc[R][NT];
  float offs[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t)
      acc[r][t] = st[r * NT + t].v, offs[r][t] = _mm256_cvtss_f32(st[r * NT + t].m);
  for (size_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * block_bytes;
      if (b % 2 == 0) PrefetchRow(blk + kIntPrefetchAhead);
      const float dw = HalfAt(blk), mw = HalfAt(blk + 2);
      const __m256i q = unpack(blk);
      for (int t = 0; t < NT; ++t) {
        const ActBlock32& a = x[t][b];
        const __m256i lanes =
            _mm256_madd_epi16(_mm256_maddubs_epi16(q, Load256(a.q)), _mm256_set1_epi16(1));
        acc[r][t] = AccLanes(acc[r][t], dw * a.d, lanes);
        offs[r][t] = ScalarMulAdd(mw * a.d, float(a.sum), offs[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t)
      st[r * NT + t].v = acc[r][t],
                  st[r * NT + t].m = _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, offs[r][t]);
}

HWY_INLINE float Hsum4(__m128 r) {
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// Q4_K: w = d sc_g q - dmin m_g. The quants' lanes carry sc_g (vpmaddwd);
// the mins go through the activation block sums into a 4-lane accumulator,
// lane i = m_2i S_2i + m_2i+1 S_2i+1 (S_g = sum of group g's activations).
// Q5_K is the same with a fifth bit per value from qh (kFive).
template <bool kFive, int R, int NT>
HWY_INLINE void DotQ45_K(const uint8_t* const* rows, size_t b0, size_t b1,
                         const ActBlock256* const* x, IntAcc* st) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  __m256 acc[R][NT];
  __m128 accm[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t)
      acc[r][t] = st[r * NT + t].v, accm[r][t] = _mm256_castps256_ps128(st[r * NT + t].m);
  const __m256i m4 = _mm256_set1_epi8(15);
  for (size_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * sizeof(Block);
      PrefetchRow(blk + kIntPrefetchAhead);
      PrefetchRow(blk + kIntPrefetchAhead + 64);
      if constexpr (kFive) PrefetchRow(blk + kIntPrefetchAhead + 128);
      const float dw = HalfAt(blk), dminw = HalfAt(blk + 2);
      alignas(16) uint8_t scm[16];
      K4ScaleBytes(blk + offsetof(Block, scales), scm, scm + 8);
      // int16 lanes 0..7: scales, 8..15: mins.
      const __m256i sm16 =
          _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(scm)));
      const __m128i mins16 = _mm256_extracti128_si256(sm16, 1);
      const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm16));
      const uint8_t* qs = blk + offsetof(Block, qs);
      __m256i hbits = _mm256_setzero_si256();
      if constexpr (kFive) hbits = Load256(blk + offsetof(BlockQ5_K, qh));
      __m256i sumi[NT];
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i bits = Load256(qs + 32 * j);
        __m256i ql = _mm256_and_si256(bits, m4);
        __m256i qh = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        if constexpr (kFive) {
          // Bit 2j of qh[l] is value 64j + l's fifth bit, bit 2j + 1 value 64j + 32 + l's.
          const __m256i one = _mm256_set1_epi8(1);
          ql = _mm256_or_si256(
              ql, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4));
          qh = _mm256_or_si256(
              qh, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4));
        }
        // Broadcast int16 lane 2j / 2j + 1 of `scales`.
        const __m256i sl =
            _mm256_shuffle_epi8(scales, _mm256_set1_epi16(short(0x0100 + 0x0404 * j)));
        const __m256i sh =
            _mm256_shuffle_epi8(scales, _mm256_set1_epi16(short(0x0302 + 0x0404 * j)));
        for (int t = 0; t < NT; ++t) {
          const int8_t* q8 = x[t][b].q + 64 * j;
          const __m256i pl = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(ql, Load256(q8)));
          const __m256i ph = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(qh, Load256(q8 + 32)));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(pl, ph));
        }
      }
      for (int t = 0; t < NT; ++t) {
        const ActBlock256& a = x[t][b];
        acc[r][t] = AccLanes(acc[r][t], dw * a.d, sumi[t]);
        const __m128i s32 = _mm_load_si128(reinterpret_cast<const __m128i*>(a.psums));
        accm[r][t] = _mm_fmadd_ps(_mm_set1_ps(dminw * a.d),
                                  _mm_cvtepi32_ps(_mm_madd_epi16(mins16, s32)), accm[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t)
      st[r * NT + t].v = acc[r][t], st[r * NT + t].m = _mm256_zextps128_ps256(accm[r][t]);
}

// int16 lanes 0..7 = s[i], 8..15 = s[i + 1] (the two 16-value groups of a
// 32-value chunk).
HWY_INLINE __m256i GroupScales(const int8_t* s, int i) {
  return _mm256_set_m128i(_mm_set1_epi16(s[i + 1]), _mm_set1_epi16(s[i]));
}

template <int R, int NT>
HWY_INLINE void DotQ6_K(const uint8_t* const* rows, size_t b0, size_t b1,
                        const ActBlock256* const* x, IntAcc* st) {
  __m256 acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = st[r * NT + t].v;
  const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
  const __m256i m32 = _mm256_set1_epi8(32);
  for (size_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * sizeof(BlockQ6_K);
      PrefetchRow(blk + kIntPrefetchAhead);
      PrefetchRow(blk + kIntPrefetchAhead + 64);
      PrefetchRow(blk + kIntPrefetchAhead + 128);
      const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(blk);
      const float dw = HalfAt(blk + offsetof(BlockQ6_K, d));
      __m256i sumi[NT];
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i l0 = Load256(w->ql + 64 * h), l1 = Load256(w->ql + 64 * h + 32);
        const __m256i hb = Load256(w->qh + 32 * h);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4),
                               _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
        q[1] =
            _mm256_or_si256(_mm256_and_si256(l1, m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
        q[2] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
        q[3] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
        for (int k = 0; k < 4; ++k) {
          const __m256i s16 = GroupScales(w->scales, 8 * h + 2 * k);
          for (int t = 0; t < NT; ++t) {
            const __m256i q8 = Load256(x[t][b].q + 128 * h + 32 * k);
            // (q - 32) x per pair: q x - 32 x, both within int16.
            const __m256i p16 =
                _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], q8), _mm256_maddubs_epi16(m32, q8));
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s16, p16));
          }
        }
      }
      for (int t = 0; t < NT; ++t) acc[r][t] = AccLanes(acc[r][t], dw * x[t][b].d, sumi[t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) st[r * NT + t].v = acc[r][t];
}

// q2_K / q3_K: 2-bit quants (q3_K: minus 4 where the hmask bit is clear)
// in 16-value groups with integer scales; q2_K's 4-bit mins go through the
// activations' 16-value sums into a second 8-lane accumulator.
template <bool kThree, int R, int NT>
HWY_INLINE void DotQ23_K(const uint8_t* const* rows, size_t b0, size_t b1,
                         const ActBlock256* const* x, IntAcc* st) {
  using Block = std::conditional_t<kThree, BlockQ3_K, BlockQ2_K>;
  __m256 acc[R][NT], accm[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = st[r * NT + t].v, accm[r][t] = st[r * NT + t].m;
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (size_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * sizeof(Block);
      PrefetchRow(blk + kIntPrefetchAhead);
      PrefetchRow(blk + kIntPrefetchAhead + 64);
      const Block* w = reinterpret_cast<const Block*>(blk);
      const float dw = HalfAt(blk + offsetof(Block, d));
      alignas(16) int8_t sc[16];
      __m256i mins16 = _mm256_setzero_si256();
      __m256i hmask = _mm256_setzero_si256();
      if constexpr (kThree) {
        Q3KScales(w->scales, sc);
        hmask = Load256(w->hmask);
      } else {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales));
        _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm_and_si128(raw, _mm_set1_epi8(15)));
        mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
      }
      __m256i sumi[NT];
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        const __m256i bits = Load256(w->qs + 32 * h);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const int c = 4 * h + j;
          const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
          __m256i q4 = _mm256_setzero_si256();  // q3_K: 4 where the high bit is clear
          if constexpr (kThree)
            q4 = _mm256_slli_epi16(
                _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(hmask, c), one), one), 2);
          const __m256i s16 =
              _mm256_set_m128i(_mm_set1_epi16(sc[2 * c + 1]), _mm_set1_epi16(sc[2 * c]));
          for (int t = 0; t < NT; ++t) {
            const __m256i q8 = Load256(x[t][b].q + 32 * c);
            __m256i p16 = _mm256_maddubs_epi16(q, q8);
            if constexpr (kThree) p16 = _mm256_sub_epi16(p16, _mm256_maddubs_epi16(q4, q8));
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s16, p16));
          }
        }
      }
      for (int t = 0; t < NT; ++t) {
        acc[r][t] = AccLanes(acc[r][t], dw * x[t][b].d, sumi[t]);
        if constexpr (!kThree) {
          const float dminw = HalfAt(blk + offsetof(BlockQ2_K, dmin));
          accm[r][t] = AccLanes(accm[r][t], dminw * x[t][b].d,
                                _mm256_madd_epi16(mins16, Load256(x[t][b].bsums)));
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) st[r * NT + t].v = acc[r][t], st[r * NT + t].m = accm[r][t];
}

// IQ4_XS: 8 groups of 32 signed levels with scale ls - 32 (vpmaddwd).
template <int R, int NT>
HWY_INLINE void DotIQ4_XS(const uint8_t* const* rows, size_t b0, size_t b1,
                          const ActBlock256* const* x, IntAcc* st) {
  __m256 acc[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = st[r * NT + t].v;
  const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
  const __m256i table = _mm256_set_m128i(t128, t128);
  for (size_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * sizeof(BlockIQ4_XS);
      PrefetchRow(blk + kIntPrefetchAhead);
      PrefetchRow(blk + kIntPrefetchAhead + 64);
      const BlockIQ4_XS* w = reinterpret_cast<const BlockIQ4_XS*>(blk);
      const float dw = HalfAt(blk);
      __m256i sumi[NT];
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int g = 0; g < 8; ++g) {
        const int ls =
            ((w->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((w->scales_h >> (2 * g)) & 3) << 4);
        const __m256i sc = _mm256_set1_epi16(short(ls - 32));
        const __m256i v = _mm256_shuffle_epi8(table, Nibbles32(w->qs + 16 * g));
        const __m256i av = _mm256_sign_epi8(v, v);
        for (int t = 0; t < NT; ++t) {
          const __m256i sx = _mm256_sign_epi8(Load256(x[t][b].q + 32 * g), v);
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(sc, _mm256_maddubs_epi16(av, sx)));
        }
      }
      for (int t = 0; t < NT; ++t) acc[r][t] = AccLanes(acc[r][t], dw * x[t][b].d, sumi[t]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) st[r * NT + t].v = acc[r][t];
}

// The output of one (row, token) from its accumulators, in a fixed order.
template <DType T>
HWY_INLINE float FinishInt(const IntAcc& a) {
  if constexpr (T == DType::Q4_1 || T == DType::Q5_1) {
    return Hsum8(a.v) + _mm256_cvtss_f32(a.m);
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    return Hsum8(a.v) - Hsum4(_mm256_castps256_ps128(a.m));
  } else if constexpr (T == DType::Q2_K) {
    return Hsum8(a.v) - Hsum8(a.m);
  } else {
    return Hsum8(a.v);
  }
}

// Adds blocks [b0, b1) of R rows times NT tokens into st[r * NT + t].
template <DType T, int R, int NT>
HWY_INLINE void DotRowInt(const uint8_t* const* rows, size_t b0, size_t b1, const void* const* x,
                          IntAcc* st) {
  const ActBlock32* x32[NT];
  const ActBlock256* x256[NT];
  for (int t = 0; t < NT; ++t) {
    x32[t] = static_cast<const ActBlock32*>(x[t]);
    x256[t] = static_cast<const ActBlock256*>(x[t]);
  }
  if constexpr (T == DType::Q8_0) {
    DotSigned32<UnpackQ8_0, R, NT>(rows, sizeof(BlockQ8_0), b0, b1, x32, st, UnpackQ8_0());
  } else if constexpr (T == DType::Q4_0) {
    DotSigned32<UnpackQ4_0, R, NT>(rows, sizeof(BlockQ4_0), b0, b1, x32, st, UnpackQ4_0());
  } else if constexpr (T == DType::IQ4_NL) {
    DotSigned32<UnpackIQ4_NL, R, NT>(rows, sizeof(BlockIQ4_NL), b0, b1, x32, st, UnpackIQ4_NL());
  } else if constexpr (T == DType::Q5_0) {
    DotSigned32<UnpackQ5_0, R, NT>(rows, sizeof(BlockQ5_0), b0, b1, x32, st, UnpackQ5_0());
  } else if constexpr (T == DType::Q4_1) {
    DotOffset32<UnpackQ4_1, R, NT>(rows, sizeof(BlockQ4_1), b0, b1, x32, st, UnpackQ4_1());
  } else if constexpr (T == DType::Q5_1) {
    DotOffset32<UnpackQ5_1, R, NT>(rows, sizeof(BlockQ5_1), b0, b1, x32, st, UnpackQ5_1());
  } else if constexpr (T == DType::Q4_K) {
    DotQ45_K<false, R, NT>(rows, b0, b1, x256, st);
  } else if constexpr (T == DType::Q5_K) {
    DotQ45_K<true, R, NT>(rows, b0, b1, x256, st);
  } else if constexpr (T == DType::IQ4_XS) {
    DotIQ4_XS<R, NT>(rows, b0, b1, x256, st);
  } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
    DotQ23_K<T == DType::Q3_K, R, NT>(rows, b0, b1, x256, st);
  } else if constexpr (T == DType::Q6_K) {
    DotQ6_K<R, NT>(rows, b0, b1, x256, st);
  }
}

#else  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

// --- portable --------------------------------------------------------------

inline constexpr bool kIntBlockRanges = false;

struct Lanes {
  int32_t v[8];
};
struct AccF {
  float v[8] = {};
  void Add(float scale, const Lanes& l) {
    for (int j = 0; j < 8; ++j) v[j] = v[j] + scale * float(l.v[j]);
  }
  float Sum() const {
    float s4[4];
    for (int j = 0; j < 4; ++j) s4[j] = v[j + 4] + v[j];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
  }
};

// Adds scale * (lane sums of w[0..31] x q[0..31]) to l.
HWY_INLINE void AddDot32(const int8_t* w, const int8_t* q, int32_t scale, Lanes& l) {
  for (int j = 0; j < 8; ++j) {
    int32_t s = 0;
    for (int e = 4 * j; e < 4 * j + 4; ++e) s += int32_t(w[e]) * int32_t(q[e]);
    l.v[j] += scale * s;
  }
}
// The 32 4-bit codes of a Q4_0-layout qs in value order.
HWY_INLINE void Nibbles32(const uint8_t* qs, int8_t* out) {
  for (int i = 0; i < 16; ++i) out[i] = int8_t(qs[i] & 15), out[i + 16] = int8_t(qs[i] >> 4);
}

// The signed int8 weight values of a 32-value block and its f16 d field.
template <DType T>
HWY_INLINE void Unpack32(const uint8_t* p, int8_t* w) {
  if constexpr (T == DType::Q8_0) {
    std::memcpy(w, p + offsetof(BlockQ8_0, qs), 32);
  } else if constexpr (T == DType::Q5_0 || T == DType::Q5_1) {
    using Block = std::conditional_t<T == DType::Q5_0, BlockQ5_0, BlockQ5_1>;
    uint32_t qh;
    std::memcpy(&qh, p + offsetof(Block, qh), 4);
    Nibbles32(p + offsetof(Block, qs), w);
    for (int i = 0; i < 32; ++i)
      w[i] = int8_t((w[i] | int(((qh >> i) & 1) << 4)) - (T == DType::Q5_0 ? 16 : 0));
  } else {
    Nibbles32(p + 2 + (T == DType::Q4_1 ? 2 : 0), w);
    if constexpr (T == DType::Q4_0)
      for (int i = 0; i < 32; ++i) w[i] = int8_t(w[i] - 8);
    if constexpr (T == DType::IQ4_NL)
      for (int i = 0; i < 32; ++i) w[i] = kIQ4NLValues[w[i]];
  }
}

template <DType T>
constexpr size_t BlockBytes32() {
  switch (T) {
    case DType::Q8_0:
      return sizeof(BlockQ8_0);
    case DType::Q4_1:
      return sizeof(BlockQ4_1);
    case DType::Q5_0:
      return sizeof(BlockQ5_0);
    case DType::Q5_1:
      return sizeof(BlockQ5_1);
    default:
      return sizeof(BlockQ4_0);  // == BlockIQ4_NL
  }
}

template <DType T>
HWY_INLINE float DotRow32(const uint8_t* row, size_t block_bytes, size_t nb, const ActBlock32* x) {
  AccF acc;
  float offs = 0.0f;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * block_bytes;
    int8_t w[32];
    Unpack32<T>(blk, w);
    Lanes l{};
    AddDot32(w, x[b].q, 1, l);
    acc.Add(HalfAt(blk) * x[b].d, l);
    if constexpr (T == DType::Q4_1 || T == DType::Q5_1)
      offs = offs + (HalfAt(blk + 2) * x[b].d) * float(x[b].sum);
  }
  return acc.Sum() + offs;
}

template <bool kFive>
HWY_INLINE float DotRowQ45_K(const uint8_t* row, size_t nb, const ActBlock256* x) {
  using Block = std::conditional_t<kFive, BlockQ5_K, BlockQ4_K>;
  AccF acc;
  float accm[4] = {};
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * sizeof(Block);
    uint8_t sc[8], m[8];
    K4ScaleBytes(blk + offsetof(Block, scales), sc, m);
    const uint8_t* qs = blk + offsetof(Block, qs);
    Lanes l{};
    int32_t summ[4] = {};
    for (int g = 0; g < 8; ++g) {
      int8_t w[32];
      for (int i = 0; i < 32; ++i) {
        w[i] = int8_t(g % 2 ? qs[32 * (g / 2) + i] >> 4 : qs[32 * (g / 2) + i] & 15);
        if constexpr (kFive)
          w[i] = int8_t(w[i] | (((blk[offsetof(BlockQ5_K, qh) + i] >> g) & 1) << 4));
      }
      AddDot32(w, x[b].q + 32 * g, sc[g], l);
      summ[g / 2] += int32_t(m[g]) * (x[b].bsums[2 * g] + x[b].bsums[2 * g + 1]);
    }
    acc.Add(HalfAt(blk) * x[b].d, l);
    const float dm = HalfAt(blk + 2) * x[b].d;
    for (int i = 0; i < 4; ++i) accm[i] = accm[i] + dm * float(summ[i]);
  }
  return acc.Sum() - ((accm[0] + accm[2]) + (accm[1] + accm[3]));
}

HWY_INLINE float DotRowQ6_K(const uint8_t* row, size_t nb, const ActBlock256* x) {
  AccF acc;
  for (size_t b = 0; b < nb; ++b) {
    const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(row + b * sizeof(BlockQ6_K));
    Lanes l{};
    for (int c = 0; c < 8; ++c) {  // 32-value chunks
      const int h = c / 4, k = c % 4;
      int8_t q[32];
      for (int i = 0; i < 32; ++i) {
        const uint8_t lo = w->ql[64 * h + 32 * (k & 1) + i];
        const int v = (k >= 2 ? lo >> 4 : lo & 15) | (((w->qh[32 * h + i] >> (2 * k)) & 3) << 4);
        q[i] = int8_t(v - 32);
      }
      // Lanes 0..3 are the chunk's first 16-value group, 4..7 its second.
      Lanes part{};
      AddDot32(q, x[b].q + 32 * c, 1, part);
      for (int j = 0; j < 8; ++j) l.v[j] += int32_t(w->scales[2 * c + j / 4]) * part.v[j];
    }
    acc.Add(HalfAt(reinterpret_cast<const uint8_t*>(&w->d)) * x[b].d, l);
  }
  return acc.Sum();
}

template <bool kThree>
HWY_INLINE float DotRowQ23_K(const uint8_t* row, size_t nb, const ActBlock256* x) {
  using Block = std::conditional_t<kThree, BlockQ3_K, BlockQ2_K>;
  AccF acc, accm;
  for (size_t b = 0; b < nb; ++b) {
    const Block* w = reinterpret_cast<const Block*>(row + b * sizeof(Block));
    int8_t sc[16];
    Lanes mins{};
    if constexpr (kThree) {
      Q3KScales(w->scales, sc);
    } else {
      for (int g = 0; g < 16; ++g) sc[g] = int8_t(w->scales[g] & 15);
      for (int i = 0; i < 8; ++i)
        mins.v[i] = (w->scales[2 * i] >> 4) * x[b].bsums[2 * i] +
                    (w->scales[2 * i + 1] >> 4) * x[b].bsums[2 * i + 1];
    }
    Lanes l{};
    for (int c = 0; c < 8; ++c) {
      const int h = c / 4, j = c % 4;
      int8_t q[32];
      for (int i = 0; i < 32; ++i) {
        q[i] = int8_t((w->qs[32 * h + i] >> (2 * j)) & 3);
        if constexpr (kThree)
          if (!((reinterpret_cast<const BlockQ3_K*>(w)->hmask[i] >> c) & 1))
            q[i] = int8_t(q[i] - 4);
      }
      Lanes part{};
      AddDot32(q, x[b].q + 32 * c, 1, part);
      for (int k = 0; k < 8; ++k) l.v[k] += int32_t(sc[2 * c + k / 4]) * part.v[k];
    }
    acc.Add(HalfAt(reinterpret_cast<const uint8_t*>(&w->d)) * x[b].d, l);
    if constexpr (!kThree)
      accm.Add(HalfAt(reinterpret_cast<const uint8_t*>(&w->dmin)) * x[b].d, mins);
  }
  return kThree ? acc.Sum() : acc.Sum() - accm.Sum();
}

HWY_INLINE float DotRowIQ4_XS(const uint8_t* row, size_t nb, const ActBlock256* x) {
  AccF acc;
  for (size_t b = 0; b < nb; ++b) {
    const BlockIQ4_XS* w = reinterpret_cast<const BlockIQ4_XS*>(row + b * sizeof(BlockIQ4_XS));
    Lanes l{};
    for (int g = 0; g < 8; ++g) {
      const int ls =
          ((w->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((w->scales_h >> (2 * g)) & 3) << 4);
      int8_t v[32];
      Nibbles32(w->qs + 16 * g, v);
      for (int i = 0; i < 32; ++i) v[i] = kIQ4NLValues[v[i]];
      AddDot32(v, x[b].q + 32 * g, ls - 32, l);
    }
    acc.Add(HalfAt(row + b * sizeof(BlockIQ4_XS)) * x[b].d, l);
  }
  return acc.Sum();
}

// The result of one (row, token): the portable kernels compute whole rows.
struct IntAcc {
  float y;
};
template <DType T>
HWY_INLINE float FinishInt(const IntAcc& a) {
  return a.y;
}

// Blocks [0, nb) of R rows times NT tokens into st[r * NT + t] (whole rows
// only: kIntBlockRanges is false here).
template <DType T, int R, int NT>
HWY_INLINE void DotRowInt(const uint8_t* const* rows, size_t b0, size_t nb, const void* const* x,
                          IntAcc* st) {
  HWY_DASSERT(b0 == 0);
  (void)b0;
  for (int i = 0; i < R * NT; ++i) {
    const int t = i % NT;
    const uint8_t* row = rows[i / NT];
    const auto* x32 = static_cast<const ActBlock32*>(x[t]);
    const auto* x256 = static_cast<const ActBlock256*>(x[t]);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
      st[i].y = DotRowQ45_K<T == DType::Q5_K>(row, nb, x256);
    } else if constexpr (T == DType::IQ4_XS) {
      st[i].y = DotRowIQ4_XS(row, nb, x256);
    } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
      st[i].y = DotRowQ23_K<T == DType::Q3_K>(row, nb, x256);
    } else if constexpr (T == DType::Q6_K) {
      st[i].y = DotRowQ6_K(row, nb, x256);
    } else {
      st[i].y = DotRow32<T>(row, BlockBytes32<T>(), nb, x32);
    }
  }
}

#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_INTDOT_INL_H_
