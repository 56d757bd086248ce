// Public weight API (tensor/matmul.h): argument checks, the thread split, and
// the choice of kernel file per type. The arithmetic lives in tensor/kernels/.
#include "tensor/matmul.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/f16.h"
#include "hwy/aligned_allocator.h"
#include "hwy/targets.h"
#include "tensor/kernel_config.h"
#include "tensor/kernels/act_blocks.h"
#include "tensor/kernels/gemm_amx.h"
#include "tensor/kernels/gemm_q4k_avx2.h"
#include "tensor/kernels/gemm_scratch.h"
#include "tensor/kernels/kernels.h"
#include "tensor/kernels/matvec_batch.h"
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
    case DType::MXFP4:
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
  TKV_CHECK(w.layout == RowLayout::kRows || (w.type == DType::F16 && w.rows % kRowBlockRows == 0));
}

// The kernel configuration's SIMD target (kernel_config.h: TURBOKV_SIMD),
// applied once, before the first product; its first read here also reports
// a malformed switch as the product's error.
void apply_simd_override() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string& simd = kernel_config().simd;
    if (simd.empty()) return;
    std::string want(simd), have;
    for (auto& c : want) c = char(std::toupper(static_cast<unsigned char>(c)));
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      if (want == hwy::TargetName(target)) return hwy::SetSupportedTargetsForTest(target);
      have += str(" ", hwy::TargetName(target));
    }
    fail("TURBOKV_SIMD=", simd, ": not a SIMD target of this build and CPU (available:", have, ")");
  });
}

// Grow-only buffer of the calling thread for quantized activations, so that
// the many products of a forward pass do not allocate.
struct ActBuffer {
  hwy::AlignedFreeUniquePtr<uint8_t[]> data;
  size_t size = 0;
};
thread_local ActBuffer t_act_buffer;

uint8_t* act_buffer(size_t bytes) {
  ActBuffer& b = t_act_buffer;
  if (b.size < bytes) {
    b.data = hwy::AllocateAligned<uint8_t>(bytes);
    if (b.data == nullptr) fail("out of memory for ", bytes, " bytes of quantized activations");
    b.size = bytes;
  }
  return b.data.get();
}

// A small matrix is read in a few microseconds: waking the workers would
// cost more than it saves.
constexpr size_t kInlineBytes = 32 << 10;

// Rows per task: about `task_bytes` of weights (whole groups of 4 rows),
// but at least ~4 tasks per thread so that dynamic hand-out evens out the
// threads, and the task count rounded up to a multiple of the threads
// before the rows are (nine tasks on two threads leave one thread a whole
// task alone; rounding the rows to whole groups may still take a task or
// two off). Which rows share a task never changes a row's result.
int64_t rows_per_task(const WeightMatrix& w, int threads, size_t task_bytes) {
  constexpr int64_t kGroup = 4;
  auto round_up = [](int64_t v, int64_t m) { return (v + m - 1) / m * m; };
  int64_t per_task = round_up(int64_t((task_bytes + w.row_bytes - 1) / w.row_bytes), kGroup);
  const int64_t balanced = round_up((w.rows + 4 * threads - 1) / (4 * threads), kGroup);
  per_task = std::max(kGroup, std::min(per_task, balanced));
  const int64_t n_tasks = round_up((w.rows + per_task - 1) / per_task, threads);
  return std::max(kGroup, round_up((w.rows + n_tasks - 1) / n_tasks, kGroup));
}

// Task bytes of a product of `tokens` tokens. One token streams its
// weights from DRAM, faster in long runs of addresses per thread (1 MiB
// tasks against 96 KiB ones); several are bound by arithmetic, where more,
// smaller tasks let dynamic hand-out even out threads that run at
// different speeds.
size_t task_bytes(int64_t tokens) {
  return tokens == 1 ? size_t(1) << 20 : size_t(96) << 10;
}

// Rows per task of the small-batch float product: about four tasks per
// thread, however large the rows. Its kernel prefetches the next panel of
// rows of its task while it computes one (the hardware's stream detection
// does not warm up on a panel's short row pieces), so each task's first
// panel is read on demand: tasks of 96 KiB left two thirds of the weights
// unprefetched.
int64_t batch_rows_per_task(const WeightMatrix& w, int threads) {
  constexpr int64_t kGroup = 16;
  const int64_t per_task = (w.rows + 4 * threads - 1) / (4 * threads);
  return std::max(kGroup, (per_task + kGroup - 1) / kGroup * kGroup);
}

// matvec / matvec_batch of row blocks (matvec_row_blocks.cc): tasks of
// whole blocks, about four per thread as batch_rows_per_task cuts rows.
void row_blocks_product(const WeightMatrix& w, const float* x, int64_t n, float* y,
                        ThreadPool& pool) {
  const int64_t blocks = w.rows / kRowBlockRows;
  if (w.total_bytes() <= kInlineBytes || pool.size() == 1)
    return kernels::row_blocks_product(w.data, w.cols, x, n, y, w.rows, 0, blocks);
  const int64_t per_task = batch_rows_per_task(w, pool.size()) / kRowBlockRows;
  const int64_t n_tasks = (blocks + per_task - 1) / per_task;
  pool.run(n_tasks, [&](int64_t t, int) {
    kernels::row_blocks_product(w.data, w.cols, x, n, y, w.rows, t * per_task,
                                std::min(blocks, (t + 1) * per_task));
  });
}

// The integer-dot product of n tokens: activations quantized (a token's
// bytes do not depend on the thread; prefill-sized batches split over the
// pool, whose other threads would otherwise wait), then rows split over the
// pool exactly as matvec splits them.
void int_product(const WeightMatrix& w, kernels::ActFormat format, const float* x, int64_t n,
                 float* y, ThreadPool& pool) {
  const size_t stride = kernels::act_row_bytes(format, w.cols);
  uint8_t* xq = act_buffer(stride * size_t(n));
  auto quantize = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      kernels::quantize_act(format, x + i * w.cols, w.cols, xq + size_t(i) * stride);
  };
  if (n > kIntMatmulMaxTokens && pool.size() > 1)
    pool.parallel_for(n, 16, [&](int64_t i0, int64_t i1, int) { quantize(i0, i1); });
  else
    quantize(0, n);
  const kernels::IntDotArgs args{w.type, w.data, w.row_bytes, w.cols, xq, stride, n, y, w.rows};
  // One token: the matvec kernel; more: token tiles, the same bits per token.
  const auto rows_fn = n == 1                                ? &kernels::int_dot_rows
                       : kernels::q4k_gemm_active(w.type, n) ? &kernels::q4k_gemm_rows
                                                             : &kernels::int_gemm_rows;
  if (w.total_bytes() * size_t(n) <= kInlineBytes || pool.size() == 1)
    return rows_fn(args, 0, w.rows);
  const int64_t per_task = rows_per_task(w, pool.size(), task_bytes(n));
  const int64_t n_tasks = (w.rows + per_task - 1) / per_task;
  pool.run(n_tasks, [&](int64_t t, int) {
    rows_fn(args, t * per_task, std::min(w.rows, (t + 1) * per_task));
  });
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
  // Every block layout but MXFP4's has 16-bit fields (GGUF aligns tensor
  // data to 32); MXFP4's 17-byte blocks are bytes only, so a slice of its
  // rows (one expert of a 3-D tensor) may start at any address.
  if (type != DType::MXFP4 && reinterpret_cast<uintptr_t>(data) % 2 != 0)
    fail("tensor ", what, ": data is not 2-byte aligned");
  WeightMatrix w;
  w.type = type;
  w.data = static_cast<const uint8_t*>(data);
  w.rows = rows;
  w.cols = cols;
  w.row_bytes = row_bytes(type, cols);
  return w;
}

bool row_blocks_pay_off(const WeightMatrix& w) {
  apply_simd_override();
  return w.layout == RowLayout::kRows && w.type == DType::F16 && w.rows > 0 &&
         w.rows % kRowBlockRows == 0 && kernel_config().use_row_blocks();
}

WeightMatrix to_row_blocks(const WeightMatrix& w, uint8_t* bytes, ThreadPool& pool) {
  check_weight(w);
  TKV_CHECK(bytes == w.data && row_blocks_pay_off(w));
  // Block by block through a copy of its 16 rows (64 KiB at 2048 columns).
  const size_t cols = size_t(w.cols), block_values = size_t(kRowBlockRows) * cols;
  auto* out = reinterpret_cast<uint16_t*>(bytes);
  pool.parallel_for(w.rows / kRowBlockRows, 1, [&](int64_t b0, int64_t b1, int) {
    std::vector<uint16_t> rows(block_values);
    for (int64_t b = b0; b < b1; ++b) {
      uint16_t* block = out + size_t(b) * block_values;
      std::memcpy(rows.data(), block, block_values * sizeof(uint16_t));
      // Column by column: the writes are one sequential stream, the 16
      // reads come from the copy in L1/L2.
      for (size_t k = 0; k < cols; ++k)
        for (size_t r = 0; r < size_t(kRowBlockRows); ++r)
          block[k * size_t(kRowBlockRows) + r] = rows[r * cols + k];
    }
  });
  WeightMatrix b = w;
  b.layout = RowLayout::kRowBlocks16;
  return b;
}

WeightMatrix row_slice(const WeightMatrix& w, int64_t r0, int64_t r1) {
  check_weight(w);
  TKV_CHECK(0 <= r0 && r0 <= r1 && r1 <= w.rows);
  TKV_CHECK(w.layout == RowLayout::kRows || (r0 % kRowBlockRows == 0 && r1 % kRowBlockRows == 0));
  // A block of 16 rows holds 16 rows' bytes, so rows and row blocks start
  // row r0 at the same offset.
  WeightMatrix s = w;
  s.data = w.data + size_t(r0) * w.row_bytes;
  s.rows = r1 - r0;
  return s;
}

void weight_row(const WeightMatrix& w, int64_t r, float* dst) {
  check_weight(w);
  TKV_CHECK(r >= 0 && r < w.rows);
  if (w.layout == RowLayout::kRows) return dequantize_row(w.type, w.row(r), dst, w.cols);
  // The row's value of column k is lane r % 16 of the block's piece k.
  const auto* piece = reinterpret_cast<const uint16_t*>(w.data) +
                      size_t(r / kRowBlockRows) * size_t(w.cols * kRowBlockRows) +
                      size_t(r % kRowBlockRows);
  for (int64_t k = 0; k < w.cols; ++k) dst[k] = f16_to_f32(piece[k * kRowBlockRows]);
}

void matvec(const WeightMatrix& w, const float* x, float* y, ThreadPool& pool) {
  check_weight(w);
  apply_simd_override();
  if (w.rows == 0) return;
  if (w.layout == RowLayout::kRowBlocks16) return row_blocks_product(w, x, 1, y, pool);
  if (const auto format = kernels::act_format(w.type);
      format != kernels::ActFormat::kNone && kernels::int_kernels_native())
    return int_product(w, format, x, 1, y, pool);
  const MatvecRowsFn kernel = matvec_kernel(w.type);
  const kernels::MatvecArgs args{w.type, w.data, w.row_bytes, w.cols, x, y};
  if (w.total_bytes() <= kInlineBytes || pool.size() == 1) return kernel(args, 0, w.rows);
  const int64_t per_task = rows_per_task(w, pool.size(), task_bytes(1));
  const int64_t n_tasks = (w.rows + per_task - 1) / per_task;
  pool.run(n_tasks, [&](int64_t t, int) {
    kernel(args, t * per_task, std::min(w.rows, (t + 1) * per_task));
  });
}

void matvec_batch(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool) {
  check_weight(w);
  if (n < 0) fail("matvec_batch: negative token count ", n);
  apply_simd_override();
  if (n == 0 || w.rows == 0) return;
  if (w.layout == RowLayout::kRowBlocks16) return row_blocks_product(w, x, n, y, pool);
  if (const auto format = kernels::act_format(w.type); format != kernels::ActFormat::kNone) {
    if (kernels::int_kernels_native()) return int_product(w, format, x, n, y, pool);
    // Where matvec takes the float path for this type (no native integer
    // kernels on this target), so must every token here: one matvec each.
    for (int64_t i = 0; i < n; ++i) matvec(w, x + i * w.cols, y + i * w.rows, pool);
    return;
  }
  TKV_CHECK(kernels::family_of(w.type) == Family::kFloat);
  const kernels::MatvecArgs args{w.type, w.data, w.row_bytes, w.cols, x, y};
  if (w.total_bytes() <= kInlineBytes || pool.size() == 1)
    return kernels::matvec_rows_float_batch(args, n, w.rows, 0, w.rows);
  const int64_t per_task = batch_rows_per_task(w, pool.size());
  const int64_t n_tasks = (w.rows + per_task - 1) / per_task;
  pool.run(n_tasks, [&](int64_t t, int) {
    kernels::matvec_rows_float_batch(args, n, w.rows, t * per_task,
                                     std::min(w.rows, (t + 1) * per_task));
  });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool,
            MatmulKernel kernel) {
  check_weight(w);
  if (n < 0) fail("matmul: negative token count ", n);
  apply_simd_override();
  if (n == 0 || w.rows == 0) return;
  const auto format = kernels::act_format(w.type);
  const bool integer = kernel == MatmulKernel::kInteger ||
                       (kernel == MatmulKernel::kAuto && integer_matmul_active(w.type, n));
  if (format != kernels::ActFormat::kNone && integer) return int_product(w, format, x, n, y, pool);
  kernels::matmul_panels(w.type, w.data, w.row_bytes, w.rows, w.cols, dequantizer(w.type), x, n, y,
                         pool, w.layout == RowLayout::kRowBlocks16);
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

size_t quantized_activation_bytes(DType type, int64_t cols, int64_t n) {
  return kernels::act_row_bytes(kernels::act_format(type), cols) * size_t(std::max<int64_t>(n, 0));
}

bool integer_path_active(DType type) {
  apply_simd_override();
  return kernels::act_format(type) != kernels::ActFormat::kNone && kernels::int_kernels_native();
}

bool integer_matmul_active(DType type, int64_t n) {
  return integer_path_active(type) &&
         (n <= kIntMatmulMaxTokens || kernels::int_gemm_preferred(type));
}

MatmulKernel prefill_kernel(DType type) {
  return integer_matmul_active(type, kIntMatmulMaxTokens + 1) ? MatmulKernel::kInteger
                                                              : MatmulKernel::kFloat;
}

int64_t matmul_rows_per_call(DType type) {
  const bool amx = (type == DType::F16 || type == DType::BF16) && kernels::amx_gemm_active();
  return amx ? 512 : 256;
}

size_t activation_scratch_bytes() {
  return t_act_buffer.size + kernels::t_gemm_scratch_bytes;
}

const char* active_simd_target() {
  apply_simd_override();
  return kernels::active_target_name();
}

}  // namespace tkv
