// Page summaries for query-aware page selection (KvConfig::select).
//
// Per page and KV head, the channel-wise minimum and maximum of the page's
// keys as the codec decodes them (the original, unrotated domain: for a
// rotating codec that is R^T of what it stores, and q.k is the same number
// in both domains; the original domain keeps the channel structure that
// makes the bound tight, which the rotation spreads over every channel).
// From them an upper bound of q.k over every key of the page follows for
// any query q:
//
//   bound(q) = sum_c max(q_c * min_c, q_c * max_c)  >=  q.k  for each key k.
//
// Stored compactly: one f32 scale and int8 codes of min and max per channel,
// rounded outward (min down, max up), so the dequantized bounds still cover
// every decoded key. Bytes per page and head: 4 + 2 * head_dim
// (docs/KV_FORMAT.md). A summary is a pure function of the page's decoded
// slots [0, filled): the float min/max of those slots, quantized. The store
// extends the float min/max of the page being filled one key at a time and
// recomputes a page from its slots where that state is not at hand
// (truncate, load, several pages in one chunk), so every path to the same
// page bytes gives the same summary (and so the same selection).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kv/codec/codec.h"

namespace tkv::kv {

// Bytes of one head's summary.
inline size_t summary_head_bytes(int head_dim) {
  return sizeof(float) + 2 * size_t(head_dim);
}

// Float min/max (head_dim each) over no key yet: +inf / -inf.
void summary_reset(float* lo, float* hi, int head_dim);
// Extends lo/hi with the decoded slots [from, to) of one head's page.
// `work` holds head_dim floats.
void summary_extend(const Codec& k_codec, const uint8_t* k_page, int page_tokens, int from, int to,
                    float* lo, float* hi, float* work);
// lo/hi (over at least one key) -> the stored summary (summary_head_bytes).
void summary_store(const float* lo, const float* hi, int head_dim, uint8_t* summary);

// Summarizes slots [0, filled) of one head's page (filled >= 1):
// reset + extend + store. `work` holds head_dim floats.
void summarize_keys(const Codec& k_codec, const uint8_t* k_page, int page_tokens, int filled,
                    uint8_t* summary, float* work);
// The same from plain vectors: keys[t * head_dim + c] for t < n (tests).
void summarize_vectors(const float* keys, int n, int head_dim, uint8_t* summary);

// An upper bound of q.k over the keys `summary` covers (q: head_dim floats).
float summary_bound(const float* q, const uint8_t* summary, int head_dim);
// The largest bound over G queries q + g * head_dim (a GQA group).
float summary_bound_max(const float* q, int G, const uint8_t* summary, int head_dim);
// out[i] = summary_bound_max(q, G, summaries[i], head_dim) for i < n, the
// same bits, in one call (the decode step's bound pass over every page).
void summary_bounds_max(const float* q, int G, const uint8_t* const* summaries, size_t n,
                        int head_dim, float* out);

}  // namespace tkv::kv
