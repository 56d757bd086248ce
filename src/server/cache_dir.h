// The disk tier of the prefix cache (--cache-dir DIR, --cache-dir-max SIZE):
// cached prefixes as session files (runtime/session_state.h: compressed
// pages, token ids, model fingerprint, XXH3 checksum, written atomically),
// so that a restarted server still has them.
//
//  - Startup indexes DIR by each file's token ids (peek_session: metadata
//    only, no pages read, no checksum); files of another model, KV setting
//    or context are left alone and not used; debris of a write that never
//    finished (a killed process's temporary files) is deleted.
//  - A file is loaded on demand, transactionally, into a fresh sequence;
//    one that fails its checks (corrupt, truncated) is never used: it is
//    deleted with one warning.
//  - store() writes a sequence unless a file serves every prompt it serves
//    (ReuseRule::serves), removes the files it makes redundant, then
//    removes the oldest files while the total is over the bound.
//  - A directory that cannot be created or written (read-only, full) gives
//    one warning; the server goes on without (or with what it could write).
// One server per directory: another one's unfinished files look like debris.
//
// Thread-safe: the scheduler looks files up and loads them while the
// background writer (cache_writer.h) stores others. A file is indexed only
// once it is complete, so a lookup never finds one being written; the
// lock is not held while a file is written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "runtime/generation.h"
#include "server/prefix_index.h"

namespace tkv::server {

class CacheDir {
 public:
  using Warn = std::function<void(const std::string&)>;
  // `key` identifies the model, KV settings, context and everything else
  // that decides a prefill's bits (prefill grid, threads): stored in every
  // file, and only files with this key are used. `rule`: where a file may
  // be reused.
  CacheDir(std::string dir, uint64_t max_bytes, std::string key, int block_tokens, ReuseRule rule,
           Warn warn);

  struct Match {
    std::string path;    // empty: no file serves the prompt
    int64_t reuse = 0;   // prompt tokens the file serves (ReuseRule::point)
    int64_t common = 0;  // the most tokens a file and the prompt share, reusable or not
  };
  Match find(std::span<const int32_t> prompt) const;
  // Restores `path` into `session` (empty). false, with one warning and the
  // file deleted, when the file is unusable; kv::KvBudgetExceeded passes
  // through (the file stays, the session is unchanged).
  bool load(const std::string& path, runtime::Sequence& session);
  // Writes `session` as a cache file (see above). Returns false when it was
  // not written (a failure warns once per directory).
  bool store(const runtime::Sequence& session);
  // Whether a file serves every prompt a sequence holding `tokens` serves.
  bool serves(std::span<const int32_t> tokens) const;

  bool usable() const;
  int files() const;
  uint64_t bytes() const;
  const std::string& dir() const { return dir_; }

 private:
  struct File {
    std::string path;
    std::vector<int32_t> tokens;
    uint64_t bytes = 0;
    uint64_t order = 0;  // age: smaller is older
  };
  void index();
  bool serves_locked(std::span<const int32_t> tokens) const;
  void add(File file);
  void remove(uint64_t id, bool delete_file);
  void trim(uint64_t keep_id);
  void warn_write(const std::string& why);

  std::string dir_;
  uint64_t max_bytes_;
  std::string key_;
  ReuseRule rule_;
  Warn warn_;
  mutable std::mutex mu_;  // everything below
  // Token ids of the files being written now (store() skips a sequence
  // they cover).
  std::vector<std::vector<int32_t>> writing_;
  bool usable_ = true;
  bool warned_write_ = false;
  PrefixIndex index_;
  std::map<uint64_t, File> files_;  // by id
  uint64_t next_id_ = 1;
  uint64_t next_order_ = 1;
  uint64_t total_bytes_ = 0;
};

}  // namespace tkv::server
