// Plane detection in point clouds (issue 16; Limberger & Oliveira 2015, 3D-KHT): a one-shot
// analysis. Points from a file or a synthetic scene are split over the ranks by RCB; the planes
// (normal, offset, inliers, centroid, oriented rectangle) go to planes.csv and the run report,
// the per-point labels to HDF5 + XDMF and a PLY coloured by plane. On a synthetic scene the
// result is scored against the ground truth (per-plane errors, per-point precision/recall/F1).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "config/case_config.hpp"
#include "planes/detector.hpp"
#include "planes/planes_config.hpp"
#include "planes/scenes.hpp"
#include "planes/split_cost.hpp"
#include "runtime/runtime.hpp"
#include "workload.hpp"
#include "workload_registry.hpp"

namespace apron::planes {

// How the detection compares with a scene's ground truth.
struct GroundTruthScore {
  std::size_t truth_planes = 0;    // planes of the scene
  std::size_t required = 0;        // of them with at least the minimum of inlier points
  std::size_t found_required = 0;  // of those matched by a detected plane
  std::size_t unmatched_detected = 0;
  double max_normal_error_deg = 0;           // over matched planes
  double max_offset_error = 0;               // absolute, over matched planes
  double scene_size = 0;                     // the scene's diagonal
  double precision = 0, recall = 0, f1 = 0;  // per point
  std::vector<int> match;                    // per detected plane: its scene plane, -1 none
  std::vector<std::int64_t> truth_points;    // per scene plane
};

// Scores detected planes against a scene (collective: the per-point counts are summed).
// labels/truth: per local point, the detected and the true plane (-1 none).
GroundTruthScore score_detection(MPI_Comm comm, const Scene& scene,
                                 const std::vector<Plane>& planes,
                                 const std::vector<std::int32_t>& labels,
                                 std::span<const std::int32_t> truth,
                                 std::uint64_t min_plane_points);

class PlaneDetection final : public Workload {
 public:
  explicit PlaneDetection(const WorkloadContext& context);

  void setup() override;    // reads or generates the points, splits them by RCB
  void advance() override;  // the detection (config.planes.repeat times)
  std::size_t global_items() const override { return total_points_; }
  void write_outputs(bool final) override;
  void report(Json& json) const override;
  std::vector<io::VisualBlock> visual_blocks() override;

  const Detection& detection() const { return detection_; }
  std::span<const std::uint64_t> local_index() const { return local_index_; }
  const GroundTruthScore* score() const { return has_truth_ ? &score_ : nullptr; }
  // Per rank: the split's estimate of its octree work (on several ranks; else empty).
  const std::vector<double>& estimated_work() const { return estimated_work_; }

 private:
  void load_points(Cloud& cloud, Labels& truth);
  void find_bounds(const Cloud& cloud);
  void split(const Cloud& cloud, const Labels& truth);
  void keep_own_points(const Cloud& cloud, const Labels& truth, const SplitGrid* grid,
                       const std::vector<int>& cell_owner);
  void check_memory() const;
  std::uint64_t min_plane_points() const;
  void print_table() const;
  void write_csv() const;
  void write_point_outputs();
  void build_visual_buffers();

  const PlanesConfig& pc_;
  RankInfo ranks_;
  DeviceInfo device_;
  PhaseTimers& timers_;
  std::uint64_t total_points_ = 0;
  std::array<double, 3> centre_{}, lo_{}, hi_{};
  double half_extent_ = 0, rho_max_ = 0;
  std::vector<double> estimated_work_;  // per rank
  // This rank's points, centred, float, x y z one after another (12 bytes a point, a Vec4's 16
  // would travel a third more): in page-locked host memory (filled at setup), so that each
  // analysis uploads them by DMA at the link's speed.
  PinnedBuffer local_points_;
  std::span<const float> local_;
  std::size_t local_count() const { return local_.size() / 3; }
  // Their indices in the cloud and their scene planes (synthetic input), left unset by resize:
  // the threads that fill them touch their pages first (one thread zeroing 240 MB first took
  // 0.25 s at 20M points).
  UninitialisedVector<std::uint64_t> local_index_;
  UninitialisedVector<std::int32_t> local_truth_;
  bool has_truth_ = false;
  Scene scene_;
  std::unique_ptr<PlaneDetector> detector_;
  Detection detection_;
  GroundTruthScore score_;
  std::vector<double> analysis_seconds_;
  std::vector<StageTimes> stage_history_;  // per repetition
  // Host buffers of the visual output and the Catalyst blocks.
  std::vector<float> vis_position_;
  std::vector<double> rect_position_;
  std::vector<std::int64_t> rect_quads_;
  std::vector<std::uint32_t> rect_triangles_;
  std::vector<std::int32_t> rect_plane_, rect_triangle_plane_;
};

WorkloadSpec planes_spec();

}  // namespace apron::planes
