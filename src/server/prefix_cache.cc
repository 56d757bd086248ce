#include "server/prefix_cache.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace tkv::server {

PrefixCache::PrefixCache(int block_tokens, ReuseRule rule, int max_entries, CacheDir* disk,
                         CacheWriter* writer)
    : index_(block_tokens),
      rule_(rule),
      max_entries_(max_entries),
      disk_(disk),
      writer_(disk ? writer : nullptr) {
  TKV_CHECK(rule.grid >= 1);
}

PrefixCache::~PrefixCache() = default;

PrefixCache::Hit PrefixCache::find(std::span<const int32_t> prompt, const NewSession& make,
                                   bool read_disk) {
  const int64_t prompt_len = int64_t(prompt.size());
  uint64_t best_id = 0;
  int64_t best = 0, shared = 0;
  for (uint64_t id : index_.candidates(prompt)) {
    const std::vector<int32_t>& held = entries_.at(id).session->tokens();
    const int64_t common = common_prefix(held, prompt);
    shared = std::max(shared, rule_.boundary(common, prompt_len));
    const int64_t r = rule_.point(int64_t(held.size()), common, prompt_len);
    if (r > best) {
      best = r;
      best_id = id;
    }
  }
  bool loaded_now = false;
  if (disk_ && read_disk) {
    CacheDir::Match m = disk_->find(prompt);
    // A prefix on its way to disk that would serve better: wait for it
    // (its file is complete, and indexed, once the writer is idle).
    if (writer_ && writer_->best_reuse(prompt, rule_) > std::max(best, m.reuse)) {
      writer_->wait_idle();
      m = disk_->find(prompt);
    }
    shared = std::max(shared, rule_.boundary(m.common, prompt_len));
    if (!m.path.empty() && m.reuse > best) {
      std::unique_ptr<runtime::Sequence> loaded = make();
      if (disk_->load(m.path, *loaded)) {
        ++disk_loads_;
        const uint64_t id = next_id_;
        insert(std::move(loaded));
        if (entries_.count(id)) {
          best_id = id;
          best = rule_.point(entries_.at(id).session->tokens(), prompt);
          loaded_now = true;
        }
      }
    }
  }
  if (best_id == 0 || best == 0) return {.shared = shared};
  Entry& e = entries_.at(best_id);
  e.last_use = ++clock_;
  return {.session = e.session.get(), .reuse = best, .from_disk = loaded_now, .shared = shared};
}

uint64_t PrefixCache::prompt_hash(std::span<const int32_t> tokens) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the ids' bytes
  for (int32_t t : tokens)
    for (int b = 0; b < 4; ++b) h = (h ^ ((uint32_t(t) >> (8 * b)) & 0xFF)) * 0x100000001b3ull;
  return h;
}

PrefixCache::WholeHit PrefixCache::find_whole(std::span<const int32_t> prompt) {
  const auto it = whole_.find(prompt_hash(prompt));
  if (it == whole_.end()) return {};
  for (uint64_t id : it->second) {
    Entry& e = entries_.at(id);
    const std::vector<int32_t>& held = e.session->tokens();
    if (!std::equal(held.begin(), held.end(), prompt.begin(), prompt.end())) continue;
    e.last_use = ++clock_;
    return {.session = e.session.get(), .logits = e.logits};
  }
  return {};
}

void PrefixCache::insert_whole(std::unique_ptr<runtime::Sequence> session,
                               std::vector<float> logits) {
  TKV_CHECK(!logits.empty());
  const std::vector<int32_t>& tokens = session->tokens();
  if (tokens.empty()) return;
  if (WholeHit old = find_whole(tokens); old.session) take(old.session);
  const uint64_t id = next_id_++;
  whole_[prompt_hash(tokens)].push_back(id);
  entries_.emplace(id, Entry{std::move(session), ++clock_, std::move(logits)});
  // Their logits live outside the pool's budget: the oldest whole entries
  // beyond kMaxWholeEntries go (never the new one: it is the newest).
  std::vector<std::pair<uint64_t, uint64_t>> whole;  // (last use, id)
  for (const auto& [eid, e] : entries_)
    if (!e.logits.empty()) whole.emplace_back(e.last_use, eid);
  std::sort(whole.begin(), whole.end());
  for (size_t i = 0; i + kMaxWholeEntries < whole.size(); ++i) remove(whole[i].second);
  while (int(entries_.size()) > max_entries_) evict_lru();
}

void PrefixCache::unindex(uint64_t id, const Entry& e) {
  if (e.logits.empty()) {
    index_.remove(id, e.session->tokens());
    return;
  }
  const auto it = whole_.find(prompt_hash(e.session->tokens()));
  if (it == whole_.end()) return;
  std::erase(it->second, id);
  if (it->second.empty()) whole_.erase(it);
}

void PrefixCache::insert(std::unique_ptr<runtime::Sequence> session) {
  const std::vector<int32_t>& tokens = session->tokens();
  if (int64_t(tokens.size()) < index_.block_tokens()) return;
  std::vector<uint64_t> redundant;
  for (uint64_t id : index_.candidates(tokens)) {
    const std::vector<int32_t>& held = entries_.at(id).session->tokens();
    if (rule_.serves(held, tokens)) {
      entries_.at(id).last_use = ++clock_;
      return;
    }
    if (rule_.serves(tokens, held)) redundant.push_back(id);
  }
  for (uint64_t id : redundant) remove(id);
  const uint64_t id = next_id_++;
  index_.add(id, tokens);
  entries_.emplace(id, Entry{std::move(session), ++clock_, {}});
  while (int(entries_.size()) > max_entries_) evict_lru();  // never the new one: it is the newest
}

void PrefixCache::remove(uint64_t id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  unindex(id, it->second);
  entries_.erase(it);
}

std::unique_ptr<runtime::Sequence> PrefixCache::take(const runtime::Sequence* session) {
  for (auto& [id, e] : entries_)
    if (e.session.get() == session) {
      unindex(id, e);
      std::unique_ptr<runtime::Sequence> taken = std::move(e.session);
      entries_.erase(id);
      return taken;
    }
  return nullptr;
}

bool PrefixCache::evict_lru() {
  if (entries_.empty()) return false;
  auto oldest = entries_.begin();
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->second.last_use < oldest->second.last_use) oldest = it;
  ++evictions_;
  unindex(oldest->first, oldest->second);
  const bool whole = !oldest->second.logits.empty();
  std::unique_ptr<runtime::Sequence> session = std::move(oldest->second.session);
  entries_.erase(oldest);
  if (whole) return true;  // a session file has no logits: dropped
  // A no-op when a file holds it already.
  if (writer_ && !disk_->serves(session->tokens()))
    writer_->submit(std::move(session));
  else if (disk_)
    disk_->store(*session);
  return true;
}

void PrefixCache::persist_all() {
  if (!disk_) return;
  if (!writer_) {
    for (auto& [id, e] : entries_)
      if (e.logits.empty()) disk_->store(*e.session);
    return;
  }
  for (auto& [id, e] : entries_)
    if (e.logits.empty() && !disk_->serves(e.session->tokens()))
      writer_->submit(std::move(e.session));
  clear();
  writer_->wait_idle();
}

void PrefixCache::clear() {
  entries_.clear();
  whole_.clear();
  index_ = PrefixIndex(index_.block_tokens());
}

uint64_t PrefixCache::exclusive_bytes() const {
  uint64_t bytes = 0;
  for (const auto& [id, e] : entries_) bytes += e.session->cache().stats().exclusive_bytes;
  return bytes;
}

}  // namespace tkv::server
