// The fused units paths of cpu::OpKernels (ops/units_fused.hpp) against the
// unfused calls they replace, timed at GPT-2 124M's shapes (N tokens, d 768,
// d_ff 3072): q/k/v over one input (LLaMA's layout at GPT-2's width), the MLP
// chain, and the q/k/v backward (unit and float STE). Arms interleaved, the
// best of the rounds; wall time and this process's CPU time (the machine may be
// shared: the CPU time is the steadier number there). The results are the same
// bits either way (tests/cpu/units_fused_test.cpp).
//
//   build/<dir>/bench/units/units_fused_bench [N] [threads] [rounds]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <vector>

#include "lockstep/backend/cpu/ops.hpp"
#include "lockstep/ops/units_fused.hpp"

namespace ops = lockstep::ops;
using lockstep::cpu::OpKernels;

namespace {

std::vector<float> values(std::size_t n, float scale, unsigned seed) {
  std::mt19937 r(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(r);
  return v;
}

struct Time {
  double wall_ms = 1e300, cpu_ms = 1e300;
};
void measure(const std::function<void()>& f, Time& t) {
  const auto w0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  f();
  const double cpu = 1e3 * static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - w0).count();
  t.wall_ms = std::min(t.wall_ms, wall);
  t.cpu_ms = std::min(t.cpu_ms, cpu);
}

void row(const char* what, const Time& fused, const Time& plain) {
  std::printf("%-34s fused %8.1f ms wall %8.1f ms CPU | unfused %8.1f ms wall %8.1f ms CPU | CPU ratio %.2f\n", what,
              fused.wall_ms, fused.cpu_ms, plain.wall_ms, plain.cpu_ms, plain.cpu_ms / fused.cpu_ms);
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t N = argc > 1 ? static_cast<std::size_t>(std::atol(argv[1])) : 1024;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const std::size_t D = 768, F = 3072;
  OpKernels k;
  k.threads = threads;
  const auto x = values(N * D, 1.0f, 1), wq = values(D * D, 0.05f, 2), wk = values(D * D, 0.05f, 3),
             wv = values(D * D, 0.05f, 4);
  const auto w1 = values(F * D, 0.05f, 5), b1 = values(F, 0.1f, 6), w2 = values(D * F, 0.05f, 7),
             b2 = values(D, 0.1f, 8);
  const auto dq = values(N * D, 1e-3f, 9), dk = values(N * D, 1e-3f, 10), dv = values(N * D, 1e-3f, 11);
  std::vector<float> yq(N * D), yk(N * D), yv(N * D), fc(N * F), act(N * F), y(N * D);
  std::vector<float> dxa(N * D), dxb(N * D), gq(D * D), gk(D * D), gv(D * D);
  OpKernels::Aux aux;
  Time qkv_f, qkv_u, mlp_f, mlp_u, bwd_f[2], bwd_u[2];
  for (int r = 0; r < rounds; ++r) {
    measure([&] {
      const ops::UnitFwdPart p[] = {{wq.data(), nullptr, D, yq.data()}, {wk.data(), nullptr, D, yk.data()},
                                    {wv.data(), nullptr, D, yv.data()}};
      k.units_shared_fwd(N, D, x.data(), p, 3);
    }, qkv_f);
    measure([&] {
      for (auto [w, o] : {std::pair{&wq, &yq}, std::pair{&wk, &yk}, std::pair{&wv, &yv}})
        k.forward<ops::Int8Linear>({N, D, D, false, false}, {.x = x.data(), .w = w->data(), .b = nullptr, .y = o->data()});
    }, qkv_u);
    measure([&] {
      k.units_mlp_gelu_fwd({N, D, F, x.data(), w1.data(), b1.data(), w2.data(), b2.data(), fc.data(), act.data(),
                            y.data()},
                           aux);
    }, mlp_f);
    measure([&] {
      k.forward<ops::Int8Linear>({N, D, F, true, false}, {.x = x.data(), .w = w1.data(), .b = b1.data(), .y = fc.data()});
      k.forward<ops::Gelu>({N * F}, {.x = fc.data(), .y = act.data()}, aux);
      k.forward<ops::Int8Linear>({N, F, D, true, false}, {.x = act.data(), .w = w2.data(), .b = b2.data(), .y = y.data()});
    }, mlp_u);
    for (int unit = 0; unit < 2; ++unit) {
      measure([&] {
        const ops::UnitBwdPart all[] = {{wv.data(), dv.data(), D, dxa.data(), gv.data(), nullptr},
                                        {wk.data(), dk.data(), D, nullptr, gk.data(), nullptr},
                                        {wq.data(), dq.data(), D, nullptr, gq.data(), nullptr}};
        k.units_shared_bwd(N, D, unit == 1, x.data(), all, 3);
        const ops::UnitBwdPart kx{wk.data(), dk.data(), D, dxb.data(), nullptr, nullptr};
        k.units_shared_bwd(N, D, unit == 1, x.data(), &kx, 1);
        const ops::UnitBwdPart qx{wq.data(), dq.data(), D, dxb.data(), nullptr, nullptr};
        k.units_shared_bwd(N, D, unit == 1, x.data(), &qx, 1);
      }, bwd_f[unit]);
      measure([&] {
        for (auto [w, d, g] : {std::tuple{&wv, &dv, &gv}, std::tuple{&wk, &dk, &gk}, std::tuple{&wq, &dq, &gq}})
          k.backward<ops::Int8Linear>({N, D, D, false, unit == 1}, {.x = x.data(), .w = w->data(), .dy = d->data(),
                                                                   .dx = dxb.data(), .dw = g->data(), .db = nullptr});
      }, bwd_u[unit]);
    }
  }
  std::printf("units fusions, CPU, N %zu d %zu d_ff %zu, %d threads, best of %d rounds (load average now: see uptime)\n",
              N, D, F, threads, rounds);
  row("q/k/v forward (one product)", qkv_f, qkv_u);
  row("MLP chain c_fc->GELU->c_proj", mlp_f, mlp_u);
  row("q/k/v backward, float STE", bwd_f[0], bwd_u[0]);
  row("q/k/v backward, unit backward", bwd_f[1], bwd_u[1]);
  return 0;
}
