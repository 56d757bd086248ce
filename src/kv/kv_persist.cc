// Saving and restoring a sequence's KV store, so a long prompt is prefilled
// once. The file is a GGUF container (inspectable with `turbokv inspect`):
//   metadata  turbokv.session.{version, fingerprint, config, seed, shape,
//             n_tokens, checksum} and per layer first_page / n_pages
//   tensors   blk.N.sinks, blk.N.ring, blk.N.pages: raw bytes (type i8) of
//             the f16 areas and of the live pages, oldest first
// The checksum is FNV-1a 64 over every tensor's bytes in file order. Written
// atomically (GgufWriter writes a temp file and renames it).
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "gguf/gguf.h"
#include "kv/kv_cache_impl.h"

namespace tkv::kv {

namespace {

constexpr uint32_t kSessionVersion = 1;

struct Fnv64 {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
};

std::string layer_key(int l, const char* what) {
  return str("turbokv.session.blk.", l, ".", what);
}

// 64-bit values are stored as hex strings: GGUF integers read back as int64.
std::string hex(uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string shape_string(const KvShape& s) {
  return str(s.n_layers, "x", s.n_heads, "x", s.n_kv_heads, "x", s.head_dim);
}

}  // namespace

void KvCache::save(const std::string& path, const std::string& model_fingerprint) const {
  const Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  gguf::GgufWriter w;
  w.set_u32("turbokv.session.version", kSessionVersion);
  w.set_string("turbokv.session.fingerprint", model_fingerprint);
  w.set_string("turbokv.session.config", c.config.describe());
  w.set_string("turbokv.session.seed", hex(c.config.seed));
  w.set_string("turbokv.session.shape", shape_string(c.shape));
  w.set("turbokv.session.n_tokens", gguf::Value::make_u64(uint64_t(c.n_tokens)));
  Fnv64 sum;
  auto add = [&](const std::string& name, const uint8_t* data, size_t bytes) {
    if (bytes == 0) return;
    sum.add(data, bytes);
    w.add_tensor(name, DType::I8, {int64_t(bytes)}, data, bytes);
  };
  for (int l = 0; l < c.shape.n_layers; ++l) {
    const LayerKv& L = c.layers[l];
    w.set(layer_key(l, "first_page"), gguf::Value::make_u64(uint64_t(L.first_page)));
    w.set(layer_key(l, "n_pages"), gguf::Value::make_u64(L.pages.size()));
    add(str("blk.", l, ".sinks"), L.sinks.data, L.sinks.total_bytes());
    add(str("blk.", l, ".ring"), L.ring.data, L.ring.total_bytes());
    if (!L.pages.empty()) {
      std::vector<uint8_t> pages(L.pages.size() * L.page_bytes);
      for (size_t i = 0; i < L.pages.size(); ++i)
        std::memcpy(pages.data() + i * L.page_bytes, L.pages[i], L.page_bytes);
      add(str("blk.", l, ".pages"), pages.data(), pages.size());
    }
  }
  w.set_string("turbokv.session.checksum", hex(sum.h));
  w.write(path);
}

void KvCache::load(const std::string& path, const std::string& model_fingerprint) {
  Impl& c = *impl_;
  TKV_CHECK(!c.in_chunk);
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  auto bad = [&](const std::string& why) { fail(path, ": not a usable session file: ", why); };
  if (f.get_int("turbokv.session.version").value_or(-1) != kSessionVersion)
    bad("missing or unsupported turbokv.session.version");
  if (f.require_string("turbokv.session.fingerprint") != model_fingerprint)
    bad("it was saved with a different model");
  if (f.require_string("turbokv.session.shape") != shape_string(c.shape))
    bad("KV shape " + f.require_string("turbokv.session.shape") + " differs from " +
        shape_string(c.shape));
  if (f.require_string("turbokv.session.config") != c.config.describe())
    bad("it was saved with KV settings '" + f.require_string("turbokv.session.config") +
        "', these are '" + c.config.describe() + "'");
  if (f.require_string("turbokv.session.seed") != hex(c.config.seed)) bad("rotation seed differs");
  const int64_t n_tokens = f.require_int("turbokv.session.n_tokens");
  if (n_tokens < 0 || (c.W == 0 && n_tokens > c.shape.max_tokens))
    bad(str(n_tokens, " tokens do not fit the context of ", c.shape.max_tokens));

  Fnv64 sum;
  auto tensor_bytes = [&](const std::string& name, size_t expect) -> const uint8_t* {
    const gguf::TensorInfo* t = f.find_tensor(name);
    if (expect == 0) {
      if (t) bad("unexpected tensor " + name);
      return nullptr;
    }
    if (!t) bad("missing tensor " + name);
    if (t->n_bytes != expect)
      bad(str("tensor ", name, " has ", t->n_bytes, " bytes, expected ", expect));
    sum.add(t->data, t->n_bytes);
    return t->data;
  };
  struct Loaded {
    const uint8_t *sinks, *ring, *pages;
    int64_t first_page;
    size_t n_pages;
  };
  std::vector<Loaded> loaded(c.shape.n_layers);
  for (int l = 0; l < c.shape.n_layers; ++l) {
    const LayerKv& L = c.layers[l];
    Loaded& d = loaded[l];
    d.first_page = f.require_int(layer_key(l, "first_page"));
    const int64_t n_pages = f.require_int(layer_key(l, "n_pages"));
    const int64_t non_sink = std::max<int64_t>(0, n_tokens - c.S);
    const int64_t encoded = std::max<int64_t>(0, non_sink - c.R);
    if (d.first_page < 0 || n_pages < 0 || d.first_page + n_pages != (encoded + c.P - 1) / c.P)
      bad(str("layer ", l, " page table does not match ", n_tokens, " tokens"));
    d.n_pages = size_t(n_pages);
    d.sinks = tensor_bytes(str("blk.", l, ".sinks"), L.sinks.total_bytes());
    d.ring = tensor_bytes(str("blk.", l, ".ring"), L.ring.total_bytes());
    d.pages = tensor_bytes(str("blk.", l, ".pages"), d.n_pages * L.page_bytes);
  }
  if (f.require_string("turbokv.session.checksum") != hex(sum.h))
    bad("checksum mismatch (file corrupted)");

  clear();
  for (int l = 0; l < c.shape.n_layers; ++l) {
    LayerKv& L = c.layers[l];
    const Loaded& d = loaded[l];
    if (d.sinks) std::memcpy(L.sinks.data, d.sinks, L.sinks.total_bytes());
    if (d.ring) std::memcpy(L.ring.data, d.ring, L.ring.total_bytes());
    L.first_page = d.first_page;
    for (size_t i = 0; i < d.n_pages; ++i) {
      uint8_t* p = c.pool->allocate(L.page_bytes);
      std::memcpy(p, d.pages + i * L.page_bytes, L.page_bytes);
      L.pages.push_back(p);
    }
    L.encoded = std::max<int64_t>(0, std::max<int64_t>(0, n_tokens - c.S) - c.R);
  }
  c.n_tokens = n_tokens;
}

}  // namespace tkv::kv
