#include "bench/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "common/error.h"

namespace tkv::bench {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr int kBarWidth = 24;

}  // namespace

std::string Progress::format_duration(double s) {
  if (s < 0) s = 0;
  const long total = long(s + 0.5);
  char buf[32];
  if (total >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", total / 3600, (total / 60) % 60);
  } else if (total >= 60) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", total / 60, total % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lds", total);
  }
  return buf;
}

Progress::Progress(double total_cost, int total_cells, bool enabled)
    : total_cost_(total_cost > 0 ? total_cost : 1),
      total_cells_(total_cells),
      enabled_(enabled && total_cells > 0),
      tty_(enabled_ && ::isatty(STDERR_FILENO)),
      start_(now_seconds()) {
  if (tty_) thread_ = std::thread([this] { ticker(); });
}

Progress::Progress(const Units& units, bool enabled)
    : total_cost_(units.total > 0 ? units.total : 1),
      total_cells_(1),
      enabled_(enabled && units.total > 0),
      tty_(enabled_ && ::isatty(STDERR_FILENO)),
      units_(units),
      start_(now_seconds()) {
  TKV_CHECK(!units_.unit.empty());
  if (tty_) thread_ = std::thread([this] { ticker(); });
}

Progress::~Progress() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (enabled_ && !units_.unit.empty()) {
      // A terminal's bar is erased: what follows takes its line. (Without a
      // terminal, add() printed the last line already.)
      if (drawn_ && tty_) std::fputs("\r\033[K", stderr);
    } else if (enabled_) {
      // An interrupted run ends with the cells it finished, not "done".
      label_ = done_cells_ >= total_cells_
                   ? std::string("done")
                   : str("stopped after ", done_cells_, " of ", total_cells_, " cells");
      draw_locked();
      if (tty_) std::fputc('\n', stderr);
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::begin_cell(const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  label_ = label;
  if (enabled_) draw_locked();
}

void Progress::end_cell(double cost) {
  std::lock_guard<std::mutex> lock(mu_);
  done_cost_ += cost;
  ++done_cells_;
}

void Progress::add(double n) {
  std::lock_guard<std::mutex> lock(mu_);
  done_cost_ += n;
  if (!enabled_) return;
  // A terminal's bar is also redrawn by the ticker; here at most 10 times a
  // second, so that thousands of tiny chunks do not flood the terminal.
  const double now = now_seconds();
  if (tty_ && drawn_ && now - last_draw_ < 0.1) return;
  draw_locked();
  last_draw_ = now;
}

void Progress::draw_locked() {
  const double elapsed = now_seconds() - start_;
  const double frac = std::min(1.0, done_cost_ / total_cost_);
  if (!units_.unit.empty()) {
    if (elapsed < units_.delay_seconds) return;
    drawn_ = true;
    const double left = done_cost_ >= total_cost_ ? 0.0
                        : done_cost_ > 0 ? elapsed * (total_cost_ - done_cost_) / done_cost_
                                         : -1.0;
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f", elapsed > 0 ? done_cost_ / elapsed : 0.0);
    const std::string line =
        str(units_.what, " ", int64_t(done_cost_), "/", int64_t(total_cost_), " ", units_.unit,
            ", ", rate, " ", units_.unit, "/s, left ",
            left < 0 ? std::string("?") : str(left > 0 ? "~" : "", format_duration(left)));
    print_line(frac, line, "");
    return;
  }
  const std::string left =
      done_cells_ >= total_cells_ ? format_duration(0)
      : done_cost_ > 0
          ? str("~", format_duration(elapsed * (total_cost_ - done_cost_) / done_cost_))
          : str("?");
  const std::string line = str("[", done_cells_, "/", total_cells_, "] ", label_, "  elapsed ",
                               format_duration(elapsed), ", left ", left);
  print_line(frac, line, "bench ");
}

// On a terminal: the bar and `line`, redrawn in place; otherwise `line` on
// a line of its own after `plain_prefix`.
void Progress::print_line(double frac, const std::string& line, const char* plain_prefix) const {
  if (tty_) {
    const int filled = int(frac * kBarWidth + 0.5);
    std::fprintf(stderr, "\r\033[K|%s%s| %3d%% %s", std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(kBarWidth - filled), '.').c_str(), int(frac * 100 + 0.5),
                 line.c_str());
  } else {
    std::fprintf(stderr, "%s%s\n", plain_prefix, line.c_str());
  }
  std::fflush(stderr);
}

void Progress::ticker() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::seconds(1));
    if (!stop_) draw_locked();
  }
}

}  // namespace tkv::bench
