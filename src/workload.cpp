#include "workload.hpp"

#include "config/case_config.hpp"
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

}  // namespace apron
