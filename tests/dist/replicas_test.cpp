// `lockstep train` as data-parallel replicas under mpirun (docs/DISTRIBUTED.md),
// on gpt2-micro for a few steps, against the plain single-process run:
//   * the weights after every step do not depend on the number of replicas (1, 2, 3);
//   * a bit flipped in one replica's weights is found by the guard, reported and
//     repaired, and the run ends on the fault-free weights;
//   * a late gradient is waited for; a missing one ends the run naming the replica
//     within the timeout (never a hang); a replica of another NUMERIC_SPEC_VERSION
//     or other settings is refused at the handshake naming both;
//   * a replica killed with SIGKILL stops the run and the last checkpoint is intact;
//     a resume with another number of replicas ends on the uninterrupted weights.
// Every test skips, saying why, when mpirun or this build's MPI is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../common/run_command.hpp"
#include "../common/sample_text.hpp"
#include "replica_test_util.hpp"
#include "lockstep/train/checkpoint.hpp"

namespace fs = std::filesystem;
using lockstep::test::final_hash;
using lockstep::test::train_lines;

namespace {

struct Result {
  int status = -1;
  std::string out;
  double seconds = 0;
};

Result run(const std::string& cmd) {
  Result r;
  const auto t = std::chrono::steady_clock::now();
  r.out = lockstep::test::run_command(cmd, &r.status);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  return r;
}


bool mpi_usable(std::string* why) {
#ifndef LOCKSTEP_HAVE_MPI
  *why = "this build has no MPI (install libopenmpi-dev, scripts/setup.sh, and reconfigure)";
  return false;
#else
  const std::string mpirun = LOCKSTEP_MPIRUN;
  if (mpirun.empty() || access(mpirun.c_str(), X_OK) != 0) {
    *why = "mpirun not found (install openmpi-bin, scripts/setup.sh)";
    return false;
  }
  return true;
#endif
}

class Replicas : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("lockstep_replicas_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "text");
    std::ofstream(dir_ / "text" / "a.txt") << lockstep::test::sample_text(150, 77u);
    // OpenMPI's own allocations are not ours to leak-check (sanitizer builds);
    // one thread per replica on the 2-core machines.
    setenv("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMP_WAIT_POLICY", "passive", 1);
    unsetenv("LOCKSTEP_FAULT");
    const Result plain = run(cli() + " train " + flags(6) + " --out " + (dir_ / "plain").string());
    plain_ok_ = plain.status == 0;
    plain_hash_ = final_hash(plain.out);
    plain_out_ = plain.out;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    std::string why;
    if (!mpi_usable(&why)) GTEST_SKIP() << "replica tests skipped: " << why;
    ASSERT_TRUE(plain_ok_) << plain_out_;
    ASSERT_EQ(plain_hash_.size(), 16u) << plain_out_;
  }

  static std::string cli() { return LOCKSTEP_CLI_PATH; }
  // Six micro-batches a step, so 1, 2 and 3 replicas share them evenly.
  static std::string flags(int steps, int accum = 6) {
    return "--model gpt2-micro --data " + (dir_ / "text").string() + " --vocab 300 --batch 2 --seq 16 --accum " +
           std::to_string(accum) + " --steps " + std::to_string(steps) +
           " --lr 3e-3 --warmup 1 --threads 1 --log-every 1 --eval-every 0 --save-every 2 --max-minutes 0 --force";
  }
  static std::string mpirun(int n, const std::string& env = "") {
    return (env.empty() ? "" : "env " + env + " ") + std::string(LOCKSTEP_MPIRUN) +
           " --oversubscribe --allow-run-as-root -np " + std::to_string(n) + " ";
  }
  static Result replicas(int n, const std::string& name, const std::string& extra = "", const std::string& env = "",
                         int steps = 6, int accum = 6) {
    return run(mpirun(n, env) + cli() + " train " + flags(steps, accum) + " --out " + (dir_ / name).string() + " " +
               extra);
  }

  static fs::path dir_;
  static bool plain_ok_;
  static std::string plain_hash_, plain_out_;
};
fs::path Replicas::dir_;
bool Replicas::plain_ok_ = false;
std::string Replicas::plain_hash_, Replicas::plain_out_;

}  // namespace

TEST_F(Replicas, TheWeightsDoNotDependOnTheNumberOfReplicas) {
  const auto plain = train_lines(dir_ / "plain");
  ASSERT_EQ(plain.size(), 6u);
  for (int n : {1, 2, 3}) {
    const std::string name = "n" + std::to_string(n);
    const Result r = replicas(n, name);
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(final_hash(r.out), plain_hash_) << n << " replicas\n" << r.out;
    EXPECT_NE(r.out.find("replicas: " + std::to_string(n)), std::string::npos) << r.out;
    // Replica 0 alone writes: one line per step, and each step's loss, norm and
    // agreed weight hash the same for every world size.
    const auto lines = train_lines(dir_ / name);
    ASSERT_EQ(lines.size(), plain.size()) << n;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i].at("loss").dump(), plain[i].at("loss").dump()) << n << " replicas, step " << i + 1;
      EXPECT_EQ(lines[i].at("grad_norm").dump(), plain[i].at("grad_norm").dump()) << n << " replicas, step " << i + 1;
      EXPECT_EQ(lines[i].at("replicas"), n);
      EXPECT_EQ(lines[i].at("guard"), "agreed");
    }
    if (n > 1) {
      EXPECT_EQ(lines[3].at("weights_hash"), train_lines(dir_ / "n1")[3].at("weights_hash"));
    }
  }
  // Micro-batches that do not share evenly (4 over 3 replicas: 2, 1, 1).
  const Result plain4 = run(cli() + " train " + flags(3, 4) + " --out " + (dir_ / "plain4").string());
  ASSERT_EQ(plain4.status, 0) << plain4.out;
  const Result r4 = replicas(3, "n3a4", "", "", 3, 4);
  ASSERT_EQ(r4.status, 0) << r4.out;
  EXPECT_EQ(final_hash(r4.out), final_hash(plain4.out)) << r4.out;
}

TEST_F(Replicas, ASingleProcessRunNeverStartsMpi) {
  // An MPI_Init here would fail on this bogus component; the plain run above
  // did not even read it.
  const Result r = run("env OMPI_MCA_pml=no_such_pml " + cli() + " train " + flags(2) + " --out " +
                       (dir_ / "nompi").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("replicas:"), std::string::npos) << r.out;
  // ...whereas a replica does start MPI and fails on it, saying so.
  const Result bad = replicas(2, "nompi2", "", "OMPI_MCA_pml=no_such_pml", 2);
  EXPECT_NE(bad.status, 0) << bad.out;
}

TEST_F(Replicas, ABitFlipIsFoundRepairedAndTheRunEndsOnTheFaultFreeWeights) {
  struct Case {
    int n;
    int rank;
    const char* how;
  };
  for (const Case c : {Case{3, 1, "2 of 3 replicas agree"}, Case{2, 1, "no longer those its last update wrote"},
                       Case{2, 0, "no longer those its last update wrote"}}) {
    const std::string name = "flip" + std::to_string(c.n) + "r" + std::to_string(c.rank);
    const Result r = replicas(c.n, name, "", "LOCKSTEP_FAULT=bitflip:rank=" + std::to_string(c.rank) + ":step=3");
    ASSERT_EQ(r.status, 0) << r.out;
    const std::string report = "replica guard: step 3: replica " + std::to_string(c.rank) + " (host ";
    EXPECT_NE(r.out.find(report), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.how), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("first difference: tensor 'transformer.wte.weight'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("device cpu"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("of replica " + std::to_string(c.rank == 0 ? 1 : 0) + ", then computing the step again"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(final_hash(r.out), plain_hash_) << r.out;
    const auto lines = train_lines(dir_ / name);
    ASSERT_EQ(lines.size(), 6u);
    EXPECT_EQ(lines[2].at("guard"), "repaired");
    EXPECT_EQ(lines[2].at("repaired"), 1);
    EXPECT_EQ(lines[5].at("repairs"), 1);
    EXPECT_EQ(lines[3].at("guard"), "agreed");
  }
  // Without the guard nothing repairs the flip: the replicas run on apart
  // (replica 1's gradients enter everyone's sum) until the checkpoint of
  // step 4, where every replica's verification names replica 1 and stops.
  const Result off = replicas(3, "flipoff", "--guard-every 0", "LOCKSTEP_FAULT=bitflip:rank=1:step=3");
  EXPECT_NE(off.status, 0) << off.out;
  EXPECT_EQ(off.out.find("replica guard"), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("flipoff/step-00000004 records weights"), std::string::npos) << off.out;
  EXPECT_NE(off.out.find("; replica 1 (host"), std::string::npos) << off.out;
}

TEST_F(Replicas, EveryReplicaVerifiesTheWrittenCheckpoint) {
  // Replica 1's weights change after step 2's update, before its checkpoint:
  // the written hashes (replica 0's) are not replica 1's, and the run stops
  // naming it; the checkpoint replica 0 wrote is whole.
  const fs::path run_dir = dir_ / "ckflip";
  const Result r = replicas(3, "ckflip", "", "LOCKSTEP_FAULT=update-bitflip:rank=1:step=2");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("checkpoint " + (run_dir / "step-00000002").string() + " records weights "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("; replica 1 (host"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("; replica 2 (host"), std::string::npos) << r.out;
  const auto ck = lockstep::train::load_checkpoint((run_dir / "step-00000002").string(), true);
  EXPECT_EQ(ck.meta.step, 2);
  // Unharmed, the same run's checkpoints verify on every replica.
  const Result ok = replicas(3, "ckok", "", "", 4);
  ASSERT_EQ(ok.status, 0) << ok.out;
}

TEST_F(Replicas, ALateGradientIsAwaitedAMissingOneStopsTheRunNamingTheReplica) {
  const Result late = replicas(2, "late", "--replica-timeout 30", "LOCKSTEP_FAULT=stall:rank=1:step=2:seconds=1");
  ASSERT_EQ(late.status, 0) << late.out;
  EXPECT_EQ(final_hash(late.out), plain_hash_) << late.out;

  const Result stalled =
      replicas(3, "stalled", "--replica-timeout 2", "LOCKSTEP_FAULT=stall:rank=2:step=2:seconds=60");
  EXPECT_NE(stalled.status, 0) << stalled.out;
  EXPECT_LT(stalled.seconds, 40) << "the run waited for the stalled replica instead of stopping";
  EXPECT_NE(stalled.out.find("waiting for the gradients of step 2: nothing from replica 2 within 2 s"),
            std::string::npos)
      << stalled.out;

  // Seed 001's roster stall: replica 1's gradients reach replica 2 but never replica 0.
  const Result dropped = replicas(3, "dropped", "--replica-timeout 2", "LOCKSTEP_FAULT=drop:rank=1:step=2");
  EXPECT_NE(dropped.status, 0) << dropped.out;
  EXPECT_LT(dropped.seconds, 40);
  EXPECT_NE(dropped.out.find("replica 0 (host"), std::string::npos) << dropped.out;
  EXPECT_NE(dropped.out.find("gradients of step 2: nothing from replica 1 within 2 s"), std::string::npos)
      << dropped.out;
}

TEST_F(Replicas, TheHandshakeRefusesAnotherSpecVersionOrOtherSettingsNamingBoth) {
  const Result v = replicas(2, "version", "", "LOCKSTEP_FAULT=version:rank=1");
  EXPECT_EQ(v.status, 2) << v.out;
  EXPECT_NE(v.out.find("replica 1 (host"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("has NUMERIC_SPEC_VERSION 2, replica 0"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("has NUMERIC_SPEC_VERSION 1: replicas that differ in it refuse to train together"),
            std::string::npos)
      << v.out;

  // Two programs in one job (MPMD): the second replica trains another model.
  const std::string base = cli() + " train " + flags(2) + " --out " + (dir_ / "mixed").string();
  const Result m = run(mpirun(1) + base + " : -np 1 " + base + " --model llama-micro");
  EXPECT_EQ(m.status, 2) << m.out;
  EXPECT_NE(m.out.find("refused: replica 1 (host"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find(R"(has training settings {"model":"llama-micro"}, replica 0 (host )"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find(R"(has training settings {"model":"gpt2-micro"}: replicas that differ)"), std::string::npos)
      << m.out;
}

TEST_F(Replicas, AKilledReplicaStopsTheRunTheCheckpointStaysIntactAndResumesOnAnyWorldSize) {
  const fs::path run_dir = dir_ / "killed";
  const Result k = replicas(2, "killed", "--replica-timeout 20", "LOCKSTEP_FAULT=kill:rank=1:step=5");
  EXPECT_NE(k.status, 0) << k.out;
  EXPECT_LT(k.seconds, 60);
  // The checkpoint of step 4 is whole: its recorded hashes match what loads.
  std::ifstream latest(run_dir / "latest");
  std::string name;
  latest >> name;
  EXPECT_EQ(name, "step-00000004") << k.out;
  const auto ck = lockstep::train::load_checkpoint((run_dir / name).string(), true);
  EXPECT_EQ(ck.meta.step, 4);
  // Resumed by three replicas, and by one process: the uninterrupted weights.
  const Result r3 = run(mpirun(3) + cli() + " train --resume " + run_dir.string());
  ASSERT_EQ(r3.status, 0) << r3.out;
  EXPECT_NE(r3.out.find("resuming"), std::string::npos) << r3.out;
  EXPECT_EQ(final_hash(r3.out), plain_hash_) << r3.out;
  const Result r1 = run(cli() + " train --resume " + (run_dir / "step-00000004").string() + " --out " +
                        (dir_ / "killed_plain").string());
  ASSERT_EQ(r1.status, 0) << r1.out;
  EXPECT_EQ(final_hash(r1.out), plain_hash_) << r1.out;
  // And the other way: a plain run's checkpoint resumed by two replicas.
  const Result r2 = run(mpirun(2) + cli() + " train --resume " + (dir_ / "plain" / "step-00000004").string() +
                        " --out " + (dir_ / "plain_resumed").string());
  ASSERT_EQ(r2.status, 0) << r2.out;
  EXPECT_EQ(final_hash(r2.out), plain_hash_) << r2.out;
}
