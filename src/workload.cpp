#include "workload.hpp"

#include "config/case_config.hpp"
#include "decomposition/reductions.hpp"
#include "version.hpp"

namespace apron {

io::CheckpointHeader checkpoint_header(const std::string& workload,
                                       const config::CaseConfig& config, long step, double time,
                                       double dt, int ranks, const std::string& backend) {
  io::CheckpointHeader h;
  h.workload = workload;
  h.case_name = config.name;
  h.config_text = config.effective_text;
  h.step = step;
  h.time = time;
  h.dt = dt;
  h.ranks = ranks;
  h.build = std::string(kVersion) + " " + kGitRevision + " " + backend;
  return h;
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
