// Activation quantization of the integer-dot kernels (act_blocks.h).
#include "tensor/kernels/act_blocks.h"

namespace tkv::kernels {

ActFormat act_format(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
      return ActFormat::kQ8x32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return ActFormat::kQ8x256;
    default:
      return ActFormat::kNone;
  }
}

size_t act_row_bytes(ActFormat format, int64_t cols) {
  switch (format) {
    case ActFormat::kQ8x32:
      return size_t(cols / 32) * sizeof(ActBlock32);
    case ActFormat::kQ8x256:
      return size_t(cols / 256) * sizeof(ActBlock256);
    case ActFormat::kNone:
      break;
  }
  return 0;
}

void quantize_act(ActFormat format, const float* x, int64_t cols, uint8_t* dst) {
  quantize_act_simd(format, x, cols, dst);
}

}  // namespace tkv::kernels
