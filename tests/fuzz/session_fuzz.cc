// Session files: arbitrary bytes loaded into a KV cache as a saved session.
// Input: one selector byte (which cache: f16 or k4v2), then the file. A
// load that fails must leave the cache exactly as it was (here: 5 tokens);
// one that succeeds must give a cache that attention can read.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/thread_pool.h"
#include "fuzz_target.h"
#include "session_fuzz.h"

namespace {

// The loader reads a path, as a session is read from disk. The input goes
// into one anonymous in-memory file per process, named by its /proc path, so
// nothing is left in the temporary directory however the process ends.
struct ScratchFile {
  int fd = ::memfd_create("turbokv-fuzz-session", 0);
  std::string path = "/proc/self/fd/" + std::to_string(fd);

  void write(const uint8_t* data, size_t size) const {
    if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd, data + done, size - done, off_t(done));
      if (n <= 0) std::abort();
      done += size_t(n);
    }
  }
};

const ScratchFile& scratch() {
  static const ScratchFile file;
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  scratch().write(data + 1, size - 1);
  auto cache = tkv::fuzz::make_session_cache(data[0]);
  tkv::fuzz::fill_session_cache(*cache, 5, 1);
  const tkv::kv::KvStats before = cache->stats();
  try {
    cache->load(scratch().path, tkv::fuzz::kSessionFingerprint);
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
