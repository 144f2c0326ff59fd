// The gate runner (gate.hpp): bit comparison, the clean and dirty passes, and
// the refusal message.
#include "lockstep/backend/cuda/gate.hpp"

#include <chrono>
#include <cstring>
#include <exception>
#include <stdexcept>

#include <fmt/format.h>

#include "lockstep/backend/cuda/device.hpp"
#include "lockstep/backend/cuda/trace.hpp"

namespace lockstep::cuda::gate {

std::string first_difference(std::string_view tensor, const float* cpu, const float* gpu, std::size_t n,
                             std::size_t row_len) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t a, b;
    std::memcpy(&a, cpu + i, 4);
    std::memcpy(&b, gpu + i, 4);
    if (a == b) continue;
    std::string where = row_len > 0 ? fmt::format(" (row {}, col {})", i / row_len, i % row_len) : "";
    return fmt::format("{}[{}]{}: cpu 0x{:08x} ({}) vs cuda 0x{:08x} ({})", tensor, i, where, a, cpu[i], b, gpu[i]);
  }
  return "";
}

std::string first_difference(std::string_view tensor, const std::vector<float>& cpu, const std::vector<float>& gpu,
                             std::size_t row_len) {
  if (cpu.size() != gpu.size())
    return fmt::format("{}: cpu has {} cells, cuda {}", tensor, cpu.size(), gpu.size());
  return first_difference(tensor, cpu.data(), gpu.data(), cpu.size(), row_len);
}

std::vector<Case> cases_of(std::initializer_list<std::string_view> ops) {
  std::vector<Case> out;
  for (Case& c : all_cases())
    for (std::string_view op : ops)
      if (c.op == op) {
        out.push_back(std::move(c));
        break;
      }
  return out;
}

std::vector<Outcome> run_gates(const std::vector<Case>& cases, const Options& opt) {
  std::vector<Outcome> out;
  const auto selected = [&](const Case& c) {
    if (opt.only.empty()) return true;
    for (const std::string& s : opt.only)
      if (c.kernel.find(s) != std::string::npos) return true;
    return false;
  };
  for (int pass = 0; pass < (opt.dirty_pass ? 2 : 1); ++pass) {
    const bool poisoned = pass == 1;
    set_poison(poisoned ? std::optional<std::uint32_t>(opt.poison_pattern) : std::nullopt);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      if (!selected(c)) continue;
      Outcome o{c.kernel, c.shape, poisoned, "", 0.0, c.optional};
      const auto t0 = std::chrono::steady_clock::now();
      trace::GateCase traced;  // the kernel paths a passing case launched count as gated (trace.hpp)
      try {
        o.difference = c.run(opt.seed * 1000003u + i);
      } catch (const std::exception& e) {
        o.difference = std::string("error: ") + e.what();
      }
      traced.end(o.difference.empty());
      o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.push_back(std::move(o));
    }
  }
  set_poison(std::nullopt);
  return out;
}

void run_for_records(const std::vector<Case>& cases) {
  const std::optional<std::uint32_t> outer = poison();
  const Options defaults;
  for (const bool poisoned : {false, true}) {
    set_poison(poisoned ? std::optional<std::uint32_t>(defaults.poison_pattern) : std::nullopt);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      try {
        cases[i].run(defaults.seed * 1000003u + i);
      } catch (...) {
        set_poison(outer);
        throw;
      }
    }
  }
  set_poison(outer);
}

void require_all(const Options& opt) {
  for (const Outcome& o : run_gates(all_cases(), opt)) {
    if (!o.difference.empty() && !o.optional)
      throw std::runtime_error(fmt::format("CUDA kernel refused: {} on {}{}: {}", o.kernel, o.shape,
                                           o.poisoned ? " (dirty-buffer pass)" : "", o.difference));
  }
}

}  // namespace lockstep::cuda::gate
