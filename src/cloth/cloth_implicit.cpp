// The cloth's implicit step (kernels/cloth/implicit.hpp): backward Euler by Newton's method with
// a line search, each linear system solved by conjugate gradients, matrix-free, across ranks. Each
// product A q needs q on the ghost rows (the gradient at an owned vertex reads four rings around
// it): the search direction lives in the store and the halo refreshes it before every product. Dot
// products are each rank's owned rows summed over ranks in fixed point, so N ranks give 1 rank's
// result bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
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

// Newton's CG probes once a product, forward from the gradient at the iterate (newton_product):
// half the gradients of central differences, which were 70% of a CG iteration at 1M vertices
// (bench/NOTES.md). Forward differences err by ~5 probe relative on a rough q, and the gradients'
// round-off, which grows as 1 / probe, by more on a smooth q, whose H q is small against the
// gradient's terms (ClothImplicit.ForwardDifferenceProductsErrByAboutTheProbe). At 1e-5 the
// rough error (5e-5) and the operator's asymmetry with it broke the CG at tolerance 1e-8 on the
// stiff 32 x 32 sheet (cloth_implicit_two_level); at 1e-7 a sheet-wide q's product on the 1M
// sheet may err by ~1e-3, and there the CG took 7% more iterations than with central differences.
// So a solve asked for more than kForwardTolerance (CG's or Newton's tolerance) takes central
// differences: Newton to 1e-8 with its CG to 1e-10 on the swinging sheet (cloth_vbd's reference)
// broke down with forward ones.
constexpr double kForwardProbe = 1e-7;
constexpr double kForwardTolerance = 1e-6;

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

// Speculative contact: at most this many updates of the landing rows a step (released where they
// would pull, added where the solution ends inside a collider); what is left after them is pushed
// out after the step, as without them.
constexpr int kLandingUpdates = 4;

// With the barrier, the friction's rows are taken again at a solution at most this many times a
// step, where a row's impulse moved by more than this fraction (lag_barrier_friction).
constexpr int kFrictionLags = 4;
constexpr double kFrictionLagChange = 0.1;

// Friction inside Newton's step: Coulomb's law smoothed below this fraction of |g| dt.
constexpr double kStickSpeed = 1e-3;
// The share of the impulse friction may take (mu p) that the Newton residual's scale counts with
// cloth.implicit.friction: inside (begin_implicit_step). 1 stopped the drape early (1.26% from the
// explicit rest shape, against 0.92% without it), 0.3 left it 0.98%, 0.1 0.94% (bench/NOTES.md).
constexpr double kFrictionScale = 0.1;

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
  product_by_differences(q, false, out);
}

// Newton's CG takes forward differences from w.elastic, which newton_residual left as the
// gradient at w.point: valid from there until the line search moves the iterate, i.e. throughout
// newton_step (central ones where the solve asks for more than kForwardTolerance).
void ClothSolver::newton_product(const Vectors& q, Vectors& out) {
  product_by_differences(q,
                         case_.integrator.tolerance >= kForwardTolerance &&
                             case_.integrator.newton_tolerance >= kForwardTolerance,
                         out);
}

void ClothSolver::product_by_differences(const Vectors& q, bool forward, Vectors& out) {
  ImplicitWork& w = implicit_;
  const double largest = global_max(ranks_.comm, max_norm(q, owned_));
  if (!(largest > 0)) {
    apron::fill(out.begin(), out.end(), Vector3<double>{0, 0, 0});
    return;
  }
  const double h = (forward ? kForwardProbe : kProbe) * shortest_.length / largest;
  displaced(w.point, h, q, w.shifted);
  energy_gradient(mesh_, w.shifted, reference_, model_, w.gradient_plus);
  if (forward) {
    forward_product(implicit_system(), q, w.gradient_plus, w.elastic, h, owned_, out);
  } else {
    displaced(w.point, -h, q, w.shifted);
    energy_gradient(mesh_, w.shifted, reference_, model_, w.gradient_minus);
    cloth::implicit_product(implicit_system(), q, w.gradient_plus, w.gradient_minus, h, owned_,
                            out);
  }
  add_contact_products(q, out);
}

// The contact terms' parts of A q: friction inside the step, self-contact, the barrier.
void ClothSolver::add_contact_products(const Vectors& q, Vectors& out) {
  ImplicitWork& w = implicit_;
  if (friction_inside())
    add_friction_product(w.constraints, w.friction_eps, w.velocity, q, owned_, out);
  if (self_contact_) self_contact_->add_product(q, motion_.dt * motion_.dt, out);
  if (barrier_contact()) add_barrier_product(w.barrier_curvature, q, owned_, out);
}

double ClothSolver::global_dot(const Vectors& a, const Vectors& b) const {
  return reproducible_sum(dot_largest(a, b, owned_),
                          [&](double scale) { return dot_fixed(a, b, owned_, scale); });
}

// The residual stays unfiltered (its normal parts are the constraints' impulses); the
// preconditioned residual, and so every direction, lies in the free subspace. A block couples a
// row's normal and tangent parts, so it sees the residual filtered too.
void ClothSolver::precondition(const Vectors& r, Vectors& z) {
  ImplicitWork& w = implicit_;
  const bool constrained = held_contact();
  if (barrier_contact()) {
    barrier_precondition(implicit_system(), case_.integrator.block_jacobi ? &w.blocks : nullptr,
                         w.barrier_curvature, w.constraints, w.friction_eps, w.velocity, r, owned_,
                         z);
  } else if (!case_.integrator.block_jacobi) {
    mass_precondition(implicit_system(), r, owned_, z);
    if (friction_inside())
      friction_precondition(implicit_system(), w.constraints, w.friction_eps, w.velocity, r, owned_,
                            z);
  } else if (!constrained) {
    block_precondition(w.blocks, r, owned_, z);
  } else {
    apron::copy(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(owned_), w.filtered.begin());
    filter(w.constraints, owned_, w.filtered);
    block_precondition(w.blocks, w.filtered, owned_, z);
  }
  if (constrained) filter(w.constraints, owned_, z);
}

void ClothSolver::refresh_ghost_rows(Vectors& rows) {
  ImplicitWork& w = implicit_;
  const FieldRef direction[] = {w.direction};
  apron::copy(rows.begin(), rows.end(), w.direction->begin());
  halo_.gather(store_, direction);
  apron::copy(w.direction->begin(), w.direction->end(), rows.begin());
}

// Deflation by the change that gravity and damping alone would make from the iterate, f_d = v_free
// - v (implicit.hpp's free_motion_change; Nicolaides; Saad, Yeung, Erhel and Guyomarc'h's
// deflated conjugate gradients): the first step goes along it by its best multiple in A's norm,
// alpha = r0 . f_d / f_d . A f_d, and every later direction is kept A-orthogonal to it, so that
// part of the solution is exact throughout and the iterations work on the rest. A sheet in free
// fall then needs none (alpha = 1, r = 0 but for round-off); one at rest loses nothing. Without it
// the conjugate gradients had to build the whole sheet's uniform motion from the residual: at 1M
// vertices and 1/240 s they ran out of 1000 iterations 17 steps into a free fall, on round-off
// strains they had left in each step. Returns whether the directions are to be deflated (false:
// no motion to deflate by, or every vertex held).
template <class Product, class Update>
bool ClothSolver::step_along_free_motion(const ImplicitSystem& system, Product& product,
                                         Update& update) {
  ImplicitWork& w = implicit_;
  free_motion_change(system, *velocity_, w.velocity, owned_, *w.direction);
  if (held_contact()) filter(w.constraints, owned_, *w.direction);
  product(*w.direction, w.free_product);
  w.free_curvature = global_dot(*w.direction, w.free_product);
  if (!(w.free_curvature > 0)) return false;
  update(global_dot(w.residual, *w.direction) / w.free_curvature, *w.direction, w.free_product,
         w.step, w.residual);
  apron::copy(w.direction->begin(), w.direction->end(), w.free_motion.begin());
  return true;
}

// Backward Euler as the minimisation of the step's incremental potential (implicit.hpp's
// newton_residual), by Newton's method with a backtracking line search: each iteration solves
// (M' + dt^2 H(x_k)) s = R(v_k) by conjugate gradients (newton_step) and moves v_k along s as far
// as Phi falls by Armijo's rule (line_search), until the preconditioned residual R.z is
// newton_tolerance^2 of its scale (below). A single linearised step at x0, which this was, could
// not see that holding a vertex on a collider while its neighbours keep falling stretches the
// membrane (a flat membrane's stiffness against out-of-plane motion is second order): at 150 x 150
// cells and 1/240 s the drape reached a strain of 57 one step after first contact. Phi only falls,
// so no step creates energy. Newton starts from rest, held on the colliders (x_0 = x0: the sheet
// unstretched, where its linearisation is good; the deflation gives the free motion at once):
// from v0 the vertices just held on a collider start the iteration with their falling neighbours
// a step away, and at 1M vertices the line search then found no decrease at first contact. The
// colliders' constraints are set at x0 for the whole step, and the self-contact is linearised at
// x0 (its Gauss-Newton Hessian), so it is a quadratic in Phi. With speculative contact the rows
// that reach a collider within the step are held too (landing rows): those the free motion brings
// there from the start (the iterate then starts from the free motion), then, at each solution,
// those it ends inside a collider, less those the collider would have to pull (settle_landings);
// each change of the set gives Newton its newton_iterations again. Such a change moves the iterate
// (its rows' normal velocities) outside the line search, so across it Phi may rise. With the
// contact barrier (cloth.implicit.contact: barrier) nothing is held: the colliders are a term of
// Phi (kernels/cloth/barrier.hpp), and only the friction's lag changes between solutions
// (lag_barrier_friction), which moves no row.
bool ClothSolver::solve_implicit(bool may_fail) {
  ImplicitWork& w = implicit_;
  const double first = begin_implicit_step();
  const double tolerance = case_.integrator.newton_tolerance;
  double rz = 0;
  long iteration = 0;
  const char* failure = nullptr;
  long settled = 0;  // the iteration at which the landing rows last changed
  for (;; ++iteration) {
    rz = preconditioned_residual();
    while (!(rz > tolerance * tolerance * first) && (settle_landings() || lag_barrier_friction())) {
      rz = preconditioned_residual();
      settled = iteration;
    }
    if (!(rz > tolerance * tolerance * first)) break;
    if (iteration - settled == case_.integrator.newton_iterations || !std::isfinite(rz)) {
      failure = "Newton";
      break;
    }
    if (friction_inside())  // the rows that Newton's step would carry through their cone's apex
      friction_predict(implicit_system(), w.constraints, w.friction_eps, w.velocity, w.newton,
                       owned_);
    newton_step(iteration == 0, std::sqrt(first) * tolerance);
    const LineSearch search = line_search();
    if (search == LineSearch::negligible) break;
    if (search == LineSearch::stalled) {
      failure = "Newton (its line search found no decrease)";
      ++iteration;
      break;
    }
  }
  if (failure != nullptr) {
    if (may_fail) {
      w.retried_iterations += iteration;  // the sheet not moved: the caller halves the step
      return false;
    }
    refuse_unconverged(failure, iteration, "cloth.implicit.newton_iterations",
                       std::sqrt(rz / first), tolerance, "cloth.implicit.newton_tolerance");
  }
  record_residual(rz, first);
  finish_implicit_step(iteration);
  return true;
}

double ClothSolver::preconditioned_residual() {
  ImplicitWork& w = implicit_;
  newton_residual();
  precondition(w.newton, w.preconditioned);
  return global_sum(ranks_.comm, unfinite_rows(w.newton, owned_)) > 0
             ? std::numeric_limits<double>::infinity()
             : global_dot(w.newton, w.preconditioned);
}

// The iterate's start (at rest, held on the colliders), the colliders' constraints at x0, the
// self-contact's gradient there, and the residual's scale (returned): the momentum that gravity,
// damping and the forces at x0 change in one step, R(v0) at x0's gradient, preconditioned, and
// with friction inside the step kFrictionScale^2 of the impulse friction may take (friction_scale;
// a sheet at rest on a moving table had R(v0) = 0, and its friction's residual read as infinite).
// The rows with friction start at rest on their collider (friction_start).
// Relative to R(0), which the momentum M v0 dominates in motion, the iterations would stop long
// before the forces are resolved.
double ClothSolver::begin_implicit_step() {
  ImplicitWork& w = implicit_;
  const std::size_t rows = store_.size();
  for (Vectors* v : {&w.rhs, &w.residual, &w.preconditioned, &w.product, &w.velocity, &w.filtered,
                     &w.free_motion, &w.free_product, &w.point, &w.elastic, &w.newton, &w.step,
                     &w.contact_gradient, &w.contact_product})
    v->resize(rows);
  const ImplicitSystem system = implicit_system();
  implicit_rhs(system, *velocity_, gradient_, owned_, w.rhs);  // implicit_gradient's, at the end
  apron::fill(w.velocity.begin(), w.velocity.end(), Vector3<double>{0, 0, 0});
  if (barrier_contact()) {
    begin_barrier_step();
  } else if (has_colliders()) {
    const double on_surface = kOnSurface * motion_.thickness;
    contact_constraints(system, *position_, gradient_, colliders_, motion_.thickness, on_surface,
                        owned_, w.constraints);
    for (const auto& collider : mesh_colliders_)
      mesh_contact_constraints(system, *position_, gradient_,
                               mesh_step(*collider, step_start_, motion_.dt), on_surface, owned_,
                               w.constraints);
    w.landing_updates = 0;
    if (speculative_contact()) {  // where the free motion (gravity and damping) ends
      free_motion_change(system, *velocity_, w.velocity, owned_, w.step);
      displaced(*position_, motion_.dt, w.step, w.point);
      const long landing = add_landings(w.point);
      w.landings += landing;
      // Landing rows start at their approach, which is most of a step's fall where they are
      // about to touch: from rest, their free neighbours would lag them by that much (3.7 mm
      // against 1 mm edges at 1M vertices, a residual 2e5 times its scale that the line search
      // could not reduce). From the free motion the fall changes smoothly across the rim.
      if (landing > 0) apron::copy(w.step.begin(), w.step.end(), w.velocity.begin());
    }
    hold(w.constraints, owned_, w.velocity);
    refresh_ghost_rows(w.velocity);
    if (friction_inside()) {
      w.friction.resize(rows);
      friction_impulses(system, *velocity_, gradient_, owned_, w.constraints);
      w.friction_eps = friction_smoothing();
      friction_start(w.constraints, owned_, w.velocity);
      refresh_ghost_rows(w.velocity);
    }
  } else if (w.constraints.size() != owned_) {
    w.constraints.resize(owned_);  // every row free (a zero normal)
    apron::fill(w.constraints.begin(), w.constraints.end(), ContactConstraint{});
  }
  if (self_contact_) {
    apron::fill(w.contact_gradient.begin(), w.contact_gradient.end(), Vector3<double>{0, 0, 0});
    self_contact_->add_gradient(w.contact_gradient);
  }
  cloth::newton_residual(system, *velocity_, *velocity_, gradient_, owned_, w.newton);
  precondition(w.newton, w.preconditioned);
  double scale = global_dot(w.newton, w.preconditioned);
  if (friction_inside()) {
    friction_scale(system, w.constraints, owned_, w.friction);
    scale += kFrictionScale * kFrictionScale * global_dot(w.friction, w.friction);
  }
  return scale;
}

// The contact barrier's reach, its terms at x0 (the iterate's start: at rest, so that every row
// starts where the last step left it, outside the barrier's singular surface), and the friction's
// rows lagged there; the rows with friction start at rest on their collider (friction_start).
void ClothSolver::begin_barrier_step() {
  ImplicitWork& w = implicit_;
  const double configured = case_.integrator.dt;  // not a halved step's: one potential throughout
  w.barrier = {projection_thickness(), motion_.thickness - projection_thickness(),
               case_.integrator.barrier_stiffness / (configured * configured)};
  w.barrier_impulse.resize(store_.size());
  w.barrier_curvature.resize(owned_);
  w.barrier_energy.resize(owned_);
  w.trial_barrier.resize(owned_);
  w.constraints.resize(owned_);
  w.lagged.resize(owned_);
  w.changed.resize(owned_);
  w.friction.resize(store_.size());
  w.friction_lags = 0;
  update_barrier_terms(*position_);
  barrier_friction_at(*position_, false, w.constraints);
  w.friction_eps = friction_smoothing();
  friction_start(w.constraints, owned_, w.velocity);
  refresh_ghost_rows(w.velocity);
}

// The friction's rows lagged at `points`: x0 (the colliders at the step's start) or a solution's
// end points (at its end), from every collider.
void ClothSolver::barrier_friction_at(const Vectors& points, bool at_end,
                                      DeviceVector<ContactConstraint>& out) {
  const ImplicitSystem system = implicit_system();
  barrier_friction_rows(system, implicit_.barrier, points, colliders_, owned_, out);
  for (const auto& collider : mesh_colliders_) {
    const MeshColliderStep step = mesh_step(*collider, step_start_, motion_.dt);
    add_mesh_barrier_friction_rows(system, implicit_.barrier, points, step,
                                   at_end ? step.after : step.before, owned_, out);
  }
}

// At a solution with the barrier: the friction's rows taken again at its end points (IPC's lagged
// friction iterated); if any changed, Newton goes on with them (at most kFrictionLags a step). At
// the step's start they miss the rows that first touch within the step, which then slide
// frictionless through it.
bool ClothSolver::lag_barrier_friction() {
  ImplicitWork& w = implicit_;
  if (!barrier_contact() || w.friction_lags == kFrictionLags) return false;
  barrier_friction_at(w.point, true, w.lagged);
  compare_friction_rows(w.constraints, w.lagged, kFrictionLagChange, owned_, w.changed);
  if (global_sum(ranks_.comm, changed_rows(w.changed, owned_)) == 0) return false;
  std::swap(w.constraints, w.lagged);
  ++w.friction_lags;
  ++w.friction_lags_run;
  return true;
}

// The barrier's impulse and Hessian blocks at the end points `end`, from every collider.
void ClothSolver::update_barrier_terms(const Vectors& end) {
  ImplicitWork& w = implicit_;
  const ImplicitSystem system = implicit_system();
  barrier_terms(system, w.barrier, end, colliders_, owned_, w.barrier_impulse, w.barrier_curvature);
  for (const auto& collider : mesh_colliders_)
    add_mesh_barrier_terms(system, w.barrier, end, mesh_step(*collider, step_start_, motion_.dt),
                           owned_, w.barrier_impulse, w.barrier_curvature);
}

// Each row's barrier energy at the end points `end`, from every collider.
void ClothSolver::barrier_energies_at(const Vectors& end, DeviceVector<double>& out) const {
  const ImplicitSystem system = implicit_system();
  cloth::barrier_energies(system, implicit_.barrier, end, colliders_, owned_, out);
  for (const auto& collider : mesh_colliders_)
    add_mesh_barrier_energies(system, implicit_.barrier, end,
                              mesh_step(*collider, step_start_, motion_.dt), owned_, out);
}

// The friction's smoothing speed: a thousandth of what gravity adds in one step (a held vertex
// creeps below half of it, 2e-5 m/s at 1/240 s; the friction's stiffness, mu p / eps ~ 300 mu M',
// the same at any dt).
double ClothSolver::friction_smoothing() const {
  return std::max(kStickSpeed * norm(motion_.gravity) * motion_.dt, 1e-12);
}

long ClothSolver::add_landings(const Vectors& end) {
  ImplicitWork& w = implicit_;
  const ImplicitSystem system = implicit_system();
  const double on_surface = kOnSurface * motion_.thickness;
  landing_constraints(system, *position_, end, colliders_, motion_.thickness, on_surface, owned_,
                      w.constraints, w.changed);
  for (const auto& collider : mesh_colliders_)
    mesh_landing_constraints(system, *position_, end, mesh_step(*collider, step_start_, motion_.dt),
                             on_surface, owned_, w.constraints, w.changed);
  return global_sum(ranks_.comm, changed_rows(w.changed, owned_));
}

// At a solution of Newton's method with speculative contact: the landing rows the collider would
// pull are released, and the rows the solution ends inside a collider (w.point, the iterate's end
// points) become landing rows. If the set changed, the iterate is held on it, and the friction's
// impulses follow the new rows; at most kLandingUpdates a step.
bool ClothSolver::settle_landings() {
  ImplicitWork& w = implicit_;
  if (!speculative_contact() || w.landing_updates == kLandingUpdates) return false;
  release_pulling_landings(w.newton, owned_, w.constraints, w.changed);
  const long released = global_sum(ranks_.comm, changed_rows(w.changed, owned_));
  const long added = add_landings(w.point);
  if (released + added == 0) return false;
  ++w.landing_updates;
  ++w.landing_updates_run;
  w.landings += added;
  w.landings_released += released;
  hold(w.constraints, owned_, w.velocity);
  refresh_ghost_rows(w.velocity);
  if (friction_inside())
    friction_impulses(implicit_system(), *velocity_, gradient_, owned_, w.constraints);
  return true;
}

// The counts, the friction of the constrained rows from the final residual (newton_residual's at
// the solution: its normal parts are the impulses that held them), and gradient_ made the one
// that advance_vertices turns into the solution.
void ClothSolver::finish_implicit_step(long iterations) {
  ImplicitWork& w = implicit_;
  const ImplicitSystem system = implicit_system();
  ++w.steps;
  w.newton_iterations += iterations;
  w.most_newton = std::max(w.most_newton, iterations);
  if (has_colliders() && !friction_inside())
    constraint_friction(system, w.constraints, w.newton, owned_, w.velocity);
  implicit_gradient(system, w.rhs, w.velocity, owned_, gradient_);
}

// The same step's incremental potential minimised by vertex block descent (Chen, Macklin, Yang,
// Wang and Ng, "Vertex Block Descent", 2024): Gauss-Seidel sweeps over colours, each owned vertex
// of a colour moved by its own 3x3 block of M' + dt^2 H (probed at the current iterate, negative
// eigenvalues dropped) times its residual there, its neighbours held (kernels/cloth/implicit.hpp's
// block_descent), as far along it as its own share of the potential falls (vertex_line_search;
// with self-contact, or cloth.implicit.line_search: colour, the colour's by Newton's line_search),
// so that no sweep creates energy (without it the 1M drape at 1/240 s went unfinite in the first
// sweep after first contact, where the free motion's iterate stretches the edges next to the held
// vertices by several times their length), the halo refreshed after each colour so that N ranks
// sweep as one does. The colours lie the gradient's reach (four rings) apart, so that a colour's
// vertices share no energy term. The iterate starts from the free motion (gravity and damping
// alone), held on the colliders (cloth.implicit.contact_start: softened near them): a sheet in free
// fall is then solved before the first sweep (one gradient a step). Each sweep's start checks the
// residual, mass-preconditioned as Newton's, against `tolerance` of its scale; a step still above
// it after `sweeps` sweeps, or whose iterate is no longer finite, is refused as Newton's is, or,
// with `may_fail`, returns false without moving the sheet (take_step then halves the step).
bool ClothSolver::solve_vbd(bool may_fail) {
  ImplicitWork& w = implicit_;
  const double first = begin_implicit_step();
  free_motion_change(implicit_system(), *velocity_, w.velocity, owned_, w.step);
  axpy(1, w.step, w.velocity, owned_);
  if (has_colliders()) {
    hold(w.constraints, owned_, w.velocity);
    if (case_.integrator.contact_start_rings > 0) soften_contact_start();
  }
  refresh_ghost_rows(w.velocity);
  const double tolerance = case_.integrator.newton_tolerance;
  long sweep = 0;
  double rz = 0;
  for (;; ++sweep) {
    rz = preconditioned_residual();
    if (!(rz > tolerance * tolerance * first)) break;
    if (may_fail && (sweep == case_.integrator.sweeps || !std::isfinite(rz))) {
      w.retried_iterations += sweep;  // the sheet not moved: the caller halves the step
      return false;
    }
    if (std::isfinite(rz) && sweep == case_.integrator.sweeps &&
        case_.integrator.accept_unconverged) {
      accept_unconverged(rz, first);
      break;
    }
    if (sweep == case_.integrator.sweeps || !std::isfinite(rz))
      refuse_unconverged("vertex block descent", sweep, "cloth.implicit.sweeps",
                         std::sqrt(rz / first), tolerance, "cloth.implicit.tolerance");
    // The coarse correction before this sweep (cloth_coarse.cpp), the residual then refreshed.
    if (coarse_.nodes > 0 && sweep % case_.integrator.coarse_every == 0) {
      coarse_correction(sweep == 0 || !case_.integrator.coarse_refresh_step);
      newton_residual();
    }
    for (int c = 0; c < w.colours; ++c) {
      if (c > 0) newton_residual();
      probe_diagonal_blocks(w.point, w.elastic, c, c + 1);
      block_descent(w.blocks, w.colour, c, w.constraints, w.newton, owned_, w.step);
      if (case_.integrator.vertex_line_search && !self_contact_) {
        vertex_line_search(c);
        continue;
      }
      refresh_ghost_rows(w.step);
      // A move whose change of the potential is within its round-off is taken whole (the
      // residual still tells); one that finds no decrease is not (the sweeps' cap then decides).
      if (line_search() == LineSearch::negligible) axpy(1, w.step, w.velocity, store_.size());
    }
  }
  record_residual(rz, first);
  finish_implicit_step(sweep);
  return true;
}

// Each vertex of colour c moved by its own step length (implicit.hpp's vertex_search_round):
// backtracking until each one's share of Phi falls by Armijo's rule. One step length for the
// whole colour (line_search) is held back by its worst vertex: on the 100 x 100 patch of the
// 1 mm drape at 1/240 s the colour's alpha fell to 2^-k wherever one vertex next to the contact's
// rim was stretched, and the sweeps barely moved the sheet. The shares are
// independent (a colour's vertices lie more than four rings apart, W_v reads a 2-ring), so
// every vertex's own potential falls and so does Phi, the sum of the shares' changes. Each
// vertex's decision reads only its neighbourhood's rows, so any rank count gives the same alphas.
// With self-contact, whose linearised Hessian couples vertices of one colour, line_search.
void ClothSolver::vertex_line_search(int c) {
  ImplicitWork& w = implicit_;
  const std::size_t rows = store_.size();
  vertex_energies(mesh_, w.point, reference_, model_, w.energy);
  start_vertex_search(w.colour, c, owned_, w.search);
  for (;;) {
    scaled_displacement(w.point, motion_.dt, w.search.alpha, w.step, w.shifted);
    vertex_energies(mesh_, w.shifted, reference_, model_, w.trial_energy);
    ++w.search_rounds;
    if (global_sum(ranks_.comm,
                   vertex_search_round(implicit_system(), w.energy, w.trial_energy, w.step,
                                       w.newton, w.elastic, owned_, w.search)) == 0)
      break;
  }
  scale_rows(w.search.alpha, owned_, w.step);
  refresh_ghost_rows(w.step);
  axpy(1, w.step, w.velocity, rows);
}

// cloth.implicit.contact_start (implicit.hpp's contact_start): the free vertices within that
// many rings of a held one start with their fall into the collider cut in proportion to their
// nearness, instead of a whole step's fall next to a vertex that does not move. The pull spreads
// a ring a pass, the halo refreshed between passes (w.step and w.product as its two buffers).
void ClothSolver::soften_contact_start() {
  ImplicitWork& w = implicit_;
  const int rings = case_.integrator.contact_start_rings;
  contact_pull_start(w.constraints, owned_, w.step);
  refresh_ghost_rows(w.step);
  for (int pass = 0; pass < rings; ++pass) {
    contact_pull_pass(mesh_.ring_offsets, mesh_.ring_neighbours, 1.0 / rings, w.step, owned_,
                      w.product);
    refresh_ghost_rows(w.product);
    std::swap(w.step, w.product);
  }
  contact_start(w.constraints, w.step, owned_, w.velocity);
}

// The step's relative residual (rz of the scale `first`, both preconditioned squares) into the
// diagnostics row's largest.
void ClothSolver::record_residual(double rz, double first) {
  const double relative = first > 0 ? std::sqrt(rz / first) : 0;
  implicit_.row_residual = std::max(implicit_.row_residual, relative);
}

// cloth.implicit.unconverged: accept. The step is taken as vertex block descent's fixed sweeps
// leave it; counted for the run report and the warning at its end, and said at the first such
// step (every rank has the same residuals: collective counts).
void ClothSolver::accept_unconverged(double rz, double first) {
  ImplicitWork& w = implicit_;
  const double relative = first > 0 ? std::sqrt(rz / first) : 0;
  if (w.accepted_unconverged == 0)
    Log::warn(
        "cloth: step %ld taken unconverged (cloth.implicit.unconverged: accept): after %ld "
        "vertex block descent sweeps its relative residual is %.3g, above cloth.implicit.tolerance "
        "%.3g; such steps are counted in the run report and the diagnostics' residual column",
        clock_.step + 1, case_.integrator.sweeps, relative, case_.integrator.newton_tolerance);
  ++w.accepted_unconverged;
  w.largest_accepted = std::max(w.largest_accepted, relative);
}

// R(v) = M v0 + dt (M g - grad(x0 + dt v)) - M' v on the owned rows, grad the elastic gradient at
// the iterate plus the self-contact's linearised at x0: g_c(x0) + dt H_c v.
void ClothSolver::newton_residual() {
  ImplicitWork& w = implicit_;
  displaced(*position_, motion_.dt, w.velocity, w.point);
  energy_gradient(mesh_, w.point, reference_, model_, w.elastic);
  const Vectors* gradient = &w.elastic;
  if (self_contact_) {
    apron::copy(w.elastic.begin(), w.elastic.end(), w.product.begin());
    axpy(1, w.contact_gradient, w.product, owned_);
    self_contact_->add_product(w.velocity, motion_.dt, w.product);
    gradient = &w.product;
  }
  cloth::newton_residual(implicit_system(), *velocity_, w.velocity, *gradient, owned_, w.newton);
  if (friction_inside()) {
    friction_force(w.constraints, w.friction_eps, w.velocity, owned_, w.friction);
    axpy(1, w.friction, w.newton, owned_);
  }
  if (barrier_contact()) {
    update_barrier_terms(w.point);
    axpy(1, w.barrier_impulse, w.newton, owned_);
  }
}

// Conjugate gradients (decomposition/conjugate_gradient.hpp) on (M' + dt^2 H(x_k)) s = R(v_k)
// from s = 0, preconditioned (precondition), the first iteration's deflated by the free motion
// (step_along_free_motion), until r.z falls to tolerance^2 of its first value, or to a quarter of
// `enough`^2 (what Newton's tolerance asks of the step's residual: a tighter solve would not be
// used). Every iterate from s = 0 is a descent direction of Phi, so a solve that reaches
// max_iterations is used as it stands (counted) and Newton's residual decides. H is indefinite
// under compression (the energy is not convex where the sheet buckles), but A = M' + dt^2 H stays
// positive definite unless the step is longer than the buckling's time scale. Where a direction
// has d . A d <= 0 all the same (the CG's breakdown), the step along it uses the mass part of A
// alone and the solve stops there, counted in the run report (the line search then bounds it).
void ClothSolver::newton_step(bool first, double enough) {
  ImplicitWork& w = implicit_;
  const ImplicitSystem system = implicit_system();
  const auto dot = [&](const Vectors& a, const Vectors& b) { return global_dot(a, b); };
  const FieldRef direction[] = {w.direction};
  const auto product = [&](const Vectors& d, Vectors& q) {
    halo_.gather(store_, direction);
    newton_product(d, q);
  };
  const auto update = [&](double alpha, const Vectors& d, const Vectors& q, Vectors& x,
                          Vectors& r) {
    axpy(alpha, d, x, owned_);
    axpy(-alpha, q, r, owned_);
  };
  const auto preconditioner = [&](const Vectors& r, Vectors& z) { cg_precondition(r, z); };
  // d = z + beta d; the first, d = z, on every row (ghosts included: the halo refreshes them).
  // (beta = 0 later means r = 0, and the solve stops before d is used again.)
  bool deflated = false;
  const auto next_direction = [&](double beta, const Vectors& z, Vectors& d) {
    if (beta == 0)
      apron::copy(z.begin(), z.end(), d.begin());
    else
      xpby(z, beta, d, owned_);
    if (deflated) axpy(-global_dot(w.free_product, d) / w.free_curvature, w.free_motion, d, owned_);
  };
  apron::fill(w.step.begin(), w.step.end(), Vector3<double>{0, 0, 0});
  apron::copy(w.newton.begin(), w.newton.end(), w.residual.begin());
  // Relative to the iteration's first residual; the rule takes its scale from the first residual
  // it is shown, before the step along the free motion.
  // (With two_level, the blocks' r.z sets the scale: its own r.z is no smaller, so it stops no
  // earlier than the blocks' would.)
  RelativeResidual rule{case_.integrator.tolerance};
  precondition(w.residual, w.preconditioned);
  rule.done(global_dot(w.residual, w.preconditioned));
  rule.target = std::max(rule.target, 0.25 * enough * enough);
  if (first) deflated = step_along_free_motion(system, product, update);
  prepare_two_level(first, rule.target);
  const CgResult cg = conjugate_gradient(
      CgVectors<Vectors>{w.step, w.residual, w.preconditioned, *w.direction, w.product}, product,
      preconditioner, dot, update, next_direction, rule, case_.integrator.max_iterations);
  if (cg.stop == CgStop::iteration_limit) ++w.capped_solves;
  if (cg.stop == CgStop::breakdown) {  // A itself is not positive along d: dt^2 d.Hd < -d.M'd
    const double inertia = reproducible_sum(
        mass_dot_largest(system, *w.direction, owned_),
        [&](double scale) { return mass_dot_fixed(system, *w.direction, owned_, scale); });
    axpy(cg.rz / inertia, *w.direction, w.step, owned_);
    ++w.curvature_stops;
  }
  w.iterations += cg.iterations;
  w.most_iterations = std::max(w.most_iterations, cg.iterations);
  refresh_ghost_rows(w.step);
}

// Backtracking from alpha = 1 until Phi(v + alpha s) - Phi(v) <= c alpha s . grad Phi(v) (Armijo,
// c = 1e-4; s . grad Phi = -s . R). The change is computed without Phi itself, which would
// cancel to its last bits on a large sheet: the inertia and the linearised self-contact are
// quadratics in alpha, alpha (-s.R - dt s.grad_E) + alpha^2 / 2 (s.M's + dt^2 s.H_c s), and the
// elastic energy's change is summed per vertex. A change within its round-off (2^-50 x the
// vertices x the largest vertex energy) counts as no rise. Returns false, leaving v, if s is no
// descent direction or alpha fell below 2^-20.
ClothSolver::LineSearch ClothSolver::line_search() {
  ImplicitWork& w = implicit_;
  const ImplicitSystem system = implicit_system();
  const double dt = motion_.dt;
  const double slope = -global_dot(w.step, w.newton);
  const bool friction = friction_inside();
  // The inertia's linear term: -s.R less the elastic's, the friction's and the barrier's parts
  // of s.grad Phi.
  const bool barrier = barrier_contact();
  const double linear = slope - dt * global_dot(w.step, w.elastic) +
                        (friction ? global_dot(w.step, w.friction) : 0.0) +
                        (barrier ? global_dot(w.step, w.barrier_impulse) : 0.0);
  if (barrier) barrier_energies_at(w.point, w.barrier_energy);
  if (friction)
    friction_potential(w.constraints, w.friction_eps, w.velocity, 0, w.step, owned_,
                       w.friction_energy);
  double quadratic = reproducible_sum(mass_dot_largest(system, w.step, owned_), [&](double scale) {
    return mass_dot_fixed(system, w.step, owned_, scale);
  });
  if (self_contact_) {
    apron::fill(w.contact_product.begin(), w.contact_product.end(), Vector3<double>{0, 0, 0});
    self_contact_->add_product(w.step, dt * dt, w.contact_product);
    quadratic += global_dot(w.step, w.contact_product);
  }
  vertex_energies(mesh_, w.point, reference_, model_, w.energy);
  const double round_off = 0x1p-50 * static_cast<double>(global_vertices_) *
                           global_max(ranks_.comm, largest_entry(w.energy, owned_));
  if (-slope <= round_off) return LineSearch::negligible;
  constexpr double kArmijo = 1e-4;
  for (double alpha = 1; alpha >= 0x1p-20; alpha /= 2) {
    displaced(w.point, alpha * dt, w.step, w.shifted);
    vertex_energies(mesh_, w.shifted, reference_, model_, w.trial_energy);
    double elastic = reproducible_sum(
        difference_largest(w.trial_energy, w.energy, owned_),
        [&](double scale) { return difference_fixed(w.trial_energy, w.energy, owned_, scale); });
    if (friction) {
      friction_potential(w.constraints, w.friction_eps, w.velocity, alpha, w.step, owned_,
                         w.trial_friction);
      elastic += reproducible_sum(
          difference_largest(w.trial_friction, w.friction_energy, owned_), [&](double scale) {
            return difference_fixed(w.trial_friction, w.friction_energy, owned_, scale);
          });
    }
    if (barrier) {
      barrier_energies_at(w.shifted, w.trial_barrier);
      elastic += reproducible_sum(
          difference_largest(w.trial_barrier, w.barrier_energy, owned_), [&](double scale) {
            return difference_fixed(w.trial_barrier, w.barrier_energy, owned_, scale);
          });
    }
    const double change = alpha * linear + 0.5 * alpha * alpha * quadratic + elastic;
    if (change <= kArmijo * alpha * slope + round_off) {
      axpy(alpha, w.step, w.velocity, store_.size());
      w.last_change = change;
      w.last_alpha = alpha;
      w.smallest_step_length = std::min(w.smallest_step_length, alpha);
      return LineSearch::moved;
    }
  }
  return LineSearch::stalled;
}

void ClothSolver::colour_rows(const Rings& rings) {
  // Vertex block descent moves a colour's vertices at once, each as if the others were held: that
  // is exact only where no energy term holds two of them, i.e. colours the gradient's whole reach
  // apart (at two rings the 1M drape at 1/240 s went unfinite one step after first contact).
  const std::vector<std::uint8_t> colour =
      distance_colours(rings, case_.integrator.vbd ? kGhostRings : kProbeRings);
  const auto& ids = halo_.global_ids();
  std::vector<std::uint8_t> local(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) local[i] = colour[static_cast<std::size_t>(ids[i])];
  implicit_.colour = DeviceVector<std::uint8_t>(local.begin(), local.end());
  implicit_.colours = 1 + *std::max_element(colour.begin(), colour.end());
  if (case_.integrator.vbd) build_reach(rings);
  Log::info("cloth: %s: %d probing colours (%d gradients a probe)",
            case_.integrator.vbd ? "vertex block descent" : "block-Jacobi preconditioner",
            implicit_.colours, 3 * implicit_.colours);
}

// Each owned row's closed 2-ring in local rows (the vertices whose energy reads its position),
// for vertex_line_search; the halo's four rings hold them all.
void ClothSolver::build_reach(const Rings& rings) {
  const auto& ids = halo_.global_ids();
  RingWalk walk(rings);
  std::vector<std::uint32_t> offsets{0}, reach;
  const auto add = [&](std::int64_t v) {
    const std::int64_t index = halo_.local_index(v);
    if (index < 0) throw std::logic_error("cloth: a 2-ring vertex is missing from the halo");
    reach.push_back(static_cast<std::uint32_t>(index));
  };
  for (std::size_t i = 0; i < owned_; ++i) {
    add(ids[i]);
    for (const std::uint32_t v : walk.around(static_cast<std::uint32_t>(ids[i]), 2)) add(v);
    offsets.push_back(static_cast<std::uint32_t>(reach.size()));
  }
  implicit_.search.reach_offsets = DeviceVector<std::uint32_t>(offsets.begin(), offsets.end());
  implicit_.search.reach = DeviceVector<std::uint32_t>(reach.begin(), reach.end());
}

// Forward differences of the elastic gradient from `elastic` (the gradient at `point`), one
// colour and axis at a time, with the products' probe size (kProbe), for the colours [first,
// end). Every rank displaces its ghost rows of the colour as their owners do, so no exchange is
// needed: the gradient at an owned vertex reads only its own rows' rings.
void ClothSolver::probe_diagonal_blocks(const Vectors& point, const Vectors& elastic, int first,
                                        int end) {
  ImplicitWork& w = implicit_;
  w.blocks.resize(owned_);
  const double h = kProbe * shortest_.length;
  for (int c = first; c < end; ++c)
    for (int axis = 0; axis < 3; ++axis) {
      displaced_colour(point, h, axis, w.colour, c, w.shifted);
      energy_gradient(mesh_, w.shifted, reference_, model_, w.gradient_plus);
      record_block_column(w.gradient_plus, elastic, h, w.colour, c, axis, owned_, w.blocks);
    }
  invert_blocks(implicit_system(), owned_, w.blocks);
}

// Collective (every rank has the same counts). A step whose solve stopped short is not taken:
// its velocities would be wrong by an unknown amount (a free fall at 1/240 s was 15x too slow).
// Iterations grow about in proportion to dt on a stiff sheet, so the dt suggested is the one at
// which this solve's rate of convergence would have reached the tolerance in time, with a
// margin.
void ClothSolver::refuse_unconverged(const char* method, long iterations, const char* limit_key,
                                     double reached, double tolerance,
                                     const char* tolerance_key) const {
  const double fraction = reached < 1 ? std::log(reached) / std::log(tolerance) : 0.1;
  char halved[160] = "";
  if (implicit_.halving > 0)
    std::snprintf(halved, sizeof halved,
                  " in a sub-step of %.4g s (the step halved %d time%s, "
                  "cloth.implicit.max_halvings)",
                  motion_.dt, implicit_.halving, implicit_.halving == 1 ? "" : "s");
  char text[768];
  std::snprintf(text, sizeof text,
                "cloth: the implicit solve did not converge at step %ld%s: after %ld %s iterations "
                "(%s) its relative residual is %.3g, above %s %.3g; lower cloth.implicit.dt "
                "from %.4g s to about %.3g s, or raise %s",
                clock_.step + 1, halved, iterations, method, limit_key, reached, tolerance_key,
                tolerance, implicit_.halving > 0 ? dt_ : motion_.dt,
                motion_.dt * std::clamp(0.9 * fraction, 0.01, 0.9), limit_key);
  throw io::AgreedError(text, true);
}

}  // namespace apron::cloth
