// lockstep's double-precision spec model against an independent NumPy float64
// implementation of GPT-2, LLaMA and BitNet b1.58 written from the published
// model definitions (numpy_reference.py, which reads only the HF-format case
// directory): the loss, each row's last-position logits, and every parameter
// tensor's gradient at sampled coordinates (NumPy central differences;
// BitLinear through the straight-through estimator, as BitNet's reference
// defines its gradient). Skips where numpy/safetensors are not importable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "../common/run_command.hpp"
#include "../common/test_seed.hpp"  // ad::seed_from_env: $LOCKSTEP_SEED or the clock, printed
#include "lockstep/ad/rng.hpp"
#include "reference_cases.hpp"

namespace fs = std::filesystem;

TEST(IndependentReference, SpecModelEqualsNumpyFromThePublishedDefinitions) {
  const fs::path root = fs::temp_directory_path() / ("lockstep_reference_" + std::to_string(::getpid()));
  fs::remove_all(root);
  std::string dirs;
  std::uint64_t i = 0;
  for (const auto& k : lockstep::reference::cases()) {
    const fs::path dir = root / k.name;
    lockstep::reference::dump_case(k, dir, lockstep::test::test_seed() + 7919 * i++);
    dirs += " " + dir.string();
  }
  int status = -1;
  const std::string out = lockstep::test::run_command(
      "python3 " + std::string(LOCKSTEP_REFERENCE_DIR) + "/numpy_reference.py" + dirs, &status);
  std::printf("%s", out.c_str());
  fs::remove_all(root);
  if (status == 77) GTEST_SKIP() << out;
  EXPECT_EQ(status, 0) << out;
}
