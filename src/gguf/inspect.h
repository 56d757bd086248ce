// Human-readable description of a GGUF file, for `turbokv inspect`.
#pragma once

#include <cstddef>
#include <string>

#include "gguf/gguf.h"

namespace tkv::gguf {

struct InspectOptions {
  size_t max_array_elems = 8;     // arrays show this many elements, then "... (N total)"
  size_t max_string_bytes = 120;  // longer strings (chat templates) are cut, with their size
  bool show_metadata = true;
  bool show_tensors = true;
};

// Multi-line text:
//   header: path, GGUF version, file size, alignment, data section offset;
//   metadata: one line per key with its type and value (long arrays and
//     strings abbreviated);
//   tensors: name, type, shape (ggml order, row length first), offset in the
//     data section, bytes;
//   totals by type: tensor count, elements and bytes per type, then overall.
std::string describe(const GgufFile& file, const InspectOptions& options = {});

// "1.50 MiB", "512 B": sizes for people.
std::string human_bytes(uint64_t n);

}  // namespace tkv::gguf
