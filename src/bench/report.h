// report.json / report.md: everything a bench run measured, with what is
// needed to reproduce or distrust it. report.md opens with the provenance
// every published figure carries -- the command line, the machine (CPU
// model, cores, memory), the commit the binary was built from and the date
// -- then SIMD flags, threads, the memory-limit method; report.json holds
// the same and every raw sample (cells' results are kept whole under each
// protocol's "rows").
#pragma once

#include <string>
#include <vector>

#include "bench/json.h"

namespace tkv::bench {

struct ReportHeader {
  std::vector<std::string> command_line;
  int threads = 0;
  Json model;      // ModelInfo as JSON (may be null for kernel-only runs)
  Json mem_limit;  // CellRunner::describe()
};

// Skeleton with the header filled in; the run adds "run" ({state: running |
// complete | interrupted, cells, cells_finished}) and the protocols their
// sections ("memory", "speed", "recall", "quality", "kernel").
Json make_report(const ReportHeader& h);

Json machine_info();
// {"build_commit": the commit the binary was built from (build_commit.h),
//  "commit": `git rev-parse HEAD` of the source tree at run time (looked for
//  in the current directory, next to the executable, then in the source tree
//  the binary was configured from), "dirty": whether that tree has
//  uncommitted changes}; "unknown" / null where git cannot tell.
Json git_info();

// The provenance lines report.md opens with ("- command: ...", "- machine:
// ...", "- commit: ...", "- date: ..."), from a report made by make_report.
std::string provenance_markdown(const Json& report);

// Markdown of the whole report, sections in a fixed order, plot images linked.
std::string report_markdown(const Json& report, const std::vector<std::string>& plot_files);
// Markdown of one section (for printing a single protocol's tables).
std::string section_markdown(const std::string& name, const Json& section);

// Creates `dir`, writes report.json and report.md atomically and draws the
// plots; returns a one-line summary of what was written.
std::string write_report(const Json& report, const std::string& dir);

}  // namespace tkv::bench
