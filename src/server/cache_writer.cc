#include "server/cache_writer.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "server/prefix_index.h"

namespace tkv::server {

CacheWriter::CacheWriter(CacheDir& dir, int max_queued) : dir_(dir), max_queued_(max_queued) {
  TKV_CHECK(max_queued >= 1);
  thread_ = std::thread([this] { loop(); });
}

CacheWriter::~CacheWriter() {
  {
    const std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CacheWriter::submit(std::unique_ptr<runtime::Sequence> session) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return int(queue_.size()) < max_queued_; });
  queue_.push_back(std::move(session));
  lock.unlock();
  cv_.notify_all();
}

void CacheWriter::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

int CacheWriter::pending() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return int(queue_.size()) + (writing_ ? 1 : 0);
}

int64_t CacheWriter::best_reuse(std::span<const int32_t> prompt, const ReuseRule& rule) const {
  const std::lock_guard<std::mutex> lock(mu_);
  int64_t best = writing_ ? rule.point(writing_->tokens(), prompt) : 0;
  for (const auto& s : queue_) best = std::max(best, rule.point(s->tokens(), prompt));
  return best;
}

void CacheWriter::loop() {
  while (true) {
    const runtime::Sequence* session = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything is written
      writing_ = std::move(queue_.front());
      queue_.pop_front();
      session = writing_.get();
    }
    cv_.notify_all();  // room in the queue
    // A failure to write warns once (CacheDir::store) and drops the prefix.
    try {
      dir_.store(*session);
    } catch (const std::exception&) {
      // Out of memory building the file: the prefix is dropped.
    }
    std::unique_ptr<runtime::Sequence> done;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      done = std::move(writing_);
    }
    done.reset();  // its pages go back to the pool
    cv_.notify_all();
  }
}

}  // namespace tkv::server
