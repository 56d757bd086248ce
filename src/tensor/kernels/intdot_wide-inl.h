// 512-bit block products of the super-block types q4_K, q5_K and q6_K for
// the AVX-512 targets. Included by intdot-inl.h inside its x86 section, once
// per target (no include guard of its own), where HWY_TARGET <= HWY_AVX3.
//
// One zmm holds two consecutive 32-value chunks of a block (chunk 2p in
// the low 256 bits, 2p + 1 in the high): per block and token 4 vpmaddubsw +
// 4 vpmaddwd / vpdpwssd instead of 8 + 8, and the unpacking and the scale
// shuffles work on 64 values at a time. The products go into two int32
// chains, and the two halves of their sum are added at the end: lane j
// (values 4j .. 4j + 3 of every chunk) is then the sum over the block's 8
// chunks, the same integers as the 256-bit code's (integer sums in any
// order are exact), and everything after it -- the float step per block,
// the final horizontal sum -- is that code's. So the outputs are bit for
// bit those of the 256-bit kernel, for every R, NT and thread split.
//
// Why: on a core with full-width 512-bit units this halves the instructions
// per block. Where the weights come from the caches (a mixture's chosen
// experts, small models) the kernel is bound by the two vector ports that
// 512-bit operations leave, so every vector operation per block counts:
// the 32 bytes of a pair's nibbles come in by a broadcast load (a load
// port, not a shuffle) and one masked shift, and with VBMI each pair's
// int16 scales come from the 8 scale bytes by one zero-masking vpermb.

// Whether T's blocks take WideLanes on this target.
template <DType T>
inline constexpr bool kWideBlocks = T == DType::Q4_K || T == DType::Q5_K || T == DType::Q6_K;

// One weight block unpacked for WideLanes: pair p = chunks 2p, 2p + 1.
struct WideBlock {
  __m512i w[4];   // q4_K / q5_K: the u8 quants; q6_K: q - 32 (offset form: q)
  __m512i aw[4];  // q6_K sign form: |q - 32|
  __m512i s[4];   // int16 scales, one per 16 values (vpmaddwd's operand)
  float d;
  float dm;
  __m128 dd;     // q4_K, q5_K: d and dm in lanes 0 and 1 (one conversion)
  __m256i mins;  // q4_K, q5_K: the 8 int16 mins in the low half
};

// vpermw indices of pair p's scales: int16 lane i takes scale K * p + i /
// (32 / K) of a vector of 4 * K int16 scales: K = 2 for q4_K / q5_K (one
// scale per 32-value chunk), 4 for q6_K (one per 16 values).
template <int K>
alignas(64) inline constexpr auto kPairScaleIdx = [] {
  std::array<std::array<int16_t, 32>, 4> idx{};
  for (int p = 0; p < 4; ++p)
    for (int i = 0; i < 32; ++i) idx[p][i] = int16_t(K * p + i / (32 / K));
  return idx;
}();
template <int K>
HWY_INLINE __m512i PairScales(__m512i scales16, int p) {
  return _mm512_permutexvar_epi16(_mm512_loadu_si512(kPairScaleIdx<K>[p].data()), scales16);
}

#if HWY_TARGET <= HWY_AVX3_DL
// With VBMI, pair p's q4_K / q5_K scales straight from the 8 scale bytes:
// vpermb puts scale 2p + i / 16 in the low byte of int16 lane i and the
// zero mask clears the high bytes, so no widening is needed first.
alignas(64) inline constexpr auto kPairScaleByteIdx = [] {
  std::array<std::array<uint8_t, 64>, 4> idx{};
  for (int p = 0; p < 4; ++p)
    for (int i = 0; i < 32; ++i) idx[p][2 * i] = uint8_t(2 * p + i / 16);
  return idx;
}();
HWY_INLINE __m512i PairScaleBytes(__m512i scales8, int p) {
  return _mm512_maskz_permutexvar_epi8(0x5555555555555555ull,
                                       _mm512_loadu_si512(kPairScaleByteIdx[p].data()), scales8);
}
#endif

// q6_K's high-bit shifts per 16-bit lane: the first pair of a 128-value
// half takes bits 0-1 / 2-3 of qh in its low / high 256 bits, the second
// bits 4-5 / 6-7.
alignas(64) inline constexpr auto kQ6HighShift = [] {
  std::array<std::array<int16_t, 32>, 2> s{};
  for (int i = 0; i < 32; ++i) s[0][i] = int16_t(i < 16 ? 0 : 2), s[1][i] = int16_t(i < 16 ? 4 : 6);
  return s;
}();

template <DType T, bool kOffsetForm>
HWY_INLINE void UnpackWide(const uint8_t* blk, WideBlock& u) {
  const __m512i m4 = _mm512_set1_epi8(15);
  if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
    using Block = std::conditional_t<T == DType::Q5_K, BlockQ5_K, BlockQ4_K>;
    u.dd = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk)));
    u.d = _mm_cvtss_f32(u.dd);
    u.dm = _mm_cvtss_f32(_mm_movehdup_ps(u.dd));
    uint64_t scales, mins;
    K4ScaleWords(blk + offsetof(Block, scales), scales, mins);
    u.mins = _mm256_zextsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(mins))));
#if HWY_TARGET <= HWY_AVX3_DL
    const __m512i sc = _mm512_castsi128_si512(_mm_cvtsi64_si128(int64_t(scales)));
#else
    const __m512i sc =
        _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(scales))));
#endif
    const uint8_t* qs = blk + offsetof(Block, qs);
    // q5_K's fifth bits, qh in both halves, the high half's a bit further
    // down: chunk 2j's bit 2j and chunk 2j + 1's bit 2j + 1 are then both
    // at bit 0 after one shift by 2j.
    __m512i hbits = _mm512_setzero_si512();
    if constexpr (T == DType::Q5_K) {
      hbits = _mm512_broadcast_i64x4(Load256(blk + offsetof(BlockQ5_K, qh)));
      hbits = _mm512_mask_srli_epi16(hbits, 0xFFFF0000u, hbits, 1);
    }
    for (int j = 0; j < 4; ++j) {
#if HWY_TARGET <= HWY_AVX3_DL
      u.s[j] = PairScaleBytes(sc, j);
#else
      u.s[j] = PairScales<2>(sc, j);
#endif
      // The 32 bytes in both halves (a broadcast load: no shuffle), the high
      // half's shifted down a nibble: one masked shift where a join cost two.
      const __m512i bits = _mm512_broadcast_i64x4(Load256(qs + 32 * j));
      __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(bits, 0xFFFF0000u, bits, 4), m4);
      if constexpr (T == DType::Q5_K) {
        const __m512i h = _mm512_srli_epi16(hbits, unsigned(2 * j));
        q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(h, _mm512_set1_epi8(1)), 4));
      }
      u.w[j] = q;
    }
  } else if constexpr (T == DType::Q6_K) {
    const BlockQ6_K* w = reinterpret_cast<const BlockQ6_K*>(blk);
    u.d = HalfAt(blk + offsetof(BlockQ6_K, d));
    const __m512i m2 = _mm512_set1_epi8(3), m32 = _mm512_set1_epi8(32);
    const __m256i s16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales)));
    const __m512i sc = _mm512_castsi256_si512(s16);
    const __m512i shift0 = _mm512_loadu_si512(kQ6HighShift[0].data());
    const __m512i shift1 = _mm512_loadu_si512(kQ6HighShift[1].data());
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(w->ql + 64 * h);  // chunk 4h's and 4h + 1's low bits
      const __m512i hb = _mm512_broadcast_i64x4(Load256(w->qh + 32 * h));
      const __m512i q[2] = {
          _mm512_or_si512(
              _mm512_and_si512(l, m4),
              _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, shift0), m2), 4)),
          _mm512_or_si512(
              _mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
              _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, shift1), m2), 4))};
      for (int k = 0; k < 2; ++k) {
        const int p = 2 * h + k;
        if constexpr (kOffsetForm) {
          u.w[p] = q[k];
        } else {
          u.w[p] = _mm512_sub_epi8(q[k], m32);
          u.aw[p] = _mm512_abs_epi8(u.w[p]);
        }
        u.s[p] = PairScales<4>(sc, p);
      }
    }
  }
}

// lanes + vpmaddwd(s, p) on 16 lanes: one vpdpwssd with VNNI.
template <bool kVnni>
HWY_INLINE __m512i AddMaddWd512(__m512i lanes, __m512i s, __m512i p) {
  if constexpr (kVnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(lanes) : "v"(p), "vm"(s));
    return lanes;
  } else {
    return _mm512_add_epi32(lanes, _mm512_madd_epi16(s, p));
  }
}

// The 8 int32 lanes of one block against one token's 256 activations q.
template <DType T, bool kOffsetForm, bool kVnni>
HWY_INLINE __m256i WideLanes(const WideBlock& u, const int8_t* q) {
  __m512i l[2];
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    const __m512i x = _mm512_loadu_si512(q + 64 * p);
    __m512i p16;
    if constexpr (T == DType::Q6_K && kOffsetForm) {
      p16 = _mm512_sub_epi16(_mm512_maddubs_epi16(u.w[p], x),
                             _mm512_maddubs_epi16(_mm512_set1_epi8(32), x));
    } else if constexpr (T == DType::Q6_K) {
      // |w| x sign(x, w): x negated where w < 0 (where w = 0, |w| x x = 0).
      const __m512i sx =
          _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(u.w[p]), _mm512_setzero_si512(), x);
      p16 = _mm512_maddubs_epi16(u.aw[p], sx);
    } else {
      p16 = _mm512_maddubs_epi16(u.w[p], x);
    }
    l[p % 2] = p < 2 ? _mm512_madd_epi16(u.s[p], p16) : AddMaddWd512<kVnni>(l[p % 2], u.s[p], p16);
  }
  const __m512i sum = _mm512_add_epi32(l[0], l[1]);
  return _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
}
