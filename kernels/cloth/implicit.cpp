#include "kernels/cloth/implicit.hpp"

#include <cmath>
#include <cstdint>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/symmetric3.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

struct Dot {
  const V3* a;
  const V3* b;
  APRON_HD double operator()(std::size_t i) const { return dot(a[i], b[i]); }
};

// |term(i)| and round(term(i) x scale), for the two passes of a reproducible sum.
template <class Term>
struct Magnitude {
  Term term;
  APRON_HD double operator()(std::size_t i) const {
    using std::fabs;
    return fabs(term(i));
  }
};
template <class Term>
struct FixedPoint {
  Term term;
  double scale;
  APRON_HD std::int64_t operator()(std::size_t i) const {
    using std::llround;
    return llround(term(i) * scale);
  }
};

template <class Term>
double largest(std::size_t count, Term term) {
  return transform_reduce(count, Magnitude<Term>{term}, 0.0, Maximum{});
}
template <class Term>
std::int64_t fixed_sum(std::size_t count, Term term, double scale) {
  return transform_reduce(count, FixedPoint<Term>{term, scale}, std::int64_t{0}, Plus{});
}

struct Norm {
  const V3* a;
  APRON_HD double operator()(std::size_t i) const { return norm(a[i]); }
};

struct Unfinite {
  const V3* a;
  APRON_HD std::int64_t operator()(std::size_t i) const { return is_finite(a[i]) ? 0 : 1; }
};

struct Entry {
  const double* a;
  APRON_HD double operator()(std::size_t i) const { return a[i]; }
};

struct Difference {
  const double* after;
  const double* before;
  APRON_HD double operator()(std::size_t i) const { return after[i] - before[i]; }
};

struct Axpy {
  double a;
  const V3* x;
  V3* y;
  APRON_HD void operator()(std::size_t i) const { y[i] += a * x[i]; }
};

struct Xpby {
  const V3* x;
  double b;
  V3* y;
  APRON_HD void operator()(std::size_t i) const { y[i] = x[i] + b * y[i]; }
};

struct Displaced {
  const V3* x;
  double h;
  const V3* q;
  V3* out;
  APRON_HD void operator()(std::size_t i) const { out[i] = x[i] + h * q[i]; }
};

// The rows of the system, with its constants.
struct Rows {
  const double* mass;
  const std::uint8_t* pinned;
  double dt, damping_rate;
  V3 gravity;
  Rows(const ImplicitSystem& s)
      : mass(raw(*s.mass)),
        pinned(raw(*s.pinned)),
        dt(s.dt),
        damping_rate(s.damping_rate),
        gravity(s.gravity) {}
  APRON_HD double damped_mass(std::size_t i) const { return mass[i] * (1 + dt * damping_rate); }
  // M v + dt (M g - gradient): the momentum gravity and the forces give row i over the step.
  APRON_HD V3 momentum(std::size_t i, const V3& v, const V3& gradient) const {
    return mass[i] * v + dt * (mass[i] * gravity - gradient);
  }
};

struct MassDot {
  Rows rows;
  const V3* q;
  APRON_HD double operator()(std::size_t i) const {
    return rows.pinned[i] ? 0.0 : rows.damped_mass(i) * dot(q[i], q[i]);
  }
};

struct MassPrecondition {
  Rows rows;
  const V3* r;
  V3* z;
  APRON_HD void operator()(std::size_t i) const {
    z[i] = rows.pinned[i] ? V3{0, 0, 0} : (1.0 / rows.damped_mass(i)) * r[i];
  }
};

struct DisplacedColour {
  const V3* x;
  double h;
  int axis;
  const std::uint8_t* colour;
  int c;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    V3 y = x[i];
    if (colour[i] == c) (axis == 0 ? y.x : axis == 1 ? y.y : y.z) += h;
    out[i] = y;
  }
};

struct RecordColumn {
  const V3* plus;
  const V3* base;
  double inverse_h;
  const std::uint8_t* colour;
  int c, axis;
  Block3* blocks;
  APRON_HD void operator()(std::size_t i) const {
    if (colour[i] != c) return;
    const V3 column = inverse_h * (plus[i] - base[i]);
    double* m = blocks[i].m;
    m[axis] = column.x, m[3 + axis] = column.y, m[6 + axis] = column.z;
  }
};

struct InvertBlock {
  Rows rows;
  Block3* blocks;
  APRON_HD void operator()(std::size_t i) const {
    double* m = blocks[i].m;
    if (rows.pinned[i]) {
      for (int k = 0; k < 9; ++k) m[k] = 0;
      return;
    }
    Sym3 h;
    h.m[0] = m[0], h.m[1] = 0.5 * (m[1] + m[3]), h.m[2] = 0.5 * (m[2] + m[6]);
    h.m[3] = m[4], h.m[4] = 0.5 * (m[5] + m[7]), h.m[5] = m[8];
    const Eigen3 e = eigen_symmetric(h);
    const double dt2 = rows.dt * rows.dt, inertia = rows.damped_mass(i);
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) {
        double sum = 0;
        for (int k = 0; k < 3; ++k) {
          const double lambda = e.value[k] > 0 ? e.value[k] : 0.0;
          sum += e.vec[a][k] * e.vec[b][k] / (inertia + dt2 * lambda);
        }
        m[3 * a + b] = sum;
      }
  }
};

struct BlockPrecondition {
  const Block3* inverse;
  const V3* r;
  V3* z;
  APRON_HD void operator()(std::size_t i) const { z[i] = times(inverse[i], r[i]); }
};

struct FreeMotionChange {
  Rows rows;
  const V3* v0;
  const V3* v;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    const double c = rows.dt * rows.damping_rate;
    out[i] = rows.pinned[i] ? V3{0, 0, 0} : (1 / (1 + c)) * (v0[i] + rows.dt * rows.gravity) - v[i];
  }
};

struct Rhs {
  Rows rows;
  const V3* v;
  const V3* gradient;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    out[i] = rows.pinned[i] ? V3{0, 0, 0} : rows.momentum(i, v[i], gradient[i]);
  }
};

struct NewtonResidual {
  Rows rows;
  const V3* v0;
  const V3* v;
  const V3* gradient;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    out[i] = rows.pinned[i] ? V3{0, 0, 0}
                            : rows.momentum(i, v0[i], gradient[i]) - rows.damped_mass(i) * v[i];
  }
};

struct Product {
  Rows rows;
  const V3* q;
  const V3* plus;
  const V3* minus;
  double scale;  // dt^2 / (2 h), or dt^2 / h for forward differences
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    out[i] =
        rows.pinned[i] ? V3{0, 0, 0} : rows.damped_mass(i) * q[i] + scale * (plus[i] - minus[i]);
  }
};

struct EffectiveGradient {
  Rows rows;
  const V3* rhs;
  const V3* v;
  V3* gradient;
  APRON_HD void operator()(std::size_t i) const {
    gradient[i] += (1 / rows.dt) * (rhs[i] - rows.damped_mass(i) * v[i]);
  }
};

struct FindConstraint {
  Rows rows;
  const V3* x;
  const V3* gradient;
  const Collider* colliders;
  int collider_count;
  double thickness, tolerance;
  ContactConstraint* out;
  APRON_HD void operator()(std::size_t i) const {
    ContactConstraint held;
    held.depth = -tolerance;
    if (!rows.pinned[i]) {
      const V3 force = rows.mass[i] * rows.gravity - gradient[i];
      for (int k = 0; k < collider_count; ++k) {
        const Contact c = contact(colliders[k], x[i], thickness);
        if (c.depth > held.depth && dot(force, c.normal) < 0)
          held = {c.normal, colliders[k].friction, V3{0, 0, 0}, c.depth};
      }
    }
    out[i] = held;
  }
};

struct FindMeshConstraint {
  Rows rows;
  const V3* x;
  const V3* gradient;
  MeshColliderStep step;
  double tolerance;
  ContactConstraint* out;
  APRON_HD void operator()(std::size_t i) const {
    if (rows.pinned[i]) return;
    // Reached within thickness + tolerance: its depth then is the search's less the tolerance.
    const MeshContact m = mesh_contact(step.surface, step.before, x[i], step.thickness + tolerance);
    const double depth = m.contact.depth - tolerance;
    const V3 force = rows.mass[i] * rows.gravity - gradient[i];
    if (!(m.contact.depth > 0) || depth <= out[i].depth || dot(force, m.contact.normal) >= 0)
      return;
    const V3 wall =
        (1.0 / step.dt) * (step.after.apply(m.body_point) - step.before.apply(m.body_point));
    out[i] = {m.contact.normal, step.friction, wall, depth};
  }
};

// The velocity a constrained row's normal part is held at: the collider's, plus a landing row's
// approach.
APRON_HD inline V3 held_velocity(const ContactConstraint& c) {
  return c.wall_velocity + c.approach * c.normal;
}

APRON_HD inline bool held(const ContactConstraint& c) {
  return c.normal.x != 0 || c.normal.y != 0 || c.normal.z != 0;
}

// A landing row of the collider whose contact at the end point e is k: see landing_constraints.
APRON_HD inline ContactConstraint landing_row(const Contact& k, const V3& x0, const V3& e,
                                              double friction, const V3& wall, double dt) {
  const double gap = dot(x0 - e, k.normal) - k.depth;
  ContactConstraint c{k.normal, friction, wall, k.depth};
  c.approach = gap > 0 ? -gap / dt : 0.0;
  c.landing = 1;
  return c;
}

struct FindLanding {
  Rows rows;
  const V3* x;
  const V3* end;
  const Collider* colliders;
  int collider_count;
  double thickness, tolerance;
  ContactConstraint* out;
  std::uint8_t* changed;
  APRON_HD void operator()(std::size_t i) const {
    changed[i] = 0;
    if (rows.pinned[i] || held(out[i])) return;
    ContactConstraint landing;
    landing.depth = tolerance;
    for (int k = 0; k < collider_count; ++k) {
      const Contact c = contact(colliders[k], end[i], thickness);
      if (c.depth > landing.depth)
        landing = landing_row(c, x[i], end[i], colliders[k].friction, V3{0, 0, 0}, rows.dt);
    }
    if (landing.landing == 0) return;
    out[i] = landing;
    changed[i] = 1;
  }
};

struct FindMeshLanding {
  Rows rows;
  const V3* x;
  const V3* end;
  MeshColliderStep step;
  double tolerance;
  ContactConstraint* out;
  std::uint8_t* changed;
  APRON_HD void operator()(std::size_t i) const {
    const bool landed_now = changed[i] != 0;
    if (rows.pinned[i] || (held(out[i]) && !landed_now)) return;
    const MeshContact m = mesh_contact(step.surface, step.before, end[i], step.thickness);
    if (!(m.contact.depth > tolerance) || (landed_now && m.contact.depth <= out[i].depth)) return;
    const V3 wall =
        (1.0 / step.dt) * (step.after.apply(m.body_point) - step.before.apply(m.body_point));
    out[i] = landing_row(m.contact, x[i], end[i], step.friction, wall, rows.dt);
    changed[i] = 1;
  }
};

struct ReleasePulling {
  const V3* r;
  ContactConstraint* c;
  std::uint8_t* changed;
  APRON_HD void operator()(std::size_t i) const {
    changed[i] = 0;
    if (c[i].landing == 0 || !(dot(r[i], c[i].normal) > 0)) return;
    c[i] = ContactConstraint{};
    changed[i] = 1;
  }
};

// 1 where a row's byte flag is set: counts of searching, changed, ... rows.
struct Flagged {
  const std::uint8_t* flag;
  APRON_HD std::int64_t operator()(std::size_t i) const { return flag[i] ? 1 : 0; }
};

struct Filter {
  const ContactConstraint* c;
  V3* v;
  APRON_HD void operator()(std::size_t i) const {
    v[i] = v[i] - dot(v[i], c[i].normal) * c[i].normal;
  }
};

struct Hold {
  const ContactConstraint* c;
  V3* v;
  APRON_HD void operator()(std::size_t i) const {
    v[i] = v[i] - dot(v[i] - held_velocity(c[i]), c[i].normal) * c[i].normal;
  }
};

struct ConstraintFriction {
  Rows rows;
  const ContactConstraint* c;
  const V3* r;
  V3* v;
  APRON_HD void operator()(std::size_t i) const {
    const V3 n = c[i].normal;
    const double impulse = -dot(r[i], n);
    if (rows.pinned[i] || !(impulse > 0)) return;
    const V3 relative = v[i] - c[i].wall_velocity;
    const double along = dot(relative, n);
    v[i] = c[i].wall_velocity + along * n +
           coulomb_slide(relative - along * n, c[i].friction * impulse / rows.mass[i]);
  }
};

// The smoothed Coulomb law of friction_force (IPC's f0, f1) and the terms of its Hessian: the
// sliding velocity u, |u|, and the coefficients a, b of H = a P + b (u/|u|)(u/|u|)^T over
// mu p (P the tangent plane's projection).
struct Slide {
  V3 u{0, 0, 0};
  double speed = 0, f0 = 0, across = 0, along = 0;  // across = f1 / u, along = f1'
};
APRON_HD inline bool has_friction(const ContactConstraint& c) {
  return c.impulse > 0 && c.friction > 0;
}
APRON_HD inline Slide slide_of(const ContactConstraint& c, double eps, const V3& v) {
  Slide s;
  s.u = tangential(v - c.wall_velocity, c.normal);
  s.speed = norm(s.u);
  const double y = s.speed;
  if (y < eps) {
    s.f0 = y * y / eps - y * y * y / (3 * eps * eps);
    s.across = 2 / eps - y / (eps * eps);
    s.along = 2 / eps - 2 * y / (eps * eps);
  } else {
    s.f0 = y - eps / 3;
    s.across = 1 / y;
    s.along = 0;
  }
  if (c.secant > 0) s.along = c.secant;  // friction_predict
  return s;
}

struct FrictionImpulse {
  Rows rows;
  const V3* v0;
  const V3* gradient;
  ContactConstraint* c;
  APRON_HD void operator()(std::size_t i) const {
    const V3 n = c[i].normal;
    if (rows.pinned[i] || dot(n, n) == 0) {
      c[i].impulse = 0;
      return;
    }
    const double p = -(dot(rows.momentum(i, v0[i], gradient[i]), n) -
                       rows.damped_mass(i) * dot(held_velocity(c[i]), n));
    c[i].impulse = p > 0 ? p : 0.0;
  }
};

struct FrictionStart {
  const ContactConstraint* c;
  V3* v;
  APRON_HD void operator()(std::size_t i) const {
    if (has_friction(c[i])) v[i] = held_velocity(c[i]);
  }
};

struct FrictionScale {
  Rows rows;
  const ContactConstraint* c;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    using std::sqrt;
    out[i] = rows.pinned[i] || !has_friction(c[i])
                 ? V3{0, 0, 0}
                 : V3{c[i].friction * c[i].impulse / sqrt(rows.damped_mass(i)), 0, 0};
  }
};

struct FrictionForce {
  const ContactConstraint* c;
  double eps;
  const V3* v;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    if (!has_friction(c[i])) {
      out[i] = V3{0, 0, 0};
      return;
    }
    const Slide s = slide_of(c[i], eps, v[i]);
    // f1(u) u / |u| = (f1 / |u|) u: finite as u -> 0 (f1 / u -> 2 / eps).
    out[i] = (-c[i].friction * c[i].impulse * s.across) * s.u;
  }
};

// (a P + b t t^T) q, t = u / |u|: a = mu p f1 / u, b = mu p (f1' - f1 / u).
struct FrictionProduct {
  const ContactConstraint* c;
  double eps;
  const V3* v;
  const V3* q;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    if (!has_friction(c[i])) return;
    const Slide s = slide_of(c[i], eps, v[i]);
    const double scale = c[i].friction * c[i].impulse;
    const V3 n = c[i].normal;
    const V3 tangent = tangential(q[i], n);
    V3 result = (scale * s.across) * tangent;
    if (s.speed > 0) {
      const V3 t = (1 / s.speed) * s.u;
      result += (scale * (s.along - s.across) * dot(t, q[i])) * t;
    }
    out[i] += result;
  }
};

struct FrictionPredict {
  Rows rows;
  ContactConstraint* c;
  double eps;
  const V3* v;
  const V3* r;
  APRON_HD void operator()(std::size_t i) const {
    if (rows.pinned[i] || !has_friction(c[i])) return;
    const V3 u = tangential(v[i] - c[i].wall_velocity, c[i].normal);
    const double speed = norm(u);
    const double inertia = rows.damped_mass(i);
    const double back = speed >= eps ? -dot(r[i], u) / speed : 0.0;  // -R.t
    c[i].secant =
        back > inertia * speed ? (back / speed - inertia) / (c[i].friction * c[i].impulse) : 0.0;
  }
};

struct FrictionPotential {
  const ContactConstraint* c;
  double eps;
  const V3* v;
  double alpha;
  const V3* step;
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    out[i] = has_friction(c[i])
                 ? c[i].friction * c[i].impulse * slide_of(c[i], eps, v[i] + alpha * step[i]).f0
                 : 0.0;
  }
};

struct FrictionPrecondition {
  Rows rows;
  const ContactConstraint* c;
  double eps;
  const V3* v;
  const V3* r;
  V3* z;
  APRON_HD void operator()(std::size_t i) const {
    if (rows.pinned[i] || !has_friction(c[i])) return;
    const Slide s = slide_of(c[i], eps, v[i]);
    const double inertia = rows.damped_mass(i), scale = c[i].friction * c[i].impulse;
    const V3 n = c[i].normal;
    const V3 tangent = tangential(r[i], n);
    V3 result = (1 / inertia) * dot(r[i], n) * n + (1 / (inertia + scale * s.across)) * tangent;
    if (s.speed > 0) {
      const V3 t = (1 / s.speed) * s.u;
      result +=
          (dot(t, r[i]) * (1 / (inertia + scale * s.along) - 1 / (inertia + scale * s.across))) * t;
    }
    z[i] = result;
  }
};

// The inverse of a 3x3 matrix by its adjugate (the blocks here are symmetric positive definite).
APRON_HD inline Block3 inverse(const Block3& b) {
  const double* m = b.m;
  Block3 r;
  r.m[0] = m[4] * m[8] - m[5] * m[7], r.m[1] = m[2] * m[7] - m[1] * m[8];
  r.m[2] = m[1] * m[5] - m[2] * m[4], r.m[3] = m[5] * m[6] - m[3] * m[8];
  r.m[4] = m[0] * m[8] - m[2] * m[6], r.m[5] = m[2] * m[3] - m[0] * m[5];
  r.m[6] = m[3] * m[7] - m[4] * m[6], r.m[7] = m[1] * m[6] - m[0] * m[7];
  r.m[8] = m[0] * m[4] - m[1] * m[3];
  const double determinant = m[0] * r.m[0] + m[1] * r.m[3] + m[2] * r.m[6];
  for (double& x : r.m) x /= determinant;
  return r;
}

// The friction's Hessian block in v (friction_force's): mu p (across P + (along - across) t t^T),
// P the tangent plane's projection, t the slide's direction.
APRON_HD inline void add_friction_block(const ContactConstraint& c, double eps, const V3& v,
                                        Block3& block) {
  const Slide s = slide_of(c, eps, v);
  const double scale = c.friction * c.impulse;
  const double n[3] = {c.normal.x, c.normal.y, c.normal.z};
  const double t[3] = {s.speed > 0 ? s.u.x / s.speed : 0.0, s.speed > 0 ? s.u.y / s.speed : 0.0,
                       s.speed > 0 ? s.u.z / s.speed : 0.0};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b)
      block.m[3 * a + b] += scale * (s.across * ((a == b ? 1.0 : 0.0) - n[a] * n[b]) +
                                     (s.along - s.across) * t[a] * t[b]);
}

struct BarrierPrecondition {
  Rows rows;
  const Block3* inverse;  // null: the mass preconditioner
  const Block3* curvature;
  const ContactConstraint* c;
  double eps;
  const V3* v;
  const V3* r;
  V3* z;
  APRON_HD void operator()(std::size_t i) const {
    if (rows.pinned[i]) {
      z[i] = V3{0, 0, 0};
      return;
    }
    Block3 block;
    if (inverse != nullptr) {
      block = cloth::inverse(inverse[i]);
    } else {
      const double inertia = rows.damped_mass(i);
      block.m[0] = block.m[4] = block.m[8] = inertia;
    }
    for (int k = 0; k < 9; ++k) block.m[k] += curvature[i].m[k];
    if (has_friction(c[i])) add_friction_block(c[i], eps, v[i], block);
    z[i] = times(cloth::inverse(block), r[i]);
  }
};

// step_i = P inverse_i (P r_i) on colour c, zero elsewhere; P = I - n n^T (n zero on a free row).
struct BlockDescent {
  const Block3* inverse;
  const std::uint8_t* colour;
  int c;
  const ContactConstraint* constraint;
  const V3* r;
  V3* step;
  APRON_HD void operator()(std::size_t i) const {
    if (colour[i] != c) {
      step[i] = V3{0, 0, 0};
      return;
    }
    const V3 n = constraint[i].normal;
    const V3 q = r[i] - dot(r[i], n) * n;
    const V3 z = times(inverse[i], q);
    step[i] = z - dot(z, n) * n;
  }
};

struct StartSearch {
  const std::uint8_t* colour;
  int c;
  std::size_t count;
  double* alpha;
  std::uint8_t* searching;
  APRON_HD void operator()(std::size_t i) const {
    const bool mine = i < count && colour[i] == c;
    alpha[i] = mine ? 1.0 : 0.0;
    searching[i] = mine ? 1 : 0;
  }
};

struct ScaledDisplaced {
  const V3* x;
  double h;
  const double* alpha;
  const V3* q;
  V3* out;
  APRON_HD void operator()(std::size_t i) const { out[i] = x[i] + (h * alpha[i]) * q[i]; }
};

// Row i's share of the potential's change at alpha, and its round-off (2^-48 of the energies it
// reads: the sum of a 2-ring's differences cancels to about that).
struct Share {
  Rows rows;
  const double* before;
  const double* after;
  const V3* step;
  const V3* r;
  const V3* g;
  const std::uint32_t* offsets;
  const std::uint32_t* reach;
  APRON_HD double slope(std::size_t i) const { return -dot(step[i], r[i]); }
  APRON_HD double change(std::size_t i, double alpha, double& round_off) const {
    using std::fabs;
    double elastic = 0, scale = 0;
    for (std::uint32_t k = offsets[i]; k < offsets[i + 1]; ++k) {
      const std::uint32_t v = reach[k];
      elastic += after[v] - before[v];
      scale += fabs(before[v]);
    }
    round_off = 0x1p-48 * scale;
    const double linear = slope(i) - rows.dt * dot(step[i], g[i]);
    const double quadratic = rows.pinned[i] ? 0.0 : rows.damped_mass(i) * dot(step[i], step[i]);
    return alpha * linear + 0.5 * alpha * alpha * quadratic + elastic;
  }
};

struct SearchRound {
  Share share;
  double* alpha;
  std::uint8_t* searching;
  APRON_HD void operator()(std::size_t i) const {
    if (!searching[i]) return;
    const double a = alpha[i];
    double round_off = 0;
    const double change = share.change(i, a, round_off);
    const double slope = share.slope(i);
    constexpr double kArmijo = 1e-4;
    if (-slope <= round_off || change <= kArmijo * a * slope + round_off) {
      searching[i] = 0;
      return;
    }
    const double next = 0.5 * a;
    if (next < 0x1p-20) {
      alpha[i] = 0;
      searching[i] = 0;
    } else {
      alpha[i] = next;
    }
  }
};

struct PullStart {
  const ContactConstraint* c;
  V3* pull;
  APRON_HD void operator()(std::size_t i) const {
    pull[i] = held(c[i]) ? c[i].normal : V3{0, 0, 0};
  }
};

struct PullPass {
  const std::uint32_t* offsets;
  const std::uint32_t* neighbours;
  double fall;
  const V3* in;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    V3 best = in[i];
    double largest = norm(best);
    for (std::uint32_t k = offsets[i]; k < offsets[i + 1]; ++k) {
      const V3 q = in[neighbours[k]];
      const double size = norm(q);
      if (size - fall > largest) {
        largest = size - fall;
        best = (largest / size) * q;
      }
    }
    out[i] = best;
  }
};

struct ContactStart {
  const ContactConstraint* c;
  const V3* pull;
  V3* v;
  APRON_HD void operator()(std::size_t i) const {
    if (held(c[i])) return;
    const double weight = norm(pull[i]);
    if (!(weight > 0)) return;
    const V3 n = (1 / weight) * pull[i];
    const double into = dot(v[i], n);
    if (into < 0) v[i] = v[i] - (weight * into) * n;
  }
};

struct ScaleRows {
  const double* alpha;
  V3* step;
  APRON_HD void operator()(std::size_t i) const { step[i] = alpha[i] * step[i]; }
};

}  // namespace

void start_vertex_search(const DeviceVector<std::uint8_t>& colour, int c, std::size_t count,
                         VertexSearch& search) {
  const std::size_t rows = colour.size();
  search.alpha.resize(rows);
  search.searching.resize(rows);
  for_each_index(rows,
                 StartSearch{raw(colour), c, count, raw(search.alpha), raw(search.searching)});
}

void scaled_displacement(const Vectors& x, double h, const DeviceVector<double>& alpha,
                         const Vectors& q, Vectors& out) {
  for_each_index(x.size(), ScaledDisplaced{raw(x), h, raw(alpha), raw(q), raw(out)});
}

std::int64_t vertex_search_round(const ImplicitSystem& s, const DeviceVector<double>& before,
                                 const DeviceVector<double>& after, const Vectors& step,
                                 const Vectors& residual, const Vectors& elastic, std::size_t count,
                                 VertexSearch& search) {
  const Share share{Rows(s),
                    raw(before),
                    raw(after),
                    raw(step),
                    raw(residual),
                    raw(elastic),
                    raw(search.reach_offsets),
                    raw(search.reach)};
  for_each_index(count, SearchRound{share, raw(search.alpha), raw(search.searching)});
  return transform_reduce(count, Flagged{raw(search.searching)}, std::int64_t{0}, Plus{});
}

void contact_pull_start(const DeviceVector<ContactConstraint>& c, std::size_t count,
                        Vectors& pull) {
  for_each_index(count, PullStart{raw(c), raw(pull)});
}

void contact_pull_pass(const DeviceVector<std::uint32_t>& ring_offsets,
                       const DeviceVector<std::uint32_t>& ring_neighbours, double fall,
                       const Vectors& in, std::size_t count, Vectors& out) {
  for_each_index(count, PullPass{raw(ring_offsets), raw(ring_neighbours), fall, raw(in), raw(out)});
}

void contact_start(const DeviceVector<ContactConstraint>& c, const Vectors& pull, std::size_t count,
                   Vectors& velocity) {
  for_each_index(count, ContactStart{raw(c), raw(pull), raw(velocity)});
}

void scale_rows(const DeviceVector<double>& alpha, std::size_t count, Vectors& step) {
  for_each_index(count, ScaleRows{raw(alpha), raw(step)});
}

double dot_largest(const Vectors& a, const Vectors& b, std::size_t count) {
  return largest(count, Dot{raw(a), raw(b)});
}

std::int64_t dot_fixed(const Vectors& a, const Vectors& b, std::size_t count, double scale) {
  return fixed_sum(count, Dot{raw(a), raw(b)}, scale);
}

double mass_dot_largest(const ImplicitSystem& s, const Vectors& q, std::size_t count) {
  return largest(count, MassDot{Rows(s), raw(q)});
}

std::int64_t mass_dot_fixed(const ImplicitSystem& s, const Vectors& q, std::size_t count,
                            double scale) {
  return fixed_sum(count, MassDot{Rows(s), raw(q)}, scale);
}

double max_norm(const Vectors& a, std::size_t count) {
  return transform_reduce(count, Norm{raw(a)}, 0.0, Maximum{});
}

std::int64_t unfinite_rows(const Vectors& a, std::size_t count) {
  return transform_reduce(count, Unfinite{raw(a)}, std::int64_t{0}, Plus{});
}

double largest_entry(const DeviceVector<double>& a, std::size_t count) {
  return largest(count, Entry{raw(a)});
}

double difference_largest(const DeviceVector<double>& after, const DeviceVector<double>& before,
                          std::size_t count) {
  return largest(count, Difference{raw(after), raw(before)});
}

std::int64_t difference_fixed(const DeviceVector<double>& after, const DeviceVector<double>& before,
                              std::size_t count, double scale) {
  return fixed_sum(count, Difference{raw(after), raw(before)}, scale);
}

void axpy(double a, const Vectors& x, Vectors& y, std::size_t count) {
  for_each_index(count, Axpy{a, raw(x), raw(y)});
}

void xpby(const Vectors& x, double b, Vectors& y, std::size_t count) {
  for_each_index(count, Xpby{raw(x), b, raw(y)});
}

void displaced(const Vectors& x, double h, const Vectors& q, Vectors& out) {
  out.resize(x.size());
  for_each_index(x.size(), Displaced{raw(x), h, raw(q), raw(out)});
}

void mass_precondition(const ImplicitSystem& s, const Vectors& r, std::size_t count, Vectors& z) {
  for_each_index(count, MassPrecondition{Rows(s), raw(r), raw(z)});
}

void displaced_colour(const Vectors& x, double h, int axis,
                      const DeviceVector<std::uint8_t>& colour, int c, Vectors& out) {
  out.resize(x.size());
  for_each_index(x.size(), DisplacedColour{raw(x), h, axis, raw(colour), c, raw(out)});
}

void record_block_column(const Vectors& plus, const Vectors& base, double h,
                         const DeviceVector<std::uint8_t>& colour, int c, int axis,
                         std::size_t count, DeviceVector<Block3>& blocks) {
  for_each_index(count,
                 RecordColumn{raw(plus), raw(base), 1 / h, raw(colour), c, axis, raw(blocks)});
}

void invert_blocks(const ImplicitSystem& s, std::size_t count, DeviceVector<Block3>& blocks) {
  for_each_index(count, InvertBlock{Rows(s), raw(blocks)});
}

void block_precondition(const DeviceVector<Block3>& inverse, const Vectors& r, std::size_t count,
                        Vectors& z) {
  for_each_index(count, BlockPrecondition{raw(inverse), raw(r), raw(z)});
}

void free_motion_change(const ImplicitSystem& s, const Vectors& velocity0, const Vectors& velocity,
                        std::size_t count, Vectors& out) {
  for_each_index(count, FreeMotionChange{Rows(s), raw(velocity0), raw(velocity), raw(out)});
}

void implicit_rhs(const ImplicitSystem& s, const Vectors& velocity, const Vectors& gradient,
                  std::size_t count, Vectors& out) {
  for_each_index(count, Rhs{Rows(s), raw(velocity), raw(gradient), raw(out)});
}

void newton_residual(const ImplicitSystem& s, const Vectors& velocity0, const Vectors& velocity,
                     const Vectors& gradient, std::size_t count, Vectors& out) {
  for_each_index(count,
                 NewtonResidual{Rows(s), raw(velocity0), raw(velocity), raw(gradient), raw(out)});
}

void implicit_product(const ImplicitSystem& s, const Vectors& q, const Vectors& gradient_plus,
                      const Vectors& gradient_minus, double h, std::size_t count, Vectors& out) {
  for_each_index(count, Product{Rows(s), raw(q), raw(gradient_plus), raw(gradient_minus),
                                s.dt * s.dt / (2 * h), raw(out)});
}

void forward_product(const ImplicitSystem& s, const Vectors& q, const Vectors& gradient_plus,
                     const Vectors& gradient, double h, std::size_t count, Vectors& out) {
  for_each_index(count, Product{Rows(s), raw(q), raw(gradient_plus), raw(gradient), s.dt * s.dt / h,
                                raw(out)});
}

void implicit_gradient(const ImplicitSystem& s, const Vectors& rhs, const Vectors& velocity,
                       std::size_t count, Vectors& gradient) {
  for_each_index(count, EffectiveGradient{Rows(s), raw(rhs), raw(velocity), raw(gradient)});
}

void contact_constraints(const ImplicitSystem& s, const Vectors& position, const Vectors& gradient,
                         const DeviceVector<Collider>& colliders, double thickness,
                         double tolerance, std::size_t count,
                         DeviceVector<ContactConstraint>& out) {
  out.resize(count);
  for_each_index(
      count, FindConstraint{Rows(s), raw(position), raw(gradient), raw(colliders),
                            static_cast<int>(colliders.size()), thickness, tolerance, raw(out)});
}

void mesh_contact_constraints(const ImplicitSystem& s, const Vectors& position,
                              const Vectors& gradient, const MeshColliderStep& collider,
                              double tolerance, std::size_t count,
                              DeviceVector<ContactConstraint>& out) {
  for_each_index(count, FindMeshConstraint{Rows(s), raw(position), raw(gradient), collider,
                                           tolerance, raw(out)});
}

void landing_constraints(const ImplicitSystem& s, const Vectors& position, const Vectors& end,
                         const DeviceVector<Collider>& colliders, double thickness,
                         double tolerance, std::size_t count, DeviceVector<ContactConstraint>& out,
                         DeviceVector<std::uint8_t>& changed) {
  changed.resize(count);
  for_each_index(count, FindLanding{Rows(s), raw(position), raw(end), raw(colliders),
                                    static_cast<int>(colliders.size()), thickness, tolerance,
                                    raw(out), raw(changed)});
}

void mesh_landing_constraints(const ImplicitSystem& s, const Vectors& position, const Vectors& end,
                              const MeshColliderStep& collider, double tolerance, std::size_t count,
                              DeviceVector<ContactConstraint>& out,
                              DeviceVector<std::uint8_t>& changed) {
  for_each_index(count, FindMeshLanding{Rows(s), raw(position), raw(end), collider, tolerance,
                                        raw(out), raw(changed)});
}

void release_pulling_landings(const Vectors& residual, std::size_t count,
                              DeviceVector<ContactConstraint>& c,
                              DeviceVector<std::uint8_t>& changed) {
  changed.resize(count);
  for_each_index(count, ReleasePulling{raw(residual), raw(c), raw(changed)});
}

std::int64_t changed_rows(const DeviceVector<std::uint8_t>& changed, std::size_t count) {
  return transform_reduce(count, Flagged{raw(changed)}, std::int64_t{0}, Plus{});
}

void filter(const DeviceVector<ContactConstraint>& c, std::size_t count, Vectors& v) {
  for_each_index(count, Filter{raw(c), raw(v)});
}

void hold(const DeviceVector<ContactConstraint>& c, std::size_t count, Vectors& v) {
  for_each_index(count, Hold{raw(c), raw(v)});
}

void constraint_friction(const ImplicitSystem& s, const DeviceVector<ContactConstraint>& c,
                         const Vectors& residual, std::size_t count, Vectors& velocity) {
  for_each_index(count, ConstraintFriction{Rows(s), raw(c), raw(residual), raw(velocity)});
}

void friction_impulses(const ImplicitSystem& s, const Vectors& velocity0, const Vectors& gradient0,
                       std::size_t count, DeviceVector<ContactConstraint>& c) {
  for_each_index(count, FrictionImpulse{Rows(s), raw(velocity0), raw(gradient0), raw(c)});
}

void friction_start(const DeviceVector<ContactConstraint>& c, std::size_t count,
                    Vectors& velocity) {
  for_each_index(count, FrictionStart{raw(c), raw(velocity)});
}

void friction_scale(const ImplicitSystem& s, const DeviceVector<ContactConstraint>& c,
                    std::size_t count, Vectors& out) {
  for_each_index(count, FrictionScale{Rows(s), raw(c), raw(out)});
}

void friction_force(const DeviceVector<ContactConstraint>& c, double eps, const Vectors& velocity,
                    std::size_t count, Vectors& out) {
  for_each_index(count, FrictionForce{raw(c), eps, raw(velocity), raw(out)});
}

void add_friction_product(const DeviceVector<ContactConstraint>& c, double eps,
                          const Vectors& velocity, const Vectors& q, std::size_t count,
                          Vectors& out) {
  for_each_index(count, FrictionProduct{raw(c), eps, raw(velocity), raw(q), raw(out)});
}

void friction_predict(const ImplicitSystem& s, DeviceVector<ContactConstraint>& c, double eps,
                      const Vectors& velocity, const Vectors& residual, std::size_t count) {
  for_each_index(count, FrictionPredict{Rows(s), raw(c), eps, raw(velocity), raw(residual)});
}

void friction_potential(const DeviceVector<ContactConstraint>& c, double eps,
                        const Vectors& velocity, double alpha, const Vectors& step,
                        std::size_t count, DeviceVector<double>& out) {
  out.resize(count);
  for_each_index(count, FrictionPotential{raw(c), eps, raw(velocity), alpha, raw(step), raw(out)});
}

void friction_precondition(const ImplicitSystem& s, const DeviceVector<ContactConstraint>& c,
                           double eps, const Vectors& velocity, const Vectors& r, std::size_t count,
                           Vectors& z) {
  for_each_index(count, FrictionPrecondition{Rows(s), raw(c), eps, raw(velocity), raw(r), raw(z)});
}

void barrier_precondition(const ImplicitSystem& s, const DeviceVector<Block3>* inverse,
                          const DeviceVector<Block3>& curvature,
                          const DeviceVector<ContactConstraint>& friction_rows, double eps,
                          const Vectors& velocity, const Vectors& r, std::size_t count,
                          Vectors& z) {
  for_each_index(count, BarrierPrecondition{Rows(s), inverse != nullptr ? raw(*inverse) : nullptr,
                                            raw(curvature), raw(friction_rows), eps, raw(velocity),
                                            raw(r), raw(z)});
}

void block_descent(const DeviceVector<Block3>& inverse, const DeviceVector<std::uint8_t>& colour,
                   int c, const DeviceVector<ContactConstraint>& constraints,
                   const Vectors& residual, std::size_t count, Vectors& velocity) {
  for_each_index(count, BlockDescent{raw(inverse), raw(colour), c, raw(constraints), raw(residual),
                                     raw(velocity)});
}

}  // namespace apron::cloth
