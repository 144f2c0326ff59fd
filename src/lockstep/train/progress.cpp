#include "lockstep/train/progress.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace lockstep::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
}

std::string format_rate(double tps) {
  if (!std::isfinite(tps) || tps < 0) return "? tok/s";
  if (tps < 10000) return fmt::format("{:.0f} tok/s", tps);
  if (tps < 1e6) return fmt::format("{:.1f}k tok/s", tps / 1e3);
  return fmt::format("{:.2f}M tok/s", tps / 1e6);
}

std::string progress_line(const ProgressState& s, bool with_bar) {
  const int digits = static_cast<int>(std::to_string(s.total).size());
  std::string out = fmt::format("step {:>{}}/{}", s.step, digits, s.total);
  if (with_bar) {
    constexpr int kWidth = 24;
    const double frac = s.total > 0 ? static_cast<double>(s.step) / static_cast<double>(s.total) : 0.0;
    const int filled = std::clamp(static_cast<int>(frac * kWidth), 0, kWidth);
    std::string bar(static_cast<std::size_t>(kWidth), ' ');
    for (int i = 0; i < filled; ++i) bar[static_cast<std::size_t>(i)] = '=';
    if (filled < kWidth) bar[static_cast<std::size_t>(filled)] = '>';
    out += " [" + bar + "]";
  }
  out += fmt::format(" loss {:.4f} | lr {:.2e} | {} | {} | ETA {}", s.loss, s.lr, format_rate(s.tokens_per_second),
                     format_duration(s.elapsed), format_duration(s.eta));
  return out;
}

Progress::Progress(std::FILE* out, bool tty, std::int64_t every)
    : out_(out), tty_(tty), every_(std::max<std::int64_t>(1, every)) {}

Progress::~Progress() { finish(); }

void Progress::update(const ProgressState& s) {
  if (tty_) {
    const std::string line = progress_line(s, true);
    // \r back to column 0, the new text, then erase what is left of a longer old line.
    fmt::print(out_, "\r{}\x1b[K", line);
    std::fflush(out_);
    bar_ = line;
  } else if (s.step % every_ == 0 || s.step == s.total || s.step == 1) {
    fmt::print(out_, "{}\n", progress_line(s, false));
    std::fflush(out_);
  }
}

void Progress::line(const std::string& text) {
  if (tty_ && !bar_.empty()) {
    fmt::print(out_, "\r\x1b[K{}\n{}", text, bar_);
  } else {
    fmt::print(out_, "{}\n", text);
  }
  std::fflush(out_);
}

void Progress::finish() {
  if (tty_ && !bar_.empty()) {
    fmt::print(out_, "\n");
    std::fflush(out_);
  }
  bar_.clear();
}

}  // namespace lockstep::train
