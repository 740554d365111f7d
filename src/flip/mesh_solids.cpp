#include "flip/mesh_solids.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "io/mesh_reader.hpp"

namespace apron::flip {
namespace {

using Point = std::array<double, 3>;

std::vector<Point> placed(const io::TriangleMesh& mesh, const MeshSolid& m) {
  std::vector<Point> v(mesh.vertices.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    for (int d = 0; d < 3; ++d) v[i][d] = m.scale * mesh.vertices[i][d] + m.offset[d];
  return v;
}

// Heights z at which the vertical line through (x, y) crosses triangle (a, b, c), if it does.
// Barycentric coordinates in the xy projection; the line is nudged off edges and vertices by the
// caller, so a crossing is counted by exactly one of the triangles that share an edge.
bool crossing(const Point& a, const Point& b, const Point& c, double x, double y, double& z) {
  const double det = (b[1] - c[1]) * (a[0] - c[0]) + (c[0] - b[0]) * (a[1] - c[1]);
  if (det == 0) return false;  // vertical triangle: the line grazes it
  const double l1 = ((b[1] - c[1]) * (x - c[0]) + (c[0] - b[0]) * (y - c[1])) / det;
  const double l2 = ((c[1] - a[1]) * (x - c[0]) + (a[0] - c[0]) * (y - c[1])) / det;
  const double l3 = 1 - l1 - l2;
  if (l1 < 0 || l2 < 0 || l3 < 0) return false;
  z = l1 * a[2] + l2 * b[2] + l3 * c[2];
  return true;
}

}  // namespace

SolidMask voxelise_meshes(const std::vector<MeshSolid>& meshes, const BrickGrid& grid) {
  std::vector<io::TriangleMesh> read(meshes.size());
  std::vector<std::vector<Point>> vertices(meshes.size());
  SolidMask mask;
  std::array<int, 3> hi{0, 0, 0};
  mask.lo = {grid.voxels[0], grid.voxels[1], grid.voxels[2]};
  for (std::size_t m = 0; m < meshes.size(); ++m) {
    read[m] = io::read_mesh(meshes[m].file);
    vertices[m] = placed(read[m], meshes[m]);
    for (const Point& p : vertices[m])
      for (int d = 0; d < 3; ++d) {
        const double f = std::floor((p[d] - grid.origin[d]) / grid.dx);
        const int v = static_cast<int>(std::clamp(f, 0.0, static_cast<double>(grid.voxels[d])));
        mask.lo[d] = std::min(mask.lo[d], v);
        hi[d] = std::max(hi[d], v + 1);
      }
  }
  for (int d = 0; d < 3; ++d)
    mask.dims[d] = std::max(0, std::min(hi[d], grid.voxels[d]) - mask.lo[d]);
  mask.solid.assign(static_cast<std::size_t>(mask.dims[0]) * mask.dims[1] * mask.dims[2], 0);
  const double dx = grid.dx;
  // Column centres nudged by irrational fractions of a voxel: off every edge and vertex of
  // meshes built on round coordinates.
  const double nudge_x = 1e-4 * std::sqrt(2.0) * dx, nudge_y = 1e-4 * std::sqrt(3.0) * dx;
  for (std::size_t m = 0; m < meshes.size(); ++m) {
    std::vector<std::vector<double>> hits(static_cast<std::size_t>(mask.dims[0]) * mask.dims[1]);
    const auto& v = vertices[m];
    for (const auto& t : read[m].triangles) {
      const Point &a = v[t[0]], &b = v[t[1]], &c = v[t[2]];
      int i0 = mask.dims[0], i1 = -1, j0 = mask.dims[1], j1 = -1;
      for (const Point* p : {&a, &b, &c}) {
        const double fx = ((*p)[0] - grid.origin[0]) / dx - 0.5 - mask.lo[0];
        const double fy = ((*p)[1] - grid.origin[1]) / dx - 0.5 - mask.lo[1];
        i0 = std::min(i0, static_cast<int>(std::ceil(fx - 1e-3))),
        i1 = std::max(i1, static_cast<int>(std::floor(fx + 1e-3)));
        j0 = std::min(j0, static_cast<int>(std::ceil(fy - 1e-3))),
        j1 = std::max(j1, static_cast<int>(std::floor(fy + 1e-3)));
      }
      for (int j = std::max(j0, 0); j <= std::min(j1, mask.dims[1] - 1); ++j)
        for (int i = std::max(i0, 0); i <= std::min(i1, mask.dims[0] - 1); ++i) {
          const double x = grid.origin[0] + (mask.lo[0] + i + 0.5) * dx + nudge_x;
          const double y = grid.origin[1] + (mask.lo[1] + j + 0.5) * dx + nudge_y;
          double z;
          if (crossing(a, b, c, x, y, z))
            hits[static_cast<std::size_t>(j) * mask.dims[0] + i].push_back(z);
        }
    }
    for (int j = 0; j < mask.dims[1]; ++j)
      for (int i = 0; i < mask.dims[0]; ++i) {
        auto& h = hits[static_cast<std::size_t>(j) * mask.dims[0] + i];
        if (h.size() % 2)
          throw std::runtime_error(
              meshes[m].file +
              ": the mesh is not closed (the vertical line through voxel column (" +
              std::to_string(mask.lo[0] + i) + ", " + std::to_string(mask.lo[1] + j) +
              ") crosses it " + std::to_string(h.size()) +
              " times); solids must be closed surfaces");
        std::sort(h.begin(), h.end());
        for (int k = 0; k < mask.dims[2]; ++k) {
          const double z = grid.origin[2] + (mask.lo[2] + k + 0.5) * dx;
          const auto below = std::upper_bound(h.begin(), h.end(), z) - h.begin();
          if (below % 2)
            mask.solid[(static_cast<std::size_t>(k) * mask.dims[1] + j) * mask.dims[0] + i] = 1;
        }
      }
  }
  return mask;
}

}  // namespace apron::flip
