// Numeric flags of a subcommand: read as text and parsed by
// train::parse_real/parse_int after CLI11 is done, so "--lr 2e-4" and
// "--steps 1e3" work and a bad value names its flag. The checks on values
// (ranges) are the options' validate()'s, which name the flag too.
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "lockstep/train/config.hpp"

namespace lockstep::cli {

struct NumericFlags {
  std::map<std::string, std::string> text;  // "lr" -> "2e-4"
  std::map<std::string, CLI::Option*> opt;

  void add(CLI::App* cmd, const std::string& name, const std::string& help, const std::string& def) {
    text[name] = def;
    opt[name] = cmd->add_option("--" + name, text[name], help)
                    ->type_name("NUM")
                    ->default_str(def)
                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a later flag overrides
  }
  bool given(const std::string& name) const { return opt.at(name)->count() > 0; }
  double real(const std::string& name) const { return lockstep::train::parse_real("--" + name, text.at(name)); }
  std::int64_t integer(const std::string& name) const {
    return lockstep::train::parse_int("--" + name, text.at(name));
  }
};

// A default as the help prints it: the shortest text that reads back as the
// value — for a float, as a float ("0.8", not the double 0.800000011920929).
inline std::string num_text(double v) { return fmt::format("{}", v); }
inline std::string num_text(float v) { return fmt::format("{}", v); }
template <std::integral I>
std::string num_text(I v) {
  return fmt::format("{}", v);
}

}  // namespace lockstep::cli
