// The f16 -> f32 table of the AVX-512 matvec kernels (see kernels.h).
#include <cstdint>

#include "common/f16.h"
#include "tensor/kernels/kernels.h"

namespace tkv::kernels {

const float* f16_table() {
  static const float* const table = [] {
    static float t[65536];
    for (uint32_t h = 0; h < 65536; ++h) t[h] = f16_to_f32(uint16_t(h));
    return t;
  }();
  return table;
}

}  // namespace tkv::kernels
