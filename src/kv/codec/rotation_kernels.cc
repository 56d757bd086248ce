// The Walsh-Hadamard transform of the layer rotation (rotation.cc), in
// Highway: every stage whose butterflies span at least one vector runs on
// whole vectors. Encoding rotates every key and value written to a page,
// attention rotates every query row and un-rotates every output row, so the
// transform runs several times per token and layer.
//
// Each output of a stage is u + v or u - v of the same two inputs whatever
// the vector width (stages within one vector pair lanes by a permute), and the stages run in the
// same order as the scalar transform: every target gives the bits of the scalar one.
#include <cstddef>

#include "kv/codec/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kv/codec/rotation_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tkv::kv::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Stages [1, len_end): butterflies of half-width len, one element at a time.
void ScalarStages(float* HWY_RESTRICT x, int n, int len_end) {
  for (int len = 1; len < len_end && len < n; len <<= 1) {
    for (int i = 0; i < n; i += 2 * len) {
      float* a = x + i;
      float* b = x + i + len;
      for (int j = 0; j < len; ++j) {
        const float u = a[j], v = b[j];
        a[j] = u + v;
        b[j] = u - v;
      }
    }
  }
}

void Fwht(float* HWY_RESTRICT x, int n) {
  const hn::ScalableTag<float> d;
  const int N = int(hn::Lanes(d));
  if (n % N != 0) return ScalarStages(x, n, n);
  // Half-widths below one vector pair lanes of one vector: lane i's partner
  // is lane i ^ len (one permute); the lower lane of a pair takes
  // x + partner, the upper one partner - x, which is the scalar u + v and
  // u - v with u the lower value.
  if (N > 1) {
    const hn::RebindToSigned<decltype(d)> di;
    const auto iota = hn::Iota(di, 0);
    for (int i = 0; i < n; i += N) {
      auto v = hn::LoadU(d, x + i);
      for (int len = 1; len < N; len <<= 1) {
        const auto lenv = hn::Set(di, len);
        const auto partner = hn::TableLookupLanes(v, hn::IndicesFromVec(d, hn::Xor(iota, lenv)));
        const auto upper = hn::RebindMask(d, hn::Ne(hn::And(iota, lenv), hn::Zero(di)));
        v = hn::IfThenElse(upper, hn::Sub(partner, v), hn::Add(v, partner));
      }
      hn::StoreU(v, d, x + i);
    }
  }
  for (int len = N; len < n; len <<= 1) {
    for (int i = 0; i < n; i += 2 * len) {
      float* HWY_RESTRICT a = x + i;
      float* HWY_RESTRICT b = x + i + len;
      for (int j = 0; j < len; j += N) {
        const auto u = hn::LoadU(d, a + j), v = hn::LoadU(d, b + j);
        hn::StoreU(hn::Add(u, v), d, a + j);
        hn::StoreU(hn::Sub(u, v), d, b + j);
      }
    }
  }
}

}  // namespace tkv::kv::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tkv::kv::kernels {

HWY_EXPORT(Fwht);

void fwht(float* x, int n) {
  HWY_DYNAMIC_DISPATCH(Fwht)(x, n);
}

}  // namespace tkv::kv::kernels
#endif  // HWY_ONCE
