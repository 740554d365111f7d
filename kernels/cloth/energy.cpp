#include "kernels/cloth/energy.hpp"

#include <algorithm>
#include <vector>

#include <thrust/copy.h>

#include "kernels/cloth/dual.hpp"
#include "kernels/cloth/vertex_geometry.hpp"
#include "kernels/common/primitives.hpp"

namespace apron::cloth {
namespace {

using Dual = Dual3<double>;

// Positions whose vertex `seeded` carries the derivative directions x, y, z.
struct SeededPoints {
  const Vector3<double>* x;
  std::uint32_t seeded;
  APRON_HD Vector3<Dual> operator()(std::uint32_t i) const {
    const Vector3<double> p = x[i];
    const double s = i == seeded ? 1.0 : 0.0;
    return {Dual(p.x, s, 0, 0), Dual(p.y, 0, s, 0), Dual(p.z, 0, 0, s)};
  }
};

// W_v |V_v| with positions from `x` (plain or seeded) and every normal recomputed from them.
struct VertexEnergy {
  RingView rings;
  const Vector2<double>* coordinates;
  const Sym2<double>* rest_metric;
  const Sym2<double>* rest_curvature;
  const double* rest_area;
  Material material;

  template <class Points>
  APRON_HD auto operator()(const Points& x, std::uint32_t v) const {
    using S = decltype(x(v).x);
    const RingNormals<Points> normals{x, rings};
    Vector3<S> t;
    Sym2<S> a, b;
    vertex_tensors(x, normals, rings, coordinates, v, normals(v), t, a, b);
    const Sym2<double> rest_a = rest_metric[v], rest_b = rest_curvature[v];
    const Sym2<S> eps = S(0.5) * (a - Sym2<S>{S(rest_a.xx), S(rest_a.xy), S(rest_a.yy)});
    const Sym2<S> kappa = S(-1) * (b - Sym2<S>{S(rest_b.xx), S(rest_b.xy), S(rest_b.yy)});
    return energy_density(eps, kappa, rest_a, material) * S(rest_area[v]);
  }
};

struct DensityKernel {
  const Vector3<double>* x;
  VertexEnergy energy;
  double* density;
  APRON_HD void operator()(std::size_t v) const {
    const auto u = static_cast<std::uint32_t>(v);
    density[v] = energy(FromArray<double>{x}, u) / energy.rest_area[v];
  }
};

struct VertexEnergyKernel {
  const Vector3<double>* x;
  VertexEnergy energy;
  double* out;
  APRON_HD void operator()(std::size_t v) const {
    out[v] = energy(FromArray<double>{x}, static_cast<std::uint32_t>(v));
  }
};

struct GradientKernel {
  const Vector3<double>* x;
  VertexEnergy energy;
  const std::uint32_t* two_ring_offsets;
  const std::uint32_t* two_ring;
  Vector3<double>* gradient;
  APRON_HD void operator()(std::size_t j) const {
    const SeededPoints seeded{x, static_cast<std::uint32_t>(j)};
    Dual sum(0.0);
    for (std::uint32_t k = two_ring_offsets[j]; k < two_ring_offsets[j + 1]; ++k)
      sum += energy(seeded, two_ring[k]);
    gradient[j] = {sum.d[0], sum.d[1], sum.d[2]};
  }
};

VertexEnergy vertex_energy(const DeviceMesh<double>& mesh, const ReferenceState<double>& ref,
                           const EnergyModel& model) {
  return {{raw(mesh.ring_offsets), raw(mesh.ring_neighbours), raw(mesh.boundary)},
          raw(ref.ring_coordinates),
          raw(ref.rest.metric),
          raw(ref.rest.curvature),
          raw(ref.rest.area),
          model.material};
}

template <class V>
std::vector<V> to_host(const DeviceVector<V>& d) {
  std::vector<V> h(d.size());
  thrust::copy(d.begin(), d.end(), h.begin());
  return h;
}

}  // namespace

EnergyModel make_energy_model(const DeviceMesh<double>& mesh, const Material& material) {
  const std::vector<std::uint32_t> offsets = to_host(mesh.ring_offsets),
                                   neighbours = to_host(mesh.ring_neighbours);
  std::vector<std::uint32_t> two_offsets{0}, two_ring;
  for (std::size_t v = 0; v + 1 < offsets.size(); ++v) {
    std::vector<std::uint32_t> near{static_cast<std::uint32_t>(v)};
    for (std::uint32_t k = offsets[v]; k < offsets[v + 1]; ++k) {
      const std::uint32_t u = neighbours[k];
      near.push_back(u);
      near.insert(near.end(), neighbours.begin() + offsets[u], neighbours.begin() + offsets[u + 1]);
    }
    std::sort(near.begin(), near.end());
    near.erase(std::unique(near.begin(), near.end()), near.end());
    two_ring.insert(two_ring.end(), near.begin(), near.end());
    two_offsets.push_back(static_cast<std::uint32_t>(two_ring.size()));
  }
  EnergyModel model;
  model.material = material;
  model.two_ring_offsets = DeviceVector<std::uint32_t>(two_offsets.begin(), two_offsets.end());
  model.two_ring = DeviceVector<std::uint32_t>(two_ring.begin(), two_ring.end());
  return model;
}

void energy_density(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model,
                    DeviceVector<double>& density) {
  density.resize(mesh.vertices());
  for_each_index(
      mesh.vertices(),
      DensityKernel{raw(positions), vertex_energy(mesh, reference, model), raw(density)});
}

double total_energy(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                    const ReferenceState<double>& reference, const EnergyModel& model) {
  const std::size_t n = mesh.vertices();
  DeviceVector<double> per_vertex(n), total;
  for_each_index(n, VertexEnergyKernel{raw(positions), vertex_energy(mesh, reference, model),
                                       raw(per_vertex)});
  const std::vector<std::uint32_t> whole{0, static_cast<std::uint32_t>(n)};
  const DeviceVector<std::uint32_t> segment(whole.begin(), whole.end());
  segmented_reduce(per_vertex, segment, 1, Reduction::sum, total);
  return total[0];
}

void energy_gradient(const DeviceMesh<double>& mesh, const DeviceVector<Vector3<double>>& positions,
                     const ReferenceState<double>& reference, const EnergyModel& model,
                     DeviceVector<Vector3<double>>& gradient) {
  gradient.resize(mesh.vertices());
  for_each_index(mesh.vertices(),
                 GradientKernel{raw(positions), vertex_energy(mesh, reference, model),
                                raw(model.two_ring_offsets), raw(model.two_ring), raw(gradient)});
}

}  // namespace apron::cloth
