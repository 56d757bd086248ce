// Weight blocks of the x86 integer-dot kernels in canonical form
// (intdot-inl.h's top comment): the per-type unpacking of a block into its
// integer weights, int16 scales, d and mins, and the chunk products' u8 x s8
// operands. Included by intdot-inl.h inside its x86 section, once per
// target (no include guard of its own).

// 32 4-bit codes of a Q4_0-layout qs: values 0..15 low nibbles, 16..31 high.
// The 16 bytes come into both halves by a broadcast load (a load port, no
// shuffle) and one shift moves the high half's nibbles down: a masked shift
// with AVX-512 (BW, VL), else a per-lane shift by 0 or 4 (vpsrlvd: within
// a 32-bit lane a byte's high nibble lands in its own low bits, as with
// vpsrlw). One vector operation fewer than a shift and an insert.
HWY_INLINE __m256i Nibbles32(const uint8_t* qs) {
  const __m256i b =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
#if HWY_TARGET <= HWY_AVX3
  return _mm256_and_si256(_mm256_mask_srli_epi16(b, 0xFF00, b, 4), _mm256_set1_epi8(15));
#else
  return _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)),
                          _mm256_set1_epi8(15));
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

// Q3KScales in a vector: the 16 signed 6-bit group scales of a q3_K block
// from its 12 scale bytes (read as 8 + 4, never past them).
HWY_INLINE __m128i Q3KScaleVector(const uint8_t* scales) {
  const __m128i lo8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales));
  int32_t h32;
  std::memcpy(&h32, scales + 8, 4);
  // Groups 0-7: the low nibbles of bytes 0-7; 8-15: their high nibbles.
  const __m128i low =
      _mm_and_si128(_mm_unpacklo_epi64(lo8, _mm_srli_epi16(lo8, 4)), _mm_set1_epi8(15));
  // Group g's top two bits: bits 2 (g / 4) of byte 8 + g % 4.
  const __m128i high = _mm_and_si128(
      _mm_srlv_epi32(_mm_set1_epi32(h32), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
}

// A block's 16 int8 group scales as each 32-value chunk c's multiplier:
// int16 lanes 0..7 = s[2c], 8..15 = s[2c + 1] (its two 16-value groups).
// One sign extension and two lane copies, then one vpshufb per chunk (one
// scalar load, move and broadcast per group instead took the vector ports
// more than the chunk products did).
alignas(32) inline constexpr int8_t kGroupScaleWords[4][32] = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
     2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
    {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5,
     6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
    {8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,  8,  9,
     10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
    {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13,
     14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15}};
HWY_INLINE void GroupScales(__m128i s, __m256i* out) {
  const __m256i s16 = _mm256_cvtepi8_epi16(s);
  const __m256i half[2] = {_mm256_permute2x128_si256(s16, s16, 0x00),   // s0..s7 twice
                           _mm256_permute2x128_si256(s16, s16, 0x11)};  // s8..s15 twice
  for (int c = 0; c < 8; ++c)
    out[c] = _mm256_shuffle_epi8(half[c / 4], Load256(kGroupScaleWords[c % 4]));
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
  __m128 dd;       // q4_K, q5_K: d and dm in lanes 0 and 1 (one conversion)
  __m256i mins;    // q2_K: 16 int16 mins; q4_K, q5_K: 8 in the low half
};

template <DType T>
using UnpackedFor = UnpackedBlock<IntGemmTraits<T>::kChunks, IntGemmTraits<T>::kSigned>;

// A dword in every lane by vpbroadcastd from memory (a load port only). In
// assembly: from a plain load of a value the compiler has just stored it
// would extract the dword in registers instead (two shuffles and a
// broadcast).
HWY_INLINE __m256i BroadcastFromMemory(const int32_t& v) {
  __m256i r;
  __asm__("vpbroadcastd %1, %0" : "=x"(r) : "m"(v));
  return r;
}

// K4ScaleWords in vector registers, two blocks at once: each 128-bit half
// of x holds a q4_K / q5_K block's 12 scale bytes u0 u1 u2 (4 each; and 4
// bytes of the quants after them, unused) and becomes bytes 0..7 = sc[0..7],
// 8..15 = m[0..7]. Ten vector operations for two blocks where the scalar
// words take some twenty integer ones for one: with 256-bit vectors the
// kernel is bound by the ports that vector and integer operations share.
HWY_INLINE __m256i K4ScaleVector(__m256i x) {
  const __m256i y = _mm256_shuffle_epi8(
      x, _mm256_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10,
                          11, 4, 5, 6, 7, 8, 9, 10, 11));  // u0 u2 u1 u2
  // sc[0..3] = u0 & 63, m[0..3] = u1 & 63.
  const __m256i low = _mm256_and_si256(y, _mm256_set1_epi64x(0x3f3f3f3f));
  // The high halves' low nibbles: u2's low nibbles for sc, high for m.
  const __m256i nib =
      _mm256_and_si256(_mm256_srlv_epi32(y, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                       _mm256_set1_epi64x(0x0f0f0f0f00000000));
  // Their top two bits: the top bits of u0 (sc) and u1 (m), moved beside.
  const __m256i top = _mm256_and_si256(_mm256_srli_epi16(_mm256_bslli_epi128(y, 4), 2),
                                       _mm256_set1_epi64x(0x3030303000000000));
  return _mm256_or_si256(_mm256_or_si256(low, nib), top);
}
// The 16 scale bytes of a block at blk (q4_K and q5_K alike: offset 4).
HWY_INLINE __m128i K4ScaleBytes16(const uint8_t* blk) {
  static_assert(offsetof(BlockQ4_K, scales) == 4 && offsetof(BlockQ5_K, scales) == 4);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 4));
}

// vpshufb indices on K4ScaleVector's result: chunk scales 0-3 (kK4Scales03)
// or 4-7 as dwords of two int16 copies, and the 8 mins as int16.
inline constexpr int8_t kZ = -1;  // vpshufb: a zero byte
alignas(32) inline constexpr int8_t kK4Scales03[32] = {0,  kZ, 0,  kZ, 1,  kZ, 1,  kZ, 2,  kZ, 2,
                                                       kZ, 3,  kZ, 3,  kZ, 0,  kZ, 0,  kZ, 1,  kZ,
                                                       1,  kZ, 2,  kZ, 2,  kZ, 3,  kZ, 3,  kZ};
alignas(32) inline constexpr int8_t kK4Scales47[32] = {4,  kZ, 4,  kZ, 5,  kZ, 5,  kZ, 6,  kZ, 6,
                                                       kZ, 7,  kZ, 7,  kZ, 4,  kZ, 4,  kZ, 5,  kZ,
                                                       5,  kZ, 6,  kZ, 6,  kZ, 7,  kZ, 7,  kZ};
alignas(32) inline constexpr int8_t kK4Mins[32] = {8,  kZ, 9,  kZ, 10, kZ, 11, kZ, 12, kZ, 13,
                                                   kZ, 14, kZ, 15, kZ, 8,  kZ, 9,  kZ, 10, kZ,
                                                   11, kZ, 12, kZ, 13, kZ, 14, kZ, 15, kZ};
HWY_INLINE __m256i ShuffleBy(__m256i v, const int8_t* idx) {
  return _mm256_shuffle_epi8(v, Load256(idx));
}

// The scale pairs of two blocks A and B (K4ScaleVector's halves) stored as
// dwords: pairs[0..3] A's scales 0-3, [4..7] B's, [8..11] A's 4-7,
// [12..15] B's; chunk c's scale of block h (0: A) is at K4PairAt(h, c).
// Each is then broadcast by a load (vpbroadcastd from memory uses a load
// port only, where a vpshufb per chunk took the shuffle port that the
// unpacking and the conversions also need).
HWY_INLINE void K4StorePairs(__m256i sm, int32_t* pairs) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(pairs), ShuffleBy(sm, kK4Scales03));
  _mm256_store_si256(reinterpret_cast<__m256i*>(pairs + 8), ShuffleBy(sm, kK4Scales47));
}
constexpr int K4PairAt(int h, int c) {
  return 8 * (c / 4) + 4 * h + c % 4;
}

// vpshufb indices on K4ScaleVector's result with one row in both halves:
// chunk c's scale (byte c) in every int16 lane of row c.
constexpr std::array<std::array<int8_t, 32>, 8> K4ChunkScaleIndices() {
  std::array<std::array<int8_t, 32>, 8> idx{};
  for (int c = 0; c < 8; ++c)
    for (int i = 0; i < 32; ++i) idx[size_t(c)][size_t(i)] = i % 2 ? kZ : int8_t(c);
  return idx;
}
alignas(32) inline constexpr auto kK4ChunkScale = K4ChunkScaleIndices();

// A q4_K / q5_K block's d and dmin into u (one conversion), its 8 mins
// into u.mins (int16 lanes 0..7) and each chunk c's scale into every int16
// lane of u.s[c].
template <class Unpacked>
HWY_INLINE void K4Header(const uint8_t* blk, Unpacked& u) {
  u.dd = _mm_cvtph_ps(_mm_loadu_si32(blk));
  u.d = _mm_cvtss_f32(u.dd);
  u.dm = _mm_cvtss_f32(_mm_movehdup_ps(u.dd));
  const __m256i sm = K4ScaleVector(_mm256_broadcastsi128_si256(K4ScaleBytes16(blk)));
  u.mins = _mm256_zextsi128_si256(_mm256_castsi256_si128(ShuffleBy(sm, kK4Mins)));
  for (int c = 0; c < 8; ++c) u.s[c] = ShuffleBy(sm, kK4ChunkScale[size_t(c)].data());
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

// Chunk c of a q4_K (q5_K) block from its four 32-byte quant loads (and
// q5_K's 32 high-bit bytes): the low nibbles for even c, the high for odd.
template <DType T>
HWY_INLINE __m256i K4Chunk(const __m256i* bits, __m256i hbits, int c) {
  const __m256i b = bits[c / 2];
  __m256i w = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(b, 4) : b, _mm256_set1_epi8(15));
  if constexpr (T == DType::Q5_K)
    w = _mm256_or_si256(
        w,
        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, c), _mm256_set1_epi8(1)), 4));
  return w;
}

// The block's loads K4Chunk takes.
template <DType T>
HWY_INLINE void K4Loads(const uint8_t* blk, __m256i* bits, __m256i* hbits) {
  using Block = std::conditional_t<T == DType::Q5_K, BlockQ5_K, BlockQ4_K>;
  for (int j = 0; j < 4; ++j) bits[j] = Load256(blk + offsetof(Block, qs) + 32 * j);
  *hbits = T == DType::Q5_K ? Load256(blk + offsetof(BlockQ5_K, qh)) : _mm256_setzero_si256();
}

// The 8 chunks of 4 (5) bits of a q4_K (q5_K) block into w.
template <DType T>
HWY_INLINE void K4Quants(const uint8_t* blk, __m256i* w) {
  __m256i bits[4], hbits;
  K4Loads<T>(blk, bits, &hbits);
  for (int c = 0; c < 8; ++c) w[c] = K4Chunk<T>(bits, hbits, c);
}

// UnpackBlock of q4_K and q5_K: 8 chunks of 4 (5) bits, 8 scales, 8 mins.
template <DType T>
HWY_INLINE void UnpackK4Block(const uint8_t* blk, UnpackedFor<T>& u) {
  K4Header(blk, u);
  K4Quants<T>(blk, u.w);
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
    }
  }
  GroupScales(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales)), u.s);
}

// UnpackBlock of q2_K and q3_K: 2-bit quants (q3_K: and a high bit), 16
// scales (q2_K: and 16 mins).
template <DType T, bool kOffsetForm>
HWY_INLINE void UnpackK23Block(const uint8_t* blk, UnpackedFor<T>& u) {
  constexpr bool kThree = T == DType::Q3_K;
  using Block = std::conditional_t<kThree, BlockQ3_K, BlockQ2_K>;
  const Block* w = reinterpret_cast<const Block*>(blk);
  u.d = HalfAt(blk + offsetof(Block, d));
  __m128i sc;
  __m256i hmask = _mm256_setzero_si256();
  if constexpr (kThree) {
    sc = Q3KScaleVector(w->scales);
    hmask = Load256(w->hmask);
  } else {
    u.dm = HalfAt(blk + offsetof(BlockQ2_K, dmin));
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w->scales));
    sc = _mm_and_si128(raw, _mm_set1_epi8(15));
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
    }
  }
  GroupScales(sc, u.s);
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
