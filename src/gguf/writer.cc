// GGUF v3 writer. Layout written (little endian):
//   "GGUF" | u32 3 | u64 n_tensors | u64 n_kv | metadata | tensor infos
//   | zero padding to the alignment | each tensor's data, zero padded to the
//   alignment (the last one too, as llama.cpp's writer does).
// Tensor offsets are assigned in insertion order, each one aligned.
#include <bit>
#include <cstring>
#include <limits>

#include "common/atomic_file.h"
#include "common/error.h"
#include "gguf/gguf.h"

namespace tkv::gguf {

namespace {

constexpr uint64_t kDefaultAlignment = 32;
// ggml's GGML_MAX_NAME is 64 including the terminator; longer names would
// not load in llama.cpp.
constexpr size_t kMaxTensorName = 63;
constexpr int kMaxArrayDepth = 8;  // the reader's limit

uint64_t align_up(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Rejects a Value whose payload does not sit in the member its type names
// (possible when a Value is assembled by hand) or does not fit the type.
void validate_value(const std::string& key, const Value& v, int depth) {
  auto bad = [&](auto&&... what) {
    fail("GgufWriter: metadata key '", escape(key), "': ", what...);
  };
  if (uint32_t(v.type) > uint32_t(ValueType::FLOAT64)) bad("unknown value type ", uint32_t(v.type));
  if (!v.is_array()) {
    // Scalars: re-run the range checks of the constructors.
    if (is_integer_type(v.type)) {
      const bool is_signed = v.type == ValueType::INT8 || v.type == ValueType::INT16 ||
                             v.type == ValueType::INT32 || v.type == ValueType::INT64;
      try {
        if (is_signed)
          (void)Value::make_int(v.type, v.i);
        else
          (void)Value::make_uint(v.type, v.u);
      } catch (const Error& e) {
        bad(e.what());
      }
    }
    return;
  }
  if (depth + 1 >= kMaxArrayDepth) bad("arrays nested more than ", kMaxArrayDepth, " levels deep");
  const ValueType et = v.elem_type;
  if (uint32_t(et) > uint32_t(ValueType::FLOAT64)) bad("unknown element type ", uint32_t(et));
  const size_t filled = size_t(!v.uints.empty()) + !v.ints.empty() + !v.floats.empty() +
                        !v.bools.empty() + !v.strings.empty() + !v.arrays.empty();
  if (filled > 1 || (filled == 1 && v.array_size() == 0))
    bad("array of ", value_type_name(et), " holds its elements in the wrong member");
  try {
    if (is_integer_type(et) && !v.uints.empty()) (void)Value::make_uints(et, v.uints);
    if (is_integer_type(et) && !v.ints.empty()) (void)Value::make_ints(et, v.ints);
  } catch (const Error& e) {
    bad(e.what());
  }
  for (const Value& inner : v.arrays) {
    if (!inner.is_array()) bad("element of an array of arrays is a ", value_type_name(inner.type));
    validate_value(key, inner, depth + 1);
  }
}

// Appends little-endian encodings to any sink with write(const void*, size_t).
template <typename Sink>
class Encoder {
 public:
  explicit Encoder(Sink& s) : s_(s) {}

  template <typename T>
  void put(T v) {
    s_.write(&v, sizeof v);
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    s_.write(s.data(), s.size());
  }
  void put_zeros(uint64_t n) {
    static const uint8_t kZeros[256] = {};
    while (n > 0) {
      const size_t k = size_t(std::min<uint64_t>(n, sizeof kZeros));
      s_.write(kZeros, k);
      n -= k;
    }
  }

  // The value's payload, without its type tag (arrays: element type + count + elements).
  void put_value(const Value& v) {
    switch (v.type) {
      case ValueType::UINT8:
        put<uint8_t>(uint8_t(v.u));
        break;
      case ValueType::UINT16:
        put<uint16_t>(uint16_t(v.u));
        break;
      case ValueType::UINT32:
        put<uint32_t>(uint32_t(v.u));
        break;
      case ValueType::UINT64:
        put<uint64_t>(v.u);
        break;
      case ValueType::INT8:
        put<int8_t>(int8_t(v.i));
        break;
      case ValueType::INT16:
        put<int16_t>(int16_t(v.i));
        break;
      case ValueType::INT32:
        put<int32_t>(int32_t(v.i));
        break;
      case ValueType::INT64:
        put<int64_t>(v.i);
        break;
      case ValueType::FLOAT32:
        put<float>(float(v.f));
        break;
      case ValueType::FLOAT64:
        put<double>(v.f);
        break;
      case ValueType::BOOL:
        put<uint8_t>(v.b ? 1 : 0);
        break;
      case ValueType::STRING:
        put_string(v.str);
        break;
      case ValueType::ARRAY:
        put_array(v);
        break;
    }
  }

 private:
  void put_array(const Value& v) {
    put<uint32_t>(uint32_t(v.elem_type));
    put<uint64_t>(v.array_size());
    Value elem;  // scalar carrier so that put_value does the narrowing
    elem.type = v.elem_type;
    switch (v.elem_type) {
      case ValueType::UINT8:
      case ValueType::UINT16:
      case ValueType::UINT32:
      case ValueType::UINT64:
        for (uint64_t x : v.uints) elem.u = x, put_value(elem);
        break;
      case ValueType::INT8:
      case ValueType::INT16:
      case ValueType::INT32:
      case ValueType::INT64:
        for (int64_t x : v.ints) elem.i = x, put_value(elem);
        break;
      case ValueType::FLOAT32:
      case ValueType::FLOAT64:
        for (double x : v.floats) elem.f = x, put_value(elem);
        break;
      case ValueType::BOOL:
        for (uint8_t x : v.bools) put<uint8_t>(x ? 1 : 0);
        break;
      case ValueType::STRING:
        for (const std::string& x : v.strings) put_string(x);
        break;
      case ValueType::ARRAY:
        for (const Value& x : v.arrays) put_value(x);
        break;
    }
  }

  Sink& s_;
};

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (alignment == 0 || !std::has_single_bit(alignment) ||
      alignment > std::numeric_limits<uint32_t>::max())
    fail("GgufWriter: alignment ", alignment, " is not a nonzero 32-bit power of two");
  if (alignment != kDefaultAlignment)
    kv_.emplace_back("general.alignment", Value::make_u32(uint32_t(alignment)));
}

void GgufWriter::set(const std::string& key, Value v) {
  validate_value(key, v, 0);
  if (key == "general.alignment") {
    if (v.type != ValueType::UINT32 || v.u != alignment_)
      fail("GgufWriter: general.alignment must be the uint32 ", alignment_,
           " given to the constructor, got ", value_type_string(v), " ", v.to_string());
  }
  for (auto& [k, old] : kv_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  kv_.emplace_back(key, std::move(v));
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape,
                            TensorFiller fill) {
  auto bad = [&](auto&&... what) { fail("GgufWriter: tensor '", escape(name), "': ", what...); };
  if (name.empty()) fail("GgufWriter: tensor with an empty name");
  if (name.size() > kMaxTensorName) bad("name longer than ", kMaxTensorName, " bytes");
  for (const PendingTensor& t : tensors_)
    if (t.name == name) bad("added twice");
  const std::optional<DTypeTraits> tr = dtype_traits(uint32_t(type));
  if (!tr) bad("unknown type ", uint32_t(type));
  if (shape.empty() || shape.size() > 4) bad(shape.size(), " dimensions (must be 1 to 4)");
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) bad("dimension ", d, " is not positive");
    if (n > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(d)) bad("too many elements");
    n *= uint64_t(d);
  }
  if (shape[0] % tr->block_size != 0)
    bad("row of ", shape[0], " elements is not a multiple of ", tr->name, "'s block size ",
        tr->block_size);
  if (!fill) bad("no data callback");
  const uint64_t n_blocks = n / tr->block_size;
  if (n_blocks > std::numeric_limits<uint64_t>::max() / tr->block_bytes) bad("too large");
  tensors_.push_back({name, type, std::move(shape), n_blocks * tr->block_bytes, std::move(fill)});
}

void GgufWriter::add_tensor(const std::string& name, DType type, std::vector<int64_t> shape,
                            const void* data, size_t n_bytes) {
  auto copy = std::make_shared<std::vector<uint8_t>>(static_cast<const uint8_t*>(data),
                                                     static_cast<const uint8_t*>(data) + n_bytes);
  add_tensor(name, type, std::move(shape),
             [copy](uint8_t* dst, size_t n) { std::memcpy(dst, copy->data(), n); });
  if (tensors_.back().n_bytes != n_bytes) {
    const uint64_t want = tensors_.back().n_bytes;
    tensors_.pop_back();
    fail("GgufWriter: tensor '", escape(name), "': ", n_bytes,
         " bytes given, its shape and type need ", want);
  }
}

void GgufWriter::serialize(const ByteSink& sink,
                           const std::function<void(size_t, size_t)>& progress) const {
  struct FunctionSink {
    const ByteSink& f;
    uint64_t n = 0;
    void write(const void* p, size_t k) {
      f(p, k);
      n += k;
    }
  } out{sink};
  Encoder<FunctionSink> e(out);

  out.write("GGUF", 4);
  e.put<uint32_t>(3);
  e.put<uint64_t>(tensors_.size());
  e.put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    e.put_string(key);
    e.put<uint32_t>(uint32_t(value.type));
    e.put_value(value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    e.put_string(t.name);
    e.put<uint32_t>(uint32_t(t.shape.size()));
    for (int64_t d : t.shape) e.put<uint64_t>(uint64_t(d));
    e.put<uint32_t>(uint32_t(t.type));
    e.put<uint64_t>(offset);
    offset += align_up(t.n_bytes, alignment_);
  }
  e.put_zeros(align_up(out.n, alignment_) - out.n);

  // One tensor in memory at a time.
  std::vector<uint8_t> buf;
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const PendingTensor& t = tensors_[k];
    buf.resize(size_t(t.n_bytes));
    t.fill(buf.data(), buf.size());
    out.write(buf.data(), buf.size());
    e.put_zeros(align_up(t.n_bytes, alignment_) - t.n_bytes);
    if (progress) progress(k + 1, tensors_.size());
  }
}

void GgufWriter::write(const std::string& path,
                       const std::function<void(size_t, size_t)>& progress) const {
  AtomicFileWriter file(path);
  serialize([&](const void* p, size_t n) { file.write(p, n); }, progress);
  file.commit();
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  serialize(
      [&](const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
      },
      nullptr);
  return out;
}

}  // namespace tkv::gguf
