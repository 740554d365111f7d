// decomposition/conjugate_gradient.hpp on however many ranks the test is launched with: a 3-D
// 7-point Laplacian on an n^3 grid (Dirichlet 0 outside) plus a diagonal that varies from cell to
// cell, split into slabs of z planes, matrix-free on device vectors with the neighbours' planes
// exchanged before every product and float64 dot products summed over ranks. Checked against a
// dense Cholesky solve and a plain CPU conjugate gradient of the whole system (every rank builds
// it), with and without Jacobi, with dot products fused into the operations (as FLIP's kernels do)
// or asked for, with FLIP's shape of stopping rule (the true residual every k iterations), and
// the ways an iteration ends without converging: each is reported, never silent.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "decomposition/conjugate_gradient.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron {
namespace {

constexpr int kN = 8;  // cells per side: 512 unknowns
constexpr std::size_t kPlane = std::size_t{kN} * kN;
constexpr std::size_t kCells = kPlane * kN;

// The diagonal's extra term at global cell g, in [0, 20): it gives Jacobi something to do.
APRON_HD inline double extra(std::size_t g) {
  return 0.02 * static_cast<double>((g * 2654435761u) % 1000u);
}
double rhs_at(std::size_t g) {
  return std::sin(0.37 * static_cast<double>(g)) + 0.5;
}

// q = A d over the owned cells (local rows [kPlane, kPlane + owned): a ghost plane on either
// side, zero at the grid's faces). sign -1 gives -A (negative definite). Returns d q.
struct Product {
  std::size_t first_cell;  // global index of the first owned cell
  double sign;
  const double* d;
  double* q;
  APRON_HD double operator()(std::size_t t) const {
    const std::size_t row = t + kPlane, i = t % kN, j = (t / kN) % kN;
    double s = (6 + extra(first_cell + t)) * d[row] - d[row - kPlane] - d[row + kPlane];
    if (i > 0) s -= d[row - 1];
    if (i + 1 < kN) s -= d[row + 1];
    if (j > 0) s -= d[row - kN];
    if (j + 1 < kN) s -= d[row + kN];
    s *= sign;
    q[row] = s;
    return d[row] * s;
  }
};
// z = r / diag (Jacobi), or z = scale r; returns r z.
struct Precondition {
  std::size_t first_cell;
  bool jacobi;
  double scale;
  const double* r;
  double* z;
  APRON_HD double operator()(std::size_t t) const {
    const std::size_t row = t + kPlane;
    const double v = jacobi ? r[row] / (6 + extra(first_cell + t)) : scale * r[row];
    z[row] = v;
    return r[row] * v;
  }
};
struct Dot {
  const double* a;
  const double* b;
  APRON_HD double operator()(std::size_t t) const { return a[t + kPlane] * b[t + kPlane]; }
};
struct Step {
  double alpha;
  const double* d;
  const double* q;
  double* x;
  double* r;
  APRON_HD void operator()(std::size_t t) const {
    x[t + kPlane] += alpha * d[t + kPlane];
    r[t + kPlane] -= alpha * q[t + kPlane];
  }
};
struct Direction {
  double beta;
  const double* z;
  double* d;
  APRON_HD void operator()(std::size_t t) const {
    d[t + kPlane] = beta == 0 ? z[t + kPlane] : z[t + kPlane] + beta * d[t + kPlane];
  }
};
template <class F>
struct Discard {  // for_each_index of a functor whose value is not wanted
  F f;
  APRON_HD void operator()(std::size_t t) const { f(t); }
};

using Vec = DeviceVector<double>;

// This rank's slab of z planes [k0, k1) and the CG's operations on it.
class Slab {
 public:
  explicit Slab(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &size_);
    k0_ = rank_ * kN / size_;
    k1_ = (rank_ + 1) * kN / size_;
    owned_ = (k1_ - k0_) * kPlane;
  }
  std::size_t owned() const { return owned_; }
  std::size_t first_cell() const { return k0_ * kPlane; }
  Vec vector() const { return Vec(owned_ + 2 * kPlane, 0.0); }
  Vec rhs() const {
    std::vector<double> h(owned_ + 2 * kPlane, 0.0);
    for (std::size_t t = 0; t < owned_; ++t) h[t + kPlane] = rhs_at(first_cell() + t);
    return Vec(h.begin(), h.end());
  }

  // The neighbours' edge planes into d's ghost planes (those at the grid's faces stay 0).
  void exchange(Vec& d) const {
    const int below = k0_ > 0 ? rank_ - 1 : MPI_PROC_NULL;
    const int above = k1_ < kN ? rank_ + 1 : MPI_PROC_NULL;
    std::vector<double> first(kPlane), last(kPlane), from_below(kPlane, 0.0),
        from_above(kPlane, 0.0);
    if (owned_ > 0) {
      apron::copy(d.begin() + kPlane, d.begin() + 2 * kPlane, first.begin());
      apron::copy(d.begin() + owned_, d.begin() + owned_ + kPlane, last.begin());
    }
    const int n = static_cast<int>(kPlane);
    MPI_Sendrecv(last.data(), n, MPI_DOUBLE, above, 0, from_below.data(), n, MPI_DOUBLE, below, 0,
                 comm_, MPI_STATUS_IGNORE);
    MPI_Sendrecv(first.data(), n, MPI_DOUBLE, below, 1, from_above.data(), n, MPI_DOUBLE, above, 1,
                 comm_, MPI_STATUS_IGNORE);
    apron::copy(from_below.begin(), from_below.end(), d.begin());
    apron::copy(from_above.begin(), from_above.end(), d.begin() + owned_ + kPlane);
  }
  // The global d.q after q = sign A d (fused into the product).
  double apply(Vec& d, Vec& q, double sign = 1) const {
    exchange(d);
    return global_sum(
        comm_, transform_reduce(owned_, Product{first_cell(), sign, raw(d), raw(q)}, 0.0, Plus{}));
  }
  void apply_only(Vec& d, Vec& q, double sign = 1) const {
    exchange(d);
    for_each_index(owned_, Discard<Product>{{first_cell(), sign, raw(d), raw(q)}});
  }
  double precondition(const Vec& r, Vec& z, bool jacobi, double scale = 1) const {
    return global_sum(
        comm_, transform_reduce(owned_, Precondition{first_cell(), jacobi, scale, raw(r), raw(z)},
                                0.0, Plus{}));
  }
  void precondition_only(const Vec& r, Vec& z, bool jacobi) const {
    for_each_index(owned_, Discard<Precondition>{{first_cell(), jacobi, 1, raw(r), raw(z)}});
  }
  double dot(const Vec& a, const Vec& b) const {
    return global_sum(comm_, transform_reduce(owned_, Dot{raw(a), raw(b)}, 0.0, Plus{}));
  }
  void step(double alpha, const Vec& d, const Vec& q, Vec& x, Vec& r) const {
    for_each_index(owned_, Step{alpha, raw(d), raw(q), raw(x), raw(r)});
  }
  void direction(double beta, const Vec& z, Vec& d) const {
    for_each_index(owned_, Direction{beta, raw(z), raw(d)});
  }
  double max_abs(const Vec& a) const {
    const std::vector<double> h = to_host(a);
    double m = 0;
    for (std::size_t t = 0; t < owned_; ++t) m = std::max(m, std::abs(h[t + kPlane]));
    return global_max(comm_, m);
  }
  // Every rank's owned rows of x, in global order.
  std::vector<double> gather(const Vec& x) const {
    const std::vector<double> h = to_host(x);
    const std::vector<double> mine(h.begin() + kPlane, h.begin() + kPlane + owned_);
    std::vector<int> counts(size_), displs(size_);
    const int n = static_cast<int>(owned_);
    MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_);
    std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), 0);
    std::vector<double> all(kCells);
    MPI_Allgatherv(mine.data(), n, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                   comm_);
    return all;
  }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::size_t k0_ = 0, k1_ = 0, owned_ = 0;
};

// ---- the CPU reference: the whole system, dense ------------------------------------------------

std::vector<double> dense_matrix() {
  std::vector<double> a(kCells * kCells, 0.0);
  for (std::size_t g = 0; g < kCells; ++g) {
    const std::size_t i = g % kN, j = (g / kN) % kN, k = g / kPlane;
    a[g * kCells + g] = 6 + extra(g);
    const auto couple = [&](bool inside, std::size_t h) {
      if (inside) a[g * kCells + h] = -1;
    };
    couple(i > 0, g - 1);
    couple(i + 1 < kN, g + 1);
    couple(j > 0, g - kN);
    couple(j + 1 < kN, g + kN);
    couple(k > 0, g - kPlane);
    couple(k + 1 < kN, g + kPlane);
  }
  return a;
}

// A x = b by Cholesky.
std::vector<double> direct_solve() {
  std::vector<double> l = dense_matrix();
  const std::size_t n = kCells;
  for (std::size_t j = 0; j < n; ++j) {
    double s = l[j * n + j];
    for (std::size_t k = 0; k < j; ++k) s -= l[j * n + k] * l[j * n + k];
    l[j * n + j] = std::sqrt(s);
    for (std::size_t i = j + 1; i < n; ++i) {
      double t = l[i * n + j];
      for (std::size_t k = 0; k < j; ++k) t -= l[i * n + k] * l[j * n + k];
      l[i * n + j] = t / l[j * n + j];
    }
  }
  std::vector<double> y(n), x(n);
  for (std::size_t i = 0; i < n; ++i) {
    double t = rhs_at(i);
    for (std::size_t k = 0; k < i; ++k) t -= l[i * n + k] * y[k];
    y[i] = t / l[i * n + i];
  }
  for (std::size_t i = n; i-- > 0;) {
    double t = y[i];
    for (std::size_t k = i + 1; k < n; ++k) t -= l[k * n + i] * x[k];
    x[i] = t / l[i * n + i];
  }
  return x;
}

// A textbook preconditioned CG of the whole system from x = 0 to r.z <= tol^2 r0.z0.
struct PlainCg {
  std::vector<double> x;
  long iterations = 0;
};
PlainCg plain_cg(bool jacobi, double tolerance) {
  const std::vector<double> a = dense_matrix();
  const std::size_t n = kCells;
  std::vector<double> x(n, 0.0), r(n), z(n), d(n), q(n);
  for (std::size_t i = 0; i < n; ++i) r[i] = rhs_at(i);
  const auto precondition = [&] {
    double rz = 0;
    for (std::size_t i = 0; i < n; ++i) {
      z[i] = jacobi ? r[i] / a[i * n + i] : r[i];
      rz += r[i] * z[i];
    }
    return rz;
  };
  double rz = precondition();
  const double target = tolerance * tolerance * rz;
  d = z;
  long it = 0;
  while (rz > target) {
    ++it;
    double dq = 0;
    for (std::size_t i = 0; i < n; ++i) {
      q[i] = 0;
      for (std::size_t j = 0; j < n; ++j) q[i] += a[i * n + j] * d[j];
      dq += d[i] * q[i];
    }
    const double alpha = rz / dq;
    for (std::size_t i = 0; i < n; ++i) x[i] += alpha * d[i], r[i] -= alpha * q[i];
    const double next = precondition();
    for (std::size_t i = 0; i < n; ++i) d[i] = z[i] + next / rz * d[i];
    rz = next;
  }
  return {x, it};
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}
double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// The stated tolerance: the CG stops at |r| <= 1e-12 |r0| and A's condition number is below
// 100 (its eigenvalues lie in [0.36, 32]), so x is within 1e-9 of the direct solve's, relative to
// its largest entry.
constexpr double kTolerance = 1e-12;
constexpr double kSolutionTolerance = 1e-9;

// The operations on a slab, as conjugate_gradient() takes them.
auto products(const Slab& s, double sign = 1) {  // dot product asked for
  return [&s, sign](Vec& d, Vec& q) { s.apply_only(d, q, sign); };
}
auto fused_products(const Slab& s) {
  return [&s](Vec& d, Vec& q) { return s.apply(d, q); };
}
auto jacobi(const Slab& s) {
  return [&s](const Vec& r, Vec& z) { s.precondition_only(r, z, true); };
}
auto fused_jacobi(const Slab& s) {
  return [&s](const Vec& r, Vec& z) { return s.precondition(r, z, true); };
}
auto fused_scaled(const Slab& s, double scale) {  // z = scale r
  return [&s, scale](const Vec& r, Vec& z) { return s.precondition(r, z, false, scale); };
}
auto dots(const Slab& s) {
  return [&s](const Vec& a, const Vec& b) { return s.dot(a, b); };
}
auto updates(const Slab& s) {
  return
      [&s](double alpha, const Vec& d, const Vec& q, Vec& x, Vec& r) { s.step(alpha, d, q, x, r); };
}
auto directions(const Slab& s) {
  return [&s](double beta, const Vec& z, Vec& d) { s.direction(beta, z, d); };
}

// The vectors of one solve from x = 0 (so r = b).
struct Work {
  Vec x, r, z, d, q;
  explicit Work(const Slab& s)
      : x(s.vector()), r(s.rhs()), z(s.vector()), d(s.vector()), q(s.vector()) {}
  CgVectors<Vec> vectors() { return {x, r, z, d, q}; }
  CgVectors<Vec> unpreconditioned() { return {x, r, r, d, q}; }  // z is r
};

struct Solve {
  std::vector<double> x;
  CgResult result;
};

// The cloth's shape: no preconditioner, dot products asked for, relative residual.
Solve solve_identity(const Slab& s, long max_iterations = 1000, double tolerance = kTolerance) {
  Work w(s);
  const CgResult result =
      conjugate_gradient(w.unpreconditioned(), products(s), IdentityPreconditioner{}, dots(s),
                         updates(s), directions(s), RelativeResidual{tolerance}, max_iterations);
  return {s.gather(w.x), result};
}

// Jacobi, with the dot products asked for or (FLIP's shape) fused into apply and precondition.
Solve solve_jacobi(const Slab& s, bool fused) {
  Work w(s);
  const CgResult result =
      fused ? conjugate_gradient(w.vectors(), fused_products(s), fused_jacobi(s), FusedDots{},
                                 updates(s), directions(s), RelativeResidual{kTolerance}, 1000)
            : conjugate_gradient(w.vectors(), products(s), jacobi(s), dots(s), updates(s),
                                 directions(s), RelativeResidual{kTolerance}, 1000);
  return {s.gather(w.x), result};
}

TEST(ConjugateGradient, NoPreconditionerMatchesDirectSolveAndPlainCg) {
  const Slab s(MPI_COMM_WORLD);
  const Solve cg = solve_identity(s);
  const std::vector<double> direct = direct_solve();
  const PlainCg plain = plain_cg(false, kTolerance);
  EXPECT_EQ(cg.result.stop, CgStop::stopping_rule);
  EXPECT_LE(max_difference(cg.x, direct), kSolutionTolerance * max_abs(direct));
  EXPECT_LE(max_difference(plain.x, direct), kSolutionTolerance * max_abs(direct));
  // The same iteration; only the sums' order differs (over ranks, over threads).
  EXPECT_NEAR(cg.result.iterations, plain.iterations, 1);
  EXPECT_GT(cg.result.iterations, 10);
}

TEST(ConjugateGradient, JacobiMatchesDirectSolveAndPlainCg) {
  const Slab s(MPI_COMM_WORLD);
  const std::vector<double> direct = direct_solve();
  const PlainCg plain = plain_cg(true, kTolerance);
  const Solve asked = solve_jacobi(s, false), fused = solve_jacobi(s, true);
  for (const Solve* cg : {&asked, &fused}) {
    EXPECT_EQ(cg->result.stop, CgStop::stopping_rule);
    EXPECT_LE(max_difference(cg->x, direct), kSolutionTolerance * max_abs(direct));
    EXPECT_NEAR(cg->result.iterations, plain.iterations, 1);
  }
  // Fused or asked for, the same terms summed the same way.
  EXPECT_EQ(asked.result.iterations, fused.result.iterations);
  EXPECT_LE(max_difference(asked.x, fused.x), 1e-12 * max_abs(direct));
  // The varying diagonal makes Jacobi pay.
  EXPECT_LT(asked.result.iterations, solve_identity(s).result.iterations);
}

// FLIP's shape: max |b - A x| below an absolute tolerance, measured from x itself (residual
// replacement) every check_every iterations and at the iteration cap.
TEST(ConjugateGradient, TrueResidualRuleStopsAtACheck) {
  const Slab s(MPI_COMM_WORLD);
  const int check_every = 4;
  const long max_iterations = 200;
  const double tolerance = 1e-10;  // max |b - A x|; b is O(1)
  Work w(s);
  const Vec b = s.rhs();
  double residual = s.max_abs(b);
  const auto true_residual = [&] {
    Vec product = s.vector();
    s.apply(w.x, product);
    std::vector<double> hr = to_host(b);
    const std::vector<double> hq = to_host(product);
    for (std::size_t t = kPlane; t < kPlane + s.owned(); ++t) hr[t] -= hq[t];
    w.r = Vec(hr.begin(), hr.end());
    return s.max_abs(w.r);
  };
  std::vector<long> checked;
  const CgResult result = conjugate_gradient(
      w.vectors(), fused_products(s), fused_jacobi(s), FusedDots{}, updates(s), directions(s),
      CgRule{[&](double) { return !(residual >= tolerance); },
             [&](long it) {
               if (it % check_every != 0 && it != max_iterations) return false;
               checked.push_back(it);
               residual = true_residual();
               return residual < tolerance;
             }},
      max_iterations);
  EXPECT_EQ(result.stop, CgStop::stopping_rule);
  EXPECT_EQ(result.iterations % check_every, 0);
  ASSERT_FALSE(checked.empty());
  EXPECT_EQ(checked.back(), result.iterations);
  EXPECT_LT(residual, tolerance);
  EXPECT_LT(true_residual(), tolerance);  // x itself, not the recurrence
  const std::vector<double> direct = direct_solve();
  EXPECT_LE(max_difference(s.gather(w.x), direct), 1e-8 * max_abs(direct));
}

TEST(ConjugateGradient, ReportsTheIterationLimit) {
  const Slab s(MPI_COMM_WORLD);
  const Solve cg = solve_identity(s, 3, 1e-14);
  EXPECT_EQ(cg.result.stop, CgStop::iteration_limit);
  EXPECT_EQ(cg.result.iterations, 3);
  EXPECT_GT(cg.result.rz, 0);
}

// -A is negative definite: the first direction already has d.Ad < 0. The solution is left as
// it was and the offending curvature and r.z are given back (the cloth steps along d with the
// mass part of A alone).
TEST(ConjugateGradient, ReportsBreakdown) {
  const Slab s(MPI_COMM_WORLD);
  Work w(s);
  long updates_done = 0;
  const CgResult result = conjugate_gradient(
      w.unpreconditioned(), products(s, -1), IdentityPreconditioner{}, dots(s),
      [&](double, const Vec&, const Vec&, Vec&, Vec&) { ++updates_done; }, directions(s),
      RelativeResidual{kTolerance}, 100);
  EXPECT_EQ(result.stop, CgStop::breakdown);
  EXPECT_EQ(result.iterations, 1);
  EXPECT_LT(result.curvature, 0);
  EXPECT_DOUBLE_EQ(result.rz, s.dot(w.r, w.r));
  EXPECT_EQ(updates_done, 0);
  EXPECT_EQ(s.max_abs(w.x), 0);
}

// A NaN in the operator's result is a breakdown too, not an iteration that carries on.
TEST(ConjugateGradient, ReportsNaNCurvatureAsBreakdown) {
  const Slab s(MPI_COMM_WORLD);
  Work w(s);
  int calls = 0;
  const CgResult result = conjugate_gradient(
      w.unpreconditioned(),
      [&](Vec& d, Vec& q) { return ++calls < 3 ? s.apply(d, q) : std::nan(""); },
      IdentityPreconditioner{}, dots(s), updates(s), directions(s), RelativeResidual{kTolerance},
      100);
  EXPECT_EQ(result.stop, CgStop::breakdown);
  EXPECT_EQ(result.iterations, 3);
  EXPECT_TRUE(std::isnan(result.curvature));
}

// A preconditioner that is not positive definite (M^-1 = -I): r.z < 0 before the first
// iteration, reported as such (a rule that never stops cannot hide it).
TEST(ConjugateGradient, ReportsAPreconditionerThatIsNotPositive) {
  const Slab s(MPI_COMM_WORLD);
  Work w(s);
  const CgResult result = conjugate_gradient(
      w.vectors(), fused_products(s), fused_scaled(s, -1), FusedDots{}, updates(s), directions(s),
      CgRule{[](double) { return false; }, [](long) { return false; }}, 100);
  EXPECT_EQ(result.stop, CgStop::no_descent);
  EXPECT_EQ(result.iterations, 0);
  EXPECT_LT(result.rz, 0);
}

TEST(ConjugateGradient, StopReasonsHaveNames) {
  for (CgStop stop :
       {CgStop::stopping_rule, CgStop::iteration_limit, CgStop::breakdown, CgStop::no_descent})
    EXPECT_STRNE(cg_stop_name(stop), "?");
}

}  // namespace
}  // namespace apron
