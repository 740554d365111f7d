#include "io/diagnostics_table.hpp"

#include <charconv>
#include <stdexcept>

#include "io/atomic_file.hpp"

namespace apron::io {
namespace {

// The step in a row's first column, if it has one.
std::optional<long> row_step(const std::string& line) {
  long step = 0;
  const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), step);
  if (error != std::errc() || end == line.data()) return std::nullopt;
  return step;
}

}  // namespace

DiagnosticsTable::DiagnosticsTable(std::filesystem::path path, std::string header)
    : path_(std::move(path)), header_(std::move(header)) {}

DiagnosticsTable::~DiagnosticsTable() {
  if (!out_.is_open()) return;
  out_.close();
  std::error_code ignored;
  if (resumed_)
    std::filesystem::remove(temporary_name(path_), ignored);
  else
    std::filesystem::rename(temporary_name(path_), path_, ignored);
}

void DiagnosticsTable::open(std::optional<long> resume_step) {
  resumed_ = resume_step.has_value();
  const std::filesystem::path partial = temporary_name(path_);
  std::string kept = header_ + "\n";
  if (resume_step) {
    // A .tmp table exists only while a run goes on or after one was killed: it is the newer.
    std::ifstream in(std::filesystem::exists(partial) ? partial : path_);
    std::string line;
    for (bool header = true; std::getline(in, line); header = false) {
      if (header) continue;
      const auto step = row_step(line);
      if (step && *step <= *resume_step) kept += line + "\n";
    }
  }
  out_.open(partial, std::ios::trunc);
  if (!out_)
    throw std::runtime_error(partial.string() + ": cannot open for writing (check output.dir)");
  out_ << kept;
  out_.flush();
}

void DiagnosticsTable::append(const std::string& row) {
  out_ << row << '\n';
  out_.flush();
}

void DiagnosticsTable::close() {
  if (!out_.is_open()) return;
  out_.close();
  std::filesystem::rename(temporary_name(path_), path_);
}

}  // namespace apron::io
