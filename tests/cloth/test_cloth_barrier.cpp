// The colliders' contact barrier of the implicit step (kernels/cloth/barrier.hpp) against its own
// definition: b's derivatives against central differences, each row's impulse and Hessian block
// against differences of the energies the line search sums, the friction's lagged rows, and the
// preconditioner's blocks against the existing mass, friction and block-Jacobi ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cloth/barrier.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

TEST(ClothBarrier, ValueAndDerivativesAgreeWithDifferences) {
  const double band = 0.005, h = 1e-7 * band;
  // Inside the band, across the Taylor continuation's joint (1% of the band) and past the
  // singular surface (s <= 0, where the continuation keeps the energy finite).
  for (const double t : {0.999, 0.9, 0.5, 0.1, 0.0105, 0.01, 0.0095, 0.001, 0.0, -0.02}) {
    const double s = t * band;
    const BarrierValue b = barrier_value(s, band);
    const BarrierValue plus = barrier_value(s + h, band), minus = barrier_value(s - h, band);
    EXPECT_NEAR(b.slope, (plus.value - minus.value) / (2 * h), 1e-6 * std::fabs(b.slope) + 1e-12)
        << t;
    EXPECT_NEAR(b.curvature, (plus.slope - minus.slope) / (2 * h),
                1e-5 * std::fabs(b.curvature) + 1e-9)
        << t;
    EXPECT_GT(b.value, 0) << t;
    EXPECT_LT(b.slope, 0) << t;  // it pushes out everywhere in the band
    EXPECT_GT(b.curvature, 0) << t;
  }
  // Beyond the band: nothing; at its edge b, b' and b'' vanish together.
  const BarrierValue beyond = barrier_value(1.5 * band, band);
  EXPECT_EQ(beyond.value, 0);
  EXPECT_EQ(beyond.slope, 0);
  const BarrierValue edge = barrier_value(band * (1 - 1e-6), band);
  EXPECT_LT(edge.value, 1e-15 * band * band);
  EXPECT_LT(std::fabs(edge.slope), 1e-9 * band);
  EXPECT_LT(edge.curvature, 1e-5);
}

// Rows near a sphere, the floor and a box (one of them in two bands at once, one pinned, one far
// from all): the impulse is -dt dE/dx and n.(block n) is dt^2 d^2E/dn^2, by central differences
// of barrier_energies.
TEST(ClothBarrier, ImpulseAndBlockAreTheEnergysDerivatives) {
  const std::vector<Collider> colliders{
      {Collider::sphere, {0, 0, 0.2}, {}, {}, 0.25, 0, 0.3},
      {Collider::floor, {}, {}, {}, 0, 0, 0.5},
      {Collider::box, {}, {0.4, -0.1, 0}, {0.6, 0.1, 0.1}, 0, 0, 0.2}};
  const double dt = 1.0 / 240;
  const ContactBarrier b{0.005, 0.005, 1 / (dt * dt)};
  const std::vector<V3> end{{0.01, 0.02, 0.2 + 0.25 + 0.007},  // over the sphere, in its band
                            {0.3, 0.0, 0.0062},                // over the floor
                            {0.5, 0.0, 0.1 + 0.0051},          // over the box's top
                            {0.5, 0.0, 0.1 + 0.0051},          // the same, pinned
                            {-0.3, 0.2, 0.5},                  // far from all
                            {0.5, 0.1 + 0.008, 0.0093}};       // the box's side and the floor
  const std::size_t n = end.size();
  const std::vector<double> mass{0.01, 0.02, 0.015, 0.015, 0.01, 0.03};
  const std::vector<std::uint8_t> pinned{0, 0, 0, 1, 0, 0};
  DeviceVector<double> mass_device;
  DeviceVector<std::uint8_t> pinned_device;
  DeviceVector<Collider> colliders_device;
  to_device(mass, mass_device);
  to_device(pinned, pinned_device);
  to_device(colliders, colliders_device);
  const ImplicitSystem system{&mass_device, &pinned_device, dt, 0.5, {0, 0, -9.81}};
  const auto energies = [&](const std::vector<V3>& x) {
    Vectors x_device;
    to_device(x, x_device);
    DeviceVector<double> out(n);
    barrier_energies(system, b, x_device, colliders_device, n, out);
    return to_host(out);
  };
  Vectors end_device, impulse(n);
  DeviceVector<Block3> curvature(n);
  to_device(end, end_device);
  barrier_terms(system, b, end_device, colliders_device, n, impulse, curvature);
  const std::vector<V3> got = to_host(impulse);
  const std::vector<Block3> blocks = to_host(curvature);
  const std::vector<double> energy = energies(end);
  const double h = 1e-8;
  for (std::size_t i = 0; i < n; ++i) {
    double largest = 0;
    for (int axis = 0; axis < 3; ++axis) {
      std::vector<V3> plus = end, minus = end;
      (axis == 0 ? plus[i].x : axis == 1 ? plus[i].y : plus[i].z) += h;
      (axis == 0 ? minus[i].x : axis == 1 ? minus[i].y : minus[i].z) -= h;
      const double derivative = (energies(plus)[i] - energies(minus)[i]) / (2 * h);
      const double component = axis == 0 ? got[i].x : axis == 1 ? got[i].y : got[i].z;
      EXPECT_NEAR(component, -dt * derivative, 1e-6 * std::fabs(dt * derivative) + 1e-14)
          << "row " << i << " axis " << axis;
      largest = std::fmax(largest, std::fabs(component));
    }
    if (i == 3 || i == 4) {  // pinned, far: nothing
      EXPECT_EQ(energy[i], 0) << i;
      EXPECT_EQ(largest, 0) << i;
      for (const double entry : blocks[i].m) EXPECT_EQ(entry, 0) << i;
      continue;
    }
    EXPECT_GT(energy[i], 0) << i;
    // Along the impulse's direction (the normal, for the rows in one band): the second
    // derivative of the energy in v.
    const V3 u = (1 / norm(got[i])) * got[i];
    const double m[9] = {blocks[i].m[0], blocks[i].m[1], blocks[i].m[2],
                         blocks[i].m[3], blocks[i].m[4], blocks[i].m[5],
                         blocks[i].m[6], blocks[i].m[7], blocks[i].m[8]};
    const V3 mu{m[0] * u.x + m[1] * u.y + m[2] * u.z, m[3] * u.x + m[4] * u.y + m[5] * u.z,
                m[6] * u.x + m[7] * u.y + m[8] * u.z};
    // (A longer step than the first derivatives': the positions' round-off, ~1e-17 m, over h^2.)
    const double k = 1e-6;
    std::vector<V3> plus = end, minus = end;
    plus[i] += k * u;
    minus[i] += (-k) * u;
    const double second = (energies(plus)[i] - 2 * energy[i] + energies(minus)[i]) / (k * k);
    if (i != 5) {  // (row 5 lies in two bands: its impulse is no normal of either)
      EXPECT_NEAR(dot(u, mu), dt * dt * second, 1e-4 * dt * dt * second) << i;
    }
    EXPECT_GT(dot(u, mu), 0) << i;
  }
}

// Rows within the band at x0 get the collider that pushes hardest, with its coefficient and the
// impulse dt kappa |b'(s)|; rows beyond it stay free.
TEST(ClothBarrier, FrictionRowsTakeTheHardestPush) {
  const std::vector<Collider> colliders{{Collider::floor, {}, {}, {}, 0, 0, 0.5},
                                        {Collider::floor, {}, {}, {}, 0, 0.003, 0.2}};
  const double dt = 0.01;
  const ContactBarrier b{0.005, 0.005, 1 / (dt * dt)};
  const std::vector<V3> x{{0, 0, 0.0064}, {0, 0, 0.02}};
  DeviceVector<double> mass;
  DeviceVector<std::uint8_t> pinned;
  DeviceVector<Collider> colliders_device;
  to_device(std::vector<double>{0.02, 0.02}, mass);
  to_device(std::vector<std::uint8_t>{0, 0}, pinned);
  to_device(colliders, colliders_device);
  const ImplicitSystem system{&mass, &pinned, dt, 0, {0, 0, -9.81}};
  Vectors x_device;
  to_device(x, x_device);
  DeviceVector<ContactConstraint> rows(2);
  barrier_friction_rows(system, b, x_device, colliders_device, 2, rows);
  const std::vector<ContactConstraint> got = to_host(rows);
  // The second floor (3 mm higher) is the nearer: s = 0.0064 - 0.003 - 0.005 < 0.0064 - 0.005.
  const double s = 0.0064 - 0.003 - 0.005;
  EXPECT_DOUBLE_EQ(got[0].friction, 0.2);
  EXPECT_DOUBLE_EQ(got[0].normal.z, 1);
  EXPECT_NEAR(got[0].impulse, -0.02 * barrier_value(s, 0.005).slope / dt, 1e-15);
  EXPECT_EQ(got[1].impulse, 0);
  EXPECT_EQ(got[1].normal.z, 0);
}

// A lag changes a row where its Coulomb bound mu p appears, vanishes or moves by more than the
// tolerance; an impulse without friction (mu = 0) never does.
TEST(ClothBarrier, FrictionLagsCompareTheCoulombBound) {
  const auto row = [](double friction, double impulse) {
    ContactConstraint c;
    c.normal = {0, 0, 1};
    c.friction = friction;
    c.impulse = impulse;
    return c;
  };
  const std::vector<ContactConstraint> before{row(0, 1), row(0.5, 1), row(0.5, 1), row(0.5, 0),
                                              row(0.5, 1)};
  const std::vector<ContactConstraint> after{row(0, 3), row(0.5, 1.05), row(0.5, 1.2), row(0.5, 1),
                                             row(0.5, 0)};
  DeviceVector<ContactConstraint> a, b;
  to_device(before, a);
  to_device(after, b);
  DeviceVector<std::uint8_t> changed(before.size());
  compare_friction_rows(a, b, 0.1, before.size(), changed);
  EXPECT_EQ(to_host(changed), (std::vector<std::uint8_t>{0, 0, 1, 1, 1}));
}

// z = (A + C + F)^-1 r: with C = 0 the mass and friction preconditioner's z and the block-Jacobi
// one's; with C, A z + C z = r row by row.
TEST(ClothBarrier, PreconditionerSolvesEachRowsBlock) {
  const std::size_t n = 3;
  DeviceVector<double> mass;
  DeviceVector<std::uint8_t> pinned;
  to_device(std::vector<double>{0.02, 0.03, 0.01}, mass);
  to_device(std::vector<std::uint8_t>{0, 0, 1}, pinned);
  const double dt = 0.01, damping = 0.5;
  const ImplicitSystem system{&mass, &pinned, dt, damping, {0, 0, -9.81}};
  std::vector<ContactConstraint> rows(n);
  rows[1].normal = {0, 0, 1};
  rows[1].friction = 0.4;
  rows[1].impulse = 0.002;
  DeviceVector<ContactConstraint> rows_device;
  to_device(rows, rows_device);
  const std::vector<V3> r{{0.3, -0.2, 0.1}, {-0.1, 0.25, 0.4}, {1, 1, 1}};
  const std::vector<V3> v{{0, 0, 0}, {1e-5, 2e-5, 0}, {0, 0, 0}};
  Vectors r_device, v_device, z(n), reference(n);
  to_device(r, r_device);
  to_device(v, v_device);
  const double eps = 1e-4;
  DeviceVector<Block3> zero(n);
  barrier_precondition(system, nullptr, zero, rows_device, eps, v_device, r_device, n, z);
  mass_precondition(system, r_device, n, reference);
  friction_precondition(system, rows_device, eps, v_device, r_device, n, reference);
  std::vector<V3> a = to_host(z), e = to_host(reference);
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_NEAR(norm(a[i] - e[i]), 0, 1e-12 * norm(e[i]) + 1e-300) << "mass " << i;
  // Block-Jacobi blocks, C = 0.
  DeviceVector<Block3> inverse;
  to_device(std::vector<Block3>{{{300, 40, 0, 40, 200, 10, 0, 10, 50}},
                                {{100, 0, 0, 0, 120, 0, 0, 0, 80}},
                                {{1, 0, 0, 0, 1, 0, 0, 0, 1}}},
            inverse);
  invert_blocks(system, n, inverse);
  const std::vector<ContactConstraint> free_rows(n);
  to_device(free_rows, rows_device);
  barrier_precondition(system, &inverse, zero, rows_device, eps, v_device, r_device, n, z);
  block_precondition(inverse, r_device, n, reference);
  a = to_host(z), e = to_host(reference);
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(norm(a[i] - e[i]), 0, 1e-12 * norm(e[i])) << "blocks " << i;
  EXPECT_EQ(norm(a[2]), 0);  // pinned
  // The mass with a barrier block C: M' z + C z = r.
  const Block3 c{{5, 1, 0, 1, 3, 0.5, 0, 0.5, 40}};
  DeviceVector<Block3> curvature;
  to_device(std::vector<Block3>{c, c, c}, curvature);
  barrier_precondition(system, nullptr, curvature, rows_device, eps, v_device, r_device, n, z);
  a = to_host(z);
  const double masses[2] = {0.02, 0.03};
  for (std::size_t i = 0; i < 2; ++i) {
    const double inertia = masses[i] * (1 + dt * damping);
    const V3 x = a[i];
    const V3 back{inertia * x.x + c.m[0] * x.x + c.m[1] * x.y + c.m[2] * x.z,
                  inertia * x.y + c.m[3] * x.x + c.m[4] * x.y + c.m[5] * x.z,
                  inertia * x.z + c.m[6] * x.x + c.m[7] * x.y + c.m[8] * x.z};
    EXPECT_NEAR(norm(back - r[i]), 0, 1e-12 * norm(r[i])) << "barrier " << i;
  }
}

}  // namespace
}  // namespace apron::cloth
