// What `lockstep train` prints while it runs: on a terminal one progress bar
// redrawn in place; otherwise (a log file, a CI job) a plain line every N steps.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace lockstep::train {

// "12s", "8m03s", "1h02m".
std::string format_duration(double seconds);
// "950 tok/s", "12.3k tok/s".
std::string format_rate(double tokens_per_second);

struct ProgressState {
  std::int64_t step = 0, total = 0;
  float loss = 0;
  float lr = 0;
  double tokens_per_second = 0;
  double elapsed = 0, eta = 0;  // seconds
};

// "step  120/1200 [=====>              ] loss 3.2140 | 2.1k tok/s | 1m02s | ETA 8m31s"
std::string progress_line(const ProgressState& s, bool with_bar);

class Progress {
 public:
  // every: plain-line period when not a TTY (>= 1).
  Progress(std::FILE* out, bool tty, std::int64_t every);
  ~Progress();
  void update(const ProgressState& s);  // redraws (TTY) or prints every `every` steps and at the last
  void line(const std::string& text);   // a message of its own: clears the bar, prints, redraws
  void finish();                        // ends the bar's line

 private:
  std::FILE* out_;
  bool tty_;
  std::int64_t every_;
  std::string bar_;  // the bar as last drawn ("" when none)
};

}  // namespace lockstep::train
