// The byte-budgeted pool KV pages come from. Pages of one byte size are
// recycled through a free list (a window policy frees and reallocates pages
// constantly; memory stays flat). Exceeding the budget throws
// KvBudgetExceeded, which callers (bench) turn into an OOM result row; a
// failed system allocation throws KvOutOfMemory.
//
// Disk tier: a pool with a budget and a spill directory keeps at most the
// budget in RAM and moves its coldest movable allocations (KV pages and
// recurrent states, least recently pinned; sinks and residual rings are not
// movable) to a page file there (spill_file.h) instead of failing. A page
// keeps its address: its RAM is returned to the system (madvise) while it
// is on disk and refilled when it is pinned again, so every holder's
// pointer stays valid. Whoever reads or writes a movable page pins it
// first (PagePins); an unpinned page may be on disk. Disk errors and
// checksum mismatches throw KvSpillError.
//
// Read-ahead: read_ahead() hands pages a caller is about to pin to the
// pool's I/O thread, which reads those on disk back while the caller
// computes; a pin that finds one being read waits for it. The read-ahead
// only takes RAM the budget has free or that unpinned pages not read ahead
// can give up (it never evicts a pinned page or another read-ahead page not
// yet pinned), so it stays within the budget; it changes no byte, and its
// failures are left for the pin that needs the page to meet.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "kv/spill_file.h"

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
  // Disk tier (0 without a spill directory). bytes_in_use counts live
  // allocations wherever they are; of them, spilled_bytes are on disk only
  // (not in RAM, not in bytes_reserved).
  uint64_t spilled_bytes = 0;
  int64_t spilled_pages = 0;
  uint64_t spill_file_bytes = 0;  // size of the page file (slots, used or free)
  int64_t spill_writes = 0;       // pages written to disk since construction
  int64_t spill_reads = 0;        // pages read back since construction
  // Of spill_reads, pages the read-ahead read (the rest were read on demand
  // by a pin), and of those, how many a pin found in RAM (or being read)
  // before they went back to disk.
  int64_t spill_reads_ahead = 0;
  int64_t read_ahead_hits = 0;
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
  // With a non-empty `spill_dir` (and a budget): the disk tier. Throws
  // KvSpillError when the directory cannot hold the page file; warns once
  // on stderr when it is on tmpfs (RAM).
  PagePool(uint64_t budget_bytes, const std::string& spill_dir);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // 64-byte aligned, uninitialized, refcount 1. Throws KvBudgetExceeded past
  // the budget, KvOutOfMemory when the system cannot provide the bytes.
  // `movable`: the bytes may move to the disk tier while not pinned (KV
  // pages); the new allocation is resident and not pinned. With the disk
  // tier, an allocation that only pinned pages stand in the way of waits
  // for them to be released (the caller must hold no pins).
  uint8_t* allocate(size_t bytes, bool movable = false);
  // Brings the movable pages among `pages` into RAM (reading them back on
  // `threads`, evicting unpinned others) and pins them until unpin(); others
  // are ignored. `for_write`: the caller changes their bytes (the disk copy
  // is stale). When the pages do not fit because other callers hold pins,
  // waits for those to be released (the caller must hold no pins itself);
  // throws KvBudgetExceeded when they cannot fit even so, KvSpillError on a
  // disk error; either way nothing stays pinned by this call.
  void pin(const std::vector<uint8_t*>& pages, ThreadPool* threads = nullptr,
           bool for_write = false);
  void unpin(const std::vector<uint8_t*>& pages);
  // Queues `pages` (in the order they will be pinned) for the I/O thread to
  // read back those on disk, as far as RAM allows (see the top of this
  // file); returns at once. No-op without a disk tier, with read-ahead off,
  // or when none of them is on disk. Pages released meanwhile are skipped.
  void read_ahead(const std::vector<uint8_t*>& pages);
  // Read-ahead is on by default; off, pins read every page on demand (the
  // results are identical either way).
  void set_read_ahead(bool on);
  bool read_ahead_on() const;
  // Waits until the I/O thread has no read-ahead queued or under way (a
  // consistent moment for stats(): otherwise pages may still be coming back).
  void wait_read_ahead_idle();
  // How many movable allocations of `bytes` could be pinned at once now:
  // the budget less what never moves and what is pinned (INT64_MAX without
  // a budget). Attention sizes its rounds by it.
  int64_t pinnable(size_t bytes) const;
  // Whether a live allocation's bytes are in RAM.
  bool resident(const uint8_t* page) const;
  bool spilling() const { return spill_ != nullptr; }
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
    size_t bytes = 0;
    int refs = 0;
    bool movable = false;
    bool resident = true;
    bool dirty = true;     // the disk copy (if any) is stale
    bool loading = false;  // being read back (by a pin() or the read-ahead) without the lock
    bool ahead = false;    // read back by the read-ahead and not pinned since
    int pins = 0;
    int64_t slot = -1;      // offset in the page file, -1 = none
    uint64_t checksum = 0;  // of the slot's bytes
    // In lru_of(*this) while resident, movable, unpinned and not loading.
    std::list<uint8_t*>::iterator lru;
  };
  void trim_locked();
  // RAM an allocation of `bytes` takes (whole OS pages for movable ones).
  size_t footprint(size_t bytes, bool movable) const;
  // Evicts least recently used unpinned pages until `bytes` more fit in the
  // budget; false when they do not (everything left is pinned).
  // `spare_ahead`: pages read ahead and not pinned yet are not evicted
  // (the read-ahead's own room); else they go after every other.
  bool make_room_locked(size_t bytes, bool spare_ahead = false);
  // Pins `pages` (distinct); false when a page another reader was reading
  // back ended on disk (nothing stays pinned: the caller starts over).
  bool pin_locked(const std::vector<uint8_t*>& pages, ThreadPool* threads, bool for_write,
                  std::unique_lock<std::mutex>& lock);
  void io_loop();  // the read-ahead thread
  void evict_locked(uint8_t* page, Live& live);
  void free_bytes(uint8_t* p, size_t bytes, bool movable);

  const uint64_t budget_;
  mutable std::mutex mutex_;
  uint64_t in_use_ = 0;
  uint64_t reserved_ = 0;
  uint64_t shared_ = 0;
  int64_t shared_pages_ = 0;
  std::unordered_map<const uint8_t*, Live> live_;
  std::map<std::pair<size_t, bool>, std::vector<uint8_t*>> free_;  // (bytes, movable)
  // Disk tier.
  std::unique_ptr<SpillFile> spill_;
  std::list<uint8_t*> lru_;  // front = coldest
  // Pages read ahead and not pinned since: evicted only after every page
  // of lru_, and never to make room for another read-ahead.
  std::list<uint8_t*> ahead_lru_;
  std::list<uint8_t*>& lru_of(const Live& live) { return live.ahead ? ahead_lru_ : lru_; }
  uint64_t spilled_ = 0;
  int64_t spilled_pages_ = 0, spill_writes_ = 0, spill_reads_ = 0;
  uint64_t pinned_ = 0;  // RAM of pinned movable pages
  uint64_t unpins_ = 0;  // counts releases of pins and allocations (waits watch it)
  uint64_t fixed_ = 0;   // RAM of live allocations that never move
  // Read-ahead.
  bool read_ahead_on_ = true;
  bool stopping_ = false;
  int64_t ahead_loading_ = 0;  // pages the I/O thread is reading now
  bool io_busy_ = false;       // the I/O thread is working through a request
  int64_t spill_reads_ahead_ = 0, read_ahead_hits_ = 0;
  std::deque<std::vector<uint8_t*>> ahead_queue_;
  std::condition_variable io_wake_;
  std::thread io_;  // started by the first read_ahead()
  // Signalled when a read back ends, pins are released or an allocation is freed.
  std::condition_variable loaded_;
};

// Pins pages for a scope (PagePool::pin / unpin).
class PagePins {
 public:
  PagePins(PagePool& pool, std::vector<uint8_t*> pages, ThreadPool* threads = nullptr,
           bool for_write = false)
      : pool_(pool), pages_(std::move(pages)) {
    pool_.pin(pages_, threads, for_write);
  }
  ~PagePins() { pool_.unpin(pages_); }
  PagePins(const PagePins&) = delete;
  PagePins& operator=(const PagePins&) = delete;

 private:
  PagePool& pool_;
  std::vector<uint8_t*> pages_;
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
