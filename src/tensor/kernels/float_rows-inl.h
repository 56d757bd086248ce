// How each float weight type loads a vector of values (converted to f32)
// and one scalar at element offset k of a row: F32, F16 (F16C where the
// target has it) and BF16 (a shift). Shared by the matvec (kernels_float.cc)
// and the small-batch product (matvec_float_batch.cc), whose results must be
// bit-identical, so both read weights through exactly these conversions.
// Per-target include guard (Highway's -inl.h convention).
#if defined(TKV_TENSOR_FLOAT_ROWS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TKV_TENSOR_FLOAT_ROWS_INL_H_
#undef TKV_TENSOR_FLOAT_ROWS_INL_H_
#else
#define TKV_TENSOR_FLOAT_ROWS_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"
#include "tensor/kernels/decode-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tkv {
namespace HWY_NAMESPACE {

struct F32Row {
  static constexpr size_t kBytes = 4;
  static HWY_INLINE VF Load(const uint8_t* row, size_t k) {
    return hn::LoadU(DF(), reinterpret_cast<const float*>(row) + k);
  }
  static HWY_INLINE float At(const uint8_t* row, size_t k) {
    float v;
    std::memcpy(&v, row + 4 * k, 4);
    return v;
  }
};
struct F16Row {
  static constexpr size_t kBytes = 2;
  static HWY_INLINE VF Load(const uint8_t* row, size_t k) {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(row) + k));
  }
  static HWY_INLINE float At(const uint8_t* row, size_t k) { return HalfAt(row + 2 * k); }
};
struct BF16Row {
  static constexpr size_t kBytes = 2;
  static HWY_INLINE VF Load(const uint8_t* row, size_t k) {
    const hn::Rebind<hwy::bfloat16_t, DF> db;
    return hn::PromoteTo(DF(), hn::LoadU(db, reinterpret_cast<const hwy::bfloat16_t*>(row) + k));
  }
  static HWY_INLINE float At(const uint8_t* row, size_t k) {
    uint16_t h;
    std::memcpy(&h, row + 2 * k, 2);
    return bf16_to_f32(h);
  }
};

}  // namespace HWY_NAMESPACE
}  // namespace tkv
HWY_AFTER_NAMESPACE();

#endif  // TKV_TENSOR_FLOAT_ROWS_INL_H_
