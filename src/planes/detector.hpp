// The 3D-KHT pipeline over ranks (issue 16): each rank clusters its own points (octree) and votes
// into its own accumulator; one allreduce sums the accumulators; every rank then finds the same
// peaks, and the planes' least-squares fits are summed over the clusters of all ranks (a second,
// small allreduce), so that a plane cut by a rank boundary collects its clusters from both sides.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "decomposition/transport.hpp"
#include "kernels/common/backend.hpp"
#include "kernels/common/vec.hpp"
#include "kernels/planes/accumulator.hpp"
#include "kernels/planes/octree.hpp"
#include "planes/residual_params.hpp"

namespace apron::planes {

struct DetectorParams {
  OctreeParams octree;
  int phi_cells = 30;
  int rho_cells = 100;
  double min_votes = 15;               // smoothed votes a peak needs
  Voting voting = Voting::sort;        // how votes reach the cells (sort-and-reduce, atomics)
  std::uint64_t min_plane_points = 1;  // inliers a plane needs (global)
  double merge_angle_deg = 3;          // planes closer than this angle and distance are one
  double merge_distance = 0.01;        // in the cloud's units
  // > 0: points on no cluster join the nearest plane within grow_band times its rms (and within
  // its rectangle); 0: a plane's inliers are its clusters' points only, as in the paper.
  double grow_band = 0;
  // Clusters that no peak's plane took are grouped among themselves into planes (a
  // small surface near a large parallel one); false: the paper's behaviour, they are dropped.
  bool recover_orphans = true;
  // Clusters join a plane when their centroid lies on it (not by offsets at the origin), and a
  // plane whose fit leans off the normal its clusters agree on (parallel surfaces a few
  // centimetres apart) keeps only the clusters on the larger one; false: the paper's.
  bool verify_planes = true;
  ResidualParams residual;  // the second round (residual_params.hpp); on by default
};

// A count with merge(), for the residual round's grouped sums.
struct Tally {
  std::int64_t n = 0;
  APRON_HD void merge(const Tally& o) { n += o.n; }
};

// The GPU's grouped sums (detector.cpp, grouped_sums): the listed items' groups and indices,
// sorted by group, and where each group's items begin.
struct GroupScratch {
  DeviceVector<std::uint32_t> keys, items, keys_alt, items_alt, bounds;
};

// Tests: per group g < groups, the moments (Moments::add) of the points i < points.size() with
// group[i] == g (group[i] < 0: none), by the residual round's grouped sums on this backend (on the
// GPU: the points sorted by group first). `scratch` and `partials` are kept between calls.
std::vector<Moments> grouped_moments(const DeviceVector<Vec4>& points,
                                     const DeviceVector<std::int32_t>& group, std::size_t groups,
                                     GroupScratch& scratch, DeviceVector<Moments>& partials);

inline constexpr std::uint32_t kNoPeak = 0xffffffffu;  // a plane recovered from orphan clusters

// A detected plane, in the cloud's own coordinates: normal . x = offset.
struct Plane {
  std::array<double, 3> normal{}, centroid{};
  double offset = 0;
  std::uint64_t inliers = 0;
  std::uint64_t clusters = 0;
  double rms = 0;  // root of the smallest eigenvalue: the inliers' spread off the plane
  // The oriented rectangle holding the inliers: centroid + u * [u_min, u_max] + v * [v_min, v_max].
  std::array<double, 3> axis_u{}, axis_v{};
  double u_min = 0, u_max = 0, v_min = 0, v_max = 0;
  std::uint32_t peak_cell = 0;  // the accumulator cell of its (first) peak, or kNoPeak
  std::array<std::array<double, 3>, 4> corners() const;
};

// Seconds per stage (the maximum over ranks), from points in host memory.
struct StageTimes {
  double upload = 0, octree = 0, vote = 0, reduce = 0, peaks = 0, planes = 0, labels = 0,
         extent = 0, grow = 0, residual = 0, total = 0;
};

struct Detection {
  std::vector<Plane> planes;  // by inliers, most first
  std::vector<std::int32_t>
      labels;  // per local point: its plane, -1 none (host; filled on request)
  StageTimes times;
  std::uint64_t clusters = 0;  // over all ranks
  std::uint64_t votes = 0;     // (cell, vote) pairs over all ranks
  std::uint64_t grown = 0;     // points that joined a plane by growing (over all ranks)
  std::size_t peaks = 0;       // before merging and the inlier minimum
  // The residual round (DetectorParams::residual): its points and voting clusters over all ranks,
  // the planes it added and those of its planes that joined a first-round plane.
  std::uint64_t residual_points = 0, residual_clusters = 0;
  std::size_t residual_new = 0, residual_joined = 0;
  std::vector<std::uint64_t> nodes_per_level, clusters_per_level;  // over all ranks
  // Per rank: its octree's work, the points active at each tested level summed (the levels
  // above first_level, untested, at a fifth), the quantity the split's cost estimate predicts.
  std::vector<double> octree_work;
};

class PlaneDetector {
 public:
  // Collective over comm (its ranks set up their transport for the sums over ranks).
  PlaneDetector(MPI_Comm comm, DetectorParams params);
  ~PlaneDetector();

  // points: this rank's points relative to `centre` (float), in host memory (page-locked host
  // memory, a PinnedBuffer, uploads at the link's full speed: 3-8x faster than pageable);
  // centre: the cloud's bounding-box centre; half_extent: half the edge of the cloud's bounding
  // cube (global); rho_max: the largest distance of a point from the centre (global). Collective.
  Detection detect(std::span<const Vec4> points, const std::array<double, 3>& centre,
                   double half_extent, double rho_max, bool want_labels);
  // The same for points as x, y, z floats one after another (3 per point): 12 bytes a point
  // travel instead of a Vec4's 16 (a quarter of the upload less), widened to Vec4 on the device.
  Detection detect(std::span<const float> xyz, const std::array<double, 3>& centre,
                   double half_extent, double rho_max, bool want_labels);

  // What the last detect() left on the device, for tests.
  const OctreeBuilder& octree() const { return octree_; }
  const Accumulator* accumulator() const { return accumulator_.get(); }
  const std::vector<std::uint32_t>& peak_cells() const { return peaks_; }
  // Tests: the planes' extents by the portable path (a sort by label) also under CUDA, where
  // per-block atomic minima and maxima are the default; both give the same rectangles.
  void set_sorted_extents(bool on) { sorted_extents_ = on; }
  // Tests: the points per chunk of detect(xyz)'s upload (upload_packed).
  void set_upload_chunk_points(std::size_t points) {
    upload_chunk_points_ = std::max<std::size_t>(1, points);
  }

 private:
  // detect() after its upload: `upload(frame)` copies the n points into points_ (timed as the
  // upload; it may prepare the octree's keys in `frame`).
  template <class Upload>
  Detection analyse(std::size_t n, const Upload& upload, const std::array<double, 3>& centre,
                    double half_extent, double rho_max, bool want_labels);
  void upload_packed(std::span<const float> xyz, const OctreeFrame& frame);
  std::vector<Plane> fit_planes(const DeviceVector<Cluster>& clusters,
                                const std::vector<std::uint32_t>& peaks,
                                const DetectorParams& params,
                                std::vector<std::int32_t>& cluster_plane);
  void sum_votes();
  // The residual round (residual_params.hpp) and its steps, in order.
  void residual_round(std::vector<Plane>& planes, const OctreeFrame& frame, Detection& out);
  std::size_t gather_residual_points(const std::vector<Plane>& planes);
  std::size_t thin_residual_points(std::size_t points);
  std::size_t vote_thin_clusters(double limit);
  std::vector<Plane> residual_candidates(double limit);
  void grow_candidates(std::vector<Plane>& found, double noise);
  // Which eligible points label_candidates visits: all; all, marking those within some
  // candidate's band (near_index_); only those marked (the same bands since).
  enum class Visit { all, all_marking_near, near };
  void label_candidates(const std::vector<Plane>& found, double least_rms,
                        Visit visit = Visit::all);
  std::vector<Moments> candidate_sums(std::size_t candidates, const std::vector<Plane>* about,
                                      const std::vector<char>* shared = nullptr);
  std::size_t list_candidate_points();
  void refit_candidates(std::vector<Plane>& found, double noise);
  void join_split_candidates(std::vector<Plane>& found, std::vector<Moments>& sums);
  std::vector<std::int32_t> keep_candidate_planes(std::vector<Plane>& found,
                                                  const std::vector<Plane>& planes);
  void adopt_candidate_planes(std::vector<Plane>& planes, const std::vector<Plane>& found,
                              const std::vector<std::int32_t>& renumber, Detection& out);
  void release_reclaimed(std::vector<Plane>& planes, std::size_t first);
  void sort_by_inliers(std::vector<Plane>& planes);
  // The planes' rectangles from the points' labels (both in the same order: the input's, or the
  // octree's Morton order).
  void compute_extents(std::vector<Plane>& planes, const DeviceVector<std::int32_t>& labels,
                       const DeviceVector<Vec4>& points);
  void extents_by_sort(std::size_t planes, const DeviceVector<std::int32_t>& labels,
                       const DeviceVector<Vec4>& points, std::vector<double>& most);
  void extents_by_atomics(std::size_t planes, const DeviceVector<std::int32_t>& labels,
                          const DeviceVector<Vec4>& points, std::vector<double>& most);
  std::uint64_t grow_inliers(const std::vector<Plane>& planes);
  void to_cloud_coordinates(std::vector<Plane>& planes, const std::array<double, 3>& centre);

  MPI_Comm comm_;
  // The sums over ranks of device arrays (the votes, the octrees' level noise): GPU to GPU where
  // each rank has one, queued behind the kernels that made them, so the host does not wait.
  Transport transport_;
  DetectorParams params_;
  OctreeBuilder octree_, residual_octree_;
  std::unique_ptr<Accumulator> accumulator_;
  double rho_max_ = 0;
  DeviceVector<Vec4> points_;
  DeviceVector<float> packed_;  // detect(xyz): the points as uploaded, before they are widened
  DeviceVector<std::uint32_t> peak_cells_;
  // labels_: per point in the input's order, made from sorted_labels_ (the octree's order, in
  // which the residual round works too) only where something asks for it (want_labels,
  // grow_band): a scatter of about 1 ms at 20M points.
  DeviceVector<std::int32_t> cluster_peak_, cluster_plane_, labels_, sorted_labels_;
  DeviceVector<double> plane_frames_;
  DeviceVector<double> first_bands_;  // the residual round: the first round's planes' bands
  DeviceVector<float> u_, v_, run_extent_;
  DeviceVector<std::uint32_t> label_keys_, label_index_, run_label_, run_count_, run_start_;
  DeviceVector<std::uint32_t> grown_;
  DeviceVector<std::uint32_t> residual_index_, plane_map_;
  DeviceVector<Vec4> residual_points_, residual_sample_;
  DeviceVector<Cluster> residual_clusters_;
  // The residual round's eligible points (those a candidate may take: Eligible), their
  // indices, positions and first-round labels; residual_labels_ holds their candidates.
  DeviceVector<std::uint32_t> eligible_index_;
  DeviceVector<Vec4> eligible_points_;
  DeviceVector<std::int32_t> eligible_labels_;
  DeviceVector<std::int32_t> residual_labels_;
  // The eligible points that went to a candidate, the candidates' planes (candidate_sums) and the
  // grouped sums' partials and totals.
  DeviceVector<std::uint32_t> candidate_index_;
  DeviceVector<std::uint8_t> near_;         // per eligible point: within some candidate's band
  DeviceVector<std::uint32_t> near_index_;  // those points
  std::size_t near_points_ = 0;
  DeviceVector<double> candidate_frames_;
  GroupScratch group_scratch_;
  DeviceVector<Moments> group_moments_;
  DeviceVector<Tally> group_tallies_;
  PinnedBuffer cluster_staging_;   // the clusters on the host (fit_planes)
  DeviceVector<int> extent_keys_;  // the atomics path's minima and maxima, order-preserving
  bool sorted_extents_ = false;
  std::vector<std::uint32_t> peaks_;
  // upload_packed's chunks: 12 MB each, so that the last chunk's kernels, which no copy hides,
  // take microseconds.
  static constexpr std::size_t kUploadChunkPoints = std::size_t{1} << 20;
  std::size_t upload_chunk_points_ = kUploadChunkPoints;
  struct UploadStream;  // the GPU's stream and events for upload_packed
  std::unique_ptr<UploadStream> upload_stream_;
};

}  // namespace apron::planes
