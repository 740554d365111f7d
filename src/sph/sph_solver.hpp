// The SPH workload: owns the particles of this rank's subdomain, advances them one step at a time
// and exchanges migrating particles and the ghost halo with neighbouring ranks.
#pragma once

#include <memory>
#include <optional>

#include "decomposition/particle_exchange.hpp"
#include "engine/stepping_workload.hpp"
#include "kernels/common/cell_list.hpp"
#include "kernels/sph/sph_kernels.hpp"
#include "sph/mesh_geometry.hpp"
#include "sph/sph_config.hpp"

namespace apron::sph {

// Global diagnostics at one instant (sums in float64 over all ranks).
struct Diagnostics {
  long step = 0;
  double time = 0;
  std::int64_t particles = 0;
  double mass = 0;
  double kinetic = 0;
  double potential = 0;
  double max_speed = 0;
  double surge_front = 0;  // foremost particle's front edge, from the tank's left wall [m]
  std::int64_t outside_tank = 0;
};

class SphSolver final : public SteppingWorkload {
 public:
  explicit SphSolver(const WorkloadContext& context);

  std::size_t global_items() const override { return static_cast<std::size_t>(global_fluid_); }
  // One "particles" channel: position, velocity, density, pressure, kind, id and rank.
  std::vector<io::VisualBlock> visual_blocks() override;

  Diagnostics diagnostics() const;  // collective
  const Params& params() const { return params_; }
  const config::CaseConfig& config() const { return config_; }

  // Host copies of this rank's owned particles (tests and output).
  struct Snapshot {
    std::vector<Vec4> pos, vel;
    std::vector<float> rho, pressure;
    std::vector<std::int64_t> id;
  };
  Snapshot snapshot() const;
  std::size_t owned_count() const { return store_.size(); }
  std::size_t boundary_count() const { return wall_pos_.size(); }
  // Device memory this rank holds, by what holds it.
  struct DeviceBytes {
    std::size_t particles, walls, cell_lists, neighbour_record, exchange, scratch;
    std::size_t total() const {
      return particles + walls + cell_lists + neighbour_record + exchange + scratch;
    }
  };
  DeviceBytes device_bytes() const;

 private:
  void start() override;
  double take_step() override;
  std::vector<double> diagnostics_row() override;
  std::vector<double> gauge_heights() const;
  void write_series() override;
  void save_state(SavedState& state) const override;
  void restore(const LoadedState& state) override;
  void report_fields(Json& json) const override;
  StepLimit largest_step() const override;

  static double expected_candidates(const SphConfig& sph);
  void check_memory() const;
  void adopt_particles(const Partition& partition, const std::vector<Vec4>& pos,
                       const std::vector<Vec4>& vel, const std::vector<std::int64_t>& id);
  void log_summary() const;
  HostParticles fluid_particles(const Box& filter) const;
  void rebuild_boundary();
  void collect_moving_solids();
  // Moves the moving solids to the clock's time and rebuilds the wall cell list from this rank's
  // resting walls and the moving ones near it.
  void place_walls();
  void sum_moving_wall_forces();
  void maybe_rebalance();
  void build_neighbour_tables();
  FluidArrays fluid_arrays();
  BoundaryArrays wall_arrays() const;
  bool wall_pressure_from_fluid() const {
    return case_.boundary.ghost_particles && case_.boundary.wall_pressure_from_fluid;
  }
  // Ghosts within one support serve the fluid's sums. A wall particle's averaged pressure sums
  // the fluid within a support of it, and the walls the owned fluid meets lie up to a support
  // past the rank's box: those averages need the fluid two supports out.
  double halo_width() const {
    return (wall_pressure_from_fluid() ? 2 : 1) * params_.kernel.support();
  }
  double choose_dt();
  double viscous_step_limit() const;
  // Host copies of the owned particles in output layout (position and velocity as 3 floats),
  // shared by the HDF5 series and Catalyst, filled at most once per step.
  struct HostStaging {
    long step = -1;  // the step they hold; -1: none
    std::vector<Vec4> pos4, vel4;
    std::vector<float> position, velocity, density, pressure;
    std::vector<std::int64_t> id;
    std::vector<std::uint8_t> kind;
    std::vector<std::int32_t> rank;
    std::vector<io::HostField> fields() const;
  };
  const HostStaging& staged_particles();
  PinnedBuffer& checkpoint_staging() const;

  const SphCase& case_;  // config_'s own SPH sections
  Params params_;
  Box container_;             // the tank interior (or the domain when there is no tank)
  std::optional<Box> walls_;  // faces no particle crosses (the tank's, open at an open top)
  std::unique_ptr<MeshGeometry> meshes_;          // tank, solids or fluid given as meshes, if any
  std::vector<const PrescribedMotion*> motions_;  // of moving solid k (boxes, then meshes)
  DeviceVector<Vec4> moving_rest_;                // their boundary particles at rest, w = k + 1
  DeviceVector<Vec4> moving_placed_;              // the same at the clock's time
  WallVelocities wall_velocities_{};              // theirs at the clock's time
  // This rank's boundary particles, unsorted: the resting ones first, then the moving ones near
  // it at the clock's time.
  DeviceVector<Vec4> unsorted_walls_;
  std::size_t resting_walls_ = 0;
  std::vector<double> wall_forces_;  // on moving solid k: [3k, 3k + 3), the last step's [N]

  ParticleStore store_;
  DeviceVector<Vec4>& pos_;
  DeviceVector<Vec4>& vel_;
  DeviceVector<Vec4>& acc_;
  DeviceVector<float>& rho_;
  DeviceVector<float>& pressure_;
  DeviceVector<std::int64_t>& id_;
  DeviceVector<std::uint8_t>& flags_;
  // What a ghost needs from its owner (its flags are set on arrival), what the force pass reads
  // of ghosts, and what every step writes before it reads it (the cell sort need not carry it).
  const FieldRef ghost_fields_[2], ghost_update_fields_[2], recomputed_fields_[3];

  DeviceVector<Vec4> wall_pos_;
  DeviceVector<float> wall_pressure_;
  CellList fluid_cells_, wall_cells_;
  // Which fluid candidates are neighbours: written by the density pass, read by the force pass.
  DeviceVector<std::uint32_t> neighbour_words_;
  DeviceVector<std::uint8_t> neighbour_overflow_;
  bool record_neighbours_;  // false where most records would overflow (coarse cells, large h)
  GridSpec grid_;
  Transport transport_;
  ParticleExchange exchange_;

  std::int64_t global_fluid_ = 0;
  long rebalances_ = 0;
  double min_dt_ = 0;
  double last_dt_ = 0;  // the step before this one's (continuity density advances by it)

  HostStaging staging_;
  // Host copy of the checkpointed rows, reused from one checkpoint to the next.
  mutable std::shared_ptr<PinnedBuffer> checkpoint_staging_;
};

// The workload's entry in the registry (src/workloads.cpp).
WorkloadSpec sph_spec();

}  // namespace apron::sph
