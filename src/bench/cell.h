// Cells: the unit of measurement. A cell is one (protocol, model, KV
// configuration, context, threads, ...) combination described by a JSON
// request; it runs in a fresh child process ("turbokv bench cell --request
// JSON") and prints one JSON result line on stdout.
//
// Every result has "status": "ok", "oom" (KvBudgetExceeded, std::bad_alloc,
// an mmap or thread refused for lack of memory, the cgroup OOM killer, or a
// SIGKILL), "timeout", "failed" (any other error or crash), or "not run"
// (the run was interrupted before or while the cell ran), and "reason" for
// anything but ok. The harness never dies with a cell.
#pragma once

#include <string>
#include <vector>

#include "bench/json.h"
#include "bench/mem_limit.h"

namespace tkv::bench {

// ---- child side ----
// Runs the cell (dispatching on request["protocol"]); never throws.
Json run_cell(const Json& request);
// "bench cell --request JSON": runs it, prints the result line; returns 0
// when a result was printed, 2 for an unreadable request.
int cell_main(const std::string& request_text);

// ---- parent side ----
class CellRunner {
 public:
  // argv_prefix: how to run this binary's cell command, e.g.
  // {"/path/turbokv", "bench", "cell"}. mem_limit_bytes 0 = none.
  CellRunner(std::vector<std::string> argv_prefix, uint64_t mem_limit_bytes, double timeout_seconds,
             bool allow_cgroup = true);

  // Runs one cell in a child process under the limit; the request gets
  // "mem_limit_bytes" added. Always returns a result object (see above) with
  // "process": {exit_code, signal, seconds}. When the harness is
  // interrupted (interrupt.h) the child is killed and the result is "not run".
  Json run(Json request);

  const MemoryLimit& limit() const { return limit_; }
  Json describe() const;  // {"bytes", "method", "fallback_reason"} for the report

 private:
  std::vector<std::string> prefix_;
  MemoryLimit limit_;
  double timeout_;
};

// Result helpers for cells.
inline constexpr const char* kNotRun = "not run";
Json failed_result(const std::string& status, const std::string& reason);
Json not_run_result(const std::string& reason);
bool result_ok(const Json& result);

}  // namespace tkv::bench
