#include "kernels/planes/octree.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "kernels/common/count_scan.hpp"
#include "kernels/common/primitives.hpp"
#include "kernels/planes/profile_clock.hpp"

namespace apron::planes {
namespace {

constexpr int kFit = 7;  // normal, mean, band

// The octree build's profile (ProfileClock): one line per level.
ProfileClock& step_clock() {
  static ProfileClock clock;
  return clock;
}
void print_profile(ProfileClock& clock, const char* what, std::size_t points, std::size_t nodes) {
  if (!clock.on()) return;
  std::fprintf(stderr, "octree-profile pid %d %s points %zu nodes %zu ms:%s\n",
               static_cast<int>(getpid()), what, points, nodes, clock.take().c_str());
}

// The keys and indices of the points from `first` on (the arrays' pointers are at `first`): the
// keys in 32 bits where they fit (narrow set), else in 64.
struct MortonKeys {
  const Vec4* points;
  OctreeFrame frame;
  int depth;
  std::uint32_t* narrow;
  std::uint64_t* wide;
  std::uint32_t* index;
  std::size_t first = 0;
  APRON_HD void operator()(std::size_t i) const {
    const Vec4 p = points[i];
    const std::uint64_t key = morton_code(p.x, p.y, p.z, frame.origin, frame.size, depth);
    if (narrow)
      narrow[i] = static_cast<std::uint32_t>(key);
    else
      wide[i] = key;
    index[i] = static_cast<std::uint32_t>(first + i);
  }
};

bool same_frame(const OctreeFrame& a, const OctreeFrame& b) {
  return a.origin[0] == b.origin[0] && a.origin[1] == b.origin[1] && a.origin[2] == b.origin[2] &&
         a.size == b.size;
}

struct GatherSorted {
  const Vec4* points;
  const std::uint32_t* order;
  Vec4* sorted;
  std::uint32_t* active;
  std::int32_t* sorted_cluster;
  APRON_HD void operator()(std::size_t i) const {
    sorted[i] = points[order[i]];
    active[i] = static_cast<std::uint32_t>(i);
    sorted_cluster[i] = -1;
  }
};

// The level's counts on the device: its active points (the last compaction's total) and nodes.
// The host reads both with one wait at the start of the level.
constexpr int kLevelPoints = 0, kLevelNodes = 1;

// 1 where an active point starts a new node (its prefix differs from the previous one's), 0 from
// the level's point count on (read on the device: the scan runs over a bound, the last level's).
struct NodeHeads {
  KeyView keys;
  const std::uint32_t* active;
  const std::uint32_t* counts;
  int shift;
  APRON_HD std::uint32_t operator()(std::size_t i) const {
    if (i >= counts[kLevelPoints]) return 0;
    return i == 0 || (keys[active[i]] >> shift) != (keys[active[i - 1]] >> shift);
  }
};

// Each node's first position from the inclusive scan of NodeHeads (segment: its node + 1), then
// m (one past the last) and the node count: no select, whose count the host would wait for.
struct NodeStarts {
  const std::uint32_t* segment;
  std::uint32_t* starts;
  std::uint32_t* counts;
  APRON_HD void operator()(std::size_t i) const {
    const std::uint32_t m = counts[kLevelPoints];
    if (i >= m) {
      if (i == 0) counts[kLevelNodes] = 0, starts[0] = 0;
      return;
    }
    const std::uint32_t s = segment[i];
    if (i == 0 || segment[i - 1] != s) starts[s - 1] = static_cast<std::uint32_t>(i);
    if (i + 1 == m) counts[kLevelNodes] = s, starts[s] = m;
  }
};

// The fit a trimming pass selects its points with (7 per node: normal, mean relative to the
// node's first point, band): the plane of the node's current sums; the node's edge /
// trim_divisor at first, then at most three standard deviations of the inliers off the plane
// (sigma clipping: a strip of another surface within the first band, the side of a box standing
// on a floor, say, leaves in a pass or two). Too few points to fit: a plane no point is near.
APRON_HD inline void fit_node(const Moments& m, double first_band, bool clip, double* f) {
  if (m.count < 3) {
    for (int k = 0; k < kFit; ++k) f[k] = k == 0 ? 1.0 : (k < 3 ? 0.0 : 1e300);
    f[6] = 0;
    return;
  }
  double mean[3];
  const Eigen3 e = eigen_symmetric(m.covariance(mean));
  for (int d = 0; d < 3; ++d) f[d] = e.vec[d][0], f[3 + d] = mean[d];
  const double spread = 3 * std::sqrt(e.value[0] > 0 ? e.value[0] : 0);
  f[6] = clip && spread < first_band ? spread : first_band;
}

// p - r in double: a point relative to its node's (or octant's) first point, the reference the
// sums are taken about.
APRON_HD inline void relative_to(const Vec4& p, const Vec4& r, double d[3]) {
  d[0] = static_cast<double>(p.x) - r.x;
  d[1] = static_cast<double>(p.y) - r.y;
  d[2] = static_cast<double>(p.z) - r.z;
}

// The segment of tile t (< tile_first[segments]): the last s with tile_first[s] <= t.
APRON_HD inline std::uint32_t search_segment(const std::uint32_t* tile_first,
                                             std::uint32_t segments, std::uint32_t t) {
  std::uint32_t lo = 0, hi = segments;
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (tile_first[mid] <= t)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Each planned tile's segment, found once per plan: every pass over the tiles then reads it with
// one load instead of a search of log2(segments) dependent loads (the start of each lane's chain).
struct TileSegments {
  const std::uint32_t* tile_first;
  std::uint32_t segments;
  std::uint32_t* segment;
  APRON_HD void operator()(std::size_t t) const {
    if (t < tile_first[segments])
      segment[t] = search_segment(tile_first, segments, static_cast<std::uint32_t>(t));
  }
};

// A planned pass's tiles: tile t of segment s covers the segment's active points [begin, end).
struct TileSpan {
  const std::uint32_t* starts;        // segments + 1
  const std::uint32_t* tile_first;    // segments + 1
  const std::uint32_t* tile_segment;  // per tile (TileSegments)
  std::uint32_t segments, tile_points;
  APRON_HD std::uint32_t count() const { return tile_first[segments]; }
  // The segment of tile t (< count()).
  APRON_HD std::uint32_t segment_of(std::uint32_t t) const { return tile_segment[t]; }
  APRON_HD void range(std::uint32_t t, std::uint32_t s, std::uint32_t& begin,
                      std::uint32_t& end) const {
    begin = static_cast<std::uint32_t>(starts[s] + std::uint64_t{t - tile_first[s]} * tile_points);
    end = starts[s + 1] - begin > tile_points ? begin + tile_points : starts[s + 1];
  }
};

// Stage 1 of NodeMoments::reduce: the sums of one tile's points (lane, lane + lanes, ...).
// Batched (the plan's long tiles): each lane loads a batch of its points (index, then point)
// before adding any, so that the batch's loads are in flight together, then adds them in its
// order: the same sums as one point after another. Where tiles are short (a small level's), a
// lane holds a few points, and the batch's registers cost more warps than its loads save.
constexpr std::uint32_t kTileBatch = 8;  // points a lane loads before adding them (Batched)

template <bool Batched>
struct TileMoments {
  using Sum = Moments;
  const Vec4* sorted;
  const std::uint32_t* active;
  TileSpan span;
  const double* fit;     // null: every point counts
  std::uint8_t* inlier;  // with fit: 1 where a point is within its node's band
  APRON_HD void accumulate(std::uint32_t t, std::uint32_t lane, std::uint32_t lanes,
                           Moments& m) const {
    const std::uint32_t s = span.segment_of(t);
    std::uint32_t begin, end;
    span.range(t, s, begin, end);
    const Vec4 r = sorted[active[span.starts[s]]];
    const double* f = fit != nullptr ? fit + kFit * s : nullptr;
    if constexpr (Batched) {
      for (std::uint32_t first = begin + lane; first < end; first += kTileBatch * lanes) {
        Vec4 p[kTileBatch];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (std::uint32_t k = 0; k < kTileBatch; ++k) {
          const std::uint32_t i = first + k * lanes;
          if (i < end) p[k] = load(sorted + load(active + i));
        }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (std::uint32_t k = 0; k < kTileBatch; ++k) {
          const std::uint32_t i = first + k * lanes;
          if (i < end) add_point(p[k], r, f, i, m);
        }
      }
    } else {
#if defined(__CUDA_ARCH__)
#pragma unroll 4  // several points' loads in flight per lane
#endif
      for (std::uint32_t i = begin + lane; i < end; i += lanes)
        add_point(load(sorted + load(active + i)), r, f, i, m);
    }
  }
  APRON_HD void add_point(const Vec4& p, const Vec4& r, const double* f, std::uint32_t i,
                          Moments& m) const {
    double d[3];
    relative_to(p, r, d);
    if (f != nullptr) {
      const double along = f[0] * (d[0] - f[3]) + f[1] * (d[1] - f[4]) + f[2] * (d[2] - f[5]);
      const bool in = along <= f[6] && along >= -f[6];
      inlier[i] = in ? 1 : 0;
      if (!in) return;
      m.add_distance(along);
    }
    m.add(d[0], d[1], d[2]);
  }
};

// Stage 2: a node's tiles' partials, in order, then (on request) the next pass's fit.
struct NodeTotals {
  using Sum = Moments;
  const Moments* partial;
  const std::uint32_t* tile_first;
  Moments* sums;
  NodeMoments::NextFit next;
  APRON_HD std::uint32_t tiles(std::uint32_t s) const { return tile_first[s + 1] - tile_first[s]; }
  APRON_HD void accumulate(std::uint32_t s, std::uint32_t lane, std::uint32_t lanes,
                           Moments& m) const {
    for (std::uint32_t t = tile_first[s] + lane; t < tile_first[s + 1]; t += lanes)
      m.merge(partial[t]);
  }
  APRON_HD void finish(std::uint32_t s, const Moments& m) const {
    sums[s] = m;
    if (next.fit != nullptr) fit_node(m, next.first_band, next.clip, next.fit + kFit * s);
  }
};

// The bounds of each node's octants among the active points (the runs of the next level's
// prefix within the node's run; an empty octant holds none): 8 per node, then the total.
struct OctantStarts {
  KeyView keys;
  const std::uint32_t* active;
  const std::uint32_t* starts;
  std::uint32_t nodes;
  int shift;  // the octants' level's
  std::uint32_t* octant_starts;
  APRON_HD void operator()(std::size_t q) const {
    const std::size_t s = q / 8;
    if (s >= nodes) {
      octant_starts[q] = starts[nodes];
      return;
    }
    const std::uint64_t octant = q % 8;
    std::uint32_t lo = starts[s], hi = starts[s + 1];
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo) / 2;
      if (((keys[active[mid]] >> shift) & 7u) < octant)
        lo = mid + 1;
      else
        hi = mid;
    }
    octant_starts[q] = lo;
  }
};

// Whether node s takes octant seeds: seed_plane's conditions, at the noise of the clusters so
// far (on the device: no wait for the host).
struct SeedsNode {
  const std::uint32_t* starts;
  const double* noise;
  OctreeParams params;
  double band;  // the level's first band
  APRON_HD bool operator()(std::uint32_t s) const {
    return seeds_octants(params, band, noise[0], noise[2]) &&
           starts[s + 1] - starts[s] >= static_cast<std::uint32_t>(params.min_points);
  }
};

constexpr int kPlane = 6;  // a seed candidate: normal, mean relative to the node's first point

// Stage 2 of a seeded level's pass over its octants: each octant's sums (relative to its own
// first point) and, where its node takes seeds, its plane as the node's candidate 1 + octant.
struct OctantTotals {
  using Sum = Moments;
  NodeTotals octant_sums;  // over the octant plan: each octant's sums, no fit
  const Vec4* sorted;
  const std::uint32_t* active;
  const std::uint32_t* octant_starts;
  SeedsNode seeds;
  double* candidates;  // kSeedCandidates planes per node
  APRON_HD std::uint32_t tiles(std::uint32_t q) const { return octant_sums.tiles(q); }
  APRON_HD void accumulate(std::uint32_t q, std::uint32_t lane, std::uint32_t lanes,
                           Moments& m) const {
    octant_sums.accumulate(q, lane, lanes, m);
  }
  APRON_HD void finish(std::uint32_t q, const Moments& m) const {
    octant_sums.finish(q, m);
    const std::uint32_t s = q / 8;
    double* plane = candidates + kPlane * (kSeedCandidates * std::size_t{s} + 1 + q % 8);
    if (!seeds(s) || !octant_plane(m, plane, plane + 3)) return;
    // The octant's mean relative to its node's first point.
    double delta[3];
    relative_to(sorted[active[octant_starts[q]]], sorted[active[seeds.starts[s]]], delta);
    for (int d = 0; d < 3; ++d) plane[3 + d] += delta[d];
  }
};

// A seeded level's node sums from its octants' sums (each octant's shifted to the node's
// reference point), the node's first fit as its candidate 0, and which candidates are planes
// (bit k: candidate k; octants of too few points and nodes that take no seeds have none).
struct NodeFromOctants {
  const Vec4* sorted;
  const std::uint32_t* active;
  const std::uint32_t* octant_starts;
  const Moments* octant_sums;
  SeedsNode seeds;
  Moments* sums;
  double* fit;
  double* candidates;
  std::uint32_t* candidate_mask;
  APRON_HD void operator()(std::size_t s) const {
    const Vec4 r = sorted[active[seeds.starts[s]]];
    const bool seeded = seeds(static_cast<std::uint32_t>(s));
    std::uint32_t mask = 1;
    Moments total;
    for (std::size_t o = 0; o < 8; ++o) {
      const std::size_t q = 8 * s + o;
      if (octant_starts[q + 1] == octant_starts[q]) continue;
      double delta[3];
      relative_to(sorted[active[octant_starts[q]]], r, delta);
      total.merge(octant_sums[q].shifted(delta));
      if (seeded && octant_sums[q].count >= kSeedPoints) mask |= 2u << o;
    }
    sums[s] = total;
    double* f = fit + kFit * s;
    fit_node(total, seeds.band, false, f);
    if (!seeded) return;
    candidate_mask[s] = mask;
    for (int k = 0; k < kPlane; ++k) candidates[kSeedCandidates * kPlane * s + k] = f[k];
  }
};

// Per tile of a seeded level's nodes: how many of its points lie within the band of each of its
// node's seed candidates.
struct TileSeedCounts {
  using Sum = SeedCounts;
  const Vec4* sorted;
  const std::uint32_t* active;
  TileSpan span;
  SeedsNode seeds;
  const double* candidates;
  const std::uint32_t* candidate_mask;
  APRON_HD void accumulate(std::uint32_t t, std::uint32_t lane, std::uint32_t lanes,
                           SeedCounts& c) const {
    const std::uint32_t s = span.segment_of(t);
    if (!seeds(s)) return;
    std::uint32_t begin, end;
    span.range(t, s, begin, end);
    const Vec4 r = sorted[active[span.starts[s]]];
    const double* planes = candidates + kSeedCandidates * kPlane * std::size_t{s};
    const std::uint32_t mask = candidate_mask[s];
    for (std::uint32_t i = begin + lane; i < end; i += lanes) {
      double d[3];
      relative_to(load(sorted + load(active + i)), r, d);
      for (int k = 0; k < kSeedCandidates; ++k) {
        if (((mask >> k) & 1u) == 0) continue;
        const double* plane = planes + kPlane * k;
        c.in[k] += within_band(plane, plane + 3, d, seeds.band) ? 1u : 0u;
      }
    }
  }
};

// A seeded node's counts over its tiles; its first fit becomes the candidate holding the most
// (the node's own plane unless another holds more: seed_plane's choice).
struct SeedTotals {
  using Sum = SeedCounts;
  const SeedCounts* partial;
  const std::uint32_t* tile_first;
  SeedsNode seeds;
  const double* candidates;
  double* fit;
  APRON_HD std::uint32_t tiles(std::uint32_t s) const { return tile_first[s + 1] - tile_first[s]; }
  APRON_HD void accumulate(std::uint32_t s, std::uint32_t lane, std::uint32_t lanes,
                           SeedCounts& c) const {
    if (!seeds(s)) return;
    for (std::uint32_t t = tile_first[s] + lane; t < tile_first[s + 1]; t += lanes)
      c.merge(partial[t]);
  }
  APRON_HD void finish(std::uint32_t s, const SeedCounts& c) const {
    if (!seeds(s)) return;
    int best = 0;
    for (int k = 1; k < kSeedCandidates; ++k)
      if (c.in[k] > c.in[best]) best = k;
    if (best == 0) return;
    const double* plane = candidates + kPlane * (kSeedCandidates * std::size_t{s} + best);
    for (int k = 0; k < kPlane; ++k) fit[kFit * std::size_t{s} + k] = plane[k];
  }
};

// The portable forms: one index per tile (segment), its points in order; on the GPU, the totals
// of a level with many nodes (NodeMoments' warp_node_limit).
#if !defined(__CUDACC__)
template <class Tiles>
struct TilesSerial {
  Tiles tiles;
  typename Tiles::Sum* partial;
  APRON_HD void operator()(std::size_t t) const {
    if (t >= tiles.span.count()) return;
    typename Tiles::Sum m;
    tiles.accumulate(static_cast<std::uint32_t>(t), 0, 1, m);
    partial[t] = m;
  }
};
#endif

template <class Totals>
struct TotalsSerial {
  Totals totals;
  APRON_HD void operator()(std::size_t s) const {
    typename Totals::Sum m;
    totals.accumulate(static_cast<std::uint32_t>(s), 0, 1, m);
    totals.finish(static_cast<std::uint32_t>(s), m);
  }
};

// Node s's tiles, 0 past the last node: their exclusive scan ends with the total.
struct TileCounts {
  const std::uint32_t* starts;
  std::uint32_t nodes, tile_points;
  APRON_HD std::uint32_t operator()(std::size_t s) const {
    const std::uint64_t points = s < nodes ? starts[s + 1] - starts[s] : 0;
    return static_cast<std::uint32_t>((points + tile_points - 1) / tile_points);
  }
};

#if defined(__CUDACC__)
constexpr int kWarp = 32;

// The sums of each aligned group of Lanes lanes, left in every lane of the group (a butterfly).
template <int Lanes>
__device__ inline void group_sum(Moments& m) {
  for (int offset = Lanes / 2; offset > 0; offset /= 2) {
    m.count += __shfl_xor_sync(0xffffffffu, m.count, offset);
    for (int d = 0; d < 3; ++d) m.s[d] += __shfl_xor_sync(0xffffffffu, m.s[d], offset);
    for (int k = 0; k < 6; ++k) m.ss[k] += __shfl_xor_sync(0xffffffffu, m.ss[k], offset);
    m.d2 += __shfl_xor_sync(0xffffffffu, m.d2, offset);
    m.d4 += __shfl_xor_sync(0xffffffffu, m.d4, offset);
  }
}

template <int Lanes>
__device__ inline void group_sum(SeedCounts& c) {
  for (int offset = Lanes / 2; offset > 0; offset /= 2)
    for (int k = 0; k < kSeedCandidates; ++k)
      c.in[k] += __shfl_xor_sync(0xffffffffu, c.in[k], offset);
}

// Lanes lanes per tile (Lanes divides the warp); the grid covers a bound on the tile count (the
// count itself stays on the device: no wait for the host). A warp whose first tile is past the
// end leaves whole; in the last warp the groups past the end still take part in the butterfly.
template <int Lanes, class Tiles>
__global__ void __launch_bounds__(kBlockThreads)
    tile_kernel(std::size_t bound, Tiles tiles, typename Tiles::Sum* partial) {
  const std::size_t thread = blockIdx.x * std::size_t{kBlockThreads} + threadIdx.x;
  const std::size_t tile = thread / Lanes;
  const std::size_t count = std::min<std::size_t>(bound, tiles.span.count());
  if (thread / kWarp * (kWarp / Lanes) >= count) return;
  const auto lane = static_cast<std::uint32_t>(threadIdx.x % Lanes);
  typename Tiles::Sum m;
  if (tile < count) tiles.accumulate(static_cast<std::uint32_t>(tile), lane, Lanes, m);
  group_sum<Lanes>(m);
  if (lane == 0 && tile < count) partial[tile] = m;
}

template <class Totals>
__global__ void __launch_bounds__(kBlockThreads) totals_kernel(std::size_t nodes, Totals totals) {
  const std::size_t warp = (blockIdx.x * std::size_t{kBlockThreads} + threadIdx.x) / kWarp;
  const auto lane = static_cast<std::uint32_t>(threadIdx.x % kWarp);
  if (warp >= nodes) return;
  typename Totals::Sum m;
  totals.accumulate(static_cast<std::uint32_t>(warp), lane, kWarp, m);
  group_sum<kWarp>(m);
  if (lane == 0) totals.finish(static_cast<std::uint32_t>(warp), m);
}

// kGroupLanes lanes per node, so that the lanes that compute the nodes' fits (finish) share
// warps. A node of at most kGroupLanes tiles holds one tile per lane of its group, as it would of
// a warp (whose other lanes add zeros, which change no bits), so its butterfly over the group
// adds in totals_kernel's order; the warp's nodes of more tiles are summed by the whole warp,
// one after another, as totals_kernel does.
template <class Totals>
__global__ void __launch_bounds__(kBlockThreads)
    grouped_totals_kernel(std::size_t nodes, Totals totals) {
  constexpr std::uint32_t kGroup = NodeMoments::kGroupLanes;
  const std::size_t thread = blockIdx.x * std::size_t{kBlockThreads} + threadIdx.x;
  const std::size_t first = thread / kWarp * (kWarp / kGroup);
  if (first >= nodes) return;  // the whole warp: the shuffles below need all its lanes
  const auto lane = static_cast<std::uint32_t>(threadIdx.x % kWarp);
  const std::uint32_t sub = lane % kGroup;
  const auto node = static_cast<std::uint32_t>(thread / kGroup);
  const bool here = node < nodes;
  const bool few = here && totals.tiles(node) <= kGroup;
  typename Totals::Sum m;
  if (few) totals.accumulate(node, sub, kGroup, m);
  group_sum<kGroup>(m);
  unsigned many = __ballot_sync(0xffffffffu, here && !few && sub == 0);
  while (many != 0) {
    const unsigned leader = static_cast<unsigned>(__ffs(static_cast<int>(many)) - 1);
    many &= many - 1;
    const auto big = static_cast<std::uint32_t>(first + leader / kGroup);
    typename Totals::Sum b;
    totals.accumulate(big, lane, kWarp, b);
    group_sum<kWarp>(b);
    if (lane / kGroup == leader / kGroup) m = b;
  }
  if (here && sub == 0) totals.finish(node, m);
}

template <int Lanes, class Tiles>
void launch_tile_kernel(std::size_t bound, const Tiles& tiles, typename Tiles::Sum* partial) {
  const std::size_t blocks = (bound * Lanes + kBlockThreads - 1) / kBlockThreads;
  tile_kernel<Lanes><<<static_cast<unsigned>(blocks), kBlockThreads>>>(bound, tiles, partial);
  check_launch("tile_kernel");
}

unsigned warp_blocks(std::size_t warps) {
  constexpr std::size_t kWarpsPerBlock = kBlockThreads / kWarp;
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}
#endif

// Stage 1 over a plan's tiles (bound: at least their count), lanes per tile on the GPU.
template <class Tiles>
void run_tiles([[maybe_unused]] std::uint32_t lanes, std::size_t bound, const Tiles& tiles,
               typename Tiles::Sum* partial) {
#if defined(__CUDACC__)
  switch (lanes) {
    case 4:
      launch_tile_kernel<4>(bound, tiles, partial);
      break;
    case 8:
      launch_tile_kernel<8>(bound, tiles, partial);
      break;
    case 16:
      launch_tile_kernel<16>(bound, tiles, partial);
      break;
    default:
      launch_tile_kernel<32>(bound, tiles, partial);
      break;
  }
#else
  for_each_index(bound, TilesSerial<Tiles>{tiles, partial});
#endif
}

// Stage 1 of the moments of the plan's tiles over `span` (each lane's loads batched where the
// tiles are long: NodeMoments::batched_loads), into the plan's partials.
void run_tile_moments(NodeMoments& plan, const TileSpan& span, const Vec4* sorted,
                      const std::uint32_t* active, const double* fit, std::uint8_t* inlier) {
  Moments* partial = raw(plan.partial());
  if (plan.batched_loads())
    run_tiles(plan.lanes(), plan.tile_bound(), TileMoments<true>{sorted, active, span, fit, inlier},
              partial);
  else
    run_tiles(plan.lanes(), plan.tile_bound(),
              TileMoments<false>{sorted, active, span, fit, inlier}, partial);
}

// Stage 2 for `nodes` nodes: below warp_node_limit on the GPU a warp per node, or per
// 32 / kGroupLanes nodes where grouped (NodeMoments::GroupedTotals); else a thread per node.
template <class Totals>
void run_totals(std::size_t nodes, [[maybe_unused]] std::size_t warp_node_limit,
                [[maybe_unused]] bool grouped, const Totals& totals) {
#if defined(__CUDACC__)
  if (nodes < warp_node_limit && grouped) {
    constexpr std::size_t kNodesPerWarp = kWarp / NodeMoments::kGroupLanes;
    grouped_totals_kernel<<<warp_blocks((nodes + kNodesPerWarp - 1) / kNodesPerWarp),
                            kBlockThreads>>>(nodes, totals);
    check_launch("grouped_totals_kernel");
    return;
  }
  if (nodes < warp_node_limit) {
    totals_kernel<<<warp_blocks(nodes), kBlockThreads>>>(nodes, totals);
    check_launch("totals_kernel");
    return;
  }
#endif
  for_each_index(nodes, TotalsSerial<Totals>{totals});
}

// The terms of the noise and sampling estimates (sibling_halves) of a cluster: count *
// lambda_min, count * points per area (the area of a uniform rectangle: 12 sqrt(lambda_mid
// lambda_max)), count.
constexpr int kNoiseTerms = 3;
APRON_HD inline void noise_terms(double count, const Eigen3& e, double t[kNoiseTerms]) {
  const double area = 12 * std::sqrt(e.value[1] * e.value[2]);
  t[0] = count * (e.value[0] > 0 ? e.value[0] : 0);
  t[1] = area > 0 ? count * count / area : 0;
  t[2] = count;
}

struct ClassifyNodes {
  const Vec4* sorted;
  KeyView keys;
  const std::uint32_t* active;
  const std::uint32_t* starts;  // segments + 1 entries
  const Moments* sums;          // of the node's inliers
  OctreeParams params;
  int level, shift;
  std::size_t nodes;
  std::uint8_t* state;
  std::uint32_t* is_cluster;
  std::uint32_t* group;  // the node whose cluster a cluster node's inliers join: itself
  Cluster* level_clusters;
  // Null, or the noise estimate's terms (kNoiseTerms * nodes: every node's first term, then
  // every node's second, ...; zeros but for clusters) and their segments' bounds.
  double* noise;
  std::uint32_t* noise_bounds;
  APRON_HD void operator()(std::size_t s) const {
    group[s] = static_cast<std::uint32_t>(s);
    const Moments m = sums[s];
    const double count = static_cast<double>(starts[s + 1] - starts[s]);
    Eigen3 e{};
    double mean[3];
    if (m.count >= 3) e = eigen_symmetric(m.covariance(mean));
    const NodeState st = classify_node(params, level, count, m.count, e, &m);
    state[s] = st;
    is_cluster[s] = st == kCluster;
    if (noise != nullptr) {
      double t[kNoiseTerms] = {0, 0, 0};
      if (st == kCluster) noise_terms(m.count, e, t);
      for (int k = 0; k < kNoiseTerms; ++k) noise[k * nodes + s] = t[k];
      if (s == 0)
        for (int k = 0; k <= kNoiseTerms; ++k)
          noise_bounds[k] = static_cast<std::uint32_t>(k * nodes);
    }
    if (st != kCluster) return;
    const std::uint32_t first = active[starts[s]];
    const Vec4 r = sorted[first];
    const double ref[3] = {r.x, r.y, r.z};
    // The node's points lie in its run of the Morton order (among points of earlier
    // clusters whose trimmed points stayed active): [first, last].
    const std::uint32_t last = active[starts[s + 1] - 1];
    level_clusters[s] =
        make_cluster(m, ref, e, keys[first] >> shift, level, first, last - first + 1);
  }
};

// The level's nodes grouped by parent (runs of equal prefix one level up, the nodes in Morton
// order): f(s) is 1 where node s starts a parent's run, 0 past the last node, so that an
// exclusive scan numbers the parents and ends with their count.
struct ParentHeads {
  KeyView keys;
  const std::uint32_t* active;
  const std::uint32_t* starts;
  std::size_t nodes;
  int shift;
  APRON_HD std::uint64_t parent(std::size_t s) const {
    return keys[active[starts[s]]] >> (shift + 3);
  }
  APRON_HD std::uint32_t operator()(std::size_t s) const {
    return s < nodes && (s == 0 || parent(s - 1) != parent(s)) ? 1u : 0u;
  }
};

// Each parent's first child (by the scan of ParentHeads), then the node count: parent p's
// children are the nodes [first_child[p], first_child[p + 1]).
struct ParentFirstChildren {
  ParentHeads heads;
  const std::uint32_t* rank;
  std::uint32_t* first_child;
  APRON_HD void operator()(std::size_t s) const {
    if (s == heads.nodes || heads(s) != 0) first_child[rank[s]] = static_cast<std::uint32_t>(s);
  }
};

// The clusters' noise terms (noise_terms) summed over the levels before and this one's: the
// level's sum is added to the others' only after its halves are tested (LevelClusters), so that
// no launch of its own does it.
struct NoiseSoFar {
  const double* before;
  const double* level;
  APRON_HD double operator[](int k) const { return before[k] + level[k]; }
};

// What a parent's lanes share while they test its halves (MergeSiblingHalves' phases): its
// children by octant (those not clusters: sums, reference point, point count; all: node), and
// per lane what it found.
constexpr int kHalvesLanes = 8;
struct HalvesScratch {
  Moments m[8];
  double ref[8][3];
  double count[8];
  std::uint32_t node[8];
  unsigned lane_bit[kHalvesLanes];  // its child's octant bit where that child is not a cluster
  Moments shifted[kHalvesLanes];    // coplanar_children's k-th sums, relative to the first's point
  unsigned members[kHalvesLanes];   // its seed's grown group
  bool passed[kHalvesLanes];        // its half (or seed group) passed test_group,
  double inliers[kHalvesLanes];     // with these inliers
};

// Per parent: its children that are not clusters, tested by halves (sibling_halves); the children
// of a half that passes become cluster nodes of one group, whose cluster is kept at its first
// member (the octant its sums are relative to). With the parents numbered (first_child), a thread
// per parent (their count stays on the device, the threads past it return); without, a thread per
// node, of which each parent's first child works: at a level of few nodes one launch instead of
// the numbering's three, and the GPU holds all their threads at once either way.
struct MergeSiblingHalves {
  const Vec4* sorted;
  KeyView keys;
  const std::uint32_t* active;
  const std::uint32_t* starts;
  std::size_t nodes;
  const std::uint32_t* parent_rank;  // [nodes]: the parents' count; null: a thread per node
  const std::uint32_t* first_child;  // per parent, then nodes
  const Moments* sums;
  NoiseSoFar noise;
  double band;  // the children's first trimming band (edge / trim_divisor)
  OctreeParams params;
  int level, shift;
  std::uint8_t* state;
  std::uint32_t* is_cluster;
  std::uint32_t* group;
  Cluster* level_clusters;
  // Thread p's parent's children: the nodes [begin, end); false where it has none to test.
  APRON_HD bool children(std::size_t p, std::uint32_t& begin, std::uint32_t& end) const {
    if (parent_rank != nullptr) {
      if (p >= parent_rank[nodes]) return false;
      begin = first_child[p], end = first_child[p + 1];
      return true;
    }
    const ParentHeads heads{keys, active, starts, nodes, shift};
    if (heads(p) == 0) return false;
    const std::uint64_t parent = heads.parent(p);
    begin = static_cast<std::uint32_t>(p), end = begin + 1;
    while (end < nodes && heads.parent(end) == parent) ++end;
    return true;
  }
  APRON_HD void operator()(std::size_t p) const {
    if (!(noise[2] > 0)) return;  // no cluster yet: no noise to compare with
    std::uint32_t begin, end;
    if (!children(p, begin, end)) return;
    const double lmin = noise[0] / noise[2];
    if (!halves_can_pass(params, band * params.trim_divisor, lmin)) return;
    const HalfLimits limits{params.halves_noise * lmin, params.halves_density * noise[1] / noise[2],
                            lmin > 0 ? std::erf(band / std::sqrt(2 * lmin)) : 1.0};
    Moments m[8];
    double ref[8][3] = {};
    double count[8] = {};
    std::uint32_t node[8] = {};
    unsigned eligible = 0;
    for (std::uint32_t s = begin; s < end; ++s) {
      const std::uint32_t first = active[starts[s]];
      const auto o = static_cast<int>((keys[first] >> shift) & 7u);
      node[o] = s;
      if (state[s] == kCluster) continue;
      eligible |= 1u << o;
      m[o] = sums[s];
      const Vec4 r = sorted[first];
      ref[o][0] = r.x, ref[o][1] = r.y, ref[o][2] = r.z;
      count[o] = static_cast<double>(starts[s + 1] - starts[s]);
    }
    SiblingGroup g[3];
    const int groups = sibling_groups(params, level, eligible, m, ref, count, limits, g);
    for (int k = 0; k < groups; ++k) store_group(g[k], node, ref);
  }

  // A group that passed: its children become cluster nodes of its leader's group (the first
  // member's), whose cluster holds the group's sums. node and ref: by octant.
  APRON_HD void store_group(const SiblingGroup& g, const std::uint32_t* node,
                            const double (*ref)[3]) const {
    const std::uint32_t leader = node[g.ref];
    std::uint32_t lo = 0xffffffffu, hi = 0;
    for (int o = 0; o < 8; ++o) {
      if (((g.members >> o) & 1u) == 0) continue;
      const std::uint32_t s = node[o];
      state[s] = kCluster;
      group[s] = leader;
      lo = active[starts[s]] < lo ? active[starts[s]] : lo;
      hi = active[starts[s + 1] - 1] > hi ? active[starts[s + 1] - 1] : hi;
    }
    is_cluster[leader] = 1;
    level_clusters[leader] = make_cluster(
        g.m, ref[g.ref], g.e, keys[active[starts[leader]]] >> shift, level, lo, hi - lo + 1);
  }

  // ---- The same test by 8 lanes a parent (OctreeBuilder::halves_by_lanes) --------------------
  // One thread tests a parent's six halves and coplanar groups in turn (each a float64
  // eigen-decomposition); the lanes test them at once: lane k loads child k, lanes 0-5 test the
  // halves (axis k / 2, side k % 2), lane k grows and tests coplanar_children's seed k. The
  // choices are sibling_groups' own, made in its order from the lanes' results: the same
  // arithmetic in the same order (the GPU's compiler may still fuse its products and sums into
  // FMAs elsewhere than in the one-thread kernel). Between two phases the parent's lanes wait for
  // one another (a warp's barrier on the GPU; elsewhere each phase runs for every lane in turn).

  // What each lane keeps (the same in every lane but g and child).
  struct Lane {
    std::uint32_t child = 0;  // the node this lane loads; valid where has_child
    bool has_child = false;
    HalfLimits limits;
    unsigned eligible = 0, left = 0;  // the children not clusters; of them those no half took
    int order[8] = {};                // coplanar_children's: the left children, most inliers first
    int n = 0;
    SiblingGroup g;  // this lane's half or seed group
  };

  // False where the parent tests nothing (the same in every lane of the parent).
  APRON_HD bool begin(std::size_t p, int lane, Lane& l) const {
    if (!(noise[2] > 0)) return false;
    if (parent_rank != nullptr) {
      if (p >= parent_rank[nodes]) return false;
      l.child = first_child[p] + static_cast<std::uint32_t>(lane);
      l.has_child = l.child < first_child[p + 1];
    } else {
      // A parent's children are a run of at most 8 nodes from its first: lane k's node is one of
      // them where it has the same parent.
      const ParentHeads heads{keys, active, starts, nodes, shift};
      if (heads(p) == 0) return false;
      l.child = static_cast<std::uint32_t>(p) + static_cast<std::uint32_t>(lane);
      l.has_child = l.child < nodes && heads.parent(l.child) == heads.parent(p);
    }
    const double lmin = noise[0] / noise[2];
    if (!halves_can_pass(params, band * params.trim_divisor, lmin)) return false;
    l.limits = {params.halves_noise * lmin, params.halves_density * noise[1] / noise[2],
                lmin > 0 ? std::erf(band / std::sqrt(2 * lmin)) : 1.0};
    return true;
  }

  // Phase 1: lane k's child into the shared arrays by its octant.
  APRON_HD void load(int lane, const Lane& l, HalvesScratch& x) const {
    x.lane_bit[lane] = 0;
    if (!l.has_child) return;
    const std::uint32_t s = l.child;
    const std::uint32_t first = active[starts[s]];
    const auto o = static_cast<int>((keys[first] >> shift) & 7u);
    x.node[o] = s;
    if (state[s] == kCluster) return;
    x.lane_bit[lane] = 1u << o;
    x.m[o] = sums[s];
    const Vec4 r = sorted[first];
    x.ref[o][0] = r.x, x.ref[o][1] = r.y, x.ref[o][2] = r.z;
    x.count[o] = static_cast<double>(starts[s + 1] - starts[s]);
  }

  // The octants of axis `axis` on side `side` (sibling_halves').
  APRON_HD static unsigned half_members(int axis, int side) {
    unsigned members = 0;
    for (int o = 0; o < 8; ++o)
      if (((o >> axis) & 1) == side) members |= 1u << o;
    return members;
  }

  // Phase 2: lanes 0-5 test a half each.
  APRON_HD void test_half(int lane, Lane& l, HalvesScratch& x) const {
    l.eligible = 0;
    for (int k = 0; k < kHalvesLanes; ++k) l.eligible |= x.lane_bit[k];
    if (lane >= 6) return;
    const unsigned members = half_members(lane / 2, lane % 2) & l.eligible;
    x.passed[lane] = test_group(params, level, x.m, x.ref, x.count, members, l.limits, l.g);
    x.inliers[lane] = x.passed[lane] ? l.g.m.count : 0;
  }

  // Phase 3: sibling_halves' choice (the axis whose passing halves hold the most inliers), stored
  // by the lanes that tested its halves; then coplanar_children's order of the children left and
  // their sums relative to the first one's reference point, lane k the k-th's. False where no
  // coplanar group is sought (the same in every lane).
  APRON_HD bool take_halves(int lane, Lane& l, HalvesScratch& x) const {
    int chosen = -1;
    double most = 0;
    for (int axis = 0; axis < 3; ++axis) {
      int n = 0;
      double inliers = 0;
      for (int side = 0; side < 2; ++side)
        if (x.passed[2 * axis + side]) inliers += x.inliers[2 * axis + side], ++n;
      if (n > 0 && inliers > most) most = inliers, chosen = axis;
    }
    l.left = l.eligible;
    for (int side = 0; chosen >= 0 && side < 2; ++side) {
      const int k = 2 * chosen + side;
      if (!x.passed[k]) continue;
      l.left &= ~(half_members(chosen, side) & l.eligible);
      if (lane == k) store_group(l.g, x.node, x.ref);
    }
    if (!params.coplanar_children) return false;
    l.n = 0;
    for (int o = 0; o < 8; ++o) {
      if (((l.left >> o) & 1u) == 0 || x.m[o].count < 3) continue;
      int k = l.n++;
      for (; k > 0 && x.m[l.order[k - 1]].count < x.m[o].count; --k) l.order[k] = l.order[k - 1];
      l.order[k] = o;
    }
    if (l.n < 2) return false;
    if (lane < l.n) {
      const int o = l.order[lane], o0 = l.order[0];
      const double delta[3] = {x.ref[o][0] - x.ref[o0][0], x.ref[o][1] - x.ref[o0][1],
                               x.ref[o][2] - x.ref[o0][2]};
      x.shifted[lane] = x.m[o].shifted(delta);
    }
    return true;
  }

  // Phase 4: lane k grows seed k's group (coplanar_children's growth).
  APRON_HD void grow_seed(int lane, const Lane& l, HalvesScratch& x) const {
    if (lane >= l.n) return;
    unsigned members = 1u << l.order[lane];
    Moments grown = x.shifted[lane];
    for (int k = 0; k < l.n; ++k) {
      if (k == lane) continue;
      Moments trial = grown;
      trial.merge(x.shifted[k]);
      double mean[3];
      if (!smallest_eigenvalue_at_most(trial.covariance(mean), l.limits.max_lmin)) continue;
      members |= 1u << l.order[k];
      grown = trial;
    }
    x.members[lane] = members;
  }

  // The seeds coplanar_children tests: in order, those that grew and are not in a group grown
  // before.
  APRON_HD static unsigned tested_seeds(const Lane& l, const HalvesScratch& x) {
    unsigned covered = 0, tested = 0;
    for (int seed = 0; seed < l.n; ++seed) {
      if ((covered >> l.order[seed]) & 1u) continue;
      if (x.members[seed] == (1u << l.order[seed])) continue;
      covered |= x.members[seed];
      tested |= 1u << seed;
    }
    return tested;
  }

  // Phase 5: lane k tests seed k's group where coplanar_children would.
  APRON_HD void test_seed(int lane, Lane& l, HalvesScratch& x) const {
    if (lane >= l.n) return;
    x.passed[lane] = ((tested_seeds(l, x) >> lane) & 1u) != 0 &&
                     test_group(params, level, x.m, x.ref, x.count, x.members[lane], l.limits, l.g);
    x.inliers[lane] = x.passed[lane] ? l.g.m.count : 0;
  }

  // Phase 6: coplanar_children's choice (the first of the most inliers), stored by its lane.
  APRON_HD void take_seed(int lane, const Lane& l, const HalvesScratch& x) const {
    int best = -1;
    for (int seed = 0; seed < l.n; ++seed)
      if (x.passed[seed] && (best < 0 || x.inliers[seed] > x.inliers[best])) best = seed;
    if (lane == best) store_group(l.g, x.node, x.ref);
  }
};

#if !defined(__CUDACC__)
// Every phase of MergeSiblingHalves' lanes for one parent, lane after lane (off the GPU: the
// tests' check of the phases on the CPU).
struct HalvesByLanesSerial {
  MergeSiblingHalves f;
  APRON_HD void operator()(std::size_t p) const {
    using Lane = MergeSiblingHalves::Lane;
    Lane l[kHalvesLanes];
    for (int k = 0; k < kHalvesLanes; ++k)
      if (!f.begin(p, k, l[k])) return;
    HalvesScratch x;
    for (int k = 0; k < kHalvesLanes; ++k) f.load(k, l[k], x);
    for (int k = 0; k < kHalvesLanes; ++k) f.test_half(k, l[k], x);
    bool coplanar = false;
    for (int k = 0; k < kHalvesLanes; ++k) coplanar = f.take_halves(k, l[k], x);
    if (!coplanar) return;
    for (int k = 0; k < kHalvesLanes; ++k) f.grow_seed(k, l[k], x);
    for (int k = 0; k < kHalvesLanes; ++k) f.test_seed(k, l[k], x);
    for (int k = 0; k < kHalvesLanes; ++k) f.take_seed(k, l[k], x);
  }
};
#else
constexpr int kHalvesBlockThreads = 128;

// kHalvesLanes lanes a parent (thread p * kHalvesLanes + k: lane k of parent p), the parent's
// scratch in shared memory; a warp's barrier over the parent's lanes between the phases.
__global__ void __launch_bounds__(kHalvesBlockThreads)
    halves_lanes_kernel(std::size_t parents, MergeSiblingHalves f) {
  constexpr int kParents = kHalvesBlockThreads / kHalvesLanes;
  // Raw storage: a __shared__ array of a type with member initialisers may not be declared.
  __shared__ alignas(HalvesScratch) unsigned char storage[kParents * sizeof(HalvesScratch)];
  const std::size_t p =
      (blockIdx.x * std::size_t{kHalvesBlockThreads} + threadIdx.x) / kHalvesLanes;
  const int lane = static_cast<int>(threadIdx.x % kHalvesLanes);
  auto& x = reinterpret_cast<HalvesScratch*>(storage)[threadIdx.x / kHalvesLanes];
  const unsigned mask = 0xffu << (threadIdx.x % 32 / kHalvesLanes * kHalvesLanes);
  MergeSiblingHalves::Lane l;
  if (p >= parents || !f.begin(p, lane, l)) return;  // the parent's lanes alike
  f.load(lane, l, x);
  __syncwarp(mask);
  f.test_half(lane, l, x);
  __syncwarp(mask);
  const bool coplanar = f.take_halves(lane, l, x);
  if (!coplanar) return;
  __syncwarp(mask);
  f.grow_seed(lane, l, x);
  __syncwarp(mask);
  f.test_seed(lane, l, x);
  __syncwarp(mask);
  f.take_seed(lane, l, x);
}
#endif

// A level's sibling halves: parents [0, bound) (threads past their count return), one thread or
// kHalvesLanes lanes each (by_lanes).
void run_sibling_halves(std::size_t bound, bool by_lanes, const MergeSiblingHalves& f) {
  if (!by_lanes) {
    for_each_index(bound, f);
    return;
  }
#if defined(__CUDACC__)
  if (bound == 0) return;
  const std::size_t blocks = (bound * kHalvesLanes + kHalvesBlockThreads - 1) / kHalvesBlockThreads;
  halves_lanes_kernel<<<static_cast<unsigned>(blocks), kHalvesBlockThreads>>>(bound, f);
  check_launch("halves_lanes_kernel");
#else
  for_each_index(bound, HalvesByLanesSerial{f});
#endif
}

// The level's clusters flagged, or 0 past the last node: their exclusive scan ends with the total.
struct FlagOrZero {
  const std::uint32_t* flag;
  std::size_t nodes;
  APRON_HD std::uint32_t operator()(std::size_t s) const { return s < nodes ? flag[s] : 0u; }
};

// A tested level's clusters appended to the store after those of the levels before (totals[level
// - 1]: their count); thread 0 adds the level's count to the totals (totals[level]) and its noise
// terms, where it has them (sibling_halves), to the sums so far. Run by KeepPoints' threads (i <
// nodes: node i's cluster), no launch of its own; the host reads the totals once, after the last
// level.
struct LevelClusters {
  const std::uint32_t* is_cluster;
  const std::uint32_t* rank;  // nodes + 1: the exclusive scan of is_cluster
  const Cluster* level_clusters;
  std::size_t nodes;
  int level;
  std::uint32_t* totals;  // [l]: the clusters of levels 1 to l
  Cluster* store;
  const double* level_noise;  // null: none
  double* noise;
  APRON_HD std::uint32_t before() const { return totals[level - 1]; }
  APRON_HD void operator()(std::size_t i) const {
    if (i < nodes && is_cluster[i] != 0) store[before() + rank[i]] = level_clusters[i];
    if (i != 0) return;
    totals[level] = before() + rank[nodes];
    if (level_noise != nullptr)
      for (int k = 0; k < kNoiseTerms; ++k) noise[k] += level_noise[k];
  }
};

// A cluster's inliers join it; a dropped node's points leave for good; a subdivided node's points
// and a cluster's trimmed points (another plane's points in its corner, say) stay active, to be
// tested in the nodes of the next level. keep(i) is 1 for those, 0 past the level's points, so
// that its exclusive scan numbers the points kept and ends with their count.
struct TestedFate {
  const std::uint32_t* segment;
  const std::uint8_t* state;
  const std::uint8_t* inlier;  // null: all
  std::uint32_t m;
  bool deepest;
  APRON_HD bool joins(std::size_t i) const {
    const std::uint32_t s = segment[i] - 1;
    return state[s] == kCluster && (inlier == nullptr || inlier[i] != 0);
  }
  APRON_HD std::uint32_t operator()(std::size_t i) const {
    if (i >= m) return 0;
    const std::uint8_t st = state[segment[i] - 1];
    return st == kSubdivide || (st == kCluster && !joins(i) && !deepest);
  }
};

// A level above first_level: nodes with enough points are split, the others dropped.
struct UntestedFate {
  const std::uint32_t* segment;
  const std::uint32_t* starts;
  std::uint32_t m;
  int min_points;
  APRON_HD bool joins(std::size_t) const { return false; }
  APRON_HD std::uint32_t operator()(std::size_t i) const {
    if (i >= m) return 0;
    const std::uint32_t s = segment[i] - 1;
    return starts[s + 1] - starts[s] >= static_cast<std::uint32_t>(min_points);
  }
};

// Per active point by its fate: the points kept move to their rank among the kept (rank: the
// exclusive scan of the fate's keep), and the kept count becomes the next level's point count on
// the device. At a tested level (group not null) the level's clusters are stored as well, and
// the points that join one are labelled with the cluster of their node's group.
template <class Fate>
struct KeepPoints {
  Fate fate;
  const std::uint32_t* active;
  const std::uint32_t* rank;
  std::uint32_t* active_next;
  std::uint32_t* level_counts;
  const std::uint32_t* group;
  LevelClusters clusters;
  std::int32_t* sorted_cluster;
  APRON_HD void operator()(std::size_t i) const {
    if (i == 0) level_counts[kLevelPoints] = rank[fate.m];
    if (rank[i + 1] != rank[i]) active_next[rank[i]] = active[i];
    if (group == nullptr) return;
    clusters(i);
    if (fate.joins(i)) {
      const std::uint32_t c = clusters.before() + clusters.rank[group[fate.segment[i] - 1]];
      sorted_cluster[active[i]] = static_cast<std::int32_t>(c);
    }
  }
};

}  // namespace

void OctreeBuilder::build(const DeviceVector<Vec4>& points, std::size_t n, const OctreeFrame& frame,
                          const OctreeParams& params, Order input) {
  if (params.max_depth < 1 || params.max_depth > 21)
    throw std::invalid_argument("octree depth must be between 1 and 21");
  if (n >= (std::size_t{1} << 32) - 1)
    throw std::invalid_argument("octree: more than 2^32 - 2 points on one rank");
  depth_ = params.max_depth;
  frame_ = frame;
  ProfileClock& clock = step_clock();
  clock.start();
  if (!keys_prepared(n, frame, depth_)) {
    size_keys(n, depth_);
    order.resize(n);
    for_each_index(
        n, MortonKeys{raw(points), frame, depth_, narrow_keys_out(), wide_keys_out(), raw(order)});
  }
  prepared_ = {};
  clock.lap("keys");
  // Given in order, `order` stays the identity that MortonKeys or prepare_keys wrote.
  if (input == Order::sort && narrow_keys(depth_))
    sort_pairs(narrow_keys_, order, n, 3 * depth_);
  else if (input == Order::sort)
    sort_pairs(keys_, order, n, 3 * depth_);
  clock.lap("sort");
  sorted.resize(n);
  grow_to(active_, n);
  sorted_cluster.resize(n);
  for_each_index(
      n, GatherSorted{raw(points), raw(order), raw(sorted), raw(active_), raw(sorted_cluster)});
  clock.lap("gather");
  stats = {};
  const double zero[kNoiseTerms] = {0, 0, 0};
  noise_.assign(zero, zero + kNoiseTerms);
  const std::vector<std::uint32_t> no_clusters(static_cast<std::size_t>(depth_) + 1, 0);
  cluster_totals_.assign(no_clusters.begin(), no_clusters.end());
  clusters_bound_ = 0;
  const std::uint32_t start_counts[2] = {static_cast<std::uint32_t>(n), 0};
  level_counts_.assign(start_counts, start_counts + 2);
  std::size_t bound = n;  // the host's bound on the active points: the last level's count
  clock.lap("start");
  print_profile(clock, "prepare", n, 0);
  for (int level = 1; level <= depth_; ++level) {
    if (skip_untested_ && level < params.first_level) {
      stats.nodes.push_back(0);
      stats.active.push_back(0);
      continue;
    }
    const LevelSize size = bound > 0 ? find_nodes(level, bound) : LevelSize{};
    clock.lap("find");
    bound = size.points;
    if (size.points > 0) {
      level_pass(level, size, params);
    } else if (global_sum_ && tests_halves(level, params)) {
      // The other ranks' sums still need this rank's part.
      level_noise_.assign(zero, zero + kNoiseTerms);
      global_sum_(raw(level_noise_), kNoiseTerms);
    } else if (!global_sum_) {
      break;
    }
    if (clock.on())
      print_profile(clock, ("level " + std::to_string(level)).c_str(), size.points, size.nodes);
  }
  // The levels run are 1 to levels (the untested ones first, with no clusters).
  const std::vector<std::uint32_t> totals = to_host(cluster_totals_);
  const std::size_t levels = stats.nodes.size();
  for (std::size_t l = 1; l <= levels; ++l) stats.clusters.push_back(totals[l] - totals[l - 1]);
  clusters.resize(totals[levels]);
  copy_n(cluster_store_.begin(), totals[levels], clusters.begin());
  clock.lap("clusters");
  print_profile(clock, "finish", n, totals[levels]);
}

void OctreeBuilder::prepare_keys(const DeviceVector<Vec4>& points, std::size_t n, std::size_t begin,
                                 std::size_t end, const OctreeFrame& frame, int depth) {
  if (begin > end || end > n || n > points.size())
    throw std::invalid_argument("octree: prepare_keys of points outside the cloud");
  if (n >= (std::size_t{1} << 32) - 1)
    throw std::invalid_argument("octree: more than 2^32 - 2 points on one rank");
  if (begin == 0) {
    prepared_ = {n, 0, frame, depth};
    size_keys(n, depth);
    order.resize(n);
  }
  // Chunks in order, each after the last, for the same cloud; anything else: build() computes
  // every key itself.
  if (begin != prepared_.done || n != prepared_.n || !same_frame(frame, prepared_.frame) ||
      depth != prepared_.depth) {
    prepared_ = {};
    return;
  }
  std::uint32_t* narrow = narrow_keys_out();
  std::uint64_t* wide = wide_keys_out();
  for_each_index(end - begin,
                 MortonKeys{raw(points) + begin, frame, depth, narrow ? narrow + begin : nullptr,
                            wide ? wide + begin : nullptr, raw(order) + begin, begin});
  prepared_.done = end;
}

// 32-bit keys sort in passes of 8 bytes a pair instead of 12 (20M points: ~0.2 ms of 0.85).
bool OctreeBuilder::narrow_keys(int depth) {
  return 3 * depth <= 32;
}

void OctreeBuilder::size_keys(std::size_t n, int depth) {
  key_depth_ = depth;
  if (narrow_keys(depth))
    narrow_keys_.resize(n);
  else
    keys_.resize(n);
}

std::uint32_t* OctreeBuilder::narrow_keys_out() {
  return narrow_keys(key_depth_) ? raw(narrow_keys_) : nullptr;
}
std::uint64_t* OctreeBuilder::wide_keys_out() {
  return narrow_keys(key_depth_) ? nullptr : raw(keys_);
}
KeyView OctreeBuilder::key_view() const {
  if (narrow_keys(key_depth_)) return {raw(narrow_keys_), nullptr};
  return {nullptr, raw(keys_)};
}

bool OctreeBuilder::keys_prepared(std::size_t n, const OctreeFrame& frame, int depth) const {
  return n > 0 && prepared_.n == n && prepared_.done == n && prepared_.depth == depth &&
         same_frame(frame, prepared_.frame);
}

// Room in the cluster store for a level of `nodes` nodes. The host knows only a bound on the
// clusters so far (each level's nodes added), so that no level waits for its count; where the
// bound outgrows the store the exact count is read (a wait), and the store grows, never shrinks.
void OctreeBuilder::reserve_clusters(int level, std::size_t nodes) {
  if (clusters_bound_ + nodes > cluster_store_.size()) {
    clusters_bound_ = read_element(cluster_totals_, static_cast<std::size_t>(level) - 1);
    grow_to(cluster_store_, std::max(clusters_bound_ + nodes, 2 * cluster_store_.size()));
  }
  clusters_bound_ += nodes;
}

std::uint32_t NodeMoments::default_tile_points() {
#if defined(__CUDACC__)
  return 512;
#else
  return std::numeric_limits<std::uint32_t>::max() / 2;
#endif
}

std::size_t NodeMoments::default_small_level_points() {
#if defined(__CUDACC__)
  return std::size_t{1} << 19;
#else
  return 0;
#endif
}

void NodeMoments::plan(const DeviceVector<std::uint32_t>& starts, std::size_t nodes,
                       std::size_t m) {
  if (tile_points_ == 0) throw std::invalid_argument("NodeMoments: tiles of 0 points");
  plan_tile_points_ =
      m <= small_level_points_ ? std::min(tile_points_, kSmallLevelTilePoints) : tile_points_;
  nodes_ = nodes;
  // Each node's last tile may be partial: at most one tile per node more than m / tile_points.
  max_tiles_ = std::min(m, nodes + m / plan_tile_points_);
  grow_to(tile_first_, nodes + 1);
  exclusive_count_scan(
      nodes + 1, TileCounts{raw(starts), static_cast<std::uint32_t>(nodes), plan_tile_points_},
      raw(tile_first_));
  grow_to(partial_, max_tiles_);
  grow_to(tile_segment_, max_tiles_);
  for_each_index(max_tiles_, TileSegments{raw(tile_first_), static_cast<std::uint32_t>(nodes),
                                          raw(tile_segment_)});
  lanes_ = tile_lanes_ != 0 ? tile_lanes_ : lanes_for(max_tiles_);
}

// At most kGroupLanes / 2 tiles a node on average (the plan's bound): most nodes then fit their
// group, and few of a warp's take the whole warp in turn. Where nodes hold many tiles each (the
// first levels of a large cloud), a warp per node.
bool NodeMoments::grouped_totals() const {
  switch (grouped_) {
    case GroupedTotals::never:
      return false;
    case GroupedTotals::always:
      return true;
    default:
      return max_tiles_ * 2 <= std::size_t{kGroupLanes} * nodes_;
  }
}

std::uint32_t NodeMoments::lanes_for(std::size_t tiles) {
  std::uint32_t lanes = kMinTileLanes;
  while (lanes < kMaxTileLanes && tiles * lanes < kFillThreads) lanes *= 2;
  return lanes;
}

void NodeMoments::reduce(const DeviceVector<Vec4>& sorted,
                         const DeviceVector<std::uint32_t>& active,
                         const DeviceVector<std::uint32_t>& starts, const double* fit,
                         std::uint8_t* inlier, DeviceVector<Moments>& sums, const NextFit& next) {
  grow_to(sums, nodes_);
  if (nodes_ == 0) return;
  const TileSpan span{raw(starts), raw(tile_first_), raw(tile_segment_),
                      static_cast<std::uint32_t>(nodes_), plan_tile_points_};
  run_tile_moments(*this, span, raw(sorted), raw(active), fit, inlier);
  run_totals(nodes_, warp_node_limit_, grouped_totals(),
             NodeTotals{raw(partial_), raw(tile_first_), raw(sums), next});
}

// The level's nodes among its active points (their count is on the device, at most `bound`: the
// last level's): each point's node + 1 (segment_) and the nodes' starts, then one wait for both
// counts, so that the level's launches are sized as before.
OctreeBuilder::LevelSize OctreeBuilder::find_nodes(int level, std::size_t bound) {
  const int shift = 3 * (depth_ - level);
  grow_to(segment_, bound);
  inclusive_count_scan(bound, NodeHeads{key_view(), raw(active_), raw(level_counts_), shift},
                       raw(segment_));
  grow_to(starts_, bound + 1);
  for_each_index(bound, NodeStarts{raw(segment_), raw(starts_), raw(level_counts_)});
  const std::vector<std::uint32_t> counts = to_host(level_counts_, 2);
  return {counts[kLevelPoints], counts[kLevelNodes]};
}

void OctreeBuilder::level_pass(int level, const LevelSize& size, const OctreeParams& params) {
  const std::size_t m = size.points, nodes = size.nodes;
  const int shift = 3 * (depth_ - level);
  ProfileClock& clock = step_clock();
  if (level < params.first_level) {  // untested: only the node sizes matter
    untested_level(m, nodes, params);
    clock.lap("keep");
    return;
  }
  const bool trim = trims(level, params);
  const double edge = frame_.size / static_cast<double>(std::uint64_t{1} << level);
  const double first_band = trim ? edge / params.trim_divisor : 0;
  if (trim) {
    grow_to(node_fit_, kFit * nodes);
    grow_to(inlier_, m);
  }
  // The plain sums (and the first fit), then per trimming pass the sums of the points within
  // the band of the last fit (and the next fit, but after the last pass).
  const bool seeds = trim && params.sibling_halves && params.seed_octants && shift >= 3;
  if (seeds) {
    seeded_first_fits(nodes, m, shift, first_band, params);
  } else {
    moments_.plan(starts_, nodes, m);
    moments_.reduce(sorted, active_, starts_, nullptr, nullptr, sums_,
                    {trim ? raw(node_fit_) : nullptr, first_band, false});
  }
  clock.lap("sums");
  for (int pass = 0; trim && pass < params.trim_passes; ++pass) {
    const bool more = pass + 1 < params.trim_passes;
    moments_.reduce(sorted, active_, starts_, raw(node_fit_), raw(inlier_), sums_,
                    {more ? raw(node_fit_) : nullptr, first_band, true});
  }
  clock.lap("trim");

  grow_to(state_, nodes);
  grow_to(cluster_flag_, nodes);
  grow_to(group_, nodes);
  grow_to(level_clusters_, nodes);
  const bool halves = tests_halves(level, params);
  if (halves) {
    grow_to(noise_terms_, kNoiseTerms * nodes);
    noise_bounds_.resize(kNoiseTerms + 1);
  }
  for_each_index(nodes, ClassifyNodes{raw(sorted), key_view(), raw(active_), raw(starts_),
                                      raw(sums_), params, level, shift, nodes, raw(state_),
                                      raw(cluster_flag_), raw(group_), raw(level_clusters_),
                                      halves ? raw(noise_terms_) : nullptr, raw(noise_bounds_)});
  clock.lap("classify");
  if (halves) {
    sum_level_noise();
    clock.lap("noise");
    if (level > params.first_level) merge_sibling_halves(level, nodes, first_band, params);
    clock.lap("halves");
  }
  grow_to(cluster_rank_, nodes + 1);
  exclusive_count_scan(nodes + 1, FlagOrZero{raw(cluster_flag_), nodes}, raw(cluster_rank_));
  reserve_clusters(level, nodes);
  clock.lap("rank");
  const TestedFate fate{raw(segment_), raw(state_), trim ? raw(inlier_) : nullptr,
                        static_cast<std::uint32_t>(m), level >= depth_};
  keep_points(fate, m, raw(group_),
              LevelClusters{raw(cluster_flag_), raw(cluster_rank_), raw(level_clusters_), nodes,
                            level, raw(cluster_totals_), raw(cluster_store_),
                            halves ? raw(level_noise_) : nullptr, raw(noise_)});
  clock.lap("keep");
  stats.nodes.push_back(nodes);
  stats.active.push_back(m);
}

// A seeded level's plain sums and first fits (seed_octants): the sums per octant in one pass
// (a node's are its octants' added) with each octant's plane a candidate, then the candidates'
// counts in one more pass over the nodes' tiles (planned here for the trimming passes as well);
// each node's first fit is the candidate holding the most. Whether the level's noise allows
// seeds is read on the device (SeedsNode): no wait for the host.
void OctreeBuilder::seeded_first_fits(std::size_t nodes, std::size_t m, int shift, double band,
                                      const OctreeParams& params) {
  const std::size_t octants = 8 * nodes;
  grow_to(octant_starts_, octants + 1);
  for_each_index(octants + 1,
                 OctantStarts{key_view(), raw(active_), raw(starts_),
                              static_cast<std::uint32_t>(nodes), shift - 3, raw(octant_starts_)});
  grow_to(octant_sums_, octants);
  grow_to(sums_, nodes);
  grow_to(seed_planes_, kSeedCandidates * kPlane * nodes);
  grow_to(seed_mask_, nodes);
  const SeedsNode seeds{raw(starts_), raw(noise_), params, band};
  moments_.plan(octant_starts_, octants, m);
  const TileSpan octant_span{raw(octant_starts_), raw(moments_.tile_first()),
                             raw(moments_.tile_segment()), static_cast<std::uint32_t>(octants),
                             moments_.tile_points()};
  run_tile_moments(moments_, octant_span, raw(sorted), raw(active_), nullptr, nullptr);
  run_totals(
      octants, moments_.warp_node_limit(), moments_.grouped_totals(),
      OctantTotals{{raw(moments_.partial()), raw(moments_.tile_first()), raw(octant_sums_), {}},
                   raw(sorted),
                   raw(active_),
                   raw(octant_starts_),
                   seeds,
                   raw(seed_planes_)});
  for_each_index(nodes, NodeFromOctants{raw(sorted), raw(active_), raw(octant_starts_),
                                        raw(octant_sums_), seeds, raw(sums_), raw(node_fit_),
                                        raw(seed_planes_), raw(seed_mask_)});
  moments_.plan(starts_, nodes, m);
  grow_to(seed_partial_, moments_.tile_bound());
  const TileSpan span{raw(starts_), raw(moments_.tile_first()), raw(moments_.tile_segment()),
                      static_cast<std::uint32_t>(nodes), moments_.tile_points()};
  run_tiles(
      moments_.lanes(), moments_.tile_bound(),
      TileSeedCounts{raw(sorted), raw(active_), span, seeds, raw(seed_planes_), raw(seed_mask_)},
      raw(seed_partial_));
  run_totals(nodes, moments_.warp_node_limit(), moments_.grouped_totals(),
             SeedTotals{raw(seed_partial_), raw(moments_.tile_first()), seeds, raw(seed_planes_),
                        raw(node_fit_)});
}

// The noise terms of this level's clusters (nodes: ClassifyNodes wrote them) summed, over every
// rank where there are several, into level_noise_ (LevelClusters adds them to noise_).
void OctreeBuilder::sum_level_noise() {
  segmented_reduce(noise_terms_, noise_bounds_, kNoiseTerms, Reduction::sum, level_noise_);
  if (global_sum_) global_sum_(raw(level_noise_), kNoiseTerms);
}

// A tested level's fits are trimmed (OctreeParams::trim_passes); every rank decides alike.
bool OctreeBuilder::trims(int level, const OctreeParams& params) {
  return params.trim_passes > 0 && params.trim_divisor > 0 && level >= params.first_level;
}

// The level tests sibling halves, and so sums its noise over the ranks: every rank must take
// part, its own points at the level or not.
bool OctreeBuilder::tests_halves(int level, const OctreeParams& params) {
  return params.sibling_halves && trims(level, params);
}

// Each parent's children (runs of equal prefix one level up among the level's nodes) tested by
// halves, a thread per parent: a thread per node, of which only each parent's first child worked,
// left most lanes of a warp idle. At most `nodes` parents, so no wait for their count.
void OctreeBuilder::merge_sibling_halves(int level, std::size_t nodes, double first_band,
                                         const OctreeParams& params) {
  const int shift = 3 * (depth_ - level);
  const bool by_parent = nodes > halves_per_node_limit_;
  if (by_parent) {
    const ParentHeads heads{key_view(), raw(active_), raw(starts_), nodes, shift};
    grow_to(parent_rank_, nodes + 1);
    exclusive_count_scan(nodes + 1, heads, raw(parent_rank_));
    grow_to(first_child_, nodes + 1);
    for_each_index(nodes + 1, ParentFirstChildren{heads, raw(parent_rank_), raw(first_child_)});
  }
  run_sibling_halves(nodes, halves_by_lanes_ && nodes <= kHalvesLanesNodeLimit,
                     MergeSiblingHalves{raw(sorted),
                                        key_view(),
                                        raw(active_),
                                        raw(starts_),
                                        nodes,
                                        by_parent ? raw(parent_rank_) : nullptr,
                                        raw(first_child_),
                                        raw(sums_),
                                        {raw(noise_), raw(level_noise_)},
                                        first_band,
                                        params,
                                        level,
                                        shift,
                                        raw(state_),
                                        raw(cluster_flag_),
                                        raw(group_),
                                        raw(level_clusters_)});
}

bool OctreeBuilder::default_halves_by_lanes() {
#if defined(__CUDACC__)
  return true;
#else
  return false;
#endif
}

void OctreeBuilder::untested_level(std::size_t m, std::size_t nodes, const OctreeParams& params) {
  keep_points(
      UntestedFate{raw(segment_), raw(starts_), static_cast<std::uint32_t>(m), params.min_points},
      m, nullptr, LevelClusters{});
  stats.nodes.push_back(nodes);
  stats.active.push_back(m);
}

// The points the fate keeps, compacted into the next level's active points in order (a scan and a
// scatter: their count stays on the device for the next level's find_nodes); at a tested level
// (group not null) its clusters stored and their points labelled in the same launch.
template <class Fate, class Clusters>
void OctreeBuilder::keep_points(const Fate& fate, std::size_t m, const std::uint32_t* group,
                                const Clusters& level_clusters) {
  grow_to(keep_rank_, m + 1);
  exclusive_count_scan(m + 1, fate, raw(keep_rank_));
  grow_to(active_next_, m);
  for_each_index(m,
                 KeepPoints<Fate>{fate, raw(active_), raw(keep_rank_), raw(active_next_),
                                  raw(level_counts_), group, level_clusters, raw(sorted_cluster)});
  active_.swap(active_next_);
}

}  // namespace apron::planes
