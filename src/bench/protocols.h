// The child-side entry of every cell kind (see cell.h); each lives in the
// file of its protocol. They throw on errors; run_cell() turns exceptions
// into "oom" / "failed" results.
#pragma once

#include "bench/json.h"

namespace tkv::bench {

Json memory_cell(const Json& request);             // memory_protocol.cc
Json speed_cell(const Json& request);              // speed_protocol.cc
Json batch_cell(const Json& request);              // batch_protocol.cc
Json serve_cell(const Json& request);              // serve_protocol.cc
Json recall_cell(const Json& request);             // recall_protocol.cc
Json recall_multi_turn_cell(const Json& request);  // recall_multi_turn.cc
Json quality_cell(const Json& request);            // quality_protocol.cc
Json kernel_cell(const Json& request);             // kernel_protocol.cc
Json copy_bandwidth_cell(const Json& request);     // kernel_protocol.cc

}  // namespace tkv::bench
