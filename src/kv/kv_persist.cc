// Saving and restoring a sequence's KV store, so a long prompt is prefilled
// once. The file is a GGUF container (inspectable with `turbokv inspect`);
// docs/KV_FORMAT.md has the layout. Version 2 (written):
//   metadata  turbokv.session.{version, fingerprint, config, seed, shape,
//             n_tokens}, per layer blk.N.{first_page, n_pages, encoded}, and
//             the caller's SessionMeta: tokens (int32 array), meta_names /
//             meta_values (string arrays, any bytes)
//   tensors   blk.N.sinks, blk.N.ring (the f16 areas), blk.N.page.I (each
//             live page, oldest first, streamed from the page itself), and
//             last turbokv.session.checksum: XXH3-64 (little-endian) of every
//             byte of the file but these 8
// The shape string of a uniform shape is the one every earlier file has;
// a shape whose layers differ adds them (shape_string), so an older build
// refuses such a file as another shape.
// Version 1 (still read): no per-layer `encoded` and no caller metadata, one
// blk.N.pages tensor per layer, and an FNV-1a 64 checksum over the tensor
// bytes as a hex string in turbokv.session.checksum.
//
// Page summaries (page selection) are not stored: load() recomputes them
// from the pages, so the format does not depend on the selection settings.
//
// Written atomically: the GGUF goes to a staging file, its checksum is
// computed from the file and patched in, then it is fsynced and renamed
// over `path`. load() is transactional: the file is checked and every page
// allocated before the sequence changes.
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "common/error.h"
#include "common/mapped_file.h"
#include "gguf/gguf.h"
#include "kv/kv_cache_impl.h"
#include "kv/page_summary.h"

namespace tkv::kv {

namespace {

constexpr uint32_t kSessionVersion = 2;
constexpr const char* kChecksumTensor = "turbokv.session.checksum";

struct Fnv64 {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
};

// XXH3-64 of a file's bytes except the 8 at `skip`.
uint64_t file_checksum(const uint8_t* data, size_t size, size_t skip) {
  XXH3_state_t* st = XXH3_createState();
  if (!st) throw KvOutOfMemory("KV cache: out of memory for a checksum state");
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, data, skip);
  XXH3_64bits_update(st, data + skip + 8, size - skip - 8);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

std::string layer_key(int l, const char* what) {
  return str("turbokv.session.blk.", l, ".", what);
}

// 64-bit values are stored as hex strings: GGUF integers read back as int64.
std::string hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// "layers x heads x kv_heads x head_dim" for a uniform shape (what every
// file had before shapes were per layer); else that of the widest layer,
// then each layer's "heads/kv_heads/k_dim/v_dim" (and "/wN" for a layer
// with the model's window N), e.g. "3x8x4x64:8/4/64/64,4/2/32/48/w512,8/1/64/64";
// then, with recurrent layers, " r" and each one's state floats
// ("... r98304,98304,98304").
std::string shape_string(const KvShape& s) {
  std::string out = str(s.n_layers, "x", s.n_heads, "x", s.n_kv_heads, "x", s.head_dim);
  if (!s.uniform()) {
    for (int l = 0; l < s.n_layers; ++l) {
      const KvLayerShape g = s.layer(l);
      out += str(l == 0 ? ":" : ",", g.n_heads, "/", g.n_kv_heads, "/", g.k_dim, "/", g.v_dim);
      if (g.window > 0) out += str("/w", g.window);
    }
  }
  for (size_t r = 0; r < s.recurrent.size(); ++r) out += str(r == 0 ? " r" : ",", s.recurrent[r]);
  return out;
}

std::string state_tensor(int r) {
  return str("rec.", r, ".state");
}

std::string snapshot_tensor(int r, size_t i) {
  return str("rec.", r, ".snap.", i);
}

// Patches the checksum tensor of the GGUF file at `path` (written by
// GgufWriter, checksum bytes zero) and fsyncs it.
void seal(const std::string& path) {
  uint64_t sum = 0;
  size_t at = 0;
  {
    const gguf::GgufFile f = gguf::GgufFile::open(path);
    const gguf::TensorInfo* t = f.find_tensor(kChecksumTensor);
    TKV_CHECK(t && t->n_bytes == 8 && f.mapping());
    at = size_t(t->data - f.mapping()->data());
    sum = file_checksum(f.mapping()->data(), f.mapping()->size(), at);
  }
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = uint8_t(sum >> (8 * i));
  const int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0) fail(path, ": cannot open to seal: ", std::strerror(errno));
  const bool ok = ::pwrite(fd, le, 8, off_t(at)) == 8 && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) fail(path, ": cannot write the checksum: ", std::strerror(err));
}

// The checks of load(), in the order they are made; each throws on what it
// refuses, and none changes the sequence.
struct SessionReader {
  const gguf::GgufFile& f;
  const std::string& path;
  bool v2 = false;
  Fnv64 sum;  // version 1: over the tensor bytes, in the order they are read

  [[noreturn]] void bad(const std::string& why) const {
    fail(path, ": not a usable session file: ", why);
  }
  // The bytes of tensor `name`, which must hold `expect` bytes (0: must be absent).
  const uint8_t* tensor_bytes(const std::string& name, size_t expect) {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (expect == 0) {
      if (t) bad("unexpected tensor " + name);
      return nullptr;
    }
    if (!t) bad("missing tensor " + name);
    if (t->n_bytes != expect)
      bad(str("tensor ", name, " has ", t->n_bytes, " bytes, expected ", expect));
    if (!v2) sum.add(t->data, t->n_bytes);
    return t->data;
  }
};

// Version (sets r.v2), checksum (version 2, before anything else is
// believed), model, shape, settings and seed; returns the token count.
int64_t check_session_header(SessionReader& r, const KvCache::Impl& c,
                             const std::string& model_fingerprint) {
  const gguf::GgufFile& f = r.f;
  const std::optional<int64_t> version = f.get_int("turbokv.session.version");
  if (!version) r.bad("no turbokv.session.version");
  if (*version != 1 && *version != 2)
    r.bad(str("session format version ", *version, " is not supported (this build reads 1 and 2)"));
  r.v2 = *version == 2;
  if (r.v2) {
    const gguf::TensorInfo* t = f.find_tensor(kChecksumTensor);
    if (!t || t->n_bytes != 8 || !f.mapping()) r.bad("no checksum");
    const size_t at = size_t(t->data - f.mapping()->data());
    uint64_t stored = 0;
    for (int i = 0; i < 8; ++i) stored |= uint64_t(t->data[i]) << (8 * i);
    if (file_checksum(f.mapping()->data(), f.mapping()->size(), at) != stored)
      r.bad("checksum mismatch (file corrupted)");
  }
  if (f.require_string("turbokv.session.fingerprint") != model_fingerprint)
    r.bad("it was saved with a different model");
  if (f.require_string("turbokv.session.shape") != shape_string(c.shape))
    r.bad("KV shape " + f.require_string("turbokv.session.shape") + " differs from " +
          shape_string(c.shape));
  if (f.require_string("turbokv.session.config") != c.config.describe_storage())
    r.bad("it was saved with KV settings '" + f.require_string("turbokv.session.config") +
          "', these are '" + c.config.describe_storage() + "'");
  if (f.require_string("turbokv.session.seed") != hex(c.config.seed))
    r.bad("rotation seed differs");
  const int64_t n_tokens = f.require_int("turbokv.session.n_tokens");
  if (n_tokens < 0 || (c.W == 0 && n_tokens > c.shape.max_tokens))
    r.bad(str(n_tokens, " tokens do not fit the context of ", c.shape.max_tokens));
  return n_tokens;
}

// The caller's SessionMeta (version 2; empty for version 1).
SessionMeta read_caller_meta(const SessionReader& r) {
  SessionMeta meta;
  if (!r.v2) return meta;
  if (const auto tokens = r.f.get_ints("turbokv.session.tokens")) {
    for (int64_t t : *tokens) {
      if (t < INT32_MIN || t > INT32_MAX) r.bad("token id out of range");
      meta.tokens.push_back(int32_t(t));
    }
  }
  const auto* names = r.f.get_strings("turbokv.session.meta_names");
  const auto* values = r.f.get_strings("turbokv.session.meta_values");
  if ((names == nullptr) != (values == nullptr) || (names && names->size() != values->size()))
    r.bad("caller metadata names and values do not match");
  if (names)
    for (size_t i = 0; i < names->size(); ++i)
      if (!meta.strings.emplace((*names)[i], (*values)[i]).second)
        r.bad("caller metadata name repeated");
  return meta;
}

// One layer of a session file, checked, its bytes still in the file.
struct LoadedLayer {
  const uint8_t *sinks, *ring;
  std::vector<const uint8_t*> pages;
  int64_t first_page, encoded;
};

// The recurrent layers' states and their snapshots (version 2 files of
// hybrid models), staged: the snapshots' states are allocated here.
struct LoadedStates {
  std::vector<const uint8_t*> now;
  std::vector<KvCache::Impl::Snapshot> snapshots;
};

LoadedStates read_states(SessionReader& r, const KvCache::Impl& c, int64_t n_tokens) {
  LoadedStates out;
  const int R = c.states.count();
  for (int i = 0; i < R; ++i) out.now.push_back(r.tensor_bytes(state_tensor(i), c.states.bytes(i)));
  const auto positions = r.f.get_ints("turbokv.session.snapshots");
  if (!positions) return out;
  if (R == 0) r.bad("snapshots of a model without recurrent layers");
  int64_t last = -1;
  for (size_t i = 0; i < positions->size(); ++i) {
    const int64_t p = (*positions)[i];
    if (p <= last || p > n_tokens) r.bad(str("snapshot ", i, " at position ", p));
    last = p;
    std::vector<const uint8_t*> bytes;
    std::vector<int64_t> floats;
    for (int k = 0; k < R; ++k) {
      bytes.push_back(r.tensor_bytes(snapshot_tensor(k, i), c.states.bytes(k)));
      floats.push_back(int64_t(c.states.bytes(k) / sizeof(float)));
    }
    auto states = std::make_unique<RecurrentStates>();
    states->init(c.pool, floats);  // KvBudgetExceeded: nothing changed yet
    const PagePins pins(*c.pool, states->allocations(), nullptr, true);
    for (int k = 0; k < R; ++k) std::memcpy(states->data(k), bytes[size_t(k)], states->bytes(k));
    out.snapshots.push_back({p, std::move(states)});
  }
  return out;
}

// Every layer's page table and tensors, then that the file holds nothing
// else (version 2) or its checksum (version 1).
std::vector<LoadedLayer> read_layers(SessionReader& r, const KvCache::Impl& c, int64_t n_tokens) {
  const gguf::GgufFile& f = r.f;
  const bool v2 = r.v2;
  std::vector<LoadedLayer> loaded(c.shape.n_layers);
  const int64_t non_sink = std::max<int64_t>(0, n_tokens - c.S);
  size_t total_pages = 0;
  for (int l = 0; l < c.shape.n_layers; ++l) {
    const LayerKv& L = c.layers[l];
    LoadedLayer& d = loaded[l];
    d.first_page = f.require_int(layer_key(l, "first_page"));
    const int64_t n_pages = f.require_int(layer_key(l, "n_pages"));
    // Version 1 had no truncate(): the residual ring was always full.
    d.encoded = v2 ? f.require_int(layer_key(l, "encoded")) : std::max<int64_t>(0, non_sink - c.R);
    if (d.encoded < std::max<int64_t>(0, non_sink - c.R) || d.encoded > non_sink ||
        d.encoded != loaded[0].encoded)
      r.bad(str("layer ", l, " encoded ", d.encoded, " tokens of ", n_tokens));
    if (d.first_page < 0 || n_pages < 0 || (!c.evicts(L) && d.first_page != 0) ||
        d.first_page + n_pages != (d.encoded + c.P - 1) / c.P)
      r.bad(str("layer ", l, " page table does not match ", n_tokens, " tokens"));
    d.sinks = r.tensor_bytes(str("blk.", l, ".sinks"), L.sinks.total_bytes());
    d.ring = r.tensor_bytes(str("blk.", l, ".ring"), L.ring.total_bytes());
    if (v2) {
      for (int64_t i = 0; i < n_pages; ++i)
        d.pages.push_back(r.tensor_bytes(str("blk.", l, ".page.", i), L.page_bytes));
    } else if (const uint8_t* all =
                   r.tensor_bytes(str("blk.", l, ".pages"), size_t(n_pages) * L.page_bytes)) {
      for (int64_t i = 0; i < n_pages; ++i) d.pages.push_back(all + size_t(i) * L.page_bytes);
    }
    total_pages += d.pages.size();
  }
  if (v2) {
    const size_t snapshots =
        f.get_ints("turbokv.session.snapshots").value_or(std::vector<int64_t>{}).size();
    if (f.tensors().size() != 2 * size_t(c.shape.n_layers) + total_pages + 1 +
                                  size_t(c.states.count()) * (1 + snapshots) -
                                  (c.S == 0 ? c.shape.n_layers : 0) -
                                  (c.R == 0 ? c.shape.n_layers : 0))
      r.bad("unexpected tensors");
  } else if (f.require_string("turbokv.session.checksum") != hex(r.sum.h)) {
    r.bad("checksum mismatch (file corrupted)");
  }
  return loaded;
}

// The pages of a load, allocated and filled, and their summaries.
struct StagedPages {
  std::vector<std::vector<uint8_t*>> fresh;
  std::vector<SummaryStore> summaries;
};

// Fills layer l's staged pages from the file and recomputes their summaries.
void fill_layer_pages(KvCache::Impl& c, int l, const LoadedLayer& d, StagedPages& s,
                      std::vector<float>& work) {
  const LayerKv& L = c.layers[l];
  for (size_t i = 0; i < d.pages.size(); ++i) {
    {
      // With the pool's disk tier a fresh page may already be on disk,
      // and filling it may move another there.
      PagePins pins(*c.pool, {s.fresh[l][i]}, nullptr, true);
      std::memcpy(s.fresh[l][i], d.pages[i], L.page_bytes);
    }
    // Page summaries are not stored: they are recomputed from the pages
    // (a pure function of them, so selection is as before the save).
    if (L.summary_head > 0) {
      const int64_t filled = std::min<int64_t>(c.P, d.encoded - (d.first_page + int64_t(i)) * c.P);
      s.summaries[l].push_back();
      for (int h = 0; h < L.geom.n_kv_heads; ++h)
        summarize_keys(*L.k_codec, d.pages[i] + size_t(h) * L.k_head_bytes, c.P, int(filled),
                       s.summaries[l].head(i, h), work.data());
    }
  }
}

// Every page is allocated and filled, and its summary computed, before
// anything changes: a pool without room, or (with its disk tier) a page
// that cannot be moved to disk to make room, leaves the sequence as it was
// (it holds its own pages meanwhile), and what was allocated is released.
// What follows clear() moves no page.
StagedPages stage_pages(KvCache::Impl& c, const std::vector<LoadedLayer>& loaded) {
  StagedPages s;
  s.fresh.resize(c.shape.n_layers);
  s.summaries.resize(c.shape.n_layers);
  for (int l = 0; l < c.shape.n_layers; ++l)
    s.summaries[l].init(c.layers[l].geom.n_kv_heads, c.layers[l].summary_head);
  try {
    for (int l = 0; l < c.shape.n_layers; ++l)
      for (size_t i = 0; i < loaded[l].pages.size(); ++i)
        s.fresh[l].push_back(c.pool->allocate(c.layers[l].page_bytes, true));
    std::vector<float> work(size_t(c.shape.head_dim));
    for (int l = 0; l < c.shape.n_layers; ++l) fill_layer_pages(c, l, loaded[l], s, work);
  } catch (...) {
    for (int l = 0; l < c.shape.n_layers; ++l)
      for (uint8_t* p : s.fresh[l]) c.pool->release(p, c.layers[l].page_bytes);
    throw;
  }
  return s;
}

}  // namespace

void KvCache::save(const std::string& path, const std::string& model_fingerprint) const {
  save(path, model_fingerprint, SessionMeta{});
}

void KvCache::save(const std::string& path, const std::string& model_fingerprint,
                   const SessionMeta& meta) const {
  const Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  gguf::GgufWriter w;
  w.set_u32("turbokv.session.version", kSessionVersion);
  w.set_string("turbokv.session.fingerprint", model_fingerprint);
  w.set_string("turbokv.session.config", c.config.describe_storage());
  w.set_string("turbokv.session.seed", hex(c.config.seed));
  w.set_string("turbokv.session.shape", shape_string(c.shape));
  w.set("turbokv.session.n_tokens", gguf::Value::make_u64(uint64_t(c.n_tokens)));
  if (!meta.tokens.empty()) w.set("turbokv.session.tokens", gguf::Value::make_i32s(meta.tokens));
  if (!meta.strings.empty()) {
    std::vector<std::string> names, values;
    for (const auto& [k, v] : meta.strings) {
      names.push_back(k);
      values.push_back(v);
    }
    w.set("turbokv.session.meta_names", gguf::Value::make_strings(std::move(names)));
    w.set("turbokv.session.meta_values", gguf::Value::make_strings(std::move(values)));
  }
  // Tensor bytes are copied from the sequence when the writer reaches them,
  // one page at a time.
  // A page on the pool's disk tier is read back (pinned) while it is copied.
  auto add = [&](const std::string& name, const uint8_t* data, size_t bytes) {
    if (bytes == 0) return;
    PagePool* pool = c.pool.get();
    w.add_tensor(name, DType::I8, {int64_t(bytes)}, [data, pool](uint8_t* dst, size_t n) {
      PagePins pins(*pool, {const_cast<uint8_t*>(data)});
      std::memcpy(dst, data, n);
    });
  };
  for (int l = 0; l < c.shape.n_layers; ++l) {
    const LayerKv& L = c.layers[l];
    w.set(layer_key(l, "first_page"), gguf::Value::make_u64(uint64_t(L.first_page)));
    w.set(layer_key(l, "n_pages"), gguf::Value::make_u64(L.pages.size()));
    w.set(layer_key(l, "encoded"), gguf::Value::make_u64(uint64_t(L.encoded)));
    add(str("blk.", l, ".sinks"), L.sinks.data, L.sinks.total_bytes());
    add(str("blk.", l, ".ring"), L.ring.data, L.ring.total_bytes());
    for (size_t i = 0; i < L.pages.size(); ++i)
      add(str("blk.", l, ".page.", i), L.pages[i], L.page_bytes);
  }
  for (int i = 0; i < c.states.count(); ++i)
    add(state_tensor(i), reinterpret_cast<const uint8_t*>(c.states.data(i)), c.states.bytes(i));
  if (!c.snapshots.empty()) {
    std::vector<int32_t> positions;
    for (size_t k = 0; k < c.snapshots.size(); ++k) {
      positions.push_back(int32_t(c.snapshots[k].position));
      const RecurrentStates& st = *c.snapshots[k].states;
      for (int i = 0; i < st.count(); ++i)
        add(snapshot_tensor(i, k), reinterpret_cast<const uint8_t*>(st.data(i)), st.bytes(i));
    }
    w.set("turbokv.session.snapshots", gguf::Value::make_i32s(positions));
  }
  w.add_tensor(kChecksumTensor, DType::I8, {8},
               [](uint8_t* dst, size_t n) { std::memset(dst, 0, n); });
  const std::string staging = str(path, ".staging.", ::getpid());
  try {
    w.write(staging);
    seal(staging);
    std::error_code ec;
    std::filesystem::rename(staging, path, ec);
    if (ec) fail(path, ": cannot rename into place: ", ec.message());
  } catch (...) {
    std::remove(staging.c_str());
    throw;
  }
}

SessionMeta KvCache::load(const std::string& path, const std::string& model_fingerprint) {
  Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  SessionReader r{f, path, false, Fnv64{}};
  const int64_t n_tokens = check_session_header(r, c, model_fingerprint);
  SessionMeta meta = read_caller_meta(r);
  const std::vector<LoadedLayer> loaded = read_layers(r, c, n_tokens);
  LoadedStates states = read_states(r, c, n_tokens);
  StagedPages staged = stage_pages(c, loaded);
  std::optional<PagePins> states_pinned;  // clear() below reads none back from the disk tier
  try {
    c.states.make_private();  // so that clear() below allocates nothing
    states_pinned.emplace(*c.pool, c.states.allocations(), nullptr, true);
  } catch (...) {
    for (int l = 0; l < c.shape.n_layers; ++l)
      for (uint8_t* p : staged.fresh[l]) c.pool->release(p, c.layers[l].page_bytes);
    throw;
  }
  // Nothing below can fail: the sequence changes only now.
  clear();
  for (int i = 0; i < c.states.count(); ++i)
    std::memcpy(c.states.data(i), states.now[size_t(i)], c.states.bytes(i));
  states_pinned.reset();
  c.snapshots = std::move(states.snapshots);
  for (int l = 0; l < c.shape.n_layers; ++l) {
    LayerKv& L = c.layers[l];
    const LoadedLayer& d = loaded[l];
    if (d.sinks) std::memcpy(L.sinks.data, d.sinks, L.sinks.total_bytes());
    if (d.ring) std::memcpy(L.ring.data, d.ring, L.ring.total_bytes());
    L.first_page = d.first_page;
    L.encoded = d.encoded;
    L.pages.assign(staged.fresh[l].begin(), staged.fresh[l].end());
    L.summaries = std::move(staged.summaries[l]);
  }
  c.n_tokens = n_tokens;
  return meta;
}

}  // namespace tkv::kv
