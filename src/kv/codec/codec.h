// KV codecs: how one head-vector (head_dim values) of K or V is stored in a
// page, and the fused attention primitives that read that storage directly.
//
// A page holds `page_tokens` vectors of one KV head; its byte layout belongs
// to the codec (it may be row-major or tiled/transposed for the kernels) and
// is documented in docs/KV_FORMAT.md. Nothing outside a codec decodes its
// bytes, and nothing but tests ever turns a page back into floats: attention
// calls score() and accumulate() on the packed bytes.
//
// Rotations: codecs that rotate (tqN, q8_0h, q4_0h) share the layer's
// Rotation R. Queries are rotated once (prepare_queries), values are
// accumulated in the rotated domain, and unrotate() applies R^T once per head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tkv::kv {

enum class CodecKind : uint8_t { F32, F16, Q8_0, Q4_0, TQ };

struct CodecSpec {
  CodecKind kind = CodecKind::F16;
  int bits = 0;                  // TQ only: 1..4
  bool rotate = false;           // Q8_0 / Q4_0: Hadamard-rotate before quantizing; TQ: always true
  bool norm_correction = false;  // TQ only ("tq4r"): store the norm that gives the decoded vector
                                 // the original length

  // Canonical names: "f32" "f16" "q8_0" "q8_0h" "q4_0" "q4_0h" "tq1".."tq4" "tq1r".."tq4r".
  std::string name() const;
  bool quantized() const { return kind != CodecKind::F32 && kind != CodecKind::F16; }
  bool operator==(const CodecSpec&) const = default;
};
// Parses a canonical name (case-insensitive); nullopt if unknown.
std::optional<CodecSpec> parse_codec(std::string_view name);

// The layer's orthogonal rotation R (head_dim x head_dim): when head_dim is a
// power of two, two rounds of seeded random signs + fast Walsh-Hadamard
// transform (R = H D2 H D1 / d; one round leaves an outlier channel as a flat
// +-1/sqrt(d) vector, see rotation.cc); otherwise a seeded dense random
// orthogonal matrix. Fixed for a given (head_dim, seed).
class Rotation {
 public:
  Rotation(int head_dim, uint64_t seed);
  ~Rotation();
  int dim() const { return dim_; }
  uint64_t seed() const { return seed_; }
  void apply(const float* x, float* y) const;            // y = R x   (x == y allowed)
  void apply_transpose(const float* y, float* x) const;  // x = R^T y (x == y allowed)

 private:
  int dim_;
  uint64_t seed_;
  std::vector<float> signs_;    // power-of-two path: D1 then D2, scaled by 1/sqrt(d)
  std::vector<float> dense_;    // otherwise: row-major R
  std::vector<float> dense_t_;  // and R^T (both products then run as vectorizable axpys)
};

class Codec {
 public:
  virtual ~Codec() = default;

  const CodecSpec& spec() const { return spec_; }
  int head_dim() const { return head_dim_; }

  // Bytes of one page of `page_tokens` vectors (page_tokens is a multiple of 16).
  virtual size_t page_bytes(int page_tokens) const = 0;
  // page_bytes / page_tokens as a real number, for reports ("bytes per token per head").
  double bytes_per_vector(int page_tokens) const {
    return double(page_bytes(page_tokens)) / page_tokens;
  }

  // Encodes x (head_dim floats) into slot `slot` of `page`. Overwrites every
  // byte that belongs to the slot and no byte of any other slot, whatever the
  // page held before (a packed layout stores whole lane bytes, never ORs into
  // them): so a page from the pool needs no clearing, and slots may be written
  // again after KvCache::truncate() (tests/kv_codec/rewrite_slots_test.cc).
  virtual void encode(const float* x, uint8_t* page, int page_tokens, int slot) const = 0;
  // Reference decode of one slot (tests and the test-only reference attention).
  virtual void decode(const uint8_t* page, int page_tokens, int slot, float* x) const = 0;
  // Copies slot `src_slot` of `src` into slot `dst_slot` of `dst` (both pages
  // of this codec), as decode() + encode() would, but without the round trip
  // where the layout allows (the f16 residual ring is refilled every token).
  virtual void copy_slot(const uint8_t* src, int src_tokens, int src_slot, uint8_t* dst,
                         int dst_tokens, int dst_slot) const;

  // ---- fused attention: keys ----
  // Floats of scratch prepare_queries() writes per query head.
  virtual size_t prepared_query_floats() const = 0;
  // q: G query heads x head_dim (original domain) -> `prepared` (G x prepared_query_floats()).
  virtual void prepare_queries(const float* q, int G, float* prepared) const = 0;
  // scores[g * stride + (t - begin)] = <q_g, k_t> for slots t in [begin, end).
  virtual void score(const float* prepared, int G, const uint8_t* page, int page_tokens, int begin,
                     int end, float* scores, size_t stride) const = 0;

  // ---- fused attention: values ----
  // True when accumulate() sums in the rotated domain (finish with unrotate()).
  virtual bool values_rotated() const = 0;
  // acc[g * head_dim + i] += sum_t p[g * stride + (t - begin)] * v_t[i] for slots
  // t in [begin, end), v_t in this codec's value domain.
  virtual void accumulate(const float* p, int G, size_t stride, const uint8_t* page,
                          int page_tokens, int begin, int end, float* acc) const = 0;
  // acc (G x head_dim) from the rotated domain back to the original one, in place.
  virtual void unrotate(float* acc, int G) const = 0;

  // Asks the memory system to start loading a page (software prefetch of
  // each of its cache lines). Pages are separate allocations a few KiB per
  // head, too short for the hardware prefetchers to ramp up, so a driver
  // walking pages should call this for the next page of the head (K and V)
  // before scoring the current one: it hides the memory latency.
  void prefetch(const uint8_t* page, int page_tokens) const;

 protected:
  Codec(CodecSpec spec, int head_dim) : spec_(spec), head_dim_(head_dim) {}
  CodecSpec spec_;
  int head_dim_;
};

// Creates a codec for one layer. `rotation` is the layer's R (required when
// spec rotates, ignored otherwise). Throws tkv::Error for an unusable
// combination (e.g. head_dim the codec cannot handle), naming both.
std::unique_ptr<Codec> make_codec(const CodecSpec& spec, int head_dim,
                                  std::shared_ptr<const Rotation> rotation);

// Lloyd-Max (MSE-optimal) centroids, ascending, for one coordinate of a
// uniformly random unit vector in `head_dim` dimensions (approximately
// N(0, 1/head_dim)); 2^bits values. Computed once per (bits, head_dim), cached.
const std::vector<float>& lloyd_max_centroids(int bits, int head_dim);

}  // namespace tkv::kv
