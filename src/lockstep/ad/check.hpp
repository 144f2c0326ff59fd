// Check results: what every verification of an op reports (gradient checks,
// float-vs-double agreement, algebraic identities), one row per (op, check),
// aggregated over the cases and trials that ran it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/tensor/tensor.hpp"

namespace lockstep::ad {

struct CheckResult {
  std::string op;
  std::string check;
  std::uint64_t cases = 0;  // compared values (gradient entries, rows, elements)
  double max_abs = 0.0;     // largest absolute error seen
  double max_rel = 0.0;     // largest error relative to the compared quantity's scale
  double tol = 0.0;         // the relative tolerance (0 with exact == true)
  bool exact = false;       // no tolerance: a bit-for-bit comparison or a counted property
  bool bitwise = false;     // exact, comparing bit patterns (shown as "bits", else "exact")
  bool pass = true;
  std::string note;  // why it failed (the first failure), or a remark
};

// Collects the checks of one op, merging repeated rows of the same check (one
// per case/trial) into one: counts add up, errors take the maximum, a single
// failure fails the row and its note is kept.
class Checks {
 public:
  explicit Checks(std::string op) : op_(std::move(op)) {}

  const std::string& op() const { return op_; }

  // A measured error against a tolerance.
  void add(std::string_view check, std::uint64_t cases, double max_abs, double max_rel, double tol,
           bool pass, std::string note = {});

  // got ≈ want: error = max|got - want| relative to max(max|want|, scale_floor)
  // (the scale of the compared quantity; an all-zero `want` with no floor
  // compares absolutely).
  void close(std::string_view check, const double* got, const double* want, std::size_t n,
             double rtol, double scale_floor = 0.0);
  void close(std::string_view check, const std::vector<double>& got,
             const std::vector<double>& want, double rtol, double scale_floor = 0.0) {
    close(check, got.data(), want.data(), got.size() < want.size() ? got.size() : want.size(),
          rtol, scale_floor);
    if (got.size() != want.size()) add(check, 0, 0, 0, rtol, false, "size mismatch");
  }
  template <class A, class B>
  void close(std::string_view check, const Tensor<A>& got, const Tensor<B>& want, double rtol,
             double scale_floor = 0.0) {
    close(check, std::vector<double>(got.data.begin(), got.data.end()),
          std::vector<double>(want.data.begin(), want.data.end()), rtol, scale_floor);
  }

  // Bit-for-bit equality of float arrays (the canonical arithmetic's claims).
  void bitwise(std::string_view check, const float* got, const float* want, std::size_t n);
  void bitwise(std::string_view check, const Tensor<float>& got, const Tensor<float>& want) {
    if (got.shape != want.shape) {
      add(check, 0, 0, 0, 0, false, "shape mismatch");
      return;
    }
    bitwise(check, got.ptr(), want.ptr(), got.numel());
  }

  // A property counted over `cases` instances, `failures` of which broke it.
  void expect(std::string_view check, std::uint64_t cases, std::uint64_t failures,
              std::string note = {});

  const std::vector<CheckResult>& results() const { return rows_; }

 private:
  CheckResult& row(std::string_view check);
  std::string op_;
  std::vector<CheckResult> rows_;
};

}  // namespace lockstep::ad
