// The cloth's implicit step (issue 17, "an integrator that allows time steps set by the physics
// of the cloth"): linearised backward Euler on mu r_tt + gamma r_t + K r = mu F,
//   (M (1 + dt gamma / mu) + dt^2 H) v1 = M v0 + dt (M g - dE/dx(x0)),   x1 = x0 + dt v1,
// M the lumped masses, H the Hessian of the elastic energy at x0 (never formed: H q comes from
// central differences of the exact gradient, energy.hpp). The solver (src/cloth) runs conjugate
// gradients over these per-vertex maps. Rows [0, count) are a rank's owned vertices; held
// (pinned) vertices' rows are kept zero, so the solve runs in the free vertices' subspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
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

// This rank's part of sum_i a_i . b_i, and of max_i |a_i|, over rows [0, count).
double dot(const Vectors& a, const Vectors& b, std::size_t count);
double max_norm(const Vectors& a, std::size_t count);

// This rank's part of q . M (1 + dt gamma / mu) q over the free rows of [0, count): the mass
// part of q . A q.
double mass_dot(const ImplicitSystem& s, const Vectors& q, std::size_t count);

// y_i += a x_i and y_i = x_i + b y_i, rows [0, count).
void axpy(double a, const Vectors& x, Vectors& y, std::size_t count);
void xpby(const Vectors& x, double b, Vectors& y, std::size_t count);

// out_i = x_i + h q_i for every row of x (owned and ghost: the gradient reads both).
void displaced(const Vectors& x, double h, const Vectors& q, Vectors& out);

// The right-hand side b = M v0 + dt (M g - grad), zero where held.
void implicit_rhs(const ImplicitSystem& s, const Vectors& velocity, const Vectors& gradient,
                  std::size_t count, Vectors& out);

// out = M (1 + dt gamma / mu) q + dt^2 (grad(x + h q) - grad(x - h q)) / (2 h), zero where held.
void implicit_product(const ImplicitSystem& s, const Vectors& q, const Vectors& gradient_plus,
                      const Vectors& gradient_minus, double h, std::size_t count, Vectors& out);

// The gradient that makes advance_vertices' explicit update give v1 exactly:
// grad0 + (b - M (1 + dt gamma / mu) v1) / dt (= grad0 + dt H v1 where the solve converged), so
// that contact, friction and held vertices are applied as in the explicit step.
void implicit_gradient(const ImplicitSystem& s, const Vectors& rhs, const Vectors& velocity,
                       std::size_t count, Vectors& gradient);

}  // namespace apron::cloth
