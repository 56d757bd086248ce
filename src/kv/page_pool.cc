#include "kv/page_pool.h"

#include <cstdlib>

#include "common/sys_info.h"

namespace tkv::kv {

namespace {
size_t round_up_64(size_t n) {
  return (n + 63) & ~size_t(63);
}

uint8_t* aligned_bytes(size_t bytes) {
  void* p = std::aligned_alloc(64, round_up_64(bytes));
  if (!p)
    throw KvOutOfMemory(
        str("KV cache: out of memory: the system could not provide ", format_bytes(bytes)));
  return static_cast<uint8_t*>(p);
}
}  // namespace

PagePool::PagePool(uint64_t budget_bytes) : budget_(budget_bytes) {}

PagePool::~PagePool() {
  trim_locked();
}

uint8_t* PagePool::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint8_t* p = nullptr;
  auto it = free_.find(bytes);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    if (budget_ != 0 && reserved_ + bytes > budget_) {
      trim_locked();  // free-listed pages of other sizes may be what stands in the way
      if (reserved_ + bytes > budget_)
        throw KvBudgetExceeded(str("KV cache budget exhausted: ", format_bytes(reserved_),
                                   " in use, ", format_bytes(bytes), " more needed, budget ",
                                   format_bytes(budget_)));
    }
    p = aligned_bytes(bytes);
    reserved_ += bytes;
  }
  try {
    live_.emplace(p, Live{bytes, 1});
  } catch (...) {  // the bookkeeping could not grow: the bytes stay free-listed
    free_[bytes].push_back(p);
    throw;
  }
  in_use_ += bytes;
  return p;
}

void PagePool::retain(uint8_t* page) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(page);
  TKV_CHECK(it != live_.end());
  if (++it->second.refs == 2) {
    shared_ += it->second.bytes;
    ++shared_pages_;
  }
}

void PagePool::release(uint8_t* page, size_t bytes) {
  if (!page) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(page);
  TKV_CHECK(it != live_.end() && it->second.bytes == bytes);
  const int refs = --it->second.refs;
  if (refs == 1) {
    shared_ -= bytes;
    --shared_pages_;
  }
  if (refs > 0) return;
  live_.erase(it);
  in_use_ -= bytes;
  free_[bytes].push_back(page);
}

int PagePool::refcount(const uint8_t* page) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(page);
  return it == live_.end() ? 0 : it->second.refs;
}

void PagePool::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  trim_locked();
}

void PagePool::trim_locked() {
  for (auto& [bytes, pages] : free_) {
    for (uint8_t* p : pages) std::free(p);
    reserved_ -= bytes * pages.size();
    pages.clear();
  }
  free_.clear();
}

uint64_t PagePool::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_use_;
}

uint64_t PagePool::bytes_reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}

PoolStats PagePool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PoolStats s;
  s.bytes_in_use = in_use_;
  s.bytes_reserved = reserved_;
  s.budget = budget_;
  s.shared_bytes = shared_;
  s.pages = int64_t(live_.size());
  s.shared_pages = shared_pages_;
  return s;
}

ScratchBuffer::~ScratchBuffer() {
  release();
}

uint8_t* ScratchBuffer::reserve(size_t bytes) {
  if (bytes > capacity_) {
    std::free(data_);
    data_ = nullptr;
    capacity_ = 0;
    data_ = aligned_bytes(bytes);
    capacity_ = round_up_64(bytes);
  }
  return data_;
}

void ScratchBuffer::release() {
  std::free(data_);
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace tkv::kv
