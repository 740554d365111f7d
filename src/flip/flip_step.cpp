// The FLIP step: topology, particle sort, P2G, the pressure projection, G2P, migration.
#include "flip/flip_solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "config/yaml_reader.hpp"
#include "decomposition/conjugate_gradient.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/checksum.hpp"
#include "kernels/common/element_hash.hpp"
#include "kernels/common/primitives.hpp"
#include "runtime/json.hpp"

namespace apron::flip {

// ---- the step ----------------------------------------------------------------------------------

double FlipSolver::take_step() {
  dt_ = choose_dt();
  maybe_rebalance();
  update_topology(false);
  sort_particles();
  particles_to_grid();
  project();
  particles_from_grid();
  migrate();
  return dt_;
}

// A new RCB cut (on brick planes) when the particles per rank drift apart: a collapsing column
// leaves the ranks of its top empty.
void FlipSolver::maybe_rebalance() {
  const double ratio =
      imbalance_to_fix(config_, ranks_.comm, ranks_.size, clock_.step, particles_.size());
  if (ratio == 0) return;
  auto t = timers_.scope("rebalance");
  const std::vector<Vec4> host = to_host(pos_, particles_.size());
  set_partition(snapped(Partition::rcb(config_.domain, ranks_.comm, host)));
  migrate();
  update_topology(true);
  ++rebalances_;
  Log::info("step %ld: re-balanced (max/mean particles was %.3f)", clock_.step, ratio);
}

double FlipSolver::choose_dt() const {
  const auto sums = particle_sums(pos_, vel_, particles_.size());
  // A NaN would slip through the maximum over ranks: as infinity, the one reduction also tells
  // every rank that the state the previous step left is not finite (before P2G indexes by it).
  const double local_max =
      std::isfinite(sums.speed2) ? sums.max_speed : std::numeric_limits<double>::infinity();
  const double v_max = global_max(ranks_.comm, local_max);
  if (!std::isfinite(v_max)) fail_not_finite(clock_.step);
  const auto& g = case_.flip.gravity;
  const double g_norm = std::sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
  const double dx = case_.flip.voxel_size;
  const double dt = case_.flip.cfl * dx / (v_max + std::sqrt(g_norm * dx) + 1e-30);
  return std::min(dt, case_.flip.max_dt);
}

// Gravity waves on one voxel bound the step even at rest, and flip.max_dt bounds it always.
StepLimit FlipSolver::largest_step() const {
  const auto& g = case_.flip.gravity;
  const double dx = case_.flip.voxel_size;
  const double g_norm = std::sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2]);
  const double wave = case_.flip.cfl * dx / (std::sqrt(g_norm * dx) + 1e-30);
  char cause[96];
  if (case_.flip.max_dt <= wave) {
    std::snprintf(cause, sizeof cause, "key 'flip.max_dt' (%.3g s)", case_.flip.max_dt);
    return {case_.flip.max_dt, cause, "raise it"};
  }
  std::snprintf(cause, sizeof cause, "key 'flip.voxel_size' (%.3g m)", dx);
  return {wave, cause, "raise it, or lower flip.gravity"};
}

// Which bricks any rank's particles need (flags per brick key, the same on every rank).
std::vector<std::uint8_t> FlipSolver::brick_flags() {
  flag_needed_bricks(grid_, pos_, particles_.size(), flags_);
  auto flags = to_host(flags_, flags_.size());
  if (ranks_.size > 1) global_or(ranks_.comm, flags);
  return flags;
}

std::vector<std::uint32_t> FlipSolver::needed_bricks() {
  const auto flags = brick_flags();
  std::vector<std::uint32_t> needed;
  for (std::uint32_t key = 0; key < flags.size(); ++key)
    if (flags[key] && owner_[key] == ranks_.rank) needed.push_back(key);
  return needed;
}

void FlipSolver::update_topology(bool rebuild) {
  bool changed = true;
  {
    auto t = timers_.scope("topology");
    const auto needed = needed_bricks();
    if (rebuild)
      pool_.assign(needed);
    else
      changed = pool_.update(needed).any();
    // Re-planning is collective: when any rank's bricks changed, every rank plans again.
    if (ranks_.size > 1) changed = global_max(ranks_.comm, changed ? 1.0 : 0.0) > 0;
  }
  if (changed) {
    // A build's first plan makes the NCCL links (~0.5 s once): kept apart from the per-step
    // re-plans so that their figure stays a per-step cost.
    auto t = timers_.scope(rebuild ? "topology build" : "topology replan");
    replan();
  }
}

// The apron plan and everything indexed by slot follow the pool's slots.
void FlipSolver::replan() {
  std::vector<BrickCoord> coords(pool_.size());
  std::vector<int> origins;
  origins.reserve(3 * pool_.size());
  for (std::size_t s = 0; s < pool_.size(); ++s) {
    int c[3];
    grid_.brick_coords(pool_.keys()[s], c);
    coords[s] = {c[0], c[1], c[2]};
    for (int d = 0; d < 3; ++d) origins.push_back(c[d] * grid_.b);
  }
  halo_.plan(coords, [&](const BrickCoord& b) {
    int c[3];
    for (int d = 0; d < 3; ++d) c[d] = std::clamp(b[d], 0, grid_.bricks[d] - 1);
    return owner_[(static_cast<std::size_t>(c[2]) * grid_.bricks[1] + c[1]) * grid_.bricks[0] +
                  c[0]];
  });
  // Grown only: the brick count moves a little every step, and each resize that regains rows
  // pays Thrust's fill and a synchronisation per field (BrickHalo allows spare rows).
  if (voxels_.size() < halo_.total_voxels()) voxels_.resize(halo_.total_voxels());
  const std::size_t interior = pool_.size() * grid_.interior_per_brick();
  if (stencil_.size() < interior) resize_per_particle(stencil_, interior);
  // Built at the first plan, after setup's memory check (or a restart's load).
  if (!multigrid_ && case_.flip.pressure.preconditioner == "mgpcg")
    multigrid_ = std::make_unique<PressureMultigrid>(transport_, grid_);
  if (multigrid_) multigrid_->plan(halo_);
  upload(slot_of_, pool_.slot_table());
  upload(slot_origin_, origins);
  ++replans_;
}

Vec3 FlipSolver::gravity() const {
  const auto& a = case_.flip.gravity;
  return {static_cast<float>(a[0]), static_cast<float>(a[1]), static_cast<float>(a[2])};
}

SlotGeometry FlipSolver::geometry() const {
  SolidVoxels solid{raw(solid_boxes_), static_cast<int>(solid_boxes_.size() / 6)};
  if (!solid_mask_.empty()) {
    solid.mask = raw(solid_mask_);
    for (int d = 0; d < 3; ++d)
      solid.mask_lo[d] = solid_mesh_.lo[d], solid.mask_dims[d] = solid_mesh_.dims[d];
  }
  return {grid_, raw(slot_origin_), solid, pool_.size()};
}

GridFields FlipSolver::fields() {
  return {raw(*momentum_), raw(*weight_), raw(*velocity_), raw(*velocity_old_),
          raw(*marker_),   raw(stencil_), raw(*pressure_), raw(*rhs_)};
}

template <class T>
void FlipSolver::fill(std::initializer_list<FieldRef> fields, const T& background) {
  halo_.fill(voxels_, std::span<const FieldRef>(fields.begin(), fields.size()), background);
}

// Particles sorted by voxel within their brick's slot; each voxel's range of particles.
void FlipSolver::sort_particles() {
  auto t = timers_.scope("particle sort");
  const std::size_t n = particles_.size();
  const SlotGeometry g = geometry();
  particle_voxel_keys(g, raw(slot_of_), pos_, n, keys_, order_);
  sort_pairs(keys_, order_, n, key_bits(g.interior_voxels()), keys_alt_, order_alt_);
  particles_.permute(order_);
  voxel_ranges(g, keys_, n, voxel_first_, voxel_last_);
}

void FlipSolver::particles_to_grid() {
  const SlotGeometry g = geometry();
  const GridFields f = fields();
  {
    auto t = timers_.scope("p2g");
    particle_to_grid(g, voxel_first_, voxel_last_, pos_, vel_, f);
  }
  {
    auto t = timers_.scope("apron");
    const FieldRef sums[] = {momentum_, weight_};
    halo_.reverse_sum(voxels_, sums);
  }
  {
    auto t = timers_.scope("p2g");
    grid_velocities(g, f, gravity(), static_cast<float>(dt_));
  }
  auto t = timers_.scope("apron");
  fill({velocity_, velocity_old_}, Vec4{0, 0, 0, 0});
  fill({marker_}, std::int32_t{kAir});
}

// Conjugate gradient (decomposition/conjugate_gradient.hpp) on A s = -dx div u over the fluid
// voxels of every rank (float64 global dot products, each in its kernel's pass). The residual
// r = b - A s = -dx div u after the update, so max |r| dt / dx is the fraction of a voxel's
// volume the step would still create or destroy. Every check_every iterations r is recomputed
// from s (residual replacement): the float32 recurrence drifts from the true residual by more
// than a tight tolerance, and the check must hold for the field that the particles then see.
void FlipSolver::project() {
  auto t = timers_.scope("pressure");
  const SlotGeometry g = geometry();
  const GridFields f = fields();
  const auto& pc = case_.flip.pressure;
  const bool jacobi = pc.preconditioner == "jacobi";
  // z = M^-1 r, and the sum of r z over all ranks.
  const auto precondition_all = [&](const float* r, float* z) {
    const double rz =
        multigrid_ ? multigrid_->apply(r, z) : precondition(g, f.stencil, jacobi, r, z);
    return global_sum(ranks_.comm, rz);
  };
  // q = A d (d's apron filled), and the sum of d q over all ranks. A is positive definite on the
  // fluid voxels: d q <= 0 (the CG's breakdown) means the float32 iteration has stagnated at its
  // round-off floor; the true residual decides below.
  const auto product_all = [&](const float* d, float* q) {
    fill({direction_}, 0.0f);
    return global_sum(ranks_.comm, apply_laplacian(g, f.stencil, d, q));
  };
  const auto update = [&](double alpha, const float* d, const float* q, float* x, float* r) {
    cg_step(g, alpha, d, q, x, r);
  };
  const auto next_direction = [&](double beta, const float* z, float* d) {
    cg_direction(g, beta, z, d);
  };
  const double to_residual = dt_ / case_.flip.voxel_size;  // |r| -> |div u| dt
  const double tolerance = pc.tolerance / to_residual;
  float *x = f.pressure, *b = f.rhs, *r = raw(*residual_), *z = raw(*preconditioned_),
        *d = raw(*direction_), *q = raw(*product_);
  const MPI_Comm comm = ranks_.comm;
  // r = b - A x from x itself (x's apron filled), and max |r| over all ranks.
  const auto true_residual = [&] {
    fill({pressure_}, 0.0f);
    apply_laplacian(g, f.stencil, x, q);
    difference(g, b, q, r);
    return global_max(comm, interior_max_abs(g, r));
  };

  projection_ = {};
  projection_.initial = global_max(comm, pressure_system(g, f)) * to_residual;
  projection_.fluid_voxels = global_sum(comm, static_cast<std::int64_t>(fluid_voxels(g, f.marker)));
  clear(*pressure_);
  cg_direction(g, 0.0, b, r);  // r = b - A 0
  double residual = projection_.initial / to_residual;
  if (multigrid_) multigrid_->setup(g, f.stencil);
  // Converged when r, recomputed from x every check_every iterations and at the last, is below
  // the tolerance.
  CgRule rule{[&](double) { return !(residual >= tolerance); },
              [&](long it) {
                if (it % pc.check_every != 0 && it != pc.max_iterations) return false;
                residual = true_residual();
                return residual < tolerance;
              }};
  const CgResult cg =
      conjugate_gradient(CgVectors<float*>{x, r, z, d, q}, product_all, precondition_all,
                         FusedDots{}, update, next_direction, rule, pc.max_iterations);
  const int it = static_cast<int>(cg.iterations);
  if (it % pc.check_every != 0) {  // stopped between checks: measure what it reached
    residual = true_residual();
  }
  if (!(residual < tolerance)) throw_not_converged(it, residual * to_residual);
  projection_.iterations = it;
  projection_.residual = residual * to_residual;
  fill({pressure_}, 0.0f);
  subtract_pressure_gradient(g, f);
  if (case_.flip.wall_friction > 0)
    wall_friction(g, f, gravity(), static_cast<float>(dt_),
                  static_cast<float>(case_.flip.wall_friction));
  fill({velocity_}, Vec4{0, 0, 0, 0});
}

void FlipSolver::throw_not_converged(int iterations, double residual) const {
  char text[360];
  std::snprintf(text, sizeof text,
                "flip: step %ld (t = %.6g s): the pressure solve did not converge in %d "
                "iterations: max |div u| dt = %.3g, tolerance %.3g (raise "
                "flip.pressure.max_iterations or flip.pressure.tolerance, %slower flip.cfl)",
                clock_.step, clock_.time, iterations, residual, case_.flip.pressure.tolerance,
                multigrid_ ? "" : "use preconditioner: mgpcg, ");
  throw StepFailure(text);  // the particles are still those the step started from
}

void FlipSolver::particles_from_grid() {
  auto t = timers_.scope("g2p+advection");
  grid_to_particle(geometry(), keys_, fields(),
                   {static_cast<float>(case_.flip.flip_ratio), static_cast<float>(dt_)}, pos_, vel_,
                   particles_.size());
}

void FlipSolver::migrate() {
  if (ranks_.size == 1) return;
  auto t = timers_.scope("migration");
  particle_owners(grid_, raw(owner_device_), pos_, particles_.size(), destination_);
  exchange_.migrate(particles_, destination_);
}

}  // namespace apron::flip
