// The FLIP workload (Wu, Truong, Yuksel, Hoetzlein 2018, the GVDB sparse-volume FLIP) on any
// number of ranks: particles carry the fluid; each step builds the sparse bricks they need
// (incrementally), transfers velocities to the bricks' MAC grid by gather, projects them to
// be divergence-free with a matrix-free conjugate gradient, and carries the change back to the
// particles. Bricks are owned by the rank whose box (RCB, snapped to the brick grid) holds them,
// particles by the rank that owns their brick; brick aprons cross ranks through BrickHalo.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "decomposition/brick_halo.hpp"
#include "decomposition/particle_exchange.hpp"
#include "engine/stepping_workload.hpp"
#include "flip/flip_config.hpp"
#include "flip/pressure_multigrid.hpp"
#include "kernels/flip/flip_kernels.hpp"
#include "kernels/sparse/brick_pool.hpp"

namespace apron::flip {

// Global diagnostics at one instant (float64 sums over all ranks).
struct Diagnostics {
  long step = 0;
  double time = 0;
  std::int64_t particles = 0;
  double kinetic = 0;             // [J]
  std::int64_t fluid_voxels = 0;  // voxels holding a particle at the last projection
  double volume = 0;              // fluid_voxels dx^3 [m^3]
  std::int64_t bricks = 0;
  int cg_iterations = 0;   // of the last projection
  double cg_residual = 0;  // its max |div u| dt
  double max_speed = 0;
  double surge_front = 0;  // foremost particle along x, from the domain's x = lo face [m]
};

// What the last pressure projection did.
struct Projection {
  int iterations = 0;
  double residual = 0;  // max |div u| dt over fluid voxels, after
  double initial = 0;   // the same before
  std::int64_t fluid_voxels = 0;
};

class FlipSolver final : public SteppingWorkload {
 public:
  explicit FlipSolver(const WorkloadContext& context);

  std::size_t global_items() const override { return static_cast<std::size_t>(global_particles_); }
  std::vector<io::VisualBlock> visual_blocks() override;

  Diagnostics diagnostics() const;  // collective
  const BrickGrid& grid() const { return grid_; }
  const BrickPool& pool() const { return pool_; }
  const Projection& last_projection() const { return projection_; }
  // The bricks this rank's particles need now, found from scratch (sorted keys; collective): what
  // the incremental update must agree with.
  std::vector<std::uint32_t> needed_bricks();

  // Host copies (tests): this rank's particles, and the face velocities, markers and pressures
  // of its bricks' interiors by global voxel.
  struct Snapshot {
    std::vector<Vec4> pos, vel;
    std::vector<std::int64_t> id;
  };
  Snapshot snapshot() const;
  struct VoxelValues {
    std::array<int, 3> voxel;
    Vec4 velocity;
    std::int32_t marker;
    float pressure;    // [Pa]
    float divergence;  // [1/s], after the projection
  };
  std::vector<VoxelValues> voxel_values() const;

 private:
  void start() override;
  double take_step() override;
  std::vector<double> diagnostics_row() override;
  void write_series() override;  // the particles and the bricks
  void save_state(SavedState& state) const override;
  void restore(const LoadedState& state) override;
  void report_fields(Json& json) const override;
  StepLimit largest_step() const override;

  double choose_dt() const;  // collective
  void maybe_rebalance();    // collective
  void adopt(const Partition& partition, const std::vector<Vec4>& pos, const std::vector<Vec4>& vel,
             const std::vector<std::int64_t>& id);
  void set_partition(const Partition& partition);  // cut on brick planes (snapped)
  // RCB boxes cut on brick planes, so that a brick lies in one box.
  Partition snapped(const Partition& p) const;
  std::vector<std::uint8_t> brick_flags();  // collective
  void update_topology(bool rebuild);       // collective
  void replan();                            // collective
  void sort_particles();
  void particles_to_grid();
  void project();
  [[noreturn]] void throw_not_converged(int iterations, double residual) const;
  void particles_from_grid();
  void migrate();
  SlotGeometry geometry() const;
  Vec3 gravity() const;
  GridFields fields();
  template <class T>
  void fill(std::initializer_list<FieldRef> fields, const T& background);
  void log_summary() const;
  io::VisualBlock particle_block();  // "particles": position, velocity, id, rank
  io::VisualBlock brick_block();     // "bricks": velocity, pressure, marker per voxel
  std::vector<Vec4> staged(const DeviceVector<Vec4>& v) const;

  const FlipCase& case_;
  BrickGrid grid_;
  DeviceVector<int> solid_boxes_;  // 6 voxel indices per solid box
  SolidMask solid_mesh_;           // voxelised solid meshes (host), and on the device
  DeviceVector<std::uint8_t> solid_mask_;
  double particle_mass_ = 0;

  // Particles: owned only (no ghosts: aprons carry everything across brick and rank faces).
  ParticleStore particles_;
  DeviceVector<Vec4>& pos_;
  DeviceVector<Vec4>& vel_;
  DeviceVector<std::int64_t>& id_;
  DeviceVector<std::uint32_t> keys_, order_, keys_alt_, order_alt_;
  DeviceVector<std::uint32_t> voxel_first_, voxel_last_;  // each voxel's particles
  DeviceVector<int> destination_;
  Transport transport_;  // the particles' and the bricks' halos
  ParticleExchange exchange_;

  // Bricks: the pool (which brick is in which slot), the owner of every brick of the domain, the
  // apron plan, and the voxels of the local slots then the remote copies.
  BrickPool pool_;
  std::vector<int> owner_;  // per brick key
  DeviceVector<int> owner_device_;
  DeviceVector<std::int32_t> slot_of_;  // per brick key: local slot or -1
  DeviceVector<int> slot_origin_;       // per local slot: its first voxel
  BrickHalo halo_;
  // The voxels' fields, one row per stored voxel of every slot (BrickHalo's layout).
  ParticleStore voxels_;
  Field<Vec4> momentum_, weight_, velocity_, velocity_old_;
  Field<std::int32_t> marker_;
  Field<float> pressure_, rhs_, residual_, preconditioned_, direction_, product_;
  DeviceVector<std::int32_t> stencil_;
  std::unique_ptr<PressureMultigrid> multigrid_;  // preconditioner: mgpcg
  DeviceVector<std::uint8_t> flags_;
  long replans_ = 0;
  long rebalances_ = 0;

  std::int64_t global_particles_ = 0;
  double dt_ = 0;  // this step's
  Projection projection_;
  // Visual staging (host), for the series and Catalyst.
  std::vector<float> stage_pos_, stage_vel_;
  std::vector<std::int64_t> stage_id_;
  std::vector<std::int32_t> stage_rank_;
  std::vector<float> stage_cell_velocity_, stage_cell_pressure_;
  std::vector<std::int32_t> stage_cell_marker_;
};

WorkloadSpec flip_spec();

}  // namespace apron::flip
