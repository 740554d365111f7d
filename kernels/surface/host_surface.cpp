#include "kernels/surface/host_surface.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace apron::surface {
namespace {

struct EdgeUse {
  std::uint32_t first_corner = 0;  // 3t + e of the first triangle along the edge
  std::uint32_t uses = 0;
  bool first_forward = false;  // whether it runs from the lower vertex index to the higher
  bool flipped = false;
};

}  // namespace

Adjacency adjacency(const HostSurface& mesh) {
  const std::size_t nt = mesh.triangles.size(), nv = mesh.vertices.size();
  Adjacency adj;
  adj.edge_neighbour.assign(3 * nt, -1);
  std::unordered_map<std::uint64_t, EdgeUse> edges;
  edges.reserve(3 * nt);
  for (std::uint32_t t = 0; t < nt; ++t)
    for (std::uint32_t e = 0; e < 3; ++e) {
      const std::uint32_t a = mesh.triangles[t][e], b = mesh.triangles[t][(e + 1) % 3];
      const std::uint64_t key = (std::uint64_t{std::min(a, b)} << 32) | std::max(a, b);
      EdgeUse& use = edges[key];
      if (use.uses == 0) {
        use.first_corner = 3 * t + e;
        use.first_forward = a < b;
      } else if (use.uses == 1) {
        adj.edge_neighbour[3 * t + e] = static_cast<int>(use.first_corner / 3);
        adj.edge_neighbour[use.first_corner] = static_cast<int>(t);
        use.flipped = use.first_forward == (a < b);
      }
      ++use.uses;
    }
  SurfaceTopology& top = adj.topology;
  top.edges = edges.size();
  for (const auto& [key, use] : edges) {
    const auto a = static_cast<std::uint32_t>(key >> 32), b = static_cast<std::uint32_t>(key);
    std::size_t* count = use.uses == 1  ? &top.boundary_edges
                         : use.uses > 2 ? &top.nonmanifold_edges
                         : use.flipped  ? &top.flipped_edges
                                        : nullptr;
    if (!count) continue;
    if (top.boundary_edges + top.nonmanifold_edges + top.flipped_edges == 0)
      top.first_bad_edge = {a, b};
    ++*count;
  }
  // Corners around each vertex, by a counting sort.
  adj.vertex_first.assign(nv + 1, 0);
  for (const auto& tri : mesh.triangles)
    for (std::uint32_t v : tri) ++adj.vertex_first[v + 1];
  for (std::size_t v = 0; v < nv; ++v) adj.vertex_first[v + 1] += adj.vertex_first[v];
  adj.vertex_corners.resize(3 * nt);
  std::vector<std::uint32_t> fill(adj.vertex_first.begin(), adj.vertex_first.end() - 1);
  for (std::uint32_t t = 0; t < nt; ++t)
    for (std::uint32_t k = 0; k < 3; ++k)
      adj.vertex_corners[fill[mesh.triangles[t][k]]++] = 3 * t + k;
  return adj;
}

SurfaceMeasures measure(const HostSurface& mesh) {
  SurfaceMeasures m;
  m.lo = {HUGE_VAL, HUGE_VAL, HUGE_VAL};
  m.hi = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  for (const auto& v : mesh.vertices)
    for (int d = 0; d < 3; ++d) {
      m.lo[d] = std::min(m.lo[d], v[d]);
      m.hi[d] = std::max(m.hi[d], v[d]);
    }
  for (const auto& t : mesh.triangles) {
    const auto &a = mesh.vertices[t[0]], &b = mesh.vertices[t[1]], &c = mesh.vertices[t[2]];
    const double u[3] = {b[0] - a[0], b[1] - a[1], b[2] - a[2]};
    const double w[3] = {c[0] - a[0], c[1] - a[1], c[2] - a[2]};
    const double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2],
                         u[0] * w[1] - u[1] * w[0]};
    m.area += 0.5 * std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    // The tetrahedron (origin, a, b, c): a . (b x c) / 6, summed over the faces.
    m.signed_volume += (a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2]) +
                        a[2] * (b[0] * c[1] - b[1] * c[0])) /
                       6;
  }
  return m;
}

std::array<double, 9> Placement::rotation() const {
  constexpr double kDegree = 3.14159265358979323846 / 180;
  const double cx = std::cos(rotation_degrees[0] * kDegree),
               sx = std::sin(rotation_degrees[0] * kDegree);
  const double cy = std::cos(rotation_degrees[1] * kDegree),
               sy = std::sin(rotation_degrees[1] * kDegree);
  const double cz = std::cos(rotation_degrees[2] * kDegree),
               sz = std::sin(rotation_degrees[2] * kDegree);
  // Rz Ry Rx: about x first.
  return {cz * cy,
          cz * sy * sx - sz * cx,
          cz * sy * cx + sz * sx,
          sz * cy,
          sz * sy * sx + cz * cx,
          sz * sy * cx - cz * sx,
          -sy,
          cy * sx,
          cy * cx};
}

std::array<double, 3> Placement::apply(const std::array<double, 3>& p) const {
  const std::array<double, 9> r = rotation();
  std::array<double, 3> out;
  for (int i = 0; i < 3; ++i)
    out[i] = scale * (r[3 * i] * p[0] + r[3 * i + 1] * p[1] + r[3 * i + 2] * p[2]) + offset[i];
  return out;
}

HostSurface placed(HostSurface mesh, const Placement& placement) {
  for (auto& v : mesh.vertices) v = placement.apply(v);
  return mesh;
}

}  // namespace apron::surface
