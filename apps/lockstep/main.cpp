// The lockstep command line: one binary, one subcommand per job.
#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "lockstep/build_info.hpp"
#include "lockstep/version.hpp"
#include "lockstep/verify/report.hpp"

namespace {

// Rejects a number <= 0 with a message that names the value (CLI11 prefixes
// the flag), e.g. "--effort: must be a number > 0, got -1".
const CLI::Validator kPositive(
    [](std::string& s) -> std::string {
      double v = 0;
      try {
        std::size_t used = 0;
        v = std::stod(s, &used);
        if (used != s.size()) return "must be a number > 0, got '" + s + "'";
      } catch (const std::exception&) {
        return "must be a number > 0, got '" + s + "'";
      }
      return v > 0 ? std::string() : "must be a number > 0, got " + s;
    },
    "> 0");

int run_version() {
  fmt::print("lockstep {}\nNUMERIC_SPEC_VERSION {}\nbuild {} (CUDA {}, MPFR {})\n",
             lockstep::build::kVersion, lockstep::NUMERIC_SPEC_VERSION,
             lockstep::build::kBuildType, lockstep::build::kCuda ? "on" : "off",
             lockstep::build::kMpfr ? "on" : "off");
  return 0;
}

int run_verify(std::vector<std::string> names, lockstep::verify::Options opt, bool list) {
  using namespace lockstep::verify;
  const auto& all = suites();
  if (list) {
    for (const Suite& s : all) fmt::print("{:<10} {}\n", s.name, s.description);
    return 0;
  }
  std::vector<const Suite*> chosen;
  if (names.empty() || (names.size() == 1 && names[0] == "all")) {
    for (const Suite& s : all) chosen.push_back(&s);
  } else {
    for (const std::string& n : names) {
      const Suite* found = nullptr;
      for (const Suite& s : all)
        if (s.name == n) found = &s;
      if (!found) {
        std::string known;
        for (const Suite& s : all) known += " " + s.name;
        fmt::print(stderr, "lockstep verify: unknown suite '{}' (known:{})\n", n, known);
        return 2;
      }
      chosen.push_back(found);
    }
  }
  if (opt.seed == 0)
    opt.seed = static_cast<std::uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count()) | 1u;
  fmt::print("lockstep verify: seed {} (reproduce with --seed {}), effort {}\n\n", opt.seed,
             opt.seed, opt.effort);
  std::fflush(stdout);

  int failed_tables = 0, tables = 0;
  for (const Suite* s : chosen) {
    for (const Table& t : s->run(opt)) {
      t.print(std::cout);
      std::cout << std::endl;
      ++tables;
      if (!t.passed()) ++failed_tables;
    }
  }
  if (failed_tables) {
    fmt::print("lockstep verify: FAIL ({} of {} tables have failures; seed {})\n", failed_tables,
               tables, opt.seed);
    return 1;
  }
  fmt::print("lockstep verify: PASS ({} tables)\n", tables);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lockstep: train, finetune and run transformer language models with bit-identical, "
               "verified numerics"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lockstep ") + lockstep::build::kVersion);

  app.add_subcommand("version", "print the version and NUMERIC_SPEC_VERSION");

  auto* verify = app.add_subcommand(
      "verify", "run the verification suites and print their tables (exit 1 on any failure)");
  std::vector<std::string> suite_names;
  lockstep::verify::Options vopt;
  bool list = false;
  verify->add_option("suites", suite_names, "suites to run (default: all; see --list)");
  verify->add_option("--seed", vopt.seed, "random seed (default: from the clock, printed)");
  verify->add_option("--effort", vopt.effort, "scale every suite's case count (e.g. 0.1, 10)")
      ->check(kPositive);
  verify->add_option("--threads", vopt.threads, "CPU threads (0: all)")
      ->check(CLI::Range(0, 4096));
  verify->add_flag("--list", list, "list the suites and exit");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (app.got_subcommand("version")) return run_version();
  if (app.got_subcommand("verify")) return run_verify(suite_names, vopt, list);
  return 2;
}
