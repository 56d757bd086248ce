// Integer-dot block kernels: R weight rows against NT tokens' quantized
// activations (act_blocks.h), for matvec (R = 4, NT = 1) and the token tiles
// of matmul (R = 1, NT = 8) alike.
//
// Every (row, token) output is computed by the same arithmetic whatever R
// and NT are, so a token's result never depends on the batch it is in:
// - per block, integer dot products of the weight quants with the int8
//   activations (exact, whatever instructions compute them), giving 8 int32
//   lanes: lane j holds values 4j .. 4j + 3 of each 32-value chunk, already
//   multiplied by the integer sub-block scales of the K-quants;
// - then, in float and in block order, acc = fma(d_w * d_x, float(lanes),
//   acc) into an 8-lane accumulator, and for the types with an offset or a
//   min a second accumulator fed from the block sums of the activations;
// - one horizontal sum of the 8 lanes at the end, in a fixed order
//   ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
//
// x86 (AVX2, AVX3, AVX3_DL), 256-bit vectors: each weight block is unpacked
// once per tile into a canonical form (UnpackBlock): per 32-value chunk c
// the integer weights w_c (and |w_c| for signed types) and the int16 scales
// s_c of its two 16-value halves. Every token then runs
//   lanes += vpmaddwd(s_c, vpmaddubsw(|w_c|, sign(x_c, w_c)))
// as in ggml (u8 x s8 pairs within int16, never saturating here), the
// 32-value types vpmaddubsw + vpmaddwd(ones). With VNNI the pair is one
// vpdpwssd (one vpdpbusd for the 32-value types): AVX512-VNNI (EVEX)
// on AVX3_DL and on AVX3 CPUs that have it, AVX-VNNI (VEX) on AVX2 CPUs
// that have it (cpu_features.h); the int32 lanes are the same. On AVX3 and
// AVX3_DL, q4_K, q5_K and q6_K blocks go two chunks per 512-bit vector
// (intdot_wide-inl.h), again the same int32 lanes; with VNNI one token's
// q8_0, q4_0, iq4_nl and mxfp4 rows skip the sign trick by the offset form
// (intdot_offset-inl.h), the same int32 lanes once more. Every other
// target (SSE4, EMU128/SCALAR, NEON, SVE) runs the portable scalar version
// of the same lane layout, whole rows at a time. The float part uses FMA on
// x86 and multiply + add elsewhere (the kernel files are compiled with
// -ffp-contract=off so that nothing else fuses).
//
// Per-target include guard (Highway's -inl.h convention).
#if defined(TKV_TENSOR_INTDOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_TENSOR_INTDOT_INL_H_
#undef TKV_TENSOR_INTDOT_INL_H_
#else
#define TKV_TENSOR_INTDOT_INL_H_
#endif

#include <array>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "tensor/blocks.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/act_blocks.h"
#include "tensor/kernels/cpu_features.h"
#include "tensor/kernels/decode-inl.h"
#include "tensor/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

using kernels::ActBlock256;
using kernels::ActBlock32;

// Software prefetch of the weight stream (see kIntPrefetchAhead).
HWY_INLINE void PrefetchRow(const uint8_t* p) {
  hwy::Prefetch(p);
}

// Scales and mins of the eight 32-value groups of a Q4_K block (ggml's
// get_scale_min_k4 for all groups at once) from its 12 scale bytes u0 u1 u2
// (4 each), as two words of bytes: sc = sc[0..7], m = m[0..7]. The low
// halves are u0 & 63 and u1 & 63; the high halves u2's nibbles (low for sc,
// high for m) under the top two bits of u0 (sc) and u1 (m). 64-bit words, so
// that a vector takes each in one move.
HWY_INLINE void K4ScaleWords(const uint8_t* scales, uint64_t& sc, uint64_t& m) {
  uint64_t u01;
  uint32_t u2;
  std::memcpy(&u01, scales, 8);
  std::memcpy(&u2, scales + 8, 4);
  const uint64_t low = u01 & 0x3f3f3f3f3f3f3f3f;
  const uint64_t high = (u2 & 0x0f0f0f0f) | (uint64_t((u2 >> 4) & 0x0f0f0f0f) << 32) |
                        ((u01 >> 2) & 0x3030303030303030);
  sc = (low & 0xffffffff) | (high << 32);
  m = (low >> 32) | (high & 0xffffffff00000000);
}
// The same as bytes: sc[0..7], m[0..7].
HWY_INLINE void K4ScaleBytes(const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  uint64_t s, n;
  K4ScaleWords(scales, s, n);
  std::memcpy(sc, &s, 8);
  std::memcpy(m, &n, 8);
}

// The 16 signed 6-bit group scales (s_g - 32) of a Q3_K block.
HWY_INLINE void Q3KScales(const uint8_t* scales, int8_t* out) {
  for (int g = 0; g < 16; ++g) {
    const int low = g < 8 ? (scales[g] & 0xF) : (scales[g - 8] >> 4);
    const int high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    out[g] = int8_t((low | (high << 4)) - 32);
  }
}

// Block shape of T's integer kernel: 8 chunks of 32 values (super-blocks)
// or one, and whether the weights are signed (the sign trick) or unsigned.
template <DType T>
struct IntGemmTraits {
  static constexpr bool kSuper = T == DType::Q2_K || T == DType::Q3_K || T == DType::Q4_K ||
                                 T == DType::Q5_K || T == DType::Q6_K || T == DType::IQ4_XS;
  static constexpr int kChunks = kSuper ? 8 : 1;
  static constexpr bool kSigned = !(T == DType::Q4_1 || T == DType::Q5_1 || T == DType::Q4_K ||
                                    T == DType::Q5_K || T == DType::Q2_K);
};

// How far ahead of the current block matvec prefetches each row stream
// (bytes): the lead that keeps each type's stream ahead of its arithmetic.
// The longer one helps the super-block types and q8_0 but not the other
// 32-value types, which keep 4 KiB; beyond 8 KiB two threads' streams slow
// each other down.
template <DType T>
inline constexpr size_t kIntPrefetchAhead =
    IntGemmTraits<T>::kSuper || T == DType::Q8_0 ? 8192 : 4096;

// Activation scales of a token tile: dx[(b - b0) * kTileDx + t] = d of token
// t's block b, so that one vector multiply gives a block's NT scale products
// (NT > 1; a single token's come straight from its blocks). The types with
// an offset (q4_1, q5_1) also take sx, laid out alike: float(sum of q) of
// the block, so that a block's offset terms of all NT tokens are one FMA.
inline constexpr int kTileDx = 8;

// Whether T's weights carry an offset m (q4_1, q5_1): sum_k (d q_k + m) x_k
// needs the activation block sums.
template <DType T>
inline constexpr bool kIntOffset = T == DType::Q4_1 || T == DType::Q5_1;

// Whether this target's kernels may use their dot-product instructions now
// (vpdpbusd / vpdpwssd on x86, sdot on aarch64): AVX3_DL implies
// AVX512-VNNI; AVX3, AVX2 and NEON check the CPU (cpu_features.h); all of
// them the kernel configuration (kernel_config.h: TURBOKV_VNNI).
HWY_INLINE bool IntVnniUsable() {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3_DL
  return kernel_config().int_dot;
#elif HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  return kernel_config().int_dot && kernels::cpu_has_avx512_vnni();
#elif HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return kernel_config().int_dot && kernels::cpu_has_avx_vnni();
#elif HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
  return kernel_config().int_dot && kernels::cpu_has_arm_dotprod();
#else
  return false;
#endif
}

// Whether this target has a dot-product instruction path at all (the
// kernels are then compiled twice, with and without it).
inline constexpr bool kIntHasDotInstructions =
    (HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2) ||
    (HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR);

// The f32 scale of a 32-value block: the f16 d at its start, or MXFP4's
// E8M0 half-scale (its first byte).
template <DType T>
HWY_INLINE float Scale32(const uint8_t* blk) {
  if constexpr (T == DType::MXFP4)
    return kE8M0HalfScales[blk[0]];
  else
    return HalfAt(blk);
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
// With AVX-512 (BW, VL) the 16 bytes come into both halves by a broadcast
// load and one masked shift moves the high half's nibbles down (one vector
// operation fewer than a shift and an insert).
HWY_INLINE __m256i Nibbles32(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
#if HWY_TARGET <= HWY_AVX3
  const __m256i b = _mm256_broadcastsi128_si256(t);
  return _mm256_and_si256(_mm256_mask_srli_epi16(b, 0xFF00, b, 4), _mm256_set1_epi8(15));
#else
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
#endif
}

struct UnpackQ4_0 {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    return _mm256_sub_epi8(Nibbles32(p + offsetof(BlockQ4_0, qs)), _mm256_set1_epi8(8));
  }
};
// The int8 levels table[code] of the 32 codes at qs (IQ4_NL, MXFP4): one
// vpshufb of the 16-entry table.
HWY_INLINE __m256i Levels32(const int8_t* levels, const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(levels));
  return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), Nibbles32(qs));
}
struct UnpackIQ4_NL {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    return Levels32(kIQ4NLValues, p + offsetof(BlockIQ4_NL, qs));
  }
};
struct UnpackMXFP4 {
  HWY_INLINE __m256i operator()(const uint8_t* p) const {
    return Levels32(kMXFP4Values, p + offsetof(BlockMXFP4, qs));
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

HWY_INLINE float Hsum4(__m128 r) {
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// int16 lanes 0..7 = s[i], 8..15 = s[i + 1] (the two 16-value groups of a
// 32-value chunk).
HWY_INLINE __m256i GroupScales(const int8_t* s, int i) {
  return _mm256_set_m128i(_mm_set1_epi16(s[i + 1]), _mm_set1_epi16(s[i]));
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

// lanes + vpmaddwd(s, p): one vpdpwssd with VNNI. Highway's target
// attributes name neither avx512vnni nor avxvnni, so the instructions are
// written in assembly ({vex}: the AVX-VNNI encoding, ymm0-15).
template <bool kVnni>
HWY_INLINE __m256i AddMaddWd(__m256i lanes, __m256i s, __m256i p) {
  if constexpr (kVnni) {
#if HWY_TARGET <= HWY_AVX3
    __asm__("vpdpwssd %2, %1, %0" : "+v"(lanes) : "v"(p), "vm"(s));
#else
    __asm__("%{vex%} vpdpwssd %2, %1, %0" : "+x"(lanes) : "x"(p), "xm"(s));
#endif
    return lanes;
  } else {
    return _mm256_add_epi32(lanes, _mm256_madd_epi16(s, p));
  }
}

// lanes + vpdpbusd(u, s) (u8 x s8, four products per int32 lane).
HWY_INLINE __m256i AddDotU8S8(__m256i lanes, __m256i u, __m256i s) {
#if HWY_TARGET <= HWY_AVX3
  __asm__("vpdpbusd %2, %1, %0" : "+v"(lanes) : "v"(u), "v"(s));
#else
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(lanes) : "x"(u), "x"(s));
#endif
  return lanes;
}

// Sums of u8 x s8 products of 4 consecutive bytes into 8 int32 lanes: one
// vpdpbusd with VNNI, else vpmaddubsw + vpmaddwd with ones (the callers keep
// pairs of products within int16, so both give the same lanes).
template <bool kVnni>
HWY_INLINE __m256i DotU8S8Lanes(__m256i u, __m256i s) {
  if constexpr (kVnni)
    return AddDotU8S8(_mm256_setzero_si256(), u, s);
  else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

// One weight block in canonical form (see the top of the file).
template <int C, bool kSigned>
struct UnpackedBlock {
  __m256i w[C];    // integer weights (unsigned types: the u8 operand itself)
  __m256i aw[C];   // |w| (signed types only)
  __m256i off[C];  // offset form (q3_K, q6_K for one token): w = q - off, q and off unsigned
  __m256i s[C];    // int16 scales per 16-value half (super-blocks only)
  float d;         // f16 scale
  float dm;        // dmin (q4_K, q5_K, q2_K) or m (q4_1, q5_1)
  __m256i mins;    // q2_K: 16 int16 mins; q4_K, q5_K: 8 in the low half
};

template <DType T>
using UnpackedFor = UnpackedBlock<IntGemmTraits<T>::kChunks, IntGemmTraits<T>::kSigned>;

template <DType T>
constexpr size_t IntBlockBytes() {
  switch (T) {
    case DType::Q8_0:
      return sizeof(BlockQ8_0);
    case DType::Q4_0:
      return sizeof(BlockQ4_0);
    case DType::IQ4_NL:
      return sizeof(BlockIQ4_NL);
    case DType::MXFP4:
      return sizeof(BlockMXFP4);
    case DType::Q5_0:
      return sizeof(BlockQ5_0);
    case DType::Q4_1:
      return sizeof(BlockQ4_1);
    case DType::Q5_1:
      return sizeof(BlockQ5_1);
    case DType::Q2_K:
      return sizeof(BlockQ2_K);
    case DType::Q3_K:
      return sizeof(BlockQ3_K);
    case DType::Q4_K:
      return sizeof(BlockQ4_K);
    case DType::Q5_K:
      return sizeof(BlockQ5_K);
    case DType::Q6_K:
      return sizeof(BlockQ6_K);
    case DType::IQ4_XS:
      return sizeof(BlockIQ4_XS);
    default:
      return 0;
  }
}

// A q4_K / q5_K block's d and dmin into u, its 8 mins into u.mins (int16
// lanes 0..7); returns its 8 scales and 8 mins as int16 lanes 0..7, 8..15.
template <class Block, class Unpacked>
HWY_INLINE __m256i K4Header(const uint8_t* blk, Unpacked& u) {
  u.d = HalfAt(blk);
  u.dm = HalfAt(blk + 2);
  uint64_t sc, m;
  K4ScaleWords(blk + offsetof(Block, scales), sc, m);
  const __m256i sm16 = _mm256_cvtepu8_epi16(_mm_set_epi64x(int64_t(m), int64_t(sc)));
  u.mins = _mm256_zextsi128_si256(_mm256_extracti128_si256(sm16, 1));
  return sm16;
}

// UnpackBlock of the 32-value types: their one chunk, d (MXFP4: the E8M0
// half-scale), and dm where the type has a min (q4_1, q5_1).
template <DType T>
HWY_INLINE void UnpackSmallBlock(const uint8_t* blk, UnpackedFor<T>& u) {
  if constexpr (T == DType::Q4_1 || T == DType::Q5_1) {
    u.d = HalfAt(blk);
    u.dm = HalfAt(blk + 2);
    u.w[0] = T == DType::Q4_1 ? UnpackQ4_1()(blk) : UnpackQ5_1()(blk);
  } else {
    u.d = Scale32<T>(blk);
    if constexpr (T == DType::Q8_0) u.w[0] = UnpackQ8_0()(blk);
    if constexpr (T == DType::Q4_0) u.w[0] = UnpackQ4_0()(blk);
    if constexpr (T == DType::IQ4_NL) u.w[0] = UnpackIQ4_NL()(blk);
    if constexpr (T == DType::MXFP4) u.w[0] = UnpackMXFP4()(blk);
    if constexpr (T == DType::Q5_0) u.w[0] = UnpackQ5_0()(blk);
  }
}

// UnpackBlock of q4_K and q5_K: 8 chunks of 4 (5) bits, 8 scales, 8 mins.
template <DType T>
HWY_INLINE void UnpackK4Block(const uint8_t* blk, UnpackedFor<T>& u) {
  using Block = std::conditional_t<T == DType::Q5_K, BlockQ5_K, BlockQ4_K>;
  const __m256i sm16 = K4Header<Block>(blk, u);
  // int16 lane c of the scales broadcast: one vpshufb per chunk.
  const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sm16));
  for (int c = 0; c < 8; ++c)
    u.s[c] = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(short(0x0100 + 0x0202 * c)));
  const uint8_t* qs = blk + offsetof(Block, qs);
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256i hbits = _mm256_setzero_si256();
  if constexpr (T == DType::Q5_K) hbits = Load256(blk + offsetof(BlockQ5_K, qh));
  for (int j = 0; j < 4; ++j) {
    const __m256i bits = Load256(qs + 32 * j);
    __m256i ql = _mm256_and_si256(bits, m4);
    __m256i qh = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
    if constexpr (T == DType::Q5_K) {
      const __m256i one = _mm256_set1_epi8(1);
      ql = _mm256_or_si256(
          ql, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4));
      qh = _mm256_or_si256(
          qh, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4));
    }
    u.w[2 * j] = ql;
    u.w[2 * j + 1] = qh;
  }
}

// UnpackBlock of q6_K: 6-bit quants, 16 int8 scales.
template <DType T, bool kOffsetForm>
HWY_INLINE void UnpackQ6KBlock(const uint8_t* blk, UnpackedFor<T>& u) {
  const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(blk);
  u.d = HalfAt(blk + offsetof(BlockQ6_K, d));
  const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
  const __m256i m32 = _mm256_set1_epi8(32);
  for (int h = 0; h < 2; ++h) {
    const __m256i l0 = Load256(w->ql + 64 * h), l1 = Load256(w->ql + 64 * h + 32);
    const __m256i hb = Load256(w->qh + 32 * h);
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4)),
        _mm256_or_si256(_mm256_and_si256(l1, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4))};
    for (int k = 0; k < 4; ++k) {
      const int c = 4 * h + k;
      if constexpr (kOffsetForm)
        u.w[c] = q[k], u.off[c] = m32;
      else
        u.w[c] = _mm256_sub_epi8(q[k], m32);
      u.s[c] = GroupScales(w->scales, 2 * c);
    }
  }
}

// UnpackBlock of q2_K and q3_K: 2-bit quants (q3_K: and a high bit), 16
// scales (q2_K: and 16 mins).
template <DType T, bool kOffsetForm>
HWY_INLINE void UnpackK23Block(const uint8_t* blk, UnpackedFor<T>& u) {
  constexpr bool kThree = T == DType::Q3_K;
  using Block = std::conditional_t<kThree, BlockQ3_K, BlockQ2_K>;
  const Block* w = reinterpret_cast<const Block*>(blk);
  u.d = HalfAt(blk + offsetof(Block, d));
  alignas(16) int8_t sc[16];
  __m256i hmask = _mm256_setzero_si256();
  if constexpr (kThree) {
    Q3KScales(w->scales, sc);
    hmask = Load256(w->hmask);
  } else {
    u.dm = HalfAt(blk + offsetof(BlockQ2_K, dmin));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales));
    _mm_store_si128(reinterpret_cast<__m128i*>(sc), _mm_and_si128(raw, _mm_set1_epi8(15)));
    u.mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
  }
  const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = Load256(w->qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      const int c = 4 * h + j;
      __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
      if constexpr (kThree) {
        const __m256i q4 = _mm256_slli_epi16(
            _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(hmask, c), one), one), 2);
        if constexpr (kOffsetForm)
          u.off[c] = q4;
        else
          q = _mm256_sub_epi8(q, q4);
      }
      u.w[c] = q;
      u.s[c] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * c + 1]), _mm_set1_epi16(sc[2 * c]));
    }
  }
}

// UnpackBlock of iq4_xs: 4-bit indices into the non-linear table, 8 scales.
template <DType T>
HWY_INLINE void UnpackIQ4XSBlock(const uint8_t* blk, UnpackedFor<T>& u) {
  const BlockIQ4_XS* w = reinterpret_cast<const BlockIQ4_XS*>(blk);
  u.d = HalfAt(blk);
  const __m128i t128 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
  const __m256i table = _mm256_set_m128i(t128, t128);
  for (int g = 0; g < 8; ++g) {
    const int ls =
        ((w->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((w->scales_h >> (2 * g)) & 3) << 4);
    u.s[g] = _mm256_set1_epi16(short(ls - 32));
    u.w[g] = _mm256_shuffle_epi8(table, Nibbles32(w->qs + 16 * g));
  }
}

// The same weight values, chunk order and scales as intdot-inl.h's kernel
// for T.
// kOffsetForm (q3_K and q6_K): w[c] holds the unsigned quants q and off[c]
// what is subtracted (32; q3_K's 4 where the high bit is clear), so that a
// token costs vpmaddubsw(q, x) - vpmaddubsw(off, x) and the block no sign
// step: cheaper for one token, the sign form for a tile of tokens.
template <DType T, bool kOffsetForm = false>
HWY_INLINE void UnpackBlock(const uint8_t* blk, UnpackedFor<T>& u) {
  if constexpr (T == DType::Q8_0 || T == DType::Q4_0 || T == DType::IQ4_NL || T == DType::Q5_0 ||
                T == DType::Q4_1 || T == DType::Q5_1 || T == DType::MXFP4) {
    UnpackSmallBlock<T>(blk, u);
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    UnpackK4Block<T>(blk, u);
  } else if constexpr (T == DType::Q6_K) {
    UnpackQ6KBlock<T, kOffsetForm>(blk, u);
  } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
    UnpackK23Block<T, kOffsetForm>(blk, u);
  } else if constexpr (T == DType::IQ4_XS) {
    UnpackIQ4XSBlock<T>(blk, u);
  }
  if constexpr (IntGemmTraits<T>::kSigned && !kOffsetForm)
    for (int c = 0; c < IntGemmTraits<T>::kChunks; ++c) u.aw[c] = _mm256_sign_epi8(u.w[c], u.w[c]);
}

// int16 pair sums w x q of chunk c (never saturating: |pair| <= 2 * 127 * 127).
template <DType T, bool kOffsetForm>
HWY_INLINE __m256i ChunkPairs(const UnpackedFor<T>& u, int c, __m256i q) {
  if constexpr (kOffsetForm) {
    return _mm256_sub_epi16(_mm256_maddubs_epi16(u.w[c], q), _mm256_maddubs_epi16(u.off[c], q));
  } else if constexpr (IntGemmTraits<T>::kSigned) {
    return _mm256_maddubs_epi16(u.aw[c], _mm256_sign_epi8(q, u.w[c]));
  } else {
    return _mm256_maddubs_epi16(u.w[c], q);
  }
}

// u8 x s8 operands of chunk c against the activations q.
template <DType T>
HWY_INLINE __m256i ChunkOperand(const UnpackedFor<T>& u, int c, __m256i q, __m256i* a) {
  if constexpr (IntGemmTraits<T>::kSigned) {
    *a = u.aw[c];
    return _mm256_sign_epi8(q, u.w[c]);
  } else {
    *a = u.w[c];
    return q;
  }
}

#include "tensor/kernels/intdot_offset-inl.h"

#if HWY_TARGET <= HWY_AVX3
#include "tensor/kernels/intdot_wide-inl.h"
#else
// No wide blocks below AVX3: DotRowsInt names them only in branches that
// `if constexpr` discards, so declarations are enough.
template <DType T>
inline constexpr bool kWideBlocks = false;
struct WideBlock;
template <DType T, bool kOffsetForm>
void UnpackWide(const uint8_t* blk, WideBlock& u);
template <DType T, bool kOffsetForm, bool kVnni>
__m256i WideLanes(const WideBlock& u, const int8_t* q);
#endif

// Adds blocks [b0, b1) of R rows times NT <= 8 tokens into st[r * NT + t].
// Per block and row the weights are unpacked once (UnpackBlock) and used for
// the NT tokens; per token the chunk products go into two int32 chains
// (VNNI's vpdpwssd has a 5-cycle latency), then the block's scale products
// d_w d_x (one vector multiply for NT tokens) feed the float accumulators,
// which stay in registers over the blocks. matvec is R = 4, NT = 1 (four
// row streams in flight); the token tiles of matmul R = 1, NT = 8. The
// offset terms of q4_1 / q5_1, m_w d_x sum(q), are one scalar FMA per block
// for one token and, in a tile, one 8-lane FMA per block for all NT tokens
// (lane t: token t, from dx and sx): the same operations per token.
template <DType T, int R, int NT, bool kVnni>
HWY_INLINE void DotRowsInt(const uint8_t* const* rows, size_t b0, size_t b1, const void* const* x,
                           const float* HWY_RESTRICT dx, const float* HWY_RESTRICT sx, IntAcc* st) {
  static_assert(NT <= kTileDx);
  using Tr = IntGemmTraits<T>;
  constexpr size_t kBlockBytes = IntBlockBytes<T>();
  constexpr bool kMins = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q2_K;
  constexpr bool kOffset = kIntOffset<T>;
  constexpr bool kTileOffset = kOffset && NT > 1;
  constexpr bool kOffsetForm = NT == 1 && (T == DType::Q3_K || T == DType::Q6_K);
  __m256 acc[R][NT], accm[R][NT];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = st[r * NT + t].v, accm[r][t] = st[r * NT + t].m;
  // A tile's offset accumulators, lane t = lane 0 of token t's.
  __m256 accm_tile[R];
  if constexpr (kTileOffset)
    for (int r = 0; r < R; ++r) {
      alignas(32) float m[kTileDx] = {};
      for (int t = 0; t < NT; ++t) m[t] = _mm256_cvtss_f32(st[r * NT + t].m);
      accm_tile[r] = _mm256_load_ps(m);
    }
  for (size_t b = b0; b < b1; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * kBlockBytes;
      if constexpr (NT == 1) {
        if constexpr (Tr::kSuper) {
          for (size_t o = 0; o < kBlockBytes; o += 64) PrefetchRow(blk + kIntPrefetchAhead<T> + o);
        } else if (b % 2 == 0) {
          PrefetchRow(blk + kIntPrefetchAhead<T>);
        }
      }
      std::conditional_t<kWideBlocks<T>, WideBlock, UnpackedFor<T>> u;
      if constexpr (kWideBlocks<T>)
        UnpackWide<T, kOffsetForm>(blk, u);
      else
        UnpackBlock<T, kOffsetForm>(blk, u);
      alignas(32) float scale[kTileDx], scale_m[kTileDx];
      // One token's d_w d_x and dm_w d_x as vectors straight from one
      // conversion of the block's f16 d and dm (the same products as the
      // scalar ones, in fewer vector operations, which bound the kernel
      // when the weights are in cache): the 512-bit K4 blocks and the
      // 32-value types whose block starts with its f16 d (and m).
      constexpr bool kHalfScale = !Tr::kSuper && T != DType::MXFP4;
      constexpr bool kVectorScales = NT == 1 && ((kWideBlocks<T> && kMins) || kHalfScale);
      [[maybe_unused]] __m256 scale_v;
      [[maybe_unused]] __m128 scale_m_v;
      if constexpr (kVectorScales) {
        __m128 dd, dx;
        if constexpr (Tr::kSuper) {
          dd = u.dd;
          dx = _mm_set1_ps(static_cast<const ActBlock256*>(x[0])[b].d);
        } else {
          dd = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk)));
          dx = _mm_set1_ps(static_cast<const ActBlock32*>(x[0])[b].d);
        }
        const __m128 sdx = _mm_mul_ps(dd, dx);
        scale_v = _mm256_broadcastss_ps(sdx);
        scale_m_v = _mm_permute_ps(sdx, 0x55);
      } else if constexpr (NT == 1) {
        float d;
        if constexpr (Tr::kSuper)
          d = static_cast<const ActBlock256*>(x[0])[b].d;
        else
          d = static_cast<const ActBlock32*>(x[0])[b].d;
        scale[0] = u.d * d;
        if constexpr (kMins || kOffset) scale_m[0] = u.dm * d;
      } else {
        const __m256 dxv = _mm256_load_ps(dx + (b - b0) * kTileDx);
        _mm256_store_ps(scale, _mm256_mul_ps(_mm256_set1_ps(u.d), dxv));
        if constexpr (kMins) _mm256_store_ps(scale_m, _mm256_mul_ps(_mm256_set1_ps(u.dm), dxv));
        if constexpr (kTileOffset)
          accm_tile[r] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(u.dm), dxv),
                                         _mm256_load_ps(sx + (b - b0) * kTileDx), accm_tile[r]);
      }
      // Token t's d_w d_x and dm_w d_x in every lane.
      const auto scale_of = [&](int t) HWY_ATTR {
        if constexpr (kVectorScales)
          return scale_v;
        else
          return _mm256_set1_ps(scale[t]);
      };
      const auto scale_m_of = [&](int t) HWY_ATTR {
        if constexpr (kVectorScales)
          return scale_m_v;
        else
          return _mm_set1_ps(scale_m[t]);
      };
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        __m256& a_v = acc[r][t];
        __m256& a_m = accm[r][t];
        if constexpr (!Tr::kSuper) {
          const ActBlock32& a = static_cast<const ActBlock32*>(x[t])[b];
          __m256i au;
          const __m256i xq = ChunkOperand<T>(u, 0, Load256(a.q), &au);
          // Unsigned quants (q4_1, q5_1) are vpdpbusd's u8 operand as they are.
          const __m256i lanes = DotU8S8Lanes<kVnni>(au, xq);
          a_v = _mm256_fmadd_ps(scale_of(t), _mm256_cvtepi32_ps(lanes), a_v);
          if constexpr (kOffset && NT == 1)  // the offset m times the block sum
            a_m = _mm256_castps128_ps256(
                _mm_fmadd_ss(scale_m_of(t), _mm_set_ss(float(a.sum)), _mm256_castps256_ps128(a_m)));
        } else {
          const ActBlock256& a = static_cast<const ActBlock256*>(x[t])[b];
          __m256i lanes;
          if constexpr (kWideBlocks<T>) {
            lanes = WideLanes<T, kOffsetForm, kVnni>(u, a.q);
          } else {
            __m256i l[2];
#pragma GCC unroll 8
            for (int c = 0; c < 8; ++c) {
              const __m256i p16 = ChunkPairs<T, kOffsetForm>(u, c, Load256(a.q + 32 * c));
              l[c % 2] =
                  c < 2 ? _mm256_madd_epi16(u.s[c], p16) : AddMaddWd<kVnni>(l[c % 2], u.s[c], p16);
            }
            lanes = _mm256_add_epi32(l[0], l[1]);
          }
          a_v = _mm256_fmadd_ps(scale_of(t), _mm256_cvtepi32_ps(lanes), a_v);
          if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
            // Lane i: m_2i S_2i + m_2i+1 S_2i+1 (S_g: group g's activation sum).
            const __m128i s32 = _mm_load_si128(reinterpret_cast<const __m128i*>(a.psums));
            const __m128 m = _mm_fmadd_ps(
                scale_m_of(t), _mm_cvtepi32_ps(_mm_madd_epi16(_mm256_castsi256_si128(u.mins), s32)),
                _mm256_castps256_ps128(a_m));
            a_m = _mm256_castps128_ps256(m);
          } else if constexpr (T == DType::Q2_K) {
            a_m = AccLanes(a_m, scale_m[t], _mm256_madd_epi16(u.mins, Load256(a.bsums)));
          }
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    alignas(32) float m[kTileDx];
    if constexpr (kTileOffset) _mm256_store_ps(m, accm_tile[r]);
    for (int t = 0; t < NT; ++t) {
      st[r * NT + t].v = acc[r][t];
      if constexpr (kTileOffset)
        st[r * NT + t].m = _mm256_setr_ps(m[t], 0, 0, 0, 0, 0, 0, 0);
      else if constexpr (kMins || kOffset)
        st[r * NT + t].m = accm[r][t];
    }
  }
}

#else  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#include "tensor/kernels/intdot_portable-inl.h"
#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

// --- matvec: one token at a time (kernels_int.cc; kernels_intgemm.cc for
// the tokens a tile of 4 or 8 leaves) ------------------------------------

// Rows walked side by side when a product has one token (matvec): several
// sequential weight streams keep more memory requests in flight per core.
inline constexpr int kIntRowGroup = 4;

// R rows from r times one token t, whole rows (matvec).
template <DType T, int R, bool kVnni>
HWY_INLINE void MatvecTile(const kernels::IntDotArgs& a, size_t nb, int64_t r, int64_t t) {
  const uint8_t* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = a.w + size_t(r + i) * a.row_bytes;
  const void* xs[1] = {a.xq + size_t(t) * a.xq_stride};
  IntAcc st[R] = {};
  if constexpr (kVnni && kDotOffset<T> != 0)
    DotRowsOffset<T, R>(rows, 0, nb, static_cast<const kernels::ActBlock32*>(xs[0]), st);
  else
    DotRowsInt<T, R, 1, kVnni>(rows, 0, nb, xs, nullptr, nullptr, st);
  for (int i = 0; i < R; ++i) a.y[t * a.y_stride + r + i] = FinishInt<T>(st[i]);
}

// Rows [r0, r1) times tokens t0 .. n - 1, one token at a time.
template <DType T, bool kVnni>
void MatvecRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1, int64_t t0 = 0) {
  const size_t nb = size_t(a.cols) / (IntGemmTraits<T>::kSuper ? 256 : 32);
  for (int64_t t = t0; t < a.n; ++t) {
    int64_t r = r0;
    for (; r + kIntRowGroup <= r1; r += kIntRowGroup)
      MatvecTile<T, kIntRowGroup, kVnni>(a, nb, r, t);
    for (; r < r1; ++r) MatvecTile<T, 1, kVnni>(a, nb, r, t);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_INTDOT_INL_H_
