// One token's product for q4_K and q5_K with 256-bit vectors (AVX2; the
// AVX-512 targets take intdot_wide-inl.h's 512-bit blocks), rows two at a
// time. Included by intdot-inl.h inside its x86 section, once per target
// (no include guard of its own).
//
// Why: where a mixture's chosen experts sit in the caches, a 256-bit
// matvec is bound by the three ports that take vector operations. The
// chunk products need 37 of them per row and block; the rest of a block --
// its scales and mins decoded from 12 bytes, its f16 d and dmin, the mins
// term -- is done here for two rows in the two halves of one vector: one
// scale decode, one conversion of both rows' d and dmin, one mins product.
//
// Same bits as DotRowsInt: the chunk lanes are its SuperLanes on the same
// weights and scales (unpacked a chunk at a time, K4PairRowLanes); the
// float steps are its FMAs, lane for lane (a row's mins term in one 128-bit
// half of a vector, as DotRowsInt's in its xmm), with the same d_w d_x and
// dm_w d_x products.

// Whether one token's T rows take DotRowsK4Pairs on this target.
template <DType T>
inline constexpr bool kK4RowPairs = (T == DType::Q4_K || T == DType::Q5_K) && !kWideBlocks<T>;

// Both rows' outputs of a pair from its accumulators: DotRowsInt's
// FinishInt (Hsum8(v) - Hsum4(m)) for two rows at once, row A in the low
// 128 bits and row B in the high, the same additions in the same order.
HWY_INLINE void FinishK4Pair(__m256 va, __m256 vb, __m256 m, float* y) {
  // Per half: (l0 + l4, l1 + l5, l2 + l6, l3 + l7), as Hsum8's first step.
  __m256 v =
      _mm256_add_ps(_mm256_permute2f128_ps(va, vb, 0x31), _mm256_permute2f128_ps(va, vb, 0x20));
  v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x0E));  // lanes 0, 1 += lanes 2, 3
  v = _mm256_add_ps(v, _mm256_movehdup_ps(v));       // lane 0 += lane 1
  m = _mm256_add_ps(m, _mm256_permute_ps(m, 0x0E));
  m = _mm256_add_ps(m, _mm256_movehdup_ps(m));
  const __m256 out = _mm256_sub_ps(v, m);
  y[0] = _mm256_cvtss_f32(out);
  y[1] = _mm_cvtss_f32(_mm256_extractf128_ps(out, 1));
}

// One row's chunk lanes of a pair's block h: SuperLanes on K4Quants' quants
// and the pair's broadcast scales (the same products and chains, so the same
// lanes), each chunk's quants masked out of the block's loads just before
// its products. The block's loads issue first, together, as in K4Quants (a
// weight stream from DRAM wants them early); an unpacked block's 8 quant and
// 8 scale vectors do not fit AVX2's 16 registers beside the pair's state.
template <DType T, bool kVnni>
HWY_INLINE __m256i K4PairRowLanes(const uint8_t* blk, const int32_t* pairs, int h,
                                  const int8_t* q) {
  __m256i bits[4], hbits;
  K4Loads<T>(blk, bits, &hbits);
  __m256i l[2];
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const __m256i w = K4Chunk<T>(bits, hbits, c);
    const __m256i p16 = _mm256_maddubs_epi16(w, Load256(q + 32 * c));
    const __m256i s = BroadcastFromMemory(pairs[K4PairAt(h, c)]);
    l[c % 2] = c < 2 ? _mm256_madd_epi16(s, p16) : AddMaddWd<kVnni>(l[c % 2], s, p16);
  }
  return _mm256_add_epi32(l[0], l[1]);
}

// y[r] = row r times one token x, for R (even) whole rows of nb blocks.
template <DType T, int R, bool kVnni>
HWY_INLINE void DotRowsK4Pairs(const uint8_t* const* rows, size_t nb, const ActBlock256* x,
                               float* y) {
  static_assert(kK4RowPairs<T> && R % 2 == 0);
  constexpr size_t kBlockBytes = IntBlockBytes<T>();
  __m256 acc[R], accm[R / 2];  // accm[p]: row 2p's four mins lanes, then row 2p + 1's
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (int p = 0; p < R / 2; ++p) accm[p] = _mm256_setzero_ps();
  for (size_t b = 0; b < nb; ++b) {
    const ActBlock256& a = x[b];
    const __m128 dx = _mm_set1_ps(a.d);
    const __m256i psums =
        _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(a.psums)));
#pragma GCC unroll 2
    for (int p = 0; p < R / 2; ++p) {
      const uint8_t* blk[2] = {rows[2 * p] + b * kBlockBytes, rows[2 * p + 1] + b * kBlockBytes};
      for (const uint8_t* k : blk)
        for (size_t o = 0; o < kBlockBytes; o += 64) PrefetchRow(k + kIntPrefetchAhead<T> + o);
      // d dx, dm dx of both rows from one conversion: lanes dA dmA dB dmB.
      int32_t d_b;
      std::memcpy(&d_b, blk[1], 4);
      const __m256 sdx = _mm256_castps128_ps256(
          _mm_mul_ps(_mm_cvtph_ps(_mm_insert_epi32(_mm_loadu_si32(blk[0]), d_b, 1)), dx));
      const __m256 scale[2] = {_mm256_broadcastss_ps(_mm256_castps256_ps128(sdx)),
                               _mm256_permutevar8x32_ps(sdx, _mm256_set1_epi32(2))};
      const __m256 scale_m =
          _mm256_permutevar8x32_ps(sdx, _mm256_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3));
      // Both rows' scales and mins from one decode.
      const __m256i sm =
          K4ScaleVector(_mm256_set_m128i(K4ScaleBytes16(blk[1]), K4ScaleBytes16(blk[0])));
      alignas(32) int32_t pairs[16];
      K4StorePairs(sm, pairs);
      accm[p] = _mm256_fmadd_ps(
          scale_m, _mm256_cvtepi32_ps(_mm256_madd_epi16(ShuffleBy(sm, kK4Mins), psums)), accm[p]);
      for (int h = 0; h < 2; ++h) {
        const __m256i lanes = K4PairRowLanes<T, kVnni>(blk[h], pairs, h, a.q);
        acc[2 * p + h] = _mm256_fmadd_ps(scale[h], _mm256_cvtepi32_ps(lanes), acc[2 * p + h]);
      }
    }
  }
  for (int p = 0; p < R / 2; ++p) FinishK4Pair(acc[2 * p], acc[2 * p + 1], accm[p], y + 2 * p);
}
