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

struct AnalyticTerms {
  const std::uint8_t* pinned;
  const double* mass;
  double dt;
  ContactBarrier b;
  const V3* end;
  const Collider* colliders;
  int collider_count;
  V3* impulse;
  Block3* curvature;
  APRON_HD void operator()(std::size_t i) const {
    V3 sum{0, 0, 0};
    Block3 block;
    if (!pinned[i])
      for (int k = 0; k < collider_count; ++k) {
        const Gap g = analytic_gap(colliders[k], end[i], b);
        if (g.near) add_terms(b.stiffness * mass[i], dt, g, b.band, sum, block);
      }
    impulse[i] = sum;
    curvature[i] = block;
  }
};

struct MeshTerms {
  const std::uint8_t* pinned;
  const double* mass;
  double dt;
  ContactBarrier b;
  const V3* end;
  MeshColliderStep step;
  V3* impulse;
  Block3* curvature;
  APRON_HD void operator()(std::size_t i) const {
    if (pinned[i]) return;
    const Gap g = mesh_gap(step, step.after, end[i], b);
    if (g.near) add_terms(b.stiffness * mass[i], dt, g, b.band, impulse[i], curvature[i]);
  }
};

struct AnalyticEnergies {
  const std::uint8_t* pinned;
  const double* mass;
  ContactBarrier b;
  const V3* end;
  const Collider* colliders;
  int collider_count;
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    double sum = 0;
    if (!pinned[i])
      for (int k = 0; k < collider_count; ++k) {
        const Gap g = analytic_gap(colliders[k], end[i], b);
        if (g.near) sum += barrier_value(g.s, b.band).value;
      }
    out[i] = b.stiffness * mass[i] * sum;
  }
};

struct MeshEnergies {
  const std::uint8_t* pinned;
  const double* mass;
  ContactBarrier b;
  const V3* end;
  MeshColliderStep step;
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    if (pinned[i]) return;
    const Gap g = mesh_gap(step, step.after, end[i], b);
    if (g.near) out[i] += b.stiffness * mass[i] * barrier_value(g.s, b.band).value;
  }
};

struct BarrierProduct {
  const Block3* curvature;
  const V3* q;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    const double* m = curvature[i].m;
    const V3 x = q[i];
    out[i] += V3{m[0] * x.x + m[1] * x.y + m[2] * x.z, m[3] * x.x + m[4] * x.y + m[5] * x.z,
                 m[6] * x.x + m[7] * x.y + m[8] * x.z};
  }
};

// The friction row of a collider at gap g: its impulse over the step dt kappa |b'(s)|.
APRON_HD inline ContactConstraint friction_row(double kappa, double dt, const Gap& g, double band,
                                               double friction) {
  ContactConstraint c;
  c.normal = g.normal;
  c.friction = friction;
  c.wall_velocity = g.wall;
  c.impulse = -dt * kappa * barrier_value(g.s, band).slope;
  return c;
}

struct AnalyticFrictionRows {
  const std::uint8_t* pinned;
  const double* mass;
  double dt;
  ContactBarrier b;
  const V3* x;
  const Collider* colliders;
  int collider_count;
  ContactConstraint* out;
  APRON_HD void operator()(std::size_t i) const {
    ContactConstraint row;
    if (!pinned[i])
      for (int k = 0; k < collider_count; ++k) {
        const Gap g = analytic_gap(colliders[k], x[i], b);
        if (!g.near) continue;
        const ContactConstraint c =
            friction_row(b.stiffness * mass[i], dt, g, b.band, colliders[k].friction);
        if (c.impulse > row.impulse) row = c;
      }
    out[i] = row;
  }
};

struct MeshFrictionRows {
  const std::uint8_t* pinned;
  const double* mass;
  double dt;
  ContactBarrier b;
  const V3* x;
  MeshColliderStep step;
  BodyPose pose;
  ContactConstraint* out;
  APRON_HD void operator()(std::size_t i) const {
    if (pinned[i]) return;
    const Gap g = mesh_gap(step, pose, x[i], b);
    if (!g.near) return;
    const ContactConstraint c = friction_row(b.stiffness * mass[i], dt, g, b.band, step.friction);
    if (c.impulse > out[i].impulse) out[i] = c;
  }
};

struct CompareFrictionRows {
  const ContactConstraint* before;
  const ContactConstraint* after;
  double tolerance;
  std::uint8_t* changed;
  APRON_HD void operator()(std::size_t i) const {
    const double a = before[i].impulse, b = after[i].impulse;
    const double difference = a > b ? a - b : b - a;
    changed[i] = (a > 0) != (b > 0) || difference > tolerance * (a > b ? a : b) ? 1 : 0;
  }
};

}  // namespace

void barrier_terms(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                   const DeviceVector<Collider>& colliders, std::size_t count, Vectors& impulse,
                   DeviceVector<Block3>& curvature) {
  for_each_index(count,
                 AnalyticTerms{raw(*s.pinned), raw(*s.mass), s.dt, b, raw(end), raw(colliders),
                               static_cast<int>(colliders.size()), raw(impulse), raw(curvature)});
}

void add_mesh_barrier_terms(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                            const MeshColliderStep& collider, std::size_t count, Vectors& impulse,
                            DeviceVector<Block3>& curvature) {
  for_each_index(count, MeshTerms{raw(*s.pinned), raw(*s.mass), s.dt, b, raw(end), collider,
                                  raw(impulse), raw(curvature)});
}

void barrier_energies(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                      const DeviceVector<Collider>& colliders, std::size_t count,
                      DeviceVector<double>& out) {
  for_each_index(count, AnalyticEnergies{raw(*s.pinned), raw(*s.mass), b, raw(end), raw(colliders),
                                         static_cast<int>(colliders.size()), raw(out)});
}

void add_mesh_barrier_energies(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& end,
                               const MeshColliderStep& collider, std::size_t count,
                               DeviceVector<double>& out) {
  for_each_index(count,
                 MeshEnergies{raw(*s.pinned), raw(*s.mass), b, raw(end), collider, raw(out)});
}

void add_barrier_product(const DeviceVector<Block3>& curvature, const Vectors& q, std::size_t count,
                         Vectors& out) {
  for_each_index(count, BarrierProduct{raw(curvature), raw(q), raw(out)});
}

void barrier_friction_rows(const ImplicitSystem& s, const ContactBarrier& b, const Vectors& points,
                           const DeviceVector<Collider>& colliders, std::size_t count,
                           DeviceVector<ContactConstraint>& out) {
  for_each_index(
      count, AnalyticFrictionRows{raw(*s.pinned), raw(*s.mass), s.dt, b, raw(points),
                                  raw(colliders), static_cast<int>(colliders.size()), raw(out)});
}

void add_mesh_barrier_friction_rows(const ImplicitSystem& s, const ContactBarrier& b,
                                    const Vectors& points, const MeshColliderStep& collider,
                                    const BodyPose& pose, std::size_t count,
                                    DeviceVector<ContactConstraint>& out) {
  for_each_index(count, MeshFrictionRows{raw(*s.pinned), raw(*s.mass), s.dt, b, raw(points),
                                         collider, pose, raw(out)});
}

void compare_friction_rows(const DeviceVector<ContactConstraint>& before,
                           const DeviceVector<ContactConstraint>& after, double tolerance,
                           std::size_t count, DeviceVector<std::uint8_t>& changed) {
  for_each_index(count, CompareFrictionRows{raw(before), raw(after), tolerance, raw(changed)});
}

}  // namespace apron::cloth
