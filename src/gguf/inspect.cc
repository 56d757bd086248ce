#include "gguf/inspect.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/error.h"

namespace tkv::gguf {

namespace {

std::string pad_right(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string pad_left(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t k = 0; k < shape.size(); ++k) s += (k ? " x " : "") + std::to_string(shape[k]);
  return s;
}

// Like Value::to_string, but a long string shows only its beginning.
std::string value_text(const Value& v, const InspectOptions& opt) {
  if (v.type == ValueType::STRING && v.str.size() > opt.max_string_bytes) {
    Value head = Value::make_string(v.str.substr(0, opt.max_string_bytes));
    return str(head.to_string(), "... (", v.str.size(), " bytes)");
  }
  return v.to_string(opt.max_array_elems);
}

// A table whose columns are as wide as their widest cell.
class Table {
 public:
  explicit Table(std::vector<bool> right_aligned) : right_(std::move(right_aligned)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render(const std::string& indent) const {
    std::vector<size_t> width(right_.size(), 0);
    for (const auto& r : rows_)
      for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
    std::string out;
    for (const auto& r : rows_) {
      std::string line = indent;
      for (size_t c = 0; c < r.size(); ++c) {
        const bool last = c + 1 == r.size();
        if (right_[c])
          line += pad_left(r[c], width[c]);
        else
          line += last ? r[c] : pad_right(r[c], width[c]);
        if (!last) line += "  ";
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace

std::string human_bytes(uint64_t n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) return str(n, " B");
  double x = double(n);
  int u = 0;
  while (x >= 1024 && u < 6) x /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", x, kUnits[u]);
  return buf;
}

std::string describe(const GgufFile& file, const InspectOptions& opt) {
  std::string out;
  out += str(escape(file.path()), "\n");
  out += str("  GGUF version ", file.version(), ", ", file.file_size(), " bytes (",
             human_bytes(file.file_size()), "), alignment ", file.alignment(),
             ", data section at offset ", file.data_offset(), "\n");

  out += str("metadata: ", file.metadata().size(), " keys\n");
  if (opt.show_metadata && !file.metadata().empty()) {
    Table t({false, false, false});
    for (const auto& [key, value] : file.metadata())
      t.add({escape(key), value_type_string(value), value_text(value, opt)});
    out += t.render("  ");
  }

  const auto& tensors = file.tensors();
  out += str("tensors: ", tensors.size(), "\n");
  if (opt.show_tensors && !tensors.empty()) {
    Table t({false, false, false, true, true});
    t.add({"name", "type", "shape", "offset", "bytes"});
    for (const TensorInfo& ti : tensors)
      t.add({escape(ti.name), std::string(dtype_name(ti.type)), shape_string(ti.shape),
             std::to_string(ti.offset), std::to_string(ti.n_bytes)});
    out += t.render("  ");
  }

  // Totals by type, in ggml type-number order.
  struct Total {
    uint64_t tensors = 0, elements = 0, bytes = 0;
  };
  std::map<uint32_t, Total> by_type;
  Total all;
  for (const TensorInfo& ti : tensors) {
    Total& tt = by_type[uint32_t(ti.type)];
    for (Total* x : {&tt, &all}) {
      x->tensors += 1;
      x->elements += uint64_t(ti.n_elements());
      x->bytes += ti.n_bytes;
    }
  }
  if (!tensors.empty()) {
    out += "totals by type:\n";
    Table t({false, true, true, true, true});
    t.add({"type", "tensors", "elements", "bytes", ""});
    for (const auto& [type, tt] : by_type)
      t.add({std::string(dtype_name(DType(type))), std::to_string(tt.tensors),
             std::to_string(tt.elements), std::to_string(tt.bytes), human_bytes(tt.bytes)});
    t.add({"all", std::to_string(all.tensors), std::to_string(all.elements),
           std::to_string(all.bytes), human_bytes(all.bytes)});
    out += t.render("  ");
  }
  return out;
}

}  // namespace tkv::gguf
