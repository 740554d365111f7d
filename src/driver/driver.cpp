#include "driver/driver.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "io/atomic_file.hpp"
#include "meshdist/meshdist_workload.hpp"
#include "runtime/json.hpp"
#include "sph/sph_solver.hpp"
#include "version.hpp"

namespace apron {
namespace {

std::unique_ptr<Workload> make_workload(const config::CaseConfig& c, const RankInfo& ranks,
                                        const DeviceInfo& device, PhaseTimers& timers) {
  if (c.workload == "sph") return std::make_unique<sph::SphSolver>(c, ranks, device, timers);
  if (c.workload == "meshdist")
    return std::make_unique<meshdist::MeshDistance>(c, ranks, device, timers);
  throw std::logic_error("no workload '" + c.workload + "'");
}

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
  }
  void maybe_print(bool force = false) {
    const double now = wall_seconds();
    if (!force && now - last_ < every_) return;
    const double elapsed = now - start_;
    const double rate = (w_.step() - steps_at_last_) * static_cast<double>(w_.global_items()) /
                        std::max(now - last_, 1e-9);
    const double fraction = (w_.time() - t0_) / std::max(w_.end_time() - t0_, 1e-300);
    const double eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : -1;
    Log::info(
        "step %7ld  t = %.5g s (%5.1f%%)  dt = %.3g s  %zu particles  %.3g particle-steps/s"
        "  ETA %s",
        w_.step(), w_.time(), 100 * w_.time() / w_.end_time(), w_.last_dt(), w_.global_items(),
        rate, duration_text(eta).c_str());
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
    double mine = timers.seconds(name), max = 0, sum = 0;
    MPI_Allreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, ranks.comm);
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, ranks.comm);
    rows.push_back({name, max, sum / ranks.size});
  }
  return rows;
}

void print_summary(const std::vector<PhaseRow>& rows, double total, long steps, std::size_t items) {
  Log::info("\nphase                 max s    mean s   share");
  for (const auto& r : rows)
    Log::info("%-18s %9.3f %9.3f %6.1f%%", r.name.c_str(), r.max, r.mean, 100 * r.max / total);
  Log::info("%-18s %9.3f", "total (wall)", total);
  Log::info("%ld steps, %.4g particle-steps/s", steps, steps * static_cast<double>(items) / total);
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

// Collective: every rank builds the report (the workload's part reduces over ranks); rank 0
// writes it.
void write_report(const config::CaseConfig& c, const Workload& w, const RankInfo& ranks,
                  const DeviceInfo& device, const std::vector<PhaseRow>& phases, double total,
                  double loop_seconds, long steps) {
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
  j.value("items", w.global_items());
  j.value("wall_seconds", total);
  j.value("seconds_per_step", steps ? total / steps : 0.0);
  j.value("particle_steps_per_second", steps * items / total);
  j.value("loop_seconds", loop_seconds);  // the step loop alone: no setup, no final output
  j.value("loop_particle_steps_per_second", steps * items / loop_seconds);
  j.begin_object("phases");
  for (const auto& p : phases) {
    j.begin_object(p.name);
    j.value("max_seconds", p.max);
    j.value("mean_seconds", p.mean);
    j.end_object();
  }
  j.end_object();
  w.report(j);
  j.value("config", c.text);
  j.end_object();
  if (ranks.rank == 0) io::write_file_atomically(w.output_dir() + "/run_report.json", j.str());
}

}  // namespace

int run_case(const config::CaseConfig& config, const RankInfo& ranks, const DeviceInfo& device) {
  PhaseTimers timers;
  const double start = wall_seconds();
  auto workload = make_workload(config, ranks, device, timers);
  {
    auto t = timers.scope("setup");
    workload->setup();
  }
  workload->write_outputs(false);
  Progress progress(*workload, config.output.progress_every);
  const double loop_start = wall_seconds();
  while (!workload->done()) {
    workload->advance();
    if (!workload->done()) workload->write_outputs(false);
    progress.maybe_print();
  }
  const double loop_seconds = wall_seconds() - loop_start;
  workload->write_outputs(true);
  progress.maybe_print(true);

  const double total = wall_seconds() - start;
  const auto phases = gather_phases(timers, ranks);
  print_summary(phases, total, workload->step(), workload->global_items());
  Log::info("step loop: %.3f s, %.4g particle-steps/s", loop_seconds,
            workload->step() * static_cast<double>(workload->global_items()) / loop_seconds);
  write_report(config, *workload, ranks, device, phases, total, loop_seconds, workload->step());
  Log::info("output: %s (particles.xmf opens in ParaView; diagnostics.csv; run_report.json)",
            workload->output_dir().c_str());
  return 0;
}

}  // namespace apron
