#include "driver/driver.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "config/yaml_reader.hpp"
#include "decomposition/reductions.hpp"
#include "io/atomic_file.hpp"
#include "io/catalyst_adaptor.hpp"
#include "io/checkpoint.hpp"
#include "runtime/json.hpp"
#include "runtime/schedule.hpp"
#include "runtime/stop_signals.hpp"
#include "version.hpp"
#include "workload.hpp"
#include "workload_registry.hpp"

namespace apron {
namespace {

std::string duration_text(double seconds) {
  char buf[64];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 120)
    std::snprintf(buf, sizeof buf, "%.0f s", seconds);
  else if (seconds < 7200)
    std::snprintf(buf, sizeof buf, "%.1f min", seconds / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1f h", seconds / 3600);
  return buf;
}

class Progress {
 public:
  Progress(const Workload& w, double every) : w_(w), every_(every), start_(wall_seconds()) {
    last_ = start_;
    t0_ = w.time();
    steps_at_last_ = w.step();
  }
  void maybe_print(bool force = false) {
    const double now = wall_seconds();
    if (!force && now - last_ < every_) return;
    const double elapsed = now - start_;
    const double rate = (w_.step() - steps_at_last_) * static_cast<double>(w_.global_items()) /
                        std::max(now - last_, 1e-9);
    const double fraction = (w_.time() - t0_) / std::max(w_.end_time() - t0_, 1e-300);
    const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : -1;
    const std::string item = w_.item_name();
    const std::string items = item.ends_with("ex") ? item.substr(0, item.size() - 2) + "ices"
                                                   : item + "s";  // vertex: vertices
    Log::info("step %7ld  t = %.5g s (%5.1f%%)  dt = %.3g s  %zu %s  %.3g %s-steps/s  ETA %s",
              w_.step(), w_.time(), 100 * w_.time() / w_.end_time(), w_.last_dt(),
              w_.global_items(), items.c_str(), rate, item.c_str(), duration_text(eta).c_str());
    last_ = now;
    steps_at_last_ = w_.step();
  }

 private:
  const Workload& w_;
  double every_, start_, last_, t0_;
  long steps_at_last_ = 0;
};

struct PhaseRow {
  std::string name;
  double max, mean;
};

// Phase times over ranks: the slowest rank's time decides the run's wall time.
std::vector<PhaseRow> gather_phases(const PhaseTimers& timers, const RankInfo& ranks) {
  std::vector<PhaseRow> rows;
  for (const auto& name : timers.order()) {
    const double mine = timers.seconds(name);
    rows.push_back({name, global_max(ranks.comm, mine), global_sum(ranks.comm, mine) / ranks.size});
  }
  return rows;
}

void print_summary(const std::vector<PhaseRow>& rows, double total, long steps, const Workload& w) {
  const double items = static_cast<double>(w.global_items());
  Log::info("\nphase                 max s    mean s   share");
  for (const auto& r : rows)
    Log::info("%-18s %9.3f %9.3f %6.1f%%", r.name.c_str(), r.max, r.mean, 100 * r.max / total);
  Log::info("%-18s %9.3f", "total (wall)", total);
  Log::info("%ld steps, %.4g %s-steps/s", steps, steps * items / total, w.item_name().c_str());
}

std::string device_names(const DeviceInfo& device, const RankInfo& ranks) {
  const std::string mine = device.name + " #" + std::to_string(device.index);
  std::vector<char> buf(128, 0);
  std::copy_n(mine.begin(), std::min<std::size_t>(mine.size(), 127), buf.begin());
  std::vector<char> all(128 * ranks.size);
  MPI_Gather(buf.data(), 128, MPI_CHAR, all.data(), 128, MPI_CHAR, 0, ranks.comm);
  std::string out;
  for (int r = 0; r < ranks.size; ++r) out += (r ? "; " : "") + std::string(&all[128 * r]);
  return out;
}

// In-situ visualisation (config.catalyst): Catalyst runs every `every` steps, at the first step
// and at the last. The adaptor lives as long as the run and is gone, its ParaView runtime
// finalized, before MPI_Finalize.
class InSitu {
 public:
  InSitu(const config::CaseConfig& c, const RankInfo& ranks, PhaseTimers& timers)
      : every_(c.catalyst.every), timers_(timers) {
    if (!c.catalyst.enabled) return;
    if (!io::CatalystAdaptor::available())
      throw config::ConfigError(
          c.file +
          ": key 'catalyst': this apron was built without ParaView Catalyst; remove the "
          "'catalyst' section, or rebuild with it (Debian: scripts/install-deps.sh, then "
          "cmake --preset omp-catalyst)");
    auto t = timers_.scope("catalyst setup");
    adaptor_ = std::make_unique<io::CatalystAdaptor>(
        ranks.comm,
        io::CatalystSettings{c.catalyst.scripts, c.catalyst.fail_on_error, c.output.dir});
    Log::info("catalyst: %s, every %ld step(s)",
              c.catalyst.scripts.empty()
                  ? "built-in writer (catalyst/*.pvtp)"
                  : (std::to_string(c.catalyst.scripts.size()) + " script(s)").c_str(),
              every_);
  }

  // Collective.
  void maybe_execute(Workload& w, bool final) {
    if (!adaptor_ || w.step() == last_step_ || (!final && w.step() % every_ != 0)) return;
    const double start = wall_seconds();
    {
      auto t = timers_.scope("catalyst");
      const auto blocks = w.visual_blocks();
      adaptor_->execute(w.step(), w.time(), blocks);
    }
    if (calls_++ == 0) first_call_seconds_ = wall_seconds() - start;
    last_step_ = w.step();
  }

  // The first call also imports the scripts' Python modules (paraview.simple and all): the
  // report keeps it apart so the steady cost per call can be told from it.
  void report(Json& j) const {
    if (!adaptor_) return;
    j.begin_object("catalyst");
    j.value("calls", static_cast<long long>(calls_));
    j.value("first_call_seconds", first_call_seconds_);
    j.value("script_errors", static_cast<long long>(adaptor_->errors()));
    j.end_object();
  }

 private:
  long every_;
  PhaseTimers& timers_;
  std::unique_ptr<io::CatalystAdaptor> adaptor_;
  long last_step_ = -1;
  long calls_ = 0;
  double first_call_seconds_ = 0;
};

// When checkpoints are due (config.checkpoint), and the stop decision every rank takes together.
class CheckpointPolicy {
 public:
  CheckpointPolicy(const config::CaseConfig& c, const RankInfo& ranks, const Workload& w,
                   double max_wall_seconds)
      : c_(c.checkpoint), ranks_(ranks), max_wall_(max_wall_seconds), start_(wall_seconds()) {
    last_step_ = w.step();
    by_time_ = TimeSchedule(c_.every_time, w.time());
    last_wall_ = start_;
  }

  // Collective: every rank learns whether any rank got a stop signal or the wall-time limit is
  // near (rank 0's clock decides), whether a wall-clock checkpoint is due, and whether any
  // rank is still writing a checkpoint in the background.
  void poll(double step_seconds, bool writing) {
    slowest_step_ = std::max(slowest_step_, step_seconds);
    const double now = wall_seconds();
    const double margin = 2 * slowest_step_ + 1.5 * checkpoint_seconds_ + 1;
    int flags[4] = {stop_signal(), 0, 0, writing};
    if (ranks_.rank == 0) {
      flags[1] = max_wall_ > 0 && now - start_ + margin >= max_wall_;
      flags[2] = c_.every_wall_minutes > 0 && now - last_wall_ >= 60 * c_.every_wall_minutes;
    }
    MPI_Allreduce(MPI_IN_PLACE, flags, 4, MPI_INT, MPI_MAX, ranks_.comm);
    signal_ = flags[0];
    wall_limit_ = flags[1];
    wall_due_ = flags[2];
    writing_ = flags[3];
  }
  bool all_written() const { return !writing_; }
  bool stop() const { return signal_ != 0 || wall_limit_; }
  std::string stop_reason() const {
    if (signal_) return "signal " + std::to_string(signal_);
    return "the wall-time limit (--max-wall-time " + std::to_string(max_wall_) + " s)";
  }
  bool due(const Workload& w) const {
    return wall_due_ || (c_.every_steps > 0 && w.step() - last_step_ >= c_.every_steps) ||
           by_time_.due(w.time());
  }
  void started(const Workload& w) {
    last_step_ = w.step();
    last_wall_ = wall_seconds();
    by_time_.passed(w.time());
  }
  // What a checkpoint took from start to disk: the stop before the wall-time limit leaves room.
  void took(double seconds) { checkpoint_seconds_ = std::max(checkpoint_seconds_, seconds); }

 private:
  const config::CheckpointConfig& c_;
  RankInfo ranks_;
  double max_wall_, start_;
  long last_step_ = 0;
  TimeSchedule by_time_;  // checkpoint.every_time
  double last_wall_ = 0;
  double slowest_step_ = 0, checkpoint_seconds_ = 0;
  int signal_ = 0;
  bool wall_limit_ = false, wall_due_ = false, writing_ = false;
};

// Writes the checkpoints. Starting one (copy to host staging, checksums, file layout) takes the
// step loop's time; its rows then go to disk on a thread while the run goes on, and it is
// finished (renamed into place) once every rank's write is done. At most one is in flight: a
// new one first waits for the previous.
class CheckpointWrites {
 public:
  CheckpointWrites(const config::CaseConfig& c, const RankInfo& ranks, PhaseTimers& timers)
      : keep_(c.checkpoint.keep), ranks_(ranks), timers_(timers) {}

  void start(const Workload& w, CheckpointPolicy& policy) {
    finish();
    auto t = timers_.scope("checkpoint");
    const double begin = wall_seconds();
    output_dir_ = w.output_dir();
    in_flight_.emplace(w.save(io::checkpoint_path(output_dir_, w.step())));
    start_seconds_ = wall_seconds() - begin;
    policy.started(w);
    policy_ = &policy;
  }
  bool writing_locally() const { return in_flight_ && !in_flight_->written_locally(); }

  // Collective: waits for the checkpoint in flight, if any, and puts it in place.
  void finish() {
    if (!in_flight_) return;
    auto t = timers_.scope("checkpoint wait");
    const io::CheckpointWritten done = in_flight_->finish();
    in_flight_.reset();
    if (ranks_.rank == 0) prune();
    policy_->took(start_seconds_ + done.write_seconds);
    ++count_;
    bytes_ += done.bytes;
    write_seconds_ += done.write_seconds;
    Log::info(
        "checkpoint: %s (%.3g GB; %.2f s on the step loop, %.2f s in the background, %.2f GB/s)",
        done.path.string().c_str(), done.bytes / 1e9, start_seconds_, done.write_seconds,
        done.bytes / 1e9 / std::max(done.write_seconds, 1e-9));
  }

  ~CheckpointWrites() {
    if (pruning_.joinable()) pruning_.join();
  }

  void report(Json& j) const {
    j.begin_object("checkpoints");
    j.value("count", static_cast<long long>(count_));
    j.value("bytes", static_cast<std::size_t>(bytes_));
    j.value("write_seconds", write_seconds_);  // background writes, slowest rank, summed
    j.end_object();
  }

 private:
  // Deleting old checkpoints (unlinking large files takes tens of ms) on a thread of rank 0. It
  // keeps the newest `keep` it finds, so a checkpoint renamed into place meanwhile is safe.
  void prune() {
    if (pruning_.joinable()) pruning_.join();
    pruning_ = std::thread([dir = output_dir_, keep = keep_] { io::prune_checkpoints(dir, keep); });
  }

  int keep_;
  RankInfo ranks_;
  PhaseTimers& timers_;
  CheckpointPolicy* policy_ = nullptr;
  std::string output_dir_;
  std::optional<io::PendingCheckpoint> in_flight_;
  std::thread pruning_;
  double start_seconds_ = 0, write_seconds_ = 0;
  long count_ = 0;
  std::uint64_t bytes_ = 0;
};

// The step loop's wall time, and the same without its first steps, which also pay one-time costs
// (arrays growing to their working size, first uses of libraries): a long run's rate.
struct LoopTiming {
  static constexpr long kWarmUpSteps = 10;
  double start = wall_seconds(), warm = 0, end = 0;
  long steps = 0;

  void step_done() {
    if (++steps == kWarmUpSteps) warm = wall_seconds();
  }
  void finish() { end = wall_seconds(); }
  double seconds() const { return end - start; }
  bool has_steady() const { return steps >= 2 * kWarmUpSteps; }
  long steady_steps() const { return steps - kWarmUpSteps; }
  double steady_seconds() const { return end - warm; }
};

// Collective: every rank builds the report (the workload's part reduces over ranks); rank 0
// writes it.
void write_report(const config::CaseConfig& c, const Workload& w, const RankInfo& ranks,
                  const DeviceInfo& device, const std::vector<PhaseRow>& phases, double total,
                  const LoopTiming& loop, const CheckpointWrites& checkpoints,
                  const InSitu& in_situ) {
  const long steps = loop.steps;
  const std::string devices = device_names(device, ranks);
  const double items = static_cast<double>(w.global_items());
  Json j;
  j.begin_object();
  j.value("apron_version", kVersion);
  j.value("backend", device.backend);
  j.value("case", c.name);
  j.value("case_file", c.file);
  j.value("workload", c.workload);
  j.value("ranks", ranks.size);
  j.value("devices", devices);
  j.value("steps", static_cast<long long>(steps));
  j.value("simulated_time", w.time());
  j.value("item", w.item_name());  // what `items` counts: particle, sample, voxel...
  j.value("items", w.global_items());
  j.value("wall_seconds", total);
  j.value("seconds_per_step", steps ? total / steps : 0.0);
  j.value("item_steps_per_second", steps * items / total);
  j.value("loop_seconds", loop.seconds());  // the step loop alone: no setup, no final output
  j.value("loop_item_steps_per_second", steps * items / loop.seconds());
  if (loop.has_steady())
    j.value("steady_item_steps_per_second", loop.steady_steps() * items / loop.steady_seconds());
  j.begin_object("phases");
  for (const auto& p : phases) {
    j.begin_object(p.name);
    j.value("max_seconds", p.max);
    j.value("mean_seconds", p.mean);
    j.end_object();
  }
  j.end_object();
  w.report(j);
  if (w.checkpointable()) checkpoints.report(j);
  in_situ.report(j);
  j.value("config", c.text);
  j.end_object();
  if (ranks.rank == 0) io::write_file_atomically(w.output_dir() + "/run_report.json", j.str());
}

// The checkpoint to continue from, decided by rank 0 (all ranks see the same answer).
std::optional<std::filesystem::path> restart_file(const config::CaseConfig& c,
                                                  const RankInfo& ranks,
                                                  const std::string& restart) {
  if (restart.empty()) return std::nullopt;
  std::string path;
  if (ranks.rank == 0) {
    if (restart == "latest" || restart == "auto") {
      if (const auto latest = io::latest_checkpoint(c.output.dir)) path = latest->string();
    } else {
      path = restart;
    }
  }
  unsigned long length = path.size();
  MPI_Bcast(&length, 1, MPI_UNSIGNED_LONG, 0, ranks.comm);
  path.resize(length);
  MPI_Bcast(path.data(), static_cast<int>(length), MPI_CHAR, 0, ranks.comm);
  if (!path.empty()) return path;
  if (restart == "latest")
    throw config::ConfigError("--restart latest: no checkpoint in " +
                              io::checkpoint_dir(c.output.dir).string() +
                              " (run without --restart, or with --restart auto, to start anew)");
  Log::info("--restart auto: no checkpoint in %s; starting from the beginning",
            io::checkpoint_dir(c.output.dir).string().c_str());
  return std::nullopt;
}

// Collective. A checkpoint that cannot be used is bad input: every rank reports the same error
// and nothing of the earlier run has been touched yet.
void continue_from(const std::filesystem::path& file, const config::CaseConfig& c, Workload& w,
                   const RankInfo& ranks) {
  try {
    // A damaged file can crash libhdf5 itself: rank 0 reads its metadata in a child process
    // first, and every rank refuses the file together when that fails.
    io::on_root(ranks.comm, [&] { io::inspect_isolated(file, false, /*crashes_only=*/true); });
    const io::CheckpointReader checkpoint(ranks.comm, file, c.workload);
    config::check_restart_compatible(c, file.string(), checkpoint.header().config_text);
    w.load(checkpoint);
  } catch (const config::ConfigError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw config::ConfigError(std::string(e.what()) + "\n(cannot restart from " + file.string() +
                              "; no output of the earlier run was changed)");
  }
  Log::info("restarted from %s: step %ld, t = %.6g s, on %d rank(s)", file.string().c_str(),
            w.step(), w.time(), ranks.size);
}

// decomposition.dims is a process grid for one rank count: on another it cannot be honoured.
void check_process_grid(const config::CaseConfig& c, const RankInfo& ranks) {
  const auto& d = c.decomposition.dims;
  const long grid = static_cast<long>(d[0]) * d[1] * d[2];
  if (grid == 0 || grid == ranks.size) return;
  throw config::ConfigError(c.file + ": key 'decomposition.dims': [" + std::to_string(d[0]) + ", " +
                            std::to_string(d[1]) + ", " + std::to_string(d[2]) + "] is a grid of " +
                            std::to_string(grid) + " ranks, but the run has " +
                            std::to_string(ranks.size) + "; run on " + std::to_string(grid) +
                            " ranks, or set it to [0, 0, 0] (chosen for the rank count)");
}

}  // namespace

int run_case(const config::CaseConfig& config, const RankInfo& ranks, const DeviceInfo& device,
             const RunOptions& options) {
  PhaseTimers timers;
  const double start = wall_seconds();
  install_stop_signals();
  check_process_grid(config, ranks);
  auto workload = workload_spec(config.workload).make({config, ranks, device, timers});
  // Collective: when rank 0 cannot make the folder, every rank fails with its message.
  io::on_root(ranks.comm, [&] {
    io::make_output_directory(workload->output_dir());
    // A checkpoint of an earlier run that never finished (killed, disk full) is only a .tmp.
    if (const int stale = io::remove_stale_checkpoints(workload->output_dir()))
      Log::info("removed %d unfinished checkpoint file(s) (.tmp, MPI-IO .lock) of an earlier run",
                stale);
  });
  if (!options.restart.empty() && !workload->checkpointable())
    throw config::ConfigError("--restart: the " + config.workload +
                              " workload is a one-shot analysis without checkpoints; run it "
                              "without --restart");
  InSitu in_situ(config, ranks, timers);
  const auto from = restart_file(config, ranks, options.restart);
  if (from) {
    auto t = timers.scope("restart");
    continue_from(*from, config, *workload, ranks);
  } else {
    auto t = timers.scope("setup");
    workload->setup();
  }
  if (!from) {
    workload->write_outputs(false);
    in_situ.maybe_execute(*workload, false);
  }
  Progress progress(*workload, config.output.progress_every);
  CheckpointPolicy checkpoints(config, ranks, *workload, options.max_wall_seconds);
  CheckpointWrites writes(config, ranks, timers);
  LoopTiming loop;
  bool stopped = false;
  while (!workload->done()) {
    const double step_start = wall_seconds();
    try {
      workload->advance();
    } catch (const StepFailure&) {
      if (workload->checkpointable()) {
        writes.start(*workload, checkpoints);
        writes.finish();
        Log::info(
            "step %ld failed: a last checkpoint holds the state before it (continue with "
            "--restart latest after changing the case)",
            workload->step());
      }
      throw;
    }
    loop.step_done();
    if (!workload->done()) workload->write_outputs(false);
    if (!workload->done()) in_situ.maybe_execute(*workload, false);
    checkpoints.poll(wall_seconds() - step_start, writes.writing_locally());
    if (checkpoints.all_written()) writes.finish();
    if (checkpoints.stop() && !workload->done()) {
      stopped = true;
      Log::info("step %ld: stopping on %s", workload->step(), checkpoints.stop_reason().c_str());
      break;
    }
    if (!workload->done() && workload->checkpointable() && checkpoints.due(*workload))
      writes.start(*workload, checkpoints);
    progress.maybe_print();
  }
  loop.finish();
  // A stop's checkpoint comes first: after SIGTERM, Open MPI's mpirun kills the ranks
  // odls_base_sigkill_timeout (1 s) later, and the checkpoint is what the next run needs.
  if (workload->checkpointable() && stopped) {
    writes.start(*workload, checkpoints);
    writes.finish();
  }
  workload->write_outputs(true);
  in_situ.maybe_execute(*workload, true);
  progress.maybe_print(true);
  if (workload->checkpointable() && !stopped && config.checkpoint.at_end)
    writes.start(*workload, checkpoints);
  writes.finish();

  const double total = wall_seconds() - start;
  const auto phases = gather_phases(timers, ranks);
  print_summary(phases, total, loop.steps, *workload);
  const double items = static_cast<double>(workload->global_items());
  if (loop.has_steady())
    Log::info("step loop: %.3f s, %.4g %s-steps/s (%.4g after the first %ld steps)", loop.seconds(),
              loop.steps * items / loop.seconds(), workload->item_name().c_str(),
              loop.steady_steps() * items / loop.steady_seconds(), LoopTiming::kWarmUpSteps);
  else
    Log::info("step loop: %.3f s, %.4g %s-steps/s", loop.seconds(),
              loop.steps * items / loop.seconds(), workload->item_name().c_str());
  write_report(config, *workload, ranks, device, phases, total, loop, writes, in_situ);
  Log::info("output: %s (%s)", workload->output_dir().c_str(), workload->output_hint().c_str());
  if (stopped)
    Log::info(
        "stopped early at step %ld with a checkpoint; continue with: apron run %s "
        "--restart latest",
        workload->step(), config.file.c_str());
  return stopped ? kExitStoppedEarly : 0;
}

}  // namespace apron
