#include "kv/recurrent_state.h"

#include <cstring>

#include "common/error.h"

namespace tkv::kv {

RecurrentStates::~RecurrentStates() {
  release_all();
}

void RecurrentStates::release_all() {
  for (size_t r = 0; r < data_.size(); ++r)
    if (data_[r]) pool_->release(data_[r], bytes_[r]);
  data_.clear();
  bytes_.clear();
}

void RecurrentStates::init(std::shared_ptr<PagePool> pool, const std::vector<int64_t>& floats) {
  release_all();
  pool_ = std::move(pool);
  try {
    for (int64_t n : floats) {
      TKV_CHECK(n > 0);
      const size_t b = size_t(n) * sizeof(float);
      data_.push_back(pool_->allocate(b, movable()));
      bytes_.push_back(b);
      PagePins pins(*pool_, {data_.back()}, nullptr, true);
      std::memset(data_.back(), 0, b);
    }
  } catch (...) {
    release_all();
    throw;
  }
}

void RecurrentStates::share(const RecurrentStates& from) {
  release_all();
  pool_ = from.pool_;
  for (size_t r = 0; r < from.data_.size(); ++r) {
    pool_->retain(from.data_[r]);
    data_.push_back(from.data_[r]);
    bytes_.push_back(from.bytes_[r]);
  }
}

void RecurrentStates::make_private() {
  std::vector<std::pair<size_t, uint8_t*>> copies;
  try {
    for (size_t r = 0; r < data_.size(); ++r)
      if (pool_->refcount(data_[r]) > 1)
        copies.emplace_back(r, pool_->allocate(bytes_[r], movable()));
  } catch (...) {
    for (auto& [r, p] : copies) pool_->release(p, bytes_[r]);
    throw;
  }
  try {
    // One pin for both (a caller waiting on pins must hold none); the
    // source is marked written too, which only costs a rewrite on eviction.
    for (auto& [r, p] : copies) {
      PagePins pins(*pool_, {data_[r], p}, nullptr, true);
      std::memcpy(p, data_[r], bytes_[r]);
    }
  } catch (...) {  // the disk tier failed: nothing changed
    for (auto& [r, p] : copies) pool_->release(p, bytes_[r]);
    throw;
  }
  for (auto& [r, p] : copies) {
    pool_->release(data_[r], bytes_[r]);  // the other holders keep theirs
    data_[r] = p;
  }
}

void RecurrentStates::reset() {
  std::vector<std::pair<size_t, uint8_t*>> fresh;
  try {
    // A fresh one for each shared state, and for each on disk (zeros need
    // not read it back: it may be unreadable, as after a failed chunk).
    for (size_t r = 0; r < data_.size(); ++r)
      if (pool_->refcount(data_[r]) > 1 || (movable() && !pool_->resident(data_[r])))
        fresh.emplace_back(r, pool_->allocate(bytes_[r], movable()));
  } catch (...) {
    for (auto& [r, p] : fresh) pool_->release(p, bytes_[r]);
    throw;
  }
  // Zeroed where they will be, under one pin: a disk-tier failure changes
  // nothing.
  std::vector<uint8_t*> target = data_;
  for (auto& [r, p] : fresh) target[r] = p;
  try {
    PagePins pins(*pool_, target, nullptr, true);
    for (size_t r = 0; r < target.size(); ++r) std::memset(target[r], 0, bytes_[r]);
  } catch (...) {
    for (auto& [r, p] : fresh) pool_->release(p, bytes_[r]);
    throw;
  }
  for (auto& [r, p] : fresh) {
    pool_->release(data_[r], bytes_[r]);
    data_[r] = p;
  }
}

uint64_t RecurrentStates::total_bytes() const {
  uint64_t s = 0;
  for (size_t b : bytes_) s += b;
  return s;
}

uint64_t RecurrentStates::bytes_apart_from(const RecurrentStates& other) const {
  uint64_t s = 0;
  for (size_t r = 0; r < data_.size(); ++r)
    if (r >= other.data_.size() || data_[r] != other.data_[r]) s += bytes_[r];
  return s;
}

uint64_t RecurrentStates::shared_bytes() const {
  uint64_t s = 0;
  for (size_t r = 0; r < data_.size(); ++r)
    if (pool_->refcount(data_[r]) > 1) s += bytes_[r];
  return s;
}

}  // namespace tkv::kv
