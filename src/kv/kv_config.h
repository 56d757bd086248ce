// How a KV cache is configured: codecs for K and V, the policies that keep
// some tokens in f16 (sinks, residual) or drop them (window), per-layer codec
// overrides, the page geometry, page selection and the disk tier. The
// command-line front end (src/cli) fills it from the KV flags every
// subcommand shares; the library knows nothing of flags.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kv/codec/codec.h"

namespace tkv::kv {

struct LayerOverride {
  int layer = 0;  // may be negative in the flag (-1 = last layer); resolved by resolve()
  CodecSpec k, v;
};

struct KvConfig {
  CodecSpec k{CodecKind::F16};
  CodecSpec v{CodecKind::F16};
  // -1 = default: 4 sinks + 64 residual when any codec is quantized, else 0.
  int sinks = -1;
  int residual = -1;
  int window = 0;  // 0 = keep every token; else keep sinks + the newest `window` tokens
  // Layers with the model's own window (KvLayerShape::window): false keeps
  // their whole history in pages (reuse, fork and truncate at any position);
  // true keeps only the pages their window still reaches, the least memory,
  // but such a sequence can then only be truncated to a point whose window
  // it still holds.
  bool swa_window_only = false;
  // Recurrent layers (KvShape::recurrent): how many snapshots of their state
  // a sequence keeps (KvCache::snapshot: the newest two, and of the older
  // ones those that stay spread out). truncate() goes back to a snapshot's
  // position; each costs one state (a Qwen3.5-9B's is ~50 MiB).
  int state_snapshots = 4;
  // runtime::Sequence takes one at a prompt's start and end, and within a
  // long prompt at the first chunk boundary past each multiple of this
  // many tokens (0 = none within).
  int state_snapshot_spacing = 2048;
  std::vector<LayerOverride> overrides;
  int page_tokens = 64;       // tokens per page (multiple of 16)
  uint64_t budget_bytes = 0;  // 0 = unlimited; else page allocation beyond it fails cleanly
  // With a budget: the directory of the disk tier (PagePool): pages beyond
  // the budget move there instead of failing. Empty = no disk tier. Used by
  // the constructor that makes a private pool (a shared pool has its own).
  std::string spill_dir;
  // With the disk tier: pages about to be read are read back ahead by the
  // pool's I/O thread (PagePool::read_ahead); false = every page on demand.
  // The results are identical either way. Used by the private pool's
  // constructor, like spill_dir.
  bool read_ahead = true;
  uint64_t seed = 0x74626b76;  // rotation seeds derive from it and the layer index
  // Query-aware page selection: 0 = dense (every page is read); else each
  // query (per GQA group) reads its best pages up to `select` tokens by the
  // page summaries' bound on q.k, plus the sinks, the residual window and its
  // newest page. Selection never changes what is stored.
  int select = 0;
  // With selection: chunks of more than one token (prefill) select too (each
  // query tile reads the union of its queries' pages); false = dense prefill.
  bool select_prefill = true;
  // With selection: the first layers read every page, as in Quest: their
  // attention is broad, so a page bound picks poorly there, and what they
  // miss every later layer misses (recall drops when they select too).
  int select_dense_layers = 2;

  int effective_sinks() const;
  int effective_residual() const;
  // Codecs of one layer after overrides (n_layers resolves negative indices).
  CodecSpec k_for(int layer, int n_layers) const;
  CodecSpec v_for(int layer, int n_layers) const;
  // "k=tq4 v=tq2 sinks=4 residual=64 window=0 page=64" for logs and reports,
  // then " select=N" (and " prefill=dense") when selection is on.
  std::string describe() const;
  // describe() without the selection settings: what the stored bytes depend
  // on (a session saved with one selection loads with any other).
  std::string describe_storage() const;
};

// Shorthand "--kv X": "f16", "f32", "q8_0", "q4_0h", ... (same codec for K and V),
// "kAvB" with A, B in {1,2,3,4,8}: tqA / tqB, where 8 means q8_0h.
// Returns false if `text` is not a valid shorthand.
bool parse_kv_shorthand(std::string_view text, CodecSpec& k, CodecSpec& v);

// "--kv-layer-override 0,-1:k8v4" -> layers {0, -1} use q8_0h keys, tq4 values.
// Several overrides are separated by ';'. Throws tkv::Error with the reason.
std::vector<LayerOverride> parse_layer_overrides(std::string_view text);

}  // namespace tkv::kv

namespace tkv::kv {
// Seed of layer `layer`'s rotation R (shared by its K and V codecs).
uint64_t rotation_seed(const KvConfig& config, int layer);
}  // namespace tkv::kv
