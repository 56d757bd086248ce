// The reply parser (chat_output/reply_syntax.h): the first byte picks the
// family, whether tools are parsed and a piece size; the rest is a reply.
// Fed whole and fed in pieces it must read the same, and every call's
// arguments must be a JSON object.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat_output/reply_syntax.h"
#include "fuzz_target.h"

namespace {

using tkv::chat::ReplyDelta;
using tkv::chat::ReplyParser;
using tkv::chat::ReplySyntax;
using tkv::chat::ToolSyntax;

ReplyDelta read(const ReplySyntax& syntax, const std::string& prompt, std::string_view reply,
                bool tools, size_t piece) {
  ReplyParser parser(syntax, prompt, tools);
  ReplyDelta all;
  auto add = [&](ReplyDelta d) { all.append(std::move(d)); };
  for (size_t i = 0; i < reply.size(); i += piece) add(parser.feed(reply.substr(i, piece)));
  add(parser.finish());
  return all;
}

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "reply_parser_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ReplySyntax syntax;
  syntax.tools = static_cast<ToolSyntax>(data[0] % 8);
  if (data[0] & 8) {
    const bool gemma = syntax.tools == ToolSyntax::kGemma4;
    syntax.reasoning_open = gemma ? "<|channel>thought" : "<think>";
    syntax.reasoning_close = gemma ? "<channel|>" : "</think>";
  }
  const bool tools = data[0] & 16;
  const std::string prompt = (data[0] & 32) ? syntax.reasoning_open : "";
  const size_t piece = 1 + (data[0] >> 6);
  const std::string_view reply(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ReplyDelta whole = read(syntax, prompt, reply, tools, reply.size() + 1);
  const ReplyDelta pieces = read(syntax, prompt, reply, tools, piece);
  if (whole.content != pieces.content) fail("content differs fed in pieces");
  if (whole.reasoning != pieces.reasoning) fail("reasoning differs fed in pieces");
  if (whole.calls.size() != pieces.calls.size()) fail("calls differ fed in pieces");
  for (size_t i = 0; i < whole.calls.size(); ++i) {
    if (whole.calls[i].name != pieces.calls[i].name ||
        whole.calls[i].arguments != pieces.calls[i].arguments)
      fail("a call differs fed in pieces");
    const auto args = nlohmann::json::parse(whole.calls[i].arguments, nullptr, false);
    if (!args.is_object()) fail("a call's arguments are not a JSON object");
  }
  if (!tools && !whole.calls.empty()) fail("a call read without tools");
  return 0;
}
