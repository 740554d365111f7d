// Synthetic point clouds with exact ground truth: rooms
// with furniture, boxes on a floor, a staircase, a house with a sloped roof, an open staircase
// (treads only) in a stairwell and shelving (stacked parallel boards), the last two with clutter
// (boxes, and balls that are no plane). Points are sampled on the scene's rectangles and balls in
// proportion to their areas, displaced along the normal by Gaussian noise,
// and a fraction of outliers is spread uniformly over the scene's bounding box. Every value is a
// function of (seed, point index) only, so any rank can generate any part of the cloud and every
// rank count sees the same cloud.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace apron::planes {

using Vec3d = std::array<double, 3>;

// A rectangle: corner + s * edge_u + t * edge_v, s, t in [0, 1]; its plane is `plane`.
struct SceneRect {
  Vec3d corner, edge_u, edge_v;
  int plane = 0;
};

// A ball: clutter on no plane (its points' truth is -1), which no plane may claim.
struct SceneBall {
  Vec3d centre;
  double radius = 0;
};

// A plane of the ground truth: unit normal . x = offset.
struct ScenePlane {
  Vec3d normal;
  double offset = 0;
  std::string name;
};

struct SceneSpec {
  std::string kind = "room";  // room | boxes | staircase | roof | stairs | shelving
  std::uint64_t points = 100000;
  double noise = 0.001;   // standard deviation of the normal displacement / scene diagonal
  double outliers = 0.2;  // fraction of the points spread uniformly over the bounding box
  std::uint64_t seed = 1;
};

struct Scene {
  std::vector<ScenePlane> planes;
  std::vector<SceneRect> rects;
  std::vector<SceneBall> balls;
  Vec3d lo, hi;                         // bounding box of the rectangles
  double diagonal;                      // |hi - lo|: "the scene's size"
  std::vector<double> cumulative_area;  // per rect, then per ball, for sampling

  // Point i of the cloud and its plane (-1: an outlier).
  Vec3d point(const SceneSpec& spec, std::uint64_t i, int& plane) const;
};

// The scene of a spec (its geometry only; points come from Scene::point). Unknown kind:
// std::invalid_argument.
Scene make_scene(const std::string& kind);
const std::vector<std::string>& scene_kinds();

}  // namespace apron::planes
