#include "engine/stepping_workload.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "config/yaml_reader.hpp"
#include "decomposition/reductions.hpp"
#include "io/hdf5_file.hpp"
#include "runtime/json.hpp"
#include "version.hpp"

namespace apron {

SteppingWorkload::SteppingWorkload(const WorkloadContext& context, SteppingDeclaration declaration)
    : Workload(context.config, std::move(declaration.description)),
      ranks_(context.ranks),
      device_(context.device),
      timers_(context.timers),
      outputs_(config_.output.every, 0, true),
      tables_(std::move(declaration.tables)),
      partitioned_(declaration.partitioned),
      state_name_(std::move(declaration.state_name)),
      unstable_hint_(std::move(declaration.unstable_hint)),
      series_names_(std::move(declaration.series)) {
  std::vector<DiagnosticColumn> columns = {{"step", 0}, {"time", 9}, {"dt", 6}};
  columns.insert(columns.end(), declaration.columns.begin(), declaration.columns.end());
  columns_ = DiagnosticColumns(std::move(columns));
}

void SteppingWorkload::setup() {
  start();
  refuse_unreachable_end();
  open_outputs(std::nullopt);
}

// More steps than any run takes (a million steps a second for twelve days): a dt that small is a
// mistake in the case (a unit, a stray exponent), refused before the first step.
void SteppingWorkload::refuse_unreachable_end() const {
  constexpr double kMostSteps = 1e12;
  const StepLimit limit = largest_step();
  const double steps = (config_.time.end - clock_.time) / limit.dt;
  const long cap = config_.time.max_steps;
  if (!(steps > kMostSteps) || (cap > 0 && cap - clock_.step <= kMostSteps)) return;
  char text[256];
  std::snprintf(text, sizeof text,
                " limits every step to %.3g s: time.end = %.6g s is %.3g steps away, more than "
                "any run can take (%.0e); ",
                limit.dt, config_.time.end, steps, kMostSteps);
  throw config::ConfigError(config_.file + ": " + limit.cause + text + limit.fix);
}

void SteppingWorkload::require_finite(bool finite, long step) const {
  if (global_min(ranks_.comm, finite ? 1.0 : 0.0) > 0) return;
  fail_not_finite(step);
}

void SteppingWorkload::require_recorded_finite() const {
  const long bad = first_unfinite_step();
  const double none = std::numeric_limits<double>::infinity();
  const double first = global_min(ranks_.comm, bad > 0 ? static_cast<double>(bad) : none);
  if (first < none) fail_not_finite(static_cast<long>(first));
}

void SteppingWorkload::fail_not_finite(long step) const {
  throw io::AgreedError("the run became unstable at step " + std::to_string(step) + ": the " +
                            state_name_ + " are no longer finite numbers; " + unstable_hint_,
                        true);
}

// Every row, the first and the last included: energies overflow before positions do (a sheet of
// 1e154 m has finite positions and an infinite potential energy). Collective: the lowest bad
// column over the ranks, so that every rank fails alike.
void SteppingWorkload::require_finite_row(std::span<const double> row) const {
  std::size_t bad = row.size();
  for (std::size_t c = 0; c < row.size() && bad == row.size(); ++c)
    if (!std::isfinite(row[c])) bad = c;
  bad = static_cast<std::size_t>(global_min(ranks_.comm, static_cast<double>(bad)));
  if (bad == row.size()) return;
  const std::string column = "its diagnostic '" + columns_.columns()[bad].name + "'";
  if (clock_.step == 0)  // nothing has moved yet: the case's scale is beyond the arithmetic
    throw io::AgreedError("the run cannot start: " + column +
                              " is not a finite number at step 0 (are the case's sizes, masses "
                              "or speeds beyond what float64 sums can hold?)",
                          true);
  throw io::AgreedError("the run became unstable at step " + std::to_string(clock_.step) + ": " +
                            column + " is not a finite number; " + unstable_hint_,
                        true);
}

void SteppingWorkload::advance() {
  clock_.dt = take_step();
  clock_.time += clock_.dt;
  ++clock_.step;
  if (clock_.step % kFiniteCheckEvery == 0) require_recorded_finite();
}

// The series and the diagnostics table; on restart each continues the earlier run's (the
// driver made the folder: a restart may write to a new output.dir).
void SteppingWorkload::open_outputs(std::optional<long> resume_step) {
  series_.clear();
  for (const std::string& name : series_names_) {
    series_.push_back(std::make_unique<io::SeriesWriter>(ranks_.comm, config_.output.dir, name));
    if (resume_step) series_.back()->resume(*resume_step, clock_.time);
  }
  if (ranks_.rank == 0) {
    table_.emplace(config_.output.dir + "/diagnostics.csv", columns_.header());
    table_->open(resume_step);
  }
}

void SteppingWorkload::write_outputs(bool final) {
  const bool diagnostics_due = final || clock_.step % config_.output.diagnostics_every == 0;
  const bool series_due = outputs_.enabled() && (final || outputs_.due(clock_.time));
  if (diagnostics_due || series_due) require_recorded_finite();
  if (diagnostics_due) {
    auto t = timers_.scope("diagnostics");
    last_row_ = {static_cast<double>(clock_.step), clock_.time, clock_.dt};
    const std::vector<double> values = diagnostics_row();
    last_row_.insert(last_row_.end(), values.begin(), values.end());
    require_finite_row(last_row_);
    if (table_) table_->append(columns_.row(last_row_));
  }
  if (series_due) {
    auto t = timers_.scope("output");
    write_series();
    outputs_.passed(clock_.time);
  }
  if (final && table_) table_->close();
}

void SteppingWorkload::report(Json& json) const {
  json.begin_object(config_.workload);
  report_fields(json);
  if (!last_row_.empty()) {
    json.begin_object("final_diagnostics");
    columns_.write(json, last_row_);
    json.end_object();
  }
  json.end_object();
}

io::PendingCheckpoint SteppingWorkload::save(const std::filesystem::path& file) const {
  require_recorded_finite();
  SavedState state(tables_);
  save_state(state);
  state.scalar("next_output_time", outputs_.next());
  io::CheckpointHeader h;
  h.workload = config_.workload;
  h.case_name = config_.name;
  h.config_text = config_.effective_text;
  h.step = clock_.step;
  h.time = clock_.time;
  h.dt = clock_.dt;
  h.ranks = ranks_.size;
  h.build = std::string(kVersion) + " " + kGitRevision + " " + device_.backend;
  return io::save_checkpoint(ranks_.comm, file, state.finish(std::move(h)));
}

void SteppingWorkload::load(const io::CheckpointReader& checkpoint) {
  std::optional<LoadedState> state;
  {
    auto t = timers_.scope("checkpoint read");
    state.emplace(checkpoint, tables_, config_.domain);
    if (partitioned_) state->read_partition(config_.domain);
  }
  const io::CheckpointHeader& h = checkpoint.header();
  outputs_ = TimeSchedule::resumed(config_.output.every, state->scalar("next_output_time"));
  clock_ = {h.step, h.time, h.dt};
  restore(*state);
  refuse_unreachable_end();
  open_outputs(clock_.step);
}

Partition SteppingWorkload::continuing_partition(
    const LoadedState& state, std::span<const Vec4> points,
    const std::function<Partition(const Partition&)>& adjust) const {
  if (state.same_ranks()) return state.saved_partition();
  const auto& d = config_.decomposition;
  const Partition cut = d.method == "rcb" && ranks_.size > 1
                            ? Partition::rcb(config_.domain, ranks_.comm, points)
                            : Partition::cartesian(config_.domain, ranks_.size, d.dims);
  return adjust ? adjust(cut) : cut;
}

}  // namespace apron
