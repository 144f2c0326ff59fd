#include "lockstep/ad/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

namespace lockstep::ad {

CheckResult& Checks::row(std::string_view check) {
  for (CheckResult& r : rows_)
    if (r.check == check) return r;
  CheckResult r;
  r.op = op_;
  r.check = std::string(check);
  rows_.push_back(std::move(r));
  return rows_.back();
}

void Checks::add(std::string_view check, std::uint64_t cases, double max_abs, double max_rel,
                 double tol, bool pass, std::string note) {
  CheckResult& r = row(check);
  r.cases += cases;
  // NaN errors must fail and must show: std::max would drop them.
  r.max_abs = std::isnan(max_abs) || max_abs > r.max_abs ? max_abs : r.max_abs;
  r.max_rel = std::isnan(max_rel) || max_rel > r.max_rel ? max_rel : r.max_rel;
  r.tol = tol;
  if (!pass && r.pass) {
    r.pass = false;
    r.note = std::move(note);
  } else if (r.note.empty() && pass) {
    r.note = std::move(note);
  }
}

void Checks::close(std::string_view check, const double* got, const double* want, std::size_t n,
                   double rtol, double scale_floor) {
  double err = 0.0, scale = scale_floor;
  std::size_t worst = 0;
  bool nan = false;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = std::fabs(got[i] - want[i]);
    if (std::isnan(e)) nan = true;
    if (e > err) err = e, worst = i;
    scale = std::max(scale, std::fabs(want[i]));
  }
  const double rel = scale > 0.0 ? err / scale : err;
  const bool pass = !nan && rel <= rtol;
  std::string note;
  if (!pass)
    note = nan ? std::string("NaN in compared values")
               : fmt::format("worst at [{}]: got {:.17g}, want {:.17g}", worst, got[worst],
                             want[worst]);
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  add(check, n, nan ? qnan : err, nan ? qnan : rel, rtol, pass, std::move(note));
}

void Checks::bitwise(std::string_view check, const float* got, const float* want, std::size_t n) {
  std::size_t mismatches = 0, first = n;
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t a, b;
    std::memcpy(&a, &got[i], sizeof a);
    std::memcpy(&b, &want[i], sizeof b);
    if (a != b) {
      if (first == n) first = i;
      ++mismatches;
      err = std::max(err, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    }
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  std::string note;
  if (mismatches)
    note = fmt::format("{} of {} values differ in their bits; first at [{}]: {:a} vs {:a}",
                       mismatches, n, first, got[first], want[first]);
  CheckResult& r = row(check);
  add(check, n, err, scale > 0 ? err / scale : err, 0.0, mismatches == 0, std::move(note));
  r.exact = true;
  r.bitwise = true;
}

void Checks::expect(std::string_view check, std::uint64_t cases, std::uint64_t failures,
                    std::string note) {
  CheckResult& r = row(check);
  add(check, cases, 0.0, 0.0, 0.0, failures == 0,
      failures ? fmt::format("{} of {} instances fail: {}", failures, cases, note) : std::string());
  r.exact = true;
}

}  // namespace lockstep::ad
