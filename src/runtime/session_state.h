// Saving and restoring a conversation: the KV cache (KvCache::save, a GGUF
// session file at PATH) plus a small JSON sidecar at PATH.json with what the
// cache cannot say about itself: the token ids it holds (a prompt cache
// needs them to find the shared prefix; a chat needs them to go on) and
// command-specific state (the chat's messages).
//
// The pair is tied together: the sidecar records the session file's checksum
// and token count, the model fingerprint and the KV settings, and a restore
// checks all of them before anything changes.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace tkv::cli {

class InferenceSession;

std::string session_sidecar_path(const std::string& path);

// Writes PATH and PATH.json. `extra` (optional, valid UTF-8 strings only) is
// stored under "extra". Both files are written out before either replaces
// its target, so a failure (tkv::Error naming the file) leaves the previous
// files as they were.
void save_session(const std::string& path, const InferenceSession& session,
                  const nlohmann::json* extra = nullptr);

// Restores `session` from PATH and PATH.json and returns "extra" (null if
// absent). Throws tkv::Error naming the file and the reason (missing, other
// model, other KV settings, files that do not belong together, corrupt);
// the session is unchanged then.
nlohmann::json load_session(const std::string& path, InferenceSession& session);

}  // namespace tkv::cli
