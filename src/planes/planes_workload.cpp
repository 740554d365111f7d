#include "planes/planes_workload.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "config/yaml_reader.hpp"
#include "decomposition/partition.hpp"
#include "decomposition/reductions.hpp"
#include "io/atomic_file.hpp"
#include "io/point_cloud_reader.hpp"
#include "io/series_output.hpp"
#include "planes/split_cost.hpp"
#include "runtime/json.hpp"
#include "runtime/runtime.hpp"

namespace apron::planes {
namespace {

namespace fs = std::filesystem;

double angle_deg(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  const double c = std::fabs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2]);
  return std::acos(std::min(1.0, c)) * 180 / kPi;
}

// The offset of plane b expressed with a's normal orientation.
double aligned_offset(const std::array<double, 3>& na, const std::array<double, 3>& nb, double b) {
  return na[0] * nb[0] + na[1] * nb[1] + na[2] * nb[2] < 0 ? -b : b;
}

// A colour per plane (golden-ratio hues); grey for points on no plane.
std::array<std::uint8_t, 3> plane_colour(int plane) {
  if (plane < 0) return {128, 128, 128};
  const double h = std::fmod(plane * 0.618033988749895, 1.0) * 6;
  const double x = 1 - std::fabs(std::fmod(h, 2.0) - 1);
  double rgb[3] = {0, 0, 0};
  const int sector = static_cast<int>(h);
  const int hi[6] = {0, 1, 1, 2, 2, 0}, lo[6] = {1, 0, 2, 1, 0, 2};
  rgb[hi[sector]] = 1;
  rgb[lo[sector]] = x;
  return {static_cast<std::uint8_t>(40 + 215 * rgb[0]),
          static_cast<std::uint8_t>(40 + 215 * rgb[1]),
          static_cast<std::uint8_t>(40 + 215 * rgb[2])};
}

template <class T>
void put_le(std::string& out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof b);
}

}  // namespace

GroundTruthScore score_detection(MPI_Comm comm, const Scene& scene,
                                 const std::vector<Plane>& planes,
                                 const std::vector<std::int32_t>& labels,
                                 std::span<const std::int32_t> truth,
                                 std::uint64_t min_plane_points) {
  GroundTruthScore s;
  s.truth_planes = scene.planes.size();
  s.scene_size = scene.diagonal;
  // A detected plane is the scene plane that holds most of its points, if the scene planes in
  // that plane (coplanar faces, such as two boxes' sides in line, are one plane to a detector)
  // hold more than half of them and the detected plane lies within 5 degrees and 2% of the
  // scene's size of it; each scene plane is matched once, the largest overlaps first. By the
  // points, not by the planes' parameters alone: a tread and a box top 9 cm apart are within 2% of
  // each other, and a tilted plane made of one was matched to the other.
  const std::size_t scene_planes = scene.planes.size();
  const auto near = [&](const std::array<double, 3>& normal, double offset, const ScenePlane& t,
                        double degrees, double fraction) {
    return angle_deg(normal, t.normal) <= degrees &&
           std::fabs(offset - aligned_offset(normal, t.normal, t.offset)) <=
               fraction * scene.diagonal;
  };
  std::vector<char> coplanar(scene_planes * scene_planes);
  for (std::size_t g = 0; g < scene_planes; ++g)
    for (std::size_t h = 0; h < scene_planes; ++h)
      coplanar[g * scene_planes + h] =
          near(scene.planes[g].normal, scene.planes[g].offset, scene.planes[h], 0.01, 1e-6);
  std::vector<std::int64_t> overlap(planes.size() * (scene_planes + 1), 0);
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= 0)
      ++overlap[static_cast<std::size_t>(labels[i]) * (scene_planes + 1) +
                static_cast<std::size_t>(truth[i] + 1)];
  global_sum(comm, std::span<std::int64_t>(overlap));
  struct Pair {
    std::int64_t points;
    std::size_t detected, scene;
  };
  std::vector<Pair> pairs;
  for (std::size_t p = 0; p < planes.size(); ++p) {
    const std::int64_t* row = &overlap[p * (scene_planes + 1)];
    const std::int64_t labelled = std::accumulate(row, row + scene_planes + 1, std::int64_t{0});
    for (std::size_t g = 0; g < scene_planes; ++g) {
      const ScenePlane& t = scene.planes[g];
      if (!near(planes[p].normal, planes[p].offset, t, 5, 0.02)) continue;
      std::int64_t on_plane = 0;
      for (std::size_t h = 0; h < scene_planes; ++h)
        if (coplanar[g * scene_planes + h]) on_plane += row[h + 1];
      if (2 * on_plane > labelled) pairs.push_back({row[g + 1], p, g});
    }
  }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const Pair& a, const Pair& b) { return a.points > b.points; });
  s.match.assign(planes.size(), -1);
  std::vector<int> matched_by(scene_planes, -1);
  for (const Pair& pair : pairs) {
    if (s.match[pair.detected] >= 0 || matched_by[pair.scene] >= 0) continue;
    s.match[pair.detected] = static_cast<int>(pair.scene);
    matched_by[pair.scene] = static_cast<int>(pair.detected);
  }
  for (std::size_t p = 0; p < planes.size(); ++p) {
    if (s.match[p] < 0) {
      ++s.unmatched_detected;
      continue;
    }
    const ScenePlane& t = scene.planes[static_cast<std::size_t>(s.match[p])];
    s.max_normal_error_deg =
        std::max(s.max_normal_error_deg, angle_deg(planes[p].normal, t.normal));
    s.max_offset_error = std::max(
        s.max_offset_error,
        std::fabs(planes[p].offset - aligned_offset(planes[p].normal, t.normal, t.offset)));
  }
  // Per point: true positives (labelled with the plane matched to its own), labelled, on planes.
  std::vector<std::int64_t> counts(3 + scene.planes.size(), 0);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const int det = labels[i], gt = truth[i];
    if (det >= 0) ++counts[1];
    if (gt >= 0) {
      ++counts[2];
      ++counts[3 + gt];
      if (det >= 0 && s.match[det] == gt) ++counts[0];
    }
  }
  global_sum(comm, std::span<std::int64_t>(counts));
  s.precision = counts[1] ? static_cast<double>(counts[0]) / counts[1] : 0;
  s.recall = counts[2] ? static_cast<double>(counts[0]) / counts[2] : 0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0;
  s.truth_points.assign(counts.begin() + 3, counts.end());
  for (std::size_t g = 0; g < scene.planes.size(); ++g)
    if (s.truth_points[g] >= static_cast<std::int64_t>(min_plane_points)) {
      ++s.required;
      if (matched_by[g] >= 0) ++s.found_required;
    }
  return s;
}

PlaneDetection::PlaneDetection(const WorkloadContext& context)
    : Workload(context.config,
               {"point",
                "planes.csv, planes_points.xmf, planes_rectangles.xmf, planes_points.ply; "
                "run_report.json"}),
      pc_(config_.settings_as<PlanesConfig>()),
      ranks_(context.ranks),
      device_(context.device),
      timers_(context.timers) {}

void PlaneDetection::load_points(Cloud& cloud, Labels& truth) {
  if (!pc_.file.empty()) {
    // Every rank reads the same file and fails the same way: bad input, reported once.
    try {
      cloud = io::read_point_file(pc_.file).points;
    } catch (const io::MeshReadError& e) {
      throw config::ConfigError(config_.file + ": key 'planes.input.file': " + e.what());
    }
    return;
  }
  has_truth_ = true;
  scene_ = make_scene(pc_.scene.kind);
  const std::uint64_t n = pc_.scene.points;
  const double need = static_cast<double>(n) * 28;  // the cloud and its labels on the host
  const double available = static_cast<double>(io::available_memory_bytes()) / ranks_.local_size;
  if (need > 0.8 * available)
    throw config::ConfigError(config_.file + ": key 'planes.input.points': " + std::to_string(n) +
                              " points need about " + std::to_string(need / 1e9) +
                              " GB of host memory per rank, " + std::to_string(available / 1e9) +
                              " GB are available; lower it");
  cloud.resize(n);
  truth.resize(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(n); ++i) {
    int plane = -1;
    cloud[i] = scene_.point(pc_.scene, static_cast<std::uint64_t>(i), plane);
    truth[i] = plane;
  }
}

namespace {
// Under mpirun one or two ranks are each bound to one core by default (Open MPI): the cloud's
// reading and split, parallel on the host, then run on that core alone (20M points on two
// ranks: the split's binning 1.4 s instead of 0.24 s on 8 cores each). Said once, with the fix.
void note_if_bound_to_one_core(int ranks_on_node) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1) return;
  const unsigned cores = std::thread::hardware_concurrency();
  const auto ranks = static_cast<unsigned>(std::max(1, ranks_on_node));
  if (cores < 2 * ranks) return;
  Log::info(
      "note: this rank runs on one of the machine's %u cores (mpirun binds ranks to cores): "
      "the cloud's reading and split use that core alone; `mpirun --map-by slot:PE=%u` "
      "(or --bind-to none) gives each rank %u",
      cores, cores / ranks, cores / ranks);
}

// The seconds since `mark`, which moves to now (the split's parts, in the log).
double lap(double& mark) {
  const double now = wall_seconds(), seconds = now - mark;
  mark = now;
  return seconds;
}

// The box of the cloud without its farthest 1% per side along each axis, from a sample of at most
// 100k points (every rank samples the same ones).
std::array<std::array<double, 2>, 3> central_box(const Cloud& cloud) {
  const std::size_t stride = std::max<std::size_t>(1, cloud.size() / 100000);
  std::array<std::array<double, 2>, 3> box{};
  std::vector<double> values;
  for (int d = 0; d < 3; ++d) {
    values.clear();
    for (std::size_t i = 0; i < cloud.size(); i += stride) values.push_back(cloud[i][d]);
    const std::size_t low = values.size() / 100, high = values.size() - 1 - low;
    std::nth_element(values.begin(), values.begin() + low, values.end());
    box[d][0] = values[low];
    std::nth_element(values.begin(), values.begin() + high, values.end());
    box[d][1] = values[high];
  }
  return box;
}
}  // namespace

// The cloud's bounding box, in the same pass as the search for a point far outside the rest of
// the cloud (a stray value in a scan: 3e38 is a valid float), which would set the octree's box so
// that every plane were found at its scale: refused, naming it.
void PlaneDetection::find_bounds(const Cloud& cloud) {
  constexpr double kFar = 1000;  // times the extent of the central box
  const auto box = central_box(cloud);
  double extent = 0;
  for (const auto& side : box) extent = std::max(extent, side[1] - side[0]);
  // The central points coinciding, none is far out (split() says so if all coincide).
  const double far = extent > 0 ? kFar * extent : std::numeric_limits<double>::infinity();
  auto outside = [&](std::size_t i) {
    double most = 0;
    for (int d = 0; d < 3; ++d)
      most = std::max({most, box[d][0] - cloud[i][d], cloud[i][d] - box[d][1]});
    return most;
  };
  const auto n = static_cast<std::int64_t>(cloud.size());
  std::int64_t first = n;  // the first point that far out
  double lo[3] = {1e300, 1e300, 1e300}, hi[3] = {-1e300, -1e300, -1e300};
#pragma omp parallel for schedule(static) reduction(min : first, lo[:3]) reduction(max : hi[:3])
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& p = cloud[static_cast<std::size_t>(i)];
    for (int d = 0; d < 3; ++d) lo[d] = std::min(lo[d], p[d]), hi[d] = std::max(hi[d], p[d]);
    if (outside(static_cast<std::size_t>(i)) > far) first = std::min(first, i);
  }
  if (first < n) {
    const auto i = static_cast<std::size_t>(first);
    char text[320];
    std::snprintf(text, sizeof text,
                  ": key 'planes.input': point %zu at (%.6g, %.6g, %.6g) lies %.3g from the "
                  "box of the other points, over %.0f times its size (%.3g): an outlier that far "
                  "would set the scale of the whole scene; remove it from the cloud",
                  i, cloud[i][0], cloud[i][1], cloud[i][2], outside(i), kFar, extent);
    throw config::ConfigError(config_.file + text);
  }
  lo_ = {lo[0], lo[1], lo[2]};
  hi_ = {hi[0], hi[1], hi[2]};
}

// The bounding box and its centre (every rank holds the whole cloud: no reduction needed), then
// the split over the ranks; this rank keeps its points.
void PlaneDetection::split(const Cloud& cloud, const Labels& truth) {
  double mark = wall_seconds();
  find_bounds(cloud);
  const std::size_t n = cloud.size();
  total_points_ = n;
  double diag2 = 0;
  for (int d = 0; d < 3; ++d) {
    centre_[d] = (lo_[d] + hi_[d]) / 2;
    half_extent_ = std::max(half_extent_, (hi_[d] - lo_[d]) / 2);
    diag2 += (hi_[d] - lo_[d]) * (hi_[d] - lo_[d]) / 4;
  }
  rho_max_ = std::sqrt(diag2);
  if (!(half_extent_ > 0))
    throw config::ConfigError(config_.file + ": key 'planes.input': all " + std::to_string(n) +
                              " points coincide; there is no plane to detect");
  const double bounds = lap(mark);  // and the search for far outliers
  // The octree's cube, as PlaneDetector::detect builds it. The estimate is made on several
  // ranks with either balance: the report then shows what each achieves.
  double bin = 0, cuts = 0;
  if (ranks_.size > 1) {
    const SplitGrid grid =
        bin_cloud(cloud, centre_, 2 * half_extent_ * (1 + 1e-6) + 1e-30, pc_.octree);
    bin = lap(mark);
    const std::vector<int> owner = rcb_cells(grid, ranks_.size, pc_.balance == "cost");
    estimated_work_.assign(static_cast<std::size_t>(ranks_.size), 0.0);
    for (std::size_t c = 0; c < owner.size(); ++c)
      estimated_work_[static_cast<std::size_t>(owner[c])] += grid.cost[c];
    cuts = lap(mark);
    keep_own_points(cloud, truth, &grid, owner);
  } else {
    keep_own_points(cloud, truth, nullptr, {});
  }
  Log::info("split (s): bounds %.3f, bin and cost estimate %.3f, cuts %.3f, keep %.3f", bounds, bin,
            cuts, lap(mark));
}

// This rank's points (those of its cells in the grid; without a grid, all), in the cloud's
// order, centred, into page-locked memory.
void PlaneDetection::keep_own_points(const Cloud& cloud, const Labels& truth, const SplitGrid* grid,
                                     const std::vector<int>& cell_owner) {
  double mark = wall_seconds();
  const std::size_t n = cloud.size();
  auto mine = [&](std::size_t i) {
    return grid == nullptr || cell_owner[grid->point_cell[i]] == ranks_.rank;
  };
  // The count is known from the cells before the points are picked, so the page-locked buffer
  // (locking its pages takes about 0.2 s for 20M points) is made on another thread meanwhile.
  std::size_t count = n;
  if (grid != nullptr) {
    count = 0;
    for (std::size_t c = 0; c < cell_owner.size(); ++c)
      if (cell_owner[c] == ranks_.rank) count += grid->count[c];
  }
  auto page_locked = std::async(std::launch::async, [this, count] {
    local_points_.reserve(std::max<std::size_t>(1, count) * 3 * sizeof(float));
  });
  // Each chunk's points counted, then written from the chunk's offset: in parallel and in the
  // cloud's order, into arrays sized once (a vector per chunk grown point by point, then joined
  // by one thread, cost 0.25 s at 20M points).
  constexpr std::int64_t kChunks = 64;
  std::vector<std::size_t> offset(kChunks + 1, 0);
  if (grid == nullptr) {
    for (std::int64_t k = 0; k <= kChunks; ++k)
      offset[static_cast<std::size_t>(k)] = n * static_cast<std::size_t>(k) / kChunks;
  } else {
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < kChunks; ++k) {
      std::size_t points = 0;  // counted here, not in `offset`: its entries share cache lines
      for (std::size_t i = n * k / kChunks; i < n * (k + 1) / kChunks; ++i) points += mine(i);
      offset[static_cast<std::size_t>(k) + 1] = points;
    }
    std::partial_sum(offset.begin(), offset.end(), offset.begin());
  }
  local_index_.resize(count);
  local_truth_.resize(has_truth_ ? count : 0);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t k = 0; k < kChunks; ++k) {
    std::size_t at = offset[static_cast<std::size_t>(k)];
    for (std::size_t i = n * k / kChunks; i < n * (k + 1) / kChunks; ++i)
      if (mine(i)) local_index_[at++] = i;
  }
  const double select = lap(mark);
  page_locked.get();
  const double page_lock_wait = lap(mark);
  auto* xyz = reinterpret_cast<float*>(local_points_.data());
#pragma omp parallel for schedule(static)
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(count); ++k) {
    const std::uint64_t i = local_index_[static_cast<std::size_t>(k)];
    for (int d = 0; d < 3; ++d) xyz[3 * k + d] = static_cast<float>(cloud[i][d] - centre_[d]);
    if (has_truth_) local_truth_[static_cast<std::size_t>(k)] = truth[i];
  }
  local_ = std::span<const float>(xyz, 3 * count);
  Log::info(
      "keep (s): select %.3f, then waited for the page-locked buffer %.3f, centre and "
      "copy %.3f",
      select, page_lock_wait, lap(mark));
}

// Octree, accumulator and scratch: about 200 bytes per point on the device (keys and their sort
// buffers, moments per node, labels); refused before anything is allocated if it cannot fit.
void PlaneDetection::check_memory() const {
  constexpr double kBytesPerPoint = 200;
  const double most = global_max(ranks_.comm, static_cast<double>(local_count()));
  const double free_bytes = global_min(ranks_.comm, static_cast<double>(device_.free_bytes));
  if (most * kBytesPerPoint > 0.9 * free_bytes) {
    char text[256];
    std::snprintf(text, sizeof text,
                  ": key 'planes.input': %.3g points on one rank need about %.3g GB of device "
                  "memory, %.3g GB are available; run on more ranks or subsample the cloud",
                  most, most * kBytesPerPoint / 1e9, free_bytes / 1e9);
    throw config::ConfigError(config_.file + text);
  }
}

std::uint64_t PlaneDetection::min_plane_points() const {
  if (pc_.min_plane_points > 0) return static_cast<std::uint64_t>(pc_.min_plane_points);
  return std::max<std::uint64_t>(
      static_cast<std::uint64_t>(pc_.octree.min_points),
      static_cast<std::uint64_t>(std::ceil(pc_.min_plane_fraction * total_points_)));
}

void PlaneDetection::setup() {
  Cloud cloud;
  Labels truth;
  {
    auto t = timers_.scope("read");
    load_points(cloud, truth);
  }
  {
    auto t = timers_.scope("split");
    split(cloud, truth);
  }
  note_if_bound_to_one_core(ranks_.local_size);
  Log::info("points: %llu (%s), %zu on rank 0; bounding box (%.6g %.6g %.6g) - (%.6g %.6g %.6g)",
            static_cast<unsigned long long>(total_points_),
            pc_.file.empty() ? ("scene " + pc_.scene.kind).c_str() : pc_.file.c_str(),
            local_count(), lo_[0], lo_[1], lo_[2], hi_[0], hi_[1], hi_[2]);
  check_memory();
  DetectorParams p;
  p.octree = pc_.octree;
  p.phi_cells = pc_.phi_cells;
  p.rho_cells = pc_.rho_cells;
  p.voting = pc_.voting == "atomic" ? Voting::atomic : Voting::sort;
  p.min_votes = pc_.min_votes > 0 ? pc_.min_votes : pc_.octree.min_points / 2.0;
  p.min_plane_points = min_plane_points();
  p.merge_angle_deg = pc_.merge_angle;
  p.merge_distance = pc_.merge_distance * 2 * rho_max_;
  p.grow_band = pc_.grow_band;
  p.recover_orphans = pc_.recover_orphans;
  p.verify_planes = pc_.verify_planes;
  p.residual = pc_.residual;
  detector_ = std::make_unique<PlaneDetector>(ranks_.comm, p);
}

void PlaneDetection::advance() {
  for (int repetition = 0; repetition < pc_.repeat; ++repetition) {
    const bool last = repetition + 1 == pc_.repeat;
    {
      auto t = timers_.scope("detect");
      detection_ = detector_->detect(local_, centre_, half_extent_, rho_max_, last);
    }
    analysis_seconds_.push_back(detection_.times.total);
    stage_history_.push_back(detection_.times);
    Log::info("analysis %d of %d: %.3f ms (excluding file parsing): %zu planes, %llu clusters",
              repetition + 1, pc_.repeat, 1e3 * detection_.times.total, detection_.planes.size(),
              static_cast<unsigned long long>(detection_.clusters));
  }
  if (has_truth_) {
    auto t = timers_.scope("score");
    score_ = score_detection(ranks_.comm, scene_, detection_.planes, detection_.labels,
                             local_truth_, min_plane_points());
  }
  clock_ = {1, 1, 0};
}

void PlaneDetection::print_table() const {
  const auto& planes = detection_.planes;
  Log::info("\n%zu planes (at least %llu inliers each)", planes.size(),
            static_cast<unsigned long long>(min_plane_points()));
  Log::info("%-5s %-32s %-12s %-10s %-8s", "plane", "normal", "offset", "inliers", "clusters");
  for (std::size_t p = 0; p < planes.size(); ++p)
    Log::info("%-5zu (%9.6f %9.6f %9.6f) %-12.6g %-10llu %-8llu", p, planes[p].normal[0],
              planes[p].normal[1], planes[p].normal[2], planes[p].offset,
              static_cast<unsigned long long>(planes[p].inliers),
              static_cast<unsigned long long>(planes[p].clusters));
  const StageTimes& t = detection_.times;
  Log::info(
      "stages (ms): upload %.3f, octree %.3f, vote %.3f, reduce %.3f, peaks %.3f, planes %.3f, "
      "labels %.3f, extent %.3f, grow %.3f, residual %.3f; total %.3f",
      1e3 * t.upload, 1e3 * t.octree, 1e3 * t.vote, 1e3 * t.reduce, 1e3 * t.peaks, 1e3 * t.planes,
      1e3 * t.labels, 1e3 * t.extent, 1e3 * t.grow, 1e3 * t.residual, 1e3 * t.total);
  if (pc_.residual.on)
    Log::info("residual round: %llu points, %llu clusters; %zu planes added, %zu joined",
              static_cast<unsigned long long>(detection_.residual_points),
              static_cast<unsigned long long>(detection_.residual_clusters),
              detection_.residual_new, detection_.residual_joined);
  if (has_truth_)
    Log::info(
        "ground truth: %zu of %zu planes with enough points found, %zu detected planes "
        "unmatched; normal error <= %.3f deg, offset error <= %.4g (%.3f%% of the scene); "
        "precision %.4f, recall %.4f, F1 %.4f",
        score_.found_required, score_.required, score_.unmatched_detected,
        score_.max_normal_error_deg, score_.max_offset_error,
        100 * score_.max_offset_error / score_.scene_size, score_.precision, score_.recall,
        score_.f1);
}

void PlaneDetection::write_csv() const {
  if (ranks_.rank != 0) return;
  std::string out =
      "plane,nx,ny,nz,offset,inliers,clusters,cx,cy,cz,ux,uy,uz,vx,vy,vz,u_min,u_max,v_min,v_max,"
      "rms\n";
  char row[1024];
  for (std::size_t p = 0; p < detection_.planes.size(); ++p) {
    const Plane& q = detection_.planes[p];
    std::snprintf(row, sizeof row,
                  "%zu,%.9g,%.9g,%.9g,%.9g,%llu,%llu,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,"
                  "%.9g,%.9g,%.9g,%.9g,%.6g\n",
                  p, q.normal[0], q.normal[1], q.normal[2], q.offset,
                  static_cast<unsigned long long>(q.inliers),
                  static_cast<unsigned long long>(q.clusters), q.centroid[0], q.centroid[1],
                  q.centroid[2], q.axis_u[0], q.axis_u[1], q.axis_u[2], q.axis_v[0], q.axis_v[1],
                  q.axis_v[2], q.u_min, q.u_max, q.v_min, q.v_max, q.rms);
    out += row;
  }
  io::write_file_atomically(fs::path(config_.output.dir) / "planes.csv", out);
}

// Positions in the cloud's coordinates (float) and the rectangles as quads / triangles.
void PlaneDetection::build_visual_buffers() {
  vis_position_.resize(local_.size());
  for (std::size_t i = 0; i < local_.size(); ++i)
    vis_position_[i] = static_cast<float>(local_[i] + centre_[i % 3]);
  rect_position_.clear();
  rect_quads_.clear();
  rect_triangles_.clear();
  rect_plane_.clear();
  rect_triangle_plane_.clear();
  if (ranks_.rank != 0) return;  // rank 0 holds the rectangles, the others none
  for (std::size_t p = 0; p < detection_.planes.size(); ++p) {
    const auto corners = detection_.planes[p].corners();
    const auto base = static_cast<std::uint32_t>(rect_position_.size() / 3);
    for (const auto& c : corners) rect_position_.insert(rect_position_.end(), c.begin(), c.end());
    for (int k = 0; k < 4; ++k) rect_quads_.push_back(base + k);
    rect_triangles_.insert(rect_triangles_.end(),
                           {base, base + 1, base + 2, base, base + 2, base + 3});
    rect_plane_.push_back(static_cast<std::int32_t>(p));
    rect_triangle_plane_.insert(rect_triangle_plane_.end(), 2, static_cast<std::int32_t>(p));
  }
}

void PlaneDetection::write_point_outputs() {
  const fs::path dir(config_.output.dir);
  build_visual_buffers();
  // Per-point labels, every rank its points, as one HDF5 + XDMF step.
  std::vector<io::HostField> fields = {{"position", io::Dtype::f32, 3, vis_position_.data()},
                                       {"plane", io::Dtype::i32, 1, detection_.labels.data()}};
  std::vector<std::int64_t> index(local_index_.begin(), local_index_.end());
  fields.push_back({"index", io::Dtype::i64, 1, index.data()});
  if (has_truth_) fields.push_back({"truth", io::Dtype::i32, 1, local_truth_.data()});
  io::SeriesWriter points(ranks_.comm, dir, "planes_points");
  points.write(0, 0, io::PointSetPart{local_count(), fields});
  // The plane rectangles (two triangles each, the plane's index per triangle).
  const io::HostField rect_vertex[] = {{"position", io::Dtype::f64, 3, rect_position_.data()}};
  const io::HostField rect_cells[] = {{"plane", io::Dtype::i32, 1, rect_triangle_plane_.data()}};
  io::SeriesWriter rects(ranks_.comm, dir, "planes_rectangles");
  rects.write(0, 0,
              io::TriangleMeshPart{rect_position_.size() / 3, rect_vertex,
                                   rect_triangles_.size() / 3, rect_triangles_.data(), rect_cells});

  // A PLY coloured by plane, in the cloud's order: rank 0 gathers the labels by point index.
  const int mine = static_cast<int>(local_count());
  std::vector<int> counts(ranks_.size), offsets(ranks_.size);
  MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, ranks_.comm);
  for (int k = 1; k < ranks_.size; ++k) offsets[k] = offsets[k - 1] + counts[k - 1];
  std::vector<std::int32_t> labels(ranks_.rank == 0 ? total_points_ : 0);
  std::vector<std::int32_t> gathered(ranks_.rank == 0 ? total_points_ : 0);
  std::vector<float> xyz(ranks_.rank == 0 ? 3 * total_points_ : 0);
  std::vector<std::int64_t> order(ranks_.rank == 0 ? total_points_ : 0);
  MPI_Gatherv(detection_.labels.data(), mine, MPI_INT32_T, gathered.data(), counts.data(),
              offsets.data(), MPI_INT32_T, 0, ranks_.comm);
  MPI_Gatherv(index.data(), mine, MPI_INT64_T, order.data(), counts.data(), offsets.data(),
              MPI_INT64_T, 0, ranks_.comm);
  std::vector<int> counts3(ranks_.size), offsets3(ranks_.size);
  for (int k = 0; k < ranks_.size; ++k) counts3[k] = 3 * counts[k], offsets3[k] = 3 * offsets[k];
  MPI_Gatherv(vis_position_.data(), 3 * mine, MPI_FLOAT, xyz.data(), counts3.data(),
              offsets3.data(), MPI_FLOAT, 0, ranks_.comm);
  if (ranks_.rank != 0) return;
  std::string out = "ply\nformat binary_little_endian 1.0\ncomment written by apron (planes)\n";
  out += "element vertex " + std::to_string(total_points_) + "\n";
  out += "property float x\nproperty float y\nproperty float z\n";
  out +=
      "property uchar red\nproperty uchar green\nproperty uchar blue\nproperty int "
      "plane\nend_header\n";
  std::vector<std::size_t> at(total_points_);
  for (std::size_t k = 0; k < total_points_; ++k) at[order[k]] = k;
  out.reserve(out.size() + total_points_ * 19);
  for (std::size_t i = 0; i < total_points_; ++i) {
    const std::size_t k = at[i];
    for (int d = 0; d < 3; ++d) put_le(out, xyz[3 * k + d]);
    for (std::uint8_t c : plane_colour(gathered[k])) put_le(out, c);
    put_le(out, gathered[k]);
  }
  io::write_file_atomically(dir / "planes_points.ply", out);
}

void PlaneDetection::write_outputs(bool final) {
  if (!final) return;
  print_table();
  auto t = timers_.scope("output");
  fs::create_directories(config_.output.dir);
  write_csv();
  if (pc_.point_output) write_point_outputs();
}

std::vector<io::VisualBlock> PlaneDetection::visual_blocks() {
  build_visual_buffers();
  io::VisualBlock points;
  points.channel = "points";
  points.kind = io::VisualBlock::Kind::points;
  points.points = local_count();
  points.point_fields = {{"position", io::Dtype::f32, 3, vis_position_.data()},
                         {"plane", io::Dtype::i32, 1, detection_.labels.data()}};
  io::VisualBlock rects;
  rects.channel = "planes";
  rects.kind = io::VisualBlock::Kind::mesh;
  rects.points = rect_position_.size() / 3;
  rects.point_fields = {{"position", io::Dtype::f64, 3, rect_position_.data()}};
  rects.cells = rect_plane_.size();
  rects.cell_type = 9;  // VTK_QUAD
  rects.points_per_cell = 4;
  rects.connectivity = rect_quads_.data();
  rects.cell_fields = {{"plane", io::Dtype::i32, 1, rect_plane_.data()}};
  return {points, rects};
}

void PlaneDetection::report(Json& j) const {
  j.begin_object("planes");
  if (pc_.file.empty()) {
    j.begin_object("scene");
    j.value("kind", pc_.scene.kind);
    j.value("noise", pc_.scene.noise);
    j.value("outliers", pc_.scene.outliers);
    j.value("seed", static_cast<long long>(pc_.scene.seed));
    j.end_object();
  } else {
    j.value("file", pc_.file);
  }
  j.value("points", static_cast<std::size_t>(total_points_));
  j.value("min_plane_points", static_cast<std::size_t>(min_plane_points()));
  j.value("clusters", static_cast<std::size_t>(detection_.clusters));
  j.value("votes", static_cast<std::size_t>(detection_.votes)).value("voting", pc_.voting);
  j.value("peaks", detection_.peaks);
  j.value("grow_band", pc_.grow_band);
  j.value("recover_orphans", pc_.recover_orphans);
  j.value("residual_pass", pc_.residual.on);
  j.value("slab_kurtosis", pc_.octree.slab_kurtosis);
  j.value("sibling_halves", pc_.octree.sibling_halves);
  j.value("grown", static_cast<std::size_t>(detection_.grown));
  // The split: per rank its octree's work and (balance: cost) the estimate the cuts balanced.
  j.value("balance", pc_.balance);
  j.values("octree_work", detection_.octree_work);
  j.values("estimated_work", estimated_work_);
  j.begin_array("octree_levels");
  for (std::size_t l = 0; l < detection_.nodes_per_level.size(); ++l) {
    j.begin_object();
    j.value("level", static_cast<int>(l + 1));
    j.value("nodes", static_cast<std::size_t>(detection_.nodes_per_level[l]));
    j.value("clusters", static_cast<std::size_t>(detection_.clusters_per_level[l]));
    j.end_object();
  }
  j.end_array();
  j.begin_array("detected");
  for (const Plane& p : detection_.planes) {
    j.begin_object();
    j.values("normal", p.normal);
    j.value("offset", p.offset);
    j.value("inliers", static_cast<std::size_t>(p.inliers));
    j.value("clusters", static_cast<std::size_t>(p.clusters));
    j.values("centroid", p.centroid);
    j.begin_object("rectangle");
    j.values("axis_u", p.axis_u);
    j.values("axis_v", p.axis_v);
    j.value("u_min", p.u_min)
        .value("u_max", p.u_max)
        .value("v_min", p.v_min)
        .value("v_max", p.v_max);
    j.begin_array("corners");
    for (const auto& c : p.corners()) j.values("", c);
    j.end_array();
    j.end_object();
    j.value("rms", p.rms);
    j.end_object();
  }
  j.end_array();
  const StageTimes& t = detection_.times;
  j.begin_object("stage_seconds");  // the last repetition, maximum over ranks
  j.value("upload", t.upload).value("octree", t.octree).value("vote", t.vote);
  j.value("reduce", t.reduce).value("peaks", t.peaks).value("planes", t.planes);
  j.value("labels", t.labels).value("extent", t.extent).value("grow", t.grow);
  j.value("residual", t.residual);
  j.value("total", t.total);
  j.end_object();
  j.values("analysis_seconds", analysis_seconds_);
  j.begin_array("stage_seconds_per_repetition");
  for (const StageTimes& r : stage_history_) {
    j.begin_object();
    j.value("upload", r.upload).value("octree", r.octree).value("vote", r.vote);
    j.value("reduce", r.reduce).value("peaks", r.peaks).value("planes", r.planes);
    j.value("labels", r.labels).value("extent", r.extent).value("grow", r.grow);
    j.value("residual", r.residual);
    j.value("total", r.total);
    j.end_object();
  }
  j.end_array();
  if (has_truth_) {
    j.begin_object("ground_truth");
    j.value("planes", score_.truth_planes);
    j.value("required", score_.required);
    j.value("found_required", score_.found_required);
    j.value("unmatched_detected", score_.unmatched_detected);
    j.value("max_normal_error_deg", score_.max_normal_error_deg);
    j.value("max_offset_error", score_.max_offset_error);
    j.value("scene_size", score_.scene_size);
    j.value("precision", score_.precision);
    j.value("recall", score_.recall);
    j.value("f1", score_.f1);
    j.values("match", score_.match);
    j.begin_array("truth");
    for (std::size_t g = 0; g < scene_.planes.size(); ++g) {
      j.begin_object();
      j.value("name", scene_.planes[g].name);
      j.values("normal", scene_.planes[g].normal);
      j.value("offset", scene_.planes[g].offset);
      j.value("points", static_cast<long long>(score_.truth_points[g]));
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_object();
}

WorkloadSpec planes_spec() {
  return workload_spec_of<PlaneDetection>(
      "planes",
      "plane detection in point clouds: 3D Kernel-based Hough Transform (one-shot analysis)",
      planes_schema(), {"planes.input.points", 1.0});
}

}  // namespace apron::planes
