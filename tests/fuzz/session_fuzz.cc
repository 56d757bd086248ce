// Session files: arbitrary bytes loaded into a KV cache as a saved session.
// Input: one selector byte (which cache: f16 or k4v2), then the file. A
// load that fails must leave the cache exactly as it was (here: 5 tokens);
// one that succeeds must give a cache that attention can read.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "common/thread_pool.h"
#include "fuzz_target.h"
#include "session_fuzz.h"

namespace {

// One scratch file per process, rewritten for every input (the loader
// reads files, as a session is read from disk).
const std::string& scratch_path() {
  static const std::string path = [] {
    const auto dir = std::filesystem::temp_directory_path();
    return (dir / ("turbokv-fuzz-session-" + std::to_string(::getpid()))).string();
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  {
    std::ofstream out(scratch_path(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), std::streamsize(size - 1));
  }
  auto cache = tkv::fuzz::make_session_cache(data[0]);
  tkv::fuzz::fill_session_cache(*cache, 5, 1);
  const tkv::kv::KvStats before = cache->stats();
  try {
    cache->load(scratch_path(), tkv::fuzz::kSessionFingerprint);
  } catch (const tkv::Error&) {
    const tkv::kv::KvStats after = cache->stats();
    if (after.n_tokens != before.n_tokens || after.persistent_bytes != before.persistent_bytes) {
      std::fprintf(stderr, "a failed load changed the cache (%lld -> %lld tokens)\n",
                   static_cast<long long>(before.n_tokens), static_cast<long long>(after.n_tokens));
      std::abort();
    }
    return 0;
  }
  // Loaded: one more token must go through write + attend over the pages.
  try {
    if (cache->n_tokens() < cache->shape().max_tokens) tkv::fuzz::fill_session_cache(*cache, 1, 2);
  } catch (const tkv::Error&) {
  }
  return 0;
}
