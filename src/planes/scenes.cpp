#include "planes/scenes.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/common/element_hash.hpp"

namespace apron::planes {
namespace {

constexpr double kPiD = 3.14159265358979323846;

Vec3d add(Vec3d a, Vec3d b) {
  return {a[0] + b[0], a[1] + b[1], a[2] + b[2]};
}
Vec3d scale(double s, Vec3d a) {
  return {s * a[0], s * a[1], s * a[2]};
}
Vec3d cross(Vec3d a, Vec3d b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
double dot(Vec3d a, Vec3d b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
double length(Vec3d a) {
  return std::sqrt(dot(a, a));
}
bool coplanar(const ScenePlane& a, const ScenePlane& b) {
  return dot(a.normal, b.normal) > 1 - 1e-12 && std::fabs(a.offset - b.offset) < 1e-12;
}

// Counter-based random numbers (splitmix64 of seed, index and stream): reproducible per point.
double uniform(std::uint64_t seed, std::uint64_t i, std::uint64_t stream) {
  std::uint64_t z =
      seed * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL + stream * 0x94d049bb133111ebULL;
  for (int round = 0; round < 2; ++round) z = mix64(z + 0x9e3779b97f4a7c15ULL);
  return (static_cast<double>(z >> 11) + 0.5) / 9007199254740992.0;  // (0, 1)
}

class SceneBuilder {
 public:
  // A rectangle on the plane of that name (new, or one an earlier rectangle lies on: the boards
  // of two shelving units at one height are one plane, as a detector sees them).
  void rect(Vec3d corner, Vec3d u, Vec3d v, const std::string& name) {
    const Vec3d n = cross(u, v);
    const Vec3d unit = scale(1 / length(n), n);
    const ScenePlane plane{unit, dot(unit, corner), name};
    int index = static_cast<int>(scene_.planes.size());
    for (std::size_t k = 0; k < scene_.planes.size(); ++k)
      if (scene_.planes[k].name == name) index = static_cast<int>(k);
    if (index == static_cast<int>(scene_.planes.size()))
      scene_.planes.push_back(plane);
    else if (!coplanar(scene_.planes[index], plane))
      throw std::logic_error("scene: rectangles named '" + name + "' are not coplanar");
    scene_.rects.push_back({corner, u, v, index});
  }
  void ball(Vec3d centre, double radius) { scene_.balls.push_back({centre, radius}); }
  // The 4 sides and the top of a box standing on z = base, rotated by `angle` about z.
  void box(Vec3d centre, double sx, double sy, double sz, double angle, const std::string& name) {
    const Vec3d ex = {std::cos(angle) * sx, std::sin(angle) * sx, 0};
    const Vec3d ey = {-std::sin(angle) * sy, std::cos(angle) * sy, 0};
    const Vec3d ez = {0, 0, sz};
    const Vec3d c0 = add(add(centre, scale(-0.5, ex)), scale(-0.5, ey));  // bottom corner
    rect(add(c0, ez), ex, ey, name + " top");
    rect(c0, ex, ez, name + " side -y");
    rect(add(c0, ey), ez, ex, name + " side +y");
    rect(c0, ez, ey, name + " side -x");
    rect(add(c0, ex), ey, ez, name + " side +x");
  }
  Scene finish() {
    Scene& s = scene_;
    double total = 0;
    for (const auto& r : s.rects) {
      total += length(cross(r.edge_u, r.edge_v));
      s.cumulative_area.push_back(total);
    }
    for (const auto& b : s.balls) {
      total += 4 * kPiD * b.radius * b.radius;
      s.cumulative_area.push_back(total);
    }
    s.lo = {1e300, 1e300, 1e300};
    s.hi = {-1e300, -1e300, -1e300};
    for (const auto& r : s.rects)
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          const Vec3d p = add(add(r.corner, scale(a, r.edge_u)), scale(b, r.edge_v));
          for (int d = 0; d < 3; ++d)
            s.lo[d] = std::min(s.lo[d], p[d]), s.hi[d] = std::max(s.hi[d], p[d]);
        }
    for (const auto& b : s.balls)
      for (int d = 0; d < 3; ++d)
        s.lo[d] = std::min(s.lo[d], b.centre[d] - b.radius),
        s.hi[d] = std::max(s.hi[d], b.centre[d] + b.radius);
    s.diagonal = length({s.hi[0] - s.lo[0], s.hi[1] - s.lo[1], s.hi[2] - s.lo[2]});
    return std::move(scene_);
  }

 private:
  Scene scene_;
};

Scene room() {
  SceneBuilder b;
  const double w = 8, d = 6, h = 3;
  b.rect({0, 0, 0}, {w, 0, 0}, {0, d, 0}, "floor");
  b.rect({0, 0, h}, {0, d, 0}, {w, 0, 0}, "ceiling");
  b.rect({0, 0, 0}, {0, 0, h}, {w, 0, 0}, "wall -y");
  b.rect({0, d, 0}, {w, 0, 0}, {0, 0, h}, "wall +y");
  b.rect({0, 0, 0}, {0, d, 0}, {0, 0, h}, "wall -x");
  b.rect({w, 0, 0}, {0, 0, h}, {0, d, 0}, "wall +x");
  b.rect({2.0, 1.5, 0.75}, {1.6, 0, 0}, {0, 0.9, 0}, "table");
  b.box({5.5, 4.2, 0}, 1.2, 0.6, 1.9, 0.35, "cabinet");
  b.box({2.6, 4.3, 0}, 2.1, 0.9, 0.45, -0.2, "sofa");
  return b.finish();
}

Scene boxes() {
  SceneBuilder b;
  b.rect({0, 0, 0}, {10, 0, 0}, {0, 10, 0}, "floor");
  b.box({2.5, 2.5, 0}, 2.0, 1.5, 1.2, 0.3, "box a");
  b.box({7.0, 3.0, 0}, 1.6, 2.2, 2.1, -0.5, "box b");
  b.box({4.5, 7.2, 0}, 3.0, 1.8, 0.8, 0.9, "box c");
  return b.finish();
}

Scene staircase() {
  SceneBuilder b;
  const int steps = 8;
  const double run = 0.3, rise = 0.18, width = 1.2;
  for (int k = 0; k < steps; ++k) {
    b.rect({k * run, 0, k * rise}, {0, 0, rise}, {0, width, 0}, "riser " + std::to_string(k + 1));
    b.rect({k * run, 0, (k + 1) * rise}, {0, width, 0}, {run, 0, 0},
           "tread " + std::to_string(k + 1));
  }
  b.rect({0, -0.05, -0.2}, {steps * run + 0.4, 0, 0}, {0, 0, steps * rise + 0.4}, "side wall");
  return b.finish();
}

Scene roof() {
  SceneBuilder b;
  const double w = 10, d = 8, h = 3, pitch = 30 * kPiD / 180;
  const double rise = d / 2 * std::tan(pitch), slope = d / 2 / std::cos(pitch);
  b.rect({-2, -2, 0}, {w + 4, 0, 0}, {0, d + 4, 0}, "ground");
  b.rect({0, 0, 0}, {0, 0, h}, {w, 0, 0}, "wall -y");
  b.rect({0, d, 0}, {w, 0, 0}, {0, 0, h}, "wall +y");
  b.rect({0, 0, 0}, {0, d, 0}, {0, 0, h}, "wall -x");
  b.rect({w, 0, 0}, {0, 0, h}, {0, d, 0}, "wall +x");
  const Vec3d up = {0, std::cos(pitch) * slope, std::sin(pitch) * slope};
  const Vec3d down = {0, -std::cos(pitch) * slope, std::sin(pitch) * slope};
  b.rect({-0.5, 0, h}, {w + 1, 0, 0}, up, "roof south");
  b.rect({-0.5, d, h}, down, {w + 1, 0, 0}, "roof north");
  (void)rise;
  return b.finish();
}

// A stairwell corner: an open staircase of eight treads without risers (0.3 x 1.2 m,
// 0.18 m apart: coarse octree nodes span several and look like one plane at the stairs' pitch),
// a table and clutter: two boxes and two balls. Every horizontal surface is its own plane.
Scene stairs() {
  SceneBuilder b;
  const double w = 4.5, d = 3.5, h = 2.5;
  b.rect({0, 0, 0}, {w, 0, 0}, {0, d, 0}, "floor");
  b.rect({0, 0, 0}, {0, 0, h}, {w, 0, 0}, "wall -y");
  b.rect({0, 0, 0}, {0, d, 0}, {0, 0, h}, "wall -x");
  const int steps = 8;
  const double run = 0.3, rise = 0.18, width = 1.2;
  for (int k = 0; k < steps; ++k)
    b.rect({1.0 + k * run, 0.2, (k + 1) * rise}, {run, 0, 0}, {0, width, 0},
           "tread " + std::to_string(k + 1));
  b.rect({2.8, 2.4, 0.81}, {1.4, 0, 0}, {0, 0.8, 0}, "table");
  b.box({0.9, 2.6, 0}, 0.6, 0.5, 0.45, 0.4, "box a");
  b.box({4.0, 1.0, 0}, 0.5, 0.4, 0.27, -0.3, "box b");
  b.ball({2.0, 2.9, 0.3}, 0.3);
  b.ball({3.5, 2.8, 1.01}, 0.2);  // on the table
  return b.finish();
}

// A warehouse bay: two shelving units of five shallow boards, 0.35 m apart, in front
// of a wall; the boards at one height are one plane. Boxes on the boards and balls on the floor.
Scene shelving() {
  SceneBuilder b;
  const double w = 6, d = 4, h = 3;
  b.rect({0, 0, 0}, {w, 0, 0}, {0, d, 0}, "floor");
  b.rect({0, 0, 0}, {0, 0, h}, {w, 0, 0}, "wall -y");
  const double depth = 0.35, length = 1.8, spacing = 0.35, first = 0.15, y0 = 0.1;
  const int boards = 5;
  for (const double x0 : {0.5, 2.8}) {
    for (int k = 0; k < boards; ++k)
      b.rect({x0, y0, first + k * spacing}, {length, 0, 0}, {0, depth, 0},
             "board " + std::to_string(k + 1));
    const double top = first + (boards - 1) * spacing + 0.1;
    for (const double x : {x0, x0 + length})
      b.rect({x, y0, 0}, {0, depth, 0}, {0, 0, top}, "side x=" + std::to_string(x).substr(0, 3));
  }
  b.box({1.2, 0.27, first + spacing}, 0.3, 0.25, 0.2, 0.0, "box on board 2");
  b.box({3.6, 0.27, first + 2 * spacing}, 0.4, 0.25, 0.15, 0.0, "box on board 3");
  b.ball({2.0, 2.5, 0.35}, 0.35);
  b.ball({4.5, 3.0, 0.25}, 0.25);
  return b.finish();
}

}  // namespace

const std::vector<std::string>& scene_kinds() {
  static const std::vector<std::string> kinds = {"room", "boxes",  "staircase",
                                                 "roof", "stairs", "shelving"};
  return kinds;
}

Scene make_scene(const std::string& kind) {
  if (kind == "room") return room();
  if (kind == "boxes") return boxes();
  if (kind == "staircase") return staircase();
  if (kind == "roof") return roof();
  if (kind == "stairs") return stairs();
  if (kind == "shelving") return shelving();
  throw std::invalid_argument("unknown scene '" + kind + "'");
}

Vec3d Scene::point(const SceneSpec& spec, std::uint64_t i, int& plane) const {
  const auto outliers = static_cast<std::uint64_t>(std::llround(spec.outliers * spec.points));
  const std::uint64_t on_planes = spec.points - outliers;
  if (i >= on_planes) {  // uniform in the bounding box
    plane = -1;
    Vec3d p;
    for (int d = 0; d < 3; ++d) p[d] = lo[d] + uniform(spec.seed, i, 1 + d) * (hi[d] - lo[d]);
    return p;
  }
  const double pick = uniform(spec.seed, i, 0) * cumulative_area.back();
  const auto r = std::min(static_cast<std::size_t>(std::upper_bound(cumulative_area.begin(),
                                                                    cumulative_area.end(), pick) -
                                                   cumulative_area.begin()),
                          cumulative_area.size() - 1);
  const double s = uniform(spec.seed, i, 1), t = uniform(spec.seed, i, 2);
  // Box-Muller: a standard normal displacement along the surface's normal.
  const double g = std::sqrt(-2 * std::log(uniform(spec.seed, i, 3))) *
                   std::cos(2 * kPiD * uniform(spec.seed, i, 4));
  if (r >= rects.size()) {  // on a ball: uniform on the sphere (z = 2s - 1, azimuth 2 pi t)
    plane = -1;
    const SceneBall& b = balls[std::min(r - rects.size(), balls.size() - 1)];
    const double z = 2 * s - 1, ring = std::sqrt(std::max(0.0, 1 - z * z));
    const Vec3d n = {ring * std::cos(2 * kPiD * t), ring * std::sin(2 * kPiD * t), z};
    return add(b.centre, scale(b.radius + g * spec.noise * diagonal, n));
  }
  const SceneRect& rect = rects[r];
  plane = rect.plane;
  const Vec3d on = add(add(rect.corner, scale(s, rect.edge_u)), scale(t, rect.edge_v));
  return add(on, scale(g * spec.noise * diagonal, planes[rect.plane].normal));
}

}  // namespace apron::planes
