// The gradient checker's teeth: every injected wrong backward must be
// REJECTED, every faithful backward (the ops' own and the controls) accepted.
// Reproduce a run with LOCKSTEP_SEED=<the printed seed>.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lockstep/ad/mutants.hpp"
#include "lockstep/ad/registry.hpp"

namespace {

using namespace lockstep;

TEST(Mutants, WrongBackwardsRejectedFaithfulOnesAccepted) {
  ad::RunOptions o;
  o.seed = ad::seed_from_env();
  std::printf("mutants seed %llu (reproduce with LOCKSTEP_SEED=%llu)\n",
              static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.seed));
  const auto results = ad::run_mutants(o);
  std::set<std::string> ops_seen;
  std::size_t rejected = 0, accepted = 0;
  for (const ad::MutantResult& r : results) {
    const char* verdict = r.rejected ? "REJECTED" : "accepted";
    std::printf("%-14s %-48s entries %5llu  max rel err %9.3g  %s%s%s\n", r.op.c_str(),
                r.mutant.c_str(), static_cast<unsigned long long>(r.entries), r.max_rel, verdict,
                r.equivalent && r.expect_reject ? " (equivalent: this IS the op's backward)" : "",
                r.as_expected() ? "" : "   <-- UNEXPECTED");
    if (r.rejected) std::printf("%16s%s\n", "", r.reason.c_str());
    EXPECT_TRUE(r.as_expected()) << r.op << " / " << r.mutant << ": "
                                 << (r.rejected ? "rejected: " + r.reason : "accepted")
                                 << " (seed " << o.seed << ")";
    EXPECT_GT(r.entries, 0u) << r.op << " / " << r.mutant;
    ops_seen.insert(r.op);
    (r.rejected ? rejected : accepted) += 1;
  }
  std::printf("%zu rejected, %zu accepted\n", rejected, accepted);
  // Every registered op faces the mutants.
  for (const auto& e : ad::op_registry()) EXPECT_TRUE(ops_seen.count(std::string(e.name))) << e.name;
  // The mutants the issue names are all there.
  auto has = [&](const std::string& op, const std::string& m) {
    for (const auto& r : results)
      if (r.op == op && r.mutant == m) return true;
    return false;
  };
  for (const auto& e : ad::op_registry()) {
    const std::string op(e.name);
    EXPECT_TRUE(has(op, "correct backward")) << op;
    EXPECT_TRUE(has(op, "zero gradient")) << op;
    EXPECT_TRUE(has(op, "negated gradient")) << op;
    EXPECT_TRUE(has(op, "identity (cotangent passed through)")) << op;
  }
  EXPECT_TRUE(has("rope", "wrong RoPE sign (rotates by +θ)"));
  EXPECT_TRUE(has("attention", "skipped softmax backward (dAttn as dScores)"));
  EXPECT_TRUE(has("relu2_mul", "ReLU² missing its factor 2"));
  EXPECT_TRUE(has("rmsnorm", "RMSNorm backward missing the mean term"));
  EXPECT_TRUE(has("linear", "transposed weight gradient"));
  EXPECT_TRUE(has("lora_linear", "LoRA gradient flowing into the frozen base"));
}

}  // namespace
