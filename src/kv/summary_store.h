// The page summaries of one layer (page_summary.h): n_kv heads of
// `head_bytes` per page, for pages [0, size()) of the layer's page table.
//
// Stored in blocks of kBlockPages pages, head-major inside a block
// ([head][page][byte]): the decode step's bound pass reads one head's
// summaries of every page in order, which is then a few contiguous runs
// instead of one small heap allocation per page (each its own TLB entry and
// cold line). Pages come and go at both ends (new pages at the back, a
// window policy drops the front, truncate() the back), as in the page table.
// Copies are deep: a forked sequence owns its summaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <vector>

namespace tkv::kv {

class SummaryStore {
 public:
  static constexpr size_t kBlockPages = 32;

  // Heads per page and bytes of one head's summary; drops what is held.
  void init(int n_kv, size_t head_bytes) {
    clear();
    n_kv_ = size_t(n_kv);
    head_bytes_ = head_bytes;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Bytes the summaries of size() pages take (what KvStats reports).
  uint64_t bytes() const { return uint64_t(size_) * n_kv_ * head_bytes_; }

  uint8_t* head(size_t i, int h) {
    const size_t j = first_ + i;
    return blocks_[j / kBlockPages].data() +
           (size_t(h) * kBlockPages + j % kBlockPages) * head_bytes_;
  }
  const uint8_t* head(size_t i, int h) const { return const_cast<SummaryStore*>(this)->head(i, h); }

  // One more page at the back, its summaries zero until written (a slot
  // truncate() left is cleared again).
  void push_back() {
    if (first_ + size_ == blocks_.size() * kBlockPages)
      blocks_.emplace_back(kBlockPages * n_kv_ * head_bytes_, uint8_t(0));
    ++size_;
    for (size_t h = 0; h < n_kv_; ++h) std::memset(head(size_ - 1, int(h)), 0, head_bytes_);
  }
  void pop_front() {
    ++first_;
    --size_;
    if (size_ == 0) {
      clear();
    } else if (first_ == kBlockPages) {
      blocks_.pop_front();
      first_ = 0;
    }
  }
  void pop_back() {
    --size_;
    if (size_ == 0) {
      clear();
    } else if (first_ + size_ <= (blocks_.size() - 1) * kBlockPages) {
      blocks_.pop_back();
    }
  }
  void clear() {
    blocks_.clear();
    first_ = 0;
    size_ = 0;
  }

 private:
  std::deque<std::vector<uint8_t>> blocks_;
  size_t first_ = 0;  // slot of page 0 in blocks_.front()
  size_t size_ = 0;
  size_t n_kv_ = 0, head_bytes_ = 0;
};

}  // namespace tkv::kv
