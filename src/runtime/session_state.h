// Saving and restoring a conversation in one session file (KvCache::save,
// format 2, docs/KV_FORMAT.md): the KV store, the token ids it holds (a
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

class InferenceSession;

// Writes PATH atomically (a failure, tkv::Error naming the file, leaves the
// previous file as it was). `strings`: any bytes, under any names.
void save_session(const std::string& path, const InferenceSession& session,
                  const std::map<std::string, std::string>& strings = {});

// What a session file says about itself, read from its metadata without
// reading its pages or checking its checksum (load_session does that): to
// decide whether it is worth loading before the session changes. Throws
// tkv::Error naming the file when it is missing, not a session file, of
// an older format (see above) or of an unknown version.
kv::SessionMeta peek_session(const std::string& path);

// Restores `session` from PATH and returns the saved strings. Transactional:
// on tkv::Error naming the file and the reason (missing, older format, other
// model, other KV settings, corrupt, token ids outside the vocabulary, no
// room in the pool) the session is exactly as it was.
std::map<std::string, std::string> load_session(const std::string& path, InferenceSession& session);

}  // namespace tkv::runtime
