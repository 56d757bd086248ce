// Entry point of kernels/matvec_float_batch.cc (see tensor/matmul.h,
// matvec_batch): rows [r0, r1) of n matvecs over float weights at once.
#pragma once

#include <cstdint>

#include "tensor/kernels/kernels.h"

namespace tkv::kernels {

// y[t * y_stride + r] = <row r, x + t * a.cols> for t < n, r in [r0, r1),
// each (row, token) with exactly matvec_rows_float's instruction sequence.
// a.x is token 0, a.y its output row.
void matvec_rows_float_batch(const MatvecArgs& a, int64_t n, int64_t y_stride, int64_t r0,
                             int64_t r1);

}  // namespace tkv::kernels
