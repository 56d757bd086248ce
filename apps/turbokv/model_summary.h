// The model part of `turbokv inspect`: what the GGUF metadata says the
// network is, and what its KV cache costs per token under a few codecs
// (computed from the codecs' own page layouts, so it is what the store
// allocates, not an estimate).
#pragma once

#include <string>

namespace tkv::gguf {
class GgufFile;
}

namespace tkv::cli {

// Multi-line text; tkv::Error when the file is not a model turbokv can run
// (a vocabulary-only file, a session file, an unsupported architecture).
std::string describe_model(const gguf::GgufFile& file);

// "  experts: K of N per token; active per token ..." for a file with
// mixture-of-experts layers (any architecture), else empty.
std::string experts_line(const gguf::GgufFile& file);

}  // namespace tkv::cli
