#include "engine/diagnostic_columns.hpp"

#include <cstdio>
#include <stdexcept>

#include "runtime/json.hpp"

namespace apron {

DiagnosticColumns::DiagnosticColumns(std::vector<DiagnosticColumn> columns)
    : columns_(std::move(columns)) {}

std::string DiagnosticColumns::header() const {
  std::string text;
  for (const auto& c : columns_) {
    if (!text.empty()) text += ',';
    text += c.name;
  }
  return text;
}

std::string DiagnosticColumns::row(std::span<const double> values) const {
  if (values.size() != columns_.size())
    throw std::logic_error("a diagnostics row has " + std::to_string(values.size()) +
                           " values for " + std::to_string(columns_.size()) + " columns");
  std::string text;
  char value[64];
  for (std::size_t k = 0; k < values.size(); ++k) {
    if (columns_[k].digits == 0)
      std::snprintf(value, sizeof value, "%lld", static_cast<long long>(values[k]));
    else
      std::snprintf(value, sizeof value, "%.*g", columns_[k].digits, values[k]);
    if (k) text += ',';
    text += value;
  }
  return text;
}

void DiagnosticColumns::write(Json& json, std::span<const double> values) const {
  for (std::size_t k = 0; k < columns_.size() && k < values.size(); ++k) {
    if (columns_[k].digits == 0)
      json.value(columns_[k].name, static_cast<long long>(values[k]));
    else
      json.value(columns_[k].name, values[k]);
  }
}

}  // namespace apron
