// Public weight API (tensor/matmul.h): argument checks, the thread split, and
// the choice of kernel file per type. The arithmetic lives in tensor/kernels/.
#include "tensor/matmul.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "tensor/kernels/kernels.h"
#include "tensor/reference.h"

namespace tkv {

namespace kernels {

Family family_of(DType type) {
  switch (type) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return Family::kFloat;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::IQ4_NL:
      return Family::kQ32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return Family::kQK;
    default:
      return Family::kNone;
  }
}

}  // namespace kernels

namespace {

using kernels::Family;

// Throws unless `type` is a type we have kernels for.
const DTypeTraits& supported_traits(DType type, const char* what) {
  const auto tr = dtype_traits(uint32_t(type));
  if (!tr) fail(what, ": unknown weight type id ", uint32_t(type));
  if (!tr->supported || kernels::family_of(type) == Family::kNone) {
    std::string list;
    for (uint32_t id = 0; id < 64; ++id)
      if (const auto t = dtype_traits(id); t && t->supported) list += str(" ", t->name);
    fail(what, ": weight type ", tr->name, " is not supported (supported:", list, ")");
  }
  return traits(type);
}

kernels::DequantizeFn dequantizer(DType type) {
  switch (kernels::family_of(type)) {
    case Family::kFloat:
      return &kernels::dequantize_float;
    case Family::kQ32:
      return &kernels::dequantize_q32;
    case Family::kQK:
      return &kernels::dequantize_qk;
    case Family::kNone:
      break;
  }
  fail("internal error: no dequantizer for ", dtype_name(type));
}

using MatvecRowsFn = void (*)(const kernels::MatvecArgs&, int64_t, int64_t);
MatvecRowsFn matvec_kernel(DType type) {
  switch (kernels::family_of(type)) {
    case Family::kFloat:
      return &kernels::matvec_rows_float;
    case Family::kQ32:
      return &kernels::matvec_rows_q32;
    case Family::kQK:
      return &kernels::matvec_rows_qk;
    case Family::kNone:
      break;
  }
  fail("internal error: no matvec kernel for ", dtype_name(type));
}

void check_weight(const WeightMatrix& w) {
  TKV_CHECK(w.rows >= 0 && w.cols > 0 && (w.data != nullptr || w.rows == 0));
  TKV_CHECK(w.row_bytes == row_bytes(w.type, w.cols));
}

}  // namespace

WeightMatrix make_weight(DType type, const void* data, int64_t rows, int64_t cols,
                         const char* what) {
  const auto& tr = supported_traits(type, str("tensor ", what).c_str());
  if (rows < 0 || cols <= 0)
    fail("tensor ", what, ": bad shape ", rows, " x ", cols, " for a weight matrix");
  if (cols % tr.block_size != 0)
    fail("tensor ", what, ": ", cols, " columns is not a multiple of the ", tr.name, " block size ",
         tr.block_size);
  if (data == nullptr && rows > 0) fail("tensor ", what, ": no data");
  // Every block layout has 16-bit fields (GGUF aligns tensor data to 32).
  if (reinterpret_cast<uintptr_t>(data) % 2 != 0)
    fail("tensor ", what, ": data is not 2-byte aligned");
  WeightMatrix w;
  w.type = type;
  w.data = static_cast<const uint8_t*>(data);
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = row_bytes(type, cols);
  return w;
}

void matvec(const WeightMatrix& w, const float* x, float* y, ThreadPool& pool) {
  check_weight(w);
  if (w.rows == 0) return;
  const MatvecRowsFn kernel = matvec_kernel(w.type);
  const kernels::MatvecArgs args{w.type, w.data, w.row_bytes, w.cols, x, y};
  // A small matrix is read in a few microseconds: waking the workers would
  // cost more than it saves.
  constexpr size_t kInlineBytes = 32 << 10;
  if (w.total_bytes() <= kInlineBytes || pool.size() == 1) return kernel(args, 0, w.rows);
  // Tasks of about kTaskBytes of weights (whole groups of 4 rows), but at
  // least ~4 per thread so that dynamic hand-out evens out the threads.
  // Which rows share a task never changes a row's result.
  constexpr size_t kTaskBytes = 96 << 10;
  constexpr int64_t kGroup = 4;
  auto round_up = [](int64_t v, int64_t m) { return (v + m - 1) / m * m; };
  int64_t per_task = round_up(int64_t((kTaskBytes + w.row_bytes - 1) / w.row_bytes), kGroup);
  const int64_t balanced = round_up((w.rows + 4 * pool.size() - 1) / (4 * pool.size()), kGroup);
  per_task = std::max(kGroup, std::min(per_task, balanced));
  const int64_t n_tasks = (w.rows + per_task - 1) / per_task;
  pool.run(n_tasks, [&](int64_t t, int) {
    kernel(args, t * per_task, std::min(w.rows, (t + 1) * per_task));
  });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  check_weight(w);
  if (n < 0) fail("matmul: negative token count ", n);
  if (n == 0 || w.rows == 0) return;
  kernels::matmul_panels(w.type, w.data, w.row_bytes, w.rows, w.cols, dequantizer(w.type), x, n, y,
                         pool);
}

void dequantize_row(DType type, const uint8_t* src, float* dst, int64_t n) {
  const auto& tr = supported_traits(type, "dequantize");
  if (n < 0 || n % tr.block_size != 0)
    fail("dequantize: ", n, " values is not a whole number of ", tr.name, " blocks of ",
         tr.block_size);
  if (n == 0) return;
  dequantizer(type)(type, src, dst, n);
}

void quantize_row(DType type, const float* src, uint8_t* dst, int64_t n) {
  supported_traits(type, "quantize");
  quantize_row_ref(type, src, dst, n);
}

const char* active_simd_target() {
  return kernels::active_target_name();
}

}  // namespace tkv
