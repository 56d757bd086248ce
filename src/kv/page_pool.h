// The byte-budgeted pool KV pages come from. Pages of one byte size are
// recycled through a free list (a window policy frees and reallocates pages
// constantly; memory stays flat). Exceeding the budget throws
// KvBudgetExceeded, which callers (bench) turn into an OOM result row; a
// failed system allocation throws KvOutOfMemory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/error.h"

namespace tkv::kv {

// The pool's byte budget does not allow an allocation (a result, not a bug:
// the caller may free sequences and retry).
class KvBudgetExceeded : public Error {
 public:
  using Error::Error;
};

// The system could not provide memory (aligned_alloc failed) although the
// budget allowed it.
class KvOutOfMemory : public Error {
 public:
  using Error::Error;
};

// Totals of a pool, for reports (every figure in bytes unless named).
struct PoolStats {
  uint64_t bytes_in_use = 0;    // live allocations (pages, sinks, residual rings)
  uint64_t bytes_reserved = 0;  // in use + free-listed (what counts against the budget)
  uint64_t budget = 0;          // 0 = unlimited
  uint64_t shared_bytes = 0;    // of bytes_in_use: allocations held by more than one sequence
  int64_t pages = 0;            // live allocations
  int64_t shared_pages = 0;     // of which held by more than one sequence
};

// One pool serves any number of sequences (KvCache objects holding it by
// std::shared_ptr), on any threads: every member function is thread-safe.
// Allocations are refcounted: allocate() returns one reference, retain()
// adds one (a forked sequence sharing the page), release() drops one and
// recycles the bytes when the last goes. A page held more than once is
// read-only by convention: a sequence about to write into it copies it first
// (copy-on-write, KvCache::begin_chunk).
class PagePool {
 public:
  explicit PagePool(uint64_t budget_bytes = 0);  // 0 = unlimited
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // 64-byte aligned, uninitialized, refcount 1. Throws KvBudgetExceeded past
  // the budget, KvOutOfMemory when the system cannot provide the bytes.
  uint8_t* allocate(size_t bytes);
  // One more reference to a live allocation.
  void retain(uint8_t* page);
  // Drops one reference (`bytes` must be the allocated size); the last one
  // puts the bytes on the free list. nullptr is ignored.
  void release(uint8_t* page, size_t bytes);
  // References held on a live allocation (0 if it is not one).
  int refcount(const uint8_t* page) const;
  // Returns every free-listed page to the OS.
  void trim();

  uint64_t bytes_in_use() const;
  uint64_t bytes_reserved() const;  // in use + free-listed
  uint64_t budget() const { return budget_; }
  PoolStats stats() const;

 private:
  struct Live {
    size_t bytes;
    int refs;
  };
  void trim_locked();

  const uint64_t budget_;
  mutable std::mutex mutex_;
  uint64_t in_use_ = 0;
  uint64_t reserved_ = 0;
  uint64_t shared_ = 0;
  int64_t shared_pages_ = 0;
  std::unordered_map<const uint8_t*, Live> live_;
  std::map<size_t, std::vector<uint8_t*>> free_;
};

// A 64-byte aligned heap buffer that grows on demand and reports its size;
// used for attention scratch so its peak can be accounted.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ScratchBuffer(ScratchBuffer&& o) noexcept : data_(o.data_), capacity_(o.capacity_) {
    o.data_ = nullptr;
    o.capacity_ = 0;
  }
  // Ensures at least `bytes`; contents are not preserved when it grows.
  uint8_t* reserve(size_t bytes);
  template <typename T>
  T* as(size_t count) {
    return reinterpret_cast<T*>(reserve(count * sizeof(T)));
  }
  size_t capacity() const { return capacity_; }
  void release();

 private:
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace tkv::kv
