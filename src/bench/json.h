// JSON type used by every bench protocol: cells exchange requests and results
// as JSON (parent -> child on the command line, child -> parent on stdout),
// and report.json is assembled from the same objects. ordered_json keeps keys
// in insertion order so that reports read top-down.
#pragma once

#include <nlohmann/json.hpp>

namespace tkv::bench {

using Json = nlohmann::ordered_json;

}  // namespace tkv::bench
