// The background writer of the prefix cache's disk tier: evicted prefixes
// and, at drain, every cached one are written to --cache-dir on a thread of
// their own, so that a slow disk (or a large prefix) never stalls the
// scheduler's steps.
//
//  - submit() takes the sequence itself: its pages stay held (shared
//    copy-on-write with any running fork, so they never change) until the
//    file is written, then return to the pool. The queue is bounded: a
//    submit() beyond `max_queued` waits for room.
//  - CacheDir files a prefix only once its file is complete (cache_dir.h),
//    so a lookup never reads a half-written file; the prefix cache asks
//    best_reuse() first and waits for the writer when a prefix on its
//    way to disk would serve the prompt better than what is there.
//  - wait_idle() returns once everything submitted is written (drain; and
//    the scheduler when it needs the pages the queue holds).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>

#include "runtime/generation.h"
#include "server/cache_dir.h"
#include "server/prefix_index.h"

namespace tkv::server {

class CacheWriter {
 public:
  CacheWriter(CacheDir& dir, int max_queued);
  ~CacheWriter();  // writes what is queued, then stops
  CacheWriter(const CacheWriter&) = delete;
  CacheWriter& operator=(const CacheWriter&) = delete;

  void submit(std::unique_ptr<runtime::Sequence> session);
  void wait_idle();
  // Sequences queued or being written.
  int pending() const;
  // The most tokens of `prompt` a sequence queued or being written serves
  // under `rule`.
  int64_t best_reuse(std::span<const int32_t> prompt, const ReuseRule& rule) const;

 private:
  void loop();

  CacheDir& dir_;
  const int max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<runtime::Sequence>> queue_;
  std::unique_ptr<runtime::Sequence> writing_;  // out of the queue, not written yet
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tkv::server
