#include "kernels/cloth/motion.hpp"

#include <cmath>

#include "kernels/common/primitives.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

struct AdvanceKernel {
  V3* x;
  V3* v;
  const V3* gradient;
  const double* mass;
  const std::uint8_t* pinned;
  std::uint64_t* first_bad_step;
  const Collider* colliders;
  int collider_count;
  MotionParams p;

  APRON_HD void operator()(std::size_t i) const {
    if (pinned[i]) {
      v[i] = {0, 0, 0};
      return;
    }
    const V3 a = p.gravity - (1.0 / mass[i]) * gradient[i];
    V3 vi = (1.0 / (1.0 + p.dt * p.damping_rate)) * (v[i] + p.dt * a);
    V3 xi = x[i] + p.dt * vi;
    for (int c = 0; c < collider_count; ++c) {
      const Contact k = contact(colliders[c], xi, p.thickness);
      if (k.depth > 0) respond_to_contact(k, V3{0, 0, 0}, colliders[c].friction, p.dt, xi, vi);
    }
    x[i] = xi;
    v[i] = vi;
    // Every writer of one step stores the same value, and a later step sees it set: no atomic.
    if (!(is_finite(xi) && is_finite(vi)) && *first_bad_step == 0) *first_bad_step = p.step;
  }
};

struct EnergyKernel {
  const V3* x;
  const V3* v;
  const double* mass;
  const VertexMeasures* measures;
  const double* rest_area;
  std::size_t count;
  V3 gravity;
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    const VertexMeasures& m = measures[i];
    out[i] = 0.5 * mass[i] * dot(v[i], v[i]);
    out[count + i] = -mass[i] * dot(gravity, x[i]);
    out[2 * count + i] = m.stretch_energy * rest_area[i];
    out[3 * count + i] = m.bend_energy * rest_area[i];
    out[4 * count + i] = m.coupling_energy * rest_area[i];
    out[5 * count + i] = m.hourglass_energy * rest_area[i];
  }
};

struct ExtremesKernel {
  const V3* v;
  const VertexMeasures* measures;
  std::size_t count;
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    out[i] = norm(v[i]);
    out[count + i] = measures[i].strain_max;
  }
};

}  // namespace

void advance_vertices(const MotionState& s, std::size_t count, const MotionParams& p,
                      const DeviceVector<Collider>& colliders) {
  for_each_index(count, AdvanceKernel{raw(*s.position), raw(*s.velocity), raw(*s.gradient),
                                      raw(*s.mass), raw(*s.pinned), raw(*s.first_bad_step),
                                      raw(colliders), static_cast<int>(colliders.size()), p});
}

void vertex_energies(const DeviceVector<V3>& position, const DeviceVector<V3>& velocity,
                     const DeviceVector<double>& mass, const DeviceVector<VertexMeasures>& measures,
                     const DeviceVector<double>& rest_area, std::size_t count, V3 gravity,
                     DeviceVector<double>& out) {
  out.resize(6 * count);
  for_each_index(count, EnergyKernel{raw(position), raw(velocity), raw(mass), raw(measures),
                                     raw(rest_area), count, gravity, raw(out)});
}

void vertex_extremes(const DeviceVector<V3>& velocity, const DeviceVector<VertexMeasures>& measures,
                     std::size_t count, DeviceVector<double>& out) {
  out.resize(2 * count);
  for_each_index(count, ExtremesKernel{raw(velocity), raw(measures), count, raw(out)});
}

}  // namespace apron::cloth
