// The command line's notation of one KV configuration, shared by --kv of
// run, chat and perplexity (one item) and of every bench protocol (a comma
// list of items):
//
//   ITEM[,ITEM...]      ITEM = CODECS[:POLICY]
//   CODECS  = a codec for both halves ("f16", "q8_0", "q4_0h", "tq3"), a
//             kAvB shorthand (tqA keys, tqB values; 8 = q8_0h: "k4v2",
//             "k8v4") or K/V codec names ("tq4/tq2", "q8_0/f16")
//   POLICY  = "none" (no sinks, no residual) or '+'-joined parts
//             sN (sinks), rN (residual), wN (window), selN (page selection
//             of N tokens, 0 = dense): "s4+r64", "s1+r0", "w1024", "sel512"
//
// Parts a POLICY leaves out come from `defaults` (the --kv-sinks,
// --kv-residual, --kv-window, --kv-select flags; -1 = 4 sinks + 64 residual for quantized
// codecs). The label of a configuration is the item as written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kv/kv_config.h"

namespace tkv::cli {

// The codec names, for help texts and errors.
inline constexpr const char* kKvCodecNames =
    "f32, f16, q8_0, q8_0h, q4_0, q4_0h, tq1..tq4, tq1r..tq4r";

struct KvSpec {
  std::string label;  // the item as written: "k4v2:s4+r64"
  kv::KvConfig config;
};

// One item. Throws tkv::Error naming `flag` and what is wrong with the item.
KvSpec parse_kv_spec(std::string_view item, const kv::KvConfig& defaults,
                     std::string_view flag = "--kv");
// A comma list of items (none empty, none listed twice).
std::vector<KvSpec> parse_kv_spec_list(std::string_view list, const kv::KvConfig& defaults,
                                       std::string_view flag = "--kv");

}  // namespace tkv::cli
