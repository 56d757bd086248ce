// One token's product for the 32-value types with signed weights (q8_0,
// q4_0, iq4_nl, mxfp4) on x86: the offset form. Included by intdot-inl.h
// inside its x86 section, once per target (no include guard of its own).
//
// vpdpbusd and vpmaddubsw multiply u8 by s8, so the sign trick
// (intdot-inl.h) spends two vector operations per block on |w| and
// sign(x, w). Here the weights go in as unsigned codes w + o (o:
// kDotOffset; q8_0's is w xor 0x80, q4_0's the nibble itself, the table
// types a table of level + o), and each block's int32 lanes start from -o
// times the activation's lane sums, computed once per block for all R rows:
//   lane j = sum (w_k + o) x_k - o sum x_k = sum w_k x_k   (k in 4j .. 4j+3),
// the same integers as the sign trick's (|(w + o) x| <= 255 * 127, four of
// them well within int32), then the same float step, so the same bits. A
// row's block is then one unpacking, one vpdpbusd (without VNNI vpmaddubsw,
// vpmaddwd and an add), one convert and one FMA. Without VNNI the int16
// pairs of vpmaddubsw must not saturate, 2 (w + o) 127 <= 32767, which
// holds for q4_0 (codes <= 15) and mxfp4 (<= 24) but not q8_0 or iq4_nl
// (up to 255, 240): those keep the sign trick there. Token tiles keep it
// too: there the unpacking is shared by 8 tokens and the lanes are the
// same either way.

// The offset o that makes T's weights unsigned bytes; 0: no offset form.
template <DType T>
inline constexpr int kDotOffset = T == DType::Q8_0     ? 128
                                  : T == DType::Q4_0   ? 8
                                  : T == DType::IQ4_NL ? 127
                                  : T == DType::MXFP4  ? 12
                                                       : 0;

// Whether one token's T rows take the offset form (kVnni: whether the
// target has a dot-product instruction).
template <DType T, bool kVnni>
inline constexpr bool kOffsetMatvec = kDotOffset<T> != 0 &&
                                      (kVnni || T == DType::Q4_0 || T == DType::MXFP4);

// A 16-entry level table plus o, as the bytes vpshufb looks up.
template <const int8_t* kLevels, int kOffset>
alignas(16) inline constexpr auto kOffsetLevels = [] {
  std::array<int8_t, 16> t{};
  for (int i = 0; i < 16; ++i) t[size_t(i)] = int8_t(uint8_t(kLevels[i] + kOffset));
  return t;
}();

// The 32 weights of a block as u8 codes w + o.
template <DType T>
HWY_INLINE __m256i OffsetCodes(const uint8_t* blk) {
  if constexpr (T == DType::Q8_0)
    return _mm256_xor_si256(Load256(blk + offsetof(BlockQ8_0, qs)), _mm256_set1_epi8(char(0x80)));
  else if constexpr (T == DType::Q4_0)
    return Nibbles32(blk + offsetof(BlockQ4_0, qs));
  else if constexpr (T == DType::IQ4_NL)
    return Levels32(kOffsetLevels<kIQ4NLValues, 127>.data(), blk + offsetof(BlockIQ4_NL, qs));
  else
    return Levels32(kOffsetLevels<kMXFP4Values, 12>.data(), blk + offsetof(BlockMXFP4, qs));
}

// d_w of a block in every lane.
template <DType T>
HWY_INLINE __m256 BlockScale8(const uint8_t* blk) {
  if constexpr (T == DType::MXFP4)
    return _mm256_broadcast_ss(&kE8M0HalfScales[blk[0]]);
  else
    return _mm256_set1_ps(HalfAt(blk));
}

// Adds blocks [b0, b1) of R rows times one token x into st (matvec where
// kOffsetMatvec; DotRowsInt's NT = 1 for these types, in the offset form).
template <DType T, int R, bool kVnni>
HWY_INLINE void DotRowsOffset(const uint8_t* const* rows, size_t b0, size_t b1, const ActBlock32* x,
                              IntAcc* st) {
  static_assert(kOffsetMatvec<T, kVnni>);
  constexpr size_t kBlockBytes = IntBlockBytes<T>();
  const __m256i offset = _mm256_set1_epi8(char(kDotOffset<T>));
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = st[r].v;
  for (size_t b = b0; b < b1; ++b) {
    const __m256i xq = Load256(x[b].q);
    const __m256i base = _mm256_sub_epi32(_mm256_setzero_si256(), DotU8S8Lanes<kVnni>(offset, xq));
    const __m256 dx = _mm256_set1_ps(x[b].d);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rows[r] + b * kBlockBytes;
      if (b % 2 == 0) PrefetchRow(blk + kIntPrefetchAhead<T>);
      const __m256i codes = OffsetCodes<T>(blk);
      const __m256i lanes = kVnni ? AddDotU8S8(base, codes, xq)
                                  : _mm256_add_epi32(base, DotU8S8Lanes<false>(codes, xq));
      const __m256 scale = _mm256_mul_ps(BlockScale8<T>(blk), dx);
      acc[r] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(lanes), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) st[r].v = acc[r];
}
