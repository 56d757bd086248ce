// GGUF v2/v3 reader (mmap, validated) and writer.
//
// File layout (little endian), from the GGUF spec:
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x { string key | u32 value_type | value }
//   n_tensors x { string name | u32 n_dims | n_dims x u64 ne | u32 ggml_type | u64 offset }
//   padding to `general.alignment` (default 32) | tensor data (offsets relative to here)
// string = u64 length + bytes (no terminator); array = u32 elem_type + u64 count + elems.
//
// The reader never trusts a count or offset: everything is bounds-checked
// against the file size before it is used or allocated, and every failure is a
// tkv::Error of the form "<path>: <problem>".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mapped_file.h"
#include "tensor/dtype.h"

namespace tkv::gguf {

enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view value_type_name(ValueType t);

// One metadata value. Scalars keep their GGUF type; the payload lives in the
// member matching it (all integer types in `i` or `u`, floats in `f`).
// Arrays keep their element type and hold the elements in the matching vector
// (`ints`/`uints` for integers, `floats`, `bools`, `strings`, or `arrays` for
// arrays of arrays).
struct Value {
  ValueType type = ValueType::UINT8;
  ValueType elem_type = ValueType::UINT8;  // arrays only

  uint64_t u = 0;  // UINT8/16/32/64
  int64_t i = 0;   // INT8/16/32/64
  double f = 0;    // FLOAT32/64
  bool b = false;
  std::string str;

  std::vector<uint64_t> uints;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<uint8_t> bools;
  std::vector<std::string> strings;
  std::vector<Value> arrays;

  bool is_array() const { return type == ValueType::ARRAY; }
  size_t array_size() const;
  // Any integer scalar as int64 (nullopt for non-integers or u64 > INT64_MAX).
  std::optional<int64_t> as_int() const;
  // Any numeric scalar as double.
  std::optional<double> as_float() const;
  // Human-readable, arrays abbreviated after `max_elems` elements.
  std::string to_string(size_t max_elems = 8) const;

  // Structural equality (same types, same payload); used by round-trip tests.
  bool operator==(const Value& o) const = default;

  // Constructors for the writer and tests.
  static Value make_u32(uint32_t v);
  static Value make_i32(int32_t v);
  static Value make_u64(uint64_t v);
  static Value make_f32(float v);
  static Value make_bool(bool v);
  static Value make_string(std::string v);
  static Value make_strings(std::vector<std::string> v);
  static Value make_f32s(const std::vector<float>& v);
  static Value make_i32s(const std::vector<int32_t>& v);
  // Any scalar type. make_uint takes UINT8/16/32/64, make_int INT8/16/32/64,
  // make_float FLOAT32/64; a value that does not fit the type is an error.
  static Value make_uint(ValueType t, uint64_t v);
  static Value make_int(ValueType t, int64_t v);
  static Value make_float(ValueType t, double v);
  // Arrays of any element type (same type rules as the scalars).
  static Value make_uints(ValueType elem, std::vector<uint64_t> v);
  static Value make_ints(ValueType elem, std::vector<int64_t> v);
  static Value make_floats(ValueType elem, std::vector<double> v);
  static Value make_bools(const std::vector<bool>& v);
  // Array of arrays; every element must itself be an array.
  static Value make_arrays(std::vector<Value> v);
};

// tkv::escape_bytes (common/escape.h): bytes as one printable line. Used for
// every key, tensor name and string that reaches an error message or
// `inspect` output.
std::string escape(std::string_view bytes);

// True for UINT8..INT64 (scalar or element type).
bool is_integer_type(ValueType t);
bool is_float_type(ValueType t);
// "uint32", "string", "array[string]", "array[array[int32]]" ...
std::string value_type_string(const Value& v);

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the contiguous (row) dimension
  DType type = DType::F32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // inside the mapped file

  int64_t n_elements() const;
  int64_t rows() const { return shape.empty() ? 1 : n_elements() / shape[0]; }
  int64_t cols() const { return shape.empty() ? 1 : shape[0]; }
};

class GgufFile {
 public:
  // Maps (or, with FileMemory::kCopy, reads) and parses a file. Throws
  // tkv::Error "<path>: <problem>".
  static GgufFile open(const std::string& path, FileMemory memory = FileMemory::kMap);
  // Parses bytes already in memory (the bytes must outlive the result); `name`
  // stands in for the path in error messages. Used by tests and fuzzing.
  static GgufFile parse(const uint8_t* data, size_t size, const std::string& name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }

  // Metadata in file order; keys are unique (duplicates are rejected).
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;

  // Typed getters: nullopt when the key is absent; tkv::Error (naming the key
  // and both types) when it is present with an incompatible type.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  // Arrays; nullptr / nullopt when absent, error when of another type.
  const std::vector<std::string>* get_strings(std::string_view key) const;
  std::optional<std::vector<float>> get_floats(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_ints(std::string_view key) const;
  // Required variants: error "<path>: missing metadata key '<key>'" when absent.
  int64_t require_int(std::string_view key) const;
  double require_float(std::string_view key) const;
  std::string require_string(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  const TensorInfo& require_tensor(std::string_view name) const;

  // The file's bytes, so weights can be used in place (nullptr for parse()).
  const MappedFile* mapping() const { return map_.get(); }
  MappedFile* mapping() { return map_.get(); }

 private:
  std::string path_;
  std::shared_ptr<MappedFile> map_;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  friend class Parser;
};

// Builds a GGUF v3 file. Tensor data comes from a callback at write time so
// that multi-GB synthetic models never have to sit in memory whole.
class GgufWriter {
 public:
  // Fills exactly n_bytes at dst.
  using TensorFiller = std::function<void(uint8_t* dst, size_t n_bytes)>;

  explicit GgufWriter(uint64_t alignment = 32);

  void set(const std::string& key, Value v);  // replaces an existing key
  void set_u32(const std::string& key, uint32_t v) { set(key, Value::make_u32(v)); }
  void set_f32(const std::string& key, float v) { set(key, Value::make_f32(v)); }
  void set_string(const std::string& key, std::string v) {
    set(key, Value::make_string(std::move(v)));
  }

  // shape in ggml order (shape[0] = row length); validated against the type's block size.
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape,
                  TensorFiller fill);
  // Convenience: copies the bytes now.
  void add_tensor(const std::string& name, DType type, std::vector<int64_t> shape, const void* data,
                  size_t n_bytes);

  // Writes atomically (temp file + rename). `progress`, if set, is called
  // after each tensor with (tensors written, total).
  void write(const std::string& path,
             const std::function<void(size_t, size_t)>& progress = nullptr) const;
  // Serializes to memory (tests).
  std::vector<uint8_t> to_bytes() const;

 private:
  using ByteSink = std::function<void(const void*, size_t)>;
  void serialize(const ByteSink& sink, const std::function<void(size_t, size_t)>& progress) const;

  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    uint64_t n_bytes;
    TensorFiller fill;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tkv::gguf
