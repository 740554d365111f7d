// A run's diagnostics table (CSV, one row per diagnostics step), written by rank 0 as the run goes:
// under its .tmp name while the run lasts (a killed run leaves the rows it had), renamed into place
// at the end. A restart from a checkpoint at step S continues it from the rows up to S, of the
// finished table or of the .tmp one a killed run left. Workload-neutral: rows are text whose first
// column is the step.
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace apron::io {

class DiagnosticsTable {
 public:
  // `header`: the column names, comma-separated, without the newline.
  DiagnosticsTable(std::filesystem::path path, std::string header);
  // A table never closed belongs to a run that failed: a new run's rows, up to the failure, are
  // put in place (they show how it failed); a restart's are dropped, so that the earlier run's
  // table stays as it was. Either way no .tmp is left.
  ~DiagnosticsTable();
  DiagnosticsTable(const DiagnosticsTable&) = delete;
  DiagnosticsTable& operator=(const DiagnosticsTable&) = delete;

  // Starts the table (a new run), or continues it from the rows up to resume_step. Throws
  // std::runtime_error naming the file when it cannot be written.
  void open(std::optional<long> resume_step);
  void append(const std::string& row);  // one line, without the newline; flushed
  void close();                         // renames the finished table into place
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::string header_;
  std::ofstream out_;
  bool resumed_ = false;
};

}  // namespace apron::io
