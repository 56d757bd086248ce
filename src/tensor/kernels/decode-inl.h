// Per-type block decoders for the Highway kernels: each turns one block of
// tensor/blocks.h into f32 vectors in registers, with exactly the values of
// dequantize_row_ref (every product of a scale and a quant fits the 24-bit f32
// significand, so it is exact, and at most one rounding follows, as in ggml).
//
// Decoder<T>::Decode(df, block, f) calls f(i, w) for i = 0 .. kValues/N - 1
// in order, where w holds values [i*N, i*N + N) and N = Lanes(df) <= 16. N
// divides 16, so one vector never straddles a 16-value scale group: its
// scale is a broadcast. The calls are meant to be inlined into the consumer
// (a dot product for matvec, a store for dequantization).
//
// Per-target include guard (Highway's -inl.h convention): this file is
// compiled once per SIMD target by the .cc files that include it.
#if defined(TKV_TENSOR_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_TENSOR_DECODE_INL_H_
#undef TKV_TENSOR_DECODE_INL_H_
#else
#define TKV_TENSOR_DECODE_INL_H_
#endif

#include <cstring>

#include "common/f16.h"
#include "hwy/highway.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"

// Intrinsics (F16C, AVX-512) come from Highway's x86 op headers, which
// include <immintrin.h> inside their diagnostics-off region; including it
// here first would re-enable GCC 12's spurious -Wmaybe-uninitialized.

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using DI = hn::RebindToSigned<DF>;
using VI = hn::Vec<DI>;
using DU8 = hn::Rebind<uint8_t, DF>;  // N bytes, one per f32 lane
using DI8 = hn::Rebind<int8_t, DF>;
inline constexpr size_t kLanes = hn::MaxLanes(DF());
// HWY_SCALAR (the fallback target GCC < 12.3 gets instead of EMU128) has 1 lane.
static_assert(16 % kLanes == 0, "decoders assume 1, 2, 4, 8 or 16 f32 lanes");

// Scalar f16 -> f32 for block scales: one F16C instruction where the target
// has it, else the exact bit manipulation of common/f16.h.
HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// N bytes at p, zero-extended to i32 lanes.
HWY_INLINE VI BytesU(const uint8_t* p) {
  return hn::PromoteTo(DI(), hn::LoadU(DU8(), p));
}
// Low (high = false) or high nibbles of N bytes at p, as i32 lanes.
HWY_INLINE VI Nibbles(const uint8_t* p, bool high) {
  const VI b = BytesU(p);
  return high ? hn::ShiftRight<4>(b) : hn::And(b, hn::Set(DI(), 15));
}
// 2-bit field at bit `shift` of N bytes at p.
HWY_INLINE VI Crumbs(const uint8_t* p, int shift) {
  return hn::And(hn::ShiftRightSame(BytesU(p), shift), hn::Set(DI(), 3));
}
HWY_INLINE VF ToF(VI v) {
  return hn::ConvertTo(DF(), v);
}

// The levels lut[nibble] (a 16-entry int8 table: kIQ4NLValues,
// kMXFP4Values) of the low or high nibbles of N bytes at p, as f32.
HWY_INLINE VF NibbleLevels(const int8_t* lut, const uint8_t* p, bool high) {
#if HWY_TARGET == HWY_SCALAR
  return hn::Set(DF(), float(lut[high ? (p[0] >> 4) : (p[0] & 15)]));
#else
  const hn::Full128<uint8_t> d16;
  const auto table = hn::LoadU(d16, reinterpret_cast<const uint8_t*>(lut));
  auto idx = hn::LoadU(DU8(), p);
  idx = high ? hn::ShiftRight<4>(idx) : hn::And(idx, hn::Set(DU8(), 15));
  const auto levels = hn::BitCast(DI8(), hn::TableLookupBytes(table, idx));
  return ToF(hn::PromoteTo(DI(), levels));
#endif
}

// y = q * vd + offset for the 32 4-bit codes of a Q4_0/Q4_1 block's qs.
template <class F>
HWY_INLINE void DecodeNibbles(const uint8_t* qs, VF vd, VF offset, const F& f) {
  for (size_t i = 0; i < 32 / kLanes; ++i) {
    const size_t v0 = i * kLanes;
    f(i, hn::MulAdd(ToF(Nibbles(qs + v0 % 16, v0 >= 16)), vd, offset));
  }
}

template <DType T>
struct Decoder;

template <>
struct Decoder<DType::Q4_0> {
  using Block = BlockQ4_0;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    const float d = HalfAt(p);
    // d * q - 8d == d * (q - 8) exactly: both products fit in 24 bits.
    DecodeNibbles(p + offsetof(Block, qs), hn::Set(DF(), d), hn::Set(DF(), -8.0f * d), f);
  }
};

template <>
struct Decoder<DType::Q4_1> {
  using Block = BlockQ4_1;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    DecodeNibbles(p + offsetof(Block, qs), hn::Set(DF(), HalfAt(p)), hn::Set(DF(), HalfAt(p + 2)),
                  f);
  }
};

// Fifth bits of values v0 .. v0 + N - 1 of a Q5 block (bit v of qh), times 16.
HWY_INLINE VI FifthBits(uint32_t qh, size_t v0) {
  const DI di;
  const VI shift = hn::Add(hn::Iota(di, 0), hn::Set(di, int32_t(v0)));
  const VI bits = hn::BitCast(di, hn::Shr(hn::Set(hn::RebindToUnsigned<DI>(), qh),
                                          hn::BitCast(hn::RebindToUnsigned<DI>(), shift)));
  return hn::ShiftLeft<4>(hn::And(bits, hn::Set(di, 1)));
}

// y = q * vd + offset for the 32 5-bit codes of a Q5_0/Q5_1 block at p.
template <class Block, class F>
HWY_INLINE void DecodeQ5(const uint8_t* p, VF vd, VF offset, const F& f) {
  uint32_t qh;
  std::memcpy(&qh, p + offsetof(Block, qh), 4);
  const uint8_t* qs = p + offsetof(Block, qs);
  for (size_t i = 0; i < 32 / kLanes; ++i) {
    const size_t v0 = i * kLanes;
    const VI q = hn::Or(Nibbles(qs + v0 % 16, v0 >= 16), FifthBits(qh, v0));
    f(i, hn::MulAdd(ToF(q), vd, offset));
  }
}

template <>
struct Decoder<DType::Q5_0> {
  using Block = BlockQ5_0;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    const float d = HalfAt(p);
    DecodeQ5<Block>(p, hn::Set(DF(), d), hn::Set(DF(), -16.0f * d), f);
  }
};

template <>
struct Decoder<DType::Q5_1> {
  using Block = BlockQ5_1;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    DecodeQ5<Block>(p, hn::Set(DF(), HalfAt(p)), hn::Set(DF(), HalfAt(p + 2)), f);
  }
};

template <>
struct Decoder<DType::Q8_0> {
  using Block = BlockQ8_0;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    const VF vd = hn::Set(DF(), HalfAt(p));
    const int8_t* qs = reinterpret_cast<const int8_t*>(p + offsetof(Block, qs));
    for (size_t i = 0; i < 32 / kLanes; ++i) {
      const VI q = hn::PromoteTo(DI(), hn::LoadU(DI8(), qs + i * kLanes));
      f(i, hn::Mul(ToF(q), vd));
    }
  }
};

// A 32-value block of 4-bit indexes into `levels`, laid out as Q4_0's
// nibbles (qs: the block's 16 bytes), times one scale.
template <class F>
HWY_INLINE void DecodeNibbleLevels(const int8_t* levels, float scale, const uint8_t* qs,
                                   const F& f) {
  const VF vd = hn::Set(DF(), scale);
  for (size_t i = 0; i < 32 / kLanes; ++i) {
    const size_t v0 = i * kLanes;
    f(i, hn::Mul(vd, NibbleLevels(levels, qs + v0 % 16, v0 >= 16)));
  }
}

template <>
struct Decoder<DType::IQ4_NL> {
  using Block = BlockIQ4_NL;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    DecodeNibbleLevels(kIQ4NLValues, HalfAt(p), p + offsetof(Block, qs), f);
  }
};

// The E8M0 half-scale times the doubled E2M1 levels: both factors are
// powers of two times small integers, so every product is exact, as in
// ggml's dequantize_row_mxfp4.
template <>
struct Decoder<DType::MXFP4> {
  using Block = BlockMXFP4;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    DecodeNibbleLevels(kMXFP4Values, kE8M0HalfScales[p[0]], p + offsetof(Block, qs), f);
  }
};

template <>
struct Decoder<DType::Q2_K> {
  using Block = BlockQ2_K;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    const Block* b = reinterpret_cast<const Block*>(p);
    const float d = HalfAt(p + offsetof(Block, d)), dmin = HalfAt(p + offsetof(Block, dmin));
    for (size_t i = 0; i < kQK / kLanes; ++i) {
      const size_t v0 = i * kLanes, h = v0 / 128, j = (v0 % 128) / 32, l = v0 % 32;
      const uint8_t sc = b->scales[8 * h + 2 * j + l / 16];
      const VF dl = hn::Set(DF(), d * float(sc & 0xF));
      const VF ml = hn::Set(DF(), -(dmin * float(sc >> 4)));
      f(i, hn::MulAdd(ToF(Crumbs(b->qs + 32 * h + l, int(2 * j))), dl, ml));
    }
  }
};

template <>
struct Decoder<DType::Q3_K> {
  using Block = BlockQ3_K;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    const Block* b = reinterpret_cast<const Block*>(p);
    const float d = HalfAt(p + offsetof(Block, d));
    float dl[16];
    for (int g = 0; g < 16; ++g) {
      const int low = g < 8 ? (b->scales[g] & 0xF) : (b->scales[g - 8] >> 4);
      const int high = (b->scales[8 + g % 4] >> (2 * (g / 4))) & 3;
      dl[g] = d * float((low | (high << 4)) - 32);
    }
    const DI di;
    for (size_t i = 0; i < kQK / kLanes; ++i) {
      const size_t v0 = i * kLanes, h = v0 / 128, j = (v0 % 128) / 32, l = v0 % 32;
      const VI low = Crumbs(b->qs + 32 * h + l, int(2 * j));
      const VI hbit =
          hn::And(hn::ShiftRightSame(BytesU(b->hmask + l), int(v0 / 32)), hn::Set(di, 1));
      // q = low - 4 + 4 * hbit, in [-4, 3].
      const VI q = hn::Add(low, hn::Sub(hn::ShiftLeft<2>(hbit), hn::Set(di, 4)));
      f(i, hn::Mul(ToF(q), hn::Set(DF(), dl[8 * h + 2 * j + l / 16])));
    }
  }
};

// Scale and min of the 32-value groups of Q4_K / Q5_K, in f32.
HWY_INLINE void K4Scales(const uint8_t* p, float* dl, float* ml) {
  const float d = HalfAt(p), dmin = HalfAt(p + 2);
  const uint8_t* s = p + 4;
  for (int g = 0; g < 8; ++g) {
    uint8_t sc, m;
    k4_scale_min(g, s, &sc, &m);
    dl[g] = d * float(sc);
    ml[g] = -(dmin * float(m));
  }
}

template <>
struct Decoder<DType::Q4_K> {
  using Block = BlockQ4_K;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    float dl[8], ml[8];
    K4Scales(p, dl, ml);
    const uint8_t* qs = p + offsetof(Block, qs);
    for (size_t i = 0; i < kQK / kLanes; ++i) {
      const size_t v0 = i * kLanes, g = v0 / 32;
      const VI q = Nibbles(qs + 32 * (g / 2) + v0 % 32, g & 1);
      f(i, hn::MulAdd(ToF(q), hn::Set(DF(), dl[g]), hn::Set(DF(), ml[g])));
    }
  }
};

template <>
struct Decoder<DType::Q5_K> {
  using Block = BlockQ5_K;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    float dl[8], ml[8];
    K4Scales(p, dl, ml);
    const uint8_t* qs = p + offsetof(Block, qs);
    const uint8_t* qh = p + offsetof(Block, qh);
    const DI di;
    for (size_t i = 0; i < kQK / kLanes; ++i) {
      const size_t v0 = i * kLanes, g = v0 / 32;
      const VI hbit = hn::And(hn::ShiftRightSame(BytesU(qh + v0 % 32), int(g)), hn::Set(di, 1));
      const VI q = hn::Or(Nibbles(qs + 32 * (g / 2) + v0 % 32, g & 1), hn::ShiftLeft<4>(hbit));
      f(i, hn::MulAdd(ToF(q), hn::Set(DF(), dl[g]), hn::Set(DF(), ml[g])));
    }
  }
};

template <>
struct Decoder<DType::Q6_K> {
  using Block = BlockQ6_K;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    const Block* b = reinterpret_cast<const Block*>(p);
    const float d = HalfAt(p + offsetof(Block, d));
    const DI di;
    for (size_t i = 0; i < kQK / kLanes; ++i) {
      const size_t v0 = i * kLanes, h = v0 / 128, k = (v0 % 128) / 32, l = v0 % 32;
      const VI low = Nibbles(b->ql + 64 * h + 32 * (k & 1) + l, k >= 2);
      const VI high = Crumbs(b->qh + 32 * h + l, int(2 * k));
      const VI q = hn::Sub(hn::Or(low, hn::ShiftLeft<4>(high)), hn::Set(di, 32));
      const float dl = d * float(b->scales[8 * h + 2 * k + l / 16]);
      f(i, hn::Mul(ToF(q), hn::Set(DF(), dl)));
    }
  }
};

template <>
struct Decoder<DType::IQ4_XS> {
  using Block = BlockIQ4_XS;
  template <class F>
  static HWY_INLINE void Decode(const uint8_t* p, const F& f) {
    const Block* b = reinterpret_cast<const Block*>(p);
    const float d = HalfAt(p);
    for (size_t i = 0; i < kQK / kLanes; ++i) {
      const size_t v0 = i * kLanes, g = v0 / 32, l = v0 % 32;
      const int ls =
          ((b->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((b->scales_h >> (2 * g)) & 3) << 4);
      const VF dl = hn::Set(DF(), d * float(ls - 32));
      f(i, hn::Mul(dl, NibbleLevels(kIQ4NLValues, b->qs + 16 * g + l % 16, l >= 16)));
    }
  }
};

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_DECODE_INL_H_
