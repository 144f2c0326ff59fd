// Training throughput of the CPU model (forward + backward), tokens/s:
//   model_speed [preset] [batch] [seq] [threads] [steps]
//   model_speed gpt2-tiny 8 256 2 5
// Prints one line per step and the median, with the machine's load average
// (wall-clock numbers are only comparable at similar load), and the process's
// CPU time per step (all threads): tokens per CPU-second is the throughput the
// model would have with the cores to itself and perfect scaling.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "lockstep/model/model.hpp"

namespace {
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "gpt2-tiny";
  const long batch = argc > 2 ? std::atol(argv[2]) : 8;
  const long seq = argc > 3 ? std::atol(argv[3]) : 256;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 2;
  const int steps = argc > 5 ? std::atoi(argv[5]) : 5;
  const auto cfg = lockstep::model::preset(name);
  auto model = lockstep::model::make_cpu_model(cfg);
  model->init(1);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * seq)), tg(ids.size());
  std::uint64_t x = 88172645463325252ull;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ids[i] = static_cast<std::int32_t>(x % static_cast<std::uint64_t>(cfg.vocab_size));
    tg[i] = static_cast<std::int32_t>((x >> 20) % static_cast<std::uint64_t>(cfg.vocab_size));
  }
  std::printf("%s, batch %ld x seq %ld, %d threads\n", cfg.summary().c_str(), batch, seq, threads);
  std::vector<double> rates, cpu_rates;
  for (int s = 0; s < steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    const float loss = model->forward_backward(ids, tg, batch, seq, false, threads);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double dc = cpu_seconds() - c0;
    rates.push_back(static_cast<double>(batch * seq) / dt);
    cpu_rates.push_back(static_cast<double>(batch * seq) / dc);
    std::printf("step %d: loss %.4f, %.3f s wall, %.3f s cpu, %.0f tokens/s, %.0f tokens per cpu-second\n", s,
                static_cast<double>(loss), dt, dc, rates.back(), cpu_rates.back());
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  std::string load;
  std::ifstream("/proc/loadavg") >> load;
  std::printf("median %.0f tokens/s (forward+backward), %.0f tokens per cpu-second, load average %s\n",
              rates[rates.size() / 2], cpu_rates[cpu_rates.size() / 2], load.c_str());
}
