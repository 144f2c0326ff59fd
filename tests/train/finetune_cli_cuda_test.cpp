// `lockstep finetune --device cuda` as a user runs it: on a micro checkpoint,
// with dropout, the CUDA run ends on the adapter hash of the same run with
// --device cpu (the last line's "adapter <hash>"), and both write the PEFT
// adapter files. Skips without a usable CUDA device.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../common/run_command.hpp"
#include "lockstep/model/model.hpp"
#include "micro_checkpoint.hpp"

namespace fs = std::filesystem;

namespace {

std::string cli(const std::string& args, int* status) {
  return lockstep::test::run_command(std::string(LOCKSTEP_CLI_PATH) + " " + args + " 2>&1", status);
}

// The 16 hex digits after "adapter " in the finetune's last line ("" if none).
std::string adapter_hash_of(const std::string& out) {
  const auto at = out.rfind("; adapter ");
  return at == std::string::npos ? "" : out.substr(at + 10, 16);
}

TEST(FinetuneCliCuda, TheCudaRunEndsOnTheCpuRunsAdapter) {
  std::string why;
  if (!lockstep::model::device_available("cuda", &why)) GTEST_SKIP() << why;
  const fs::path dir = fs::temp_directory_path() / ("lockstep_finetune_cli_cuda_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path ck = lockstep::test::micro_checkpoint(dir / "base");
  const fs::path data = dir / "d.jsonl";
  std::ofstream(data) << "{\"prompt\": \"the cat\", \"completion\": \" sat on the mat\"}\n"
                         "{\"prompt\": \"the rat\", \"completion\": \" ate the hat\"}\n";
  std::string hash[2];
  int k = 0;
  for (const char* device : {"cpu", "cuda"}) {
    int st = -1;
    const fs::path out = dir / device;
    const std::string text = cli("finetune --base " + ck.string() + " --data " + data.string() + " --out " +
                                     out.string() + " --device " + device +
                                     " --steps 4 --batch 2 --lr 1e-2 --alpha 12 --dropout 0.1 "
                                     "--targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
                                 &st);
    ASSERT_EQ(st, 0) << device << ":\n" << text;
    EXPECT_TRUE(fs::exists(out / "adapter" / "adapter_model.safetensors")) << device;
    hash[k++] = adapter_hash_of(text);
    std::printf("--device %s: adapter %s\n", device, hash[k - 1].c_str());
  }
  ASSERT_EQ(hash[0].size(), 16u);
  EXPECT_EQ(hash[1], hash[0]);
  fs::remove_all(dir);
}

}  // namespace
