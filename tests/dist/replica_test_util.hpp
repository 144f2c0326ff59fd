// What the replica tests read back from a run: the weights hash it printed
// last and the train lines of its metrics.jsonl.
#pragma once

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::test {

// The last "weights <hash>" the run printed ("" if none).
inline std::string final_hash(const std::string& out) {
  static const std::regex re("weights ([0-9a-f]{16})");
  std::string h;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it) h = (*it)[1];
  return h;
}

inline std::vector<nlohmann::json> train_lines(const std::filesystem::path& run_dir) {
  std::vector<nlohmann::json> v;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.at("type") == "train") v.push_back(j);
  }
  return v;
}

}  // namespace lockstep::test
