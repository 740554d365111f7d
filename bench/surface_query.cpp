// The surface-query service at scale (bench/NOTES.md, "Geometry from meshes"): a torus of about
// `triangles` triangles (default 10^6); the median of 7 timed runs (after one warm-up) of the
// build, a refit to a moved copy, and batches of `queries` (default 10^7) points within 2% of the
// torus's size of its surface for closest points, closest within 1%, inside/outside (searched,
// then from classified cells) and ray hits. Prints one line per figure: milliseconds and queries
// per second. Usage: surface_query [triangles] [queries]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "kernels/common/algorithms.hpp"
#include "kernels/surface/surface_query.hpp"

using namespace apron;
using namespace apron::surface;

namespace {

HostSurface torus(int around, int tube) {
  constexpr double kPi = 3.14159265358979323846;
  HostSurface m;
  for (int i = 0; i < around; ++i)
    for (int j = 0; j < tube; ++j) {
      const double u = 2 * kPi * i / around, v = 2 * kPi * j / tube;
      m.vertices.push_back({(1 + 0.35 * std::cos(v)) * std::cos(u),
                            (1 + 0.35 * std::cos(v)) * std::sin(u), 0.35 * std::sin(v)});
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

double median_ms(const std::function<void()>& run) {
  run();  // warm-up: allocations and first launches
  device_synchronize();
  std::vector<double> ms;
  for (int r = 0; r < 7; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    device_synchronize();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const char* what, double ms, std::size_t items) {
  std::printf("%-28s %10.3f ms  %.3g per second\n", what, ms, items / (ms * 1e-3));
}

}  // namespace

int main(int argc, char** argv) {
  const double triangles = argc > 1 ? std::atof(argv[1]) : 1e6;
  const std::size_t n = argc > 2 ? static_cast<std::size_t>(std::atof(argv[2])) : 10000000;
  const int tube = static_cast<int>(std::sqrt(triangles / 8));
  const HostSurface mesh = torus(4 * tube, tube);
  std::printf("torus: %zu triangles, %zu vertices; %zu queries\n", mesh.triangles.size(),
              mesh.vertices.size(), n);

  SurfaceQuery service;
  report("build (host topology + device)", median_ms([&] { service.build(mesh); }),
         mesh.triangles.size());
  std::vector<Vec4> moved(mesh.vertices.size());
  for (std::size_t i = 0; i < moved.size(); ++i)
    moved[i] = {static_cast<float>(mesh.vertices[i][0] + 0.01),
                static_cast<float>(mesh.vertices[i][1]), static_cast<float>(mesh.vertices[i][2]),
                0};
  const DeviceVector<Vec4> moved_device(moved.begin(), moved.end());
  report("refit (normals + grid)", median_ms([&] { service.refit(moved_device); }),
         mesh.triangles.size());

  // Queries within 1% of the torus's size of its surface (where meshdist's samples and a
  // wall's particles are), and rays from them.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> unit(0, 1), near(-0.02, 0.02);
  std::uniform_real_distribution<float> dir(-1, 1);
  std::vector<Vec4> points(n), directions(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = mesh.triangles[rng() % mesh.triangles.size()];
    const double u = unit(rng), w = unit(rng) * (1 - u);
    float* q = &points[i].x;
    for (int d = 0; d < 3; ++d)
      q[d] = static_cast<float>(mesh.vertices[t[0]][d] * (1 - u - w) + mesh.vertices[t[1]][d] * u +
                                mesh.vertices[t[2]][d] * w + near(rng));
    points[i].w = 0;
    directions[i] = {dir(rng), dir(rng), dir(rng), 0};
  }
  const DeviceVector<Vec4> p(points.begin(), points.end()), d(directions.begin(), directions.end());
  DeviceVector<SurfaceHit> hits(n);
  DeviceVector<std::uint8_t> inside(n);
  DeviceVector<RayHit> rays(n);
  const DeviceSpan<SurfaceHit> hit_span(raw(hits), n);
  report("closest", median_ms([&] { service.closest(p, hit_span); }), n);
  report("closest within 0.01", median_ms([&] { service.closest_within(p, 0.01f, hit_span); }), n);
  report("inside", median_ms([&] { service.inside(p, DeviceSpan<std::uint8_t>(raw(inside), n)); }),
         n);
  service.classify_cells();
  report("inside, cells classified",
         median_ms([&] { service.inside(p, DeviceSpan<std::uint8_t>(raw(inside), n)); }), n);
  report("ray hits (t <= 3)",
         median_ms([&] { service.ray_hits(p, d, 3.0f, DeviceSpan<RayHit>(raw(rays), n)); }), n);
  return 0;
}
