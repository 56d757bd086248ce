#include "session_state.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/escape.h"
#include "generation.h"
#include "gguf/gguf.h"

namespace tkv::cli {

namespace {

constexpr const char* kFormat = "turbokv-session-state";
constexpr int kVersion = 1;

// The checksum KvCache::save recorded in the session file, as text: a hex
// string in the metadata (session format 1), or the bytes of the tensor of
// that name (format 2), in hex.
std::string session_checksum(const std::string& path) {
  constexpr const char* kKey = "turbokv.session.checksum";
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  if (const gguf::TensorInfo* t = f.find_tensor(kKey))
    return to_hex({reinterpret_cast<const char*>(t->data), size_t(t->n_bytes)});
  return f.require_string(kKey);
}

}  // namespace

std::string session_sidecar_path(const std::string& path) {
  return path + ".json";
}

void save_session(const std::string& path, const InferenceSession& session,
                  const nlohmann::json* extra) {
  const std::string sidecar = session_sidecar_path(path);
  check_output_path(path);
  check_output_path(sidecar);
  // Both files are written in full next to their targets before either
  // replaces anything: a failure (a disk full, a sidecar that cannot be
  // encoded) leaves the previous pair, or none, as it was. KvCache::save
  // writes the staged session file atomically itself.
  const std::string staged = str(path, ".saving.", ::getpid());
  struct RemoveStaged {
    const std::string& path;
    bool renamed = false;
    ~RemoveStaged() {
      if (!renamed) std::remove(path.c_str());
    }
  } cleanup{staged};
  session.cache().save(staged, session.model().fingerprint());
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["model_fingerprint"] = session.model().fingerprint();
  j["kv_config"] = session.cache().config().describe();
  j["session_checksum"] = session_checksum(staged);
  j["n_tokens"] = session.tokens().size();
  j["tokens"] = session.tokens();
  if (extra && !extra->is_null()) j["extra"] = *extra;
  std::string text;
  try {
    text = j.dump() + "\n";
  } catch (const nlohmann::json::exception& e) {
    fail(sidecar, ": cannot be written (", e.what(), ")");
  }
  AtomicFileWriter sidecar_file(sidecar);
  sidecar_file.write(text);
  sidecar_file.finish();
  // The session file first: between the two renames the old sidecar's
  // checksum does not match the new session file, and a load refuses it.
  if (std::rename(staged.c_str(), path.c_str()) != 0)
    fail(path, ": cannot rename into place: ", std::strerror(errno));
  cleanup.renamed = true;
  sidecar_file.commit();
}

nlohmann::json load_session(const std::string& path, InferenceSession& session) {
  const std::string sidecar = session_sidecar_path(path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, ": session file does not exist");
  if (!std::filesystem::exists(sidecar, ec))
    fail(sidecar, ": missing (the token ids saved next to the session file ", path, ")");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(sidecar));
  } catch (const nlohmann::json::exception& e) {
    fail(sidecar, ": not valid JSON (", escape_bytes(e.what()), ")");
  }
  auto bad = [&](const std::string& why) { fail(sidecar, ": not a usable session state: ", why); };
  try {
    if (!j.is_object() || j.value("format", "") != kFormat) bad("not a turbokv session state");
    if (j.value("version", 0) != kVersion) bad("unsupported version");
    if (j.at("model_fingerprint").get<std::string>() != session.model().fingerprint())
      bad("it was saved with a different model");
    const std::string config = j.at("kv_config").get<std::string>();
    if (config != session.cache().config().describe())
      bad("it was saved with KV settings '" + escape_bytes(config) + "', these are '" +
          session.cache().config().describe() + "'");
    std::vector<int32_t> tokens = j.at("tokens").get<std::vector<int32_t>>();
    if (j.at("n_tokens").get<size_t>() != tokens.size()) bad("token count mismatch");
    const int32_t n_vocab = session.tokenizer().n_vocab();
    for (int32_t t : tokens)
      if (t < 0 || t >= n_vocab) bad(str("token id ", t, " outside the vocabulary"));
    if (j.at("session_checksum").get<std::string>() != session_checksum(path))
      bad("it does not belong to " + path + " (checksums differ; saved by another run?)");
    session.cache().load(path, session.model().fingerprint());
    if (const int64_t held = session.cache().n_tokens(); held != int64_t(tokens.size())) {
      session.clear();
      bad(str(path, " holds ", held, " tokens, the state ", tokens.size()));
    }
    session.restore_tokens(std::move(tokens));
  } catch (const nlohmann::json::exception& e) {
    bad(escape_bytes(e.what()));
  }
  return j.contains("extra") ? j["extra"] : nlohmann::json();
}

}  // namespace tkv::cli
