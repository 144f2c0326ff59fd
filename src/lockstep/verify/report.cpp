#include "lockstep/verify/report.hpp"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>

namespace lockstep::verify {

bool Table::passed() const {
  return std::all_of(rows.begin(), rows.end(), [](const Row& r) { return r.pass; });
}

void Table::add(std::vector<std::string> cells, bool pass, std::string note) {
  rows.push_back(Row{std::move(cells), pass, std::move(note)});
}

void Table::print(std::ostream& os) const {
  std::vector<std::size_t> width(columns.size(), 0);
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const Row& r : rows)
    for (std::size_t c = 0; c < r.cells.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], r.cells[c].size());

  auto line = [&](const std::vector<std::string>& cells, const std::string& status) {
    std::string s;
    for (std::size_t c = 0; c < width.size(); ++c) {
      const std::string& v = c < cells.size() ? cells[c] : std::string();
      // First column left-aligned (a name), the rest right-aligned (numbers).
      s += c == 0 ? fmt::format("{:<{}}", v, width[c]) : fmt::format("  {:>{}}", v, width[c]);
    }
    if (!status.empty()) s += "  " + status;
    return s;
  };

  os << "== " << title << " ==\n";
  os << line(columns, "result") << "\n";
  for (const Row& r : rows) {
    os << line(r.cells, r.pass ? "PASS" : "FAIL") << "\n";
    if (!r.pass && !r.note.empty()) os << "    " << r.note << "\n";
  }
}

std::string fmt_count(std::uint64_t n) { return fmt::format("{}", n); }

std::string fmt_sci(double x) { return fmt::format("{:.3g}", x); }

}  // namespace lockstep::verify
