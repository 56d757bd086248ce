// Helpers of the chat_output tests: a reply parsed whole and in pieces,
// and the shared chat-template fixtures.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "chat_output/reply_syntax.h"
#include "test_util.h"

namespace tkv::chat::test {

// Everything a reply gives, fed in pieces of `chunk` bytes (0: whole).
inline ReplyDelta parse(const ReplySyntax& syntax, const std::string& prompt,
                        const std::string& reply, bool parse_tools, size_t chunk = 0) {
  ReplyParser parser(syntax, prompt, parse_tools);
  ReplyDelta all;
  auto add = [&](ReplyDelta d) { all.append(std::move(d)); };
  if (chunk == 0) {
    add(parser.feed(reply));
  } else {
    for (size_t i = 0; i < reply.size(); i += chunk) add(parser.feed(reply.substr(i, chunk)));
  }
  add(parser.finish());
  return all;
}

inline ReplySyntax syntax_of(ToolSyntax tools, std::string open = "", std::string close = "") {
  ReplySyntax s;
  s.tools = tools;
  s.reasoning_open = std::move(open);
  s.reasoning_close = std::move(close);
  return s;
}

// The shared templates' folder ("" when absent).
inline std::string templates_dir() {
  const std::string dir = tkv::test::shared_dir() + "/templates";
  std::ifstream probe(dir + "/expected/manifest.json");
  return probe ? dir : "";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tkv::chat::test
