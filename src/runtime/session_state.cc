#include "runtime/session_state.h"

#include <filesystem>
#include <utility>
#include <vector>

#include "common/atomic_file.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "runtime/sequence.h"

namespace tkv::runtime {

void Sequence::save(const std::string& path,
                    const std::map<std::string, std::string>& strings) const {
  check_output_path(path);
  kv::SessionMeta meta;
  meta.tokens = tokens_;
  meta.strings = strings;
  cache_->save(path, model_.fingerprint(), meta);
}

kv::SessionMeta peek_session(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, ": session file does not exist");
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  const std::optional<int64_t> version = f.get_int("turbokv.session.version");
  if (!version) fail(path, ": not a turbokv session file");
  if (*version == 1)
    fail(path,
         ": session format version 1 (a KV file with a .json sidecar, written by an older "
         "turbokv) is no longer read: save the session again");
  if (*version != 2)
    fail(path, ": session format version ", *version,
         " is not supported (this build reads version 2)");
  kv::SessionMeta meta;
  if (const auto tokens = f.get_ints("turbokv.session.tokens"))
    for (int64_t t : *tokens) {
      if (t < INT32_MIN || t > INT32_MAX) fail(path, ": token id ", t, " out of range");
      meta.tokens.push_back(int32_t(t));
    }
  const auto* names = f.get_strings("turbokv.session.meta_names");
  const auto* values = f.get_strings("turbokv.session.meta_values");
  if (names && values && names->size() == values->size())
    for (size_t i = 0; i < names->size(); ++i) meta.strings.emplace((*names)[i], (*values)[i]);
  const std::optional<int64_t> n = f.get_int("turbokv.session.n_tokens");
  if (n && *n > 0 && !f.get_ints("turbokv.session.tokens"))
    fail(path,
         ": session format version 2 without token ids (an older turbokv kept them in a .json "
         "sidecar) is no longer read: save the session again");
  if (!n || *n != int64_t(meta.tokens.size()))
    fail(path, ": not a usable session file: the token ids do not match its token count");
  return meta;
}

std::map<std::string, std::string> Sequence::load(const std::string& path) {
  TKV_CHECK(parts_.layers_done() == 0);
  // Everything that can be checked from the metadata is checked before the
  // cache is touched; KvCache::load checks the rest (checksum, model,
  // settings, room) before it changes anything.
  const kv::SessionMeta peeked = peek_session(path);
  const int32_t n_vocab = tokenizer_.n_vocab();
  for (int32_t t : peeked.tokens)
    if (t < 0 || t >= n_vocab)
      fail(path, ": not a usable session file: token id ", t, " outside the vocabulary");
  kv::SessionMeta meta = cache_->load(path, model_.fingerprint());
  if (meta.tokens != peeked.tokens || cache_->n_tokens() != int64_t(meta.tokens.size())) {
    clear();  // cannot happen for a file that passed its checksum
    fail(path, ": not a usable session file: its token ids do not match its KV store");
  }
  restore_tokens(std::move(meta.tokens));
  return std::move(meta.strings);
}

}  // namespace tkv::runtime
