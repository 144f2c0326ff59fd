// The step profile's summaries and formats (profile.hpp); the events are in profile.cu.
#include "lockstep/backend/cuda/profile.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace lockstep::cuda::profile {
namespace {

// What an op scope's label names: its first two words ("linear fwd" of
// "linear fwd 16384x768x3072"). Launches outside any op are the step's glue;
// a named gap ("(host: between steps)") stands for itself.
std::string op_of(const Row& row) {
  if (row.scope.empty()) return row.kernel.starts_with("(") ? row.kernel : "(step glue: optimizer, loss, copies)";
  const std::size_t first = row.scope.find(' ');
  const std::size_t second = first == std::string::npos ? first : row.scope.find(' ', first + 1);
  return row.scope.substr(0, second);
}

enum class Key { kernel, op, scope };

std::vector<Row> summed(const Result& r, Key by) {
  std::map<std::string, Row> sums;
  for (const Row& row : r.rows) {
    const std::string key = by == Key::kernel ? row.kernel : by == Key::op ? op_of(row) : row.scope;
    if (by == Key::scope && key.empty()) continue;  // the glue: in the op summary
    Row& s = sums[key];
    (by == Key::kernel ? s.kernel : s.scope) = key;
    s.calls += row.calls;
    s.ms += row.ms;
  }
  std::vector<Row> out;
  for (auto& [key, row] : sums) out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.ms > b.ms; });
  return out;
}

double row_sum(const Result& r) {
  double s = 0;
  for (const Row& row : r.rows) s += row.ms;
  return s;
}

}  // namespace

std::string op_label(std::string_view op, const char* direction) { return fmt::format("{} {}", op, direction); }
std::string op_label(std::string_view op, const char* direction, std::size_t rows, std::size_t in, std::size_t out) {
  return fmt::format("{} {} {}x{}x{}", op, direction, rows, in, out);
}

std::vector<Row> by_kernel(const Result& r) { return summed(r, Key::kernel); }
std::vector<Row> by_op(const Result& r) { return summed(r, Key::op); }
std::vector<Row> by_scope(const Result& r) { return summed(r, Key::scope); }

double scope_flops(const std::string& scope) {
  const std::size_t first = scope.find(' ');
  if (first == std::string::npos) return 0;
  const std::size_t second = scope.find(' ', first + 1);
  if (second == std::string::npos) return 0;
  const std::string dir = scope.substr(first + 1, second - first - 1);
  unsigned long long n = 0, k = 0, m = 0;
  char tail = 0;
  if (std::sscanf(scope.c_str() + second + 1, "%llux%llux%llu%c", &n, &k, &m, &tail) != 3) return 0;
  const double nkm = static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(m);
  return dir == "fwd" ? 2 * nkm : dir == "bwd" ? 4 * nkm : 0;
}

std::string table(const Result& r, int steps, double unprofiled_ms_per_step, std::size_t top) {
  const double n = std::max(1, steps);
  const double sum = row_sum(r) / n;
  const double pct = sum > 0 ? 100.0 / sum : 0.0;
  const std::string against =
      unprofiled_ms_per_step > 0
          ? fmt::format("vs unprofiled {:.2f} ms/step ({:+.1f}%)", unprofiled_ms_per_step,
                        100.0 * (sum - unprofiled_ms_per_step) / unprofiled_ms_per_step)
          : std::string("(no unprofiled time to compare)");
  std::string out = fmt::format(
      "step profile: {} step(s), {} intervals; sum of intervals {:.2f} ms/step (device span {:.2f}, host {:.2f}) {}\n",
      steps, r.intervals, sum, r.device_ms / n, r.host_ms / n, against);
  const auto section = [&](const char* title, const std::vector<Row>& rows, std::size_t limit, auto name) {
    out += fmt::format("{:<96} {:>9} {:>10} {:>7}\n", title, "calls", "ms/step", "%");
    double shown = 0;
    for (std::size_t i = 0; i < rows.size() && i < limit; ++i) {
      const Row& row = rows[i];
      out += fmt::format("{:<96} {:>9.1f} {:>10.3f} {:>6.1f}%\n", name(row).substr(0, 96), row.calls / n,
                         row.ms / n, row.ms / n * pct);
      shown += row.ms;
    }
    if (rows.size() > limit)
      out += fmt::format("{:<96} {:>9} {:>10.3f} {:>6.1f}%\n", fmt::format("({} more rows)", rows.size() - limit), "",
                         (row_sum(r) - shown) / n, (row_sum(r) - shown) / n * pct);
    out += "\n";
  };
  section("op (scope)", by_op(r), 1000, [](const Row& row) { return row.scope; });
  section("kernel", by_kernel(r), 1000, [](const Row& row) { return row.kernel; });
  {  // the op calls by shape, with the rate they reach
    out += fmt::format("{:<96} {:>9} {:>10} {:>7} {:>9}\n", "op call (by shape)", "calls", "ms/step", "%",
                       "T(FL)OP/s");
    for (const Row& row : by_scope(r)) {
      const double f = scope_flops(row.scope);
      out += fmt::format("{:<96} {:>9.1f} {:>10.3f} {:>6.1f}% {:>9}\n", row.scope.substr(0, 96), row.calls / n,
                         row.ms / n, row.ms / n * pct,
                         f > 0 && row.ms > 0 ? fmt::format("{:.1f}", f * row.calls / (row.ms * 1e-3) / 1e12) : "");
    }
    out += "\n";
  }
  section("op call | kernel", r.rows, top, [](const Row& row) {
    return (row.scope.empty() ? std::string("-") : row.scope) + " | " + row.kernel;
  });
  return out;
}

std::string to_json(const Result& r, int steps, double unprofiled_ms_per_step, std::string_view context) {
  const double n = std::max(1, steps);
  const auto rows = [&](const std::vector<Row>& rs) {
    nlohmann::json a = nlohmann::json::array();
    for (const Row& row : rs) {
      nlohmann::json o = {{"scope", row.scope}, {"kernel", row.kernel}, {"calls_per_step", row.calls / n},
                          {"ms_per_step", row.ms / n}};
      if (const double f = scope_flops(row.scope); f > 0 && row.kernel.empty() && row.ms > 0)
        o["tera_per_s"] = f * static_cast<double>(row.calls) / (row.ms * 1e-3) / 1e12;  // a by_scope row: its rate
      a.push_back(std::move(o));
    }
    return a;
  };
  const nlohmann::json j = {{"steps", steps},
                            {"intervals", r.intervals},
                            {"sum_ms_per_step", row_sum(r) / n},
                            {"device_span_ms_per_step", r.device_ms / n},
                            {"host_ms_per_step", r.host_ms / n},
                            {"unprofiled_ms_per_step", unprofiled_ms_per_step},
                            {"by_op", rows(by_op(r))},
                            {"by_kernel", rows(by_kernel(r))},
                            {"by_scope", rows(by_scope(r))},
                            {"rows", rows(r.rows)}};
  std::string s = j.dump();
  if (!context.empty()) s.insert(1, std::string(context) + ",");
  return s;
}

namespace {
double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

StepOnRequest::StepOnRequest() {
  const char* env = std::getenv("LOCKSTEP_CUDA_PROFILE");
  if (env == nullptr || *env == '\0') return;
  path_ = env;
  if (const auto colon = path_.rfind(':'); colon != std::string::npos) {
    try {
      std::size_t used = 0;
      at_ = std::stoll(path_.substr(colon + 1), &used);
      if (used != path_.size() - colon - 1 || at_ < 1) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument("LOCKSTEP_CUDA_PROFILE: FILE.json[:STEP] with STEP >= 1 expected, got '" + path_ +
                                  "'");
    }
    path_.resize(colon);
  }
}

void StepOnRequest::staged() {
  ++step_;
  start_ms_ = now_ms();
  if (!path_.empty() && step_ == at_) begin();
}

void StepOnRequest::finished() {
  const double ms = now_ms() - start_ms_;
  if (path_.empty() || step_ != at_ || !active()) {
    previous_ms_ = ms;
    return;
  }
  const Result r = end();
  std::fputs(table(r, 1, previous_ms_).c_str(), stderr);
  std::ofstream f(path_);
  f << to_json(r, 1, previous_ms_, fmt::format(R"("step":{})", step_)) << "\n";
  if (!f) throw std::runtime_error("LOCKSTEP_CUDA_PROFILE: cannot write " + path_);
}

}  // namespace lockstep::cuda::profile
