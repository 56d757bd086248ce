// The integer-dot kernels of every target without the x86 code (SSE4,
// EMU128/SCALAR, NEON, SVE): the portable scalar version of intdot-inl.h's
// lane layout, whole rows at a time. Included by intdot-inl.h, once per
// target (no include guard of its own).

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

// Adds scale * (lane sums of w[0..31] x q[0..31]) to l: lane j gets the
// products of values 4j .. 4j + 3. On aarch64 NEON: with kDot one sdot
// (ARMv8.2 dotprod, whose lanes are exactly these sums) per 16 values,
// written in assembly (the build targets ARMv8.0, kDot is chosen at run
// time; the .arch it sets is a superset of the function's, and GNU as's
// `.arch_extension dotprod` is refused on an ARMv8.0 base); else vmull + two
// pairwise adds. Elsewhere plain C++.
template <bool kDot>
HWY_INLINE void AddDot32(const int8_t* w, const int8_t* q, int32_t scale, Lanes& l) {
#if HWY_ARCH_ARM_A64 && HWY_TARGET != HWY_EMU128 && HWY_TARGET != HWY_SCALAR
  int32x4_t sums[2];
  for (int h = 0; h < 2; ++h) {
    const int8x16_t wv = vld1q_s8(w + 16 * h), qv = vld1q_s8(q + 16 * h);
    if constexpr (kDot) {
      int32x4_t d = vdupq_n_s32(0);
      __asm__(".arch armv8.2-a+crypto+dotprod\n\tsdot %0.4s, %1.16b, %2.16b"
              : "+w"(d)
              : "w"(wv), "w"(qv));
      sums[h] = d;
    } else {
      const int16x8_t lo = vmull_s8(vget_low_s8(wv), vget_low_s8(qv));
      const int16x8_t hi = vmull_s8(vget_high_s8(wv), vget_high_s8(qv));
      sums[h] = vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi));
    }
  }
  int32x4_t l0 = vld1q_s32(l.v), l1 = vld1q_s32(l.v + 4);
  l0 = vmlaq_n_s32(l0, sums[0], scale);
  l1 = vmlaq_n_s32(l1, sums[1], scale);
  vst1q_s32(l.v, l0);
  vst1q_s32(l.v + 4, l1);
#else
  static_assert(!kDot);
  for (int j = 0; j < 8; ++j) {
    int32_t s = 0;
    for (int e = 4 * j; e < 4 * j + 4; ++e) s += int32_t(w[e]) * int32_t(q[e]);
    l.v[j] += scale * s;
  }
#endif
}
// The 32 4-bit codes of a Q4_0-layout qs in value order.
HWY_INLINE void Nibbles32(const uint8_t* qs, int8_t* out) {
  for (int i = 0; i < 16; ++i) out[i] = int8_t(qs[i] & 15), out[i + 16] = int8_t(qs[i] >> 4);
}

// The signed int8 weight values of a 32-value block.
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
  } else if constexpr (T == DType::MXFP4) {
    Nibbles32(p + offsetof(BlockMXFP4, qs), w);
    for (int i = 0; i < 32; ++i) w[i] = kMXFP4Values[w[i]];
  } else {
    Nibbles32(p + 2 + (T == DType::Q4_1 ? 2 : 0), w);
    if constexpr (T == DType::Q4_0)
      for (int i = 0; i < 32; ++i) w[i] = int8_t(w[i] - 8);
    if constexpr (T == DType::IQ4_NL)
      for (int i = 0; i < 32; ++i) w[i] = kIQ4NLValues[w[i]];
  }
}

template <DType T, bool kDot>
HWY_INLINE float DotRow32(const uint8_t* row, size_t block_bytes, size_t nb, const ActBlock32* x) {
  AccF acc;
  float offs = 0.0f;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = row + b * block_bytes;
    int8_t w[32];
    Unpack32<T>(blk, w);
    Lanes l{};
    AddDot32<kDot>(w, x[b].q, 1, l);
    acc.Add(Scale32<T>(blk) * x[b].d, l);
    if constexpr (T == DType::Q4_1 || T == DType::Q5_1)
      offs = offs + (HalfAt(blk + 2) * x[b].d) * float(x[b].sum);
  }
  return acc.Sum() + offs;
}

template <bool kFive, bool kDot>
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
      AddDot32<kDot>(w, x[b].q + 32 * g, sc[g], l);
      summ[g / 2] += int32_t(m[g]) * (x[b].bsums[2 * g] + x[b].bsums[2 * g + 1]);
    }
    acc.Add(HalfAt(blk) * x[b].d, l);
    const float dm = HalfAt(blk + 2) * x[b].d;
    for (int i = 0; i < 4; ++i) accm[i] = accm[i] + dm * float(summ[i]);
  }
  return acc.Sum() - ((accm[0] + accm[2]) + (accm[1] + accm[3]));
}

template <bool kDot>
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
      AddDot32<kDot>(q, x[b].q + 32 * c, 1, part);
      for (int j = 0; j < 8; ++j) l.v[j] += int32_t(w->scales[2 * c + j / 4]) * part.v[j];
    }
    acc.Add(HalfAt(reinterpret_cast<const uint8_t*>(&w->d)) * x[b].d, l);
  }
  return acc.Sum();
}

template <bool kThree, bool kDot>
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
      AddDot32<kDot>(q, x[b].q + 32 * c, 1, part);
      for (int k = 0; k < 8; ++k) l.v[k] += int32_t(sc[2 * c + k / 4]) * part.v[k];
    }
    acc.Add(HalfAt(reinterpret_cast<const uint8_t*>(&w->d)) * x[b].d, l);
    if constexpr (!kThree)
      accm.Add(HalfAt(reinterpret_cast<const uint8_t*>(&w->dmin)) * x[b].d, mins);
  }
  return kThree ? acc.Sum() : acc.Sum() - accm.Sum();
}

template <bool kDot>
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
      AddDot32<kDot>(v, x[b].q + 32 * g, ls - 32, l);
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
template <DType T, int R, int NT, bool kVnni>
HWY_INLINE void DotRowsInt(const uint8_t* const* rows, size_t b0, size_t nb, const void* const* x,
                           const float* /*dx*/, const float* /*sx*/, IntAcc* st) {
  HWY_DASSERT(b0 == 0);
  (void)b0;
  for (int i = 0; i < R * NT; ++i) {
    const int t = i % NT;
    const uint8_t* row = rows[i / NT];
    const auto* x32 = static_cast<const ActBlock32*>(x[t]);
    const auto* x256 = static_cast<const ActBlock256*>(x[t]);
    if constexpr (T == DType::Q4_K || T == DType::Q5_K) {
      st[i].y = DotRowQ45_K<T == DType::Q5_K, kVnni>(row, nb, x256);
    } else if constexpr (T == DType::IQ4_XS) {
      st[i].y = DotRowIQ4_XS<kVnni>(row, nb, x256);
    } else if constexpr (T == DType::Q2_K || T == DType::Q3_K) {
      st[i].y = DotRowQ23_K<T == DType::Q3_K, kVnni>(row, nb, x256);
    } else if constexpr (T == DType::Q6_K) {
      st[i].y = DotRowQ6_K<kVnni>(row, nb, x256);
    } else {
      st[i].y = DotRow32<T, kVnni>(row, IntBlockBytes<T>(), nb, x32);
    }
  }
}

// No offset form here (intdot_offset-inl.h is x86's): kernels_int.cc names
// it only in branches that `if constexpr` discards.
template <DType T, bool kVnni>
inline constexpr bool kOffsetMatvec = false;
template <DType T, int R, bool kVnni>
void DotRowsOffset(const uint8_t* const* rows, size_t b0, size_t b1, const kernels::ActBlock32* x,
                   IntAcc* st);
template <DType T>
inline constexpr bool kK4RowPairs = false;
template <DType T, int R, bool kVnni>
void DotRowsK4Pairs(const uint8_t* const* rows, size_t nb, const kernels::ActBlock256* x, float* y);
