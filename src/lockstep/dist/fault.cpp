#include "lockstep/dist/fault.hpp"

#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace lockstep::dist {

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}
double number(const std::string& text, const std::string& key, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= 0))
    throw std::invalid_argument(fmt::format("LOCKSTEP_FAULT '{}': {}={} is not a number >= 0", text, key, v));
  return x;
}
}  // namespace

Fault parse_fault(const std::string& text) {
  Fault f;
  if (text.empty()) return f;
  const std::vector<std::string> parts = split(text, ':');
  const std::string& kind = parts[0];
  if (kind == "bitflip") {
    f.kind = Fault::Kind::bitflip;
  } else if (kind == "update-bitflip") {
    f.kind = Fault::Kind::update_bitflip;
  } else if (kind == "stall") {
    f.kind = Fault::Kind::stall;
  } else if (kind == "drop") {
    f.kind = Fault::Kind::drop;
  } else if (kind == "kill") {
    f.kind = Fault::Kind::kill;
  } else if (kind == "version") {
    f.kind = Fault::Kind::version;
  } else {
    throw std::invalid_argument(
        fmt::format("LOCKSTEP_FAULT '{}': unknown fault '{}' (bitflip, update-bitflip, stall, drop, kill, version)", text, kind));
  }
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument(fmt::format("LOCKSTEP_FAULT '{}': expected key=value, got '{}'", text, parts[i]));
    const std::string key = parts[i].substr(0, eq), v = parts[i].substr(eq + 1);
    if (key != "rank" && key != "step" && key != "seconds" && key != "tensor" && key != "index" && key != "bit")
      throw std::invalid_argument(fmt::format("LOCKSTEP_FAULT '{}': unknown key '{}'", text, key));
    const double x = number(text, key, v);
    if (key == "rank") {
      f.rank = static_cast<int>(x);
    } else if (key == "step") {
      f.step = static_cast<std::int64_t>(x);
    } else if (key == "seconds") {
      f.seconds = x;
    } else if (key == "tensor") {
      f.tensor = static_cast<std::int64_t>(x);
    } else if (key == "index") {
      f.index = static_cast<std::int64_t>(x);
    } else {  // bit
      f.bit = static_cast<int>(x);
      if (f.bit > 31) throw std::invalid_argument(fmt::format("LOCKSTEP_FAULT '{}': bit must be 0..31", text));
    }
  }
  if (f.rank < 0) throw std::invalid_argument(fmt::format("LOCKSTEP_FAULT '{}': rank=R is required", text));
  if (f.kind != Fault::Kind::version && f.step < 1)
    throw std::invalid_argument(fmt::format("LOCKSTEP_FAULT '{}': step=S (>= 1) is required", text));
  if (f.kind == Fault::Kind::bitflip && f.step < 2)
    throw std::invalid_argument(fmt::format("LOCKSTEP_FAULT '{}': a bit flip lands between steps S-1 and S: S >= 2", text));
  return f;
}

Fault fault_from_env() {
  const char* v = std::getenv("LOCKSTEP_FAULT");
  return parse_fault(v ? v : "");
}

}  // namespace lockstep::dist
