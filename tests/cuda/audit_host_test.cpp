// The live audits' logic on the CPU (no GPU needed; label unit): with
// audit::Options::host_pointers the operands are gathered from host memory by
// the same segments the device gather reads, so the row and cell choice, the
// offsets, the recomputation with the op spec's functions and the reports are
// all exercised here against cpu::OpKernels results. cuda_model_test.cpp runs
// the same checks on device buffers.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "audit_problems.hpp"
#include "lockstep/backend/cuda/audit.hpp"
#include "lockstep/ops/units.hpp"
#include "lockstep/ad/rng.hpp"
#include "lockstep/backend/cpu/ops.hpp"

using namespace lockstep;

namespace {

struct HostAudits {
  explicit HostAudits(std::size_t interior = 4) {
    cuda::audit::Options o;
    o.enabled = true;
    o.host_pointers = true;
    o.interior = interior;
    cuda::audit::configure(o);
    cuda::audit::reset_stats();
  }
  ~HostAudits() { cuda::audit::configure({}); }
};

void audit_bwd(const test::AttentionProblem& p) {
  const float* d = p.dqkv.data();
  cuda::audit::attention_bwd(p.c, p.qkv.data(), p.ld, p.qkv.data() + p.ok, p.qkv.data() + p.ov, p.ld, p.o.data(),
                             p.lse.data(), p.dout.data(), d, d + p.ok, d + p.ov);
}

// The audit of `p` throws a report containing `want`.
void expect_caught(const test::AttentionProblem& p, const std::string& want) {
  try {
    audit_bwd(p);
    ADD_FAILURE() << "the corrupted cell was not caught (" << want << ")";
  } catch (const std::runtime_error& e) {
    std::printf("caught: %s\n", e.what());
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(AuditHost, AttentionBackwardRowsAreTheCpuKernelsBits) {
  // Multi-head, grouped-query, multi-query; one key block and several; T = 1;
  // Dh of the models (64). 40 random rows per launch besides the fixed ones.
  const std::vector<ops::Attention::Config> cases = {
      {2, 70, 4, 2, 8, 0.0, 64}, {1, 9, 2, 2, 3, 0.0, 4},   {3, 5, 3, 1, 16, 0.0, 64},
      {1, 1, 1, 1, 4, 0.0, 64},  {2, 130, 2, 1, 64, 0.0, 64}, {1, 33, 8, 2, 5, 0.5, 8}};
  for (const auto& c : cases) {
    const test::AttentionProblem p(c);
    HostAudits on(40);
    EXPECT_NO_THROW(audit_bwd(p));
    EXPECT_NO_THROW(cuda::audit::attention_fwd(c, p.qkv.data(), p.ld, p.qkv.data() + p.ok, p.qkv.data() + p.ov, p.ld,
                                               p.o.data(), p.lse.data()));
    const auto st = cuda::audit::stats();
    std::printf("B %zu T %zu Hq %zu Hkv %zu Dh %zu: %zu launches, %zu cells, %zu mismatches\n", c.batch, c.seq,
                c.q_heads, c.kv_heads, c.head_dim, st.launches, st.cells, st.mismatches);
    EXPECT_EQ(st.launches, 2u);
    EXPECT_EQ(st.mismatches, 0u);
    // Backward: 3 + 20 query rows (Dh cells each) and 2 + 20 key rows (2·Dh);
    // forward: 4 + 40 rows (Dh + 1).
    EXPECT_EQ(st.cells, 23 * c.head_dim + 22 * 2 * c.head_dim + 44 * (c.head_dim + 1));
  }
}

TEST(AuditHost, ACorruptedAttentionGradientCellIsNamed) {
  const ops::Attention::Config c{2, 70, 4, 2, 8, 0.0, 64};
  test::AttentionProblem p(c);
  HostAudits on;
  EXPECT_NO_THROW(audit_bwd(p));
  const std::size_t B = c.batch, T = c.seq, Dh = c.head_dim;
  struct Corruption {
    std::size_t at;
    const char* report;
  };
  const Corruption cases[] = {
      {p.dq_at(B - 1, T - 1, c.q_heads - 1, Dh - 1), "dq of (b 1, h 3, i 69) d 7"},  // the last query row
      {p.dq_at(0, 0, 0, 0), "dq of (b 0, h 0, i 0) d 0"},                            // the first one
      {p.dq_at(B - 1, T / 2, 0, 3), "dq of (b 1, h 0, i 35) d 3"},                   // the middle one
      {p.dk_at(B - 1, 0, c.kv_heads - 1, 2), "dk of (b 1, kv head 1, j 0) d 2"},      // the group's first key
      {p.dv_at(B - 1, 0, c.kv_heads - 1, 5), "dv of (b 1, kv head 1, j 0) d 5"},
      {p.dk_at(B - 1, T - 1, c.kv_heads - 1, Dh - 1), "dk of (b 1, kv head 1, j 69) d 7"},  // its last key
      {p.dv_at(B - 1, T - 1, c.kv_heads - 1, 0), "dv of (b 1, kv head 1, j 69) d 0"},
  };
  for (const Corruption& x : cases) {
    const float keep = p.dqkv[x.at];
    p.dqkv[x.at] = std::nextafter(keep, 1e30f);  // one ulp
    expect_caught(p, x.report);
    p.dqkv[x.at] = -keep;  // the sign (-0 against +0 too)
    expect_caught(p, x.report);
    p.dqkv[x.at] = keep;
  }
  // With the audit warning instead of stopping, each corruption is counted.
  cuda::audit::Options o = cuda::audit::options();
  o.on_mismatch = cuda::audit::OnMismatch::warn;
  cuda::audit::configure(o);
  cuda::audit::reset_stats();
  p.dqkv[p.dk_at(B - 1, 0, c.kv_heads - 1, 0)] += 1.0f;
  p.dqkv[p.dq_at(0, 0, 0, 1)] += 1.0f;
  EXPECT_NO_THROW(audit_bwd(p));
  EXPECT_EQ(cuda::audit::stats().mismatches, 2u);
}

TEST(AuditHost, BitLinearForwardCellsAreTheCpuKernelsBitsAndACorruptedCellIsNamed) {
  const std::vector<std::array<std::size_t, 3>> shapes = {{33, 40, 17}, {1, 7, 1}, {64, 256, 96}};
  for (const auto& [N, K, M] : shapes) {
    test::BitLinearProblem p(N, K, M);
    HostAudits on(32);
    EXPECT_NO_THROW(cuda::audit::bitlinear_fwd(N, K, M, p.x.data(), p.w.data(), p.scale, p.y.data()));
    EXPECT_EQ(cuda::audit::stats().cells, 6u + 32u);
    EXPECT_EQ(cuda::audit::stats().mismatches, 0u);
  }
  test::BitLinearProblem p(33, 40, 17);
  HostAudits on;
  auto caught = [&](const std::string& want) {
    try {
      cuda::audit::bitlinear_fwd(p.N, p.K, p.M, p.x.data(), p.w.data(), p.scale, p.y.data());
      ADD_FAILURE() << "not caught: " << want;
    } catch (const std::runtime_error& e) {
      std::printf("caught: %s\n", e.what());
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  // A product cell one ulp off.
  float& cell = p.y[(p.N - 1) * p.M + p.M / 2];
  const float keep = cell;
  cell = std::nextafter(keep, 1e30f);
  caught("cell (32, 8)");
  cell = keep;
  // The quantizer is audited too: the same y no longer matches an input row
  // whose codes differ (the last row's maximum doubled changes its step).
  float* last = p.x.data() + (p.N - 1) * p.K;
  float mx = 0.0f;
  for (std::size_t k = 0; k < p.K; ++k) mx = std::fabs(last[k]) > mx ? std::fabs(last[k]) : mx;
  last[0] = 2.0f * mx;
  caught("bitlinear_fwd [33 x 17, k 40]: cell (32, 0)");
}

// The int8 unit linear's forward audit: cells = cpu::OpKernels' bits (with
// and without bias), a cell one ulp off and a changed input row are named.
TEST(AuditHost, Int8LinearForwardCellsAreTheCpuKernelsBitsAndACorruptedCellIsNamed) {
  ad::Rng rng(5);
  for (const bool bias : {false, true}) {
    const ops::Int8LinearConfig c{33, 40, 17, bias, false};
    std::vector<float> x(c.rows * c.in), w(c.out * c.in), b(c.out), y(c.rows * c.out);
    for (auto& v : x) v = static_cast<float>(rng.uniform(-3, 3));
    for (auto& v : w) v = static_cast<float>(rng.uniform(-0.1, 0.1));
    for (auto& v : b) v = static_cast<float>(rng.uniform(-1, 1));
    cpu::OpKernels k;
    k.forward<ops::Int8Linear>(c, {.x = x.data(), .w = w.data(), .b = bias ? b.data() : nullptr, .y = y.data()});
    HostAudits on(32);
    const float* bp = bias ? b.data() : nullptr;
    EXPECT_NO_THROW(cuda::audit::int8_linear_fwd(c.rows, c.in, c.out, x.data(), w.data(), bp, y.data()));
    EXPECT_EQ(cuda::audit::stats().cells, 6u + 32u);
    EXPECT_EQ(cuda::audit::stats().mismatches, 0u);
    auto caught = [&](const std::string& want) {
      try {
        cuda::audit::int8_linear_fwd(c.rows, c.in, c.out, x.data(), w.data(), bp, y.data());
        ADD_FAILURE() << "not caught: " << want;
      } catch (const std::runtime_error& e) {
        std::printf("caught: %s\n", e.what());
        EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
      }
    };
    float& cell = y[(c.rows - 1) * c.out + c.out / 2];  // the last row's middle: always audited
    const float keep = cell;
    cell = std::nextafter(keep, 1e30f);
    caught("int8_linear_fwd [33 x 17, k 40]: cell (32, 8)");
    cell = keep;
    // The weight quantizer is audited too: the last weight row's maximum doubled changes its step.
    float* last = w.data() + (c.out - 1) * c.in;
    float mx = 0.0f;
    for (std::size_t kk = 0; kk < c.in; ++kk) mx = std::fabs(last[kk]) > mx ? std::fabs(last[kk]) : mx;
    last[0] = 2.0f * mx;
    caught("int8_linear_fwd [33 x 17, k 40]: cell (0, 16)");
  }
}

// The time budget: each kind's first kMinLaunchesPerKind launches are audited,
// then a kind that has spent more than budget × elapsed is skipped (counted),
// while another kind still gets its own first launches; budget 1 audits every
// launch; a budget outside (0, 1] is refused. (Seen failing with admit()
// always true: 0 skipped.)
TEST(AuditHost, TheTimeBudgetSkipsLaunchesOverItAndCountsThem) {
  std::vector<float> a(8 * 64, 0.5f), b(64 * 8, 0.25f), c(8 * 8, 0.0f);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t j = 0; j < 8; ++j)
      c[i * 8 + j] = ops::Math<float>::dot_seq(a.data() + i * 64, 1, b.data() + j, 8, 64);
  auto product = [&] { cuda::audit::matmul("test", 8, 8, 64, a.data(), 64, 1, b.data(), 8, 1, nullptr, c.data(), 8); };
  cuda::audit::Options o;
  o.enabled = true;
  o.host_pointers = true;
  o.budget = 1e-12;  // nothing after the first launches fits
  cuda::audit::configure(o);
  cuda::audit::reset_stats();
  for (int i = 0; i < 50; ++i) product();
  EXPECT_EQ(cuda::audit::stats().launches, cuda::audit::kMinLaunchesPerKind);
  EXPECT_EQ(cuda::audit::stats().skipped, 50u - cuda::audit::kMinLaunchesPerKind);
  // Another kind is not starved by the products' spending.
  ad::Rng rng(9);
  const ops::Int8LinearConfig lc{5, 16, 3, false, false};
  std::vector<float> x(lc.rows * lc.in), w(lc.out * lc.in), y(lc.rows * lc.out);
  for (auto& v : x) v = static_cast<float>(rng.uniform(-3, 3));
  for (auto& v : w) v = static_cast<float>(rng.uniform(-0.1, 0.1));
  cpu::OpKernels k;
  k.forward<ops::Int8Linear>(lc, {.x = x.data(), .w = w.data(), .b = nullptr, .y = y.data()});
  cuda::audit::int8_linear_fwd(lc.rows, lc.in, lc.out, x.data(), w.data(), nullptr, y.data());
  EXPECT_EQ(cuda::audit::stats().launches, cuda::audit::kMinLaunchesPerKind + 1);
  // Budget 1: every launch.
  o.budget = 1.0;
  cuda::audit::configure(o);
  cuda::audit::reset_stats();
  for (int i = 0; i < 50; ++i) product();
  EXPECT_EQ(cuda::audit::stats().launches, 50u);
  EXPECT_EQ(cuda::audit::stats().skipped, 0u);
  for (const double bad : {0.0, -0.5, 1.5}) {
    o.budget = bad;
    EXPECT_THROW(cuda::audit::configure(o), std::invalid_argument) << bad;
  }
  cuda::audit::configure({});
}

}  // namespace
