#include "common/thread_pool.h"

#include <fstream>
#include <set>
#include <string>
#include <utility>

#ifdef __APPLE__
#include <sys/sysctl.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TKV_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define TKV_PAUSE() asm volatile("yield")
#else
#define TKV_PAUSE() ((void)0)
#endif

namespace tkv {

namespace {
// How long a worker spins for the next job before sleeping (iterations of a
// pause instruction, ~50-100 us): long enough to cover the gap between two
// matvecs of one token, short enough not to burn a core while idle.
constexpr int kSpinIterations = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  workers_.reserve(n_threads_ - 1);
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::work(int thread) {
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= n_tasks_) break;
    thunk_(fn_, task, thread);
  }
}

void ThreadPool::dispatch(int64_t n_tasks, Thunk thunk, const void* fn) {
  thunk_ = thunk;
  fn_ = fn;
  n_tasks_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  busy_workers_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  work(0);
  // Workers that are still busy are usually microseconds from done; but when
  // the machine is oversubscribed a worker may be descheduled, so after a
  // short spin give the core away instead of burning it.
  for (int i = 0; busy_workers_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < kSpinIterations / 4)
      TKV_PAUSE();
    else
      std::this_thread::yield();
  }
}

void ThreadPool::worker_loop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
      if (i % 64 == 63)
        std::this_thread::yield();  // let a runnable thread in if the core is contended
      else
        TKV_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    while (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    work(thread);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

int physical_core_count() {
#if defined(__linux__)
  // Distinct (package, core) pairs of sysfs' CPU topology.
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0; cpu < 4096; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream core(base + "core_id"), pkg(base + "physical_package_id");
    if (!core) {
      if (cpu > 0) break;
      continue;
    }
    std::string c, p;
    core >> c;
    pkg >> p;
    cores.emplace(p, c);
  }
  if (!cores.empty()) return int(cores.size());
#elif defined(__APPLE__)
  int n = 0;
  size_t size = sizeof n;
  if (sysctlbyname("hw.physicalcpu", &n, &size, nullptr, 0) == 0 && n > 0) return n;
#endif
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? int(hc) : 1;
}

}  // namespace tkv
