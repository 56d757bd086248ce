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
  trim();
}

uint8_t* PagePool::allocate(size_t bytes) {
  auto it = free_.find(bytes);
  if (it != free_.end() && !it->second.empty()) {
    uint8_t* p = it->second.back();
    it->second.pop_back();
    in_use_ += bytes;
    return p;
  }
  if (budget_ != 0 && reserved_ + bytes > budget_) {
    trim();  // free-listed pages of other sizes may be what stands in the way
    if (reserved_ + bytes > budget_)
      throw KvBudgetExceeded(str("KV cache budget exhausted: ", format_bytes(reserved_),
                                 " in use, ", format_bytes(bytes), " more needed, budget ",
                                 format_bytes(budget_)));
  }
  uint8_t* p = aligned_bytes(bytes);
  in_use_ += bytes;
  reserved_ += bytes;
  return p;
}

void PagePool::release(uint8_t* page, size_t bytes) {
  if (!page) return;
  in_use_ -= bytes;
  free_[bytes].push_back(page);
}

void PagePool::trim() {
  for (auto& [bytes, pages] : free_) {
    for (uint8_t* p : pages) std::free(p);
    reserved_ -= bytes * pages.size();
    pages.clear();
  }
  free_.clear();
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
