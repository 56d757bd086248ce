#include "bench/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/error.h"

namespace tkv::bench {

Args::Args(std::string command, std::vector<Flag> flags)
    : command_(std::move(command)), flags_(std::move(flags)) {}

const Args::Flag* Args::find(const std::string& name) const {
  for (const auto& f : flags_)
    for (const auto& n : f.names)
      if (n == name) return &f;
  return nullptr;
}

void Args::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i], value;
    bool inline_value = false;
    if (name.rfind("--", 0) == 0 && name.find('=') != std::string::npos) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
      inline_value = true;
    }
    const Flag* f = find(name);
    if (!f) {
      if (name.empty() || name[0] != '-') fail(command_, ": unexpected argument '", name, "'");
      fail(command_, ": unknown flag ", name, " (see --help)");
    }
    if (f->takes_value) {
      if (!inline_value) {
        if (i + 1 >= args.size()) fail(command_, ": ", name, " needs a value");
        value = args[++i];
      }
    } else if (inline_value) {
      fail(command_, ": ", name, " takes no value");
    }
    values_[f->names[0]] = value;
  }
}

bool Args::has(const std::string& canonical) const {
  return values_.count(canonical) > 0;
}

std::optional<std::string> Args::get(const std::string& canonical) const {
  const auto it = values_.find(canonical);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& canonical, const std::string& fallback) const {
  return get(canonical).value_or(fallback);
}

int Args::get_int(const std::string& canonical, int fallback, int lo, int hi) const {
  const auto v = get(canonical);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || n < lo || n > hi)
    fail(command_, ": ", canonical, " ", *v, ": expected an integer in [", lo, ", ", hi, "]");
  return int(n);
}

double Args::get_double(const std::string& canonical, double fallback, double lo, double hi) const {
  const auto v = get(canonical);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno != 0 || !std::isfinite(d) || d < lo || d > hi)
    fail(command_, ": ", canonical, " ", *v, ": expected a number in [", lo, ", ", hi, "]");
  return d;
}

std::string Args::help(const std::string& synopsis) const {
  std::string out = "Usage: " + synopsis + "\n\nFlags:\n";
  for (const auto& f : flags_) {
    std::string names;
    for (const auto& n : f.names) names += (names.empty() ? "" : ", ") + n;
    std::string line = "  " + names;
    if (line.size() < 26)
      line += std::string(26 - line.size(), ' ');
    else
      line += "  ";
    out += line + f.help + "\n";
  }
  return out;
}

}  // namespace tkv::bench
