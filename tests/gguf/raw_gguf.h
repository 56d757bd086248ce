// Builds GGUF bytes by hand, field by field, so that tests can write files
// the writer would refuse (bad counts, bad types, overlapping tensors...).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace tkv::gguf::test {

class RawGguf {
 public:
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& f32(float v) { return put(v); }
  RawGguf& bytes(std::string_view s) { return append(s.data(), s.size()); }
  // GGUF string: u64 length + bytes.
  RawGguf& str(std::string_view s) { return u64(s.size()).bytes(s); }
  // "GGUF" | version | n_tensors | n_kv
  RawGguf& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return bytes("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  // A metadata entry holding a uint32.
  RawGguf& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  // A tensor info: name | n_dims | dims | type | offset.
  RawGguf& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type,
                  uint64_t offset) {
    str(name).u32(uint32_t(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  RawGguf& pad_to(size_t alignment) {
    while (bytes_.size() % alignment) bytes_.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  const std::vector<uint8_t>& data() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  template <typename T>
  RawGguf& put(T v) {
    return append(&v, sizeof(T));
  }
  // resize + memcpy rather than insert: GCC 12 warns falsely
  // (-Wstringop-overflow) on inlined vector::insert.
  RawGguf& append(const void* p, size_t n) {
    const size_t old = bytes_.size();
    bytes_.resize(old + n);
    if (n) std::memcpy(bytes_.data() + old, p, n);
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

}  // namespace tkv::gguf::test
