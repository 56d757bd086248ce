// Model fingerprint for session files: a 128-bit hash of the metadata and the
// tensor table. Two FNV-1a lanes with different offset bases, each finished
// with a splitmix64 avalanche; not cryptographic (a session file is trusted
// input that only needs protecting from accidents, not from forgery).
#include <cstdio>
#include <cstring>

#include "gguf/gguf.h"
#include "model/model.h"

namespace tkv::model {

namespace {

class Hasher {
 public:
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) {
      a_ = (a_ ^ b[i]) * 0x100000001b3ull;
      b_ = (b_ ^ b[i]) * 0x100000001b3ull;
    }
  }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }

  void value(const gguf::Value& v) {
    u64(uint64_t(v.type));
    u64(uint64_t(v.elem_type));
    u64(v.u);
    u64(uint64_t(v.i));
    bytes(&v.f, sizeof v.f);
    u64(v.b);
    str(v.str);
    u64(v.uints.size());
    bytes(v.uints.data(), v.uints.size() * sizeof(uint64_t));
    u64(v.ints.size());
    bytes(v.ints.data(), v.ints.size() * sizeof(int64_t));
    u64(v.floats.size());
    bytes(v.floats.data(), v.floats.size() * sizeof(double));
    u64(v.bools.size());
    bytes(v.bools.data(), v.bools.size());
    u64(v.strings.size());
    for (const auto& s : v.strings) str(s);
    u64(v.arrays.size());
    for (const auto& a : v.arrays) value(a);
  }

  std::string hex() const {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)mix(a_),
                  (unsigned long long)mix(b_));
    return buf;
  }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t a_ = 0xcbf29ce484222325ull;
  uint64_t b_ = 0x84222325cbf29ce4ull;
};

}  // namespace

std::string compute_fingerprint(const gguf::GgufFile& file) {
  Hasher h;
  h.u64(file.metadata().size());
  for (const auto& [key, value] : file.metadata()) {
    h.str(key);
    h.value(value);
  }
  h.u64(file.tensors().size());
  for (const auto& t : file.tensors()) {
    h.str(t.name);
    h.u64(uint64_t(t.type));
    h.u64(t.shape.size());
    for (int64_t d : t.shape) h.u64(uint64_t(d));
    h.u64(t.offset);
  }
  return h.hex();
}

}  // namespace tkv::model
