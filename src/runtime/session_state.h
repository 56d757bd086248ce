// Saving and restoring a conversation in one session file (Sequence::save
// and Sequence::load, defined in session_state.cc; KvCache::save, format 2,
// docs/KV_FORMAT.md): the KV store, the token ids it holds (a
// prompt cache needs them to find the shared prefix; a chat needs them to go
// on) and named byte strings from the caller (a chat's messages), all under
// the file's checksum, written atomically.
//
// Sessions of older turbokv builds (a KV file of format 1, or of format 2
// without token ids, next to a JSON sidecar PATH.json that held them) are
// refused with a message naming their version.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kv/kv_cache.h"

namespace tkv::runtime {

// What a session file says about itself, read from its metadata without
// reading its pages or checking its checksum (Sequence::load does that): to
// decide whether it is worth loading before the sequence changes. Throws
// tkv::Error naming the file when it is missing, not a session file, of
// an older format (see above) or of an unknown version.
kv::SessionMeta peek_session(const std::string& path);

}  // namespace tkv::runtime
