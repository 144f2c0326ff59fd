// The fused units paths of cpu::OpKernels (ops/units_fused.hpp) against the
// unfused calls they replace, bit for bit, on ragged shapes, at 1, 2 and 3
// threads: the shared-input forward against one Int8Linear forward per part,
// the shared-input backward (unit and float STE) against one Int8Linear
// backward per part, and the MLP chain against Int8Linear -> Gelu ->
// Int8Linear. The whole model's fused path against the op specs:
// tests/model/units_model_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/ops/units_fused.hpp"

#include "../common/units_fused_cases.hpp"

namespace ops = lockstep::ops;
using lockstep::cpu::OpKernels;
using namespace lockstep::test::units_fused;

namespace {

struct SplitSmallWork : ::testing::Environment {
  void SetUp() override { lockstep::cpu::set_min_parallel_work(256); }
};
const auto* const kSplit = ::testing::AddGlobalTestEnvironment(new SplitSmallWork);

}  // namespace

TEST(UnitsFused, SharedInputForwardIsTheSeparateLinearsBits) {
  for (const Shape& s : shapes())
    for (int threads : {1, 2, 3}) {
      const auto x = values(s.N, s.K, 2.0f);
      std::vector<std::vector<float>> w, b, y_fused, y_alone;
      for (std::size_t i = 0; i < s.outs.size(); ++i) {
        w.push_back(values(s.outs[i], s.K, 0.1f));
        b.push_back(i % 2 == 0 ? values(1, s.outs[i], 1.0f) : std::vector<float>{});
        y_fused.emplace_back(s.N * s.outs[i], -1.0f);
        y_alone.emplace_back(s.N * s.outs[i], -2.0f);
      }
      OpKernels k;
      k.threads = threads;
      std::vector<ops::UnitFwdPart> parts;
      for (std::size_t i = 0; i < s.outs.size(); ++i)
        parts.push_back({w[i].data(), b[i].empty() ? nullptr : b[i].data(), s.outs[i], y_fused[i].data()});
      const auto calls = ops::units_fused_calls().load();
      k.units_shared_fwd(s.N, s.K, x.data(), parts.data(), parts.size());
      EXPECT_EQ(ops::units_fused_calls().load(), calls + 1);
      for (std::size_t i = 0; i < s.outs.size(); ++i) {
        k.forward<ops::Int8Linear>({s.N, s.K, s.outs[i], !b[i].empty(), false},
                                   {.x = x.data(), .w = w[i].data(), .b = b[i].empty() ? nullptr : b[i].data(),
                                    .y = y_alone[i].data()});
        EXPECT_EQ(differing(y_fused[i], y_alone[i]), 0u)
            << "N " << s.N << " K " << s.K << " part " << i << " (out " << s.outs[i] << "), threads " << threads;
      }
    }
}

TEST(UnitsFused, SharedInputBackwardIsTheSeparateLinearsBits) {
  for (bool unit : {true, false})
    for (const Shape& s : shapes())
      for (int threads : {1, 3}) {
        const auto x = values(s.N, s.K, 2.0f);
        const std::size_t P = s.outs.size();
        std::vector<std::vector<float>> w, dy, dx_f, dw_f, db_f, dx_a, dw_a, db_a;
        for (std::size_t i = 0; i < P; ++i) {
          w.push_back(values(s.outs[i], s.K, 0.1f));
          dy.push_back(values(s.N, s.outs[i], 1e-3f));
          dx_f.emplace_back(s.N * s.K, -1.0f);
          dw_f.emplace_back(s.outs[i] * s.K, -1.0f);
          db_f.emplace_back(s.outs[i], -1.0f);
          dx_a.emplace_back(s.N * s.K, -2.0f);
          dw_a.emplace_back(s.outs[i] * s.K, -2.0f);
          db_a.emplace_back(s.outs[i], -2.0f);
        }
        OpKernels k;
        k.threads = threads;
        // Part 0 gets everything, the others dW (and a bias on part 1) in the
        // call, then each its dx alone: as the model's v/k/q steps call it.
        std::vector<ops::UnitBwdPart> all;
        for (std::size_t i = 0; i < P; ++i)
          all.push_back({w[i].data(), dy[i].data(), s.outs[i], i == 0 ? dx_f[i].data() : nullptr, dw_f[i].data(),
                         i == 1 ? db_f[i].data() : nullptr});
        k.units_shared_bwd(s.N, s.K, unit, x.data(), all.data(), all.size());
        for (std::size_t i = 1; i < P; ++i) {
          const ops::UnitBwdPart dx_only{w[i].data(), dy[i].data(), s.outs[i], dx_f[i].data(), nullptr, nullptr};
          k.units_shared_bwd(s.N, s.K, unit, x.data(), &dx_only, 1);
        }
        for (std::size_t i = 0; i < P; ++i) {
          const bool bias = i == 1;
          k.backward<ops::Int8Linear>({s.N, s.K, s.outs[i], bias, unit},
                                      {.x = x.data(), .w = w[i].data(), .dy = dy[i].data(), .dx = dx_a[i].data(),
                                       .dw = dw_a[i].data(), .db = bias ? db_a[i].data() : nullptr});
          const std::string where = std::string(unit ? "unit" : "float STE") + " backward, N " +
                                    std::to_string(s.N) + " K " + std::to_string(s.K) + " part " + std::to_string(i) +
                                    ", threads " + std::to_string(threads);
          EXPECT_EQ(differing(dx_f[i], dx_a[i]), 0u) << "dx, " << where;
          EXPECT_EQ(differing(dw_f[i], dw_a[i]), 0u) << "dW, " << where;
          if (bias) {
            EXPECT_EQ(differing(db_f[i], db_a[i]), 0u) << "db, " << where;
          }
        }
      }
}

TEST(UnitsFused, TheMlpChainIsLinearGeluLinearsBits) {
  struct Mlp {
    std::size_t N, D, F;
  };
  for (const Mlp& m : {Mlp{1, 1, 1}, Mlp{7, 33, 129}, Mlp{37, 64, 256}, Mlp{16, 68, 67}})
    for (int threads : {1, 2, 3}) {
      const auto x = values(m.N, m.D, 2.0f), w1 = values(m.F, m.D, 0.1f), b1 = values(1, m.F, 1.0f);
      const auto w2 = values(m.D, m.F, 0.1f), b2 = values(1, m.D, 1.0f);
      std::vector<float> fc_f(m.N * m.F, -1), act_f(m.N * m.F, -1), y_f(m.N * m.D, -1);
      std::vector<float> fc_a(m.N * m.F, -2), act_a(m.N * m.F, -2), y_a(m.N * m.D, -2);
      OpKernels k;
      k.threads = threads;
      OpKernels::Aux aux_f, aux_a;
      k.units_mlp_gelu_fwd({m.N, m.D, m.F, x.data(), w1.data(), b1.data(), w2.data(), b2.data(), fc_f.data(),
                            act_f.data(), y_f.data()},
                           aux_f);
      k.forward<ops::Int8Linear>({m.N, m.D, m.F, true, false},
                                 {.x = x.data(), .w = w1.data(), .b = b1.data(), .y = fc_a.data()});
      k.forward<ops::Gelu>({m.N * m.F}, {.x = fc_a.data(), .y = act_a.data()}, aux_a);
      k.forward<ops::Int8Linear>({m.N, m.F, m.D, true, false},
                                 {.x = act_a.data(), .w = w2.data(), .b = b2.data(), .y = y_a.data()});
      const std::string where = "N " + std::to_string(m.N) + " D " + std::to_string(m.D) + " F " +
                                std::to_string(m.F) + ", threads " + std::to_string(threads);
      EXPECT_EQ(differing(fc_f, fc_a), 0u) << "fc, " << where;
      EXPECT_EQ(differing(act_f, act_a), 0u) << "act, " << where;
      EXPECT_EQ(differing(aux_f.a, aux_a.a), 0u) << "GELU's kept tanh, " << where;
      EXPECT_EQ(differing(y_f, y_a), 0u) << "y, " << where;
    }
}

TEST(UnitsFused, AShapeBeyondTheInt32BoundIsRefusedNamingIt) {
  OpKernels k;
  std::vector<float> x(2 * 131072, 1.0f), w(131072, 1.0f), y(2);
  const ops::UnitFwdPart part{w.data(), nullptr, 1, y.data()};
  try {
    k.units_shared_fwd(2, 131072, x.data(), &part, 1);
    FAIL() << "accepted K = 131072";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("in = 131072 exceeds 131071"), std::string::npos) << e.what();
  }
}
