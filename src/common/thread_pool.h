// A small persistent thread pool for the hot loops (matvec rows, attention
// heads and context splits). Decode issues a few hundred parallel regions per
// token, so workers spin briefly before sleeping on an atomic wait: waking a
// sleeping thread costs tens of microseconds, a spinning one a few hundred ns.
//
// Results never depend on the thread count as long as each task writes its own
// outputs: work is split into tasks, and which thread runs a task does not
// change what the task computes.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace tkv {

class ThreadPool {
 public:
  // n_threads counts the calling thread; 1 means "run everything inline".
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread) for every task in [0, n_tasks), tasks handed out
  // dynamically; thread is in [0, size()). Returns when all tasks are done.
  // Not reentrant: fn must not call run() on the same pool.
  template <typename Fn>
  void run(int64_t n_tasks, const Fn& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
      for (int64_t t = 0; t < n_tasks; ++t) fn(t, 0);
      return;
    }
    dispatch(n_tasks, &invoke<Fn>, &fn);
  }

  // Splits [0, n) into at most size() contiguous chunks of about equal size
  // (multiples of `grain` except the last) and calls fn(begin, end, thread).
  template <typename Fn>
  void parallel_for(int64_t n, int64_t grain, const Fn& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t units = (n + grain - 1) / grain;
    const int64_t chunks = units < n_threads_ ? units : n_threads_;
    const int64_t per = (units + chunks - 1) / chunks;
    run(chunks, [&](int64_t c, int thread) {
      const int64_t b = c * per * grain;
      int64_t e = (c + 1) * per * grain;
      if (e > n) e = n;
      if (b < e) fn(b, e, thread);
    });
  }

 private:
  using Thunk = void (*)(const void* fn, int64_t task, int thread);
  template <typename Fn>
  static void invoke(const void* fn, int64_t task, int thread) {
    (*static_cast<const Fn*>(fn))(task, thread);
  }
  void dispatch(int64_t n_tasks, Thunk thunk, const void* fn);
  void worker_loop(int thread);
  void work(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job; published by bumping generation_.
  Thunk thunk_ = nullptr;
  const void* fn_ = nullptr;
  int64_t n_tasks_ = 0;
  alignas(64) std::atomic<int64_t> next_task_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> busy_workers_{0};
  std::atomic<bool> stop_{false};
};

// Physical cores of this machine (hyper-threads not counted); >= 1.
int physical_core_count();

}  // namespace tkv
