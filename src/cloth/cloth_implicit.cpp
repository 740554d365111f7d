// The cloth's implicit step (kernels/cloth/implicit.hpp): linearised backward Euler solved by
// conjugate gradients, matrix-free, across ranks. Each product A q needs q on the ghost rows
// (the gradient at an owned vertex reads four rings around it): the search direction lives in
// the store and the halo refreshes it before every product. Dot products are each rank's
// owned rows summed over ranks in fixed point, so N ranks give 1 rank's result bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "cloth/cloth_solver.hpp"
#include "decomposition/conjugate_gradient.hpp"
#include "decomposition/reductions.hpp"
#include "io/hdf5_file.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron::cloth {
namespace {

// Each product probes the float64 gradient (the configuration insists on it) at x +- h q, with
// h |q|_max this fraction of the shortest edge: central differences err by ~probe^2 relative,
// the gradient's round-off (~1e-16 of its slots, i.e. of stress x edge) by ~1e-16 x strain /
// probe. (Mixed precision would need a probe of ~1e-3, and float32 rounding that flips with q's
// last bits then made 1 and 2 ranks differ by 1e-6 relative after 50 steps; float64: 0.)
constexpr double kProbe = 1e-5;

// A vertex this near its collider's offset surface (a fraction of the thickness) counts as on it:
// the projection after each step leaves resting vertices on it to round-off, and a constrained
// step moving along a curved collider leaves it by its sagitta.
constexpr double kOnSurface = 1e-2;

// Vertices of one probing colour lie at least this many rings apart. The gradient reads four
// (kGhostRings), so the exact diagonal blocks need four; at two, each block takes in the couplings
// of same-colour vertices three and four rings away (the curvature fits' reach, a few percent of
// the block), and the drape's solves took as many iterations (22.2 a step) with 11 colours as
// with the exact blocks' 28, and more at one ring (42).
constexpr int kProbeRings = 2;

}  // namespace

// The sum over ranks of terms whose largest magnitude on this rank is `largest`, from
// fixed(scale), this rank's sum of round(term x scale): with the scale a power of two that keeps
// every rank's integer sum within 2^62, the integers add exactly, so the result does not depend
// on how the rows are split (terms below 2^-62 x the sheet's count x the largest are lost: ~1e-13
// relative at 1M vertices, far below the solve's tolerance).
template <class Fixed>
double ClothSolver::reproducible_sum(double largest, const Fixed& fixed) const {
  const double top = global_max(ranks_.comm, largest);
  if (!(top > 0)) return 0;
  const int exponent = 62 - std::ilogb(top * static_cast<double>(global_vertices_)) - 1;
  const double scale = std::ldexp(1.0, exponent);
  return static_cast<double>(global_sum(ranks_.comm, fixed(scale))) / scale;
}

ImplicitSystem ClothSolver::implicit_system() const {
  return {&mass_, &pinned_, motion_.dt, motion_.damping_rate, motion_.gravity};
}

void ClothSolver::implicit_product(const Vectors& q, Vectors& out) {
  ImplicitWork& w = implicit_;
  const double largest = global_max(ranks_.comm, max_norm(q, owned_));
  if (!(largest > 0)) {
    apron::fill(out.begin(), out.end(), Vector3<double>{0, 0, 0});
    return;
  }
  const double h = kProbe * shortest_.length / largest;
  displaced(*position_, h, q, w.shifted);
  energy_gradient(mesh_, w.shifted, reference_, model_, w.gradient_plus);
  displaced(*position_, -h, q, w.shifted);
  energy_gradient(mesh_, w.shifted, reference_, model_, w.gradient_minus);
  cloth::implicit_product(implicit_system(), q, w.gradient_plus, w.gradient_minus, h, owned_, out);
  if (self_contact_) self_contact_->add_product(q, motion_.dt * motion_.dt, out);
}

// Deflation by the change that gravity and damping alone would make, g_d (Nicolaides; Saad,
// Yeung, Erhel and Guyomarc'h's deflated conjugate gradients): the first step from v0 goes along
// it by its best multiple in A's norm, alpha = r0 . g_d / g_d . A g_d, and every later direction
// is kept A-orthogonal to it, so that part of the solution is exact throughout and the iterations
// work on the rest. A sheet in free fall then needs none (alpha = 1, r = 0 but for round-off);
// one at rest loses nothing (alpha = 0). From v0 alone the conjugate gradients had to build the
// whole sheet's uniform acceleration from the residual: at 1M vertices and 1/240 s they ran out
// of 1000 iterations 17 steps into a free fall, on round-off strains they had left in each step.
// Returns whether the directions are to be deflated (false: no gravity, or every vertex held).
template <class Product, class Dot, class Update>
bool ClothSolver::step_along_gravity(const ImplicitSystem& system, Product& product,
                                     Dot& global_dot, Update& update) {
  ImplicitWork& w = implicit_;
  gravity_change(system, w.velocity, owned_, *w.direction);
  if (has_colliders()) filter(w.constraints, owned_, *w.direction);
  product(*w.direction, w.gravity_product);
  w.gravity_curvature = global_dot(*w.direction, w.gravity_product);
  if (!(w.gravity_curvature > 0)) return false;
  update(global_dot(w.residual, *w.direction) / w.gravity_curvature, *w.direction,
         w.gravity_product, w.velocity, w.residual);
  apron::copy(w.direction->begin(), w.direction->end(), w.gravity.begin());
  return true;
}

// Conjugate gradients (decomposition/conjugate_gradient.hpp) preconditioned by the masses
// (mass_precondition) or the Hessian's diagonal blocks (block_precondition), deflated by gravity's
// change (step_along_gravity), on A v1 = b from v1 = v0, until r.z falls to tolerance^2 of v0's
// (|b - A v1| to about tolerance |b - A v0|); a solve that does not get there within
// max_iterations ends the run (refuse_unconverged). H is indefinite under compression (the energy
// is not convex where the sheet buckles), but A = M' + dt^2 H stays positive definite unless the
// step is longer than the buckling's time scale. Where a direction has d . A d <= 0 all the same
// (the CG's breakdown), the step along it uses the mass part of A alone and the solve stops
// there, counted in the run report.
void ClothSolver::solve_implicit() {
  ImplicitWork& w = implicit_;
  const std::size_t rows = store_.size();
  for (Vectors* v : {&w.rhs, &w.residual, &w.preconditioned, &w.product, &w.velocity, &w.filtered,
                     &w.gravity, &w.gravity_product})
    v->resize(rows);
  const ImplicitSystem system = implicit_system();
  const auto global_dot = [&](const Vectors& a, const Vectors& b) {
    return reproducible_sum(dot_largest(a, b, owned_),
                            [&](double scale) { return dot_fixed(a, b, owned_, scale); });
  };
  const FieldRef direction[] = {w.direction};
  const auto product = [&](const Vectors& d, Vectors& q) {
    halo_.gather(store_, direction);
    implicit_product(d, q);
  };
  const auto update = [&](double alpha, const Vectors& d, const Vectors& q, Vectors& v,
                          Vectors& r) {
    axpy(alpha, d, v, owned_);
    axpy(-alpha, q, r, owned_);
  };
  // The residual stays unfiltered (its normal parts, at the end, are the constraints' impulses);
  // the preconditioned residual, and so every direction, lies in the free subspace.
  const bool constrained = has_colliders();
  // A block couples a row's normal and tangent parts, so it sees the residual filtered too.
  const auto precondition = [&](const Vectors& r, Vectors& z) {
    if (!case_.integrator.block_jacobi) {
      mass_precondition(system, r, owned_, z);
    } else if (!constrained) {
      block_precondition(w.blocks, r, owned_, z);
    } else {
      apron::copy(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(owned_), w.filtered.begin());
      filter(w.constraints, owned_, w.filtered);
      block_precondition(w.blocks, w.filtered, owned_, z);
    }
    if (constrained) filter(w.constraints, owned_, z);
  };
  // d = z + beta d; the first, d = z, on every row (ghosts included: the halo refreshes them).
  // (beta = 0 later means r = 0, and the solve stops before d is used again.)
  bool deflated = false;  // by gravity's change (step_along_gravity)
  const auto next_direction = [&](double beta, const Vectors& z, Vectors& d) {
    if (beta == 0)
      apron::copy(z.begin(), z.end(), d.begin());
    else
      xpby(z, beta, d, owned_);
    if (deflated)
      axpy(-global_dot(w.gravity_product, d) / w.gravity_curvature, w.gravity, d, owned_);
  };

  implicit_rhs(system, *velocity_, gradient_, owned_, w.rhs);
  apron::copy(velocity_->begin(), velocity_->end(), w.velocity.begin());  // ghosts included
  if (constrained) {
    const double on_surface = kOnSurface * motion_.thickness;
    contact_constraints(system, *position_, gradient_, colliders_, motion_.thickness, on_surface,
                        owned_, w.constraints);
    for (const auto& collider : mesh_colliders_)
      mesh_contact_constraints(system, *position_, gradient_,
                               mesh_step(*collider, clock_.time, motion_.dt), on_surface, owned_,
                               w.constraints);
    // The first guess held on the colliders; its ghost rows from their owners, through the
    // direction's field (which the first direction overwrites).
    hold(w.constraints, owned_, w.velocity);
    apron::copy(w.velocity.begin(), w.velocity.end(), w.direction->begin());
    halo_.gather(store_, direction);
    apron::copy(w.direction->begin(), w.direction->end(), w.velocity.begin());
  }
  implicit_product(w.velocity, w.product);
  apron::copy(w.rhs.begin(), w.rhs.end(), w.residual.begin());
  axpy(-1, w.product, w.residual, owned_);
  // Relative to v0's residual, b - A v0: the step's change of momentum (relative to b, which the
  // momentum M v0 dominates in motion, the solve would stop long before the forces are
  // resolved). The rule takes its scale from the first residual it is shown: v0's, before the
  // step along gravity.
  RelativeResidual rule{case_.integrator.tolerance};
  precondition(w.residual, w.preconditioned);
  rule.done(global_dot(w.residual, w.preconditioned));
  deflated = step_along_gravity(system, product, global_dot, update);
  const CgResult cg = conjugate_gradient(
      CgVectors<Vectors>{w.velocity, w.residual, w.preconditioned, *w.direction, w.product},
      product, precondition, global_dot, update, next_direction, rule,
      case_.integrator.max_iterations);
  if (cg.stop == CgStop::iteration_limit)
    refuse_unconverged(cg, rule.target / (rule.tolerance * rule.tolerance));
  if (cg.stop == CgStop::breakdown) {  // A itself is not positive along d: dt^2 d.Hd < -d.M'd
    const double inertia = reproducible_sum(
        mass_dot_largest(system, *w.direction, owned_),
        [&](double scale) { return mass_dot_fixed(system, *w.direction, owned_, scale); });
    axpy(cg.rz / inertia, *w.direction, w.velocity, owned_);
    ++w.curvature_stops;
  }
  if (constrained) constraint_friction(system, w.constraints, w.residual, owned_, w.velocity);
  const long iterations = cg.iterations;
  ++w.steps;
  w.iterations += iterations;
  w.most_iterations = std::max(w.most_iterations, iterations);
  implicit_gradient(system, w.rhs, w.velocity, owned_, gradient_);
}

void ClothSolver::colour_rows(const Rings& rings) {
  const std::vector<std::uint8_t> colour = distance_colours(rings, kProbeRings);
  const auto& ids = halo_.global_ids();
  std::vector<std::uint8_t> local(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) local[i] = colour[static_cast<std::size_t>(ids[i])];
  implicit_.colour = DeviceVector<std::uint8_t>(local.begin(), local.end());
  implicit_.colours = 1 + *std::max_element(colour.begin(), colour.end());
  Log::info("cloth: block-Jacobi preconditioner: %d probing colours (%d gradients a step)",
            implicit_.colours, 3 * implicit_.colours);
}

// Forward differences of the elastic gradient from `elastic` (the step's, at x0), one colour and
// axis at a time, with the products' probe size (kProbe). Every rank displaces its ghost rows of
// the colour as their owners do, so no exchange is needed: the gradient at an owned vertex reads
// only its own rows' rings.
void ClothSolver::probe_diagonal_blocks(const Vectors& elastic) {
  ImplicitWork& w = implicit_;
  w.blocks.resize(owned_);
  const double h = kProbe * shortest_.length;
  for (int c = 0; c < w.colours; ++c)
    for (int axis = 0; axis < 3; ++axis) {
      displaced_colour(*position_, h, axis, w.colour, c, w.shifted);
      energy_gradient(mesh_, w.shifted, reference_, model_, w.gradient_plus);
      record_block_column(w.gradient_plus, elastic, h, w.colour, c, axis, owned_, w.blocks);
    }
  invert_blocks(implicit_system(), owned_, w.blocks);
}

// Collective (every rank has the same CgResult). A step whose solve stopped short is not taken:
// its velocities would be wrong by an unknown amount (a free fall at 1/240 s was 15x too slow).
// Krylov iterations grow about in proportion to dt on a stiff sheet, so the dt suggested is the
// one at which this solve's rate of convergence would have reached the tolerance in time, with a
// margin.
void ClothSolver::refuse_unconverged(const CgResult& cg, double first_rz) const {
  const double reached = std::sqrt(cg.rz / first_rz);
  const double tolerance = case_.integrator.tolerance;
  const double fraction = reached < 1 ? std::log(reached) / std::log(tolerance) : 0.1;
  char text[400];
  std::snprintf(text, sizeof text,
                "cloth: the implicit solve did not converge at step %ld: after %ld iterations "
                "(cloth.implicit.max_iterations) its residual is %.3g of the first, above "
                "cloth.implicit.tolerance %.3g; lower cloth.implicit.dt from %.4g s to about "
                "%.3g s, or raise cloth.implicit.max_iterations",
                clock_.step + 1, cg.iterations, reached, tolerance, motion_.dt,
                motion_.dt * std::clamp(0.9 * fraction, 0.01, 0.9));
  throw io::AgreedError(text, true);
}

}  // namespace apron::cloth
