// The recurrent layers' part of a sequence's memory (KvShape::recurrent):
// one f32 state per recurrent layer (a Gated DeltaNet layer's conv inputs
// and delta-rule matrices, model/forward_recurrent.cc), of a fixed size
// whatever the sequence's length.
//
// Each state is one allocation from the sequence's PagePool, so it counts
// against the same budget as the pages and is refcounted like them: a fork
// retains its parent's states (nothing copied) and the first chunk that
// updates a shared state copies it first (copy-on-write, in begin_chunk's
// all-or-nothing allocation phase). A state is the sequence's position in
// one piece: it cannot be rolled back to an earlier position, only reset to
// the empty sequence's (all zero).
//
// With the pool's disk tier the states are movable like KV pages: a state
// no chunk is updating (a snapshot's, a cached prefix's, an idle
// sequence's) may be on disk. Their bytes are read or written only under
// a pin (PagePins over allocations()): the recurrent layer's for its update
// (KvCache::pin_state), the session file's reader and writer, and every
// member function here that touches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kv/page_pool.h"

namespace tkv::kv {

class RecurrentStates {
 public:
  RecurrentStates() = default;
  RecurrentStates(const RecurrentStates&) = delete;
  RecurrentStates& operator=(const RecurrentStates&) = delete;
  ~RecurrentStates();

  // Zeroed states of floats[r] floats each from `pool` (KvBudgetExceeded,
  // with nothing held, when they do not fit).
  void init(std::shared_ptr<PagePool> pool, const std::vector<int64_t>& floats);
  // Shares every state of `from` (same sizes, same pool).
  void share(const RecurrentStates& from);
  // Gives every state shared with another sequence a private copy; throws
  // KvBudgetExceeded with nothing changed when the copies do not fit.
  void make_private();
  // Back to the empty sequence's states (zeros); a shared state is dropped
  // for a fresh one (which may throw KvBudgetExceeded, nothing changed).
  void reset();

  int count() const { return int(data_.size()); }
  // The bytes of state r: valid to read or write only while pinned.
  float* data(int r) { return reinterpret_cast<float*>(data_[size_t(r)]); }
  const float* data(int r) const { return reinterpret_cast<const float*>(data_[size_t(r)]); }
  // The allocations, for a caller's own PagePins.
  const std::vector<uint8_t*>& allocations() const { return data_; }
  size_t bytes(int r) const { return bytes_[size_t(r)]; }
  uint64_t total_bytes() const;
  uint64_t shared_bytes() const;  // of total_bytes, states another sequence holds too
  // Bytes of the states that are not `other`'s same allocation.
  uint64_t bytes_apart_from(const RecurrentStates& other) const;

 private:
  void release_all();
  bool movable() const { return pool_ && pool_->spilling(); }
  std::shared_ptr<PagePool> pool_;
  std::vector<uint8_t*> data_;
  std::vector<size_t> bytes_;
};

}  // namespace tkv::kv
