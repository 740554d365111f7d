#include "sph/sph_solver.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "config/yaml_reader.hpp"
#include "decomposition/reductions.hpp"
#include "io/atomic_file.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/checksum.hpp"
#include "runtime/json.hpp"
#include "runtime/schedule.hpp"
#include "sph/case_setup.hpp"

namespace apron::sph {
namespace {

Params make_params(const SphCase& c) {
  const auto& s = c.sph;
  Params p;
  p.kernel = Wendland(static_cast<float>(s.smoothing_ratio * s.spacing));
  p.rest_density = static_cast<float>(s.rest_density);
  double c0 = s.sound_speed;
  if (c0 <= 0) {
    // c0 = 10 x the free-fall speed sqrt(2 g H) over the fluid's height: density varies ~1%.
    double top = -1e300, bottom = 1e300;
    for (const auto& b : c.fluid_blocks)
      top = std::max(top, b.hi[2]), bottom = std::min(bottom, b.lo[2]);
    if (c.boundary.has_tank) bottom = std::min(bottom, c.boundary.tank.lo[2]);
    const double g = std::sqrt(s.gravity[0] * s.gravity[0] + s.gravity[1] * s.gravity[1] +
                               s.gravity[2] * s.gravity[2]);
    c0 = 10 * std::sqrt(2 * std::max(g, 1e-12) * (top - bottom));
  }
  p.sound_speed = static_cast<float>(c0);
  p.tait_b = static_cast<float>(s.rest_density * c0 * c0 / 7);
  p.fluid_mass = static_cast<float>(lattice_mass(s.rest_density, s.spacing, s.smoothing_ratio));
  p.boundary_mass = p.fluid_mass;
  if (s.lattice_gradient_correction)
    p.gradient_correction =
        static_cast<float>(1 / lattice_compression_response(s.spacing, s.smoothing_ratio));
  p.continuity_density = s.continuity_density;
  p.density_diffusion = static_cast<float>(s.density_diffusion * p.kernel.h * c0);
  const double gradient_response =
      lattice_compression_response(s.spacing, s.smoothing_ratio) * p.gradient_correction;
  p.hydrostatic_density_slope = static_cast<float>(s.rest_density / (c0 * c0 * gradient_response));
  p.alpha = static_cast<float>(s.alpha);
  p.viscosity = static_cast<float>(s.viscosity);
  // A wall viscosity in physical units keeps the wall friction the same at every resolution
  // (Monaghan's term acts like nu = alpha h c0 / 10 in 3-D).
  p.wall_alpha = static_cast<float>(s.wall_viscosity > 0 ? 10 * s.wall_viscosity / (p.kernel.h * c0)
                                                         : s.wall_alpha);
  p.clamp_negative_pressure = s.clamp_negative_pressure;
  p.ghost_boundary = c.boundary.ghost_particles;
  p.repulsion = static_cast<float>(c0 * c0 / 40);  // Monaghan's D = 5 g H with c0^2 = 200 g H
  p.spacing = static_cast<float>(s.spacing);
  p.gravity = {static_cast<float>(s.gravity[0]), static_cast<float>(s.gravity[1]),
               static_cast<float>(s.gravity[2])};
  return p;
}

std::string gib(double bytes) {
  std::ostringstream s;
  s.precision(3);
  s << bytes / (1024.0 * 1024 * 1024) << " GiB";
  return s.str();
}

// Device bytes one fluid particle needs: its fields, the permutation scratch, the cell list, the
// neighbour record and the exchange's per-particle buffers (measured: 219-232; bench/NOTES.md).
constexpr double kBytesPerFluidParticle = 240;
constexpr double kBytesPerWallParticle = 40;

// The particle table; positions and velocities must be finite, not in the domain: a particle
// may have left it through an open top.
static_assert(kMaxMovingSolids == kMaxMovingWalls, "a force row per moving solid");

SteppingDeclaration sph_declaration(const SphCase& c) {
  SteppingDeclaration d;
  d.description = {
      "particle",
      "particles.xmf opens in ParaView; diagnostics.csv; checkpoints/; run_report.json"};
  d.columns = {{"particles", 0}, {"mass", 12},       {"kinetic", 12},    {"potential", 12},
               {"max_speed", 9}, {"surge_front", 9}, {"outside_tank", 0}};
  // The force the fluid exerts on each moving solid [N], in the order the case gives them.
  for (int k = 0; k < c.boundary.moving_solids(); ++k)
    for (const char* axis : {"x", "y", "z"})
      d.columns.push_back({"solid" + std::to_string(k) + "_force_" + axis, 9});
  // The free surface's height at each wave gauge [m] (the domain's floor where it is dry).
  for (std::size_t k = 0; k < c.gauges.size(); ++k)
    d.columns.push_back({"gauge" + std::to_string(k) + "_elevation", 9});
  d.series = {"particles"};
  d.tables = {{"particles",
               {{"position", io::Dtype::f32, 4, ValueCheck::finite},
                // With continuity density the fourth value is the particle's density.
                {"velocity", io::Dtype::f32, 4,
                 c.sph.continuity_density ? ValueCheck::positive_last : ValueCheck::finite},
                {"id", io::Dtype::i64, 1}},
               "fluid_particles"}};
  d.partitioned = true;
  d.state_name = "particle velocities or accelerations";
  d.unstable_hint = "reduce sph.cfl or sph.spacing, or raise sph.sound_speed";
  return d;
}

}  // namespace

SphSolver::SphSolver(const WorkloadContext& context)
    : SteppingWorkload(context, sph_declaration(sph_case(context.config))),
      case_(sph_case(config_)),
      params_(make_params(case_)),
      pos_(store_.add<Vec4>("position")),
      vel_(store_.add<Vec4>("velocity")),
      acc_(store_.add<Vec4>("acceleration")),
      rho_(store_.add<float>("density")),
      pressure_(store_.add<float>("pressure")),
      id_(store_.add<std::int64_t>("id")),
      flags_(store_.add<std::uint8_t>("flags")),
      ghost_fields_{store_.ref(pos_), store_.ref(vel_)},
      ghost_update_fields_{store_.ref(rho_), store_.ref(pressure_)},
      recomputed_fields_{store_.ref(acc_), store_.ref(rho_), store_.ref(pressure_)},
      record_neighbours_(expected_candidates(case_.sph) <= NeighbourRecord::kComfortableCandidates),
      transport_(context.ranks.comm),
      exchange_(transport_) {
  container_ = case_.boundary.has_tank ? case_.boundary.tank : config_.domain;
  // The tank's walls are impermeable. The boundary particles' pressure keeps the fluid off them;
  // a particle that a step still carries through a wall (a tank a few particles thin, a violent
  // impact) stops at its face. Without ghost particles the clamp is the only wall there is.
  if (case_.boundary.has_tank || !case_.boundary.ghost_particles) {
    walls_ = container_;
    if (case_.boundary.has_tank && !case_.boundary.tank_closed_top)
      walls_->hi[2] = std::numeric_limits<double>::infinity();
  }
  if (case_.boundary.has_meshes() || !case_.fluid_meshes.empty())
    meshes_ = std::make_unique<MeshGeometry>(case_);
  collect_moving_solids();
}

// The moving solids' boundary particles at rest, each marked with its solid's number (w), the
// same on every rank; place_walls() moves them.
void SphSolver::collect_moving_solids() {
  std::vector<Vec4> moving;
  auto add_moving = [&](const PrescribedMotion& motion, std::vector<Vec4> rest) {
    motions_.push_back(&motion);
    for (Vec4& p : rest) p.w = static_cast<float>(motions_.size());
    moving.insert(moving.end(), rest.begin(), rest.end());
  };
  const BoundaryConfig& b = case_.boundary;
  const Box everywhere = config_.domain.expanded(1e300);
  for (std::size_t k = 0; k < b.solids.size(); ++k)
    if (b.box_motions[k].moves()) {
      std::vector<Vec4> rest;
      append_box_solid(case_, b.solids[k], everywhere, rest);
      add_moving(b.box_motions[k], std::move(rest));
    }
  for (std::size_t k = 0; k < b.solid_meshes.size(); ++k)
    if (b.mesh_motions[k].moves())
      add_moving(b.mesh_motions[k], meshes_->moving_boundary_particles(k));
  to_device(moving, moving_rest_);
  wall_forces_.assign(3 * motions_.size(), 0.0);
}

HostParticles SphSolver::fluid_particles(const Box& filter) const {
  HostParticles out = meshes_ ? meshes_->fluid_particles(filter) : generate_fluid(case_, filter);
  if (params_.continuity_density) out.density.assign(out.pos.size(), params_.rest_density);
  if (case_.sph.hydrostatic_start) compress_hydrostatically(case_, params_, out);
  return out;
}

// Fluid candidates per particle in the interior: (2d + 1)^3 cells of edge 2h/d, at one particle
// per dx^3 (d cells per interaction radius, h = smoothing_ratio dx).
double SphSolver::expected_candidates(const SphConfig& sph) {
  const double d = sph.cell_divisions, cell = 2 * sph.smoothing_ratio / d;
  return std::pow((2 * d + 1) * cell, 3);
}

void SphSolver::check_memory() const {  // collective
  const double fluid = static_cast<double>(global_fluid_) / ranks_.size;
  const double wall = static_cast<double>(boundary_count_estimate(case_)) / ranks_.size;
  const double need = fluid * kBytesPerFluidParticle + wall * kBytesPerWallParticle;
  // The smallest free memory of any rank decides, so every rank takes the same decision.
  const double free_bytes = global_min(ranks_.comm, static_cast<double>(device_.free_bytes));
  if (need > 0.9 * static_cast<double>(free_bytes)) {
    std::ostringstream msg;
    msg << config_.file << ": " << global_fluid_
        << " fluid particles (sph.spacing = " << case_.sph.spacing << ") need about " << gib(need)
        << " per rank on " << ranks_.size << " rank(s), but " << device_.name << " has "
        << gib(free_bytes)
        << " available per rank; increase sph.spacing, shrink the fluid blocks or run on more "
           "ranks";
    throw config::ConfigError(msg.str());  // bad input: every rank reports it the same way
  }
}

void SphSolver::start() {
  global_fluid_ = fluid_count(case_);
  check_memory();

  // For RCB, balance the cut on the lattice points (each rank holds those of a cartesian
  // subdomain while cutting), then every rank generates only its own points: no rank ever holds
  // more than its share on the device.
  Partition partition =
      Partition::cartesian(config_.domain, ranks_.size, config_.decomposition.dims);
  if (config_.decomposition.method == "rcb" && ranks_.size > 1) {
    const HostParticles provisional = fluid_particles(partition.ownership_boxes()[ranks_.rank]);
    partition = Partition::rcb(config_.domain, ranks_.comm, provisional.pos);
  }
  const HostParticles mine = fluid_particles(partition.ownership_boxes()[ranks_.rank]);
  if (meshes_) {  // the lattice count was an upper bound: the meshes decide which points stay
    double count[1] = {static_cast<double>(mine.pos.size())};
    global_sum(ranks_.comm, count);
    global_fluid_ = static_cast<std::int64_t>(count[0]);
  }
  // At rest; with continuity density vel.w carries the density the start was compressed to.
  std::vector<Vec4> still(mine.pos.size(), Vec4{0, 0, 0, 0});
  if (params_.continuity_density)
    for (std::size_t i = 0; i < still.size(); ++i) still[i].w = mine.density[i];
  adopt_particles(partition, mine.pos, still, mine.id);
  // Page-locking host memory is slow (~0.2 s for 0.5 GB): done here, not in the step loop.
  if (config_.checkpoint.periodic()) checkpoint_staging();
  log_summary();
}

// Puts this rank's particles on the device under `partition` and builds what depends on it.
// Particles outside this rank's subdomain (after a restart on another rank count) migrate to
// their owners.
void SphSolver::adopt_particles(const Partition& partition, const std::vector<Vec4>& pos,
                                const std::vector<Vec4>& vel, const std::vector<std::int64_t>& id) {
  exchange_.set_partition(partition, halo_width());
  store_.resize(pos.size());
  apron::copy(pos.begin(), pos.end(), pos_.begin());
  apron::copy(vel.begin(), vel.end(), vel_.begin());
  apron::copy(id.begin(), id.end(), id_.begin());
  apron::fill(acc_.begin(), acc_.end(), Vec4{0, 0, 0, 0});
  apron::fill(flags_.begin(), flags_.end(), std::uint8_t{kFluid});
  exchange_.migrate(store_, pos_);
  rebuild_boundary();
}

void SphSolver::log_summary() const {
  Log::info(
      "sph: %lld fluid particles, %zu boundary particles on rank 0, h = %g m, c0 = %g m/s, "
      "m = %g kg, %d rank(s), %s decomposition",
      static_cast<long long>(global_fluid_), wall_pos_.size(), params_.kernel.h,
      params_.sound_speed, params_.fluid_mass, ranks_.size, config_.decomposition.method.c_str());
}

// ---- checkpoints -------------------------------------------------------------------------------
// A checkpoint holds the owned particles' positions, velocities and ids in each rank's order, the
// partition and every rank's particle count, and the counters of the run. Everything else
// (densities, pressures, accelerations, ghosts, walls, cell lists) is rebuilt by the next step, so
// continuing on the same rank count repeats the uninterrupted run bit for bit.

// Pinned host memory for this rank's checkpoint rows (position, velocity, id). The background
// write reads them after save() returns: a buffer that an unfinished write still holds is left
// to it.
PinnedBuffer& SphSolver::checkpoint_staging() const {
  if (!checkpoint_staging_ || checkpoint_staging_.use_count() > 1)
    checkpoint_staging_ = std::make_shared<PinnedBuffer>();
  checkpoint_staging_->reserve(store_.size() * (2 * sizeof(Vec4) + sizeof(std::int64_t)));
  return *checkpoint_staging_;
}

void SphSolver::save_state(SavedState& state) const {
  const std::size_t n = store_.size();
  Vec4 *pos, *vel;
  std::int64_t* id;
  {
    auto t = timers_.scope("checkpoint copy");
    pos = reinterpret_cast<Vec4*>(checkpoint_staging().data());
    vel = pos + n;
    id = reinterpret_cast<std::int64_t*>(vel + n);
    apron::copy(pos_.begin(), pos_.begin() + n, pos);
    apron::copy(vel_.begin(), vel_.begin() + n, vel);
    apron::copy(id_.begin(), id_.begin() + n, id);
  }
  // The checksums are computed on the device, from the rows the staging holds.
  state.rows("particles", n,
             {{pos, [this, n](std::uint64_t first) { return device_checksum(pos_, n, first); }},
              {vel, [this, n](std::uint64_t first) { return device_checksum(vel_, n, first); }},
              {id, [this, n](std::uint64_t first) { return device_checksum(id_, n, first); }}});
  state.partition(exchange_.partition());
  state.keep(checkpoint_staging_);
  state.scalar("min_dt", min_dt_);
  state.scalar("last_dt", last_dt_);
  state.scalar("rebalances", static_cast<double>(rebalances_));
  state.scalar("fluid_particles", static_cast<double>(global_fluid_));
  for (std::size_t i = 0; i < wall_forces_.size(); ++i)
    state.scalar("moving_wall_force_" + std::to_string(i), wall_forces_[i]);
}

// The same rank count takes its own rows under the saved partition (bitwise continuation);
// another rank count an even share, redistributed by position.
void SphSolver::restore(const LoadedState& state) {
  const auto pos = state.column<Vec4>("particles", "position");
  global_fluid_ = static_cast<std::int64_t>(state.total_rows("particles"));
  check_memory();
  min_dt_ = state.scalar("min_dt");
  if (params_.continuity_density) last_dt_ = state.scalar("last_dt");  // unused by summation
  rebalances_ = static_cast<long>(state.scalar("rebalances"));
  for (std::size_t i = 0; i < wall_forces_.size(); ++i)
    wall_forces_[i] = state.scalar("moving_wall_force_" + std::to_string(i));
  adopt_particles(continuing_partition(state, pos), pos,
                  state.column<Vec4>("particles", "velocity"),
                  state.column<std::int64_t>("particles", "id"));
  staging_.step = -1;
  if (config_.checkpoint.periodic()) checkpoint_staging();
  log_summary();
}

void SphSolver::rebuild_boundary() {
  const double support = params_.kernel.support();
  const Box& mine = exchange_.partition().subdomain(ranks_.rank);
  grid_ = GridSpec::covering(mine.expanded(halo_width()), support, case_.sph.cell_divisions);
  const Box near = exchange_.partition().ownership_boxes()[ranks_.rank].expanded(support);
  auto walls = generate_boundary(case_, near);
  if (meshes_)
    for (const Vec4& p : meshes_->boundary_particles())
      if (near.contains(p)) walls.push_back(p);
  to_device(walls, unsorted_walls_);
  resting_walls_ = walls.size();
  place_walls();
}

void SphSolver::place_walls() {
  DeviceVector<Vec4>& unsorted = unsorted_walls_;
  if (!motions_.empty()) {
    unsorted.resize(resting_walls_);  // the moving ones of the last step go
    WallPoses poses{};
    for (std::size_t k = 0; k < motions_.size(); ++k) {
      const RigidPose pose = motions_[k]->at(clock_.time);
      for (int i = 0; i < 9; ++i) poses.pose[k][i] = static_cast<float>(pose.rotation[i]);
      for (int d = 0; d < 3; ++d) {
        poses.pose[k][9 + d] = static_cast<float>(pose.pivot[d]);
        poses.pose[k][12 + d] = static_cast<float>(pose.translation[d]);
      }
      const RigidVelocity v = motions_[k]->velocity_at(clock_.time);
      const auto vec3 = [](const std::array<double, 3>& a) {
        return Vec3{static_cast<float>(a[0]), static_cast<float>(a[1]), static_cast<float>(a[2])};
      };
      wall_velocities_.linear[k] = vec3(v.linear);
      wall_velocities_.angular[k] = vec3(v.angular);
      wall_velocities_.centre[k] = vec3(v.centre);
      wall_velocities_.linear_acceleration[k] = vec3(v.linear_acceleration);
      wall_velocities_.angular_acceleration[k] = vec3(v.angular_acceleration);
    }
    place_moving_walls(moving_rest_, poses, moving_placed_);
    const double support = params_.kernel.support();
    append_inside(moving_placed_,
                  exchange_.partition().ownership_boxes()[ranks_.rank].expanded(support), unsorted);
    if (meshes_) meshes_->move_walls(clock_.time);
  }
  wall_cells_.build(grid_, unsorted, unsorted.size());
  wall_pos_.resize(unsorted.size());
  apron::gather(wall_cells_.order().begin(), wall_cells_.order().end(), unsorted.begin(),
                wall_pos_.begin());
}

void SphSolver::maybe_rebalance() {
  const double ratio =
      imbalance_to_fix(config_, ranks_.comm, ranks_.size, clock_.step, store_.size());
  if (ratio == 0) return;
  std::vector<Vec4> host(store_.size());
  apron::copy(pos_.begin(), pos_.end(), host.begin());
  exchange_.set_partition(Partition::rcb(config_.domain, ranks_.comm, host), halo_width());
  exchange_.migrate(store_, pos_);
  rebuild_boundary();
  ++rebalances_;
  Log::info("step %ld: re-balanced (max/mean particles was %.3f)", clock_.step, ratio);
}

FluidArrays SphSolver::fluid_arrays() {
  const NeighbourRecord record =
      record_neighbours_
          ? NeighbourRecord{raw(neighbour_words_), raw(neighbour_overflow_), store_.size()}
          : NeighbourRecord{};
  return {raw(pos_),   raw(vel_),     raw(rho_),           raw(pressure_), raw(acc_),
          raw(flags_), store_.size(), fluid_cells_.view(), record};
}

BoundaryArrays SphSolver::wall_arrays() const {
  // The walls' pressures are those of this step once compute_wall_pressure has run.
  const bool averaged = wall_pressure_from_fluid() && wall_pressure_.size() == wall_pos_.size();
  return {raw(wall_pos_), wall_pos_.size(), wall_cells_.view(), wall_velocities_,
          averaged ? raw(wall_pressure_) : nullptr};
}

void SphSolver::build_neighbour_tables() {
  fluid_cells_.build(grid_, pos_, store_.size());
  store_.permute(fluid_cells_.order(), recomputed_fields_);
  exchange_.follow_permutation(fluid_cells_.order());
  if (!record_neighbours_) return;
  resize_per_particle(neighbour_words_, NeighbourRecord::kWords * store_.size());
  resize_per_particle(neighbour_overflow_, store_.size());
}

double SphSolver::choose_dt() {
  const Extremes local = owned_extremes(vel_, acc_, flags_);
  // Floats: exact in double. A NaN would slip through the maximum over ranks: as infinity, the
  // one reduction also tells every rank that the state the previous step left is not finite.
  double extremes[2] = {local.max_speed, local.max_acceleration};
  for (double& e : extremes)
    if (std::isnan(e)) e = std::numeric_limits<double>::infinity();
  global_max(ranks_.comm, extremes);
  if (!std::isfinite(extremes[0]) || !std::isfinite(extremes[1])) fail_not_finite(clock_.step);
  const double h = params_.kernel.h;
  double dt = case_.sph.cfl * h / (params_.sound_speed + extremes[0]);
  if (extremes[1] > 0) dt = std::min(dt, case_.sph.force_factor * std::sqrt(h / extremes[1]));
  dt = std::min(dt, viscous_step_limit());
  if (min_dt_ == 0) min_dt_ = 1e-4 * dt;  // a blow-up shows as a collapsing time step
  if (dt < min_dt_)
    throw std::runtime_error("the time step collapsed to " + std::to_string(dt) + " s at step " +
                             std::to_string(clock_.step) + " (max speed " +
                             std::to_string(extremes[0]) +
                             " m/s): the flow is unstable; raise sph.sound_speed or lower sph.cfl");
  return std::min(dt, config_.time.end - clock_.time);
}

// The laminar term's diffusion is explicit: dt <= 0.125 h^2 / nu (Morris et al. 1997).
double SphSolver::viscous_step_limit() const {
  const double h = params_.kernel.h;
  return case_.sph.viscosity > 0 ? 0.125 * h * h / case_.sph.viscosity
                                 : std::numeric_limits<double>::infinity();
}

// The sound speed bounds every step: dt <= cfl h / c, and so may the viscosity.
StepLimit SphSolver::largest_step() const {
  const double h = params_.kernel.h, c = params_.sound_speed;
  char cause[160];
  if (viscous_step_limit() < case_.sph.cfl * h / c) {
    std::snprintf(cause, sizeof cause,
                  "keys 'sph.spacing' and 'sph.viscosity' (smoothing length %.3g m, %.3g m^2/s)", h,
                  case_.sph.viscosity);
    return {viscous_step_limit(), cause, "raise sph.spacing or lower sph.viscosity"};
  }
  std::snprintf(cause, sizeof cause,
                "keys 'sph.spacing' and 'sph.sound_speed' (smoothing length %.3g m, %.3g m/s)", h,
                c);
  return {case_.sph.cfl * h / c, cause, "raise sph.spacing or lower sph.sound_speed"};
}

double SphSolver::take_step() {
  if (clock_.step > 0) {
    auto t = timers_.scope("migrate");
    exchange_.migrate(store_, pos_);
    maybe_rebalance();
  }
  if (!motions_.empty()) {
    auto t = timers_.scope("moving walls");
    place_walls();
  }
  {
    auto t = timers_.scope("halo");
    const std::size_t first_ghost = exchange_.send_ghosts(store_, pos_, ghost_fields_);
    apron::fill(flags_.begin() + first_ghost, flags_.end(), std::uint8_t{kGhost});
  }
  {
    auto t = timers_.scope("neighbour search");
    build_neighbour_tables();
  }
  {
    auto t = timers_.scope("density");
    compute_density(params_, fluid_arrays(), wall_arrays(), static_cast<float>(last_dt_));
  }
  {
    auto t = timers_.scope("halo");
    exchange_.update_ghosts(store_, ghost_update_fields_);
  }
  {
    auto t = timers_.scope("forces");
    stage_pair_terms(pos_, vel_, rho_, pressure_, store_.size());
    if (wall_pressure_from_fluid())
      compute_wall_pressure(params_, fluid_arrays(), wall_arrays(), wall_pressure_);
    compute_acceleration(params_, fluid_arrays(), wall_arrays());
    if (!motions_.empty()) sum_moving_wall_forces();
  }
  double dt;
  {
    auto t = timers_.scope("time step");
    dt = choose_dt();
  }
  {
    auto t = timers_.scope("integrate");
    integrate(pos_, vel_, acc_, flags_, static_cast<float>(dt), params_.continuity_density,
              walls_ ? &*walls_ : nullptr);
    if (meshes_) meshes_->keep_off_walls(pos_, vel_, flags_);
    exchange_.drop_ghosts(store_);
  }
  last_dt_ = dt;
  return dt;
}

Diagnostics SphSolver::diagnostics() const {
  const Totals t = owned_totals(params_, pos_, vel_, flags_, walls_ ? *walls_ : container_);
  const std::size_t behind = meshes_ ? meshes_->particles_behind_walls(pos_, flags_) : 0;
  double sums[4] = {t.count, t.kinetic, t.potential, static_cast<double>(t.outside + behind)};
  double maxima[2] = {t.max_speed, t.front_x};
  global_sum(ranks_.comm, sums);
  global_max(ranks_.comm, maxima);
  Diagnostics d;
  d.step = clock_.step;
  d.time = clock_.time;
  d.particles = static_cast<std::int64_t>(sums[0]);
  d.mass = static_cast<double>(params_.fluid_mass) * d.particles;
  d.kinetic = sums[1];
  d.potential = sums[2];
  d.outside_tank = static_cast<std::int64_t>(sums[3]);
  d.max_speed = maxima[0];
  d.surge_front = maxima[1] + 0.5 * case_.sph.spacing - container_.lo[0];
  return d;
}

std::vector<double> SphSolver::diagnostics_row() {
  const Diagnostics d = diagnostics();
  std::vector<double> row = {static_cast<double>(d.particles),
                             d.mass,
                             d.kinetic,
                             d.potential,
                             d.max_speed,
                             d.surge_front,
                             static_cast<double>(d.outside_tank)};
  row.insert(row.end(), wall_forces_.begin(), wall_forces_.end());
  const std::vector<double> heights = gauge_heights();
  row.insert(row.end(), heights.begin(), heights.end());
  return row;
}

// Collective: the free surface over each gauge, the highest particle near it plus half a spacing.
std::vector<double> SphSolver::gauge_heights() const {
  const double spacing = case_.sph.spacing;
  std::vector<double> heights;
  for (const Gauge& g : case_.gauges)
    heights.push_back(highest_near(pos_, flags_, static_cast<float>(g.x), static_cast<float>(g.y),
                                   static_cast<float>(spacing)));
  global_max(ranks_.comm, std::span<double>(heights));
  for (double& h : heights) h = std::isfinite(h) ? h + 0.5 * spacing : config_.domain.lo[2];
  return heights;
}

// The force on each moving solid in this step's pressure field, summed over ranks (collective).
void SphSolver::sum_moving_wall_forces() {
  const WallForces local = moving_wall_forces(params_, fluid_arrays(), wall_arrays());
  for (std::size_t k = 0; k < motions_.size(); ++k)
    for (int d = 0; d < 3; ++d) wall_forces_[3 * k + d] = local.force[k][d];
  global_sum(ranks_.comm, std::span<double>(wall_forces_));
}

SphSolver::Snapshot SphSolver::snapshot() const {
  Snapshot s;
  const std::size_t n = store_.size();
  s.pos.resize(n), s.vel.resize(n), s.rho.resize(n), s.pressure.resize(n), s.id.resize(n);
  apron::copy(pos_.begin(), pos_.begin() + n, s.pos.begin());
  apron::copy(vel_.begin(), vel_.begin() + n, s.vel.begin());
  apron::copy(rho_.begin(), rho_.begin() + n, s.rho.begin());
  apron::copy(pressure_.begin(), pressure_.begin() + n, s.pressure.begin());
  apron::copy(id_.begin(), id_.begin() + n, s.id.begin());
  return s;
}

const SphSolver::HostStaging& SphSolver::staged_particles() {
  HostStaging& h = staging_;
  if (h.step == clock_.step) return h;
  const std::size_t n = store_.size();
  h.pos4.resize(n), h.vel4.resize(n), h.density.resize(n), h.pressure.resize(n), h.id.resize(n);
  apron::copy(pos_.begin(), pos_.begin() + n, h.pos4.begin());
  apron::copy(vel_.begin(), vel_.begin() + n, h.vel4.begin());
  apron::copy(rho_.begin(), rho_.begin() + n, h.density.begin());
  apron::copy(pressure_.begin(), pressure_.begin() + n, h.pressure.begin());
  apron::copy(id_.begin(), id_.begin() + n, h.id.begin());
  // Device records are 4 floats wide; outputs (and VTK points) want 3.
  h.position.resize(3 * n), h.velocity.resize(3 * n);
  for (std::size_t i = 0; i < n; ++i) {
    const Vec3 x = xyz(h.pos4[i]), v = xyz(h.vel4[i]);
    std::copy_n(&x.x, 3, &h.position[3 * i]);
    std::copy_n(&v.x, 3, &h.velocity[3 * i]);
  }
  h.kind.assign(n, kFluid);
  h.rank.assign(n, ranks_.rank);
  h.step = clock_.step;
  return h;
}

std::vector<io::HostField> SphSolver::HostStaging::fields() const {
  return {
      {"position", io::Dtype::f32, 3, position.data()},
      {"velocity", io::Dtype::f32, 3, velocity.data()},
      {"density", io::Dtype::f32, 1, density.data()},
      {"pressure", io::Dtype::f32, 1, pressure.data()},
      {"kind", io::Dtype::u8, 1, kind.data()},
      {"id", io::Dtype::i64, 1, id.data()},
  };
}

void SphSolver::write_series() {
  const HostStaging& h = staged_particles();
  const std::vector<io::HostField> fields = h.fields();
  series(0).write(clock_.step, clock_.time, io::PointSetPart{h.id.size(), fields});
}

std::vector<io::VisualBlock> SphSolver::visual_blocks() {
  const HostStaging& h = staged_particles();
  io::VisualBlock particles;
  particles.channel = "particles";
  particles.kind = io::VisualBlock::Kind::points;
  particles.points = h.id.size();
  particles.point_fields = h.fields();
  particles.point_fields.push_back({"rank", io::Dtype::i32, 1, h.rank.data()});
  return {particles};
}

SphSolver::DeviceBytes SphSolver::device_bytes() const {
  return {store_.device_bytes(),
          wall_pos_.capacity() * sizeof(Vec4),
          fluid_cells_.device_bytes() + wall_cells_.device_bytes(),
          neighbour_words_.capacity() * sizeof(std::uint32_t) + neighbour_overflow_.capacity(),
          exchange_.device_bytes(),
          scratch_allocator().bytes_cached()};
}

void SphSolver::report_fields(Json& json) const {
  json.value("fluid_particles", static_cast<long long>(global_fluid_));
  json.value("smoothing_length", static_cast<double>(params_.kernel.h));
  json.value("sound_speed", static_cast<double>(params_.sound_speed));
  json.value("particle_mass", static_cast<double>(params_.fluid_mass));
  json.value("rebalances", static_cast<long long>(rebalances_));
  // Everything a rank holds on the device, per owned fluid particle (wall particles, cell lists,
  // halo buffers and Thrust scratch included), on the rank where it is largest, and what holds it.
  const DeviceBytes bytes = device_bytes();
  const double owned = static_cast<double>(std::max<std::size_t>(store_.size(), 1));
  std::vector<double> parts = {static_cast<double>(bytes.particles) / owned,
                               static_cast<double>(bytes.walls) / owned,
                               static_cast<double>(bytes.cell_lists) / owned,
                               static_cast<double>(bytes.neighbour_record) / owned,
                               static_cast<double>(bytes.exchange) / owned,
                               static_cast<double>(bytes.scratch) / owned};
  struct {
    double value;
    int rank;
  } largest{store_.size() ? static_cast<double>(bytes.total()) / owned : -1, ranks_.rank};
  MPI_Allreduce(MPI_IN_PLACE, &largest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, ranks_.comm);
  MPI_Bcast(parts.data(), static_cast<int>(parts.size()), MPI_DOUBLE, largest.rank, ranks_.comm);
  json.value("device_bytes_per_particle", largest.value);
  json.begin_object("device_bytes_per_particle_by_use");
  const char* names[] = {"particles",        "walls",    "cell_lists",
                         "neighbour_record", "exchange", "scratch"};
  for (std::size_t k = 0; k < parts.size(); ++k) json.value(names[k], parts[k]);
  json.end_object();
  json.value("halo_transport", transport_.name());
  json.value("halo_bytes_sent", transport_.stats().bytes_sent);
  json.value("halo_seconds", transport_.stats().seconds);
}

WorkloadSpec sph_spec() {
  // Particles grow as spacing^-3: spacing * (r / r0)^(-1/3) keeps the particles per rank.
  return workload_spec_of<SphSolver>(
      "sph", "weakly-compressible SPH with ghost boundary particles (time-stepping)", sph_schema(),
      {"sph.spacing", -1.0 / 3.0});
}

}  // namespace apron::sph
