// FLIP's mesh solids on the surface-query service (flip/mesh_solids.hpp): the solid mask of a
// placed, rotated closed mesh equals an analytic inside test at every voxel centre not within
// 1e-4 voxel of its faces; a box mesh drawn on voxel-centre planes holds the centres in
// [lo, hi) along each axis, as a box solid given by its corners (and the ray parity before) does.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>

#include "config/mesh_shape.hpp"
#include "flip/mesh_solids.hpp"

namespace apron::flip {
namespace {

using V3 = std::array<double, 3>;

BrickGrid cube_grid(double length, int voxels) {
  BrickGrid g;
  g.dx = static_cast<float>(length / voxels);
  for (int d = 0; d < 3; ++d) g.voxels[d] = voxels, g.bricks[d] = (voxels + 7) / 8;
  return g;
}

// The box [lo, hi] as 12 triangles wound counter-clockwise seen from outside.
surface::HostSurface box_mesh(const V3& lo, const V3& hi) {
  surface::HostSurface m;
  for (int k = 0; k < 8; ++k)
    m.vertices.push_back({k & 1 ? hi[0] : lo[0], k & 2 ? hi[1] : lo[1], k & 4 ? hi[2] : lo[2]});
  m.triangles = {{0, 2, 3}, {0, 3, 1}, {4, 5, 7}, {4, 7, 6}, {0, 1, 5}, {0, 5, 4},
                 {2, 6, 7}, {2, 7, 3}, {0, 4, 6}, {0, 6, 2}, {1, 3, 7}, {1, 7, 5}};
  return m;
}

config::MeshShape shape_of(const surface::HostSurface& local, const surface::Placement& place) {
  config::MeshShape m;
  m.file = "box";
  m.placement = place;
  m.surface = std::make_shared<const surface::HostSurface>(surface::placed(local, place));
  return m;
}

// A point of the case in the mesh's own frame: R^T (x - offset) / scale.
V3 to_local(const surface::Placement& place, const V3& x) {
  const std::array<double, 9> r = place.rotation();
  V3 q{};
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 3; ++k) q[i] += r[3 * k + i] * (x[k] - place.offset[k]) / place.scale;
  return q;
}

// Signed distance to the box [lo, hi] (negative inside).
double box_distance(const V3& p, const V3& lo, const V3& hi) {
  double outside = 0, inside = -HUGE_VAL;
  for (int d = 0; d < 3; ++d) {
    const double q = std::max(lo[d] - p[d], p[d] - hi[d]);
    outside += q > 0 ? q * q : 0;
    inside = std::max(inside, q);
  }
  return inside > 0 ? std::sqrt(outside) : inside;
}

V3 centre(const BrickGrid& g, int i, int j, int k) {
  return {g.origin[0] + (i + 0.5) * g.dx, g.origin[1] + (j + 0.5) * g.dx,
          g.origin[2] + (k + 0.5) * g.dx};
}

bool solid_at(const SolidMask& m, int i, int j, int k) {
  const int x = i - m.lo[0], y = j - m.lo[1], z = k - m.lo[2];
  return x >= 0 && y >= 0 && z >= 0 && x < m.dims[0] && y < m.dims[1] && z < m.dims[2] &&
         m.solid[(static_cast<std::size_t>(z) * m.dims[1] + y) * m.dims[0] + x];
}

// Every voxel of the grid against `distance` (signed, in the case's frame, negative inside),
// but those within 1e-4 voxel of the surface. Returns the voxels compared.
template <class Distance>
int expect_mask_matches(const SolidMask& mask, const BrickGrid& g, Distance distance) {
  int compared = 0, solid = 0;
  for (int k = 0; k < g.voxels[2]; ++k)
    for (int j = 0; j < g.voxels[1]; ++j)
      for (int i = 0; i < g.voxels[0]; ++i) {
        const double s = distance(centre(g, i, j, k));
        if (std::abs(s) < 1e-4 * g.dx) continue;
        ++compared;
        solid += s < 0;
        EXPECT_EQ(solid_at(mask, i, j, k), s < 0) << "voxel (" << i << ", " << j << ", " << k
                                                  << ") at distance " << s / g.dx << " voxels";
      }
  EXPECT_GT(solid, 100);
  return compared;
}

TEST(MeshSolids, CubeRotatedAboutZEqualsAnalyticCube) {
  const BrickGrid g = cube_grid(0.5, 48);
  const V3 lo{-0.1, -0.1, -0.1}, hi{0.1, 0.1, 0.1};
  surface::Placement place;
  place.rotation_degrees = {0, 0, 45};
  place.offset = {0.25, 0.25, 0.25};
  const SolidMask mask = voxelise_meshes({shape_of(box_mesh(lo, hi), place)}, g);
  const int compared = expect_mask_matches(
      mask, g, [&](const V3& x) { return box_distance(to_local(place, x), lo, hi); });
  EXPECT_GT(compared, 48 * 48 * 48 - 48);
}

TEST(MeshSolids, ScaledCubeRotatedAboutEveryAxisEqualsAnalyticCube) {
  const BrickGrid g = cube_grid(0.5, 40);
  const V3 lo{-0.5, -0.5, -0.5}, hi{0.5, 0.5, 0.5};
  surface::Placement place;
  place.scale = 0.22;
  place.rotation_degrees = {30, -20, 45};
  place.offset = {0.23, 0.26, 0.24};
  const SolidMask mask = voxelise_meshes({shape_of(box_mesh(lo, hi), place)}, g);
  expect_mask_matches(mask, g,
                      [&](const V3& x) { return box_distance(to_local(place, x), lo, hi); });
}

// The L-shaped block of inputs/meshes/l_block.stl (non-convex: a re-entrant edge), read and
// placed by the schema's reader (rotation through YAML), against the union of its two boxes.
// Voxels within 1e-4 voxel of either box's faces are skipped (a superset of the mesh's faces).
TEST(MeshSolids, RotatedLBlockFromStlEqualsAnalyticL) {
  const YAML::Node node = YAML::Load("{mesh: " + std::string(APRON_SOURCE_DIR) +
                                     "/inputs/meshes/l_block.stl, scale: 2, rotation: [90, 0, "
                                     "30], offset: [-0.2, 0, 0.2]}");
  config::MapReader r(node, "test.yaml", "solids[0]");
  const config::MeshShape shape = config::read_mesh_shape(r, false);
  r.finish();
  const BrickGrid g = cube_grid(0.5, 50);
  const SolidMask mask = voxelise_meshes({shape}, g);
  const V3 a_lo{0.22, 0, 0}, a_hi{0.32, 0.0438, 0.03}, b_lo{0.29, 0, 0}, b_hi{0.32, 0.0438, 0.1};
  expect_mask_matches(mask, g, [&](const V3& x) {
    const V3 q = to_local(shape.placement, x);
    const double a = box_distance(q, a_lo, a_hi), b = box_distance(q, b_lo, b_hi);
    const double scale = shape.placement.scale;
    if (std::min(std::abs(a), std::abs(b)) * scale < 1e-4 * g.dx) return 0.0;
    return std::min(a, b) * scale;  // exact outside; the right sign inside
  });
}

// A box whose faces lie on voxel-centre planes: the centres on its lower faces are solid, those
// on its upper faces are not, as for a box solid {lo, hi} (voxel centres in [lo, hi)).
TEST(MeshSolids, BoxOnVoxelCentresIsHalfOpen) {
  const BrickGrid g = cube_grid(1.0, 16);  // dx = 1/16: centres at (i + 0.5) / 16, exact
  const V3 lo{2.5 / 16, 3.5 / 16, 4.5 / 16}, hi{9.5 / 16, 7.5 / 16, 12.5 / 16};
  const SolidMask mask = voxelise_meshes({shape_of(box_mesh(lo, hi), {})}, g);
  for (int k = 0; k < 16; ++k)
    for (int j = 0; j < 16; ++j)
      for (int i = 0; i < 16; ++i)
        EXPECT_EQ(solid_at(mask, i, j, k), i >= 2 && i < 9 && j >= 3 && j < 7 && k >= 4 && k < 12)
            << "voxel (" << i << ", " << j << ", " << k << ")";
}

}  // namespace
}  // namespace apron::flip
