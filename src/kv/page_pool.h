// The byte-budgeted pool KV pages come from. Pages of one byte size are
// recycled through a free list (a window policy frees and reallocates pages
// constantly; memory stays flat). Exceeding the budget throws
// KvBudgetExceeded, which callers (bench) turn into an OOM result row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
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

class PagePool {
 public:
  explicit PagePool(uint64_t budget_bytes = 0);  // 0 = unlimited
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // 64-byte aligned, uninitialized. Throws KvBudgetExceeded past the budget.
  uint8_t* allocate(size_t bytes);
  void release(uint8_t* page, size_t bytes);
  // Returns every free-listed page to the OS.
  void trim();

  uint64_t bytes_in_use() const { return in_use_; }
  uint64_t bytes_reserved() const { return reserved_; }  // in use + free-listed
  uint64_t budget() const { return budget_; }

 private:
  uint64_t budget_;
  uint64_t in_use_ = 0;
  uint64_t reserved_ = 0;
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
