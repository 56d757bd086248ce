// Errors: every failure the user can cause (bad file, bad flag, bad request)
// is reported as a tkv::Error whose message is one line that names the thing
// and the problem. Callers at the edge (CLI, server) print it and exit 2 / 4xx.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace tkv {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Concatenates anything streamable: str("tensor ", name, " has ", n, " dims").
template <typename... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(str(std::forward<Args>(args)...));
}

// Internal invariant (a bug in turbokv, not in the input). Kept in release.
#define TKV_CHECK(cond)                                                                      \
  do {                                                                                       \
    if (!(cond)) ::tkv::fail("internal error: ", #cond, " (", __FILE__, ":", __LINE__, ")"); \
  } while (0)

}  // namespace tkv
