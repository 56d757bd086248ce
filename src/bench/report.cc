#include "bench/report.h"

#include <sys/utsname.h>

#include <ctime>
#include <filesystem>

#include "bench/agree.h"
#include "bench/batch_protocol.h"
#include "bench/build_commit.h"
#include "bench/child_process.h"
#include "bench/compare.h"
#include "bench/kernel_protocol.h"
#include "bench/memory_protocol.h"
#include "bench/plots.h"
#include "bench/quality_protocol.h"
#include "bench/recall_protocol.h"
#include "bench/serve_protocol.h"
#include "bench/speed_protocol.h"
#include "bench/table.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/sys_info.h"
#include "tensor/kernel_config.h"
#include "tensor/matmul.h"

namespace tkv::bench {

namespace fs = std::filesystem;

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs git in `dir`; "" on any failure.
std::string git(const std::string& dir, const std::vector<std::string>& args) {
  const std::string exe = find_in_path("git");
  if (exe.empty() || dir.empty()) return {};
  std::vector<std::string> argv{exe, "-C", dir};
  argv.insert(argv.end(), args.begin(), args.end());
  const ChildResult r = run_child(argv, {});
  return r.exit_code == 0 ? trim(r.out) : std::string();
}

// `a` as one word a POSIX shell would read back: quoted when it holds
// anything but letters, digits and -_.,/:=+@%.
std::string shell_word(const std::string& a) {
  const bool plain = !a.empty() && a.find_first_not_of(
                                       "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789-_.,/:=+@%") == std::string::npos;
  if (plain) return a;
  std::string q = "'";
  for (const char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

constexpr const char* kSections[] = {"memory",  "speed",  "batch", "serve",  "recall",
                                     "quality", "kernel", "agree", "compare"};

}  // namespace

Json machine_info() {
  const CpuInfo cpu = cpu_info();
  utsname u{};
  ::uname(&u);
  return {{"cpu_model", cpu.model},
          {"cpu_flags", cpu.flags},
          {"logical_cpus", cpu.logical_cpus},
          {"physical_cores", cpu.physical_cores},
          {"total_memory_bytes", total_memory_bytes()},
          {"kernel", std::string(u.sysname) + " " + u.release},
          {"simd_target", active_simd_target()},
          {"kernel_env", kernel_env_overrides()},
          {"load_average_at_start", [] {
             double l[3] = {0, 0, 0};
             return getloadavg(l, 3) == 3 ? Json::array({l[0], l[1], l[2]}) : Json::array();
           }()}};
}

Json git_info() {
  std::error_code ec;
  std::vector<std::string> dirs{fs::current_path(ec).string()};
  try {
    dirs.push_back(fs::path(self_executable()).parent_path().string());
  } catch (const std::exception&) {
  }
#ifdef TURBOKV_SOURCE_DIR
  dirs.push_back(TURBOKV_SOURCE_DIR);
#endif
  for (const auto& d : dirs) {
    const std::string commit = git(d, {"rev-parse", "HEAD"});
    if (commit.empty()) continue;
    const std::string status = git(d, {"status", "--porcelain", "--untracked-files=no"});
    return {{"build_commit", build_commit()}, {"commit", commit}, {"dirty", !status.empty()}};
  }
  return {{"build_commit", build_commit()}, {"commit", "unknown"}, {"dirty", nullptr}};
}

Json make_report(const ReportHeader& h) {
  return {{"turbokv_bench_version", 1},     {"created_utc", utc_now()},
          {"command_line", h.command_line}, {"git", git_info()},
          {"machine", machine_info()},      {"threads", h.threads},
          {"mem_limit", h.mem_limit},       {"model", h.model}};
}

std::string section_markdown(const std::string& name, const Json& section) {
  if (name == "memory") return memory_markdown(section);
  if (name == "speed") return speed_markdown(section);
  if (name == "batch") return batch_markdown(section);
  if (name == "serve") return serve_markdown(section);
  if (name == "recall") return recall_markdown(section);
  if (name == "quality") return quality_markdown(section);
  if (name == "kernel") return kernel_markdown(section);
  if (name == "agree") return agree_section_markdown(section);
  if (name == "compare") return compare_markdown(section);
  fail("internal error: unknown report section ", name);
}

std::string provenance_markdown(const Json& report) {
  // The program as the user names it (`turbokv`, not the build path), then
  // its arguments exactly; report.json keeps argv[0] whole.
  std::string cmd;
  bool first = true;
  for (const auto& a : report["command_line"]) {
    std::string word = a.get<std::string>();
    if (first) word = fs::path(word).filename().string();
    if (!first) cmd += ' ';
    cmd += shell_word(word);
    first = false;
  }
  std::string load;
  const Json& m = report["machine"];
  for (const auto& l : m["load_average_at_start"]) {
    if (!load.empty()) load += ' ';
    load += fmt_fixed(l, 2);
  }
  const Json& g = report["git"];
  const std::string built = g.value("build_commit", std::string("unknown"));
  const std::string tree = g["commit"].get<std::string>();
  // The binary's commit; the tree's at run time too where it is another
  // (a binary run from a checkout that has moved on).
  std::string commit = built;
  if (tree != "unknown" && tree.compare(0, 7, built, 0, 7) != 0)
    commit += " (source tree at run time: " + tree + ")";
  if (g["dirty"] == true) commit += " (uncommitted changes at run time)";
  std::string md = "- command: `" + cmd + "`\n";
  md += "- machine: " + m["cpu_model"].get<std::string>() + ", " +
        std::to_string(m["physical_cores"].get<int>()) + " cores / " +
        std::to_string(m["logical_cpus"].get<int>()) + " threads, " +
        fmt_bytes(m["total_memory_bytes"]) + "; load average at start " +
        (load.empty() ? "unknown" : load) + "\n";
  md += "- commit: " + commit + "\n";
  md += "- date: " + report["created_utc"].get<std::string>() + "\n";
  return md;
}

std::string report_markdown(const Json& report, const std::vector<std::string>& plot_files) {
  std::string md = "# turbokv bench report\n\n" + provenance_markdown(report);
  md += "- CPU flags: " + report["machine"]["cpu_flags"].get<std::string>() + "\n";
  const Json& mach = report["machine"];
  if (mach.contains("simd_target")) {
    const std::string env = mach.value("kernel_env", std::string());
    md += "- kernels: " + mach["simd_target"].get<std::string>() + " target" +
          (env.empty() ? "" : "; " + env) + "\n";
  }
  md += "- threads: " + std::to_string(report["threads"].get<int>()) + "\n";
  if (report.contains("run")) {
    const Json& run = report["run"];
    const std::string state = run["state"].get<std::string>();
    const std::string of = std::to_string(run["cells_finished"].get<int>()) + " of " +
                           std::to_string(run["cells"].get<int>()) + " cells";
    md += "- run: " +
          (state == "complete"  ? "complete, " + of
           : state == "running" ? "in progress, " + of + " so far (the rest: not run yet)"
                                : "interrupted after " + of + " (the rest: not run)") +
          "\n";
  }
  if (report["model"].is_object())
    md += "- model: " + report["model"]["file"].get<std::string>() + " (" +
          report["model"]["describe"].get<std::string>() + ", " +
          fmt_bytes(report["model"]["file_bytes"]) + ")\n";
  const Json& lim = report["mem_limit"];
  if (lim.is_object() && lim["bytes"].get<uint64_t>() > 0)
    md += "- memory limit: " + fmt_bytes(lim["bytes"]) + " via " +
          lim["method"].get<std::string>() +
          (lim["fallback_reason"].get<std::string>().empty()
               ? ""
               : " (" + lim["fallback_reason"].get<std::string>() + ")") +
          "\n";
  for (const char* name : kSections) {
    if (!report.contains(name)) continue;
    md += "\n## " + std::string(name) + "\n\n" + section_markdown(name, report[name]);
    for (const auto& p : plot_files) {
      const std::string f = fs::path(p).filename().string();
      const bool mine = (std::string(name) == "memory" && f == "memory.png") ||
                        (std::string(name) == "speed" && f == "decode.png") ||
                        (std::string(name) == "recall" && f == "recall.png") ||
                        (std::string(name) == "compare" && f == "compare_ratio.png") ||
                        (std::string(name) == "kernel" && f.rfind("kernel_", 0) == 0);
      if (mine) md += "\n![" + f + "](" + f + ")\n";
    }
  }
  return md;
}

std::string write_report(const Json& report, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("--out ", dir, ": cannot create the directory: ", ec.message());
  // Joined as paths: `--out out/` must not print out//report.json.
  const std::string json_path = (fs::path(dir) / "report.json").string();
  write_file_atomic(json_path, report.dump(1) + "\n");
  const PlotResult plots = write_plots(report, dir);
  write_file_atomic((fs::path(dir) / "report.md").string(), report_markdown(report, plots.written));
  std::string msg = "wrote " + json_path + ", report.md";
  if (!plots.written.empty()) msg += " and " + std::to_string(plots.written.size()) + " plot(s)";
  if (!plots.skipped.empty()) msg += " (plots: " + plots.skipped + ")";
  return msg;
}

}  // namespace tkv::bench
