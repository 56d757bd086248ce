#include "bench/table.h"

#include <cstdio>

#include "common/sys_info.h"

namespace tkv::bench {

Cell::Cell(const Json& j)
    : text(j.is_string() ? j.get<std::string>()
           : j.is_null() ? ""
                         : j.dump()) {}

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {}

void Table::add(std::vector<Cell> row) {
  std::vector<std::string> r;
  for (auto& c : row) r.push_back(std::move(c.text));
  r.resize(header_.size());
  for (auto& s : r)
    for (auto& ch : s)
      if (ch == '|' || ch == '\n') ch = ch == '|' ? '/' : ' ';  // keep the table intact
  rows_.push_back(std::move(r));
}

std::string Table::markdown() const {
  std::vector<size_t> width(header_.size(), 3);
  for (size_t i = 0; i < header_.size(); ++i) width[i] = std::max(width[i], header_[i].size());
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (size_t i = 0; i < cells.size(); ++i)
      s += " " + cells[i] + std::string(width[i] - cells[i].size(), ' ') + " |";
    return s + "\n";
  };
  std::string out = line(header_);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string fmt_bytes(const Json& bytes) {
  if (!bytes.is_number()) return "";
  return format_bytes(bytes.get<uint64_t>());
}

std::string fmt_fixed(const Json& value, int digits) {
  if (!value.is_number()) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value.get<double>());
  return buf;
}

std::string fmt_percent(const Json& fraction, int digits) {
  if (!fraction.is_number()) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f%%", digits, 100.0 * fraction.get<double>());
  return buf;
}

std::string fmt_general(double value, int significant) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", significant, value);
  return buf;
}

}  // namespace tkv::bench
