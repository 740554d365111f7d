#include "planes/detector.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"
#include "kernels/planes/profile_clock.hpp"
#include "planes/split_cost.hpp"
#include "runtime/runtime.hpp"

namespace apron::planes {
namespace {

constexpr int kFitTerms = 10;  // count, sum x (3), sum x x^T (6)

// One plane of plane_bands' values (18: normal, offset, centroid, u, v, u/v extents, band): a
// point's signed distance from it, and whether the point lies in its band and in its rectangle
// widened by the band.
struct PlaneBand {
  const double* f;
  APRON_HD double distance(const Vec4& q) const {
    return f[0] * q.x + f[1] * q.y + f[2] * q.z - f[3];
  }
  APRON_HD bool in_band(double distance) const { return distance <= f[17] && distance >= -f[17]; }
  APRON_HD bool in_rectangle(const Vec4& q) const {
    const double band = f[17];
    const double d[3] = {q.x - f[4], q.y - f[5], q.z - f[6]};
    const double u = d[0] * f[7] + d[1] * f[8] + d[2] * f[9];
    const double v = d[0] * f[10] + d[1] * f[11] + d[2] * f[12];
    return u >= f[13] - band && u <= f[14] + band && v >= f[15] - band && v <= f[16] + band;
  }
};

// Growing (optional): a point on no cluster joins the nearest plane within `band` plane rms of
// it whose rectangle (widened by the band) holds its projection.
struct GrowLabels {
  const Vec4* points;
  const double* planes;  // per plane: normal, offset, centroid, u, v, u/v extents, band (18)
  int count;
  std::int32_t* labels;
  std::uint32_t* grown;  // 1 where a point joined a plane
  APRON_HD void operator()(std::size_t i) const {
    grown[i] = 0;
    if (labels[i] >= 0) return;
    const Vec4 q = points[i];
    int best = -1;
    double best_distance = 0;
    for (int p = 0; p < count; ++p) {
      const PlaneBand plane{planes + 18 * p};
      const double distance = plane.distance(q);
      if (!plane.in_band(distance) || !plane.in_rectangle(q)) continue;
      const double a = distance < 0 ? -distance : distance;
      if (best < 0 || a < best_distance) best = p, best_distance = a;
    }
    if (best >= 0) labels[i] = best, grown[i] = 1;
  }
};

// The residual round's points: on no plane, and not within any plane's band (the planes' values
// as GrowLabels'; the whole plane, not only its rectangle: the points at a plane's borders that
// its clusters missed would otherwise remain as strips, and strips of parallel surfaces, stacked,
// look like one plane).
struct OffPlanes {
  const Vec4* points;
  const double* planes;
  int count;
  const std::int32_t* labels;
  APRON_HD bool operator()(std::uint32_t i) const {
    if (labels[i] >= 0) return false;
    const Vec4 q = points[i];
    for (int p = 0; p < count; ++p) {
      const PlaneBand plane{planes + 18 * p};
      if (plane.in_band(plane.distance(q))) return false;
    }
    return true;
  }
};

// The points a candidate of the residual round may take (CandidateLabels): those on no plane,
// and with `reclaim` those of a first-round plane outside its band (planes' values as
// OffPlanes'). The round's passes run over these only.
struct Eligible {
  const Vec4* points;
  const double* planes;
  const std::int32_t* labels;
  bool reclaim;
  APRON_HD bool operator()(std::uint32_t i) const {
    const std::int32_t own = labels[i];
    if (own < 0) return true;
    if (!reclaim) return false;
    const PlaneBand plane{planes + 18 * own};
    return !plane.in_band(plane.distance(points[i]));
  }
};

// Every k-th point.
struct EveryKth {
  const Vec4* points;
  std::size_t k;
  Vec4* out;
  APRON_HD void operator()(std::size_t i) const { out[i] = points[i * k]; }
};

// The residual round's labels: candidate -> plane by `plane` (-1: none).
// (candidate: per eligible point; index: its point.)
struct ResidualLabels {
  const std::int32_t* candidate;
  const std::uint32_t* index;
  const std::uint32_t* plane;
  std::int32_t* labels;
  APRON_HD void operator()(std::size_t i) const {
    const std::int32_t c = candidate[i];
    if (c >= 0 && static_cast<std::int32_t>(plane[c]) >= 0)
      labels[index[i]] = static_cast<std::int32_t>(plane[c]);
  }
};

// A point on no plane: the first candidate plane of the residual round (the candidates come by
// their clusters' points, most first) within whose band and rectangle it lies (-1: none; planes'
// values as GrowLabels'). The first, not the nearest: a small tilted cluster at a face's corner
// would take the strip of the face that its band crosses. Points within a first-round plane's
// band and rectangle count too if they are nearer the candidate: that band holds the strip of a
// face that meets the plane (a box's side at the floor); the others are that plane's (a board's
// front edge, which a vertical candidate through it would take). With `reclaim`, so do the points
// of a first-round plane outside its band: its clusters took them although they lie off its fit
// (a neighbouring face's strip in a node that passed the coplanarity test beside it).
struct CandidateLabels {
  const Vec4* points;
  const double* planes;
  int count;
  const std::int32_t* labels;
  const double* first;  // the first round's planes' bands, as OffPlanes'
  int first_count;
  bool reclaim;  // false: points on a first-round plane stay on it
  std::int32_t* candidate;
  // Set: 1 where some candidate's band holds the point, whatever the rectangles (grow_candidates'
  // later passes, whose bands are the same, visit only those points).
  std::uint8_t* near = nullptr;
  const std::uint32_t* index = nullptr;  // set: operator()(j) labels point index[j]
  APRON_HD void operator()(std::size_t j) const {
    const std::size_t i = index ? index[j] : j;
    candidate[i] = -1;
    if (near) near[i] = 0;
    const std::int32_t own = labels[i];
    const Vec4 q = points[i];
    if (own >= 0) {
      if (!reclaim) return;
      const PlaneBand plane{first + 18 * own};
      if (plane.in_band(plane.distance(q))) return;
    }
    int taken = -1;
    double distance = 0;
    for (int p = 0; p < count && taken < 0; ++p) {
      const PlaneBand plane{planes + 18 * p};
      const double d = plane.distance(q);
      if (!plane.in_band(d)) continue;
      if (near) near[i] = 1;
      if (taken < 0 && plane.in_rectangle(q)) taken = p, distance = d;
    }
    if (taken < 0) return;
    if (own < 0 && nearer_first_plane(q, distance < 0 ? -distance : distance)) return;
    candidate[i] = taken;
  }
  // Whether a first-round plane's band and rectangle hold q nearer than `distance`.
  APRON_HD bool nearer_first_plane(const Vec4& q, double distance) const {
    for (int p = 0; p < first_count; ++p) {
      const PlaneBand plane{first + 18 * p};
      const double d = plane.distance(q);
      if (plane.in_band(d) && (d < 0 ? -d : d) < distance && plane.in_rectangle(q)) return true;
    }
    return false;
  }
};

// One point's share of candidate c's sums (PlaneDetector::candidate_sums): nothing unless the
// point is c's; its coordinates, or (distances) its distance off the plane through plane[3..5]
// with normal plane[0..2].
struct CandidateMoments {
  const Vec4* points;
  const std::int32_t* candidate;
  std::int32_t c;
  bool distances;
  double plane[6];
  const double* bands = nullptr;  // set: every point within c's band and rectangle counts
  APRON_HD Moments operator()(std::size_t i) const {
    Moments m;
    const Vec4 x = points[i];
    if (bands) {
      const PlaneBand band{bands + 18 * c};
      if (!band.in_band(band.distance(x)) || !band.in_rectangle(x)) return m;
    } else if (candidate[i] != c) {
      return m;
    }
    if (!distances) {
      m.add(x.x, x.y, x.z);
      return m;
    }
    m.count = 1;
    m.add_distance(plane[0] * (x.x - plane[3]) + plane[1] * (x.y - plane[4]) +
                   plane[2] * (x.z - plane[5]));
    return m;
  }
};
// The CPU's grouped sums: per group g (a candidate), the sum of f(g, j) over the items j < count
// in their order, as a reduction on one thread runs (one launch for every group instead of a
// reduction each).
template <class T, class F>
struct GroupSums {
  F f;
  std::size_t count;
  T* sums;  // per group
  APRON_HD void operator()(std::size_t g) const {
    T sum{};
    for (std::size_t j = 0; j < count; ++j) sum.merge(f(g, j));
    sums[g] = sum;
  }
};
// Per group g and slot k < slots: the sum, in order, of the group's `lanes` values from
// in[g * lanes + k * per] on, at most `per` of them (a level of the GPU path's totals; one slot:
// the group's total).
template <class T>
struct GroupTotals {
  const T* in;
  std::size_t lanes;
  std::size_t per;
  std::size_t slots;
  T* out;  // groups x slots
  APRON_HD void operator()(std::size_t i) const {
    const std::size_t g = i / slots, first = (i % slots) * per;
    const std::size_t last = first + per < lanes ? first + per : lanes;
    T sum{};
    for (std::size_t l = first; l < last; ++l) sum.merge(in[g * lanes + l]);
    out[i] = sum;
  }
};

// The GPU's path: the listed items sorted by their group (key(j): the group of item j, or any
// value >= groups for none), so that each group's lanes walk only its own items.
struct GroupKeys {
  std::size_t groups;
  std::uint32_t* keys;
  std::uint32_t* items;
  template <class K>
  APRON_HD void set(const K& key, std::size_t j) const {
    const std::size_t g = key(j);
    keys[j] = static_cast<std::uint32_t>(g < groups ? g : groups);
    items[j] = static_cast<std::uint32_t>(j);
  }
};
template <class K>
struct WriteGroupKeys {
  K key;
  GroupKeys out;
  APRON_HD void operator()(std::size_t j) const { out.set(key, j); }
};
// Lane l of group g: the sum, in order, of f(g, items[p]) over the group's sorted positions
// p = bounds[g] + l, bounds[g] + l + lanes, ... < bounds[g + 1].
template <class T, class F>
struct SortedGroupPartials {
  F f;
  const std::uint32_t* items;
  const std::uint32_t* bounds;
  std::size_t lanes;
  T* partial;  // groups x lanes
  APRON_HD void operator()(std::size_t i) const {
    const std::size_t g = i / lanes;
    const std::size_t end = bounds[g + 1];
    T sum{};
    for (std::size_t p = bounds[g] + i % lanes; p < end; p += lanes) sum.merge(f(g, items[p]));
    partial[i] = sum;
  }
};

// Item j of a list of eligible points (index) as CandidateMoments' point index[j], for group g.
struct ListedMoments {
  CandidateMoments f;
  const std::uint32_t* index;
  const double* planes;  // distances: per candidate normal and centroid (6); null: coordinates
  APRON_HD Moments operator()(std::size_t g, std::size_t j) const {
    CandidateMoments c = f;
    c.c = static_cast<std::int32_t>(g);
    if (planes)
      for (int k = 0; k < 6; ++k) c.plane[k] = planes[6 * g + k];
    return c(index[j]);
  }
};

// The group of listed item j (index: eligible point) in ListedMoments: its candidate (every
// listed point has one).
struct ListedCandidate {
  const std::int32_t* candidate;
  const std::uint32_t* index;
  APRON_HD std::size_t operator()(std::size_t j) const {
    const std::int32_t c = candidate[index[j]];
    return c < 0 ? kNoGroup : static_cast<std::size_t>(c);
  }
  static constexpr std::size_t kNoGroup = ~std::size_t{0};
};

// Whether an eligible point went to a candidate.
struct HasCandidate {
  const std::int32_t* candidate;
  APRON_HD bool operator()(std::uint32_t i) const { return candidate[i] >= 0; }
};

struct MergeMoments {
  APRON_HD Moments operator()(Moments a, const Moments& b) const {
    a.merge(b);
    return a;
  }
};

// 1 where listed point j (index: eligible point) of first-round plane p went to a candidate that
// is a plane (map: per candidate its plane, 0xffffffff none).
struct ListedReclaimed {
  const std::int32_t* labels;  // the eligible points' first-round planes
  const std::int32_t* candidate;
  const std::uint32_t* map;
  const std::uint32_t* index;
  APRON_HD Tally operator()(std::size_t p, std::size_t j) const {
    const std::uint32_t i = index[j];
    const std::int32_t c = candidate[i];
    return Tally{labels[i] == static_cast<std::int32_t>(p) && c >= 0 && map[c] != 0xffffffffu};
  }
};

// The group of listed item j in ListedReclaimed: its first-round plane where its candidate is a
// plane, none otherwise.
struct ReclaimedPlane {
  const std::int32_t* labels;
  const std::int32_t* candidate;
  const std::uint32_t* map;
  const std::uint32_t* index;
  APRON_HD std::size_t operator()(std::size_t j) const {
    const std::uint32_t i = index[j];
    const std::int32_t c = candidate[i], p = labels[i];
    return p >= 0 && c >= 0 && map[c] != 0xffffffffu ? static_cast<std::size_t>(p)
                                                     : ListedCandidate::kNoGroup;
  }
};

// Two planes given by normal and a point on each: their normals within the angle whose cosine is
// `min_cosine` (either orientation), each point within `distance` of the other plane.
bool on_one_plane(const double* na, const double* pa, const double* nb, const double* pb,
                  double min_cosine, double distance) {
  const double cosine = na[0] * nb[0] + na[1] * nb[1] + na[2] * nb[2];
  const double d[3] = {pb[0] - pa[0], pb[1] - pa[1], pb[2] - pa[2]};
  return std::fabs(cosine) >= min_cosine &&
         std::fabs(na[0] * d[0] + na[1] * d[1] + na[2] * d[2]) <= distance &&
         std::fabs(nb[0] * d[0] + nb[1] * d[1] + nb[2] * d[2]) <= distance;
}

// Whether distances off a plane with these sums (count, sum d^2, sum d^4) spread as evenly as a
// uniform slab's (OctreeParams::slab_kurtosis): their kurtosis below `limit` (0: no test); a
// surface's noise has a larger one.
bool slab_spread(double limit, double count, double d2, double d4) {
  return limit > 0 && d2 > 0 && count * d4 < limit * d2 * d2;
}

// Labels through a map (the planes' new order).
struct Relabel {
  const std::uint32_t* map;
  std::int32_t* labels;
  APRON_HD void operator()(std::size_t i) const {
    if (labels[i] >= 0) labels[i] = static_cast<std::int32_t>(map[labels[i]]);
  }
};

// The planes' values that GrowLabels and OffPlanes read (18 per plane), with the band `band`
// times each plane's rms.
std::vector<double> plane_bands(const std::vector<Plane>& planes, double band) {
  std::vector<double> host;
  for (const Plane& p : planes) {
    const double values[18] = {
        p.normal[0],   p.normal[1], p.normal[2], p.offset,    p.centroid[0], p.centroid[1],
        p.centroid[2], p.axis_u[0], p.axis_u[1], p.axis_u[2], p.axis_v[0],   p.axis_v[1],
        p.axis_v[2],   p.u_min,     p.u_max,     p.v_min,     p.v_max,       band * p.rms};
    host.insert(host.end(), values, values + 18);
  }
  return host;
}

// Per point in the octree's (Morton) order: its plane, from its cluster's.
struct PlaneLabels {
  const std::int32_t* sorted_cluster;
  const std::int32_t* cluster_plane;
  std::int32_t* labels;
  APRON_HD void operator()(std::size_t i) const {
    const std::int32_t c = sorted_cluster[i];
    labels[i] = c < 0 ? -1 : cluster_plane[c];
  }
};

// The labels in the input's order (order: sorted position -> point): a scatter of random writes,
// about 1 ms at 20M points, so made only where asked for.
struct InputOrderLabels {
  const std::uint32_t* order;
  const std::int32_t* sorted_labels;
  std::int32_t* labels;
  APRON_HD void operator()(std::size_t i) const { labels[order[i]] = sorted_labels[i]; }
};

// The planes' extents: each point's label + 1 as a sort key (0: no plane), its index as value.
struct LabelKeys {
  const std::int32_t* labels;
  std::uint32_t* keys;
  std::uint32_t* index;
  APRON_HD void operator()(std::size_t i) const {
    keys[i] = static_cast<std::uint32_t>(labels[i] + 1);
    index[i] = static_cast<std::uint32_t>(i);
  }
};

// Per point in label order: its projections on its plane's in-plane axes (u, v), relative to the
// plane's centroid (0 for points of no plane: their run is not read).
struct PointProjections {
  const Vec4* points;
  const std::uint32_t* keys;   // sorted labels + 1
  const std::uint32_t* index;  // the points in that order
  const double* frames;        // per plane: centroid, u, v (9 values)
  float* u;
  float* v;
  APRON_HD void operator()(std::size_t i) const {
    if (keys[i] == 0) {
      u[i] = v[i] = 0;
      return;
    }
    const double* f = frames + 9 * (keys[i] - 1);
    const Vec4 q = points[index[i]];
    const double d[3] = {q.x - f[0], q.y - f[1], q.z - f[2]};
    u[i] = static_cast<float>(d[0] * f[3] + d[1] * f[4] + d[2] * f[5]);
    v[i] = static_cast<float>(d[0] * f[6] + d[1] * f[7] + d[2] * f[8]);
  }
};

// One copy of the points to the device: cudaMemcpy straight from the caller's memory (from
// page-locked memory a DMA at the link's speed; from pageable memory the driver stages it), no
// temporary on either side; into the device array from element `at` on.
template <class T>
void copy_to_device(std::span<const T> host, DeviceVector<T>& device, std::size_t at = 0) {
  if (host.empty()) return;
#if defined(__CUDACC__)
  const cudaError_t status =
      cudaMemcpy(raw(device) + at, host.data(), host.size_bytes(), cudaMemcpyHostToDevice);
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("planes: point upload: ") + cudaGetErrorString(status));
#else
  apron::copy(host.begin(), host.end(), device.begin() + static_cast<std::ptrdiff_t>(at));
#endif
}

void upload(std::span<const Vec4> points, DeviceVector<Vec4>& device) {
  copy_to_device(points, device);
}

// Points given as x, y, z floats widened to Vec4 (w = 0, as the workload's Vec4s had it).
struct WidenPoints {
  const float* xyz;
  Vec4* points;
  APRON_HD void operator()(std::size_t i) const {
    points[i] = Vec4{xyz[3 * i], xyz[3 * i + 1], xyz[3 * i + 2], 0.f};
  }
};

#if defined(__CUDACC__) && !defined(APRON_BACKEND_KOKKOS)
#define APRON_PLANES_UPLOAD_STREAM 1
void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("planes: point upload: ") + what + ": " +
                             cudaGetErrorString(status));
}
#endif

#if defined(__CUDACC__)
// The planes' extents without a sort (CUDA): per block, each plane's smallest and largest
// projections as order-preserving integers in shared memory (atomicMin/atomicMax), then one
// atomic per plane and bound into the global result. Minima and maxima do not depend on the
// order of the updates: the result equals the sort path's, bit for bit (the same float
// projections as PointProjections).
constexpr int kExtentPlanesMax = 2048;  // 32 KiB of shared memory per block

__device__ inline int ordered_int(float f) {
  const int i = __float_as_int(f);
  return i >= 0 ? i : i ^ 0x7fffffff;
}

float unordered_float(int key) {
  const int i = key >= 0 ? key : key ^ 0x7fffffff;
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

__global__ void __launch_bounds__(kBlockThreads)
    plane_extent_kernel(std::size_t n, const Vec4* points, const std::int32_t* labels,
                        const double* frames, int planes, int* extent) {
  extern __shared__ int local[];  // per plane: min u, max u, min v, max v
  for (int k = threadIdx.x; k < 4 * planes; k += blockDim.x)
    local[k] = k % 2 == 0 ? std::numeric_limits<int>::max() : std::numeric_limits<int>::min();
  __syncthreads();
  // Whole blocks step together (the loop's bound is the block's first index), so that every
  // lane of a warp takes part in its reductions.
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const auto lane = static_cast<int>(threadIdx.x % 32);
  for (std::size_t first = blockIdx.x * std::size_t{blockDim.x}; first < n; first += stride) {
    const std::size_t i = first + threadIdx.x;
    const std::int32_t l = i < n ? labels[i] : -1;
    int u = 0, v = 0;  // ordered_int of the projections
    if (l >= 0) {
      const double* f = frames + 9 * l;
      const Vec4 q = points[i];
      const double d[3] = {q.x - f[0], q.y - f[1], q.z - f[2]};
      u = ordered_int(static_cast<float>(d[0] * f[3] + d[1] * f[4] + d[2] * f[5]));
      v = ordered_int(static_cast<float>(d[0] * f[6] + d[1] * f[7] + d[2] * f[8]));
    }
    // A plane's points are runs of the Morton order, so a warp's lanes mostly share one or two
    // planes: per plane of the warp, its lanes' extremes first, then one lane's four atomics
    // (32 lanes' atomics on one shared address would queue one after another).
    constexpr unsigned kAll = 0xffffffffu;
    unsigned pending = __ballot_sync(kAll, l >= 0);
    while (pending != 0) {
      const int leader = __ffs(static_cast<int>(pending)) - 1;
      const std::int32_t plane = __shfl_sync(kAll, l, leader);
      const bool member = l == plane;
      pending &= ~__ballot_sync(kAll, member);
      constexpr int kMost = std::numeric_limits<int>::max(),
                    kLeast = std::numeric_limits<int>::min();
      const int u_min = __reduce_min_sync(kAll, member ? u : kMost);
      const int u_max = __reduce_max_sync(kAll, member ? u : kLeast);
      const int v_min = __reduce_min_sync(kAll, member ? v : kMost);
      const int v_max = __reduce_max_sync(kAll, member ? v : kLeast);
      if (lane == leader) {
        atomicMin(&local[4 * plane], u_min);
        atomicMax(&local[4 * plane + 1], u_max);
        atomicMin(&local[4 * plane + 2], v_min);
        atomicMax(&local[4 * plane + 3], v_max);
      }
    }
  }
  __syncthreads();
  for (int k = threadIdx.x; k < 4 * planes; k += blockDim.x) {
    if (k % 2 == 0 && local[k] != std::numeric_limits<int>::max()) atomicMin(&extent[k], local[k]);
    if (k % 2 == 1 && local[k] != std::numeric_limits<int>::min()) atomicMax(&extent[k], local[k]);
  }
}
#endif

double elapsed(double& mark) {
  device_synchronize();
  const double now = wall_seconds();
  const double s = now - mark;
  mark = now;
  return s;
}

// Sums of a plane's inliers from its clusters' means and covariances (centred coordinates).
void add_cluster(const Cluster& c, double* sums) {
  const double n = c.count;
  const double* m = c.mean;
  sums[0] += n;
  for (int d = 0; d < 3; ++d) sums[1 + d] += n * m[d];
  const int ij[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};
  for (int k = 0; k < 6; ++k) sums[4 + k] += n * (c.cov[k] + m[ij[k][0]] * m[ij[k][1]]);
}

// The least-squares plane of summed inliers, in centred coordinates (normal . mean >= 0).
Plane fit(const Moments& m) {
  Plane p;
  double mean[3];
  const Eigen3 e = eigen_symmetric(m.covariance(mean));
  double dot = 0;
  for (int d = 0; d < 3; ++d) dot += e.vec[d][0] * mean[d];
  const double sign = dot < 0 ? -1 : 1;
  for (int d = 0; d < 3; ++d) {
    p.normal[d] = sign * e.vec[d][0];
    p.centroid[d] = mean[d];
    p.axis_u[d] = e.vec[d][2];
  }
  p.axis_v = {p.normal[1] * p.axis_u[2] - p.normal[2] * p.axis_u[1],
              p.normal[2] * p.axis_u[0] - p.normal[0] * p.axis_u[2],
              p.normal[0] * p.axis_u[1] - p.normal[1] * p.axis_u[0]};
  // Until the points' extents are known: the rectangle of a uniformly covered patch of the fit's
  // spread (half-widths of sqrt(3) standard deviations).
  const double half_u = std::sqrt(3 * std::max(0.0, e.value[2]));
  const double half_v = std::sqrt(3 * std::max(0.0, e.value[1]));
  p.u_min = -half_u, p.u_max = half_u, p.v_min = -half_v, p.v_max = half_v;
  p.offset = std::fabs(dot);
  p.inliers = static_cast<std::uint64_t>(std::llround(m.count));
  p.rms = std::sqrt(std::max(0.0, e.value[0]));
  return p;
}

// The same from sums laid out as count, sum x (3), sum x x^T (6) (kFitTerms).
Plane fit(const double* sums) {
  Moments m;
  m.count = sums[0];
  for (int d = 0; d < 3; ++d) m.s[d] = sums[1 + d];
  for (int k = 0; k < 6; ++k) m.ss[k] = sums[4 + k];
  return fit(m);
}

// Moments summed over all ranks, term by term.
void sum_over_ranks(MPI_Comm comm, std::vector<Moments>& moments) {
  constexpr int kTerms = 12;  // count, s (3), ss (6), d2, d4
  std::vector<double> flat(kTerms * moments.size());
  for (std::size_t q = 0; q < moments.size(); ++q) {
    const Moments& m = moments[q];
    double* at = flat.data() + kTerms * q;
    at[0] = m.count;
    for (int d = 0; d < 3; ++d) at[1 + d] = m.s[d];
    for (int k = 0; k < 6; ++k) at[4 + k] = m.ss[k];
    at[10] = m.d2, at[11] = m.d4;
  }
  global_sum(comm, std::span<double>(flat));
  for (std::size_t q = 0; q < moments.size(); ++q) {
    Moments& m = moments[q];
    const double* at = flat.data() + kTerms * q;
    m.count = at[0];
    for (int d = 0; d < 3; ++d) m.s[d] = at[1 + d];
    for (int k = 0; k < 6; ++k) m.ss[k] = at[4 + k];
    m.d2 = at[10], m.d4 = at[11];
  }
}

// Per group g < groups, the sum of f(g, j) over the listed items j < listed, on this rank;
// key(j) is item j's group (>= groups: none; f(g, j) is empty for every other g). On the CPU one
// lane a group over all listed items, in their order. On the GPU the items are sorted by group
// first (a stable radix sort), then each group's items are summed by up to 1024 lanes that walk
// only that group's items, and the lanes' sums are added in lane order in two levels of at most
// 32: every item is read once instead of once per group, and no thread adds more than 32 partials
// (the sums' order differs from the CPU's; it is the same on every run).
template <class T, class F, class K>
std::vector<T> grouped_sums(std::size_t groups, std::size_t listed, const F& f, const K& key,
                            GroupScratch& scratch, DeviceVector<T>& partials) {
  std::vector<T> sums(groups);
  if (groups == 0 || listed == 0) return sums;
#if defined(__CUDACC__)
  if (listed >= (std::size_t{1} << 32) || groups >= (std::size_t{1} << 31))
    throw std::invalid_argument("grouped sums: more than 2^32 - 1 items or 2^31 - 1 groups");
  grow_to(scratch.keys, listed);
  grow_to(scratch.items, listed);
  for_each_index(listed,
                 WriteGroupKeys<K>{key, GroupKeys{groups, raw(scratch.keys), raw(scratch.items)}});
  sort_pairs(scratch.keys, scratch.items, listed, key_bits(groups + 1), scratch.keys_alt,
             scratch.items_alt);
  lower_bounds(scratch.keys, listed, groups + 1, scratch.bounds);
  const std::size_t lanes = std::clamp<std::size_t>(listed / 32, 1, 1024);
  const std::size_t slots = (lanes + 31) / 32;
  grow_to(partials, groups * (lanes + slots + 1));
  T* partial = raw(partials);
  T* middle = partial + groups * lanes;
  T* total = middle + groups * slots;
  for_each_index(groups * lanes, SortedGroupPartials<T, F>{f, raw(scratch.items),
                                                           raw(scratch.bounds), lanes, partial});
  for_each_index(groups * slots, GroupTotals<T>{partial, lanes, 32, slots, middle});
  for_each_index(groups, GroupTotals<T>{middle, slots, slots, 1, total});
  const std::size_t at = groups * (lanes + slots);
#else
  (void)key, (void)scratch;
  grow_to(partials, groups);
  for_each_index(groups, GroupSums<T, F>{f, listed, raw(partials)});
  const std::size_t at = 0;
#endif
  const auto first = partials.begin() + static_cast<std::ptrdiff_t>(at);
  apron::copy(first, first + static_cast<std::ptrdiff_t>(groups), sums.begin());
  return sums;
}

// Point j's moments for group g (grouped_moments): nothing unless it is g's.
struct PointOfGroup {
  const Vec4* points;
  const std::int32_t* group;
  APRON_HD Moments operator()(std::size_t g, std::size_t j) const {
    Moments m;
    if (group[j] == static_cast<std::int32_t>(g)) m.add(points[j].x, points[j].y, points[j].z);
    return m;
  }
};
struct GroupOfPoint {
  const std::int32_t* group;
  APRON_HD std::size_t operator()(std::size_t j) const {
    return group[j] < 0 ? ListedCandidate::kNoGroup : static_cast<std::size_t>(group[j]);
  }
};

int find_root(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

std::vector<Moments> grouped_moments(const DeviceVector<Vec4>& points,
                                     const DeviceVector<std::int32_t>& group, std::size_t groups,
                                     GroupScratch& scratch, DeviceVector<Moments>& partials) {
  if (group.size() != points.size())
    throw std::invalid_argument("grouped_moments: one group per point");
  return grouped_sums(groups, points.size(), PointOfGroup{raw(points), raw(group)},
                      GroupOfPoint{raw(group)}, scratch, partials);
}

std::array<std::array<double, 3>, 4> Plane::corners() const {
  std::array<std::array<double, 3>, 4> c;
  const double us[4] = {u_min, u_max, u_max, u_min}, vs[4] = {v_min, v_min, v_max, v_max};
  for (int k = 0; k < 4; ++k)
    for (int d = 0; d < 3; ++d) c[k][d] = centroid[d] + us[k] * axis_u[d] + vs[k] * axis_v[d];
  return c;
}

// upload_packed's copies go to a stream of their own (CUDA), so that the kernels that follow
// each chunk on the default stream run while the next chunks are copied.
struct PlaneDetector::UploadStream {
#if defined(APRON_PLANES_UPLOAD_STREAM)
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;   // the default stream's earlier work, which the copies wait for
  cudaEvent_t landed = nullptr;  // the last chunk copied, which its kernels wait for
  UploadStream() {
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "event");
    check_cuda(cudaEventCreateWithFlags(&landed, cudaEventDisableTiming), "event");
  }
  UploadStream(const UploadStream&) = delete;
  UploadStream& operator=(const UploadStream&) = delete;
  ~UploadStream() {
    cudaEventDestroy(landed);
    cudaEventDestroy(ready);
    cudaStreamDestroy(stream);
  }
#endif
};

PlaneDetector::~PlaneDetector() = default;

PlaneDetector::PlaneDetector(MPI_Comm comm, DetectorParams params)
    : comm_(comm), transport_(comm), params_(params) {
  int ranks = 1;
  MPI_Comm_size(comm_, &ranks);
  if (ranks > 1) {
    const auto sum = [this](double* sums, int n) {
      transport_.sum_in_place(sums, static_cast<std::size_t>(n));
    };
    octree_.set_global_sum(sum);
    residual_octree_.set_global_sum(sum);
  }
  residual_octree_.skip_untested(true);  // its coarse levels only drop small nodes
}

Detection PlaneDetector::detect(std::span<const Vec4> points, const std::array<double, 3>& centre,
                                double half_extent, double rho_max, bool want_labels) {
  return analyse(
      points.size(), [&](const OctreeFrame&) { upload(points, points_); }, centre, half_extent,
      rho_max, want_labels);
}

Detection PlaneDetector::detect(std::span<const float> xyz, const std::array<double, 3>& centre,
                                double half_extent, double rho_max, bool want_labels) {
  if (xyz.size() % 3 != 0)
    throw std::invalid_argument("planes: packed points must be 3 floats each, got " +
                                std::to_string(xyz.size()) + " floats");
  packed_.resize(xyz.size());  // before the clock: an allocation, once
  return analyse(
      xyz.size() / 3, [&](const OctreeFrame& frame) { upload_packed(xyz, frame); }, centre,
      half_extent, rho_max, want_labels);
}

// The packed points copied into packed_ in chunks of upload_chunk_points_; each chunk, once
// copied, widened into points_ and given its octree keys (OctreeBuilder::prepare_keys). On the
// GPU the copies run on their own stream and each chunk's kernels wait for its copy alone: all
// but the last chunk's kernels run while later chunks cross the link (on the CPU, in turn).
void PlaneDetector::upload_packed(std::span<const float> xyz, const OctreeFrame& frame) {
  const std::size_t n = xyz.size() / 3;
  if (n == 0) return;
#if defined(APRON_PLANES_UPLOAD_STREAM)
  if (!upload_stream_) upload_stream_ = std::make_unique<UploadStream>();
  const UploadStream& s = *upload_stream_;
  check_cuda(cudaEventRecord(s.ready, 0), "event");
  check_cuda(cudaStreamWaitEvent(s.stream, s.ready, 0), "wait");
#endif
  for (std::size_t begin = 0; begin < n; begin += upload_chunk_points_) {
    const std::size_t end = std::min(n, begin + upload_chunk_points_);
    const std::span<const float> chunk = xyz.subspan(3 * begin, 3 * (end - begin));
#if defined(APRON_PLANES_UPLOAD_STREAM)
    check_cuda(cudaMemcpyAsync(raw(packed_) + 3 * begin, chunk.data(), chunk.size_bytes(),
                               cudaMemcpyHostToDevice, s.stream),
               "copy");
    check_cuda(cudaEventRecord(s.landed, s.stream), "event");
    check_cuda(cudaStreamWaitEvent(0, s.landed, 0), "wait");
#else
    copy_to_device(chunk, packed_, 3 * begin);
#endif
    for_each_index(end - begin, WidenPoints{raw(packed_) + 3 * begin, raw(points_) + begin});
    octree_.prepare_keys(points_, n, begin, end, frame, params_.octree.max_depth);
  }
}

template <class Upload>
Detection PlaneDetector::analyse(std::size_t n, const Upload& upload_points,
                                 const std::array<double, 3>& centre, double half_extent,
                                 double rho_max, bool want_labels) {
  Detection out;
  points_.resize(n);  // before the clock: an allocation, once
  MPI_Barrier(comm_);
  const double start = wall_seconds();
  double mark = start;
  StageTimes& t = out.times;
  OctreeFrame frame;
  const double size = 2 * half_extent * (1 + 1e-6) + 1e-30;
  for (int d = 0; d < 3; ++d) frame.origin[d] = -size / 2;
  frame.size = size;
  upload_points(frame);
  t.upload = elapsed(mark);

  octree_.build(points_, n, frame, params_.octree);
  t.octree = elapsed(mark);

  if (!accumulator_ || rho_max_ != rho_max)
    accumulator_ = std::make_unique<Accumulator>(params_.phi_cells, params_.rho_cells,
                                                 rho_max * (1 + 1e-9) + 1e-30);
  rho_max_ = rho_max;
  accumulator_->vote(octree_.clusters, params_.voting);
  t.vote = elapsed(mark);

  sum_votes();
  int ranks = 1;
  MPI_Comm_size(comm_, &ranks);
  t.reduce = elapsed(mark);

  accumulator_->smooth();
  peaks_ = accumulator_->peaks(params_.min_votes);
  out.peaks = peaks_.size();
  t.peaks = elapsed(mark);

  peak_cells_.assign(peaks_.begin(), peaks_.end());
  assign_clusters(accumulator_->kernels, accumulator_->kernel_count, accumulator_->layout(),
                  peak_cells_, cluster_peak_);
  std::vector<std::int32_t> cluster_plane;
  out.planes = fit_planes(octree_.clusters, peaks_, params_, cluster_plane);
  t.planes = elapsed(mark);

  // Clusters -> planes, then points -> planes: in the octree's order, which the extents need
  // (with the points in that order); in the input's order only where asked for.
  cluster_plane_.assign(cluster_plane.begin(), cluster_plane.end());
  sorted_labels_.resize(n);
  for_each_index(
      n, PlaneLabels{raw(octree_.sorted_cluster), raw(cluster_plane_), raw(sorted_labels_)});
  t.labels = elapsed(mark);

  compute_extents(out.planes, sorted_labels_, octree_.sorted);
  t.extent = elapsed(mark);
  if (params_.residual.on) {
    residual_round(out.planes, frame, out);  // in the octree's order as well
    t.residual = elapsed(mark);
  }
  if (want_labels || params_.grow_band > 0) {
    labels_.resize(n);
    for_each_index(n, InputOrderLabels{raw(octree_.order), raw(sorted_labels_), raw(labels_)});
    t.labels += elapsed(mark);
  }
  if (params_.grow_band > 0) {
    out.grown = grow_inliers(out.planes);
    t.grow = elapsed(mark);
  }
  to_cloud_coordinates(out.planes, centre);
  t.total = wall_seconds() - start;

  // Outside the timed analysis: statistics and the labels on the host.
  double* stage[] = {&t.upload, &t.octree, &t.vote, &t.reduce,   &t.peaks, &t.planes,
                     &t.labels, &t.extent, &t.grow, &t.residual, &t.total};
  std::vector<double> seconds;
  for (double* s : stage) seconds.push_back(*s);
  global_max(comm_, std::span<double>(seconds));
  for (std::size_t k = 0; k < seconds.size(); ++k) *stage[k] = seconds[k];
  std::vector<std::int64_t> counts = {static_cast<std::int64_t>(octree_.clusters.size()),
                                      static_cast<std::int64_t>(accumulator_->vote_count)};
  const std::size_t levels = static_cast<std::size_t>(params_.octree.max_depth);
  for (std::size_t l = 0; l < levels; ++l) {
    counts.push_back(
        l < octree_.stats.nodes.size() ? static_cast<std::int64_t>(octree_.stats.nodes[l]) : 0);
    counts.push_back(l < octree_.stats.clusters.size()
                         ? static_cast<std::int64_t>(octree_.stats.clusters[l])
                         : 0);
  }
  global_sum(comm_, std::span<std::int64_t>(counts));
  out.clusters = static_cast<std::uint64_t>(counts[0]);
  out.votes = static_cast<std::uint64_t>(counts[1]);
  for (std::size_t l = 0; l < levels; ++l) {
    out.nodes_per_level.push_back(static_cast<std::uint64_t>(counts[2 + 2 * l]));
    out.clusters_per_level.push_back(static_cast<std::uint64_t>(counts[3 + 2 * l]));
  }
  double work = 0;
  for (std::size_t l = 0; l < octree_.stats.active.size(); ++l)
    work += (static_cast<int>(l) + 1 >= params_.octree.first_level ? 1.0 : kUntestedLevelWork) *
            static_cast<double>(octree_.stats.active[l]);
  out.octree_work.resize(static_cast<std::size_t>(ranks));
  MPI_Allgather(&work, 1, MPI_DOUBLE, out.octree_work.data(), 1, MPI_DOUBLE, comm_);
  if (want_labels) {
    out.labels.resize(n);
    apron::copy(labels_.begin(), labels_.end(), out.labels.begin());
  }
  return out;
}

namespace {

// The peaks' fits with each coordinate of their normals and centroids in an array of its own,
// so that a cluster's distance to every plane is one loop the compiler vectorises.
class FitsByAxis {
 public:
  FitsByAxis(const std::vector<Plane>& fits, const std::vector<char>& has_fit)
      : size_(fits.size()), normal_(3 * size_, 0.0), centroid_(3 * size_, 0.0) {
    for (std::size_t r = 0; r < size_; ++r)
      for (int a = 0; a < 3 && has_fit[r]; ++a) {
        normal_[a * size_ + r] = fits[r].normal[a];
        centroid_[a * size_ + r] = fits[r].centroid[a];
      }
  }
  // near[r] = 0 where the point m lies farther than `limit` from plane r by more than the
  // rounding of the distance (PlaneFitter::alignment's terms, whose own test decides the rest);
  // 1 for a plane without a fit (all zeros).
  void near(const double* m, double limit, char* near) const {
    const double loose = limit + kSlack;
    const double *nx = normal_.data(), *ny = nx + size_, *nz = ny + size_;
    const double *cx = centroid_.data(), *cy = cx + size_, *cz = cy + size_;
    for (std::size_t r = 0; r < size_; ++r) {
      const double d = nx[r] * (m[0] - cx[r]) + ny[r] * (m[1] - cy[r]) + nz[r] * (m[2] - cz[r]);
      near[r] = std::fabs(d) <= loose;
    }
  }

 private:
  // 1 um: far above the distance's rounding (contracted or not) for coordinates up to 10^5 m.
  static constexpr double kSlack = 1e-6;
  std::size_t size_;
  std::vector<double> normal_, centroid_;
};

// The plane-finding steps of PlaneDetector::fit_planes over this rank's clusters; every sum
// goes through one allreduce, so the decisions are equal on every rank.
class PlaneFitter {
 public:
  PlaneFitter(MPI_Comm comm, const DetectorParams& params, const BallLayout& layout,
              const std::vector<std::uint32_t>& peaks, std::span<const Cluster> clusters,
              std::vector<std::int32_t> cluster_peak)
      : comm_(comm),
        params_(params),
        layout_(layout),
        peaks_(peaks),
        clusters_(clusters),
        cluster_peak_(std::move(cluster_peak)),
        cos_merge_(std::cos(params.merge_angle_deg * kPi / 180)),
        cos_widest_(std::cos(std::min(kPi / 2, 3 * params.merge_angle_deg * kPi / 180))),
        parent_(peaks.size()),
        fits_(peaks.size()),
        has_fit_(peaks.size(), 0) {
    std::iota(parent_.begin(), parent_.end(), 0);
  }

  // 1. Each peak's sums from its clusters that lie on the peak cell's plane (within three
  // times the tolerances plus a cell): a small cluster whose uncertain kernel reached the peak
  // from afar (a tilted fragment of another surface, whose offset the tilt shifts) would pull
  // the fit off.
  void sum_peaks() {
    const double loose_cos =
        std::cos(std::min(kPi / 2, 3 * params_.merge_angle_deg * kPi / 180 + layout_.dphi()));
    const double loose_distance = 3 * params_.merge_distance + layout_.drho();
    // Each peak cell's plane (normal, offset) once, not per cluster (a search and four sines
    // and cosines each).
    std::vector<std::array<double, 4>> cell_plane(peaks_.size());
    for (std::size_t p = 0; p < peaks_.size(); ++p) {
      double at[3];
      layout_.centre(peaks_[p], at);
      cell_plane[p] = {std::sin(at[1]) * std::cos(at[0]), std::sin(at[1]) * std::sin(at[0]),
                       std::cos(at[1]), at[2]};
    }
    sums_.assign(peaks_.size() * kFitTerms, 0.0);
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      const int p = cluster_peak_[c];
      if (p < 0) continue;
      const double* n = cell_plane[p].data();
      const Cluster& k = clusters_[c];
      const double cosine = n[0] * k.normal[0] + n[1] * k.normal[1] + n[2] * k.normal[2];
      const double off = n[0] * k.mean[0] + n[1] * k.mean[1] + n[2] * k.mean[2] - n[3];
      if (std::fabs(cosine) < loose_cos || std::fabs(off) > loose_distance) {
        cluster_peak_[c] = -1;
        continue;
      }
      add_cluster(k, &sums_[kFitTerms * p]);
    }
    global_sum(comm_, std::span<double>(sums_));
  }

  // 1b. (verify_planes) Each peak's plane grown from its largest cluster instead of from all
  // that voted near it: parallel surfaces a few rho cells apart (a tread and a box top
  // 9 cm above it) vote into one peak, and the fit of both leans between them, within
  // merge_distance of either; small clusters' normals are too uncertain to tell them apart. The
  // largest cluster's plane is the most certain; clusters on it (normal within merge_angle,
  // centroid within merge_distance) are refitted, three times; the others leave the peak (to
  // another plane, or to the orphans' recovery).
  void seed_peaks() {
    const std::size_t peaks = peaks_.size();
    std::vector<Plane> seed = largest_clusters();
    std::vector<char> member(clusters_.size(), 0);
    for (int round = 0; round < 3; ++round) {
      sums_.assign(peaks * kFitTerms, 0.0);
      for (std::size_t c = 0; c < clusters_.size(); ++c) {
        const int p = cluster_peak_[c];
        member[c] = p >= 0 && seed[p].inliers > 0 &&
                    on_plane(seed[p], clusters_[c].normal, clusters_[c].mean);
        if (member[c]) add_cluster(clusters_[c], &sums_[kFitTerms * p]);
      }
      global_sum(comm_, std::span<double>(sums_));
      for (std::size_t p = 0; p < peaks; ++p)
        if (sums_[kFitTerms * p] >= 3) seed[p] = fit(&sums_[kFitTerms * p]);
    }
    for (std::size_t c = 0; c < clusters_.size(); ++c)
      if (!member[c]) cluster_peak_[c] = -1;
  }

  // 2. Peaks whose planes agree are merged (the accumulator's aliasing, or a plane through the
  // origin voting at n and -n), until no pair agrees.
  void merge_peaks() {
    const std::size_t peaks = peaks_.size();
    for (int round = 0; round < 4; ++round) {
      refit_roots();
      bool changed = false;
      for (std::size_t a = 0; a < peaks; ++a)
        for (std::size_t b = a + 1; b < peaks; ++b)
          if (has_fit_[a] && has_fit_[b] &&
              agree(fits_[a], fits_[b].normal.data(), fits_[b].offset)) {
            parent_[b] = static_cast<int>(a);
            has_fit_[b] = 0;
            changed = true;
          }
      if (!changed) break;
    }
    refit_roots();
  }

  // 3. Each cluster's plane (a root peak, -1 none): its own peak's if its normal and centroid
  // agree with it, else the nearest plane it agrees with (a very certain cluster whose kernel
  // stopped short of the peak's cell), else none (a cluster of another surface that only voted
  // nearby).
  std::vector<int> match_clusters() {
    std::vector<int> root(clusters_.size(), -1);
    const FitsByAxis by_axis(fits_, has_fit_);
    std::vector<char> near(fits_.size());
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      const int own = cluster_peak_[c] >= 0 ? find_root(parent_, cluster_peak_[c]) : -1;
      root[c] = match_cluster(clusters_[c], own, by_axis, near);
    }
    return root;
  }

  // A cluster's plane (match_clusters): its own peak's root if it fits, else the nearest it fits.
  int match_cluster(const Cluster& k, int own_root, const FitsByAxis& by_axis,
                    std::vector<char>& near) const {
    // Its centroid on the plane and its normal along the plane's (near(), one way): offsets
    // compared at the origin would let a cluster tilted by a degree or two, far from the
    // origin, join a parallel plane 0.1 m away (a box top onto a stair tread). Without
    // verify_planes: the paper's comparison of offsets.
    const double own = k.normal[0] * k.mean[0] + k.normal[1] * k.mean[1] + k.normal[2] * k.mean[2];
    // The cluster's own limit (a cosine), computed once and only for a plane it lies on at more
    // than merge_angle.
    double limit = 2;
    auto own_limit = [&] {
      if (limit > 1) limit = tilt_cosine(tilt_variance(k));
      return limit;
    };
    auto fits = [&](int r) {
      if (!has_fit_[r]) return false;
      if (!params_.verify_planes) return agree(fits_[r], k.normal, own);
      const double a = alignment(fits_[r], k.normal, k.mean);
      return a >= cos_merge_ || (a >= cos_widest_ && a >= own_limit() && beside(fits_[r], k));
    };
    auto distance = [&](int r) {
      double d = -fits_[r].offset;
      for (int a = 0; a < 3; ++a) d += fits_[r].normal[a] * k.mean[a];
      return std::fabs(d);
    };
    if (own_root >= 0 && fits(own_root)) return own_root;
    // Most planes lie farther than merge_distance from the centroid: rejected for all planes
    // at once (verify_planes; the other test compares offsets at the origin).
    if (params_.verify_planes) by_axis.near(k.mean, params_.merge_distance, near.data());
    int best = -1;
    for (int r = 0; r < static_cast<int>(peaks_.size()); ++r)
      if ((!params_.verify_planes || near[r]) && fits(r) &&
          (best < 0 || distance(r) < distance(best)))
        best = r;
    return best;
  }

  // 3b. Clusters that no plane took, grouped among themselves. A small surface near a
  // large parallel one (a tread 9 cm below a table, a shelf board above the floor) votes a few
  // cells from the large one's peak; the votes of its small, uncertain clusters merge into that
  // peak, whose plane they do not fit. Every rank sees all such orphans (one allgather, a few
  // hundred clusters at most), in an order that does not depend on the split; each one not yet
  // taken seeds a group of those that agree with it; a group with min_plane_points becomes a
  // plane (a new root after the peaks) of the members that agree with the group's own fit.
  void recover_orphans(std::vector<int>& root) {
    std::vector<double> mine;
    std::vector<std::size_t> local;
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      if (root[c] >= 0 || skewed_fragment(clusters_[c])) continue;
      const Cluster& k = clusters_[c];
      const double own =
          k.normal[0] * k.mean[0] + k.normal[1] * k.mean[1] + k.normal[2] * k.mean[2];
      const double row[kOrphan] = {static_cast<double>(k.count),
                                   k.mean[0],
                                   k.mean[1],
                                   k.mean[2],
                                   k.normal[0],
                                   k.normal[1],
                                   k.normal[2],
                                   own,
                                   tilt_variance(k)};
      mine.insert(mine.end(), row, row + kOrphan);
      local.push_back(c);
    }
    std::size_t first = 0;
    const std::vector<double> all = all_gather(mine, first);
    const std::size_t n = all.size() / kOrphan;
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    auto row = [&](std::size_t i) { return &all[kOrphan * i]; };
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::lexicographical_compare(row(b), row(b) + 1, row(a), row(a) + 1) ||
             (row(a)[0] == row(b)[0] &&
              std::lexicographical_compare(row(a) + 1, row(a) + 4, row(b) + 1, row(b) + 4));
    });
    std::vector<int> group(n, -1);
    std::vector<std::vector<std::size_t>> members;
    for (const std::size_t seed : order) {
      if (group[seed] >= 0) continue;
      members.emplace_back();
      double points = 0;
      for (const std::size_t i : order)
        // The widest angle any pair may have first (no cosine to compute), then the pair's own.
        if (group[i] < 0 &&
            near(row(seed) + 4, row(seed) + 1, row(i) + 4, row(i) + 1, cos_widest_) &&
            near(row(seed) + 4, row(seed) + 1, row(i) + 4, row(i) + 1,
                 tilt_cosine(row(seed)[8] + row(i)[8]))) {
          group[i] = static_cast<int>(members.size() - 1);
          members.back().push_back(i);
          points += row(i)[0];
        }
      // A plane of one or two clusters is one that failed its own peak's plane: no new plane.
      if (points < static_cast<double>(params_.min_plane_points) || members.back().size() < 3)
        members.back().clear();
    }
    auto on_this_rank = [&](std::size_t i) { return i >= first && i < first + local.size(); };
    for (const auto& m : members) {
      if (m.empty()) continue;
      // The group's own fit from its members' sums (those on this rank, summed over ranks).
      std::vector<double> sums(kFitTerms, 0.0);
      for (const std::size_t i : m)
        if (on_this_rank(i)) add_cluster(clusters_[local[i - first]], sums.data());
      global_sum(comm_, std::span<double>(sums));
      const Plane fitted = fit(sums.data());
      // Onto a plane it lies on (found from a peak, or recovered before), else a new one.
      int target = -1;
      for (std::size_t r = 0; r < fits_.size() && target < 0; ++r)
        if (has_fit_[r] && near(fits_[r].normal.data(), fits_[r].centroid.data(),
                                fitted.normal.data(), fitted.centroid.data()))
          target = static_cast<int>(r);
      if (target < 0) {
        target = static_cast<int>(fits_.size());
        fits_.push_back(fitted);
        has_fit_.push_back(1);
        parent_.push_back(target);
      }
      const Plane& plane = fits_[target];
      for (const std::size_t i : m)
        if (on_this_rank(i) && near(plane.normal.data(), plane.centroid.data(), row(i) + 4,
                                    row(i) + 1, tilt_cosine(row(i)[8])))
          root[local[i - first]] = target;
    }
  }

  // 4. The planes refitted from their clusters, most inliers first, without those below
  // min_plane_points; cluster_plane: per cluster, its plane in the result (-1 none).
  std::vector<Plane> final_planes(std::vector<int> cluster_root,
                                  std::vector<std::int32_t>& cluster_plane) const {
    const std::size_t peaks = fits_.size();  // the peaks' roots, then recovered groups
    std::vector<double> sums = plane_sums(cluster_root);
    if (params_.verify_planes &&
        (split_stacked(sums, cluster_root) | refuse_slabs(sums, cluster_root)))
      sums = plane_sums(cluster_root);
    if (params_.verify_planes && merge_near(sums, cluster_root)) sums = plane_sums(cluster_root);
    for (int pass = 0; pass < 3 && params_.verify_planes && split_bridges(sums, cluster_root);
         ++pass)
      sums = plane_sums(cluster_root);
    std::vector<std::pair<int, Plane>> kept;  // (root peak, plane)
    for (std::size_t p = 0; p < peaks; ++p) {
      const double* at = &sums[kPlaneTerms * p];
      if (at[0] < std::max<double>(3, static_cast<double>(params_.min_plane_points))) continue;
      Plane plane = fit(at);
      plane.clusters = static_cast<std::uint64_t>(at[kFitTerms]);
      plane.peak_cell = p < peaks_.size() ? peaks_[p] : kNoPeak;
      kept.emplace_back(static_cast<int>(p), plane);
    }
    std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
      return a.second.inliers > b.second.inliers;
    });
    std::vector<int> root_plane(peaks, -1);
    std::vector<Plane> planes;
    for (auto& [root, plane] : kept) {
      root_plane[root] = static_cast<int>(planes.size());
      planes.push_back(plane);
    }
    cluster_plane.assign(clusters_.size(), -1);
    for (std::size_t c = 0; c < clusters_.size(); ++c)
      if (cluster_root[c] >= 0) cluster_plane[c] = root_plane[cluster_root[c]];
    return planes;
  }

 private:
  static constexpr int kOrphan = 9;  // count, mean (3), normal (3), offset, tilt variance

  // The variance of a cluster's normal direction (radians squared), a line fit's slope variance:
  // the spread off its plane over (its points times its in-plane spread along the narrower axis).
  // Small clusters of a small surface (a box's face: 40-60 points in nodes the face only partly
  // fills) tilt by 1-2 degrees from noise alone, so a fixed merge_angle splits their surface
  // into groups too small to be a plane.
  static double tilt_variance(const Cluster& k) {
    return k.eig[1] > 0 ? k.eig[0] / (k.count * k.eig[1]) : 1.0;
  }
  // The cosine two normals of tilt variance `variance` (summed) must reach: three standard
  // deviations, no less than merge_angle, no more than three times it.
  double tilt_cosine(double variance) const {
    const double merge = params_.merge_angle_deg * kPi / 180;
    return std::cos(std::clamp(3 * std::sqrt(variance), merge, std::min(kPi / 2, 3 * merge)));
  }

  // Per peak: the plane of its largest cluster over all ranks (the lowest x of the centroid
  // breaks ties), as a Plane (normal, centroid; inliers 0: the peak has no cluster).
  std::vector<Plane> largest_clusters() const {
    const std::size_t peaks = peaks_.size();
    std::vector<double> most(peaks, 0.0), lowest_x(peaks, 1e300), plane(6 * peaks, 0.0);
    for (std::size_t c = 0; c < clusters_.size(); ++c)
      if (cluster_peak_[c] >= 0)
        most[cluster_peak_[c]] = std::max<double>(most[cluster_peak_[c]], clusters_[c].count);
    MPI_Allreduce(MPI_IN_PLACE, most.data(), static_cast<int>(peaks), MPI_DOUBLE, MPI_MAX, comm_);
    auto largest = [&](std::size_t c) {
      return cluster_peak_[c] >= 0 && clusters_[c].count == most[cluster_peak_[c]];
    };
    for (std::size_t c = 0; c < clusters_.size(); ++c)
      if (largest(c))
        lowest_x[cluster_peak_[c]] = std::min(lowest_x[cluster_peak_[c]], clusters_[c].mean[0]);
    MPI_Allreduce(MPI_IN_PLACE, lowest_x.data(), static_cast<int>(peaks), MPI_DOUBLE, MPI_MIN,
                  comm_);
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      if (!largest(c) || clusters_[c].mean[0] != lowest_x[cluster_peak_[c]]) continue;
      for (int d = 0; d < 3; ++d) {
        plane[6 * cluster_peak_[c] + d] = clusters_[c].normal[d];
        plane[6 * cluster_peak_[c] + 3 + d] = clusters_[c].mean[d];
      }
    }
    global_sum(comm_, std::span<double>(plane));
    std::vector<Plane> seed(peaks);
    for (std::size_t p = 0; p < peaks; ++p) {
      seed[p].inliers = most[p] > 0 ? 1 : 0;
      for (int d = 0; d < 3; ++d) {
        seed[p].normal[d] = plane[6 * p + d];
        seed[p].centroid[d] = plane[6 * p + 3 + d];
      }
    }
    return seed;
  }
  // Per root: the fit's sums, the cluster count, the count-weighted sum of the clusters' normals,
  // and the slab test's sums (points, squared and fourth-power distances off their nodes' planes).
  static constexpr int kPlaneTerms = kFitTerms + 7;
  static constexpr int kSlabAt = kFitTerms + 4;

  std::vector<double> plane_sums(const std::vector<int>& cluster_root) const {
    std::vector<double> sums(fits_.size() * kPlaneTerms, 0.0);
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      if (cluster_root[c] < 0) continue;
      double* at = &sums[kPlaneTerms * cluster_root[c]];
      const Cluster& k = clusters_[c];
      add_cluster(k, at);
      at[kFitTerms] += 1;
      // Each normal on the side of the root's first fit (a plane through the origin has
      // clusters oriented either way).
      const Plane& f = fits_[cluster_root[c]];
      const double side =
          f.normal[0] * k.normal[0] + f.normal[1] * k.normal[1] + f.normal[2] * k.normal[2] < 0
              ? -1.0
              : 1.0;
      for (int d = 0; d < 3; ++d) at[kFitTerms + 1 + d] += side * k.count * k.normal[d];
      if (k.d2 > 0) at[kSlabAt] += k.count, at[kSlabAt + 1] += k.d2, at[kSlabAt + 2] += k.d4;
    }
    global_sum(comm_, std::span<double>(sums));
    return sums;
  }

  // The slab test over a whole plane: small nodes of a slab of outliers cut by the
  // scan's edge (30 to 60 points, too few for the nodes' own slab test) pass the coplanarity test
  // side by side and make a plane where there is none. Pooled over its clusters, the distances off
  // their planes of a true plane have a kurtosis near 3 (more with clusters of unequal noise), a
  // slab's 1.8; with the hundreds of points a plane needs, the estimate is sharp. Refused: a plane
  // below octree.slab_kurtosis whose spread (mean squared distance) is also more than four times
  // the planes' median, so that quantised or noise-free clouds, whose planes are all alike, keep
  // theirs. True when a plane was refused.
  bool refuse_slabs(const std::vector<double>& sums, std::vector<int>& cluster_root) const {
    const double limit = params_.octree.slab_kurtosis;
    if (limit <= 0) return false;
    std::vector<double> spread;
    for (std::size_t p = 0; p < fits_.size(); ++p) {
      const double* at = &sums[kPlaneTerms * p + kSlabAt];
      if (at[0] >= params_.octree.slab_points && at[1] > 0) spread.push_back(at[1] / at[0]);
    }
    if (spread.size() < 2) return false;
    std::nth_element(spread.begin(), spread.begin() + spread.size() / 2, spread.end());
    const double median = spread[spread.size() / 2];
    std::vector<char> slab(fits_.size(), 0);
    bool any = false;
    for (std::size_t p = 0; p < fits_.size(); ++p) {
      const double* at = &sums[kPlaneTerms * p + kSlabAt];
      if (at[0] < params_.octree.slab_points || !(at[1] > 0)) continue;
      const double kurtosis = at[0] * at[2] / (at[1] * at[1]);
      slab[p] = kurtosis < limit && at[1] / at[0] > 4 * median;
      any = any || slab[p];
    }
    for (int& r : cluster_root)
      if (r >= 0 && slab[r]) r = -1;
    return any;
  }

  // A plane that bridges two parallel surfaces side by side (a tread and a box top 9 cm above
  // it, touching in plan) fits them with a tilt that none of its clusters has, and its distances
  // are unimodal: each surface lies on one side of the plane at one end and on the other at the
  // other, so neither the slab test nor split_stacked (edge clusters tilt with it) sees it. Cut
  // at its centroid along one in-plane axis, a true plane's halves fit planes that meet at the
  // cut; a bridge's halves fit its two surfaces, a step apart. A plane whose halves lie more than
  // kBridgeStep noise deviations (the cleaner half's rms) apart there keeps the clusters on the
  // fit of one half (kept_half); the others go to the residual round. Measured over 51 scenes
  // (stairs, shelving, boxes, room): bridges 7.7-18.7 deviations, true planes at most 2.9 (a half
  // of 31 points). True when a plane lost clusters (the sums are global: the same on every rank).
  static constexpr double kBridgeStep = 6;
  bool split_bridges(const std::vector<double>& sums, std::vector<int>& cluster_root) const {
    const std::size_t roots = fits_.size();
    std::vector<Plane> whole(roots);
    for (std::size_t p = 0; p < roots; ++p)
      if (sums[kPlaneTerms * p] >= params_.min_plane_points) whole[p] = fit(&sums[kPlaneTerms * p]);
    // Per root, per axis (u, v), per side of the centroid: the half's sums.
    auto half = [](std::size_t root, int axis, int side) {
      return ((root * 2 + axis) * 2 + side) * kFitTerms;
    };
    std::vector<double> halves(roots * 4 * kFitTerms, 0.0);
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      const int r = cluster_root[c];
      if (r < 0 || whole[r].inliers == 0) continue;
      for (int axis = 0; axis < 2; ++axis) {
        const double t =
            along(axis ? whole[r].axis_v : whole[r].axis_u, clusters_[c].mean, whole[r].centroid);
        add_cluster(clusters_[c], &halves[half(r, axis, t < 0 ? 0 : 1)]);
      }
    }
    global_sum(comm_, std::span<double>(halves));
    std::vector<Plane> keep_on(roots);  // inliers 0: not a bridge
    bool any = false;
    for (std::size_t p = 0; p < roots; ++p) {
      double widest = 0;
      for (int axis = 0; axis < 2 && whole[p].inliers > 0; ++axis) {
        const double* a = &halves[half(p, axis, 0)];
        const double* b = &halves[half(p, axis, 1)];
        if (a[0] < 3 || b[0] < 3) continue;
        const Plane pa = fit(a), pb = fit(b);
        const double step = std::fabs(height_at(pa, whole[p]) - height_at(pb, whole[p]));
        if (step > kBridgeStep * std::min(pa.rms, pb.rms) && step > widest)
          widest = step, keep_on[p] = kept_half(pa, pb);
      }
      any = any || keep_on[p].inliers > 0;
    }
    if (!any) return false;
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      const int r = cluster_root[c];
      if (r >= 0 && keep_on[r].inliers > 0 &&
          !on_plane(keep_on[r], clusters_[c].normal, clusters_[c].mean))
        cluster_root[c] = -1;
    }
    return true;
  }
  // The half of a bridge whose fit its clusters keep: the larger, unless the other is clearly
  // cleaner (the larger then holds both surfaces).
  static const Plane& kept_half(const Plane& a, const Plane& b) {
    const Plane& larger = a.inliers >= b.inliers ? a : b;
    const Plane& smaller = a.inliers >= b.inliers ? b : a;
    return larger.rms > 1.25 * smaller.rms ? smaller : larger;
  }
  // A point's coordinate along `axis` from `origin`.
  static double along(const std::array<double, 3>& axis, const double* point,
                      const std::array<double, 3>& origin) {
    return axis[0] * (point[0] - origin[0]) + axis[1] * (point[1] - origin[1]) +
           axis[2] * (point[2] - origin[2]);
  }
  // Where plane h crosses the line through f's centroid along f's normal, as a distance from that
  // centroid.
  static double height_at(const Plane& h, const Plane& f) {
    double cosine = 0, offset = 0;
    for (int d = 0; d < 3; ++d) {
      cosine += h.normal[d] * f.normal[d];
      offset += h.normal[d] * (h.centroid[d] - f.centroid[d]);
    }
    return offset / cosine;
  }

  // Planes whose final fits lie on each other (near()) are one surface: two peaks whose first
  // fits, each from clusters of a part of it (one tilted by a neighbouring surface's points),
  // did not agree. True when a plane was merged into another (the sums are global: the same on
  // every rank).
  bool merge_near(const std::vector<double>& sums, std::vector<int>& cluster_root) const {
    std::vector<Plane> fitted(fits_.size());
    std::vector<int> into(fits_.size(), -1);
    for (std::size_t p = 0; p < fits_.size(); ++p)
      if (sums[kPlaneTerms * p] >= 3) fitted[p] = fit(&sums[kPlaneTerms * p]), into[p] = int(p);
    bool any = false;
    for (std::size_t a = 0; a < fits_.size(); ++a) {
      if (into[a] != static_cast<int>(a)) continue;
      for (std::size_t b = a + 1; b < fits_.size(); ++b)
        if (into[b] == static_cast<int>(b) &&
            near(fitted[a].normal.data(), fitted[a].centroid.data(), fitted[b].normal.data(),
                 fitted[b].centroid.data()))
          into[b] = static_cast<int>(a), any = true;
    }
    for (int& r : cluster_root)
      if (r >= 0) r = into[r];
    return any;
  }

  // The verification of each plane against its own fit: clusters of parallel surfaces
  // a few centimetres apart (a tread and a box top nearby) fit a plane tilted between them, away
  // from the normal its clusters agree on. Such a plane keeps the clusters within merge_distance
  // of the plane through its centroid along that common normal (the larger surface's: the
  // centroid lies nearer to it); the others go. True when a plane lost clusters (the same on
  // every rank: the sums are global).
  bool split_stacked(const std::vector<double>& sums, std::vector<int>& cluster_root) const {
    const double cos_half = std::cos(params_.merge_angle_deg / 2 * kPi / 180);
    std::vector<char> stacked(fits_.size(), 0);
    std::vector<std::array<double, 3>> common(fits_.size());
    std::vector<Plane> fitted(fits_.size());
    bool any = false;
    for (std::size_t p = 0; p < fits_.size(); ++p) {
      const double* at = &sums[kPlaneTerms * p];
      if (at[0] < 3 || at[kFitTerms] < 2) continue;
      const double* n = at + kFitTerms + 1;
      const double length = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
      if (!(length > 0)) continue;
      fitted[p] = fit(at);
      double cosine = 0;
      for (int d = 0; d < 3; ++d) {
        common[p][d] = n[d] / length;
        cosine += common[p][d] * fitted[p].normal[d];
      }
      stacked[p] = std::fabs(cosine) < cos_half;
      any = any || stacked[p];
    }
    if (!any) return false;
    for (std::size_t c = 0; c < clusters_.size(); ++c) {
      const int r = cluster_root[c];
      if (r < 0 || !stacked[r]) continue;
      double distance = 0;
      for (int d = 0; d < 3; ++d)
        distance += common[r][d] * (clusters_[c].mean[d] - fitted[r].centroid[d]);
      if (std::fabs(distance) > params_.merge_distance) cluster_root[c] = -1;
    }
    return true;
  }

  // The rows of every rank, rank by rank; first: where this rank's rows start.
  std::vector<double> all_gather(const std::vector<double>& mine, std::size_t& first) const {
    int ranks = 1, rank = 0;
    MPI_Comm_size(comm_, &ranks);
    MPI_Comm_rank(comm_, &rank);
    const int count = static_cast<int>(mine.size());
    std::vector<int> counts(ranks), offsets(ranks, 0);
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_);
    for (int r = 1; r < ranks; ++r) offsets[r] = offsets[r - 1] + counts[r - 1];
    std::vector<double> all(static_cast<std::size_t>(offsets.back() + counts.back()));
    MPI_Allgatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(),
                   MPI_DOUBLE, comm_);
    first = static_cast<std::size_t>(offsets[rank]) / kOrphan;
    return all;
  }

  // A cluster tilted a few degrees off a plane it lies next to: a node where that plane meets
  // another (a wall's foot on the floor), whose fit the other surface's points skew. Grouped, such
  // fragments would make a plane at a slant that is not there. A fragment is smaller than its
  // plane: a fit of fewer points (a small tilted cluster that seeded a peak shared by two
  // parallel surfaces) says nothing about clusters a metre away, which its slant may pass.
  bool skewed_fragment(const Cluster& k) const {
    const double loose_cos = std::cos(std::min(kPi / 2, 3 * params_.merge_angle_deg * kPi / 180));
    for (std::size_t r = 0; r < fits_.size(); ++r) {
      if (!has_fit_[r]) continue;
      const Plane& f = fits_[r];
      if (f.inliers <= k.count) continue;
      double cosine = 0, distance = 0;
      for (int d = 0; d < 3; ++d) {
        cosine += f.normal[d] * k.normal[d];
        distance += f.normal[d] * (k.mean[d] - f.centroid[d]);
      }
      if (std::fabs(cosine) >= loose_cos && std::fabs(distance) <= 2 * params_.merge_distance)
        return true;
    }
    return false;
  }

  // A cluster (normal n, centroid m) on plane f: within merge_angle of it, its centroid within
  // merge_distance.
  bool on_plane(const Plane& f, const double* n, const double* m) const {
    return alignment(f, n, m) >= cos_merge_;
  }
  // |cosine| of the angle between a cluster's normal n and plane f's where its centroid m lies
  // within merge_distance of f, else -1: one pass for several angle limits.
  double alignment(const Plane& f, const double* n, const double* m) const {
    double cosine = 0, distance = 0;
    for (int d = 0; d < 3; ++d) {
      cosine += f.normal[d] * n[d];
      distance += f.normal[d] * (m[d] - f.centroid[d]);
    }
    return std::fabs(distance) <= params_.merge_distance ? std::fabs(cosine) : -1.0;
  }

  // A cluster's patch overlapping a plane's (fit()'s rectangle of its spread, widened by the
  // cluster's own half-width), in the plane's axes.
  static bool beside(const Plane& f, const Cluster& k) {
    const double reach = std::sqrt(3 * std::max(0.0, k.eig[2]));
    double u = 0, v = 0;
    for (int d = 0; d < 3; ++d) {
      u += f.axis_u[d] * (k.mean[d] - f.centroid[d]);
      v += f.axis_v[d] * (k.mean[d] - f.centroid[d]);
    }
    return u >= f.u_min - reach && u <= f.u_max + reach && v >= f.v_min - reach &&
           v <= f.v_max + reach;
  }

  // Two planes given by normal and a point on each: within merge_angle (either orientation),
  // each point within merge_distance of the other plane. Unlike agree(), which compares offsets
  // at the origin, robust for small clusters far from it, whose normals are uncertain.
  bool near(const double* na, const double* pa, const double* nb, const double* pb) const {
    return near(na, pa, nb, pb, cos_merge_);
  }
  // The same with the normals' angle limited by its cosine `min_cosine`.
  bool near(const double* na, const double* pa, const double* nb, const double* pb,
            double min_cosine) const {
    return on_one_plane(na, pa, nb, pb, min_cosine, params_.merge_distance);
  }

  // Planes within merge_angle (either orientation) and merge_distance of each other.
  bool agree(const Plane& a, const double* nb, double db) const {
    const double cosine = a.normal[0] * nb[0] + a.normal[1] * nb[1] + a.normal[2] * nb[2];
    return std::fabs(cosine) >= cos_merge_ &&
           std::fabs(a.offset - (cosine < 0 ? -db : db)) <= params_.merge_distance;
  }

  // The fit of every root peak from the sums of the peaks merged into it.
  void refit_roots() {
    const std::size_t peaks = peaks_.size();
    std::vector<double> merged(peaks * kFitTerms, 0.0);
    for (std::size_t p = 0; p < peaks; ++p) {
      const int r = find_root(parent_, static_cast<int>(p));
      for (int k = 0; k < kFitTerms; ++k) merged[kFitTerms * r + k] += sums_[kFitTerms * p + k];
    }
    for (std::size_t p = 0; p < peaks; ++p) {
      has_fit_[p] = find_root(parent_, static_cast<int>(p)) == static_cast<int>(p) &&
                    merged[kFitTerms * p] >= 3;
      if (has_fit_[p]) fits_[p] = fit(&merged[kFitTerms * p]);
    }
  }

  MPI_Comm comm_;
  const DetectorParams& params_;
  BallLayout layout_;
  const std::vector<std::uint32_t>& peaks_;
  std::span<const Cluster> clusters_;
  std::vector<std::int32_t> cluster_peak_;
  double cos_merge_;
  double cos_widest_;  // of 3 merge_angle: the widest angle a cluster's own limit allows
  std::vector<int> parent_;
  std::vector<Plane> fits_;
  std::vector<char> has_fit_;
  std::vector<double> sums_;
};

}  // namespace

// The planes from the peaks and the clusters assigned to them (PlaneFitter's steps 1 to 4).
// The clusters come to the host through page-locked memory kept between analyses: a DMA at the
// link's speed into pages already mapped, not the driver's staged copy of pageable memory into
// a new vector.
std::vector<Plane> PlaneDetector::fit_planes(const DeviceVector<Cluster>& clusters,
                                             const std::vector<std::uint32_t>& peaks,
                                             const DetectorParams& params,
                                             std::vector<std::int32_t>& cluster_plane) {
  ProfileClock clock("planes-profile");
  clock.start();
  const std::size_t count = clusters.size();
  clock.note("clusters", count);
  clock.note("peaks", peaks.size());
  cluster_staging_.reserve(count * sizeof(Cluster));
  auto* staged = reinterpret_cast<Cluster*>(cluster_staging_.data());
  apron::copy(clusters.begin(), clusters.end(), staged);
  std::vector<std::int32_t> cluster_peak(count);  // assign_clusters' first `count` entries
  apron::copy(cluster_peak_.begin(), cluster_peak_.begin() + static_cast<std::ptrdiff_t>(count),
              cluster_peak.begin());
  PlaneFitter fitter(comm_, params, accumulator_->host_layout(), peaks,
                     std::span<const Cluster>(staged, count), std::move(cluster_peak));
  clock.lap("copy");
  fitter.sum_peaks();
  clock.lap("sum");
  if (params.verify_planes) fitter.seed_peaks();
  clock.lap("seed");
  fitter.merge_peaks();
  clock.lap("merge");
  std::vector<int> root = fitter.match_clusters();
  clock.lap("match");
  if (params.recover_orphans) fitter.recover_orphans(root);
  clock.lap("orphans");
  std::vector<Plane> planes = fitter.final_planes(root, cluster_plane);
  clock.lap("final");
  return planes;
}

// The votes of every rank (on one rank they are all here).
void PlaneDetector::sum_votes() {
  int ranks = 1;
  MPI_Comm_size(comm_, &ranks);
  if (ranks > 1) transport_.sum_in_place(raw(accumulator_->votes), accumulator_->cells());
}

// The second round (DetectorParams::residual) over the points the first left off every plane;
// planes in centred coordinates, their extents known. Every decision follows from sums over all
// ranks, so the ranks add the same planes.
void PlaneDetector::residual_round(std::vector<Plane>& planes, const OctreeFrame& frame,
                                   Detection& out) {
  ProfileClock clock("residual-profile");
  clock.start();
  std::vector<double> rms;
  for (const Plane& p : planes) rms.push_back(p.rms);
  std::sort(rms.begin(), rms.end());
  const double noise = rms.empty() ? 0 : rms[rms.size() / 2];  // the first round's
  const double limit = params_.residual.noise * noise;

  const std::size_t points = gather_residual_points(planes);
  clock.note("points", points);
  clock.lap("gather");
  const std::size_t sample = thin_residual_points(points);
  clock.note("sample", sample);
  OctreeParams tree = params_.octree;  // coarse levels untested (ResidualParams::first_level)
  tree.first_level =
      std::min(tree.max_depth, std::max(tree.first_level, params_.residual.first_level));
  if (params_.residual.trim_passes >= 0) tree.trim_passes = params_.residual.trim_passes;
  // The residual points keep the first octree's order, in the same frame and depth.
  residual_octree_.build(sample < points ? residual_sample_ : residual_points_, sample, frame, tree,
                         OctreeBuilder::Order::given);
  clock.lap("octree");
  const std::size_t voting = vote_thin_clusters(limit);
  clock.note("clusters", residual_octree_.clusters.size());
  clock.note("voting", voting);
  clock.lap("vote");
  std::vector<Plane> found = residual_candidates(limit);
  clock.note("candidates", found.size());
  clock.lap("candidates");
  std::vector<std::int64_t> counts = {static_cast<std::int64_t>(points),
                                      static_cast<std::int64_t>(voting)};
  global_sum(comm_, std::span<std::int64_t>(counts));
  out.residual_points = static_cast<std::uint64_t>(counts[0]);
  out.residual_clusters = static_cast<std::uint64_t>(counts[1]);
  if (found.empty()) return;

  grow_candidates(found, noise);
  clock.lap("grow");
  refit_candidates(found, noise);
  clock.note("joined", found.size());
  clock.lap("refit");
  const std::vector<std::int32_t> renumber = keep_candidate_planes(found, planes);
  clock.note("kept", found.size());
  clock.lap("keep");
  if (found.empty()) return;
  adopt_candidate_planes(planes, found, renumber, out);
  clock.lap("adopt");
  sort_by_inliers(planes);
  clock.lap("sort");
  compute_extents(planes, sorted_labels_, octree_.sorted);
  clock.lap("extents");
}

// The residual round's points (residual_points_): those on no plane and outside every plane's
// band; returns their count on this rank.
std::size_t PlaneDetector::gather_residual_points(const std::vector<Plane>& planes) {
  const std::size_t n = sorted_labels_.size();
  const std::vector<double> bands = plane_bands(planes, params_.residual.band);
  first_bands_.assign(bands.begin(), bands.end());
  // The points a candidate may take, once: the round's passes read these (a fraction of n).
  eligible_index_.resize(n);
  const std::size_t e = n ? copy_indices_if(n, raw(eligible_index_),
                                            Eligible{raw(octree_.sorted), raw(first_bands_),
                                                     raw(sorted_labels_), params_.residual.reclaim})
                          : 0;
  eligible_points_.resize(e);
  eligible_labels_.resize(e);
  if (e > 0) {
    const auto map_end = eligible_index_.begin() + static_cast<std::ptrdiff_t>(e);
    apron::gather(eligible_index_.begin(), map_end, octree_.sorted.begin(),
                  eligible_points_.begin());
    apron::gather(eligible_index_.begin(), map_end, sorted_labels_.begin(),
                  eligible_labels_.begin());
  }
  // The residual points are among them (on no plane), in the same order.
  residual_index_.resize(e);
  const std::size_t r =
      e ? copy_indices_if(e, raw(residual_index_),
                          OffPlanes{raw(eligible_points_), raw(first_bands_),
                                    static_cast<int>(planes.size()), raw(eligible_labels_)})
        : 0;
  residual_points_.resize(r);
  if (r > 0)
    apron::gather(residual_index_.begin(), residual_index_.begin() + static_cast<std::ptrdiff_t>(r),
                  eligible_points_.begin(), residual_points_.begin());
  return r;
}

// The residual octree's points (ResidualParams::octree_points): every k-th residual point, k
// from their count over all ranks, in residual_sample_; returns how many (all of them: none
// there, residual_points_ is the octree's).
std::size_t PlaneDetector::thin_residual_points(std::size_t points) {
  const std::uint64_t cap = params_.residual.octree_points;
  const auto all = static_cast<std::uint64_t>(global_sum(comm_, static_cast<std::int64_t>(points)));
  if (cap == 0 || all <= cap) return points;
  const std::size_t k = static_cast<std::size_t>((all + cap - 1) / cap);
  const std::size_t sample = (points + k - 1) / k;
  residual_sample_.resize(sample);
  for_each_index(sample, EveryKth{raw(residual_points_), k, raw(residual_sample_)});
  return sample;
}

// The residual octree's clusters no thicker than `limit` and not slabs by their kurtosis vote
// (into residual_clusters_), and the votes' peaks are found; returns the voting clusters' count
// on this rank. With the surfaces' points gone, a node cut by the cloud's bounding box holds a
// slab of outliers only, thin enough to pass the node test.
std::size_t PlaneDetector::vote_thin_clusters(double limit) {
  const std::size_t all = residual_octree_.clusters.size();
  std::vector<Cluster> host(all), thin;
  apron::copy(residual_octree_.clusters.begin(), residual_octree_.clusters.end(), host.begin());
  for (const Cluster& c : host) {
    // The slab test (OctreeParams::slab_kurtosis) on every cluster of enough points: uniform
    // outliers cut by the bounding box, however thin, have the kurtosis of a uniform slab.
    const bool slab = static_cast<int>(c.count) >= params_.octree.slab_points &&
                      slab_spread(params_.octree.slab_kurtosis, c.count, c.d2, c.d4);
    if (c.eig[0] <= limit * limit && !slab) thin.push_back(c);
  }
  residual_clusters_.assign(thin.begin(), thin.end());
  accumulator_->vote(residual_clusters_, params_.voting);
  sum_votes();
  accumulator_->smooth();
  return thin.size();
}

// Candidates: the planes of the voting clusters' peaks from the octree's minimum of points on,
// no thicker than `limit`.
std::vector<Plane> PlaneDetector::residual_candidates(double limit) {
  const std::vector<std::uint32_t> peaks =
      accumulator_->peaks(params_.residual.votes * params_.min_votes);
  peak_cells_.assign(peaks.begin(), peaks.end());
  assign_clusters(accumulator_->kernels, accumulator_->kernel_count, accumulator_->layout(),
                  peak_cells_, cluster_peak_);
  DetectorParams loose = params_;
  loose.min_plane_points = static_cast<std::uint64_t>(std::max(3, params_.octree.min_points));
  std::vector<std::int32_t> cluster_plane;
  std::vector<Plane> found = fit_planes(residual_clusters_, peaks, loose, cluster_plane);
  std::size_t fine = 0;
  for (std::size_t q = 0; q < found.size(); ++q)
    if (found[q].rms <= limit) found[fine++] = found[q];
  found.resize(fine);
  return found;
}

// Labels the points on no plane by candidate (residual_labels_, CandidateLabels), each candidate
// with a band of residual.band times the larger of its rms and `least_rms`.
void PlaneDetector::label_candidates(const std::vector<Plane>& found, double least_rms,
                                     Visit visit) {
  std::vector<Plane> banded = found;
  for (Plane& w : banded) w.rms = std::max(w.rms, least_rms);
  const std::vector<double> bands = plane_bands(banded, params_.residual.band);
  plane_frames_.assign(bands.begin(), bands.end());
  const std::size_t e = eligible_points_.size();
  residual_labels_.resize(e);
  CandidateLabels f{
      raw(eligible_points_),    raw(plane_frames_),   static_cast<int>(found.size()),
      raw(eligible_labels_),    raw(first_bands_),    static_cast<int>(first_bands_.size() / 18),
      params_.residual.reclaim, raw(residual_labels_)};
  if (visit == Visit::near) {
    f.index = raw(near_index_);
    for_each_index(near_points_, f);
    return;
  }
  if (visit == Visit::all_marking_near) {
    near_.resize(e);
    f.near = raw(near_);
  }
  for_each_index(e, f);
  if (visit == Visit::all_marking_near) {
    near_index_.resize(e);
    near_points_ = e ? copy_flagged_indices(raw(near_), e, raw(near_index_)) : 0;
  }
}

// A candidate's inliers: the points on no plane within its band (residual.band times the larger
// of its rms and the noise: a small cluster's own spread underestimates the noise) and within
// its clusters' rectangle widened by residual.widen of its half-widths, then residual.passes - 1
// times within the rectangle of the points it took, widened again. The clusters alone hold too
// few: a face's nodes that also held its neighbours' strips or a corner of the next face failed
// in this octree too.
void PlaneDetector::grow_candidates(std::vector<Plane>& found, double noise) {
  for (int pass = 0; pass < params_.residual.passes; ++pass) {
    if (pass > 0) compute_extents(found, residual_labels_, eligible_points_);
    std::vector<Plane> widened = found;
    for (Plane& w : widened) {
      const double grow_u = 0.5 * params_.residual.widen * (w.u_max - w.u_min);
      const double grow_v = 0.5 * params_.residual.widen * (w.v_max - w.v_min);
      w.u_min -= grow_u, w.u_max += grow_u, w.v_min -= grow_v, w.v_max += grow_v;
    }
    label_candidates(widened, noise, pass == 0 ? Visit::all_marking_near : Visit::near);
  }
}

// Per candidate, the sums of its points (residual_labels_) over all ranks, on the device (one
// grouped pass over the points that went to a candidate): with `about` null their coordinates'
// (Moments::add),
// otherwise their distances' off about[candidate] (count, Moments::add_distance). With `shared`,
// only the candidates it marks are summed (the others left empty), over every point within their
// band and rectangle (plane_frames_) instead of their own, one reduction each; the marks must be
// the same on every rank.
std::vector<Moments> PlaneDetector::candidate_sums(std::size_t candidates,
                                                   const std::vector<Plane>* about,
                                                   const std::vector<char>* shared) {
  std::vector<Moments> sums(candidates);
  if (shared) {
    for (std::size_t q = 0; q < candidates; ++q) {
      if (!(*shared)[q]) continue;
      // Shared points may lie on any plane: all points, one reduction per marked candidate.
      CandidateMoments f{raw(octree_.sorted),
                         raw(residual_labels_),
                         static_cast<std::int32_t>(q),
                         about != nullptr,
                         {},
                         raw(plane_frames_)};
      if (about)
        for (int d = 0; d < 3; ++d) {
          f.plane[d] = (*about)[q].normal[d];
          f.plane[3 + d] = (*about)[q].centroid[d];
        }
      sums[q] = transform_reduce(octree_.sorted.size(), f, Moments{}, MergeMoments{});
    }
  } else if (candidates > 0) {
    // Own points: among the eligible points that went to a candidate, all candidates at once.
    std::vector<double> frames(6 * candidates);
    if (about)
      for (std::size_t q = 0; q < candidates; ++q)
        for (int d = 0; d < 3; ++d) {
          frames[6 * q + d] = (*about)[q].normal[d];
          frames[6 * q + 3 + d] = (*about)[q].centroid[d];
        }
    candidate_frames_.assign(frames.begin(), frames.end());
    const std::size_t listed = list_candidate_points();  // before f reads candidate_index_
    const ListedMoments f{
        CandidateMoments{raw(eligible_points_), raw(residual_labels_), 0, about != nullptr, {}},
        raw(candidate_index_), about ? raw(candidate_frames_) : nullptr};
    sums = grouped_sums(candidates, listed, f,
                        ListedCandidate{raw(residual_labels_), raw(candidate_index_)},
                        group_scratch_, group_moments_);
  }
  sum_over_ranks(comm_, sums);
  return sums;
}

// The eligible points that went to a candidate (candidate_index_, in order); returns their count.
std::size_t PlaneDetector::list_candidate_points() {
  const std::size_t e = residual_labels_.size();
  candidate_index_.resize(e);
  return e ? copy_indices_if(e, raw(candidate_index_), HasCandidate{raw(residual_labels_)}) : 0;
}

// Each candidate refitted to the points it took (its clusters' normal, from a few dozen points,
// may tilt by degrees), then its points taken once more about the refitted plane, within the
// refit's rectangle and a band of residual.band noise deviations.
void PlaneDetector::refit_candidates(std::vector<Plane>& found, double noise) {
  std::vector<Moments> sums = candidate_sums(found.size(), nullptr);
  for (std::size_t q = 0; q < found.size(); ++q) {
    if (sums[q].count < 3) continue;
    const std::uint64_t clusters = found[q].clusters;
    found[q] = fit(sums[q]);
    found[q].clusters = clusters;
    found[q].peak_cell = kNoPeak;
  }
  join_split_candidates(found, sums);
  std::vector<Plane> banded = found;
  for (Plane& w : banded) w.rms = noise;
  label_candidates(banded, 0);
}

// Candidates that are one face split in two (their clusters' normals a degree apart, so two
// peaks): the same plane within merge_angle and merge_distance either way, their rectangles
// touching. Each such pair becomes one candidate, the larger, refitted to both's points; apart,
// each might hold less than the minimum of points.
void PlaneDetector::join_split_candidates(std::vector<Plane>& found, std::vector<Moments>& sums) {
  const double cos_merge = std::cos(params_.merge_angle_deg * kPi / 180);
  const auto on_plane = [&](const Plane& a, const Plane& b) {
    return on_one_plane(a.normal.data(), a.centroid.data(), b.normal.data(), b.centroid.data(),
                        cos_merge, params_.merge_distance);
  };
  const auto reach = [](const Plane& p) {
    return 0.5 * std::hypot(p.u_max - p.u_min, p.v_max - p.v_min);
  };
  std::vector<bool> gone(found.size(), false);
  for (std::size_t q = 0; q < found.size(); ++q) {
    for (std::size_t r = q + 1; r < found.size() && !gone[q]; ++r) {
      if (gone[r] || sums[q].count < 3 || sums[r].count < 3) continue;
      double apart = 0;
      for (int d = 0; d < 3; ++d)
        apart += (found[q].centroid[d] - found[r].centroid[d]) *
                 (found[q].centroid[d] - found[r].centroid[d]);
      if (!on_plane(found[q], found[r]) || std::sqrt(apart) > reach(found[q]) + reach(found[r]))
        continue;
      sums[q].merge(sums[r]);
      const std::uint64_t clusters = found[q].clusters + found[r].clusters;
      found[q] = fit(sums[q]);
      found[q].clusters = clusters;
      found[q].peak_cell = kNoPeak;
      gone[r] = true;
    }
  }
  std::size_t kept = 0;
  for (std::size_t q = 0; q < found.size(); ++q)
    if (!gone[q]) sums[kept] = sums[q], found[kept++] = found[q];
  found.resize(kept), sums.resize(kept);
}

// The candidates that are planes, in `found` (their inliers set), and per candidate its number
// among them (-1: none). A plane holds at least min_plane_points, its points' distances off it
// are not a slab's by their kurtosis (OctreeParams::slab_kurtosis: strips of other surfaces
// crossing a tilted candidate's band, a floor and a wall at their corner, lie evenly across it, a
// surface's noise does not), and it is as densely sampled as the first round's planes within a
// factor (residual.density times their median density, inliers over rectangle: a candidate
// sparser than that is outliers in its band, a slab cut by the bounding box, spread wide).
// A face short of the minimum on its own points may count those it shares with the planes beside
// it (every point within its band and rectangle): the strips along its edges lie within the
// noise of both faces and went to the floor, the top or a side, so a face of just over the
// minimum cannot hold it alone. Its own points must then be the most of them, and the shared set
// no slab either, so that a candidate crossing another plane cannot live on that plane's points.
std::vector<std::int32_t> PlaneDetector::keep_candidate_planes(std::vector<Plane>& found,
                                                               const std::vector<Plane>& planes) {
  const auto min_points = static_cast<std::int64_t>(params_.min_plane_points);
  const std::vector<Moments> spread = candidate_sums(found.size(), &found);
  // Shared points are summed only where they could help: a candidate needs its own points to be
  // at least half of the shared ones, so one with fewer than half the minimum cannot pass.
  // Nor for one whose own points are a slab: it fails whatever they share.
  const auto slab = [&](const Moments& m) {
    return slab_spread(params_.octree.slab_kurtosis, m.count, m.d2, m.d4);
  };
  std::vector<char> short_of_minimum(found.size());
  bool any_short = false;
  for (std::size_t q = 0; q < found.size(); ++q) {
    const std::int64_t own = std::llround(spread[q].count);
    short_of_minimum[q] = own < min_points && 2 * own >= min_points && !slab(spread[q]);
    any_short = any_short || short_of_minimum[q];
  }
  const std::vector<Moments> shared = any_short
                                          ? candidate_sums(found.size(), &found, &short_of_minimum)
                                          : std::vector<Moments>(found.size());
  std::vector<char> enough(found.size());
  bool any = false;
  for (std::size_t q = 0; q < found.size(); ++q) {
    const std::int64_t own = std::llround(spread[q].count);
    const std::int64_t within = std::llround(shared[q].count);
    enough[q] =
        (own >= min_points || (within >= min_points && 2 * own >= within && !slab(shared[q]))) &&
        !slab(spread[q]);
    any = any || enough[q];
  }
  std::vector<std::int32_t> renumber(found.size(), -1);
  if (!any) {  // the rectangles (for the density) are not needed
    found.clear();
    return renumber;
  }
  compute_extents(found, residual_labels_, eligible_points_);
  const auto density = [](double points, const Plane& p) {
    const double area = (p.u_max - p.u_min) * (p.v_max - p.v_min);
    return area > 0 ? points / area : 0.0;
  };
  std::vector<double> densities;
  for (const Plane& p : planes) densities.push_back(density(static_cast<double>(p.inliers), p));
  std::sort(densities.begin(), densities.end());
  const double min_density =
      densities.empty() ? 0 : params_.residual.density * densities[densities.size() / 2];
  std::size_t kept = 0;
  for (std::size_t q = 0; q < found.size(); ++q) {
    const std::int64_t own = std::llround(spread[q].count);
    if (enough[q] && density(static_cast<double>(own), found[q]) >= min_density) {
      renumber[q] = static_cast<std::int32_t>(kept);
      found[q].inliers = static_cast<std::uint64_t>(own);
      found[kept++] = found[q];
    }
  }
  found.resize(kept);
  return renumber;
}

// A found plane on a first-round plane (within the merge angle, its centroid within the merge
// distance) adds its points to it; the others are appended. Its points' labels follow.
void PlaneDetector::adopt_candidate_planes(std::vector<Plane>& planes,
                                           const std::vector<Plane>& found,
                                           const std::vector<std::int32_t>& renumber,
                                           Detection& out) {
  const double cos_merge = std::cos(params_.merge_angle_deg * kPi / 180);
  std::vector<std::int32_t> target(found.size());
  const std::size_t first = planes.size();
  for (std::size_t q = 0; q < found.size(); ++q) {
    const Plane& f = found[q];
    int joined = -1;
    for (std::size_t p = 0; p < first && joined < 0; ++p) {
      const Plane& e = planes[p];
      double c = 0, distance = -e.offset;
      for (int d = 0; d < 3; ++d) {
        c += e.normal[d] * f.normal[d];
        distance += e.normal[d] * f.centroid[d];
      }
      if (std::fabs(c) >= cos_merge && std::fabs(distance) <= params_.merge_distance)
        joined = static_cast<int>(p);
    }
    if (joined >= 0) {
      planes[static_cast<std::size_t>(joined)].inliers += f.inliers;
      planes[static_cast<std::size_t>(joined)].clusters += f.clusters;
      ++out.residual_joined;
    } else {
      joined = static_cast<int>(planes.size());
      planes.push_back(f);
      ++out.residual_new;
    }
    target[q] = joined;
  }
  std::vector<std::uint32_t> candidate_plane(renumber.size(), 0xffffffffu);
  for (std::size_t q = 0; q < renumber.size(); ++q)
    if (renumber[q] >= 0)
      candidate_plane[q] =
          static_cast<std::uint32_t>(target[static_cast<std::size_t>(renumber[q])]);
  plane_map_.assign(candidate_plane.begin(), candidate_plane.end());
  if (params_.residual.reclaim) release_reclaimed(planes, first);
  for_each_index(residual_labels_.size(),
                 ResidualLabels{raw(residual_labels_), raw(eligible_index_), raw(plane_map_),
                                raw(sorted_labels_)});
}

// The points that the found planes (plane_map_: per candidate its plane, or none) reclaimed from
// the first `first` planes leave them: those planes' inliers less theirs, over all ranks.
void PlaneDetector::release_reclaimed(std::vector<Plane>& planes, std::size_t first) {
  const std::size_t listed = list_candidate_points();  // before candidate_index_ is read
  const std::vector<Tally> left =
      grouped_sums(first, listed,
                   ListedReclaimed{raw(eligible_labels_), raw(residual_labels_), raw(plane_map_),
                                   raw(candidate_index_)},
                   ReclaimedPlane{raw(eligible_labels_), raw(residual_labels_), raw(plane_map_),
                                  raw(candidate_index_)},
                   group_scratch_, group_tallies_);
  std::vector<std::int64_t> counts(first);
  for (std::size_t p = 0; p < first; ++p) counts[p] = left[p].n;
  global_sum(comm_, std::span<std::int64_t>(counts));
  for (std::size_t p = 0; p < first; ++p)
    planes[p].inliers -= static_cast<std::uint64_t>(counts[p]);
}

// The planes by inliers again, most first (ties: the earlier plane first), and the labels
// renumbered.
void PlaneDetector::sort_by_inliers(std::vector<Plane>& planes) {
  std::vector<std::uint32_t> order(planes.size()), map(planes.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return planes[a].inliers > planes[b].inliers;
  });
  std::vector<Plane> sorted(planes.size());
  for (std::size_t k = 0; k < order.size(); ++k) {
    sorted[k] = planes[order[k]];
    map[order[k]] = static_cast<std::uint32_t>(k);
  }
  planes = std::move(sorted);
  plane_map_.assign(map.begin(), map.end());
  for_each_index(sorted_labels_.size(), Relabel{raw(plane_map_), raw(sorted_labels_)});
}

// The oriented rectangles (in centred coordinates): each plane's smallest and largest
// projections of its points (those `labels` give it) on its in-plane axes, over all ranks.
void PlaneDetector::compute_extents(std::vector<Plane>& planes,
                                    const DeviceVector<std::int32_t>& labels,
                                    const DeviceVector<Vec4>& points) {
  std::vector<double> frames(9 * planes.size());
  for (std::size_t p = 0; p < planes.size(); ++p)
    for (int d = 0; d < 3; ++d) {
      frames[9 * p + d] = planes[p].centroid[d];
      frames[9 * p + 3 + d] = planes[p].axis_u[d];
      frames[9 * p + 6 + d] = planes[p].axis_v[d];
    }
  plane_frames_.assign(frames.begin(), frames.end());
  std::vector<double> most(4 * planes.size(), -1e300);  // minima as negated maxima
#if defined(__CUDACC__)
  if (!sorted_extents_ && planes.size() <= static_cast<std::size_t>(kExtentPlanesMax))
    extents_by_atomics(planes.size(), labels, points, most);
  else
#endif
    extents_by_sort(planes.size(), labels, points, most);
  global_max(comm_, std::span<double>(most));
  for (std::size_t p = 0; p < planes.size(); ++p) {
    Plane& plane = planes[p];
    plane.u_min = -most[4 * p], plane.u_max = most[4 * p + 1];
    plane.v_min = -most[4 * p + 2], plane.v_max = most[4 * p + 3];
  }
}

#if defined(__CUDACC__)
void PlaneDetector::extents_by_atomics(std::size_t planes, const DeviceVector<std::int32_t>& labels,
                                       const DeviceVector<Vec4>& points,
                                       std::vector<double>& most) {
  std::vector<int> init(4 * planes);
  for (std::size_t k = 0; k < init.size(); ++k)
    init[k] = k % 2 == 0 ? std::numeric_limits<int>::max() : std::numeric_limits<int>::min();
  extent_keys_.assign(init.begin(), init.end());
  const std::size_t n = labels.size();
  if (n > 0 && planes > 0) {
    int sms = 0, device = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    const std::size_t wanted = (n + 16 * kBlockThreads - 1) / (16 * kBlockThreads);
    const auto blocks = static_cast<unsigned>(std::max<std::size_t>(
        1, std::min<std::size_t>(wanted, static_cast<std::size_t>(std::max(1, sms)) * 8)));
    plane_extent_kernel<<<blocks, kBlockThreads, 4 * planes * sizeof(int)>>>(
        n, raw(points), raw(labels), raw(plane_frames_), static_cast<int>(planes),
        raw(extent_keys_));
    check_launch("plane_extent_kernel");
  }
  apron::copy(extent_keys_.begin(), extent_keys_.end(), init.begin());
  for (std::size_t k = 0; k < init.size(); ++k) {
    const bool none =
        init[k] == (k % 2 == 0 ? std::numeric_limits<int>::max() : std::numeric_limits<int>::min());
    if (none) continue;
    const double value = unordered_float(init[k]);
    most[k] = k % 2 == 0 ? -value : value;
  }
}
#endif

// The portable path: the points sorted by label (one radix pass for up to 255 planes), each
// plane's run reduced to the minimum and maximum projections.
void PlaneDetector::extents_by_sort(std::size_t planes, const DeviceVector<std::int32_t>& labels,
                                    const DeviceVector<Vec4>& points, std::vector<double>& most) {
  const std::size_t n = labels.size();
  label_keys_.resize(n);
  label_index_.resize(n);
  for_each_index(n, LabelKeys{raw(labels), raw(label_keys_), raw(label_index_)});
  sort_pairs(label_keys_, label_index_, n, key_bits(planes + 1));
  u_.resize(n);
  v_.resize(n);
  for_each_index(n, PointProjections{raw(points), raw(label_keys_), raw(label_index_),
                                     raw(plane_frames_), raw(u_), raw(v_)});
  const std::size_t runs =
      n ? run_length_encode(label_keys_, n, run_label_, run_count_, run_start_) : 0;
  run_start_.resize(runs + 1);
  if (runs > 0) write_element(run_start_, runs, static_cast<std::uint32_t>(n));
  std::vector<std::uint32_t> run_label(runs);
  apron::copy(run_label_.begin(), run_label_.begin() + runs, run_label.begin());
  for (int k = 0; k < 4; ++k) {
    segmented_reduce(k < 2 ? u_ : v_, run_start_, runs,
                     k % 2 == 0 ? Reduction::min : Reduction::max, run_extent_);
    std::vector<float> extent(runs);
    apron::copy(run_extent_.begin(), run_extent_.begin() + runs, extent.begin());
    for (std::size_t r = 0; r < runs; ++r) {
      if (run_label[r] == 0) continue;
      const double value = k % 2 == 0 ? -extent[r] : extent[r];
      double& at = most[4 * (run_label[r] - 1) + k];
      at = std::max(at, value);
    }
  }
}

void PlaneDetector::to_cloud_coordinates(std::vector<Plane>& planes,
                                         const std::array<double, 3>& centre) {
  for (Plane& plane : planes) {
    double offset = 0;
    for (int d = 0; d < 3; ++d) {
      plane.centroid[d] += centre[d];
      offset += plane.normal[d] * plane.centroid[d];
    }
    plane.offset = offset;
  }
}

std::uint64_t PlaneDetector::grow_inliers(const std::vector<Plane>& planes) {
  const std::vector<double> host = plane_bands(planes, params_.grow_band);
  plane_frames_.assign(host.begin(), host.end());
  grown_.resize(points_.size());
  for_each_index(points_.size(),
                 GrowLabels{raw(points_), raw(plane_frames_), static_cast<int>(planes.size()),
                            raw(labels_), raw(grown_)});
  const std::int64_t local = static_cast<std::int64_t>(reduce_sum(grown_, grown_.size()));
  return static_cast<std::uint64_t>(global_sum(comm_, local));
}

}  // namespace apron::planes
