// The diagnostics table's columns, described once: the CSV header, every row's text and the run
// report's final values all come from the same list, so they cannot drift apart.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace apron {

class Json;

struct DiagnosticColumn {
  std::string name;
  int digits = 0;  // significant digits; 0: an integer (a count, a step)
};

class DiagnosticColumns {
 public:
  DiagnosticColumns() = default;
  explicit DiagnosticColumns(std::vector<DiagnosticColumn> columns);

  std::size_t size() const { return columns_.size(); }
  const std::vector<DiagnosticColumn>& columns() const { return columns_; }
  std::string header() const;  // the names, comma-separated
  // One row's text: each value printed as its column says. Counts travel as doubles, which hold
  // them exactly up to 2^53.
  std::string row(std::span<const double> values) const;
  // The values as one JSON member per column.
  void write(Json& json, std::span<const double> values) const;

 private:
  std::vector<DiagnosticColumn> columns_;
};

}  // namespace apron
