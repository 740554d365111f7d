#include "kernels/cloth/barrier.hpp"

#include "kernels/cloth/self_contact.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

// One collider's gap at x (s, from the barrier's singular surface) and its outward normal there.
struct Gap {
  double s = 0;
  V3 normal{0, 0, 1};
  V3 wall{0, 0, 0};   // the collider's velocity at the contact point
  bool near = false;  // within the band
};

APRON_HD inline Gap analytic_gap(const Collider& c, const V3& x, const ContactBarrier& b) {
  const Contact k = contact(c, x, b.inner);
  return {-k.depth, k.normal, V3{0, 0, 0}, -k.depth < b.band};
}

// The mesh's contact search (in float) reaches inner + band and finds the closest triangle; the
// distance to that triangle is then taken again in float64. The search's float distance moved by
// ~1e-8 m with the point's last bits, and the barrier's energy with it, by more than Newton's
// line search resolves near a solution: with it the mesh colliders' runs stalled at a relative
// residual of ~0.015.
APRON_HD inline Gap mesh_gap(const MeshColliderStep& step, const BodyPose& pose, const V3& x,
                             const ContactBarrier& b) {
  const double reach = b.inner + b.band;
  const MeshContact m = mesh_contact(step.surface, pose, x, reach);
  Gap g;
  if (!(m.contact.depth > 0)) return g;
  const Vec4* corner = step.surface.search.corners + 3 * m.triangle;
  const auto point = [](const Vec4& c) { return V3{c.x, c.y, c.z}; };
  const PairGeometry exact =
      point_triangle(pose.to_body(x), point(corner[0]), point(corner[1]), point(corner[2]));
  const double side = reach - m.contact.depth < 0 ? -1.0 : 1.0;  // the search's sign: inside < 0
  g.s = side * exact.distance - b.inner;
  g.normal = exact.distance > 0 ? pose.rotate(side * exact.normal) : m.contact.normal;
  g.wall = (1.0 / step.dt) * (step.after.apply(m.body_point) - step.before.apply(m.body_point));
  g.near = true;
  return g;
}

// The impulse over the step, -dt kappa b' n, and the Hessian in v, dt^2 kappa b'' n n^T.
APRON_HD inline void add_terms(double kappa, double dt, const Gap& g, double band, V3& impulse,
                               Block3& curvature) {
  const BarrierValue v = barrier_value(g.s, band);
  impulse += (-dt * kappa * v.slope) * g.normal;
  const double k = dt * dt * kappa * v.curvature;
  const double n[3] = {g.normal.x, g.normal.y, g.normal.z};
  for (int a = 0; a < 3; ++a)
    for (int c = 0; c < 3; ++c) curvature.m[3 * a + c] += k * n[a] * n[c];
}

// The colliders a kernel visits at a point: each one whose band holds it, with its Coulomb
// coefficient.
struct AnalyticColliders {
  const Collider* colliders;
  int count;
  template <class Visit>
  APRON_HD void each(const V3& x, const ContactBarrier& b, Visit&& visit) const {
    for (int k = 0; k < count; ++k) {
      const Gap g = analytic_gap(colliders[k], x, b);
      if (g.near) visit(g, colliders[k].friction);
    }
  }
};

struct OneMesh {
  MeshColliderStep step;
  BodyPose pose;
  template <class Visit>
  APRON_HD void each(const V3& x, const ContactBarrier& b, Visit&& visit) const {
    const Gap g = mesh_gap(step, pose, x, b);
    if (g.near) visit(g, step.friction);
  }
};

// Each kernel overwrites its rows (add = false: the analytic colliders, first) or adds to them
// (a mesh collider's); pinned rows get nothing.
struct RowsAt {
  const std::uint8_t* pinned;
  const double* mass;
  double dt;
  ContactBarrier b;
  const V3* x;
  bool add;
};

template <class Colliders>
struct Terms {
  RowsAt rows;
  Colliders colliders;
  V3* impulse;
  Block3* curvature;
  APRON_HD void operator()(std::size_t i) const {
    V3 sum = rows.add ? impulse[i] : V3{0, 0, 0};
    Block3 block = rows.add ? curvature[i] : Block3{};
    const double kappa = rows.b.stiffness * rows.mass[i];
    if (!rows.pinned[i])
      colliders.each(rows.x[i], rows.b, [&](const Gap& g, double) {
        add_terms(kappa, rows.dt, g, rows.b.band, sum, block);
      });
    impulse[i] = sum;
    curvature[i] = block;
  }
};

template <class Colliders>
struct Energies {
  RowsAt rows;
  Colliders colliders;
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    double sum = rows.add ? out[i] : 0.0;
    const double kappa = rows.b.stiffness * rows.mass[i];
    if (!rows.pinned[i])
      colliders.each(rows.x[i], rows.b, [&](const Gap& g, double) {
        sum += kappa * barrier_value(g.s, rows.b.band).value;
      });
    out[i] = sum;
  }
};

// Each row's friction from the collider that pushes it hardest: its impulse over the step
// dt kappa |b'(s)|.
template <class Colliders>
struct FrictionRows {
  RowsAt rows;
  Colliders colliders;
  ContactConstraint* out;
  APRON_HD void operator()(std::size_t i) const {
    ContactConstraint row = rows.add ? out[i] : ContactConstraint{};
    const double kappa = rows.b.stiffness * rows.mass[i];
    if (!rows.pinned[i])
      colliders.each(rows.x[i], rows.b, [&](const Gap& g, double friction) {
        const double impulse = -rows.dt * kappa * barrier_value(g.s, rows.b.band).slope;
        if (!(impulse > row.impulse)) return;
        row = ContactConstraint{g.normal, friction, g.wall};
        row.impulse = impulse;
      });
    out[i] = row;
  }
};

struct BarrierProduct {
  const Block3* curvature;
  const V3* q;
  V3* out;
  APRON_HD void operator()(std::size_t i) const { out[i] += times(curvature[i], q[i]); }
};

struct CompareFrictionRows {
  const ContactConstraint* before;
  const ContactConstraint* after;
  double tolerance;
  std::uint8_t* changed;
  APRON_HD void operator()(std::size_t i) const {
    // The bound friction may take, mu p: with mu = 0 a row's impulse does not matter.
    const double a = before[i].friction * before[i].impulse;
    const double b = after[i].friction * after[i].impulse;
    const double difference = a > b ? a - b : b - a;
    changed[i] = (a > 0) != (b > 0) || difference > tolerance * (a > b ? a : b) ? 1 : 0;
  }
};

RowsAt rows_of(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& x, bool add) {
  return {raw(*s.pinned), raw(*s.mass), s.dt, b, raw(x), add};
}

AnalyticColliders analytic(const DeviceVector<Collider>& colliders) {
  return {raw(colliders), static_cast<int>(colliders.size())};
}

}  // namespace

void barrier_terms(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                   const DeviceVector<Collider>& colliders, std::size_t count, Vectors& impulse,
                   DeviceVector<Block3>& curvature) {
  for_each_index(count, Terms<AnalyticColliders>{rows_of(s, b, end, false), analytic(colliders),
                                                 raw(impulse), raw(curvature)});
}

void add_mesh_barrier_terms(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                            const MeshColliderStep& collider, std::size_t count, Vectors& impulse,
                            DeviceVector<Block3>& curvature) {
  for_each_index(
      count,
      Terms<OneMesh>{
          rows_of(s, b, end, true), {collider, collider.after}, raw(impulse), raw(curvature)});
}

void barrier_energies(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                      const DeviceVector<Collider>& colliders, std::size_t count,
                      DeviceVector<double>& out) {
  for_each_index(
      count, Energies<AnalyticColliders>{rows_of(s, b, end, false), analytic(colliders), raw(out)});
}

void add_mesh_barrier_energies(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                               const MeshColliderStep& collider, std::size_t count,
                               DeviceVector<double>& out) {
  for_each_index(count,
                 Energies<OneMesh>{rows_of(s, b, end, true), {collider, collider.after}, raw(out)});
}

void add_barrier_product(const DeviceVector<Block3>& curvature, const Vectors& q, std::size_t count,
                         Vectors& out) {
  for_each_index(count, BarrierProduct{raw(curvature), raw(q), raw(out)});
}

void barrier_friction_rows(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& points,
                           const DeviceVector<Collider>& colliders, std::size_t count,
                           DeviceVector<ContactConstraint>& out) {
  for_each_index(count, FrictionRows<AnalyticColliders>{rows_of(s, b, points, false),
                                                        analytic(colliders), raw(out)});
}

void add_mesh_barrier_friction_rows(const ImplicitSystem& s, const ContactBarrier& b,
                                    const Vectors& points, const MeshColliderStep& collider,
                                    const BodyPose& pose, std::size_t count,
                                    DeviceVector<ContactConstraint>& out) {
  for_each_index(count,
                 FrictionRows<OneMesh>{rows_of(s, b, points, true), {collider, pose}, raw(out)});
}

void compare_friction_rows(const DeviceVector<ContactConstraint>& before,
                           const DeviceVector<ContactConstraint>& after, double tolerance,
                           std::size_t count, DeviceVector<std::uint8_t>& changed) {
  for_each_index(count, CompareFrictionRows{raw(before), raw(after), tolerance, raw(changed)});
}

}  // namespace apron::cloth
