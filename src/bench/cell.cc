#include "bench/cell.h"

#include <signal.h>
#include <string.h>

#include <cstdio>
#include <iostream>
#include <new>
#include <system_error>

#include "bench/child_process.h"
#include "bench/protocols.h"
#include "common/error.h"
#include "kv/page_pool.h"

namespace tkv::bench {

namespace {

using CellFn = Json (*)(const Json&);

CellFn find_cell(const std::string& protocol) {
  if (protocol == "memory") return &memory_cell;
  if (protocol == "speed") return &speed_cell;
  if (protocol == "batch") return &batch_cell;
  if (protocol == "serve") return &serve_cell;
  if (protocol == "recall") return &recall_cell;
  if (protocol == "recall_multi_turn") return &recall_multi_turn_cell;
  if (protocol == "quality") return &quality_cell;
  if (protocol == "kernel") return &kernel_cell;
  if (protocol == "copy_bandwidth") return &copy_bandwidth_cell;
  return nullptr;
}

bool mentions_out_of_memory(const std::string& what) {
  return what.find("Cannot allocate memory") != std::string::npos ||
         what.find("out of memory") != std::string::npos ||
         what.find("failed to map segment") != std::string::npos;
}

// The last line of `out` that parses as a JSON object, or null.
Json last_json_line(const std::string& out) {
  size_t end = out.size();
  while (end > 0) {
    size_t begin = out.rfind('\n', end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    const std::string line = out.substr(begin, end - begin);
    if (!line.empty() && line[0] == '{') {
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) return j;
    }
    if (begin == 0) break;
    end = begin - 1;
  }
  return nullptr;
}

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return {};
  const size_t nl = text.rfind('\n', end);
  const size_t begin = nl == std::string::npos ? 0 : nl + 1;
  return text.substr(begin, end + 1 - begin);
}

}  // namespace

Json failed_result(const std::string& status, const std::string& reason) {
  return {{"status", status}, {"reason", reason}};
}

Json not_run_result(const std::string& reason) {
  return failed_result(kNotRun, reason);
}

bool result_ok(const Json& result) {
  return result.is_object() && result.value("status", std::string()) == "ok";
}

Json run_cell(const Json& request) {
  try {
    const std::string protocol = request.at("protocol").get<std::string>();
    const CellFn fn = find_cell(protocol);
    if (!fn) return failed_result("failed", "unknown cell protocol '" + protocol + "'");
    Json result = fn(request);
    if (!result.contains("status")) result["status"] = "ok";
    return result;
  } catch (const kv::KvBudgetExceeded& e) {
    return failed_result("oom", std::string("KV budget exceeded: ") + e.what());
  } catch (const kv::KvOutOfMemory& e) {
    // Known by its type: near an address-space limit even the message may
    // have been cut short while it was composed.
    return failed_result("oom", std::string("out of memory: ") + e.what());
  } catch (const std::bad_alloc&) {
    return failed_result("oom", "allocation failed (std::bad_alloc)");
  } catch (const std::system_error& e) {
    const bool oom = e.code() == std::errc::not_enough_memory ||
                     e.code() == std::errc::resource_unavailable_try_again;
    return failed_result(oom ? "oom" : "failed", e.what());
  } catch (const std::exception& e) {
    return failed_result(mentions_out_of_memory(e.what()) ? "oom" : "failed", e.what());
  }
}

int cell_main(const std::string& request_text) {
  const Json request = Json::parse(request_text, nullptr, /*allow_exceptions=*/false);
  if (!request.is_object()) {
    std::fprintf(stderr, "turbokv bench cell: --request is not a JSON object\n");
    return 2;
  }
  const Json result = run_cell(request);
  // One line, flushed: the parent reads the last JSON line of stdout.
  std::cout << result.dump() << std::endl;
  return 0;
}

CellRunner::CellRunner(std::vector<std::string> argv_prefix, uint64_t mem_limit_bytes,
                       double timeout_seconds, bool allow_cgroup)
    : prefix_(std::move(argv_prefix)),
      limit_(mem_limit_bytes, allow_cgroup),
      timeout_(timeout_seconds) {}

Json CellRunner::describe() const {
  return {{"bytes", limit_.bytes()},
          {"method", limit_method_name(limit_.method())},
          {"fallback_reason", limit_.fallback_reason()}};
}

Json CellRunner::run(Json request) {
  request["mem_limit_bytes"] = limit_.bytes();
  ChildLimits limits;
  limits.timeout_seconds = timeout_;
  limits.stop_on_interrupt = true;
  std::string procs;
  if (limit_.bytes() > 0) {
    procs = limit_.prepare_child_cgroup();
    if (procs.empty()) limits.address_space_bytes = limit_.bytes();
    limits.cgroup_procs = procs;
  }
  std::vector<std::string> argv = prefix_;
  argv.push_back("--request");
  argv.push_back(request.dump());
  const ChildResult child = run_child(argv, limits);
  const bool cgroup_oom = limit_.finish_child_cgroup(procs);

  Json result = last_json_line(child.out);
  const std::string err_line = last_line(child.err);
  if (child.interrupted) {
    result = not_run_result("interrupted");
  } else if (child.timed_out) {
    result = failed_result("timeout", str("no result after ", timeout_, " s"));
  } else if (child.term_signal != 0) {
    const int sig = child.term_signal;
    if (cgroup_oom) {
      result = failed_result("oom", "killed by the cgroup OOM killer (memory.max)");
    } else if (sig == SIGKILL) {
      result = failed_result("oom", "killed by SIGKILL (the kernel OOM killer?)");
    } else if (limits.address_space_bytes > 0 && (sig == SIGSEGV || sig == SIGBUS)) {
      // Under RLIMIT_AS a refused stack or loader mapping shows up as a
      // fault, not as an allocation error.
      result =
          failed_result("oom", std::string("signal ") + std::to_string(sig) + " (" +
                                   strsignal(sig) + ") under RLIMIT_AS: a mapping was refused");
    } else {
      result = failed_result("failed", std::string("crashed: signal ") + std::to_string(sig) +
                                           " (" + strsignal(sig) + ")" +
                                           (err_line.empty() ? "" : ": " + err_line));
    }
  } else if (child.exec_failed) {
    result = failed_result(child.exit_code == 126 ? "oom" : "failed", err_line);
  } else if (!result.is_object() && limit_.bytes() > 0 && mentions_out_of_memory(child.err)) {
    // The dynamic loader could not map the binary's libraries under the limit.
    result = failed_result("oom", "could not start under the limit: " + err_line);
  } else if (!result.is_object()) {
    result = failed_result("failed", "exit code " + std::to_string(child.exit_code) +
                                         (err_line.empty() ? ", no result" : ": " + err_line));
  }
  result["process"] = {
      {"exit_code", child.exit_code}, {"signal", child.term_signal}, {"seconds", child.seconds}};
  return result;
}

}  // namespace tkv::bench
