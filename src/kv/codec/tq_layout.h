// Byte layout of a TurboQuant (tqN) page, shared by the codec and its kernels.
//
// A page of P slots (P a multiple of 16) is P/16 tiles of 16 tokens followed
// by the P norms (f16, slot order):
//
//   [tile 0][tile 1] ... [tile P/16 - 1][norm 0][norm 1] ... [norm P-1]
//
// A tile holds the codes of its 16 tokens "tokens in lanes": the code of
// coordinate i of the tile's token t is stored in lane t of a 32-bit word, so
// one 64-byte load gives the same coordinate group of 16 tokens and a vector
// shift + permute turns it into 16 centroid values (keys: one FMA scores 16
// tokens, no horizontal sums). Values are read from the same layout by
// broadcasting a token's word and shifting each lane by its own amount.
//
// Codes are split in planes of width w: tq1 [1], tq2 [2], tq3 [2, 1] (low two
// bits, then the high bit), tq4 [4]. In a plane, token t's codes form a bit
// string with coordinate i at bits [i*w, i*w + w); it is cut into 32-bit
// words, word j = bits [32j, 32j + 32). A full word is stored as 16
// little-endian u32 (lane t at bytes [4t, 4t+4)); the last, partial word
// (head_dim*w not a multiple of 32) is stored with 1 byte per lane (8 bits
// left), 2 bytes (16 bits) or 4 bytes (24 bits, top byte zero). Planes follow
// each other in the tile. Nothing is padded except that 24-bit tail.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tkv::kv {

inline constexpr int kTqTileTokens = 16;

struct TqPlane {
  int width = 0;       // bits per code in this plane
  int offset = 0;      // byte offset of the plane in the tile
  int full_words = 0;  // 64-byte words (16 lanes x u32)
  int tail_bytes = 0;  // bytes per lane of the partial last word: 0, 1, 2 or 4
  int bytes() const { return kTqTileTokens * (4 * full_words + tail_bytes); }
};

struct TqGeometry {
  int head_dim = 0;
  int bits = 0;
  int n_planes = 0;
  TqPlane plane[2];
  int tile_bytes = 0;

  static TqGeometry make(int head_dim, int bits) {
    TqGeometry g;
    g.head_dim = head_dim;
    g.bits = bits;
    const int widths[2] = {bits == 3 ? 2 : bits, bits == 3 ? 1 : 0};
    g.n_planes = bits == 3 ? 2 : 1;
    int offset = 0;
    for (int p = 0; p < g.n_planes; ++p) {
      TqPlane& pl = g.plane[p];
      pl.width = widths[p];
      pl.offset = offset;
      const int total_bits = head_dim * pl.width;
      pl.full_words = total_bits / 32;
      const int tail_bits = total_bits % 32;
      pl.tail_bytes = tail_bits == 0 ? 0 : tail_bits <= 8 ? 1 : tail_bits <= 16 ? 2 : 4;
      offset += pl.bytes();
    }
    g.tile_bytes = offset;
    return g;
  }
  size_t norms_offset(int page_tokens) const {
    return size_t(page_tokens / kTqTileTokens) * tile_bytes;
  }
  size_t page_bytes(int page_tokens) const {
    return norms_offset(page_tokens) + size_t(page_tokens) * 2;
  }
  // Coordinates whose codes lie in full words of every plane (the kernels'
  // fast path); the remaining ones come from the partial last words.
  int full_coords() const {
    int n = head_dim;
    for (int p = 0; p < n_planes; ++p) {
      const int c = plane[p].full_words * (32 / plane[p].width);
      n = c < n ? c : n;
    }
    return n;
  }
};

// Scalar access to one token's codes in a tile (encode, decode, tails).
inline uint32_t tq_plane_word(const TqPlane& pl, const uint8_t* tile, int lane, int j) {
  const uint8_t* p;
  int n;
  if (j < pl.full_words) {
    p = tile + pl.offset + 64 * j + 4 * lane;
    n = 4;
  } else {
    p = tile + pl.offset + 64 * pl.full_words + pl.tail_bytes * lane;
    n = pl.tail_bytes;
  }
  uint32_t w = 0;
  for (int b = 0; b < n; ++b) w |= uint32_t(p[b]) << (8 * b);
  return w;
}

inline int tq_code_at(const TqGeometry& g, const uint8_t* tile, int lane, int i) {
  const TqPlane& p0 = g.plane[0];
  const int bit0 = i * p0.width;
  int code = int(tq_plane_word(p0, tile, lane, bit0 / 32) >> (bit0 % 32)) & ((1 << p0.width) - 1);
  if (g.n_planes == 2)
    code |= int((tq_plane_word(g.plane[1], tile, lane, i / 32) >> (i % 32)) & 1) << 2;
  return code;
}

// Writes token `lane`'s codes (head_dim values in 0..2^bits-1) into its lanes
// of the tile; bytes of other lanes are not touched.
inline void tq_store_codes(const TqGeometry& g, const uint8_t* codes, uint8_t* tile, int lane) {
  for (int p = 0; p < g.n_planes; ++p) {
    const TqPlane& pl = g.plane[p];
    const int per_word = 32 / pl.width;
    const int shift = p == 0 ? 0 : 2;  // tq3: plane 1 holds bit 2
    const uint32_t mask = (1u << pl.width) - 1;
    const int words = pl.full_words + (pl.tail_bytes ? 1 : 0);
    for (int j = 0; j < words; ++j) {
      uint32_t w = 0;
      for (int c = 0; c < per_word; ++c) {
        const int i = j * per_word + c;
        if (i >= g.head_dim) break;
        w |= ((uint32_t(codes[i]) >> shift) & mask) << (c * pl.width);
      }
      uint8_t* dst;
      int n;
      if (j < pl.full_words) {
        dst = tile + pl.offset + 64 * j + 4 * lane;
        n = 4;
      } else {
        dst = tile + pl.offset + 64 * pl.full_words + pl.tail_bytes * lane;
        n = pl.tail_bytes;
      }
      for (int b = 0; b < n; ++b) dst[b] = uint8_t(w >> (8 * b));
    }
  }
}

}  // namespace tkv::kv
