// The cloth's implicit step (issue 17, "an integrator that allows time steps set by the physics
// of the cloth"): backward Euler on mu r_tt + gamma r_t + K r = mu F,
//   M (1 + dt gamma / mu) v1 = M v0 + dt (M g - dE/dx(x0 + dt v1)),   x1 = x0 + dt v1,
// M the lumped masses, solved by Newton's method (src/cloth): each iteration's system is
//   (M (1 + dt gamma / mu) + dt^2 H) s = R(v_k)   (newton_residual),
// H the Hessian of the elastic energy at x0 + dt v_k (never formed: H q comes from central
// differences of the exact gradient, energy.hpp), solved by conjugate gradients over these
// per-vertex maps. Rows [0, count) are a rank's owned vertices; held (pinned) vertices' rows are
// kept zero, so the solve runs in the free vertices' subspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/mesh_colliders.hpp"
#include "kernels/cloth/motion.hpp"
#include "kernels/common/backend.hpp"

namespace apron::cloth {

using Vectors = DeviceVector<Vector3<double>>;

// What the system's rows need besides the vectors.
struct ImplicitSystem {
  const DeviceVector<double>* mass;
  const DeviceVector<std::uint8_t>* pinned;
  double dt = 0;
  double damping_rate = 0;  // gamma / mu [1/s]
  Vector3<double> gravity{0, 0, 0};
};

// The solve's dot products, in two passes so that the caller can make them the same on any rank
// count (conjugate gradients amplify the last bits in which sums over ranks in another order
// differ): this rank's largest |term|, then, with a power-of-two scale from the largest over all
// ranks, this rank's sum of round(term x scale) as integers, which add associatively. Terms:
// a_i . b_i over rows [0, count) (dot), or m_i (1 + dt gamma / mu) |q_i|^2 over the free ones
// (mass_dot: the mass part of q . A q).
double dot_largest(const Vectors& a, const Vectors& b, std::size_t count);
std::int64_t dot_fixed(const Vectors& a, const Vectors& b, std::size_t count, double scale);
double mass_dot_largest(const ImplicitSystem& s, const Vectors& q, std::size_t count);
std::int64_t mass_dot_fixed(const ImplicitSystem& s, const Vectors& q, std::size_t count,
                            double scale);

// This rank's part of max_i |a_i| over rows [0, count).
double max_norm(const Vectors& a, std::size_t count);

// How many of rows [0, count) are not finite.
std::int64_t unfinite_rows(const Vectors& a, std::size_t count);

// This rank's part of max_i |a_i| over rows [0, count).
double largest_entry(const DeviceVector<double>& a, std::size_t count);

// The line search's energy change, sum_i (after_i - before_i) over rows [0, count), in the same
// two passes (per-vertex differences: the sheet's total energy would cancel to its last bits).
double difference_largest(const DeviceVector<double>& after, const DeviceVector<double>& before,
                          std::size_t count);
std::int64_t difference_fixed(const DeviceVector<double>& after, const DeviceVector<double>& before,
                              std::size_t count, double scale);

// y_i += a x_i and y_i = x_i + b y_i, rows [0, count).
void axpy(double a, const Vectors& x, Vectors& y, std::size_t count);
void xpby(const Vectors& x, double b, Vectors& y, std::size_t count);

// out_i = x_i + h q_i for every row of x (owned and ghost: the gradient reads both).
void displaced(const Vectors& x, double h, const Vectors& q, Vectors& out);

// z = (M (1 + dt gamma / mu))^-1 r, zero where held: the solve's preconditioner. It makes the
// first search direction of a rigid translation's residual (a sheet in free fall: r0 = M g dt)
// that translation itself, which H does not see, so such a step is solved in one iteration at any
// dt; without it the direction is r0, whose lighter edge rows H resists, and a capped solve fell
// short of g t by 15x.
void mass_precondition(const ImplicitSystem& s, const Vectors& r, std::size_t count, Vectors& z);

// The block-Jacobi preconditioner: per free row, z_i = (M'_i + dt^2 [H_ii]+)^-1 r_i, with H_ii
// the 3x3 diagonal block of the elastic Hessian at x0 and [.]+ its symmetric part less its
// negative eigenvalues (where the sheet is compressed H_ii need not be positive; a preconditioner
// must be). The mass preconditioner treats every row as M', so at steps far above the explicit
// limit the membrane's stiff rows, dt^2 H_ii >> M', set the conjugate gradients' condition
// number; these blocks take that scale out. The blocks are probed: every vertex of one colour
// (mesh.hpp's distance_colours over the gradient's reach) displaced along one axis at once, the
// gradient's change at each of them its block's column.
struct Block3 {
  double m[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};  // row-major
};
APRON_HD inline Vector3<double> times(const Block3& b, const Vector3<double>& q) {
  const double* m = b.m;
  return {m[0] * q.x + m[1] * q.y + m[2] * q.z, m[3] * q.x + m[4] * q.y + m[5] * q.z,
          m[6] * q.x + m[7] * q.y + m[8] * q.z};
}
// out_i = x_i + h e_axis where colour_i = c, x_i elsewhere; every row of x.
void displaced_colour(const Vectors& x, double h, int axis,
                      const DeviceVector<std::uint8_t>& colour, int c, Vectors& out);
// Rows [0, count) of colour c: column `axis` of their block is (plus_i - base_i) / h.
void record_block_column(const Vectors& plus, const Vectors& base, double h,
                         const DeviceVector<std::uint8_t>& colour, int c, int axis,
                         std::size_t count, DeviceVector<Block3>& blocks);
// In place, rows [0, count): H_ii becomes (M'_i + dt^2 [H_ii]+)^-1, zero where held.
void invert_blocks(const ImplicitSystem& s, std::size_t count, DeviceVector<Block3>& blocks);
void block_precondition(const DeviceVector<Block3>& inverse, const Vectors& r, std::size_t count,
                        Vectors& z);

// out_i = v_free_i - v_i, v_free = (v0 + dt g) / (1 + dt gamma / mu) the velocity of a sheet
// moving under gravity and damping alone (no elastic forces), v the iterate; zero where held. The
// solve's first search direction: a free fall's whole step, none of a sheet at rest's (whose best
// multiple of it is zero).
void free_motion_change(const ImplicitSystem& s, const Vectors& velocity0, const Vectors& velocity,
                        std::size_t count, Vectors& out);

// The right-hand side b = M v0 + dt (M g - grad), zero where held.
void implicit_rhs(const ImplicitSystem& s, const Vectors& velocity, const Vectors& gradient,
                  std::size_t count, Vectors& out);

// Newton's residual of the backward-Euler step at velocity v, with `gradient` the forces' at
// x0 + dt v: out = M v0 + dt (M g - gradient) - M (1 + dt gamma / mu) v, zero where held. It is
// minus the gradient, in v, of the step's incremental potential
//   Phi(v) = 1/2 v.M'v - v.(M v0 + dt M g) + E(x0 + dt v),
// whose minimiser is the step's v1 and whose Hessian M' + dt^2 H is the system above.
void newton_residual(const ImplicitSystem& s, const Vectors& velocity0, const Vectors& velocity,
                     const Vectors& gradient, std::size_t count, Vectors& out);

// out = M (1 + dt gamma / mu) q + dt^2 (grad(x + h q) - grad(x - h q)) / (2 h), zero where held.
void implicit_product(const ImplicitSystem& s, const Vectors& q, const Vectors& gradient_plus,
                      const Vectors& gradient_minus, double h, std::size_t count, Vectors& out);

// The same by forward differences from the gradient at x itself:
// out = M (1 + dt gamma / mu) q + dt^2 (grad(x + h q) - grad(x)) / h, zero where held.
void forward_product(const ImplicitSystem& s, const Vectors& q, const Vectors& gradient_plus,
                     const Vectors& gradient, double h, std::size_t count, Vectors& out);

// Colliders inside the solve (conjugate gradients filtered as in Baraff and Witkin's): a free
// vertex on a collider's offset surface (within `tolerance` of it, or inside) that the forces at
// x0 push into it keeps its velocity along the surface's normal at the collider's own through the
// solve, and friction then takes up to the collider's coefficient x the normal impulse that held
// it. Without them the solve, blind to the collider, pushes resting vertices in at every step and
// the projection after it pushes them out along the normal: stretch piles up at steps far above
// the explicit limit until a solve breaks down.
struct ContactConstraint {
  Vector3<double> normal{0, 0, 0};  // zero: a free row
  double friction = 0;
  Vector3<double> wall_velocity{0, 0, 0};  // the collider's at the contact point
  double depth = 0;    // inside the grown collider (> -tolerance): the deepest collider holds a row
  double impulse = 0;  // the normal impulse holding it over the step (friction_impulses), lagged
  double secant = 0;   // > 0: the friction's Hessian along the slide, over mu p (friction_predict)
  // A landing row (landing_constraints): its normal velocity relative to the collider's is held
  // at `approach` (<= 0) instead of zero, which ends the step on the offset surface.
  double approach = 0;
  int landing = 0;  // 1: a landing row, released where the collider would have to pull it
};
// Every row's constraint from the analytic colliders (static), replacing what `out` held.
void contact_constraints(const ImplicitSystem& s, const Vectors& position, const Vectors& gradient,
                         const DeviceVector<Collider>& colliders, double thickness,
                         double tolerance, std::size_t count, DeviceVector<ContactConstraint>& out);
// Then a mesh collider's over the step (its pose at the step's start; its velocity from the two
// poses): it takes the rows where it lies deeper than what holds them.
void mesh_contact_constraints(const ImplicitSystem& s, const Vectors& position,
                              const Vectors& gradient, const MeshColliderStep& collider,
                              double tolerance, std::size_t count,
                              DeviceVector<ContactConstraint>& out);
// Speculative contact: the rows that reach a collider within the step, not only those on it at
// x0. Set at x0 alone, a vertex a step's fall above the collider is free in the solve and pushed
// back out after it, stretching the edges to its neighbours (at 1M vertices and 1/240 s the first
// contact step converged to a sheet at 54% strain: 3.7 mm of fall against 1 mm edges). Each free
// row whose end point e_i (x0 + dt v, the iterate's or the free motion's) lies deeper than
// `tolerance` inside a collider grown by the thickness becomes a landing row of the deepest one:
// its normal n the collider's at e_i and its normal velocity, relative to the collider's, held at
// approach = -max(gap, 0) / dt, gap = (x0 - e_i).n - depth(e_i) the height of x0 above the offset
// surface's tangent plane there: it lands on the surface at the step's end. changed_i = 1 where
// a row became one (every row's flag written).
void landing_constraints(const ImplicitSystem& s, const Vectors& position, const Vectors& end,
                         const DeviceVector<Collider>& colliders, double thickness,
                         double tolerance, std::size_t count, DeviceVector<ContactConstraint>& out,
                         DeviceVector<std::uint8_t>& changed);
// Then a mesh collider's (its pose at the step's start, as mesh_contact_constraints): it takes the
// free rows, and those landing_constraints has just made landing rows (changed) where it lies
// deeper, setting changed_i.
void mesh_landing_constraints(const ImplicitSystem& s, const Vectors& position, const Vectors& end,
                              const MeshColliderStep& collider, double tolerance, std::size_t count,
                              DeviceVector<ContactConstraint>& out,
                              DeviceVector<std::uint8_t>& changed);
// The landing rows whose normal impulse at the solution, -(r_i . n_i) from the unfiltered
// residual, is negative (the collider would pull them down: their neighbours hold them above it)
// become free again; changed_i = 1 there (every row's flag written).
void release_pulling_landings(const Vectors& residual, std::size_t count,
                              DeviceVector<ContactConstraint>& c,
                              DeviceVector<std::uint8_t>& changed);
// This rank's count of rows [0, count) with changed_i set.
std::int64_t changed_rows(const DeviceVector<std::uint8_t>& changed, std::size_t count);
// v_i less its part along its row's constraint normal: the solve's subspace.
void filter(const DeviceVector<ContactConstraint>& c, std::size_t count, Vectors& v);
// v_i with its normal part set to the collider's (plus a landing row's approach): the solve's
// first guess.
void hold(const DeviceVector<ContactConstraint>& c, std::size_t count, Vectors& v);
// From the unfiltered residual r = b - A v1, each constraint's normal impulse p_i = -(r_i . n_i)
// (> 0: the collider pushed): the velocity sliding relative to the collider loses up to
// friction x p_i / m_i (Coulomb, never reversed), as the explicit step's projection takes it.
void constraint_friction(const ImplicitSystem& s, const DeviceVector<ContactConstraint>& c,
                         const Vectors& residual, std::size_t count, Vectors& velocity);
// Friction inside the step (Newton): Coulomb friction as a dissipative potential added to the
// step's incremental potential, as IPC does (Li et al., "Incremental Potential Contact", 2020,
// section 5), with the normal impulse p_i and the tangent plane lagged from the step's start:
//   D(v) = sum_i mu_i p_i f0(|u_i|),  u_i = P_i (v_i - w_i)  (the sliding velocity),
// f0' = f1 the smoothed Coulomb law, f1(u) = 2 u / eps - u^2 / eps^2 below eps, 1 above: a row
// slides against mu p (the impulse Coulomb allows), and one pushed by less sticks, creeping below
// eps / 2. The step's minimiser then has the friction at the end of the step on every row at once,
// where a friction applied after a frictionless solve (constraint_friction) sees neighbours that
// slid freely over the whole step and relieved the tension that drives the slide.
// p_i = -(M v0 + dt (M g - grad0) - M' w_i).n_i, at least 0, on the constrained rows.
void friction_impulses(const ImplicitSystem& s, const Vectors& velocity0, const Vectors& gradient0,
                       std::size_t count, DeviceVector<ContactConstraint>& c);
// Newton's start on the rows with friction: at rest on the collider (v_i = w_i, sticking), the
// state a row friction holds ends in. From rest in the world a row on a moving collider starts
// sliding at -w_i against the whole of mu p, and the moving table's sheet then took more than 8
// Newton iterations; on a static collider this is the rest start it was.
void friction_start(const DeviceVector<ContactConstraint>& c, std::size_t count, Vectors& velocity);
// out_i = (mu_i p_i / sqrt(M'_i), 0, 0) on the rows with friction, zero elsewhere: out.out is the
// mass-preconditioned square of the impulse friction may take over the step, which the Newton
// residual's scale counts (a sheet at rest on a collider has R(v0) = 0).
void friction_scale(const ImplicitSystem& s, const DeviceVector<ContactConstraint>& c,
                    std::size_t count, Vectors& out);
// out_i = -dD/dv_i (the friction's impulse over the step), zero on the rows without friction.
void friction_force(const DeviceVector<ContactConstraint>& c, double eps, const Vectors& velocity,
                    std::size_t count, Vectors& out);
// out_i += (d^2 D / dv_i^2) q_i (positive semi-definite: mu p f1(u) / u across the slide, mu p
// f1'(u) along it, in the tangent plane).
void add_friction_product(const DeviceVector<ContactConstraint>& c, double eps,
                          const Vectors& velocity, const Vectors& q, std::size_t count,
                          Vectors& out);
// The friction rows' Hessian along the slide for the next Newton step, from the residual R at the
// iterate (friction_force included). Outside the band f1' = 0: Newton's model sees a constant
// force along the slide, so a row that is to stop is carried through the apex of its cone into a
// slide the other way, where the force has flipped (a residual of 2 mu p), and back, Newton
// crawling through the stick-slip steps. A row sliding at u (|u| >= eps, t = u / |u|) that its own
// inertia's step, R.t / M', would carry through the apex (R.t < -M' |u|) takes instead the
// stiffness k along the slide with which that step ends at the apex, (M' + k) |u| = -R.t
// (secant = k / (mu p)), which brings it to rest there, in the band, where Coulomb's stiffness
// takes over; every other row keeps f1' (secant = 0). The secant to the apex, f1 / u, stiffer by
// the inertia's share, stopped a row that barely sticks only by that share's fraction a step:
// Newton crawled (a sheet sliding over a rod's edge: 16 iterations at a ratio of 0.8). Both
// are positive semi-definite, so the step stays a descent direction of Phi and the residual,
// the line search and the test are those of Newton's method.
void friction_predict(const ImplicitSystem& s, DeviceVector<ContactConstraint>& c, double eps,
                      const Vectors& velocity, const Vectors& residual, std::size_t count);
// out_i = mu_i p_i f0(|u_i|) at v + alpha s: each row's share of D, for the line search.
void friction_potential(const DeviceVector<ContactConstraint>& c, double eps,
                        const Vectors& velocity, double alpha, const Vectors& step,
                        std::size_t count, DeviceVector<double>& out);
// The mass preconditioner with the friction's block: on the rows with friction,
// z_i = (M'_i + d^2 D / dv_i^2)^-1 r_i (closed form: the block is M' plus two tangent terms).
void friction_precondition(const ImplicitSystem& s, const DeviceVector<ContactConstraint>& c,
                           double eps, const Vectors& velocity, const Vectors& r, std::size_t count,
                           Vectors& z);

// The preconditioner with a contact barrier (barrier.hpp): z_i = (A_i + curvature_i + F_i)^-1 r_i
// on the free rows, A_i = M'_i (inverse null: the mass preconditioner) or the block-Jacobi block
// (the inverse of `inverse`'s block, which invert_blocks made), F_i the friction's Hessian block at
// the iterate (friction_force's, zero on rows without friction); zero on the pinned rows.
void barrier_precondition(const ImplicitSystem& s, const DeviceVector<Block3>* inverse,
                          const DeviceVector<Block3>& curvature,
                          const DeviceVector<ContactConstraint>& friction_rows, double eps,
                          const Vectors& velocity, const Vectors& r, std::size_t count, Vectors& z);

// The gradient that makes advance_vertices' explicit update give v1 exactly:
// grad0 + (b - M (1 + dt gamma / mu) v1) / dt (= grad0 + dt H v1 where the solve converged), so
// that contact, friction and held vertices are applied as in the explicit step.
void implicit_gradient(const ImplicitSystem& s, const Vectors& rhs, const Vectors& velocity,
                       std::size_t count, Vectors& gradient);

// Vertex block descent's move of one colour (Gauss-Seidel over colours): for the owned rows of
// colour c, step_i = P inverse_i P r_i, r = newton_residual at the iterate, P the projection off
// row i's constraint normal (none where free), inverse_i = (M'_i + dt^2 [H_ii]+)^-1 from
// invert_blocks; zero on the other rows. Each such row's step minimises its own part of the step's
// incremental potential to second order with its neighbours held.
void block_descent(const DeviceVector<Block3>& inverse, const DeviceVector<std::uint8_t>& colour,
                   int c, const DeviceVector<ContactConstraint>& constraints,
                   const Vectors& residual, std::size_t count, Vectors& velocity);

// Vertex block descent's line search per vertex. The vertices of one colour lie more than four
// rings apart, and W_v |V_v| reads the positions of v's closed 2-ring only, so each vertex i's
// move changes the step's potential by its own share, independent of the others':
//   alpha (-s_i.R_i - dt s_i.g_i) + alpha^2 / 2 M'_i |s_i|^2 + sum_{v in reach(i)} (after_v -
//   before_v),
// s the step (block_descent's), R the residual and g the elastic gradient at the iterate, reach(i)
// i's closed 2-ring (CSR over the owned rows, local indices), before/after the vertices' energies
// at the iterate and with each searching row moved by its alpha. One round: a searching row whose
// change meets Armijo's rule (c = 1e-4, or whose slope is within its round-off) stops with its
// alpha; any other halves it, and one below 2^-20 stops at alpha 0 (the row does not move).
// alpha and searching span every local row (zero beyond the owned rows and off colour c).
struct VertexSearch {
  DeviceVector<double> alpha;
  DeviceVector<std::uint8_t> searching;
  DeviceVector<std::uint32_t> reach_offsets, reach;  // owned rows + 1, and the 2-rings
};
// alpha_i = 1 and searching on the owned rows of colour c, 0 on every other row.
void start_vertex_search(const DeviceVector<std::uint8_t>& colour, int c, std::size_t count,
                         VertexSearch& search);
// out_i = x_i + h alpha_i q_i on every row.
void scaled_displacement(const Vectors& x, double h, const DeviceVector<double>& alpha,
                         const Vectors& q, Vectors& out);
// One backtracking round over the owned rows; returns this rank's count of rows still searching.
std::int64_t vertex_search_round(const ImplicitSystem& s, const DeviceVector<double>& before,
                                 const DeviceVector<double>& after, const Vectors& step,
                                 const Vectors& residual, const Vectors& elastic, std::size_t count,
                                 VertexSearch& search);
// Vertex block descent's contact start. The free motion held on the colliders starts the
// vertices next to a held one a whole step's fall from it; instead, each free vertex within
// `rings` ring steps of a held one starts with the part of its velocity that moves it into the
// collider, along the nearest held vertex's normal, scaled by (1 - d / rings), d its ring distance.
// pull_i = (1 - d_i / rings) n (the nearest held normal), zero beyond; one pass spreads it a ring:
// out_i = n_i on the held rows, else the largest of in_i and (|in_j| - 1 / rings) in_j / |in_j|
// over i's ring. Rows [0, count); the caller refreshes the ghosts between passes.
void contact_pull_start(const DeviceVector<ContactConstraint>& c, std::size_t count, Vectors& pull);
void contact_pull_pass(const DeviceVector<std::uint32_t>& ring_offsets,
                       const DeviceVector<std::uint32_t>& ring_neighbours, double fall,
                       const Vectors& in, std::size_t count, Vectors& out);
// v_i -= |pull_i| (v_i . n) n where v_i . n < 0 (n = pull_i / |pull_i|), on the free rows.
void contact_start(const DeviceVector<ContactConstraint>& c, const Vectors& pull, std::size_t count,
                   Vectors& velocity);

// step_i *= alpha_i, rows [0, count).
void scale_rows(const DeviceVector<double>& alpha, std::size_t count, Vectors& step);

}  // namespace apron::cloth
