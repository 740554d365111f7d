#include "workload.hpp"

#include <cmath>
#include <stdexcept>

#include "config/case_config.hpp"
#include "decomposition/reductions.hpp"
#include "io/checkpoint.hpp"

namespace apron {

Workload::Workload(const config::CaseConfig& config, WorkloadDescription description)
    : config_(config), description_(std::move(description)) {}

Workload::~Workload() = default;

const std::string& Workload::output_dir() const {
  return config_.output.dir;
}

io::PendingCheckpoint Workload::save(const std::filesystem::path&) const {
  throw std::logic_error("this workload writes no checkpoints");
}

void Workload::load(const io::CheckpointReader&) {
  throw std::logic_error("this workload reads no checkpoints");
}

double imbalance_to_fix(const config::CaseConfig& config, MPI_Comm comm, int ranks, long step,
                        std::size_t owned) {
  const auto& d = config.decomposition;
  if (ranks == 1 || d.method != "rcb" || step % d.rebalance_check_every != 0) return 0;
  const double mine = static_cast<double>(owned);
  const double most = global_max(comm, mine);
  const double mean = global_sum(comm, mine) / ranks;
  return mean > 0 && most / mean > d.rebalance_threshold ? most / mean : 0;
}

}  // namespace apron
