// Integer-dot block kernels: R weight rows against NT tokens' quantized
// activations (act_blocks.h), for matvec (R = kIntRowGroup, NT = 1) and the
// token tiles of matmul (R = 1, NT = 8) alike.
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
// once per tile into a canonical form (UnpackBlock, intdot_unpack-inl.h):
// per 32-value chunk c
// the integer weights w_c (and |w_c| for signed types) and the int16 scales
// s_c of its two 16-value halves. Every token then runs
//   lanes += vpmaddwd(s_c, vpmaddubsw(|w_c|, sign(x_c, w_c)))
// as in ggml (u8 x s8 pairs within int16, never saturating here), the
// 32-value types vpmaddubsw + vpmaddwd(ones). With VNNI the pair is one
// vpdpwssd (one vpdpbusd for the 32-value types): AVX512-VNNI (EVEX)
// on AVX3_DL and on AVX3 CPUs that have it, AVX-VNNI (VEX) on AVX2 CPUs
// that have it (cpu_features.h); the int32 lanes are the same. On AVX3 and
// AVX3_DL, q4_K, q5_K and q6_K blocks go two chunks per 512-bit vector
// (intdot_wide-inl.h), again the same int32 lanes; on AVX2 one token's
// q4_K and q5_K rows go two at a time (intdot_pairs-inl.h); one token's
// q8_0, q4_0, iq4_nl and mxfp4 rows (without VNNI q4_0 and mxfp4) skip the
// sign trick by the offset form (intdot_offset-inl.h), the same int32
// lanes once more. Every other
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

// Bytes of one block of T, for the types with an integer kernel.
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
HWY_INLINE float Hsum4(__m128 r) {
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
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

#include "tensor/kernels/intdot_unpack-inl.h"

// A super-block's 8 int32 lanes against one token's activations q: each
// chunk's int16 pairs times its scales, into two int32 chains (VNNI's
// vpdpwssd has a 5-cycle latency), then their sum.
template <DType T, bool kOffsetForm, bool kVnni>
HWY_INLINE __m256i SuperLanes(const UnpackedFor<T>& u, const int8_t* q) {
  __m256i l[2];
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i p16 = ChunkPairs<T, kOffsetForm>(u, c, Load256(q + 32 * c));
    l[c % 2] = c < 2 ? _mm256_madd_epi16(u.s[c], p16) : AddMaddWd<kVnni>(l[c % 2], u.s[c], p16);
  }
  return _mm256_add_epi32(l[0], l[1]);
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
#include "tensor/kernels/intdot_pairs-inl.h"

// Adds blocks [b0, b1) of R rows times NT <= 8 tokens into st[r * NT + t].
// Per block and row the weights are unpacked once (UnpackBlock) and used for
// the NT tokens; per token the chunk products go into two int32 chains
// (VNNI's vpdpwssd has a 5-cycle latency), then the block's scale products
// d_w d_x (one vector multiply for NT tokens) feed the float accumulators,
// which stay in registers over the blocks. matvec is R = kIntRowGroup,
// NT = 1 (several row streams in flight); the token tiles of matmul R = 1,
// NT = 8. The
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
      // when the weights are in cache): the q4_K / q5_K blocks and the
      // 32-value types whose block starts with its f16 d (and m).
      constexpr bool kHalfScale = !Tr::kSuper && T != DType::MXFP4;
      constexpr bool kVectorScales =
          NT == 1 && (T == DType::Q4_K || T == DType::Q5_K || kHalfScale);
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
            lanes = SuperLanes<T, kOffsetForm, kVnni>(u, a.q);
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
// On AVX2, q4_K / q5_K (DotRowsK4Pairs) and mxfp4 walk two: their one-token
// kernels are bound by the vector ports, and four rows' registers spill
// (one MoE layer 2-4% faster with two; on AVX-512 four stay faster).
template <DType T>
inline constexpr int kIntRowGroup = kK4RowPairs<T> || (T == DType::MXFP4 && HWY_ARCH_X86 &&
                                                       HWY_TARGET == HWY_AVX2)
                                        ? 2
                                        : 4;

// R rows from r times one token t, whole rows (matvec).
template <DType T, int R, bool kVnni>
HWY_INLINE void MatvecTile(const kernels::IntDotArgs& a, size_t nb, int64_t r, int64_t t) {
  const uint8_t* rows[R];
  for (int i = 0; i < R; ++i) rows[i] = a.w + size_t(r + i) * a.row_bytes;
  const void* xs[1] = {a.xq + size_t(t) * a.xq_stride};
  if constexpr (kK4RowPairs<T> && R % 2 == 0) {
    return DotRowsK4Pairs<T, R, kVnni>(rows, nb, static_cast<const kernels::ActBlock256*>(xs[0]),
                                       a.y + t * a.y_stride + r);
  }
  IntAcc st[R] = {};
  if constexpr (kOffsetMatvec<T, kVnni>)
    DotRowsOffset<T, R, kVnni>(rows, 0, nb, static_cast<const kernels::ActBlock32*>(xs[0]), st);
  else
    DotRowsInt<T, R, 1, kVnni>(rows, 0, nb, xs, nullptr, nullptr, st);
  for (int i = 0; i < R; ++i) a.y[t * a.y_stride + r + i] = FinishInt<T>(st[i]);
}

// Rows [r0, r1) times tokens t0 .. n - 1, one token at a time.
template <DType T, bool kVnni>
void MatvecRows(const kernels::IntDotArgs& a, int64_t r0, int64_t r1, int64_t t0 = 0) {
  const size_t nb = size_t(a.cols) / (IntGemmTraits<T>::kSuper ? 256 : 32);
  // The rows' own prefetches run kIntPrefetchAhead bytes ahead of them (the
  // rows are contiguous), so a task's first bytes would be read on demand.
  if (t0 < a.n) {
    const uint8_t* first = a.w + size_t(r0) * a.row_bytes;
    const size_t warm = std::min(kIntPrefetchAhead<T>, size_t(r1 - r0) * a.row_bytes);
    for (size_t o = 0; o < warm; o += 64) PrefetchRow(first + o);
  }
  for (int64_t t = t0; t < a.n; ++t) {
    int64_t r = r0;
    for (; r + kIntRowGroup<T> <= r1; r += kIntRowGroup<T>)
      MatvecTile<T, kIntRowGroup<T>, kVnni>(a, nb, r, t);
    for (; r < r1; ++r) MatvecTile<T, 1, kVnni>(a, nb, r, t);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_INTDOT_INL_H_
