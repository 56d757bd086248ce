#include "tensor_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "common/f16.h"
#include "common/thread_pool.h"
#include "hwy/targets.h"
#include "tensor/blocks.h"
#include "tensor/kernels/act_blocks.h"
#include "tensor/matmul.h"
#include "tensor/reference.h"

namespace tkv::test {

std::vector<DType> supported_types() {
  std::vector<DType> out;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto tr = dtype_traits(id);
    if (tr && tr->supported) out.push_back(tr->type);
  }
  return out;
}

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const auto x = gaussian(static_cast<size_t>(rows * cols), seed);
  const size_t rb = row_bytes(type, cols);
  std::vector<uint8_t> w(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    quantize_row(type, x.data() + r * cols, w.data() + static_cast<size_t>(r) * rb, cols);
  return w;
}

namespace {

// Offsets of the f16 fields inside one block of each type.
std::vector<size_t> half_fields(DType type) {
  switch (type) {
    case DType::Q4_0:
      return {offsetof(BlockQ4_0, d)};
    case DType::Q4_1:
      return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::Q5_0:
      return {offsetof(BlockQ5_0, d)};
    case DType::Q5_1:
      return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::Q8_0:
      return {offsetof(BlockQ8_0, d)};
    case DType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case DType::Q4_K:
      return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::Q5_K:
      return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    case DType::IQ4_NL:
      return {offsetof(BlockIQ4_NL, d)};
    case DType::IQ4_XS:
      return {offsetof(BlockIQ4_XS, d)};
    default:
      return {};
  }
}

}  // namespace

std::vector<uint8_t> random_block_bytes(DType type, int64_t rows, int64_t cols, uint32_t seed,
                                        bool pow2_scales) {
  const auto& tr = traits(type);
  const size_t total = row_bytes(type, cols) * static_cast<size_t>(rows);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.5f, 0.5f);
  std::vector<uint8_t> w(total);
  if (type == DType::F32 || type == DType::F16 || type == DType::BF16) {
    // Finite values only: random bit patterns would include NaN/Inf.
    const auto x = gaussian(static_cast<size_t>(rows * cols), seed);
    for (int64_t r = 0; r < rows; ++r)
      quantize_row(type, x.data() + r * cols,
                   w.data() + static_cast<size_t>(r) * row_bytes(type, cols), cols);
    return w;
  }
  for (auto& b : w) b = uint8_t(byte(rng));
  if (type == DType::MXFP4) {
    // The E8M0 byte: half-scales 2^-8 .. 2^0 (weights up to +-12), or
    // 2^-3 / 2^-4 with pow2_scales (E8M0 has no sign).
    std::uniform_int_distribution<int> exponent(120, 128);
    for (size_t blk = 0; blk < total / tr.block_bytes; ++blk)
      w[blk * tr.block_bytes + offsetof(BlockMXFP4, e)] =
          uint8_t(pow2_scales ? ((byte(rng) & 1) ? 125 : 124) : exponent(rng));
    return w;
  }
  const auto fields = half_fields(type);
  for (size_t blk = 0; blk < total / tr.block_bytes; ++blk) {
    for (size_t off : fields) {
      const float v = pow2_scales
                          ? ((byte(rng) & 1) ? 0.125f : 0.0625f) * ((byte(rng) & 2) ? -1 : 1)
                          : scale(rng);
      const uint16_t h = f32_to_f16(v);
      std::memcpy(w.data() + blk * tr.block_bytes + off, &h, 2);
    }
  }
  return w;
}

int64_t act_block_values(DType type) {
  switch (kernels::act_format(type)) {
    case kernels::ActFormat::kQ8x32:
      return 32;
    case kernels::ActFormat::kQ8x256:
      return 256;
    case kernels::ActFormat::kNone:
      break;
  }
  return 0;
}

double abs_dot(const float* w, const float* x, int64_t n) {
  double s = 0;
  for (int64_t k = 0; k < n; ++k) s += std::fabs(double(w[k]) * double(x[k]));
  return s;
}

bool same_value(float a, float b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}

FloatProduct make_float_product(DType type, int64_t rows, int64_t cols, int64_t n, uint32_t seed) {
  return {type,
          rows,
          cols,
          n,
          random_weights(type, rows, cols, seed),
          gaussian(size_t(n * cols), seed + 1)};
}

FloatProduct first_tokens(const FloatProduct& p, int64_t n) {
  FloatProduct some = p;
  some.n = n;
  some.x.resize(size_t(n * p.cols));
  return some;
}

std::vector<float> run_float_matmul(const FloatProduct& p, int threads) {
  ThreadPool pool(threads);
  const WeightMatrix w = make_weight(p.type, p.w.data(), p.rows, p.cols, "product");
  std::vector<float> y(size_t(p.rows * p.n), -1.0f);
  matmul(w, p.x.data(), p.n, y.data(), pool, MatmulKernel::kFloat);
  return y;
}

double max_relative_error(const FloatProduct& p, const std::vector<float>& y,
                          const std::vector<float>& x_exact) {
  const std::vector<float>& xe = x_exact.empty() ? p.x : x_exact;
  std::vector<float> want(size_t(p.rows * p.n)), row(size_t(p.cols));
  matmul_ref(p.type, p.w.data(), p.rows, p.cols, xe.data(), p.n, want.data());
  const size_t rb = row_bytes(p.type, p.cols);
  double worst = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    dequantize_row_ref(p.type, p.w.data() + size_t(r) * rb, row.data(), p.cols);
    for (int64_t i = 0; i < p.n; ++i) {
      const double mag = abs_dot(row.data(), p.x.data() + i * p.cols, p.cols) + 1e-30;
      const size_t at = size_t(i * p.rows + r);
      worst = std::max(worst, std::fabs(double(y[at]) - double(want[at])) / mag);
    }
  }
  return worst;
}

}  // namespace tkv::test
