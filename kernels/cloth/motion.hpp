// The cloth's motion per vertex (issue 17): mu r_tt + gamma r_t + K r = mu F, integrated by
// symplectic Euler (kick, then drift) with the damping taken implicitly, held (pinned) vertices,
// and contact with colliders; plus the per-vertex energies the diagnostics sum. Every kernel is
// a per-vertex map over the first `count` rows (a rank's owned vertices): no atomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cloth/cloth_math.hpp"
#include "kernels/cloth/energy.hpp"
#include "kernels/common/backend.hpp"

namespace apron::cloth {

// A rigid obstacle: a sphere (centre, radius), an axis-aligned box (lo, hi) or the floor
// z = height. Vertices are kept `thickness` outside it; `friction` is its Coulomb coefficient.
struct Collider {
  enum Kind : int { sphere, box, floor };
  Kind kind = floor;
  Vector3<double> centre{0, 0, 0}, lo{0, 0, 0}, hi{0, 0, 0};
  double radius = 0, height = 0;
  double friction = 0;
};

// The outward normal and depth of a point inside a collider grown by `thickness` (depth > 0),
// or minus its distance from it when outside (with the normal towards the point).
struct Contact {
  Vector3<double> normal{0, 0, 1};
  double depth = 0;
};

APRON_HD inline Contact contact(const Collider& c, Vector3<double> x, double thickness) {
  Contact k;
  if (c.kind == Collider::floor) {
    k.depth = c.height + thickness - x.z;
    return k;
  }
  if (c.kind == Collider::sphere) {
    const Vector3<double> d = x - c.centre;
    const double r = norm(d);
    k.depth = c.radius + thickness - r;
    k.normal = r > 0 ? (1.0 / r) * d : Vector3<double>{0, 0, 1};
    return k;
  }
  // Box: out through the nearest face of the grown box.
  const double lo[3] = {c.lo.x - thickness, c.lo.y - thickness, c.lo.z - thickness};
  const double hi[3] = {c.hi.x + thickness, c.hi.y + thickness, c.hi.z + thickness};
  const double p[3] = {x.x, x.y, x.z};
  const double outside[3] = {p[0] < lo[0] ? p[0] - lo[0] : (p[0] > hi[0] ? p[0] - hi[0] : 0),
                             p[1] < lo[1] ? p[1] - lo[1] : (p[1] > hi[1] ? p[1] - hi[1] : 0),
                             p[2] < lo[2] ? p[2] - lo[2] : (p[2] > hi[2] ? p[2] - hi[2] : 0)};
  const Vector3<double> away{outside[0], outside[1], outside[2]};
  const double distance = norm(away);
  if (distance > 0) return Contact{(1.0 / distance) * away, -distance};
  k.depth = 1e300;
  for (int d = 0; d < 3; ++d) {
    const double below = p[d] - lo[d], above = hi[d] - p[d];
    const double nearest = below < above ? below : above;
    if (nearest < k.depth) {
      k.depth = nearest;
      const double sign = below < above ? -1.0 : 1.0;
      k.normal = {d == 0 ? sign : 0.0, d == 1 ? sign : 0.0, d == 2 ? sign : 0.0};
    }
  }
  return k;
}

// What Coulomb friction leaves of a sliding velocity when it may take `loss` from its speed:
// never a reversal.
APRON_HD inline Vector3<double> coulomb_slide(Vector3<double> slide, double loss) {
  const double speed = norm(slide);
  return speed > loss ? (1.0 - loss / speed) * slide : Vector3<double>{0, 0, 0};
}

// A vertex found `k.depth` inside a collider moving at `wall_velocity`, after a drift of `dt` at
// its velocity v: it is put back on the collider's offset surface, its velocity into the collider
// (relative to the collider's) removed, and up to `friction` x that taken from its sliding
// velocity (Coulomb, never reversing it). A vertex that friction stops sticks: its drift along the
// collider is undone to the collider's own (drifting at the velocity before friction, a stuck
// vertex crept by dt^2 F_t / m a step, a rate proportional to dt that made the resting drape's
// skirt creep and its rest shape depend on the step). One that slides keeps its drift (redoing it
// at the velocity friction leaves raises the energy by m dt^2 (mu^2 g_n^2 - g_t^2) / 2 a step where
// friction slows a slide: the soft drape gained 1.2e-4 of its energy).
APRON_HD inline void respond_to_contact(const Contact& k, Vector3<double> wall_velocity,
                                        double friction, double dt, Vector3<double>& x,
                                        Vector3<double>& v) {
  x += k.depth * k.normal;
  const Vector3<double> relative = v - wall_velocity;
  const double into = dot(relative, k.normal);
  if (into >= 0) return;
  const Vector3<double> slide = relative - into * k.normal;
  const Vector3<double> kept = coulomb_slide(slide, -friction * into);
  if (dot(kept, kept) == 0) x += (-dt) * slide;
  v = wall_velocity + kept;
}

struct MotionParams {
  double dt = 0;
  Vector3<double> gravity{0, 0, 0};
  double damping_rate = 0;  // gamma / mu [1/s]
  double thickness = 0;     // contact offset [m]
  std::uint64_t step = 0;   // the step being taken, counted from 1 (what first_bad_step records)
};

// What one step reads and writes; rows [0, count).
struct MotionState {
  DeviceVector<Vector3<double>>* position;
  DeviceVector<Vector3<double>>* velocity;
  const DeviceVector<Vector3<double>>* gradient;  // dE/dx (the internal force is its negative)
  const DeviceVector<double>* mass;               // mu |V_v|
  const DeviceVector<std::uint8_t>* pinned;       // 1: held at its position
  // The first step that left a vertex's position or velocity not finite, 0 while none has (the
  // kernel sets it once and never clears it; the core reads it now and then).
  DeviceVector<std::uint64_t>* first_bad_step;
};

// One step of every free vertex: v <- (v + dt (g - grad / m)) / (1 + dt gamma / mu), x <- x + dt v,
// then each collider pushes a vertex inside it out along its surface normal, removes the
// velocity into it and takes up to friction x that from the tangential velocity.
void advance_vertices(const MotionState& s, std::size_t count, const MotionParams& p,
                      const DeviceVector<Collider>& colliders);

// Per vertex, into `out` (6 count values: kinetic, then potential, then the stretch, bend,
// coupling and hourglass energies): m |v|^2 / 2, -m g . x and each term of W |V| (measures x
// rest area).
void vertex_energies(const DeviceVector<Vector3<double>>& position,
                     const DeviceVector<Vector3<double>>& velocity,
                     const DeviceVector<double>& mass, const DeviceVector<VertexMeasures>& measures,
                     const DeviceVector<double>& rest_area, std::size_t count,
                     Vector3<double> gravity, DeviceVector<double>& out);

// Per vertex, into `out` (2 count values), what the diagnostics take the largest of: the speed
// |v|, then the larger principal strain.
void vertex_extremes(const DeviceVector<Vector3<double>>& velocity,
                     const DeviceVector<VertexMeasures>& measures, std::size_t count,
                     DeviceVector<double>& out);

}  // namespace apron::cloth
