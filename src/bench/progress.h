// Progress bar on stderr while cells run, with an estimate of the time left:
// each cell carries a cost estimate (roughly its floating-point work), and
// time left = elapsed x (cost remaining / cost done). On a terminal the bar
// redraws in place every second; otherwise one line per cell is printed.
//
// The same bar counts units of work instead of cells (Units: a prefill's
// tokens): "prefill 1536/4096 tok, 812.3 tok/s, left ~3s", one line per
// add() when stderr is not a terminal, and on a terminal erased at the end
// (the output that follows takes its place). Nothing is drawn before
// delay_seconds have passed, so short jobs stay silent.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace tkv::bench {

class Progress {
 public:
  // enabled = false: silent (tests, --quiet).
  Progress(double total_cost, int total_cells, bool enabled);

  struct Units {
    std::string what;  // "prefill"
    std::string unit;  // "tok"
    double total = 0;
    double delay_seconds = 0;
  };
  Progress(const Units& units, bool enabled);
  ~Progress();  // ends the bar line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void begin_cell(const std::string& label);
  void end_cell(double cost);
  // Units: `n` more units done.
  void add(double n);

  // "1h02m", "3m05s", "12s".
  static std::string format_duration(double seconds);

 private:
  void draw_locked();
  void print_line(double frac, const std::string& line, const char* plain_prefix) const;
  void ticker();

  const double total_cost_;
  const int total_cells_;
  const bool enabled_, tty_;
  const Units units_;  // units_.unit empty: counting cells
  bool drawn_ = false;
  double last_draw_ = 0;  // Units on a terminal: when add() last drew
  std::mutex mu_;
  std::condition_variable cv_;
  double done_cost_ = 0;
  int done_cells_ = 0;
  std::string label_;
  double start_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tkv::bench
