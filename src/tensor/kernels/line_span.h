// The cache lines a byte range of a weight row occupies, for the kernels'
// software prefetch of row pieces.
//
// A GGUF file aligns its tensors to 32 bytes (the format's default), and a
// mapped file's data section often sits at 32 mod 64: then every row piece
// of B bytes (B a multiple of 64) spans B / 64 + 1 lines, not B / 64.
// Prefetching B / 64 lines from the piece's first byte leaves its last line
// to a demand miss on every row, a stall to DRAM per row and chunk that the
// software prefetch was there to avoid.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tkv::kernels {

inline constexpr size_t kLineBytes = 64;

struct LineSpan {
  const uint8_t* first = nullptr;  // the line holding the range's first byte
  size_t lines = 0;                // lines from it through the range's last byte
};

inline LineSpan line_span(const uint8_t* p, size_t bytes) {
  if (bytes == 0) return {p, 0};
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = a & ~uintptr_t(kLineBytes - 1);
  const uintptr_t hi = (a + bytes + kLineBytes - 1) & ~uintptr_t(kLineBytes - 1);
  return {p - (a - lo), size_t(hi - lo) / kLineBytes};
}

// The most lines a piece of `bytes` bytes can span, wherever it starts.
inline constexpr size_t max_lines(size_t bytes) {
  return bytes == 0 ? 0 : (bytes + kLineBytes - 1) / kLineBytes + 1;
}

}  // namespace tkv::kernels
