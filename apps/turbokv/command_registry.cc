#include "command_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tkv::cli {

namespace {
// Function-local static: safe to use from other files' static initializers,
// whatever the order in which the translation units are initialized.
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace

bool register_command(const char* name, const char* summary, CommandMain main) {
  auto& r = registry();
  for (const auto& c : r)
    if (c.name == name) {
      std::fprintf(stderr, "turbokv: internal error: command '%s' registered twice\n", name);
      std::abort();
    }
  r.push_back({name, summary, main});
  return true;
}

std::vector<Command> commands() {
  std::vector<Command> out = registry();
  std::sort(out.begin(), out.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  return out;
}

const Command* find_command(const std::string& name) {
  for (const auto& c : registry())
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace tkv::cli
