#include "server/cache_dir.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>

#include "common/error.h"
#include "kv/page_pool.h"
#include "runtime/session_state.h"

namespace tkv::server {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "prefix-";
constexpr const char* kSuffix = ".tkvs";
constexpr const char* kKeyName = "turbokv.prefix_cache.key";

bool is_cache_file(const std::string& name) {
  return name.starts_with(kPrefix) && name.ends_with(kSuffix);
}

// What a killed writer leaves: "<file>.staging.PID" (KvCache::save) and
// "<...>.tmp.PID" (AtomicFileWriter).
bool is_debris(const std::string& name) {
  return name.starts_with(kPrefix) && !name.ends_with(kSuffix) &&
         (name.find(".staging.") != std::string::npos || name.find(".tmp.") != std::string::npos);
}

}  // namespace

CacheDir::CacheDir(std::string dir, uint64_t max_bytes, std::string key, int block_tokens,
                   ReuseRule rule, Warn warn)
    : dir_(std::move(dir)),
      max_bytes_(max_bytes),
      key_(std::move(key)),
      rule_(rule),
      warn_(std::move(warn)),
      index_(block_tokens) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_, ec)) {
    usable_ = false;
    warn_(str("prefix cache: cannot use --cache-dir ", dir_, ": ",
              ec ? ec.message() : "not a directory", "; prefixes are kept in memory only"));
    return;
  }
  index();
}

void CacheDir::index() {
  std::vector<std::pair<fs::file_time_type, File>> found;
  std::error_code ec, ignored;
  // The error_code forms throughout: a directory that turns unreadable
  // midway ends the scan, it does not throw out of the server's start.
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    if (is_debris(name)) {
      fs::remove(e.path(), ignored);
      continue;
    }
    if (!is_cache_file(name) || !e.is_regular_file(ignored)) continue;
    File f;
    f.path = e.path().string();
    try {
      kv::SessionMeta meta = runtime::peek_session(f.path);
      const auto k = meta.strings.find(kKeyName);
      if (k == meta.strings.end() || k->second != key_) continue;  // another model or setting
      f.tokens = std::move(meta.tokens);
    } catch (const Error& err) {
      warn_(str("prefix cache: ", err.what(), "; deleted"));
      fs::remove(f.path, ignored);
      continue;
    }
    f.bytes = e.file_size(ignored);
    found.emplace_back(e.last_write_time(ignored), std::move(f));
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [time, f] : found) add(std::move(f));
  trim(0);
}

void CacheDir::add(File file) {
  file.order = next_order_++;
  const uint64_t id = next_id_++;
  index_.add(id, file.tokens);
  total_bytes_ += file.bytes;
  files_.emplace(id, std::move(file));
}

void CacheDir::remove(uint64_t id, bool delete_file) {
  const auto it = files_.find(id);
  if (it == files_.end()) return;
  index_.remove(id, it->second.tokens);
  total_bytes_ -= it->second.bytes;
  if (delete_file) {
    std::error_code ec;
    fs::remove(it->second.path, ec);
  }
  files_.erase(it);
}

void CacheDir::trim(uint64_t keep_id) {
  while (max_bytes_ > 0 && total_bytes_ > max_bytes_) {
    uint64_t oldest = 0;
    for (const auto& [id, f] : files_)
      if (id != keep_id && (oldest == 0 || f.order < files_.at(oldest).order)) oldest = id;
    if (oldest == 0) oldest = keep_id;
    if (oldest == 0) return;
    remove(oldest, true);
    if (oldest == keep_id) return;
  }
}

bool CacheDir::usable() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return usable_;
}

int CacheDir::files() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return int(files_.size());
}

uint64_t CacheDir::bytes() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return total_bytes_;
}

CacheDir::Match CacheDir::find(std::span<const int32_t> prompt) const {
  const std::lock_guard<std::mutex> lock(mu_);
  Match best;
  for (uint64_t id : index_.candidates(prompt)) {
    const File& f = files_.at(id);
    const int64_t common = common_prefix(f.tokens, prompt);
    best.common = std::max(best.common, common);
    const int64_t reuse = rule_.point(int64_t(f.tokens.size()), common, int64_t(prompt.size()));
    if (reuse > best.reuse) {
      best.path = f.path;
      best.reuse = reuse;
    }
  }
  return best;
}

bool CacheDir::serves(std::span<const int32_t> tokens) const {
  const std::lock_guard<std::mutex> lock(mu_);
  return serves_locked(tokens);
}

bool CacheDir::serves_locked(std::span<const int32_t> tokens) const {
  for (uint64_t id : index_.candidates(tokens))
    if (rule_.serves(files_.at(id).tokens, tokens)) return true;
  return false;
}

bool CacheDir::load(const std::string& path, runtime::Sequence& session) {
  // Held while reading: the writer's trim() must not delete the file under
  // it (writes themselves run unlocked).
  const std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = 0;
  for (const auto& [i, f] : files_)
    if (f.path == path) id = i;
  if (id == 0) return false;
  try {
    session.load(path);
    return true;
  } catch (const kv::KvBudgetExceeded&) {
    throw;
  } catch (const kv::KvOutOfMemory&) {
    throw;
  } catch (const Error& err) {
    warn_(str("prefix cache: ", err.what(), "; deleted"));
    remove(id, true);
    return false;
  }
}

void CacheDir::warn_write(const std::string& why) {
  if (warned_write_) return;
  warned_write_ = true;
  warn_(str("prefix cache: cannot write to ", dir_, ": ", why,
            "; prefixes that do not fit in memory are dropped"));
}

bool CacheDir::store(const runtime::Sequence& session) {
  const std::vector<int32_t>& tokens = session.tokens();
  if (tokens.empty()) return false;
  File f;
  {
    const std::lock_guard<std::mutex> lock(mu_);
    if (!usable_) return false;
    if (serves_locked(tokens)) return true;
    for (const auto& w : writing_)
      if (rule_.serves(w, tokens)) return true;
    if (max_bytes_ > 0 && session.cache().stats().persistent_bytes > max_bytes_) return false;
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    const std::string name =
        str(kPrefix, std::chrono::duration_cast<std::chrono::nanoseconds>(now).count(), "-",
            next_id_++, kSuffix);
    f.path = (fs::path(dir_) / name).string();
    writing_.push_back(tokens);
  }
  // The file is written unlocked: lookups go on, and do not see it yet.
  std::string error;
  try {
    session.save(f.path, {{kKeyName, key_}});
  } catch (const Error& err) {
    error = err.what();
  }
  const std::lock_guard<std::mutex> lock(mu_);
  writing_.erase(std::find(writing_.begin(), writing_.end(), tokens));
  if (!error.empty()) {
    warn_write(error);
    return false;
  }
  std::error_code ec;
  f.bytes = fs::file_size(f.path, ec);
  f.tokens = tokens;
  // Files whose prompts this one serves are redundant now.
  std::vector<uint64_t> redundant;
  for (const auto& [id, old] : files_)
    if (rule_.serves(tokens, old.tokens)) redundant.push_back(id);
  for (uint64_t id : redundant) remove(id, true);
  const uint64_t id = next_id_;
  add(std::move(f));
  trim(id);
  return files_.count(id) != 0;
}

}  // namespace tkv::server
