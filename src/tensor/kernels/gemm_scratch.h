// What the prefill GEMMs (gemm.cc, gemm_amx.cc, gemm_bf16.cc,
// gemm_q4k_avx2.cc) share: each thread's grow-only scratch (one product per
// weight per prefill chunk must not allocate; the small-batch float
// products, matvec_float_batch.cc and matvec_row_blocks.cc, pack their
// activations in it too) and the cut of a product's row panels into tasks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hwy/aligned_allocator.h"
#include "hwy/base.h"

namespace tkv::kernels {

// Bytes the calling thread's ScratchBuffers hold (reported with the
// engine's scratch: tkv::activation_scratch_bytes).
inline thread_local size_t t_gemm_scratch_bytes = 0;

// Grow-only aligned scratch (keep one per thread: static thread_local).
template <typename T>
struct ScratchBuffer {
  hwy::AlignedFreeUniquePtr<T[]> data;
  size_t size = 0;
  ScratchBuffer() = default;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { t_gemm_scratch_bytes -= size * sizeof(T); }
  T* Get(size_t want) {
    if (size < want) {
      data = hwy::AllocateAligned<T>(want);
      HWY_ASSERT(data != nullptr);
      t_gemm_scratch_bytes += (want - size) * sizeof(T);
      size = want;
    }
    return data.get();
  }
};

// Panels per task: a task's accumulators (panel_acc_floats a panel) about
// task_acc_bytes (L2), but at least ~4 tasks per thread; the task count a
// multiple of the thread count and the panels spread evenly over the tasks
// (sizes differ by at most one panel, task t runs panels [t * n_panels /
// n_tasks, (t + 1) * n_panels / n_tasks)), so that no thread is left with a
// last, lone task.
struct PanelTasks {
  int64_t n_tasks = 1;
  int64_t max_panels = 1;  // the most panels of one task
};
inline PanelTasks cut_panel_tasks(int64_t n_panels, size_t panel_acc_floats, size_t task_acc_bytes,
                                  int64_t threads) {
  const int64_t by_bytes = std::max<int64_t>(
      1, int64_t(task_acc_bytes / std::max<size_t>(1, panel_acc_floats * sizeof(float))));
  const int64_t balanced = std::max<int64_t>(1, n_panels / (4 * threads));
  const int64_t per_task = std::min(by_bytes, balanced);
  int64_t n_tasks = (n_panels + per_task - 1) / per_task;
  if (n_tasks >= threads) n_tasks = std::min(n_panels, (n_tasks + threads - 1) / threads * threads);
  return {n_tasks, (n_panels + n_tasks - 1) / n_tasks};
}

}  // namespace tkv::kernels
