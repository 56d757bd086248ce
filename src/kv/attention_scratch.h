// Working memory of one attention call (KvCache::attend), owned by the
// caller so that several sequences can attend at the same time on different
// threads, each with its own scratch, while the KV store stays untouched by
// anything but its own sequence.
//
// Holds one buffer per thread of the ThreadPool the call runs on (query
// tile x key tile working set) and the split-K partials (m, l and the value
// accumulators of every task before the log-sum-exp merge). Buffers grow on
// demand and are kept for the next call; their size is bounded by the chunk
// size, the GQA group and the thread count, never by the context length.
//
// Not thread-safe: one AttentionScratch serves one attend() at a time. The
// chunk's own f16 tokens are not here: they live in the sequence between
// write() and attend() (KvStats::scratch_bytes counts them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/page_pool.h"

namespace tkv::kv {

class AttentionScratch {
 public:
  AttentionScratch() = default;
  AttentionScratch(const AttentionScratch&) = delete;
  AttentionScratch& operator=(const AttentionScratch&) = delete;
  AttentionScratch(AttentionScratch&&) = default;

  // Bytes held now, and the most held since construction / reset_peak().
  uint64_t bytes() const;
  uint64_t peak_bytes() const { return peak_ > bytes() ? peak_ : bytes(); }
  void reset_peak() { peak_ = bytes(); }
  // Frees every buffer (the next call allocates again).
  void release();

  // ---- used by the attention driver ----
  // Makes room for `threads` per-thread buffers of `thread_bytes` each and
  // `partial_bytes` of partials; throws KvOutOfMemory when the system cannot
  // provide them. Updates the peak.
  void prepare(int threads, size_t thread_bytes, size_t partial_bytes);
  float* thread_floats(int thread) { return thread_[size_t(thread)].as<float>(0); }
  float* partial_floats() { return partials_.as<float>(0); }

 private:
  std::vector<ScratchBuffer> thread_;
  ScratchBuffer partials_;
  uint64_t peak_ = 0;
};

}  // namespace tkv::kv
