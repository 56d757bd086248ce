// Estimates of the heap bytes a container holds, for memory reports: a
// string's buffer past its inline characters, a vector's capacity, a hash
// map's bucket array and one node per element, each rounded to the block
// malloc hands out (glibc: an 8-byte header, 16-byte granularity).
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tkv::tok {

inline size_t heap_block(size_t bytes) {
  return bytes == 0 ? 0 : (bytes + 8 + 15) / 16 * 16;
}

inline size_t heap_bytes(const std::string& s) {
  // libstdc++ keeps up to 15 characters inside the object.
  return s.capacity() > 15 ? heap_block(s.capacity() + 1) : 0;
}

template <class T>
size_t heap_bytes(const std::vector<T>& v) {
  size_t n = heap_block(v.capacity() * sizeof(T));
  if constexpr (std::is_same_v<T, std::string>)
    for (const std::string& s : v) n += heap_bytes(s);
  return n;
}

inline size_t heap_bytes(const std::vector<bool>& v) {
  return heap_block(v.capacity() / 8);
}

// The keys' own heap (long strings) is added by the caller where keys are strings.
template <class K, class V, class... Rest>
size_t heap_bytes(const std::unordered_map<K, V, Rest...>& m) {
  // A node: the next pointer, the pair and the cached hash.
  const size_t node = heap_block(sizeof(void*) + sizeof(std::pair<const K, V>) + sizeof(size_t));
  size_t n = heap_block(m.bucket_count() * sizeof(void*)) + m.size() * node;
  if constexpr (std::is_same_v<K, std::string>)
    for (const auto& [key, value] : m) n += heap_bytes(key);
  return n;
}

}  // namespace tkv::tok
