// The surface-query service against brute force: closest points and distances equal an
// all-triangle search, signs equal a float64 generalised winding number (and the test is shown to
// catch the face-normal sign), ray hits equal an all-triangle intersection, a refit equals a fresh
// build of the moved mesh, and the edge topology is what the meshes are.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/device_arena.hpp"
#include "kernels/surface/surface_query.hpp"
#include "kernels/surface/triangle_geometry.hpp"

namespace apron::surface {
namespace {

using Point = std::array<double, 3>;
constexpr double kPi = 3.14159265358979323846;

// A closed prism over an L-shaped outline (non-convex: a concave edge along the inner corner),
// outward normals. Outline in x-z, extruded along y from 0 to depth.
HostSurface l_block(double depth = 0.4) {
  const std::vector<std::array<double, 2>> outline = {{0, 0},     {1, 0},     {1, 0.3},
                                                      {0.3, 0.3}, {0.3, 1.0}, {0, 1.0}};
  HostSurface m;
  const auto n = static_cast<std::uint32_t>(outline.size());
  for (double y : {0.0, depth})
    for (const auto& [x, z] : outline) m.vertices.push_back({x, y, z});
  // Caps: the outline (counter-clockwise seen from -y) as a fan from the inner corner 3, which
  // sees every other corner.
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uint32_t a = (3 + k) % n, b = (3 + k + 1) % n;
    if (a == 3 || b == 3) continue;
    m.triangles.push_back({3, a, b});              // y = 0: normal -y
    m.triangles.push_back({n + 3, n + b, n + a});  // y = depth: normal +y
  }
  for (std::uint32_t k = 0; k < n; ++k) {  // the sides
    const std::uint32_t a = k, b = (k + 1) % n;
    m.triangles.push_back({a, n + b, b});
    m.triangles.push_back({a, n + a, n + b});
  }
  return m;
}

// A closed prism over a thin triangle (a knife edge of about 10 degrees along y at the origin),
// outward normals: beside the edge, the normal of the nearer face points away from the point.
HostSurface knife(double depth = 0.5) {
  HostSurface m;
  for (double y : {0.0, depth})
    for (const auto& [x, z] : std::vector<std::array<double, 2>>{{0, 0}, {1, -0.09}, {1, 0.09}})
      m.vertices.push_back({x, y, z});
  m.triangles = {{0, 1, 2}, {3, 5, 4}};  // caps: -y at y = 0, +y at y = depth
  for (std::uint32_t a = 0; a < 3; ++a) {
    const std::uint32_t b = (a + 1) % 3;
    m.triangles.push_back({a, a + 3, b + 3});
    m.triangles.push_back({a, b + 3, b});
  }
  return m;
}

// A torus about the z axis (radii R and r), outward normals.
HostSurface torus(int around, int tube, double big = 1.0, double small = 0.35) {
  HostSurface m;
  for (int i = 0; i < around; ++i)
    for (int j = 0; j < tube; ++j) {
      const double u = 2 * kPi * i / around, v = 2 * kPi * j / tube;
      m.vertices.push_back({(big + small * std::cos(v)) * std::cos(u),
                            (big + small * std::cos(v)) * std::sin(u), small * std::sin(v)});
    }
  auto id = [&](int i, int j) {
    return static_cast<std::uint32_t>((i % around) * tube + (j % tube));
  };
  for (int i = 0; i < around; ++i)
    for (int j = 0; j < tube; ++j) {
      m.triangles.push_back({id(i, j), id(i + 1, j), id(i + 1, j + 1)});
      m.triangles.push_back({id(i, j), id(i + 1, j + 1), id(i, j + 1)});
    }
  return m;
}

// The float64 generalised winding number (Jacobson et al. 2013) by Van Oosterom & Strackee's
// solid angles: 1 inside a closed outward mesh, 0 outside. Independent of any nearest feature.
double winding_number(const HostSurface& m, const Point& p) {
  double total = 0;
  for (const auto& t : m.triangles) {
    Point v[3];
    double len[3];
    for (int k = 0; k < 3; ++k) {
      for (int d = 0; d < 3; ++d) v[k][d] = m.vertices[t[k]][d] - p[d];
      len[k] = std::sqrt(v[k][0] * v[k][0] + v[k][1] * v[k][1] + v[k][2] * v[k][2]);
    }
    auto dotp = [](const Point& a, const Point& b) {
      return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    };
    const Point bc = {v[1][1] * v[2][2] - v[1][2] * v[2][1], v[1][2] * v[2][0] - v[1][0] * v[2][2],
                      v[1][0] * v[2][1] - v[1][1] * v[2][0]};
    const double det = dotp(v[0], bc);
    const double den = len[0] * len[1] * len[2] + dotp(v[0], v[1]) * len[2] +
                       dotp(v[0], v[2]) * len[1] + dotp(v[1], v[2]) * len[0];
    total += 2 * std::atan2(det, den);
  }
  return total / (4 * kPi);
}

// Queries around a mesh: half uniform in its box grown by a quarter, half within a tenth of its
// size of a vertex (where edges and corners decide the sign).
std::vector<Vec4> queries_around(const HostSurface& m, std::size_t n, unsigned seed) {
  const SurfaceMeasures s = measure(m);
  double size = 0;
  for (int d = 0; d < 3; ++d) size = std::max(size, s.hi[d] - s.lo[d]);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1), near(-0.1 * size, 0.1 * size);
  std::vector<Vec4> q(n);
  for (std::size_t i = 0; i < n; ++i) {
    Point p;
    if (i % 2) {
      for (int d = 0; d < 3; ++d)
        p[d] = s.lo[d] - 0.25 * size + unit(rng) * (s.hi[d] - s.lo[d] + 0.5 * size);
    } else {
      const Point& v = m.vertices[rng() % m.vertices.size()];
      for (int d = 0; d < 3; ++d) p[d] = v[d] + near(rng);
    }
    q[i] = {static_cast<float>(p[0]), static_cast<float>(p[1]), static_cast<float>(p[2]), 0};
  }
  return q;
}

template <class T>
DeviceVector<T> on_device(const std::vector<T>& host) {
  DeviceVector<T> d(host.size());
  detail::copy_to_device(host.data(), host.size(), raw(d));
  return d;
}
template <class T>
std::vector<T> on_host(const DeviceVector<T>& d) {
  return copy_to_host(DeviceSpan<const T>(d));
}

struct Answers {
  std::vector<SurfaceHit> hits;
  std::vector<float> brute_distance;
  std::vector<int> brute_triangle;
};

Answers closest_and_brute(const SurfaceQuery& service, const std::vector<Vec4>& queries,
                          float radius = __builtin_huge_valf()) {
  const DeviceVector<Vec4> points = on_device(queries);
  DeviceVector<SurfaceHit> hits(queries.size());
  service.closest_within(points, radius, DeviceSpan<SurfaceHit>(raw(hits), hits.size()));
  DeviceVector<float> distance;
  DeviceVector<int> triangle;
  nearest_brute_force(service.soup(), points, distance, triangle);
  return {on_host(hits), on_host(distance), on_host(triangle)};
}

// Distances, triangles and closest points equal brute force; signs equal the winding number for
// points not within round-off of the surface. Returns how many signs the nearest triangle's face
// normal would have got wrong (the test's power against the face-normal shortcut) in
// face_normal_errors.
void check_against_references(const HostSurface& mesh, std::size_t n, unsigned seed,
                              std::size_t& face_normal_errors) {
  SurfaceQuery service;
  service.build(mesh);
  EXPECT_TRUE(service.topology().closed());
  const std::vector<Vec4> q = queries_around(mesh, n, seed);
  const Answers a = closest_and_brute(service, q);
  const std::vector<Vec4> corners = copy_to_host(service.soup().corners);
  std::size_t sign_errors = 0, decided = 0;
  face_normal_errors = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const SurfaceHit& h = a.hits[i];
    ASSERT_EQ(h.triangle, a.brute_triangle[i]) << "query " << i;
    ASSERT_EQ(std::fabs(h.point.w), a.brute_distance[i]) << "query " << i;
    const Vec3 p = xyz(q[i]), c = xyz(h.point);
    ASSERT_NEAR(std::sqrt(norm2(p - c)), a.brute_distance[i], 1e-5f) << "query " << i;
    const Vec3 ta = xyz(corners[3 * h.triangle]), tb = xyz(corners[3 * h.triangle + 1]),
               tc = xyz(corners[3 * h.triangle + 2]);
    ASSERT_LT(distance2_to_triangle(c, ta, tb, tc), 1e-10f) << "closest point off its triangle";
    if (a.brute_distance[i] < 1e-4f) continue;  // on the surface within float round-off
    ++decided;
    const bool inside = winding_number(mesh, {q[i].x, q[i].y, q[i].z}) > 0.5;
    sign_errors += (h.point.w < 0) != inside;
    const Vec3 face = cross(tb - ta, tc - ta);
    face_normal_errors += (dot(p - c, face) < 0) != inside;
  }
  EXPECT_EQ(sign_errors, 0u) << "of " << decided << " queries off the surface";
}

TEST(SurfaceQuery, LBlockClosestPointsAndSignsEqualReferences) {
  std::size_t face_errors = 0;
  check_against_references(l_block(), 100000, 1, face_errors);
  // The nearest triangle's own normal misjudges points by the corners where the concave edge
  // meets the caps.
  EXPECT_GT(face_errors, 0u);
}

TEST(SurfaceQuery, KnifeEdgeSignsEqualReferencesWhereFaceNormalsFail) {
  std::size_t face_errors = 0;
  check_against_references(knife(), 100000, 7, face_errors);
  // Outside the sharp edge the nearer face's normal points away: a service that signed by it
  // would fail this test many times over.
  EXPECT_GT(face_errors, 1000u);
}

TEST(SurfaceQuery, TorusClosestPointsAndSignsEqualReferences) {
  std::size_t face_errors = 0;  // few on a smooth mesh
  check_against_references(torus(24, 12), 20000, 2, face_errors);
}

// Inside/outside by search, and after classify_cells() from the cells without triangles (a
// fine grid: most queries land in one), against the winding number.
TEST(SurfaceQuery, InsideEqualsWindingNumber) {
  const HostSurface mesh = torus(48, 24);
  SurfaceQuery service;
  service.build(mesh);
  const std::vector<Vec4> q = queries_around(mesh, 10000, 3);
  const DeviceVector<Vec4> points = on_device(q);
  const Answers a = closest_and_brute(service, q);
  std::vector<int> expected(q.size(), -1);  // -1: on the surface within round-off, not checked
  for (std::size_t i = 0; i < q.size(); ++i)
    if (a.brute_distance[i] >= 1e-4f)
      expected[i] = winding_number(mesh, {q[i].x, q[i].y, q[i].z}) > 0.5;
  for (const bool classified : {false, true}) {
    if (classified) service.classify_cells();
    DeviceVector<std::uint8_t> inside(q.size());
    service.inside(points, DeviceSpan<std::uint8_t>(raw(inside), inside.size()));
    const std::vector<std::uint8_t> got = on_host(inside);
    std::size_t checked = 0, inside_count = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (expected[i] < 0) continue;
      ++checked;
      inside_count += expected[i];
      ASSERT_EQ(got[i] != 0, expected[i] == 1)
          << "query " << i << (classified ? ", classified" : "");
    }
    EXPECT_GT(inside_count, checked / 20);  // the queries do probe the inside
  }
}

TEST(SurfaceQuery, WithinRadiusFindsExactlyTheNearPoints) {
  const HostSurface mesh = l_block();
  SurfaceQuery service;
  service.build(mesh);
  const std::vector<Vec4> q = queries_around(mesh, 20000, 4);
  const float radius = 0.05f;
  const Answers a = closest_and_brute(service, q, radius);
  std::size_t found = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    if (a.brute_distance[i] < radius) {
      ++found;
      ASSERT_EQ(a.hits[i].triangle, a.brute_triangle[i]) << "query " << i;
      ASSERT_EQ(std::fabs(a.hits[i].point.w), a.brute_distance[i]);
    } else {
      ASSERT_EQ(a.hits[i].triangle, -1) << "query " << i << " at " << a.brute_distance[i];
    }
  }
  EXPECT_GT(found, q.size() / 10);
}

TEST(SurfaceQuery, RayHitsEqualBruteForce) {
  const HostSurface mesh = torus(24, 12);
  SurfaceQuery service;
  service.build(mesh);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> box(-2, 2), dir(-1, 1);
  const std::size_t n = 20000;
  std::vector<Vec4> origins(n), directions(n);
  for (std::size_t i = 0; i < n; ++i) {
    origins[i] = {box(rng), box(rng), 0.5f * box(rng), 0};
    directions[i] = {dir(rng), dir(rng), dir(rng), 0};
  }
  const float t_max = 3;
  DeviceVector<RayHit> hits(n);
  service.ray_hits(on_device(origins), on_device(directions), t_max,
                   DeviceSpan<RayHit>(raw(hits), n));
  const std::vector<RayHit> got = on_host(hits);
  const std::vector<Vec4> corners = copy_to_host(service.soup().corners);
  std::size_t hit_count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    RayHit best{__builtin_huge_valf(), -1};
    for (std::size_t t = 0; t < service.triangle_count(); ++t) {
      const float s = ray_triangle(xyz(origins[i]), xyz(directions[i]), xyz(corners[3 * t]),
                                   xyz(corners[3 * t + 1]), xyz(corners[3 * t + 2]));
      if (s >= 0 && s <= t_max && s < best.t) best = {s, static_cast<int>(t)};
    }
    hit_count += best.triangle >= 0;
    // The same crossing, to the round-off of a device that fuses multiply-adds (a tie between
    // two triangles within it may go either way).
    ASSERT_EQ(got[i].triangle >= 0, best.triangle >= 0) << "ray " << i;
    if (best.triangle < 0) continue;
    const float tolerance = 1e-5f * std::max(1.0f, best.t);
    ASSERT_NEAR(got[i].t, best.t, tolerance) << "ray " << i;
    if (got[i].triangle != best.triangle) {
      const int t = got[i].triangle;
      const float own = ray_triangle(xyz(origins[i]), xyz(directions[i]), xyz(corners[3 * t]),
                                     xyz(corners[3 * t + 1]), xyz(corners[3 * t + 2]));
      ASSERT_NEAR(own, best.t, tolerance) << "ray " << i << ": not a tie";
    }
  }
  EXPECT_GT(hit_count, n / 5);
}

TEST(SurfaceQuery, RayThroughUnitBoxFaceAtItsDistance) {
  const HostSurface mesh = l_block();
  SurfaceQuery service;
  service.build(mesh);
  // From x = -1 along +x at height z = 0.15 (through the L's foot): the face x = 0 at t = 1;
  // at z = 0.6 (the L's upright) the same; from above at x = 0.6 down: the top of the foot.
  const std::vector<Vec4> origins = {{-1, 0.2f, 0.15f, 0}, {-1, 0.2f, 0.6f, 0}, {0.6f, 0.2f, 2, 0}};
  const std::vector<Vec4> dirs = {{1, 0, 0, 0}, {1, 0, 0, 0}, {0, 0, -1, 0}};
  DeviceVector<RayHit> hits(3);
  service.ray_hits(on_device(origins), on_device(dirs), 10, DeviceSpan<RayHit>(raw(hits), 3));
  const std::vector<RayHit> got = on_host(hits);
  EXPECT_FLOAT_EQ(got[0].t, 1.0f);
  EXPECT_FLOAT_EQ(got[1].t, 1.0f);
  EXPECT_NEAR(got[2].t, 1.7f, 1e-6f);
}

// A mesh moved on the device (rotated and shifted): the refitted service answers exactly as one
// built from the moved mesh, and as brute force.
TEST(SurfaceQuery, RefitTracksAMovingMeshExactly) {
  HostSurface mesh = l_block();
  SurfaceQuery moving;
  moving.build(mesh);
  const std::vector<Vec4> q = queries_around(mesh, 20000, 6);
  for (int step = 1; step <= 3; ++step) {
    const double angle = 0.3 * step, c = std::cos(angle), s = std::sin(angle);
    HostSurface moved = mesh;
    for (auto& v : moved.vertices)
      v = {c * v[0] - s * v[1] + 0.1 * step, s * v[0] + c * v[1], v[2]};
    std::vector<Vec4> device_form(moved.vertices.size());
    for (std::size_t i = 0; i < moved.vertices.size(); ++i)
      device_form[i] = {static_cast<float>(moved.vertices[i][0]),
                        static_cast<float>(moved.vertices[i][1]),
                        static_cast<float>(moved.vertices[i][2]), 0};
    const DeviceVector<Vec4> vertices = on_device(device_form);
    moving.refit(vertices);
    SurfaceQuery fresh;
    fresh.build(moved);
    const Answers a = closest_and_brute(moving, q), b = closest_and_brute(fresh, q);
    for (std::size_t i = 0; i < q.size(); ++i) {
      ASSERT_EQ(a.hits[i].triangle, a.brute_triangle[i]);
      ASSERT_EQ(std::fabs(a.hits[i].point.w), a.brute_distance[i]);
      ASSERT_EQ(a.hits[i].triangle, b.hits[i].triangle);
      ASSERT_EQ(a.hits[i].point.w, b.hits[i].point.w);
      ASSERT_EQ(a.hits[i].feature, b.hits[i].feature);
    }
  }
}

TEST(SurfaceQuery, TopologyOfOpenAndMiswoundMeshes) {
  SurfaceQuery service;
  service.build(l_block());
  EXPECT_TRUE(service.topology().closed());
  EXPECT_EQ(service.topology().edges, 30u);  // 12 vertices, 20 faces: V - E + F = 2

  HostSurface open = l_block();
  open.triangles.erase(open.triangles.begin());  // one cap triangle gone: its 3 edges open
  service.build(open);
  EXPECT_EQ(service.topology().boundary_edges, 3u);
  EXPECT_FALSE(service.topology().closed());

  HostSurface flipped = l_block();
  std::swap(flipped.triangles[0][1], flipped.triangles[0][2]);
  service.build(flipped);
  EXPECT_EQ(service.topology().flipped_edges, 3u);

  const SurfaceMeasures m = measure(l_block(0.4));
  EXPECT_NEAR(m.signed_volume, 0.4 * (1 * 0.3 + 0.3 * 0.7), 1e-12);
}

}  // namespace
}  // namespace apron::surface
