// TEST-ONLY reference for the fused attention: every stored vector is
// decoded to f32 exactly as the cache stores it (codec encode -> decode,
// f16 rounding for sinks and the residual window), then attention is computed
// exactly in double. This is the "quantize-dequantize, then exact attention"
// simulation; it is never linked into the turbokv binary.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_cache.h"

namespace tkv::test {

// Inputs of one layer, position-major: [pos][n_kv][k_dim] (K), [pos][n_kv][v_dim] (V).
struct LayerInputs {
  std::vector<float> k, v;
};

// Both stored forms of every input vector of a layer, same indexing.
struct LayerForms {
  kv::KvLayerShape geom;                // the layer's heads and head dims
  std::vector<float> k_f16, v_f16;      // as sinks / residual hold them
  std::vector<float> k_codec, v_codec;  // as pages hold them, decoded
};

class ReferenceAttention {
 public:
  ReferenceAttention(const kv::KvShape& shape, const kv::KvConfig& config);

  LayerForms forms(int layer, const LayerInputs& in) const;
  // Output (n_heads x v_dim) for the query q (n_heads x k_dim, unscaled) at
  // position p, under the cache's per-query policy semantics (the layer's
  // geometry: f.geom, its window included).
  std::vector<float> attend(const LayerForms& f, const float* q, int64_t p) const;
  // The same where position j holds input row rows[j] of `f` (a sequence
  // that was truncated and re-appended) and the residual ring of p's chunk
  // began at ring_lo: positions in [p - R + 1, ring_lo) are seen in their
  // codec form (kv_cache.h, truncate()). sinks: n_heads learned sink
  // logits, each one more term exp(sink) in its head's denominator;
  // softcap > 0: each score s becomes softcap tanh(s / softcap).
  std::vector<float> attend(const LayerForms& f, const float* q, int64_t p, int64_t ring_lo,
                            const std::vector<int64_t>& rows, const float* sinks = nullptr,
                            float softcap = 0.0f) const;

 private:
  kv::KvShape shape_;
  kv::KvConfig config_;
  int S_, R_, W_;
};

}  // namespace tkv::test
