// A mixed run on the device machine: one CUDA replica (host staging of its
// gradients and weights through MPI) beside CPU replicas. Every step the guard
// compares all replicas' weight hashes: the run must agree at every step
// (no repair) and end on the plain CPU run's weights. A bit flipped in the
// CUDA replica's device weights must be found and repaired from a CPU replica.
// Skips when mpirun, MPI or a CUDA device is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/run_command.hpp"
#include "../common/sample_text.hpp"
#include "replica_test_util.hpp"
#include "lockstep/model/model.hpp"

namespace fs = std::filesystem;
using lockstep::test::final_hash;
using lockstep::test::train_lines;

namespace {

std::string run(const std::string& cmd, int* status) { return lockstep::test::run_command(cmd, status); }

}  // namespace

TEST(ReplicasGpu, ACudaReplicaAndCpuReplicasHoldTheSameWeightsEveryStep) {
#ifndef LOCKSTEP_HAVE_MPI
  GTEST_SKIP() << "this build has no MPI";
#else
  const std::string mpirun = LOCKSTEP_MPIRUN;
  if (mpirun.empty() || access(mpirun.c_str(), X_OK) != 0) GTEST_SKIP() << "mpirun not found";
  if (std::string why; !lockstep::model::device_available("cuda", &why)) GTEST_SKIP() << why;
  const fs::path dir = fs::temp_directory_path() / ("lockstep_replicas_gpu_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "text");
  std::ofstream(dir / "text" / "a.txt") << lockstep::test::sample_text(150, 77u);
  setenv("OMP_NUM_THREADS", "1", 1);
  unsetenv("LOCKSTEP_FAULT");
  const std::string cli = LOCKSTEP_CLI_PATH;
  const std::string flags = "--model gpt2-micro --data " + (dir / "text").string() +
                            " --vocab 300 --batch 2 --seq 16 --accum 6 --steps 6 --lr 3e-3 --warmup 1 --threads 1 "
                            "--log-every 1 --eval-every 0 --save-every 0 --max-minutes 0 --force";
  int st = -1;
  const std::string plain = run(cli + " train " + flags + " --out " + (dir / "plain").string(), &st);
  ASSERT_EQ(st, 0) << plain;
  const std::string want = final_hash(plain);
  ASSERT_EQ(want.size(), 16u) << plain;

  const std::string mp = mpirun + " --oversubscribe --allow-run-as-root ";
  for (int cpus : {1, 2}) {
    const fs::path out = dir / ("mixed" + std::to_string(cpus));
    const std::string cmd = mp + "-np 1 " + cli + " train " + flags + " --device cuda --out " + out.string() +
                            " : -np " + std::to_string(cpus) + " " + cli + " train " + flags +
                            " --device cpu --out " + out.string();
    const std::string o = run(cmd, &st);
    ASSERT_EQ(st, 0) << o;
    EXPECT_EQ(o.find("replica guard"), std::string::npos) << o;
    EXPECT_EQ(final_hash(o), want) << o;
    const auto lines = train_lines(out);
    ASSERT_EQ(lines.size(), 6u);
    for (const auto& l : lines) {
      EXPECT_EQ(l.at("guard"), "agreed") << l.dump();
      EXPECT_EQ(l.at("replicas"), 1 + cpus);
    }
    std::printf("mixed run, 1 CUDA + %d CPU replica(s): weights %s every step agreed\n", cpus, want.c_str());
  }
  // A bit flipped in the CUDA replica's device weights: found, repaired from a CPU replica.
  const fs::path out = dir / "flip";
  const std::string cmd = "env LOCKSTEP_FAULT=bitflip:rank=0:step=3 " + mp + "-np 1 " + cli + " train " + flags +
                          " --device cuda --out " + out.string() + " : -np 2 " + cli + " train " + flags +
                          " --device cpu --out " + out.string();
  const std::string o = run(cmd, &st);
  ASSERT_EQ(st, 0) << o;
  EXPECT_NE(o.find("replica guard: step 3: replica 0 (host"), std::string::npos) << o;
  EXPECT_NE(o.find("device cuda) diverged (2 of 3 replicas agree)"), std::string::npos) << o;
  EXPECT_EQ(final_hash(o), want) << o;
  std::printf("%s", o.c_str());
  fs::remove_all(dir);
#endif
}
