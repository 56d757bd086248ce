// Markdown tables for report.md and the console, and the number formats the
// tables use.
#pragma once

#include <string>
#include <vector>

#include "bench/json.h"

namespace tkv::bench {

// A table cell: text, or a JSON value (strings as they are, numbers dumped).
struct Cell {
  std::string text;
  Cell(std::string s) : text(std::move(s)) {}  // NOLINT: implicit by design
  Cell(const char* s) : text(s) {}             // NOLINT
  Cell(const Json& j);                         // NOLINT
};

class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void add(std::vector<Cell> row);  // padded or cut to the header's width
  bool empty() const { return rows_.empty(); }
  // GitHub-flavoured Markdown, columns padded for reading as plain text.
  std::string markdown() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string fmt_bytes(const Json& bytes);                   // "1.25 GiB"
std::string fmt_fixed(const Json& value, int digits);       // "3.142"; "" for null
std::string fmt_percent(const Json& fraction, int digits);  // 0.985 -> "98.5%"
std::string fmt_general(double value, int significant);     // "0.0107", "1.2e-05"

}  // namespace tkv::bench
