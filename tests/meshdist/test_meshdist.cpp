// Mesh distance kernels: the grid search against brute force, and analytic cases (issue 5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/common/algorithms.hpp"
#include "kernels/meshdist/meshdist_kernels.hpp"
#include "kernels/surface/triangle_geometry.hpp"
#include "meshdist/mesh_prep.hpp"

namespace apron::meshdist {
namespace {

// ---- generated meshes ------------------------------------------------------------------------

io::TriangleMesh icosphere(int levels, double radius = 1.0) {
  const double t = (1 + std::sqrt(5.0)) / 2;
  io::TriangleMesh m;
  m.vertices = {{-1, t, 0},  {1, t, 0},  {-1, -t, 0}, {1, -t, 0}, {0, -1, t},  {0, 1, t},
                {0, -1, -t}, {0, 1, -t}, {t, 0, -1},  {t, 0, 1},  {-t, 0, -1}, {-t, 0, 1}};
  m.triangles = {{0, 11, 5}, {0, 5, 1},  {0, 1, 7},   {0, 7, 10}, {0, 10, 11},
                 {1, 5, 9},  {5, 11, 4}, {11, 10, 2}, {10, 7, 6}, {7, 1, 8},
                 {3, 9, 4},  {3, 4, 2},  {3, 2, 6},   {3, 6, 8},  {3, 8, 9},
                 {4, 9, 5},  {2, 4, 11}, {6, 2, 10},  {8, 6, 7},  {9, 8, 1}};
  auto project = [&](std::array<double, 3> v) {
    const double n = std::sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    for (double& c : v) c *= radius / n;
    return v;
  };
  for (auto& v : m.vertices) v = project(v);
  for (int level = 0; level < levels; ++level) {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> midpoint;
    auto mid = [&](std::uint32_t i, std::uint32_t j) {
      const auto key = std::minmax(i, j);
      auto it = midpoint.find(key);
      if (it != midpoint.end()) return it->second;
      std::array<double, 3> p;
      for (int d = 0; d < 3; ++d) p[d] = (m.vertices[i][d] + m.vertices[j][d]) / 2;
      m.vertices.push_back(project(p));
      return midpoint[key] = static_cast<std::uint32_t>(m.vertices.size() - 1);
    };
    std::vector<std::array<std::uint32_t, 3>> finer;
    for (const auto& [a, b, c] : m.triangles) {
      const auto ab = mid(a, b), bc = mid(b, c), ca = mid(c, a);
      finer.insert(finer.end(), {{a, ab, ca}, {b, bc, ab}, {c, ca, bc}, {ab, bc, ca}});
    }
    m.triangles = finer;
  }
  return m;
}

// A bumpy sphere: radius varies with direction, so nearest triangles are not trivially aligned.
io::TriangleMesh bumpy_sphere(int levels, double amplitude, double frequency) {
  io::TriangleMesh m = icosphere(levels);
  for (auto& v : m.vertices) {
    const double s = 1 + amplitude * std::sin(frequency * v[0]) * std::cos(frequency * v[1] + v[2]);
    for (double& c : v) c *= s;
  }
  return m;
}

// An n x n grid of squares (two triangles each) spanning origin + [0,1] u + [0,1] v.
io::TriangleMesh flat_patch(int n, std::array<double, 3> origin, std::array<double, 3> u,
                            std::array<double, 3> v) {
  io::TriangleMesh m;
  for (int j = 0; j <= n; ++j)
    for (int i = 0; i <= n; ++i) {
      std::array<double, 3> p;
      for (int d = 0; d < 3; ++d) p[d] = origin[d] + u[d] * i / n + v[d] * j / n;
      m.vertices.push_back(p);
    }
  auto at = [&](int i, int j) { return static_cast<std::uint32_t>(j * (n + 1) + i); };
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) {
      m.triangles.push_back({at(i, j), at(i + 1, j), at(i + 1, j + 1)});
      m.triangles.push_back({at(i, j), at(i + 1, j + 1), at(i, j + 1)});
    }
  return m;
}

// ---- running the kernels ---------------------------------------------------------------------

struct Distances {
  std::vector<float> distance;
  std::vector<int> triangle;
  std::vector<Vec4> samples;
  DistanceStats stats;
};

DeviceVector<Vec4> sample(PreparedMesh& source, std::uint64_t area_samples, bool vertices = true) {
  DeviceVector<Vec4> samples;
  const DeviceVector<Vec4> none;
  const std::uint64_t total = (vertices ? source.host.vertices.size() : 0) + area_samples;
  make_samples(vertices ? source.vertices : none, source.soup, source.device_cumulative_area, 42, 0,
               total, samples);
  return samples;
}

Distances measure(const DeviceVector<Vec4>& samples, PreparedMesh& target, bool brute_force) {
  DeviceVector<float> distance;
  DeviceVector<int> triangle;
  if (brute_force) {
    surface::nearest_brute_force(target.soup, samples, distance, triangle);
  } else {
    surface::TriangleGrid grid;
    grid.build(target.soup, target.grid_geometry(2.0));
    grid.nearest(target.soup, samples, distance, triangle);
  }
  Distances out;
  out.stats = reduce_distances(distance, 0);
  out.distance.resize(distance.size());
  out.triangle.resize(triangle.size());
  out.samples.resize(samples.size());
  apron::copy(distance.begin(), distance.end(), out.distance.begin());
  apron::copy(triangle.begin(), triangle.end(), out.triangle.begin());
  apron::copy(samples.begin(), samples.end(), out.samples.begin());
  return out;
}

PreparedMesh prepared(io::TriangleMesh m) {
  PreparedMesh p(std::move(m));
  p.upload();
  return p;
}

Distances grid_distances(PreparedMesh& source, PreparedMesh& target, std::uint64_t area_samples) {
  return measure(sample(source, area_samples), target, false);
}

// ---- exactness ---------------------------------------------------------------------------------

TEST(MeshDistance, ClosestPointRegions) {
  const Vec3 a{0, 0, 0}, b{1, 0, 0}, c{0, 1, 0};
  auto check = [&](Vec3 p, Vec3 expected) {
    const Vec3 q = surface::closest_point_on_triangle(p, a, b, c);
    EXPECT_NEAR(q.x, expected.x, 1e-7);
    EXPECT_NEAR(q.y, expected.y, 1e-7);
    EXPECT_NEAR(q.z, expected.z, 1e-7);
  };
  check({0.2f, 0.2f, 3}, {0.2f, 0.2f, 0});  // face: the projection
  check({-1, -1, 1}, {0, 0, 0});            // vertex a
  check({2, -0.5f, 0}, {1, 0, 0});          // vertex b
  check({-0.5f, 3, 0}, {0, 1, 0});          // vertex c
  check({0.5f, -1, 0}, {0.5f, 0, 0});       // edge ab
  check({-1, 0.25f, 0}, {0, 0.25f, 0});     // edge ac
  check({1, 1, 0}, {0.5f, 0.5f, 0});        // edge bc
  EXPECT_FLOAT_EQ(surface::distance2_to_triangle({0.2f, 0.2f, 3}, a, b, c), 9.0f);
}

void expect_grid_matches_brute_force(PreparedMesh& source, PreparedMesh& target,
                                     const DeviceVector<Vec4>& samples) {
  const Distances grid = measure(samples, target, false);
  const Distances brute = measure(samples, target, true);
  ASSERT_EQ(grid.distance.size(), brute.distance.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < grid.distance.size(); ++i) {
    const double tolerance = 1e-6 * std::max<double>(brute.distance[i], 1e-30);
    if (std::abs(double(grid.distance[i]) - brute.distance[i]) > tolerance && mismatches++ < 5)
      ADD_FAILURE() << "sample " << i << ": grid " << grid.distance[i] << " (triangle "
                    << grid.triangle[i] << "), brute force " << brute.distance[i] << " (triangle "
                    << brute.triangle[i] << ")";
  }
  EXPECT_EQ(mismatches, 0u);
  // Ties go to the lowest triangle index in both, so even the triangles agree.
  EXPECT_EQ(grid.triangle, brute.triangle);
  EXPECT_EQ(grid.stats.max, brute.stats.max);
  EXPECT_EQ(grid.stats.argmax, brute.stats.argmax);
  (void)source;
}

TEST(MeshDistance, GridSearchEqualsBruteForce) {
  PreparedMesh a = prepared(bumpy_sphere(3, 0.08, 5));  // 1280 triangles
  PreparedMesh b = prepared(bumpy_sphere(4, 0.1, 4));   // 5120 triangles
  expect_grid_matches_brute_force(a, b, sample(a, 6000));
  expect_grid_matches_brute_force(b, a, sample(b, 6000));
}

TEST(MeshDistance, GridSearchEqualsBruteForceForSamplesOutsideTheGrid) {
  PreparedMesh a = prepared(icosphere(3, 3.0));  // samples far outside the target's box
  PreparedMesh b = prepared(bumpy_sphere(4, 0.1, 4));
  expect_grid_matches_brute_force(a, b, sample(a, 3000));
  PreparedMesh patch = prepared(flat_patch(40, {-1, -1, 0}, {2, 0, 0}, {0, 2, 0}));  // flat box
  expect_grid_matches_brute_force(b, patch, sample(b, 3000));
}

TEST(MeshDistance, CoarseGridGivesTheSameAnswer) {
  PreparedMesh a = prepared(bumpy_sphere(3, 0.08, 5));
  PreparedMesh b = prepared(bumpy_sphere(4, 0.1, 4));
  const DeviceVector<Vec4> samples = sample(a, 4000);
  DeviceVector<float> fine_d, coarse_d;
  DeviceVector<int> fine_t, coarse_t;
  surface::TriangleGrid fine, coarse;
  fine.build(b.soup, b.grid_geometry(0.5));
  coarse.build(b.soup, b.grid_geometry(20));
  fine.nearest(b.soup, samples, fine_d, fine_t);
  coarse.nearest(b.soup, samples, coarse_d, coarse_t);
  EXPECT_EQ(to_host(fine_d), to_host(coarse_d));
  EXPECT_EQ(to_host(fine_t), to_host(coarse_t));
}

// ---- analytic cases ------------------------------------------------------------------------

TEST(MeshDistance, IdenticalMeshesGiveZero) {
  PreparedMesh a = prepared(bumpy_sphere(3, 0.08, 5));
  PreparedMesh b = prepared(bumpy_sphere(3, 0.08, 5));
  const Distances vertices_only = grid_distances(a, b, 0);
  EXPECT_EQ(vertices_only.stats.max, 0.0f);
  EXPECT_EQ(vertices_only.stats.sum, 0.0);
  const Distances with_area = grid_distances(a, b, 20000);
  EXPECT_LT(with_area.stats.max, 1e-6);  // points on a triangle, rounded to float32
}

TEST(MeshDistance, PlaneAgainstParallelOffsetPlane) {
  const double offset = 0.05;
  PreparedMesh a = prepared(flat_patch(20, {0, 0, 0}, {1, 0, 0}, {0, 1, 0}));
  PreparedMesh b = prepared(flat_patch(13, {0, 0, offset}, {1, 0, 0}, {0, 1, 0}));
  for (auto* direction : {&a, &b}) {
    const Distances d = grid_distances(*direction, direction == &a ? b : a, 10000);
    const double n = static_cast<double>(d.distance.size());
    EXPECT_NEAR(d.stats.max, offset, 1e-6 * offset);
    EXPECT_NEAR(d.stats.sum / n, offset, 1e-6 * offset);
    EXPECT_NEAR(d.stats.sum_squares / n, offset * offset, 1e-6 * offset * offset);
    for (float x : d.distance) ASSERT_NEAR(x, offset, 1e-6 * offset);
  }
}

TEST(MeshDistance, FlatPatchAgainstItsTranslateAlongTheNormal) {
  // A tilted patch: u and v orthogonal, normal n = u x v / |u x v|.
  const std::array<double, 3> origin{0.3, -0.2, 0.7}, u{0.6, 0.8, 0}, v{-0.48, 0.36, 0.8};
  const std::array<double, 3> n{u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                                u[0] * v[1] - u[1] * v[0]};
  const double shift = 0.125;
  std::array<double, 3> moved;
  for (int d = 0; d < 3; ++d) moved[d] = origin[d] + shift * n[d];  // |n| = 1
  PreparedMesh a = prepared(flat_patch(16, origin, u, v));
  PreparedMesh b = prepared(flat_patch(16, moved, u, v));
  const Distances d = grid_distances(a, b, 10000);
  EXPECT_NEAR(d.stats.max, shift, 1e-5 * shift);
  EXPECT_NEAR(d.stats.sum / d.distance.size(), shift, 1e-5 * shift);
  for (float x : d.distance) ASSERT_NEAR(x, shift, 1e-5 * shift);
}

// Largest sagitta of a sphere tessellation: 1 - the smallest distance of a face plane to the
// centre.
double sagitta(const io::TriangleMesh& m) {
  double smallest = 1;
  for (const auto& t : m.triangles) {
    const auto &a = m.vertices[t[0]], &b = m.vertices[t[1]], &c = m.vertices[t[2]];
    double e1[3], e2[3];
    for (int d = 0; d < 3; ++d) e1[d] = b[d] - a[d], e2[d] = c[d] - a[d];
    const double nx = e1[1] * e2[2] - e1[2] * e2[1], ny = e1[2] * e2[0] - e1[0] * e2[2],
                 nz = e1[0] * e2[1] - e1[1] * e2[0];
    const double h =
        std::abs(nx * a[0] + ny * a[1] + nz * a[2]) / std::sqrt(nx * nx + ny * ny + nz * nz);
    smallest = std::min(smallest, h);
  }
  return 1 - smallest;
}

TEST(MeshDistance, SphereTessellationsBoundedBySagitta) {
  const io::TriangleMesh coarse_mesh = icosphere(2), fine_mesh = icosphere(4);
  const double s_coarse = sagitta(coarse_mesh), s_fine = sagitta(fine_mesh);
  PreparedMesh coarse = prepared(coarse_mesh), fine = prepared(fine_mesh);
  const Distances fine_to_coarse = grid_distances(fine, coarse, 20000);
  const Distances coarse_to_fine = grid_distances(coarse, fine, 20000);
  for (const auto* d : {&fine_to_coarse, &coarse_to_fine}) {
    EXPECT_LE(d->stats.max, s_coarse * (1 + 1e-5));
    // Face centres of the coarse mesh are at least s_coarse - s_fine inside the fine one.
    EXPECT_GE(d->stats.max, 0.8 * (s_coarse - s_fine));
  }
}

TEST(MeshDistance, SubdivisionKeepsTheSurface) {
  const io::TriangleMesh m = bumpy_sphere(2, 0.1, 3);
  PreparedMesh original = prepared(m), split = prepared(subdivide(m, 3));
  EXPECT_EQ(split.host.triangles.size(), 9 * m.triangles.size());
  EXPECT_NEAR(split.area, original.area, 1e-6 * original.area);  // float32 corners
  const Distances d = grid_distances(split, original, 0);
  EXPECT_LT(d.stats.max, 1e-6);
}

TEST(MeshDistance, SamplesDependOnlyOnTheirGlobalIndex) {
  PreparedMesh m = prepared(bumpy_sphere(3, 0.08, 5));
  DeviceVector<Vec4> all, part;
  const std::size_t nv = m.host.vertices.size();
  make_samples(m.vertices, m.soup, m.device_cumulative_area, 9, 0, nv + 1000, all);
  make_samples(m.vertices, m.soup, m.device_cumulative_area, 9, 500, nv + 200, part);
  const std::vector<Vec4> part_host = to_host(part), all_host = to_host(all);
  for (std::size_t i = 0; i < part.size(); ++i) {
    const Vec4 p = part_host[i], q = all_host[500 + i];
    ASSERT_EQ(p.x, q.x);
    ASSERT_EQ(p.y, q.y);
    ASSERT_EQ(p.z, q.z);
  }
}

}  // namespace
}  // namespace apron::meshdist
