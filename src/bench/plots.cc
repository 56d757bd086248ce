#include "bench/plots.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "bench/child_process.h"
#include "bench/units.h"
#include "common/atomic_file.h"

namespace tkv::bench {

namespace fs = std::filesystem;

namespace {

// Shortest decimal text of a number ("0.5", "1024", "1.2e-05").
std::string fmt_number(double x) {
  std::ostringstream o;
  o.precision(10);
  o << x;
  return o.str();
}

// A gnuplot single-quoted string ('' escapes a quote).
std::string gp_string(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// Tic labels go through gnuplot's number formatting: '%' must be doubled.
std::string tic_label(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '%' ? std::string("%%") : std::string(1, c);
  return gp_string(out);
}

// A log2 x axis over token counts: a tic labelled "1K", "4K", ... at every
// value drawn, and the range one octave beyond the data on both sides so no
// point sits on the frame. Depth 0 has no place on a log axis: it is drawn
// at 1 and labelled "0".
std::string token_log_x_axis(const std::set<double>& xs, const std::string& label) {
  std::string out = "set logscale x 2\nset xlabel " + gp_string(label) + "\nset xtics (";
  bool first = true;
  for (const double x : xs) {
    const std::string name = x < 1 ? "0" : token_count_label(int64_t(x));
    out += (first ? "" : ", ") + tic_label(name) + " " + fmt_number(std::max(1.0, x));
    first = false;
  }
  const double lo = std::max(1.0, *xs.begin()), hi = std::max(1.0, *xs.rbegin());
  return out + ")\nset xrange [" + fmt_number(lo / 2) + ":" + fmt_number(hi * 2) + "]\n";
}

// A log10 y axis with tics at 1, 2, 5 x 10^k (instead of gnuplot's bare
// powers), its range from the 1-2-5 value below the data to the one above
// it, with a margin so no point sits on the frame.
std::string log_y_axis(double lo, double hi, const std::string& label) {
  lo = std::max(lo, 1e-9) / 1.2;
  hi = std::max(hi * 1.2, lo);
  std::vector<double> steps;
  for (double decade = std::pow(10.0, std::floor(std::log10(lo))); decade <= hi * 10; decade *= 10)
    for (const double m : {1.0, 2.0, 5.0}) steps.push_back(m * decade);
  double bottom = steps.front(), top = steps.back();
  for (const double t : steps)
    if (t <= lo) bottom = t;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (*it >= hi) top = *it;
  std::string tics;
  for (const double t : steps)
    if (t >= bottom && t <= top)
      tics += (tics.empty() ? "" : ", ") + tic_label(fmt_number(t)) + " " + fmt_number(t);
  return "set logscale y 10\nset ylabel " + gp_string(label) + "\nset ytics (" + tics +
         ")\nset yrange [" + fmt_number(bottom) + ":" + fmt_number(top) + "]\n";
}

struct Series {
  std::string title;
  std::vector<std::vector<double>> points;  // columns per point
};

// One data file with an index block per series, and the plot command that draws them.
std::string write_series(const std::string& dat_path, const std::vector<Series>& series,
                         const std::string& using_cols, const std::string& style) {
  std::ostringstream dat, cmd;
  cmd << "plot ";
  for (size_t i = 0; i < series.size(); ++i) {
    dat << "# " << series[i].title << "\n";
    for (const auto& p : series[i].points) {
      for (size_t c = 0; c < p.size(); ++c) dat << (c ? " " : "") << p[c];
      dat << "\n";
    }
    dat << "\n\n";
    cmd << (i ? ", " : "") << gp_string(fs::path(dat_path).filename().string()) << " index " << i
        << " using " << using_cols << " with " << style << " title " << gp_string(series[i].title);
  }
  write_file_atomic(dat_path, dat.str());
  return cmd.str() + "\n";
}

// The script writes `png` when run by hand; the harness passes tkv_out to
// draw into a temporary file first and renames it into place (atomic).
std::string header(const std::string& png, const std::string& title, int w = 900, int h = 560) {
  return "set terminal pngcairo noenhanced size " + std::to_string(w) + "," + std::to_string(h) +
         " font ',10'\nif (!exists('tkv_out')) tkv_out = " + gp_string(png) +
         "\nset output tkv_out\nset title " + gp_string(title) +
         "\nset grid\nset key outside right top\n";
}

// Runs `script` in `dir` (data files are found by name) into png + ".tmp",
// then renames it to `png`.
bool run_gnuplot(const std::string& gnuplot, const std::string& dir, const std::string& script,
                 const std::string& png) {
  ChildLimits opts;
  opts.working_dir = dir;
  opts.timeout_seconds = 120;
  const ChildResult r = run_child(
      {gnuplot, "-e", "tkv_out = " + gp_string(png + ".tmp"), fs::path(script).filename().string()},
      opts);
  std::error_code ec;
  const fs::path tmp = fs::path(dir) / (png + ".tmp");
  if (r.exit_code != 0 || !fs::exists(tmp)) {
    fs::remove(tmp, ec);
    return false;
  }
  fs::rename(tmp, fs::path(dir) / png, ec);
  return !ec;
}

std::string model_name(const Json& report) {
  return report.contains("model") && report["model"].is_object()
             ? report["model"].value("file", std::string())
             : std::string();
}

// bench compare: the ratio turbokv / llama.cpp per metric, every pair a
// point and the median with its min-max bar, a line at 1 (parity).
std::string compare_script(const Json& report, const std::string& dir) {
  const Json& section = report["compare"];
  const Json& o = section["options"];
  const std::vector<std::pair<std::string, std::string>> metrics = {
      {"prefill", "prefill " + std::to_string(o["prompt_tokens"].get<int>())},
      {"decode", "decode, depth 0"},
      {"decode_deep", "decode, depth " + std::to_string(o["depth"].get<int>())}};
  std::ostringstream pairs, spread;
  std::string tics;
  int x = 0;
  for (const auto& [key, label] : metrics) {
    if (!section["summary"].contains(key)) continue;
    const Json& r = section["summary"][key]["ratio"];
    if (r["n"].get<int>() == 0) continue;
    ++x;
    tics += (tics.empty() ? "" : ", ") + tic_label(label) + " " + std::to_string(x);
    for (const Json& v : r["per_pair"])
      if (!v.is_null()) pairs << x << " " << v.get<double>() << "\n";
    spread << x << " " << r["median"].get<double>() << " " << r["min"].get<double>() << " "
           << r["max"].get<double>() << "\n";
  }
  if (x == 0) return {};
  write_file_atomic(dir + "/compare_ratio.dat",
                    "# pairs\n" + pairs.str() + "\n\n# median min max\n" + spread.str());
  return header("compare_ratio.png", "turbokv / llama.cpp speed per pair (" + model_name(report) +
                                         ", -t " + std::to_string(o["threads"].get<int>()) + ")") +
         "set xtics (" + tics + ")\nset xrange [0.5:" + std::to_string(x) +
         ".5]\nset ylabel 'turbokv / llama.cpp tok/s (higher is better)'\nset yrange [0:*]\n" +
         "set arrow from graph 0, first 1 to graph 1, first 1 nohead dashtype 2\n" +
         "plot 'compare_ratio.dat' index 0 using ($1-0.12):2 with points pointtype 7 title "
         "'pair', " +
         "'compare_ratio.dat' index 1 using 1:2:3:4 with yerrorbars pointtype 5 pointsize 2 " +
         "title 'median, min-max'\n";
}

// Each plot: (png name, script text); empty script = nothing to draw.
std::vector<std::pair<std::string, std::string>> build_scripts(const Json& report,
                                                               const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string model = model_name(report);
  if (report.contains("memory")) {
    std::map<std::string, Series> by_kv;
    std::vector<std::string> order;
    for (const auto& r : report["memory"]["rows"]) {
      if (r.value("status", "") != "ok") continue;
      const std::string kv = r["kv"].get<std::string>();
      if (!by_kv.count(kv)) order.push_back(kv);
      by_kv[kv].title = kv;
      by_kv[kv].points.push_back({r["ctx"].get<double>(),
                                  r["peak_rss_minus_model_bytes"].get<double>() / 1048576.0,
                                  r["kv_persistent_bytes"].get<double>() / 1048576.0});
    }
    if (!order.empty()) {
      std::vector<Series> s;
      std::set<double> xs;
      for (const auto& k : order) {
        s.push_back(by_kv[k]);
        for (const auto& p : by_kv[k].points) xs.insert(p[0]);
      }
      // The y axis starts at 0: bar heights compare as the bytes do.
      std::string gp = header("memory.png", "Peak RSS minus model vs context (" + model + ")") +
                       token_log_x_axis(xs, "context (tokens)") +
                       "set ylabel 'MiB (lower is better)'\nset yrange [0:*]\n" +
                       write_series(dir + "/memory.dat", s, "1:2", "linespoints");
      out.emplace_back("memory.png", gp);
    }
    // With RAM caps in the run: whole-process peak RSS, capped and not.
    std::map<std::string, Series> rss;
    std::vector<std::string> rss_order;
    bool capped = false;
    for (const auto& r : report["memory"]["rows"]) {
      if (r.value("status", "") != "ok") continue;
      const std::string kv = r["kv"].get<std::string>();
      capped |= r.contains("kv_ram") && !r["kv_ram"]["spill"].is_null();
      if (!rss.count(kv)) rss_order.push_back(kv);
      rss[kv].title = kv;
      rss[kv].points.push_back(
          {r["ctx"].get<double>(), r["peak_rss_bytes"].get<double>() / 1048576.0});
    }
    if (capped) {
      std::vector<Series> s;
      std::set<double> xs;
      for (const auto& k : rss_order) {
        s.push_back(rss[k]);
        for (const auto& p : rss[k].points) xs.insert(p[0]);
      }
      std::string gp = header("memory_rss.png",
                              "Peak RSS vs context, with and without a RAM cap (" + model + ")") +
                       token_log_x_axis(xs, "context (tokens)") +
                       "set ylabel 'peak RSS, MiB (lower is better)'\nset yrange [0:*]\n" +
                       write_series(dir + "/memory_rss.dat", s, "1:2", "linespoints");
      out.emplace_back("memory_rss.png", gp);
    }
  }
  if (report.contains("speed")) {
    std::map<std::string, Series> by;
    std::vector<std::string> order;
    for (const auto& d : report["speed"]["decode"]) {
      const std::string key =
          d["kv"].get<std::string>() + " " + std::to_string(d["threads"].get<int>()) + "t";
      if (!by.count(key)) order.push_back(key);
      by[key].title = key;
      by[key].points.push_back({std::max(1.0, d["depth"].get<double>()),
                                d["median_ms"].get<double>(), d["min_ms"].get<double>(),
                                d["max_ms"].get<double>()});
    }
    if (!order.empty()) {
      std::vector<Series> s;
      std::set<double> xs;
      for (const auto& k : order) s.push_back(by[k]);
      for (const auto& d : report["speed"]["decode"]) xs.insert(d["depth"].get<double>());
      std::string gp = header("decode.png", "Decode ms/token vs depth (" + model + ")") +
                       token_log_x_axis(xs, "depth (tokens)") +
                       "set ylabel 'ms/token, median with min-max bars (lower is better)'\n"
                       "set yrange [0:*]\n" +
                       write_series(dir + "/decode.dat", s, "1:2:3:4", "yerrorlines");
      out.emplace_back("decode.png", gp);
    }
  }
  if (report.contains("serve")) {
    // Aggregate tok/s and TTFT p50 against the client count, one line per
    // configuration, side by side.
    std::map<std::string, Series> by;
    std::vector<std::string> order;
    for (const auto& c : report["serve"]["cells"]) {
      if (c["ttft_p50_ms"].is_null()) continue;
      const std::string kv = c["kv"].get<std::string>();
      if (!by.count(kv)) order.push_back(kv);
      by[kv].title = kv;
      by[kv].points.push_back({c["clients"].get<double>(), c["tok_per_s"].get<double>(),
                               c["ttft_p50_ms"].get<double>()});
    }
    if (!order.empty()) {
      std::vector<Series> s;
      for (const auto& k : order) s.push_back(by[k]);
      const std::string plot_tps = write_series(dir + "/serve.dat", s, "1:2", "linespoints");
      const std::string plot_ttft = write_series(dir + "/serve.dat", s, "1:3", "linespoints");
      std::string gp =
          header("serve.png", "turbokv serve under concurrent clients (" + model + ")", 1200, 520) +
          "set multiplot layout 1,2\nset xlabel 'concurrent clients'\n"
          "set yrange [0:*]\nset title 'aggregate generated tok/s (higher is better)'\n"
          "set ylabel 'tok/s'\n" +
          plot_tps + "set title 'time to first token, p50 (lower is better)'\nset ylabel 'ms'\n" +
          plot_ttft + "unset multiplot\n";
      out.emplace_back("serve.png", gp);
    }
  }
  if (report.contains("recall")) {
    const Json& hm = report["recall"]["heatmap"];
    if (!hm["configs"].empty() && !hm["labels"].empty()) {
      // One row per cell (x = depth column, y = configuration row, value):
      // drawn as palette-filled boxes, which works for any grid size
      // (gnuplot's "with image" needs at least 2 x 2).
      std::ostringstream dat;
      for (size_t y = 0; y < hm["accuracy"].size(); ++y) {
        const Json& line = hm["accuracy"][y];
        for (size_t x = 0; x < line.size(); ++x)
          if (!line[x].is_null()) dat << x << " " << y << " " << line[x].get<double>() << "\n";
      }
      write_file_atomic(dir + "/recall.dat", dat.str());
      std::string xt = "set xtics (", yt = "set ytics (";
      for (size_t i = 0; i < hm["labels"].size(); ++i)
        xt += (i ? ", " : "") + tic_label(hm["labels"][i].get<std::string>()) + " " +
              std::to_string(i);
      for (size_t i = 0; i < hm["configs"].size(); ++i)
        yt += (i ? ", " : "") + tic_label(hm["configs"][i].get<std::string>()) + " " +
              std::to_string(i);
      const int h = 200 + 40 * int(hm["configs"].size());
      std::string gp =
          header("recall.png", "Recall of planted facts by depth (" + model + ")", 900, h) +
          "unset grid\nunset key\nset xlabel 'fact depth in the prompt'\n" + xt + ")\n" + yt +
          ")\nset cbrange [0:1]\nset palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\n"
          "set cblabel 'exact-match recall'\nset yrange [" +  // first configuration on top
          std::to_string(hm["configs"].size() - 0.5) +
          ":-0.5]\nset xrange [-0.5:" + std::to_string(hm["labels"].size() - 0.5) +
          "]\nset style fill solid 1.0\nplot 'recall.dat' using 1:2:(0.5):(0.5):3 with boxxyerror "
          "fillcolor palette, "
          "'' using 1:2:(sprintf('%.0f', $3*100).'%') with labels\n";
      out.emplace_back("recall.png", gp);
    }
  }
  if (report.contains("recall") && report["recall"].contains("comparisons")) {
    // Recall against the token budget, one line per policy (selection, RAM
    // cap, the window of the same budget, dense) and dense configuration:
    // drawn when the run compares more than one budget.
    std::map<std::string, Series> by;
    std::vector<std::string> order;
    std::set<double> budgets;
    const auto add = [&](const std::string& key, double x, const Json& f) {
      if (f.is_null()) return;
      if (!by.count(key)) order.push_back(key);
      by[key].title = key;
      by[key].points.push_back({x, f["fraction"].get<double>()});
    };
    const std::map<std::string, std::string> names{
        {"sel", "selection (selN)"}, {"budget", "RAM cap (budget)"}, {"sel+budget", "selN+budget"}};
    for (const auto& c : report["recall"]["comparisons"]) {
      const double x = c["token_budget"].get<double>();
      if (x <= 0) continue;
      budgets.insert(x);
      const std::string dense = c["dense"].get<std::string>();
      add(dense + " " + names.at(c["kind"].get<std::string>()), x, c["recall"]["item"]);
      add(dense + " window (wN)", x, c["recall"]["window"]);
      add(dense + " dense", x, c["recall"]["dense"]);
    }
    if (budgets.size() > 1) {
      std::vector<Series> s;
      for (const auto& k : order) {
        Series line = by[k];
        std::sort(line.points.begin(), line.points.end());
        line.points.erase(std::unique(line.points.begin(), line.points.end()), line.points.end());
        s.push_back(line);
      }
      std::string gp = header("recall_budget.png", "Recall vs token budget (" + model + ")") +
                       token_log_x_axis(budgets, "token budget (selN, budget cap, window wN)") +
                       "set ylabel 'exact-match recall, all facts (higher is better)'\n"
                       "set yrange [0:1.05]\n" +
                       write_series(dir + "/recall_budget.dat", s, "1:2", "linespoints");
      out.emplace_back("recall_budget.png", gp);
    }
  }
  if (report.contains("kernel")) {
    std::map<int, std::map<std::string, Series>> by_hd;
    std::map<int, std::vector<std::string>> order;
    for (const auto& r : report["kernel"]["table"]) {
      if (r.value("status", "") != "ok") continue;
      const int hd = r["head_dim"].get<int>();
      const std::string key =
          r["kv"].get<std::string>() + " " + std::to_string(r["threads"].get<int>()) + "t";
      if (!by_hd[hd].count(key)) order[hd].push_back(key);
      by_hd[hd][key].title = key;
      by_hd[hd][key].points.push_back({r["depth"].get<double>(), r["us_median"].get<double>()});
    }
    for (auto& [hd, series] : by_hd) {
      std::vector<Series> s;
      std::set<double> xs;
      double lo = HUGE_VAL, hi = 0;
      for (const auto& k : order[hd]) {
        s.push_back(series[k]);
        for (const auto& p : series[k].points) {
          xs.insert(p[0]);
          lo = std::min(lo, p[1]);
          hi = std::max(hi, p[1]);
        }
      }
      const std::string png = "kernel_d" + std::to_string(hd) + ".png";
      const Json& opt = report["kernel"]["options"];
      std::string gp =
          header(png, "Decode attention time per token, head_dim " + std::to_string(hd) + ", " +
                          std::to_string(opt.value("kv_heads", 8)) + " KV heads, GQA " +
                          std::to_string(opt.value("gqa", 4))) +
          token_log_x_axis(xs, "depth (tokens)") +
          log_y_axis(lo, hi, "microseconds per token (lower is better)") +
          write_series(dir + "/kernel_d" + std::to_string(hd) + ".dat", s, "1:2", "linespoints");
      out.emplace_back(png, gp);
    }
  }
  if (report.contains("compare")) {
    const std::string gp = compare_script(report, dir);
    if (!gp.empty()) out.emplace_back("compare_ratio.png", gp);
  }
  return out;
}

}  // namespace

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  std::istringstream in(p);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (dir.empty()) continue;
    const std::string full = (fs::path(dir) / name).string();
    if (::access(full.c_str(), X_OK) == 0) return full;
  }
  return {};
}

PlotResult write_plots(const Json& report, const std::string& dir) {
  PlotResult res;
  const auto scripts = build_scripts(report, dir);
  for (const auto& [png, gp] : scripts)
    write_file_atomic((fs::path(dir) / (fs::path(png).stem().string() + ".gp")).string(), gp);
  const std::string gnuplot = find_in_path("gnuplot");
  if (gnuplot.empty()) {
    res.skipped = "gnuplot not found in PATH (install gnuplot-nox); .gp scripts written";
    return res;
  }
  for (const auto& [png, gp] : scripts) {
    const std::string script = (fs::path(dir) / (fs::path(png).stem().string() + ".gp")).string();
    bool ok = run_gnuplot(gnuplot, dir, script, png);
    if (!ok) {  // a gnuplot without cairo: the libgd png terminal
      std::string alt = gp;
      const size_t pos = alt.find("set terminal pngcairo noenhanced");
      alt.replace(pos, std::string("set terminal pngcairo noenhanced").size(),
                  "set terminal png noenhanced");
      write_file_atomic(script, alt);
      ok = run_gnuplot(gnuplot, dir, script, png);
    }
    if (ok) res.written.push_back((fs::path(dir) / png).string());
  }
  if (res.written.size() != scripts.size())
    res.skipped =
        "gnuplot failed on " + std::to_string(scripts.size() - res.written.size()) + " plot(s)";
  return res;
}

}  // namespace tkv::bench
