// Integer-dot products of one weight row against a tile of NT tokens (x86,
// AVX2 and up): the register-light kernel of matmul's token tiles (prefill
// and batched decode).
//
// Each weight block is unpacked once per tile into a canonical form: per
// 32-value chunk c, the chunk's integer weights w_c (int8, and |w_c| for the
// signed types), and the int16 scale vector s_c that vpmaddwd applies per
// 16-value half (the K-quants' integer sub-block scales; 1 for the 32-value
// types). Then every token of the tile runs
//   lanes += vpmaddwd(s_c, vpmaddubsw(|w_c|, sign(x_c, w_c)))   (c = 0 .. C-1)
// in registers and feeds the block's float accumulators with exactly the
// operations of intdot-inl.h's kernels. The int32 lanes are the same numbers
// as there (each lane j sums the products of values 4j .. 4j + 3 of every
// chunk times the same integer scales; integer sums are exact in any order),
// so a (row, token) output is bit-identical to the matvec of that token.
//
// With VNNI the vpmaddwd + vpaddd pair is one vpdpwssd, and the 32-value
// types' vpmaddubsw + vpmaddwd one vpdpbusd: AVX512-VNNI (EVEX) on the
// AVX-512 targets, AVX-VNNI (VEX) on AVX2, where the CPU has it (detected at
// run time, cpu_features.h; kVnni is chosen once per product).
//
// Per-target include guard (Highway's -inl.h convention).
#if defined(TKV_TENSOR_INTGEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_TENSOR_INTGEMM_INL_H_
#undef TKV_TENSOR_INTGEMM_INL_H_
#else
#define TKV_TENSOR_INTGEMM_INL_H_
#endif

#include "tensor/kernels/intdot-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

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

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

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

// Sums of u8 x s8 products of 4 consecutive bytes into 8 int32 lanes: one
// vpdpbusd with VNNI, else vpmaddubsw + vpmaddwd with ones (the callers keep
// pairs of products within int16, so both give the same lanes).
template <bool kVnni>
HWY_INLINE __m256i DotU8S8Lanes(__m256i u, __m256i s) {
  if constexpr (kVnni) {
    __m256i acc = _mm256_setzero_si256();
#if HWY_TARGET <= HWY_AVX3
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
#else
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
#endif
    return acc;
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
}

// One weight block in canonical form (see the top of the file).
template <int C, bool kSigned>
struct UnpackedBlock {
  __m256i w[C];   // integer weights (unsigned types: the u8 operand itself)
  __m256i aw[C];  // |w| (signed types only)
  __m256i s[C];   // int16 scales per 16-value half (super-blocks only)
  float d;        // f16 scale
  float dm;       // dmin (q4_K, q5_K, q2_K) or m (q4_1, q5_1)
  __m256i mins;   // q2_K: 16 int16 mins; q4_K, q5_K: 8 in the low half
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

// The same weight values, chunk order and scales as intdot-inl.h's kernel
// for T.
template <DType T>
HWY_INLINE void UnpackBlock(const uint8_t* blk, UnpackedFor<T>& u) {
  if constexpr (T == DType::Q8_0 || T == DType::Q4_0 || T == DType::IQ4_NL || T == DType::Q5_0) {
    u.d = HalfAt(blk);
    if constexpr (T == DType::Q8_0) u.w[0] = UnpackQ8_0()(blk);
    if constexpr (T == DType::Q4_0) u.w[0] = UnpackQ4_0()(blk);
    if constexpr (T == DType::IQ4_NL) u.w[0] = UnpackIQ4_NL()(blk);
    if constexpr (T == DType::Q5_0) u.w[0] = UnpackQ5_0()(blk);
  } else if constexpr (T == DType::Q4_1 || T == DType::Q5_1) {
    u.d = HalfAt(blk);
    u.dm = HalfAt(blk + 2);
    u.w[0] = T == DType::Q4_1 ? UnpackQ4_1()(blk) : UnpackQ5_1()(blk);
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    using Block = std::conditional_t<T == DType::Q5_K, BlockQ5_K, BlockQ4_K>;
    u.d = HalfAt(blk);
    u.dm = HalfAt(blk + 2);
    alignas(16) uint8_t scm[16];
    K4ScaleBytes(blk + offsetof(Block, scales), scm, scm + 8);
    const __m256i sm16 =
        _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(scm)));
    u.mins = _mm256_zextsi128_si256(_mm256_extracti128_si256(sm16, 1));
    for (int c = 0; c < 8; ++c) u.s[c] = _mm256_set1_epi16(short(scm[c]));
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
  } else if constexpr (T == DType::Q6_K) {
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
        u.w[c] = _mm256_sub_epi8(q[k], m32);
        u.s[c] = GroupScales(w->scales, 2 * c);
      }
    }
  } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
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
        if constexpr (kThree)
          q = _mm256_sub_epi8(
              q, _mm256_slli_epi16(
                     _mm256_xor_si256(_mm256_and_si256(_mm256_srli_epi16(hmask, c), one), one), 2));
        u.w[c] = q;
        u.s[c] = _mm256_set_m128i(_mm_set1_epi16(sc[2 * c + 1]), _mm_set1_epi16(sc[2 * c]));
      }
    }
  } else if constexpr (T == DType::IQ4_XS) {
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
  if constexpr (IntGemmTraits<T>::kSigned)
    for (int c = 0; c < IntGemmTraits<T>::kChunks; ++c) u.aw[c] = _mm256_sign_epi8(u.w[c], u.w[c]);
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

// Activation scales of a token tile: dx[(b - b0) * kTileDx + t] = d of token
// t's block b, so that one vector multiply gives a block's NT scale products.
inline constexpr int kTileDx = 8;

// Adds blocks [b0, b1) of one row times NT <= 8 tokens into st[t], bit for
// bit as DotRowInt<T, 1, 1> would for each token. The NT float accumulators
// stay in registers over the blocks; a block's scale products d_w * d_x for
// all NT tokens are one vector multiply, then broadcast from the stack; a
// token's chunk products go into two int32 chains so that VNNI's 5-cycle
// latency is not paid eight times in a row.
template <DType T, int NT, bool kVnni>
HWY_INLINE void GemmRowInt(const uint8_t* row, size_t b0, size_t b1, const void* const* x,
                           const float* HWY_RESTRICT dx, IntAcc* st) {
  static_assert(NT <= kTileDx);
  using Tr = IntGemmTraits<T>;
  constexpr size_t kBlockBytes = IntBlockBytes<T>();
  constexpr bool kMins = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q2_K;
  constexpr bool kOffset = T == DType::Q4_1 || T == DType::Q5_1;
  __m256 acc[NT], accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = st[t].v, accm[t] = st[t].m;
  for (size_t b = b0; b < b1; ++b) {
    const uint8_t* blk = row + b * kBlockBytes;
    UnpackedFor<T> u;
    UnpackBlock<T>(blk, u);
    alignas(32) float scale[kTileDx], scale_m[kTileDx];
    for (int t0 = 0; t0 < NT; t0 += 8) {
      const __m256 dxv = _mm256_load_ps(dx + (b - b0) * kTileDx + t0);
      _mm256_store_ps(scale + t0, _mm256_mul_ps(_mm256_set1_ps(u.d), dxv));
      if constexpr (kMins || kOffset)
        _mm256_store_ps(scale_m + t0, _mm256_mul_ps(_mm256_set1_ps(u.dm), dxv));
    }
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      if constexpr (!Tr::kSuper) {
        const ActBlock32& a = static_cast<const ActBlock32*>(x[t])[b];
        __m256i au;
        const __m256i sx = ChunkOperand<T>(u, 0, Load256(a.q), &au);
        if constexpr (!kOffset) {
          acc[t] = AccLanes(acc[t], scale[t], DotU8S8Lanes<kVnni>(au, sx));
        } else {
          // DotOffset32: vpmaddubsw + vpmaddwd, the offset in lane 0 of accm.
          const __m256i lanes =
              _mm256_madd_epi16(_mm256_maddubs_epi16(au, sx), _mm256_set1_epi16(1));
          acc[t] = AccLanes(acc[t], scale[t], lanes);
          accm[t] = _mm256_castps128_ps256(_mm_fmadd_ss(
              _mm_set_ss(scale_m[t]), _mm_set_ss(float(a.sum)), _mm256_castps256_ps128(accm[t])));
        }
      } else {
        const ActBlock256& a = static_cast<const ActBlock256*>(x[t])[b];
        // Two int32 chains, even and odd chunks, each started by a plain
        // vpmaddwd (no zeroed accumulator to copy).
        __m256i l[2];
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) {
          __m256i au;
          const __m256i sx = ChunkOperand<T>(u, c, Load256(a.q + 32 * c), &au);
          const __m256i p16 = _mm256_maddubs_epi16(au, sx);
          l[c % 2] =
              c < 2 ? _mm256_madd_epi16(u.s[c], p16) : AddMaddWd<kVnni>(l[c % 2], u.s[c], p16);
        }
        const __m256i lanes = _mm256_add_epi32(l[0], l[1]);
        acc[t] = AccLanes(acc[t], scale[t], lanes);
        if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
          const __m128i s32 = _mm_load_si128(reinterpret_cast<const __m128i*>(a.psums));
          const __m128 m =
              _mm_fmadd_ps(_mm_set1_ps(scale_m[t]),
                           _mm_cvtepi32_ps(_mm_madd_epi16(_mm256_castsi256_si128(u.mins), s32)),
                           _mm256_castps256_ps128(accm[t]));
          accm[t] = _mm256_castps128_ps256(m);
        } else if constexpr (T == DType::Q2_K) {
          accm[t] = AccLanes(accm[t], scale_m[t], _mm256_madd_epi16(u.mins, Load256(a.bsums)));
        }
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    st[t].v = acc[t];
    if constexpr (kMins || kOffset) st[t].m = accm[t];
  }
}

#else  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

// The portable kernels compute whole rows (kIntBlockRanges is false).
inline constexpr int kTileDx = 8;

template <DType T, int NT, bool kVnni>
HWY_INLINE void GemmRowInt(const uint8_t* row, size_t b0, size_t b1, const void* const* x,
                           const float* /*dx*/, IntAcc* st) {
  static_assert(!kVnni);
  DotRowInt<T, 1, NT>(&row, b0, b1, x, st);
}

#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_INTGEMM_INL_H_
