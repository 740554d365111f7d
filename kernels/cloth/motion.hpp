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
// z = height. Vertices are kept `thickness` outside it.
struct Collider {
  enum Kind : int { sphere, box, floor };
  Kind kind = floor;
  Vector3<double> centre{0, 0, 0}, lo{0, 0, 0}, hi{0, 0, 0};
  double radius = 0, height = 0;
};

struct MotionParams {
  double dt = 0;
  Vector3<double> gravity{0, 0, 0};
  double damping_rate = 0;  // gamma / mu [1/s]
  double friction = 0;      // Coulomb coefficient at colliders
  double thickness = 0;     // contact offset [m]
};

// What one step reads and writes; rows [0, count).
struct MotionState {
  DeviceVector<Vector3<double>>* position;
  DeviceVector<Vector3<double>>* velocity;
  const DeviceVector<Vector3<double>>* gradient;  // dE/dx (the internal force is its negative)
  const DeviceVector<double>* mass;               // mu |V_v|
  const DeviceVector<std::uint8_t>* pinned;       // 1: held at its position
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

// Whether any of the first `count` positions or velocities is not finite (a blow-up).
bool any_not_finite(const DeviceVector<Vector3<double>>& position,
                    const DeviceVector<Vector3<double>>& velocity, std::size_t count);

}  // namespace apron::cloth
