// The tables `lockstep verify` prints. Each verification suite (IEEE oracle,
// elementary functions, op gradients, ...) returns one or more Tables; a row
// carries its own PASS/FAIL and the command exits non-zero if any row fails.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace lockstep::verify {

struct Options {
  std::uint64_t seed = 0;  // drawn from the clock when 0 at the CLI; printed
  double effort = 1.0;     // multiplies every suite's case count
  int threads = 0;         // 0: all hardware threads
};

struct Row {
  std::vector<std::string> cells;  // one per Table::columns entry
  bool pass = true;
  std::string note;                // why it failed (first mismatch, ...)
};

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<Row> rows;

  bool passed() const;
  void add(std::vector<std::string> cells, bool pass, std::string note = {});
  void print(std::ostream& os) const;
};

// A named suite: `lockstep verify NAME` runs it, `lockstep verify` runs all.
struct Suite {
  std::string name;
  std::string description;
  std::function<std::vector<Table>(const Options&)> run;
};

// The one list of suites is the CLI's (apps/lockstep/suites.hpp): it names
// every module's suite, so it lives above them all.

// Formatting helpers shared by the suites.
std::string fmt_count(std::uint64_t n);
std::string fmt_sci(double x);

}  // namespace lockstep::verify
