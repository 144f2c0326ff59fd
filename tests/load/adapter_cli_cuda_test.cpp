// `lockstep generate --adapter --device cuda` (label gpu): the CUDA model's
// LoRA layers decoding with the KV cache print the --device cpu run's greedy
// text, on the llama and the BitNet base of adapter_cli_fixture.hpp, and the
// adapter changes it. Skips without a usable CUDA device.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "adapter_cli_fixture.hpp"

namespace {

using lockstep::test::AdapterCli;

TEST_F(AdapterCli, GenerateOnTheGpuPrintsTheCpusText) {
  std::string why;
  if (!lockstep::model::device_available("cuda", &why)) GTEST_SKIP() << why;
  for (const std::string base : {"base", "bitnet"}) {
    const std::string adapter = (dir_ / (base == "base" ? "adapter" : "bitnet-adapter")).string();
    int st = -1;
    const std::string cpu = generate("--adapter " + adapter + " --device cpu --max-tokens 16", &st, base);
    ASSERT_EQ(st, 0) << cpu;
    const std::string gpu = generate("--adapter " + adapter + " --device cuda --max-tokens 16", &st, base);
    ASSERT_EQ(st, 0) << gpu;
    std::printf("%s --device cpu:  %s%s --device cuda: %s", base.c_str(), cpu.c_str(), base.c_str(), gpu.c_str());
    EXPECT_EQ(gpu, cpu) << base;
    EXPECT_NE(generate("--device cuda --max-tokens 16", &st, base), gpu) << base << ": the adapter changes the text";
  }
}

}  // namespace
