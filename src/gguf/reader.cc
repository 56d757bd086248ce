// GGUF reader: parses and validates a whole file held in memory (mmap).
//
// Every count and length is checked against the bytes that actually remain
// before anything is allocated: each metadata entry takes at least
// kMinKvBytes, each tensor info at least kMinTensorInfoBytes and each array
// element at least min_element_bytes(type), so a claimed count larger than
// remaining / minimum is rejected up front. What is allocated is therefore
// bounded by a small constant times the file size.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_set>

#include "common/error.h"
#include "gguf/gguf.h"

namespace tkv::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
// Arrays of arrays nest; the parser recurses, so the depth is bounded.
constexpr int kMaxArrayDepth = 8;
// key length (u64) + value type (u32) + the smallest value (1 byte).
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
// name length (u64) + n_dims (u32) + type (u32) + offset (u64), zero dims.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
// Metadata and tensor counts up to this are seen in real files (a 405B model
// has a few thousand tensors); a larger one with too few bytes after it is
// a corrupt count rather than a cut file.
constexpr uint64_t kPlausibleCount = 1 << 20;
// Likewise tensor offsets and sizes up to 4 TiB.
constexpr uint64_t kPlausibleDataBytes = uint64_t(1) << 42;
constexpr uint32_t kMaxValueType = uint32_t(ValueType::FLOAT64);

// Smallest encoding of one array element of type t (for count validation).
uint64_t min_element_bytes(ValueType t) {
  switch (t) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
      return 8;  // length prefix
    case ValueType::ARRAY:
      return 4 + 8;  // element type + count
  }
  return 1;
}

// Reservations are capped so that a claimed count never sizes an allocation
// by itself; vectors grow past the cap only as elements are really parsed.
constexpr size_t kMaxReserve = 1 << 16;

}  // namespace

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, const std::string& name, GgufFile& out)
      : d_(data), size_(size), name_(name), out_(out) {}

  void run() {
    out_.path_ = name_;
    out_.size_ = size_;
    parse_header();
    parse_metadata();
    resolve_alignment();
    parse_tensor_infos();
    place_tensors();
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(Args&&... args) const {
    fail(name_, ": ", std::forward<Args>(args)...);
  }

  size_t remaining() const { return size_ - pos_; }

  // Throws a truncation error unless n more bytes are present.
  void need(uint64_t n) const {
    if (n > remaining())
      error("truncated ", where_, " (needs ", n, " bytes at offset ", pos_, ", file has ", size_,
            ")");
  }

  template <typename T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, d_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // GGUF string: u64 length + bytes, no terminator, any bytes (UTF-8 is not
  // validated: the tokenizer's byte tokens are not valid UTF-8).
  std::string_view read_string() {
    const uint64_t len = read<uint64_t>();
    need(len);
    std::string_view s(reinterpret_cast<const char*>(d_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

  ValueType read_value_type(const char* what) {
    const uint32_t t = read<uint32_t>();
    if (t > kMaxValueType) error(where_, ": unknown ", what, " ", t);
    return ValueType(t);
  }

  void parse_header() {
    where_ = "header";
    if (size_ < 4) {
      if (size_ > 0 && std::memcmp(d_, "GGUF", size_) == 0) need(4);  // truncated magic
      error("not a GGUF file (", size_, " bytes)");
    }
    if (std::memcmp(d_, "GGUF", 4) != 0)
      error("not a GGUF file (magic is '", escape({reinterpret_cast<const char*>(d_), 4}),
            "', expected 'GGUF')");
    pos_ = 4;
    const uint32_t version = read<uint32_t>();
    if (version == 1) error("GGUF version 1 is not supported (only versions 2 and 3)");
    if (version != 2 && version != 3) {
      if ((version & 0xffff) == 0 && ((version >> 24) == 2 || (version >> 24) == 3))
        error("big-endian GGUF files are not supported");
      error("unsupported GGUF version ", version, " (only versions 2 and 3)");
    }
    out_.version_ = version;
    n_tensors_ = read<uint64_t>();
    n_kv_ = read<uint64_t>();
    // Counts are validated against what follows before any is used.
    // A count that real files have, with too few bytes after it, is a file
    // cut short (an interrupted download); a count no file has is corrupt.
    if (n_kv_ > remaining() / kMinKvBytes) {
      if (n_kv_ <= kPlausibleCount)
        error("truncated: the header announces ", n_kv_, " metadata entries, only ", remaining(),
              " bytes follow it (file has ", size_, " bytes)");
      error("absurd metadata count ", n_kv_, " (only ", remaining(), " bytes follow the header)");
    }
    const uint64_t after_kv = remaining() - n_kv_ * kMinKvBytes;
    if (n_tensors_ > after_kv / kMinTensorInfoBytes) {
      if (n_tensors_ <= kPlausibleCount)
        error("truncated: the header announces ", n_kv_, " metadata entries and ", n_tensors_,
              " tensors, only ", remaining(), " bytes follow it (file has ", size_, " bytes)");
      error("absurd tensor count ", n_tensors_, " (only ", remaining(),
            " bytes follow the header)");
    }
  }

  void parse_metadata() {
    out_.kv_.reserve(std::min<uint64_t>(n_kv_, kMaxReserve));
    std::unordered_set<std::string_view> seen;
    for (uint64_t k = 0; k < n_kv_; ++k) {
      where_ = str("metadata entry #", k);
      const std::string_view key = read_string();
      if (!seen.insert(key).second) error("duplicate metadata key '", escape(key), "'");
      where_ = str("metadata key '", escape(key), "'");
      const ValueType type = read_value_type("value type");
      out_.kv_.emplace_back(std::string(key), read_value(type, 0));
    }
  }

  Value read_value(ValueType type, int depth) {
    Value v;
    v.type = type;
    switch (type) {
      case ValueType::UINT8:
        v.u = read<uint8_t>();
        break;
      case ValueType::UINT16:
        v.u = read<uint16_t>();
        break;
      case ValueType::UINT32:
        v.u = read<uint32_t>();
        break;
      case ValueType::UINT64:
        v.u = read<uint64_t>();
        break;
      case ValueType::INT8:
        v.i = read<int8_t>();
        break;
      case ValueType::INT16:
        v.i = read<int16_t>();
        break;
      case ValueType::INT32:
        v.i = read<int32_t>();
        break;
      case ValueType::INT64:
        v.i = read<int64_t>();
        break;
      case ValueType::FLOAT32:
        v.f = read<float>();
        break;
      case ValueType::FLOAT64:
        v.f = read<double>();
        break;
      case ValueType::BOOL:
        v.b = read<uint8_t>() != 0;
        break;
      case ValueType::STRING:
        v.str = std::string(read_string());
        break;
      case ValueType::ARRAY:
        read_array(v, depth);
        break;
    }
    return v;
  }

  template <typename Stored, typename OnDisk>
  void read_numbers(std::vector<Stored>& dst, uint64_t n) {
    dst.resize(size_t(n));  // n * sizeof(OnDisk) bytes are known to be present
    for (uint64_t k = 0; k < n; ++k) {
      OnDisk x;
      std::memcpy(&x, d_ + pos_, sizeof(OnDisk));
      pos_ += sizeof(OnDisk);
      dst[size_t(k)] = Stored(x);
    }
  }

  void read_array(Value& v, int depth) {
    v.elem_type = read_value_type("array element type");
    const uint64_t n = read<uint64_t>();
    const uint64_t min_bytes = min_element_bytes(v.elem_type);
    if (n > remaining() / min_bytes)
      error(n <= kPlausibleCount ? "truncated: " : "", where_, ": array of ", n, " ",
            value_type_name(v.elem_type), " elements cannot fit in the ", remaining(),
            " bytes left in the file");
    switch (v.elem_type) {
      case ValueType::UINT8:
        read_numbers<uint64_t, uint8_t>(v.uints, n);
        break;
      case ValueType::UINT16:
        read_numbers<uint64_t, uint16_t>(v.uints, n);
        break;
      case ValueType::UINT32:
        read_numbers<uint64_t, uint32_t>(v.uints, n);
        break;
      case ValueType::UINT64:
        read_numbers<uint64_t, uint64_t>(v.uints, n);
        break;
      case ValueType::INT8:
        read_numbers<int64_t, int8_t>(v.ints, n);
        break;
      case ValueType::INT16:
        read_numbers<int64_t, int16_t>(v.ints, n);
        break;
      case ValueType::INT32:
        read_numbers<int64_t, int32_t>(v.ints, n);
        break;
      case ValueType::INT64:
        read_numbers<int64_t, int64_t>(v.ints, n);
        break;
      case ValueType::FLOAT32:
        read_numbers<double, float>(v.floats, n);
        break;
      case ValueType::FLOAT64:
        read_numbers<double, double>(v.floats, n);
        break;
      case ValueType::BOOL:
        v.bools.resize(size_t(n));
        for (uint64_t k = 0; k < n; ++k) v.bools[size_t(k)] = d_[pos_++] != 0;
        break;
      case ValueType::STRING:
        v.strings.reserve(std::min<uint64_t>(n, kMaxReserve));
        for (uint64_t k = 0; k < n; ++k) v.strings.emplace_back(read_string());
        break;
      case ValueType::ARRAY:
        if (depth + 1 >= kMaxArrayDepth)
          error(where_, ": arrays nested more than ", kMaxArrayDepth, " levels deep");
        v.arrays.reserve(std::min<uint64_t>(n, kMaxReserve));
        for (uint64_t k = 0; k < n; ++k)
          v.arrays.push_back(read_value(ValueType::ARRAY, depth + 1));
        break;
    }
  }

  void resolve_alignment() {
    where_ = "metadata";
    uint64_t alignment = kDefaultAlignment;
    if (const Value* a = out_.find("general.alignment")) {
      const std::optional<int64_t> n = a->as_int();
      if (!n) error("general.alignment has type ", value_type_string(*a), ", expected an integer");
      if (*n <= 0 || !std::has_single_bit(uint64_t(*n)))
        error("general.alignment ", *n, " is not a nonzero power of two");
      alignment = uint64_t(*n);
    }
    out_.alignment_ = alignment;
  }

  void parse_tensor_infos() {
    out_.tensors_.reserve(std::min<uint64_t>(n_tensors_, kMaxReserve));
    std::unordered_set<std::string_view> seen;
    for (uint64_t k = 0; k < n_tensors_; ++k) {
      where_ = str("tensor info #", k);
      const std::string_view raw_name = read_string();
      const std::string name = escape(raw_name);  // for messages
      if (!seen.insert(raw_name).second) error("duplicate tensor name '", name, "'");
      where_ = str("tensor info '", name, "'");
      TensorInfo t;
      t.name = std::string(raw_name);

      const uint32_t n_dims = read<uint32_t>();
      if (n_dims > kMaxDims) error("tensor '", name, "' has ", n_dims, " dimensions (at most 4)");
      uint64_t n_elements = 1;
      for (uint32_t j = 0; j < n_dims; ++j) {
        const uint64_t ne = read<uint64_t>();
        if (ne == 0 || ne > uint64_t(std::numeric_limits<int64_t>::max()))
          error("tensor '", name, "' has invalid dimension ", j, " = ", int64_t(ne));
        if (n_elements > uint64_t(std::numeric_limits<int64_t>::max()) / ne)
          error("tensor '", name, "' has too many elements (the shape's product overflows)");
        n_elements *= ne;
        t.shape.push_back(int64_t(ne));
      }

      const uint32_t raw_type = read<uint32_t>();
      const std::optional<DTypeTraits> tr = dtype_traits(raw_type);
      if (!tr) error("tensor '", name, "' has unknown type ", raw_type);
      t.type = tr->type;
      const uint64_t row = t.shape.empty() ? 1 : uint64_t(t.shape[0]);
      if (row % tr->block_size != 0)
        error("tensor '", name, "' of type ", tr->name, " has rows of ", row,
              " elements, not a multiple of the block size ", tr->block_size);
      const uint64_t n_blocks = n_elements / tr->block_size;
      if (n_blocks > std::numeric_limits<uint64_t>::max() / tr->block_bytes)
        error("tensor '", name, "' is too large (byte size overflows)");
      t.n_bytes = n_blocks * tr->block_bytes;

      t.offset = read<uint64_t>();
      if (t.offset % out_.alignment_ != 0)
        error("tensor '", name, "' has offset ", t.offset, ", not a multiple of the alignment ",
              out_.alignment_);
      out_.tensors_.push_back(std::move(t));
    }
  }

  void place_tensors() {
    const uint64_t pad = (out_.alignment_ - pos_ % out_.alignment_) % out_.alignment_;
    out_.data_offset_ = pos_ + pad;
    if (out_.tensors_.empty()) return;  // nothing to place; trailing padding is optional
    if (out_.data_offset_ > size_)
      error("truncated before the tensor data (data section starts at ", out_.data_offset_,
            ", file has ", size_, " bytes)");
    const uint64_t data_bytes = size_ - out_.data_offset_;
    for (TensorInfo& t : out_.tensors_) {
      // Within what real models span, the tensor table is right and the
      // data is missing: a file cut short.
      const bool plausible = t.offset <= kPlausibleDataBytes && t.n_bytes <= kPlausibleDataBytes;
      if (t.offset > data_bytes || t.n_bytes > data_bytes - t.offset)
        error(plausible ? "truncated: " : "", "tensor '", escape(t.name), "' (offset ", t.offset,
              ", ", t.n_bytes, " bytes) extends past the end of the file (data section has ",
              data_bytes, " bytes)");
      t.data = d_ + out_.data_offset_ + t.offset;
    }
    // Overlap: sort by offset and compare neighbours.
    std::vector<size_t> order(out_.tensors_.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return out_.tensors_[a].offset < out_.tensors_[b].offset;
    });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = out_.tensors_[order[k - 1]];
      const TensorInfo& cur = out_.tensors_[order[k]];
      if (prev.offset + prev.n_bytes > cur.offset)
        error("tensors '", escape(prev.name), "' and '", escape(cur.name), "' overlap (offsets ",
              prev.offset, " + ", prev.n_bytes, " bytes and ", cur.offset, ")");
    }
  }

  const uint8_t* d_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
  GgufFile& out_;
  std::string where_;  // what is being read, for truncation messages
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

GgufFile GgufFile::open(const std::string& path, FileMemory memory) {
  auto map = std::make_shared<MappedFile>(path, memory);
  GgufFile f = parse(map->data(), map->size(), path);
  f.map_ = std::move(map);
  return f;
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  GgufFile f;
  Parser(data, size, name, f).run();
  return f;
}

const Value* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : kv_)
    if (k == key) return &v;
  return nullptr;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, std::string_view key, const Value& v,
                             const char* expected) {
  fail(path, ": metadata key '", escape(key), "' has type ", value_type_string(v), ", expected ",
       expected);
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!is_integer_type(v->type)) wrong_type(path_, key, *v, "an integer");
  const std::optional<int64_t> n = v->as_int();
  if (!n) fail(path_, ": metadata key '", escape(key), "' value ", v->u, " is out of range");
  return n;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  const std::optional<double> x = v->as_float();
  if (!x) wrong_type(path_, key, *v, "a number");
  return x;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::BOOL) wrong_type(path_, key, *v, "bool");
  return v->b;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != ValueType::STRING) wrong_type(path_, key, *v, "string");
  return v->str;
}

const std::vector<std::string>* GgufFile::get_strings(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return nullptr;
  if (!v->is_array() || v->elem_type != ValueType::STRING)
    wrong_type(path_, key, *v, "array[string]");
  return &v->strings;
}

std::optional<std::vector<float>> GgufFile::get_floats(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array()) wrong_type(path_, key, *v, "a numeric array");
  if (is_float_type(v->elem_type)) return std::vector<float>(v->floats.begin(), v->floats.end());
  if (is_integer_type(v->elem_type)) {
    std::vector<float> r;
    r.reserve(v->array_size());
    for (int64_t x : v->ints) r.push_back(float(x));
    for (uint64_t x : v->uints) r.push_back(float(x));
    return r;
  }
  wrong_type(path_, key, *v, "a numeric array");
}

std::optional<std::vector<int64_t>> GgufFile::get_ints(std::string_view key) const {
  const Value* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_array() || !is_integer_type(v->elem_type))
    wrong_type(path_, key, *v, "an integer array");
  if (!v->uints.empty()) {
    std::vector<int64_t> r;
    r.reserve(v->uints.size());
    for (uint64_t x : v->uints) {
      if (x > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(path_, ": metadata key '", escape(key), "' element ", x, " is out of range");
      r.push_back(int64_t(x));
    }
    return r;
  }
  return v->ints;
}

int64_t GgufFile::require_int(std::string_view key) const {
  if (auto v = get_int(key)) return *v;
  fail(path_, ": missing metadata key '", escape(key), "'");
}

double GgufFile::require_float(std::string_view key) const {
  if (auto v = get_float(key)) return *v;
  fail(path_, ": missing metadata key '", escape(key), "'");
}

std::string GgufFile::require_string(std::string_view key) const {
  if (auto v = get_string(key)) return *v;
  fail(path_, ": missing metadata key '", escape(key), "'");
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorInfo& GgufFile::require_tensor(std::string_view name) const {
  if (const TensorInfo* t = find_tensor(name)) return *t;
  fail(path_, ": missing tensor '", escape(name), "'");
}

}  // namespace tkv::gguf
