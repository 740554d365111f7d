#include "workload.hpp"

#include <cmath>
#include <stdexcept>

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

std::vector<double> partition_rows(const Partition& partition) {
  std::vector<double> rows;
  for (const Box& b : partition.subdomains())
    rows.insert(rows.end(), {b.lo[0], b.lo[1], b.lo[2], b.hi[0], b.hi[1], b.hi[2]});
  return rows;
}

Partition saved_partition(const io::CheckpointReader& checkpoint, const Box& domain) {
  const std::string where = checkpoint.path().string();
  const auto ranks = checkpoint.replicated_rows("partition");
  if (ranks != static_cast<std::uint64_t>(checkpoint.header().ranks))
    throw std::runtime_error(where + ": the partition has " + std::to_string(ranks) +
                             " subdomains for " + std::to_string(checkpoint.header().ranks) +
                             " ranks");
  std::vector<double> rows(6 * ranks);
  checkpoint.read_all("partition", io::Dtype::f64, rows.data());  // refuses non-finite values
  std::vector<Box> subdomains(ranks);
  for (std::size_t r = 0; r < ranks; ++r)
    for (int d = 0; d < 3; ++d)
      subdomains[r].lo[d] = rows[6 * r + d], subdomains[r].hi[d] = rows[6 * r + 3 + d];
  return Partition(domain, subdomains);
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
