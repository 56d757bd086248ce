#include "kv/page_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <new>

#include "common/sys_info.h"

namespace tkv::kv {

namespace {
size_t round_up_64(size_t n) {
  return (n + 63) & ~size_t(63);
}

// Movable pages are whole OS pages, so their RAM can be returned while they are on disk.
constexpr size_t kOsPage = 4096;

uint8_t* aligned_bytes(size_t bytes) {
  void* p = std::aligned_alloc(64, round_up_64(bytes));
  if (!p)
    throw KvOutOfMemory(
        str("KV cache: out of memory: the system could not provide ", format_bytes(bytes)));
  return static_cast<uint8_t*>(p);
}

uint8_t* mapped_bytes(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw KvOutOfMemory(
        str("KV cache: out of memory: the system could not provide ", format_bytes(bytes)));
  return static_cast<uint8_t*>(p);
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14
#endif

// Gives an evicted page's mapping its RAM back in one call before it is read
// into (instead of one fault per OS page during the read); where the kernel
// lacks MADV_POPULATE_WRITE the read faults the pages in as before.
void populate(uint8_t* p, size_t footprint) {
  ::madvise(p, footprint, MADV_POPULATE_WRITE);
}

std::vector<uint8_t*> distinct(std::vector<uint8_t*> pages) {
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  return pages;
}
}  // namespace

PagePool::PagePool(uint64_t budget_bytes) : budget_(budget_bytes) {}

PagePool::PagePool(uint64_t budget_bytes, const std::string& spill_dir) : budget_(budget_bytes) {
  if (spill_dir.empty()) return;
  if (budget_bytes == 0)
    throw KvSpillError("KV spill directory: needs a budget (the RAM the pages may hold)");
  bool on_tmpfs = false;
  spill_ = std::make_unique<SpillFile>(spill_dir, on_tmpfs);
  static std::atomic<bool> warned{false};
  if (on_tmpfs && !warned.exchange(true))
    std::fprintf(stderr,
                 "warning: KV spill directory %s is on tmpfs: pages moved there still take RAM\n",
                 spill_dir.c_str());
}

PagePool::~PagePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  io_wake_.notify_all();
  if (io_.joinable()) io_.join();
  trim_locked();
}

size_t PagePool::footprint(size_t bytes, bool movable) const {
  return movable ? (bytes + kOsPage - 1) / kOsPage * kOsPage : bytes;
}

void PagePool::free_bytes(uint8_t* p, size_t bytes, bool movable) {
  if (movable)
    ::munmap(p, footprint(bytes, true));
  else
    std::free(p);
}

uint8_t* PagePool::allocate(size_t bytes, bool movable) {
  const bool mov = movable && spill_ != nullptr;
  const size_t fp = footprint(bytes, mov);
  std::unique_lock<std::mutex> lock(mutex_);
  uint8_t* p = nullptr;
  auto it = free_.find({bytes, mov});
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    while (budget_ != 0 && reserved_ + fp > budget_) {
      trim_locked();  // free-listed pages of other sizes may be what stands in the way
      if (reserved_ + fp <= budget_ || (spill_ && make_room_locked(fp))) break;
      if (spill_ && (pinned_ > 0 || ahead_loading_ > 0)) {
        // What stands in the way is pinned by other sequences' steps (a
        // caller allocating holds no pins) or being read ahead: wait until
        // they release them.
        const uint64_t seen = unpins_;
        loaded_.wait(lock, [&] { return unpins_ != seen; });
        continue;
      }
      throw KvBudgetExceeded(str("KV cache budget exhausted: ", format_bytes(reserved_),
                                 spill_ ? " in RAM and pinned, " : " in use, ", format_bytes(bytes),
                                 " more needed, budget ", format_bytes(budget_)));
    }
    p = mov ? mapped_bytes(fp) : aligned_bytes(bytes);
    reserved_ += fp;
  }
  try {
    Live fresh;
    fresh.bytes = bytes;
    fresh.refs = 1;
    fresh.movable = mov;
    auto [live, inserted] = live_.emplace(p, fresh);
    TKV_CHECK(inserted);
    if (mov) live->second.lru = lru_.insert(lru_.end(), p);
  } catch (...) {  // the bookkeeping could not grow: the bytes stay free-listed
    live_.erase(p);
    free_[{bytes, mov}].push_back(p);
    throw;
  }
  in_use_ += bytes;
  if (!mov) fixed_ += fp;
  return p;
}

bool PagePool::make_room_locked(size_t bytes, bool spare_ahead) {
  if (reserved_ + bytes > budget_) trim_locked();
  while (reserved_ + bytes > budget_) {
    std::list<uint8_t*>& from = !lru_.empty() || spare_ahead ? lru_ : ahead_lru_;
    if (from.empty()) return false;
    uint8_t* coldest = from.front();
    evict_locked(coldest, live_.at(coldest));
  }
  return true;
}

void PagePool::evict_locked(uint8_t* page, Live& live) {
  if (live.dirty || live.slot < 0) {
    if (live.slot < 0) live.slot = spill_->take_slot(live.bytes);
    live.dirty = true;                                           // until the write below completes
    live.checksum = spill_->write(live.slot, page, live.bytes);  // throws: page stays in RAM
    live.dirty = false;
    ++spill_writes_;
  }
  const size_t fp = footprint(live.bytes, true);
  ::madvise(page, fp, MADV_DONTNEED);  // the mapping stays; its RAM goes back to the system
  lru_of(live).erase(live.lru);
  live.ahead = false;
  live.resident = false;
  reserved_ -= fp;
  spilled_ += live.bytes;
  ++spilled_pages_;
}

void PagePool::pin(const std::vector<uint8_t*>& pages_in, ThreadPool* threads, bool for_write) {
  if (!spill_) return;
  const std::vector<uint8_t*> pages = distinct(pages_in);
  std::unique_lock<std::mutex> lock(mutex_);
  // Starts over while a page another reader was reading back ends on disk.
  while (!pin_locked(pages, threads, for_write, lock)) continue;
}

bool PagePool::pin_locked(const std::vector<uint8_t*>& pages_in, ThreadPool* threads,
                          bool for_write, std::unique_lock<std::mutex>& lock) {
  std::vector<uint8_t*> pages, pinned, to_load;
  uint64_t own = 0;  // bytes this call pinned first (others may hold some of its pages)
  // Undoes this call's pins; pages it was reading back go back to disk.
  auto roll_back = [&](const std::vector<uint8_t*>& failed) {
    for (uint8_t* p : failed) {
      Live& live = live_.at(p);
      live.loading = false;
      live.resident = false;
      const size_t fp = footprint(live.bytes, true);
      ::madvise(p, fp, MADV_DONTNEED);
      reserved_ -= fp;
      spilled_ += live.bytes;
      ++spilled_pages_;
    }
    for (uint8_t* p : pinned) {
      Live& live = live_.at(p);
      if (--live.pins > 0) continue;
      pinned_ -= footprint(live.bytes, true);
      if (live.resident && !live.loading) live.lru = lru_.insert(lru_.end(), p);
    }
    pinned.clear();
    to_load.clear();
    own = 0;
    ++unpins_;
    loaded_.notify_all();
  };
  // Pages in RAM (or being read) are pinned first, so that making room for
  // the others never evicts one of them.
  auto order = [&] {
    pages.clear();
    for (int pass = 0; pass < 2; ++pass)
      for (uint8_t* p : pages_in) {
        auto it = live_.find(p);
        if (it == live_.end() || !it->second.movable) continue;
        if (it->second.resident == (pass == 0)) pages.push_back(p);
      }
  };
  order();
  for (size_t next = 0; next < pages.size(); ++next) {
    uint8_t* p = pages[next];
    Live& live = live_.at(p);
    if (!live.resident) {
      const size_t fp = footprint(live.bytes, true);
      bool fits = false;
      try {
        fits = make_room_locked(fp);
      } catch (...) {
        roll_back(to_load);  // not read yet: they go back to disk as they were
        throw;
      }
      if (!fits) {
        const bool others_pinned = pinned_ > own || ahead_loading_ > 0;
        roll_back(to_load);
        if (others_pinned) {
          // Other sequences' pins are released when their step ends, and
          // read-ahead pages become evictable once read: wait for that,
          // then start over (this call holds nothing meanwhile).
          const uint64_t seen = unpins_;
          loaded_.wait(lock, [&] { return unpins_ != seen; });
          order();
          next = size_t(-1);
          continue;
        }
        throw KvBudgetExceeded(str("KV cache budget exhausted: ", format_bytes(reserved_),
                                   " of pages attention needs at once are in RAM, ",
                                   format_bytes(live.bytes), " more needed, budget ",
                                   format_bytes(budget_)));
      }
      reserved_ += fp;
      spilled_ -= live.bytes;
      --spilled_pages_;
      live.resident = true;
      live.loading = true;
      to_load.push_back(p);
    } else {
      if (live.pins == 0 && !live.loading) lru_of(live).erase(live.lru);
      if (live.ahead) {  // read ahead for this pin (or one like it)
        ++read_ahead_hits_;
        live.ahead = false;
      }
    }
    if (++live.pins == 1) {
      pinned_ += footprint(live.bytes, true);
      own += footprint(live.bytes, true);
    }
    if (for_write) live.dirty = true;
    pinned.push_back(p);
  }
  if (!to_load.empty()) {
    // Read back without the lock: the pages are pinned and marked loading.
    std::vector<std::exception_ptr> errors(to_load.size());
    std::vector<Live*> lives;
    for (uint8_t* p : to_load) lives.push_back(&live_.at(p));
    lock.unlock();
    auto read_one = [&](int64_t i, int) {
      try {
        populate(to_load[size_t(i)], footprint(lives[size_t(i)]->bytes, true));
        spill_->read(lives[size_t(i)]->slot, to_load[size_t(i)], lives[size_t(i)]->bytes,
                     lives[size_t(i)]->checksum);
      } catch (...) {
        errors[size_t(i)] = std::current_exception();
      }
    };
    if (threads && to_load.size() > 1)
      threads->run(int64_t(to_load.size()), read_one);
    else
      for (size_t i = 0; i < to_load.size(); ++i) read_one(int64_t(i), 0);
    lock.lock();
    std::vector<uint8_t*> failed;
    std::exception_ptr first;
    for (size_t i = 0; i < to_load.size(); ++i) {
      if (errors[i]) {
        failed.push_back(to_load[i]);
        if (!first) first = errors[i];
      } else {
        lives[i]->loading = false;
        ++spill_reads_;
      }
    }
    if (first) {
      roll_back(failed);
      std::rethrow_exception(first);
    }
    loaded_.notify_all();
  }
  // Pages another pin() or the read-ahead is reading back are usable once
  // it is done; one whose read failed is on disk again, and this call starts
  // over to read it itself (and meet the error, if it is one).
  for (uint8_t* p : pinned) {
    Live& live = live_.at(p);
    loaded_.wait(lock, [&] { return !live.loading; });
    if (!live.resident) {
      roll_back({});
      return false;
    }
  }
  return true;
}

void PagePool::read_ahead(const std::vector<uint8_t*>& pages) {
  if (!spill_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!read_ahead_on_ || stopping_) return;
  std::vector<uint8_t*> wanted;
  for (uint8_t* p : pages) {
    auto it = live_.find(p);
    if (it != live_.end() && it->second.movable && !it->second.resident) wanted.push_back(p);
  }
  if (wanted.empty()) return;
  // Requests nobody got to are stale by now (their steps have pinned their
  // pages themselves): the queue keeps the newest few.
  constexpr size_t kMaxRequests = 8;
  if (ahead_queue_.size() >= kMaxRequests) ahead_queue_.pop_front();
  ahead_queue_.push_back(std::move(wanted));
  if (!io_.joinable()) io_ = std::thread([this] { io_loop(); });
  io_wake_.notify_one();
}

void PagePool::io_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    io_wake_.wait(lock, [&] { return stopping_ || !ahead_queue_.empty(); });
    if (stopping_) return;
    const std::vector<uint8_t*> request = std::move(ahead_queue_.front());
    ahead_queue_.pop_front();
    io_busy_ = true;
    for (uint8_t* p : request) {
      if (stopping_ || !read_ahead_on_) break;
      auto it = live_.find(p);
      if (it == live_.end() || !it->second.movable || it->second.resident) continue;
      Live& live = it->second;
      const size_t fp = footprint(live.bytes, true);
      bool fits = false;
      try {
        fits = make_room_locked(fp, /*spare_ahead=*/true);
      } catch (const Error&) {  // an eviction's write failed: leave it to the pins
      }
      if (!fits) break;  // what follows would not fit either
      reserved_ += fp;
      spilled_ -= live.bytes;
      --spilled_pages_;
      live.resident = true;
      live.loading = true;
      live.ahead = true;
      ++ahead_loading_;
      const int64_t slot = live.slot;
      const size_t bytes = live.bytes;
      const uint64_t checksum = live.checksum;
      lock.unlock();
      bool ok = true;
      try {
        populate(p, fp);
        spill_->read(slot, p, bytes, checksum);
      } catch (const Error&) {
        ok = false;
      }
      lock.lock();
      // Still live: release() waits for a page being read.
      Live& done = live_.at(p);
      done.loading = false;
      --ahead_loading_;
      if (ok) {
        ++spill_reads_;
        ++spill_reads_ahead_;
        if (done.pins == 0) done.lru = lru_of(done).insert(lru_of(done).end(), p);
      } else {  // back to disk; the pin that needs it reads it and reports the error
        done.ahead = false;
        done.resident = false;
        ::madvise(p, fp, MADV_DONTNEED);
        reserved_ -= fp;
        spilled_ += bytes;
        ++spilled_pages_;
      }
      ++unpins_;
      loaded_.notify_all();
    }
    io_busy_ = false;
    loaded_.notify_all();
  }
}

void PagePool::wait_read_ahead_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  loaded_.wait(lock, [&] { return stopping_ || (ahead_queue_.empty() && !io_busy_); });
}

void PagePool::set_read_ahead(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  read_ahead_on_ = on;
  if (!on) ahead_queue_.clear();
}

bool PagePool::read_ahead_on() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return spill_ != nullptr && read_ahead_on_;
}

int64_t PagePool::pinnable(size_t bytes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (budget_ == 0) return std::numeric_limits<int64_t>::max();
  const uint64_t used = fixed_ + pinned_;
  return used >= budget_ ? 0 : int64_t((budget_ - used) / footprint(bytes, spill_ != nullptr));
}

void PagePool::unpin(const std::vector<uint8_t*>& pages_in) {
  if (!spill_) return;
  const std::vector<uint8_t*> pages = distinct(pages_in);
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint8_t* p : pages) {
    auto it = live_.find(p);
    if (it == live_.end() || !it->second.movable) continue;
    Live& live = it->second;
    TKV_CHECK(live.pins > 0);
    if (--live.pins > 0) continue;
    pinned_ -= footprint(live.bytes, true);
    if (live.resident && !live.loading) live.lru = lru_.insert(lru_.end(), p);
  }
  ++unpins_;
  loaded_.notify_all();
}

bool PagePool::resident(const uint8_t* page) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(page);
  return it != live_.end() && it->second.resident;
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
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = live_.find(page);
  TKV_CHECK(it != live_.end() && it->second.bytes == bytes);
  if (it->second.loading) {  // the read-ahead is filling it: its bytes must stay mapped
    loaded_.wait(lock, [&] { return !live_.at(page).loading; });
    it = live_.find(page);
  }
  const int refs = --it->second.refs;
  if (refs == 1) {
    shared_ -= bytes;
    --shared_pages_;
  }
  if (refs > 0) return;
  ++unpins_;  // room may have been made: allocations waiting retry
  loaded_.notify_all();
  const Live live = it->second;
  live_.erase(it);
  in_use_ -= bytes;
  if (!live.movable) fixed_ -= footprint(bytes, false);
  if (live.movable) {
    TKV_CHECK(live.pins == 0);
    spill_->free_slot(live.slot, bytes);
    if (!live.resident) {  // its RAM is already gone: unmap rather than free-list
      spilled_ -= bytes;
      --spilled_pages_;
      free_bytes(page, bytes, true);
      return;
    }
    lru_of(live).erase(live.lru);
  }
  try {
    free_[{bytes, live.movable}].push_back(page);
  } catch (const std::bad_alloc&) {
    // Releases run in destructors, often while an out-of-memory error
    // unwinds: a free list that cannot grow gives the bytes back instead.
    free_bytes(page, bytes, live.movable);
    reserved_ -= footprint(bytes, live.movable);
  }
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
  for (auto& [key, pages] : free_) {
    for (uint8_t* p : pages) free_bytes(p, key.first, key.second);
    reserved_ -= footprint(key.first, key.second) * pages.size();
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
  s.spilled_bytes = spilled_;
  s.spilled_pages = spilled_pages_;
  s.spill_file_bytes = spill_ ? spill_->file_bytes() : 0;
  s.spill_writes = spill_writes_;
  s.spill_reads = spill_reads_;
  s.spill_reads_ahead = spill_reads_ahead_;
  s.read_ahead_hits = read_ahead_hits_;
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
