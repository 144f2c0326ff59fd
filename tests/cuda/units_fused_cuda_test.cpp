// The fused units paths of cuda::OpKernels (ops/units_fused.hpp) against the
// unfused CUDA calls they replace and against cpu::OpKernels' fused paths, bit
// for bit, on ragged shapes: the shared-input forward, the shared-input
// backward (unit and float STE), the MLP chain. Each planted bug of
// launch::set_units_fused_mutant is caught. The model's fused path on the GPU:
// test_cuda_units_model (the CPU model's bits and the pinned hashes).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/ops.hpp"
#include "lockstep/backend/cuda/units_fused_launch.hpp"
#include "lockstep/ops/units_fused.hpp"

#include "../common/units_fused_cases.hpp"

namespace cu = lockstep::cuda;
namespace ops = lockstep::ops;
using Buf = cu::DeviceBuffer<float>;
using namespace lockstep::test::units_fused;

namespace {

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

Buf up(const std::vector<float>& h) {
  Buf b;
  b.upload(h);
  return b;
}
Buf filled(std::size_t n, float v) { return up(std::vector<float>(n, v)); }

// Cells differing, over all shapes: fused CUDA vs unfused CUDA (and vs the CPU's fused path).
struct Count {
  std::size_t vs_unfused = 0, vs_cpu = 0, cells = 0;
};

Count shared_forward() {
  Count c;
  for (const Shape& s : shapes(true)) {
    const auto x = values(s.N, s.K, 2.0f);
    const Buf dx = up(x);
    std::vector<std::vector<float>> w, b, y_cpu;
    std::vector<Buf> dw, db, y_fused, y_alone;
    std::vector<ops::UnitFwdPart> parts, cpu_parts;
    for (std::size_t i = 0; i < s.outs.size(); ++i) {
      w.push_back(values(s.outs[i], s.K, 0.1f));
      b.push_back(i % 2 == 0 ? values(1, s.outs[i], 1.0f) : std::vector<float>{});
      y_cpu.emplace_back(s.N * s.outs[i], -3.0f);
      dw.push_back(up(w[i]));
      db.push_back(up(b[i]));
      y_fused.push_back(filled(s.N * s.outs[i], -1.0f));
      y_alone.push_back(filled(s.N * s.outs[i], -2.0f));
    }
    for (std::size_t i = 0; i < s.outs.size(); ++i) {
      parts.push_back({dw[i].data(), b[i].empty() ? nullptr : db[i].data(), s.outs[i], y_fused[i].data()});
      cpu_parts.push_back({w[i].data(), b[i].empty() ? nullptr : b[i].data(), s.outs[i], y_cpu[i].data()});
    }
    cu::OpKernels k;
    k.units_shared_fwd(s.N, s.K, dx.data(), parts.data(), parts.size());
    lockstep::cpu::OpKernels host;
    host.threads = 2;
    host.units_shared_fwd(s.N, s.K, x.data(), cpu_parts.data(), cpu_parts.size());
    for (std::size_t i = 0; i < s.outs.size(); ++i) {
      k.forward<ops::Int8Linear>({s.N, s.K, s.outs[i], !b[i].empty(), false},
                                 {.x = dx.data(), .w = dw[i].data(), .b = b[i].empty() ? nullptr : db[i].data(),
                                  .y = y_alone[i].data()});
      const auto got = y_fused[i].download();
      c.vs_unfused += differing(got, y_alone[i].download());
      c.vs_cpu += differing(got, y_cpu[i]);
      c.cells += got.size();
    }
  }
  return c;
}

Count shared_backward(bool unit) {
  Count c;
  for (const Shape& s : shapes(true)) {
    const auto x = values(s.N, s.K, 2.0f);
    const Buf dx_in = up(x);
    const std::size_t P = s.outs.size();
    std::vector<std::vector<float>> w, dy, cdx, cdw, cdb;
    std::vector<Buf> gw, gdy, fdx, fdw, fdb, adx, adw, adb;
    for (std::size_t i = 0; i < P; ++i) {
      w.push_back(values(s.outs[i], s.K, 0.1f));
      dy.push_back(values(s.N, s.outs[i], 1e-3f));
      cdx.emplace_back(s.N * s.K, -3.0f);
      cdw.emplace_back(s.outs[i] * s.K, -3.0f);
      cdb.emplace_back(s.outs[i], -3.0f);
      gw.push_back(up(w[i]));
      gdy.push_back(up(dy[i]));
      fdx.push_back(filled(s.N * s.K, -1.0f));
      fdw.push_back(filled(s.outs[i] * s.K, -1.0f));
      fdb.push_back(filled(s.outs[i], -1.0f));
      adx.push_back(filled(s.N * s.K, -2.0f));
      adw.push_back(filled(s.outs[i] * s.K, -2.0f));
      adb.push_back(filled(s.outs[i], -2.0f));
    }
    // As the model calls it: part 0 everything, the others dW (part 1 a bias) in one call, then each its dx.
    std::vector<ops::UnitBwdPart> all, cpu_all;
    for (std::size_t i = 0; i < P; ++i) {
      all.push_back({gw[i].data(), gdy[i].data(), s.outs[i], i == 0 ? fdx[i].data() : nullptr, fdw[i].data(),
                     i == 1 ? fdb[i].data() : nullptr});
      cpu_all.push_back({w[i].data(), dy[i].data(), s.outs[i], i == 0 ? cdx[i].data() : nullptr, cdw[i].data(),
                         i == 1 ? cdb[i].data() : nullptr});
    }
    cu::OpKernels k;
    lockstep::cpu::OpKernels host;
    host.threads = 2;
    k.units_shared_bwd(s.N, s.K, unit, dx_in.data(), all.data(), all.size());
    host.units_shared_bwd(s.N, s.K, unit, x.data(), cpu_all.data(), cpu_all.size());
    for (std::size_t i = 1; i < P; ++i) {
      const ops::UnitBwdPart g{gw[i].data(), gdy[i].data(), s.outs[i], fdx[i].data(), nullptr, nullptr};
      k.units_shared_bwd(s.N, s.K, unit, dx_in.data(), &g, 1);
      const ops::UnitBwdPart h{w[i].data(), dy[i].data(), s.outs[i], cdx[i].data(), nullptr, nullptr};
      host.units_shared_bwd(s.N, s.K, unit, x.data(), &h, 1);
    }
    for (std::size_t i = 0; i < P; ++i) {
      const bool bias = i == 1;
      k.backward<ops::Int8Linear>({s.N, s.K, s.outs[i], bias, unit},
                                  {.x = dx_in.data(), .w = gw[i].data(), .dy = gdy[i].data(), .dx = adx[i].data(),
                                   .dw = adw[i].data(), .db = bias ? adb[i].data() : nullptr});
      const auto gdx = fdx[i].download(), gdw = fdw[i].download();
      c.vs_unfused += differing(gdx, adx[i].download()) + differing(gdw, adw[i].download());
      c.vs_cpu += differing(gdx, cdx[i]) + differing(gdw, cdw[i]);
      c.cells += gdx.size() + gdw.size();
      if (bias) {
        const auto gdb = fdb[i].download();
        c.vs_unfused += differing(gdb, adb[i].download());
        c.vs_cpu += differing(gdb, cdb[i]);
        c.cells += gdb.size();
      }
    }
  }
  return c;
}

Count mlp_chain() {
  struct Mlp {
    std::size_t N, D, F;
  };
  Count c;
  for (const Mlp& m : {Mlp{1, 1, 1}, Mlp{7, 33, 129}, Mlp{37, 64, 256}, Mlp{16, 68, 67}, Mlp{512, 768, 3072}}) {
    const auto x = values(m.N, m.D, 2.0f), w1 = values(m.F, m.D, 0.1f), b1 = values(1, m.F, 1.0f);
    const auto w2 = values(m.D, m.F, 0.1f), b2 = values(1, m.D, 1.0f);
    const Buf gx = up(x), gw1 = up(w1), gb1 = up(b1), gw2 = up(w2), gb2 = up(b2);
    Buf ffc = filled(m.N * m.F, -1), fact = filled(m.N * m.F, -1), fy = filled(m.N * m.D, -1);
    Buf afc = filled(m.N * m.F, -2), aact = filled(m.N * m.F, -2), ay = filled(m.N * m.D, -2);
    std::vector<float> cfc(m.N * m.F, -3), cact(m.N * m.F, -3), cy(m.N * m.D, -3);
    cu::OpKernels k;
    cu::OpKernels::Aux aux_f, aux_a;
    k.units_mlp_gelu_fwd({m.N, m.D, m.F, gx.data(), gw1.data(), gb1.data(), gw2.data(), gb2.data(), ffc.data(),
                          fact.data(), fy.data()},
                         aux_f);
    k.forward<ops::Int8Linear>({m.N, m.D, m.F, true, false},
                               {.x = gx.data(), .w = gw1.data(), .b = gb1.data(), .y = afc.data()});
    k.forward<ops::Gelu>({m.N * m.F}, {.x = afc.data(), .y = aact.data()}, aux_a);
    k.forward<ops::Int8Linear>({m.N, m.F, m.D, true, false},
                               {.x = aact.data(), .w = gw2.data(), .b = gb2.data(), .y = ay.data()});
    lockstep::cpu::OpKernels host;
    host.threads = 2;
    lockstep::cpu::OpKernels::Aux aux_c;
    host.units_mlp_gelu_fwd({m.N, m.D, m.F, x.data(), w1.data(), b1.data(), w2.data(), b2.data(), cfc.data(),
                             cact.data(), cy.data()},
                            aux_c);
    const auto gfc = ffc.download(), gact = fact.download(), gy = fy.download(), gts = aux_f.a.download();
    c.vs_unfused += differing(gfc, afc.download()) + differing(gact, aact.download()) + differing(gy, ay.download()) +
                    differing(gts, aux_a.a.download());
    c.vs_cpu += differing(gfc, cfc) + differing(gact, cact) + differing(gy, cy) + differing(gts, aux_c.a);
    c.cells += gfc.size() + gact.size() + gy.size() + gts.size();
  }
  return c;
}

void report(const char* what, const Count& c) {
  std::printf("%s: %zu cells; %zu differ from the unfused CUDA calls, %zu from the CPU's fused path\n", what, c.cells,
              c.vs_unfused, c.vs_cpu);
}

}  // namespace

TEST(CudaUnitsFused, SharedInputForwardIsTheUnfusedAndTheCpuBits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Count c = shared_forward();
  report("shared-input forward", c);
  EXPECT_EQ(c.vs_unfused, 0u);
  EXPECT_EQ(c.vs_cpu, 0u);
}

TEST(CudaUnitsFused, SharedInputBackwardIsTheUnfusedAndTheCpuBits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  for (bool unit : {true, false}) {
    const Count c = shared_backward(unit);
    report(unit ? "shared-input unit backward" : "shared-input float STE backward", c);
    EXPECT_EQ(c.vs_unfused, 0u);
    EXPECT_EQ(c.vs_cpu, 0u);
  }
}

TEST(CudaUnitsFused, TheMlpChainIsTheUnfusedAndTheCpuBits) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  const Count c = mlp_chain();
  report("MLP chain (fc, act, GELU's tanh, y)", c);
  EXPECT_EQ(c.vs_unfused, 0u);
  EXPECT_EQ(c.vs_cpu, 0u);
}

// Each planted bug is seen: the comparisons above have teeth on the device.
TEST(CudaUnitsFused, EveryPlantedBugIsCaught) {
  if (!have_device()) GTEST_SKIP() << "no CUDA device";
  struct Plant {
    int mutant;
    const char* what;
    Count (*run)();
  };
  const Plant plants[] = {
      {1, "GELU's y as one fma (mlp_gelu_rows)", [] { return mlp_chain(); }},
      {2, "the bias dropped on the last column (unit_epilogue_cols)", [] { return shared_forward(); }},
      {3, "the stacked dW epilogue on the first part's dy steps", [] { return shared_backward(true); }},
  };
  for (const Plant& p : plants) {
    cu::launch::set_units_fused_mutant(p.mutant);
    const Count c = p.run();
    cu::launch::set_units_fused_mutant(0);
    std::printf("planted %d, %s: %zu of %zu cells differ from the unfused calls\n", p.mutant, p.what, c.vs_unfused,
                c.cells);
    EXPECT_GT(c.vs_unfused, 0u) << p.what << ": not caught";
    EXPECT_GT(c.vs_cpu, 0u) << p.what << ": not caught against the CPU";
  }
}
