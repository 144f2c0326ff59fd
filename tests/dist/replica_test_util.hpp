// What the replica tests read back from a run: the weights hash it printed
// last and the train lines of its metrics.jsonl.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lockstep::test {

// The last "weights <hash>" the run printed ("" if none): 16 lowercase hex
// digits after "weights ". (A plain scan, not std::regex: GCC 12 warns
// -Wmaybe-uninitialized inside <regex> under the sanitizer build's -O1.)
inline std::string final_hash(const std::string& out) {
  const std::string key = "weights ";
  std::string h;
  for (std::size_t at = out.find(key); at != std::string::npos; at = out.find(key, at + 1)) {
    const std::size_t from = at + key.size();
    if (from + 16 > out.size()) break;
    bool hex = true;
    for (std::size_t i = from; i < from + 16; ++i)
      hex = hex && ((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f'));
    if (hex) h = out.substr(from, 16);
  }
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
