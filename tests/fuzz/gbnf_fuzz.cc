// The GBNF parser (grammar/gbnf.h): any bytes as a grammar. A rejection is
// a tkv::Error of one line; an accepted grammar then runs its matcher over
// the same bytes (each prefix: a state or kDead, never a crash or a hang:
// ambiguity and stack growth are bounded by the matcher).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "common/error.h"
#include "fuzz_target.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const tkv::grammar::Grammar> g;
  try {
    g = std::make_shared<const tkv::grammar::Grammar>(tkv::grammar::parse_gbnf(text));
  } catch (const tkv::Error& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) {
      std::fprintf(stderr, "gbnf_fuzz: a message of more than one line: %s\n", e.what());
      std::abort();
    }
    return 0;
  }
  try {
    tkv::grammar::Matcher m(g);
    tkv::grammar::Matcher::State s = m.start();
    for (size_t i = 0; i < size && i < 256 && s != tkv::grammar::Matcher::kDead; ++i) {
      s = m.step(s, data[i]);
      s = m.compact(s, 64);
    }
  } catch (const tkv::Error&) {
    // too ambiguous: refused by the matcher, as it should be
  }
  return 0;
}
