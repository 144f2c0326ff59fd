// Every kernel path a LoRA finetune launches on the CUDA model was gated at
// start-up (as launch_trace_test.cpp checks for a training step): a short
// finetune with dropout over every target of a LLaMA and a BitNet micro base;
// the launch trace (backend/cuda/trace.hpp) must hold only paths that passing
// start-up gate cases launched, among them the LoRA glue's (lora.cu). Its own
// process: the gated set is what this process's start-up gates ran.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "lockstep/backend/cuda/probe.hpp"
#include "lockstep/backend/cuda/trace.hpp"
#include "lockstep/data/sft.hpp"
#include "lockstep/model/model.hpp"
#include "lockstep/tok/tokenizer.hpp"
#include "lockstep/train/finetune.hpp"

#include "../train/facts_fixture.hpp"

namespace tr = lockstep::cuda::trace;
namespace m = lockstep::model;
using namespace lockstep::test::facts;

TEST(LoraLaunchTrace, AFinetuneLaunchesOnlyGatedKernels) {
  std::string why;
  if (!lockstep::cuda::available(&why)) GTEST_SKIP() << why;
  lockstep::tok::ByteTokenizer tok;
  const auto data = lockstep::data::parse_sft_jsonl(facts_jsonl(), "facts.jsonl", tok);
  lockstep::train::FinetuneConfig c = facts_config();
  c.steps = 2;
  c.batch = 4;
  c.lora.alpha = 12;
  bool first = true;
  for (const char* name : {"llama-micro", "bitnet-micro"}) {
    auto gpu = m::make_model(m::preset(name), "cuda", "stop");  // the start-up gates run once, at the first
    if (first) tr::process_log().reset_launches();
    first = false;
    gpu->init(3);
    const auto dir = temp_dir(std::string("trace_") + name);
    lockstep::train::finetune(*gpu, data, c, dir.string());
    std::filesystem::remove_all(dir);
  }
  const auto gated = tr::process_log().gated();
  ASSERT_FALSE(gated.empty()) << "the start-up gates recorded no kernel path";
  const auto launches = tr::process_log().launches();
  std::printf("kernel paths launched by the finetunes (%zu); gated at start-up: %zu paths\n", launches.size(),
              gated.size());
  for (const auto& [kernel, count] : launches)
    std::printf("  %s %-72s %ld\n", gated.count(kernel) ? "gated  " : "UNGATED", kernel.c_str(), count);
  std::string list;
  for (const std::string& kernel : tr::process_log().ungated()) list += "\n  " + kernel;
  EXPECT_TRUE(list.empty()) << "kernel paths launched by a LoRA finetune were not gated at start-up:" << list;
  for (const char* kernel : {"lora_scale_add", "lora_scale", "lora_dropout", "lora_dropout (in place)"}) {
    EXPECT_EQ(launches.count(kernel), 1u) << kernel << " was not launched by the finetunes";
    EXPECT_EQ(gated.count(kernel), 1u) << kernel << " was not gated";
  }
}
