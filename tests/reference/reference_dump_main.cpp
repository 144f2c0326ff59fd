// reference_dump OUT_DIR [SEED]: writes the independent reference's case
// directories (reference_cases.hpp) under OUT_DIR, one per case, for
// numpy_reference.py and, on the device, hf_reference.py (transformers' own
// GPT2LMHeadModel / LlamaForCausalLM / BitNetForCausalLM).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "reference_cases.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: reference_dump OUT_DIR [SEED]\n");
    return 2;
  }
  try {
    const std::uint64_t seed = argc == 3 ? std::stoull(argv[2]) : 20261201;
    std::uint64_t i = 0;
    for (const auto& k : lockstep::reference::cases()) {
      const auto dir = std::filesystem::path(argv[1]) / k.name;
      lockstep::reference::dump_case(k, dir, seed + 7919 * i++);
      std::printf("%s\n", dir.string().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reference_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
