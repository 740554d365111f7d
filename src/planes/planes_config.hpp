// The `planes:` section of a case file (issue 16): where the points come from (a file, or a
// synthetic scene with ground truth), 3D-KHT's parameters with the paper's defaults, and what to
// write.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/workload_schema.hpp"
#include "kernels/planes/plane_math.hpp"
#include "planes/residual_params.hpp"
#include "planes/scenes.hpp"

namespace apron::planes {

struct PlanesConfig : config::WorkloadSettings {
  std::string file;  // a point cloud (.ply .xyz .pts .csv .txt .pcd .las); empty: the scene
  SceneSpec scene;
  OctreeParams octree;          // s_level, s_ms, s_alpha, s_beta, depth
  int phi_cells = 30;           // the accumulator's phi_num
  int rho_cells = 100;          // rho_num
  double min_votes = 0;         // smoothed votes a peak needs; 0: octree.min_points / 2
  std::string voting = "sort";  // sort (deterministic sums) | atomic (float64 atomics)
  // A plane needs this many inlier points (0: min_plane_fraction of all points).
  std::int64_t min_plane_points = 0;
  double min_plane_fraction = 0.002;  // of all points, when min_plane_points is 0
  // Detected planes closer than this are one plane (degrees; fraction of the scene's diagonal).
  double merge_angle = 3;
  double merge_distance = 0.005;
  // Points on no cluster within grow_band plane rms of a plane (and within its rectangle) join
  // it; 0: off, a plane's inliers are its clusters' points (the paper's definition).
  double grow_band = 0;
  // Clusters no peak's plane took are grouped into planes of their own; false: the
  // paper's behaviour (they are dropped).
  bool recover_orphans = true;
  // Clusters join the plane their centroid lies on, and a plane whose fit leans off its clusters'
  // common normal keeps the clusters on its larger surface; false: the paper's.
  bool verify_planes = true;
  // A second round over the points left off every plane: faces whose octree nodes also held a
  // neighbouring face (residual_params.hpp says what each setting does). Off: one round, the
  // paper's.
  ResidualParams residual;
  // The split over ranks: "cost", cuts where the ranks' estimated octree work is equal
  // (src/planes/split_cost.hpp); "count", where their point counts are.
  std::string balance = "cost";
  bool point_output = true;  // per-point labels: HDF5 + XDMF and a PLY coloured by plane
  int repeat = 1;            // analyses run (benchmarks: the first includes warm-up)
};

std::shared_ptr<const PlanesConfig> read_planes_config(config::MapReader& root);
config::WorkloadSchema planes_schema();

}  // namespace apron::planes
