// A comma-separated list of counts on a bench's command line ("1,8,32").
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lockstep::bench {

inline std::vector<std::size_t> parse_list(const std::string& s) {
  std::vector<std::size_t> v;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t comma = s.find(',', at);
    v.push_back(std::stoul(s.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return v;
}

}  // namespace lockstep::bench
