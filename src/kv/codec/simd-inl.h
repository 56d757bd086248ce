// Highway helpers shared by the codec kernels (per-target header: included
// once per target through foreach_target, hence the toggle guard).
#if defined(TKV_KV_CODEC_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_KV_CODEC_SIMD_INL_H_
#undef TKV_KV_CODEC_SIMD_INL_H_
#else
#define TKV_KV_CODEC_SIMD_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Calls fn(tag) with the widest float tag whose lane count divides `dim`, so
// that a head vector is a whole number of vectors (head_dim 8 on AVX-512 uses
// 8-lane vectors instead of a masked tail).
template <class Fn>
HWY_INLINE void WithTagDividing(size_t dim, const Fn& fn) {
  const hn::ScalableTag<float> dfull;
  const hn::CappedTag<float, 8> d8;
  const hn::CappedTag<float, 4> d4;
  const hn::CappedTag<float, 1> d1;
  if (dim % hn::Lanes(dfull) == 0) return fn(dfull);
  if (dim % hn::Lanes(d8) == 0) return fn(d8);
  if (dim % hn::Lanes(d4) == 0) return fn(d4);
  return fn(d1);
}

#if HWY_TARGET == HWY_SCALAR
// One lane per vector: the sums are the lanes themselves.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Reduce4(D, V a0, V a1, V a2, V a3, float* HWY_RESTRICT out) {
  out[0] = hn::GetLane(a0);
  out[1] = hn::GetLane(a1);
  out[2] = hn::GetLane(a2);
  out[3] = hn::GetLane(a3);
}
#else
// Adds the 128-bit blocks of v together: 4 lanes.
template <class D>
HWY_INLINE hn::Vec<hn::CappedTag<float, 4>> SumBlocks(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(D()) > 4) {
    const hn::Half<D> dh;
    return SumBlocks(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  } else {
    (void)d;
    return v;
  }
}

// out[j] = sum of the lanes of a_j, four horizontal sums for the price of
// about one (two interleave rounds, then the blocks are added).
template <class D, class V = hn::Vec<D>>
HWY_INLINE void Reduce4(D d, V a0, V a1, V a2, V a3, float* HWY_RESTRICT out) {
  static_assert(hn::MaxLanes(D()) >= 4, "Reduce4 needs at least 4 lanes");
  const hn::Repartition<uint64_t, D> du64;
  const V t0 = hn::Add(hn::InterleaveLower(d, a0, a1), hn::InterleaveUpper(d, a0, a1));
  const V t1 = hn::Add(hn::InterleaveLower(d, a2, a3), hn::InterleaveUpper(d, a2, a3));
  const auto w0 = hn::BitCast(du64, t0), w1 = hn::BitCast(du64, t1);
  const V u = hn::Add(hn::BitCast(d, hn::InterleaveLower(du64, w0, w1)),
                      hn::BitCast(d, hn::InterleaveUpper(du64, w0, w1)));
  hn::StoreU(SumBlocks(d, u), hn::CappedTag<float, 4>(), out);
}
#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace tkv::kv::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TKV_KV_CODEC_SIMD_INL_H_
