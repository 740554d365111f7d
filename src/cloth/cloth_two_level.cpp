// Newton's conjugate gradients preconditioned on two levels (cloth.implicit.preconditioner:
// two_level). The block-Jacobi blocks (precondition) remove the error that varies from vertex to
// vertex; what they leave is smooth, and on the 1 mm sheet at 1/240 s it is what sets the count:
// the membrane's stiffness against the mass, (c dt / h)^2 ~ 5e5 at 1M vertices, ~1000 iterations
// at impact with the blocks alone. The coarse lattice of vbd's correction (cloth_coarse.cpp: hat
// functions P over the rest positions, the Galerkin operator Ac = P^T F A F P probed from the same
// Hessian product, a banded Cholesky with shifts where indefinite) removes the smooth part:
//   z = F B^-1 F r + F P Ac^-1 P^T F r,
// additive, so z is symmetric and positive definite in r whatever Ac is, provided only its factor
// is (a shifted or stale Ac still gives a valid preconditioner, a worse one): the conjugate
// gradients stay valid, and Ac may lag the iterate (refresh: step probes it once a (sub-)step).
// F filters the held rows (pins, colliders' normals, landing rows), so every direction stays in
// the free subspace. Ac^-1 is applied by the host's banded triangular solves, or on a GPU as one
// dense product with Ac^-1 formed on the device at each build (coarse.solve). P^T F r is summed in
// fixed point over ranks (restrict_to_coarse), every rank solves the same coarse system, and the
// prolongation is per row: N ranks give 1 rank's z bit for bit. Newton's own residual measure
// (preconditioned_residual) stays the blocks' alone, so that its tolerance means what it means with
// block_jacobi.
#include <algorithm>
#include <cmath>
#include <span>

#include "cloth/cloth_solver.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron::cloth {

// Before Newton's CG (its residual and the free motion's step set): the coarse part is turned on
// for this solve only where the blocks' r.z is still above the solve's target (a sheet in free
// fall, solved by the deflation alone, never pays for the operator: 3.4 s a build at 1M), its
// operator probed and factored at the Newton iterate at a (sub-)step's first solve that needs it,
// or at every one (refresh: newton); a factor that failed is tried again at the next.
void ClothSolver::prepare_two_level(bool first_iteration, double target) {
  CoarseWork& k = coarse_;
  k.active = false;
  if (!two_level()) return;
  if (first_iteration) k.stale = true;
  ImplicitWork& w = implicit_;
  precondition(w.residual, w.preconditioned);  // (the CG sets z again before it reads it)
  if (!(global_dot(w.residual, w.preconditioned) > target)) return;
  if (k.stale || !case_.integrator.coarse_refresh_step || k.lower.empty()) {
    auto t = timers_.scope("coarse operator");
    k.stale = false;
    k.inverse_ready = false;
    if (!build_coarse_operator()) return;
    if (k.dense) k.inverse_ready = form_coarse_inverse();  // else (not finite) the banded solves
    k.dense_builds += k.inverse_ready;
    k.active = true;
    check_two_level();
  }
  k.active = true;
}

// z = precondition(r) + F P Ac^-1 P^T F r (two_level, turned on for this solve), else
// precondition(r).
void ClothSolver::cg_precondition(const Vectors& r, Vectors& z) {
  precondition(r, z);
  if (!coarse_.active) return;
  auto t = timers_.scope("coarse solve");
  ImplicitWork& w = implicit_;
  CoarseWork& k = coarse_;
  Vectors& rows = k.rows;
  rows.resize(owned_);
  apron::copy(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(owned_), rows.begin());
  if (held_contact()) filter(w.constraints, owned_, rows);
  // P^T F r on the device, in fixed point (restrict_to_coarse's integers); only the lattice's
  // sums and solution cross to the host and back.
  const double scale = restriction_scale(largest_component(rows, owned_));
  std::vector<double> c(3 * k.nodes, 0.0);
  if (scale > 0) {
    restrict_gather(k.gather, rows, scale, k.sums);
    std::vector<std::int64_t> sums = to_host(k.sums);
    global_sum(ranks_.comm, std::span<std::int64_t>(sums));
    for (std::size_t n = 0; n < sums.size(); ++n) c[n] = static_cast<double>(sums[n]) / scale;
  }
  ++k.applications;
  if (k.inverse_ready) {
    to_device(c, k.restricted);
    multiply_symmetric(k.inverse, c.size(), k.restricted, k.partial, k.solution);
  } else {
    if (!solve_coarse(c)) return;  // every rank has the same c: all skip it alike
    to_device(c, k.solution);
  }
  prolong_rows(k.corners, k.solution, owned_, rows);
  if (held_contact()) filter(w.constraints, owned_, rows);
  axpy(1, rows, z, owned_);
}

// Ac^-1 as a dense matrix on the device, from the banded factor of the build just made: each
// application is then one product (n^2 doubles read at the device's bandwidth) instead of the
// host's two sequential triangular solves. Every rank forms the same inverse from the same factor
// in the same order, so N ranks still apply what one does.
bool ClothSolver::form_coarse_inverse() {
  auto t = timers_.scope("coarse inverse");
  CoarseWork& k = coarse_;
  to_device(k.lower, k.lower_rows);
  to_device(k.upper, k.upper_rows);
  return invert_banded_factor(k.lower_rows, k.upper_rows, 3 * k.nodes, k.band, k.inverse);
}

namespace {

// A fixed pseudo-random value in [-1, 1] for a vertex's global id and an axis: the same vector on
// any rank count.
double probe_entry(std::int64_t id, int axis, int which) {
  const double x = static_cast<double>(id) * 0.7548776662 + axis * 0.5698402910 + which * 0.31;
  return std::sin(12.9898 * x + 78.233 * std::sin(x));
}

}  // namespace

// At every build: the whole preconditioner M applied to two fixed vectors u and v, its asymmetry
// |u.Mv - v.Mu| relative to sqrt(u.Mu v.Mv) (round-off: the fixed-point sums and the coarse
// solve, ~1e-12), and u.Mu against the blocks' u.B^-1 u (the coarse part adds a positive
// semidefinite term: the ratio is >= 1 but for round-off, and u.Mu > 0); the largest asymmetry
// and smallest ratio into the run report, and u's held part (held_part).
void ClothSolver::check_two_level() {
  auto t = timers_.scope("coarse checks");
  const auto& ids = halo_.global_ids();
  const std::size_t rows = store_.size();
  const auto fixed_vector = [&](int which, Vectors& out) {
    std::vector<Vector3<double>> host(rows, Vector3<double>{0, 0, 0});
    for (std::size_t i = 0; i < owned_; ++i)
      host[i] = Vector3<double>{probe_entry(ids[i], 0, which), probe_entry(ids[i], 1, which),
                                probe_entry(ids[i], 2, which)};
    to_device(host, out);
  };
  CoarseWork& k = coarse_;
  Vectors& u = k.fixed_u;
  Vectors& v = k.fixed_v;
  Vectors& mu = k.probe_image;
  Vectors& mv = k.product_image;
  if (u.size() != rows) {  // the rows and their ids are fixed for the run
    fixed_vector(0, u);
    fixed_vector(1, v);
  }
  mu.resize(rows);
  mv.resize(rows);
  precondition(u, mu);
  const double blocks = global_dot(u, mu);
  cg_precondition(u, mu);
  cg_precondition(v, mv);
  const double uu = global_dot(u, mu), vv = global_dot(v, mv);
  const double asymmetry = std::abs(global_dot(u, mv) - global_dot(v, mu));
  if (uu > 0 && vv > 0)
    k.preconditioner_asymmetry =
        std::max(k.preconditioner_asymmetry, asymmetry / std::sqrt(uu * vv));
  else
    k.preconditioner_asymmetry = std::numeric_limits<double>::infinity();
  if (blocks > 0) k.smallest_ratio = std::min(k.smallest_ratio, uu / blocks);
  k.held_largest = std::max(k.held_largest, held_part(mu));
}

// The largest part of z on held rows (a pinned row's z, a collider's or landing row's normal
// part), relative to z's largest row: 0 where every direction lies in the free subspace.
double ClothSolver::held_part(const Vectors& z) {
  ImplicitWork& w = implicit_;
  Vectors& held = coarse_.rows;
  held.resize(owned_);
  apron::fill(held.begin(), held.end(), Vector3<double>{0, 0, 0});
  if (held_contact()) {  // z - F z
    apron::copy(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(owned_), held.begin());
    filter(w.constraints, owned_, held);
    axpy(-1, z, held, owned_);
  }
  double part = max_norm(held, owned_);
  const std::vector<Vector3<double>> rows = to_host(z, owned_);
  for (std::size_t i = 0; i < owned_; ++i)
    if (coarse_.pinned[i]) part = std::max(part, norm(rows[i]));
  const double largest = global_max(ranks_.comm, max_norm(z, owned_));
  return largest > 0 ? global_max(ranks_.comm, part) / largest : 0.0;
}

}  // namespace apron::cloth
