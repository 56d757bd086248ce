// The KV cache the session fuzz target loads files into, shared with the
// seed generator so that its seeds are files this cache accepts: 2 layers,
// 2 query heads over 1 KV head of 32 dims, 16-token pages, and either the
// f16 cache or k4v2 (4 f16 sinks + 64 f16 recent tokens by default).
#pragma once

#include <cstdint>
#include <memory>

#include "kv/kv_cache.h"

namespace tkv::fuzz {

inline constexpr const char* kSessionFingerprint = "0123456789abcdef0123456789abcdef";

// selector: even = f16, odd = k4v2 (the first byte of a session fuzz input).
std::unique_ptr<kv::KvCache> make_session_cache(uint8_t selector);

// Appends `n` tokens of deterministic pseudo-random K/V (and attends with
// random queries, as the model would) to `cache`.
void fill_session_cache(kv::KvCache& cache, int n, uint32_t seed);

}  // namespace tkv::fuzz
