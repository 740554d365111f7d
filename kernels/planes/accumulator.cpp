#include "kernels/planes/accumulator.hpp"
#include "kernels/common/algorithms.hpp"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "kernels/common/primitives.hpp"

namespace apron::planes {

std::vector<std::uint32_t> ball_ring_starts(int phi_cells) {
  std::vector<std::uint32_t> start(phi_cells + 1, 0);
  for (int j = 0; j < phi_cells; ++j) {
    const double phi = (j + 0.5) * kPi / phi_cells;
    const long cells = std::max(1L, std::lround(2.0 * phi_cells * std::sin(phi)));
    start[j + 1] = start[j] + static_cast<std::uint32_t>(cells);
  }
  return start;
}

namespace {

struct MakeKernels {
  const Cluster* clusters;
  BallLayout layout;
  VoteKernel* kernels;
  std::uint32_t* counts;
  APRON_HD void operator()(std::size_t c) const {
    const VoteKernel k = make_kernel(clusters[c], layout);
    kernels[c] = k;
    const KernelBox box(k, layout);  // the cells for_each_kernel_cell visits, counted
    std::uint32_t count = 0;
    for (int j = box.ring_lo; j <= box.ring_hi; ++j) {
      int t_lo, t_hi;
      KernelBox::theta_range(k, layout, j, t_lo, t_hi);
      count += static_cast<std::uint32_t>((t_hi - t_lo + 1) * (box.r_hi - box.r_lo + 1));
    }
    counts[c] = count;
  }
};

// Pair i of the kernels' (cell, vote) pairs, a thread each: its kernel is the last whose offset
// is at most i, its cell the one at its rank within the kernel's box in for_each_kernel_cell's
// order (rings, then theta, then rho). A thread per kernel wrote its pairs in turn, and the few
// kernels of hundreds of cells (up to kKernelSpan^3) made the launch's tail: 0.1 ms at 1M points.
struct WriteVotes {
  const VoteKernel* kernels;
  BallLayout layout;
  const std::uint32_t* offset;  // exclusive scan of the kernels' pair counts
  std::uint32_t kernel_count;
  std::uint32_t* cell;
  std::uint32_t* id;
  double* value;
  APRON_HD std::uint32_t kernel_of(std::uint32_t i) const {
    std::uint32_t lo = 0, hi = kernel_count;  // the first kernel whose offset is past i
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo) / 2;
      if (offset[mid] <= i)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo - 1;
  }
  APRON_HD void operator()(std::size_t pair) const {
    const auto i = static_cast<std::uint32_t>(pair);
    const std::uint32_t c = kernel_of(i);
    const VoteKernel& k = kernels[c];
    const KernelBox box(k, layout);
    const auto rhos = static_cast<std::uint32_t>(box.r_hi - box.r_lo + 1);
    std::uint32_t rank = i - offset[c];
    for (int j = box.ring_lo; j <= box.ring_hi; ++j) {
      int t_lo, t_hi;
      KernelBox::theta_range(k, layout, j, t_lo, t_hi);
      const std::uint32_t in_ring = static_cast<std::uint32_t>(t_hi - t_lo + 1) * rhos;
      if (rank < in_ring) {
        const int t = t_lo + static_cast<int>(rank / rhos);
        const int r = box.r_lo + static_cast<int>(rank % rhos);
        std::uint32_t at;
        value[i] = KernelBox::vote_at(k, layout, j, t, r, at);
        cell[i] = at;
        id[i] = i;
        return;
      }
      rank -= in_ring;
    }
  }
};

// A float64 add that concurrent threads may make to the same cell (CUDA: atomicAdd; OpenMP and
// the host: std::atomic_ref's compare-and-swap loop).
APRON_HD inline void add_atomic(double* at, double v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(at, v);
#else
  std::atomic_ref<double>(*at).fetch_add(v, std::memory_order_relaxed);
#endif
}

// One index per cluster and cell of its kernel's box (ring, theta, rho offsets, rho fastest so
// that neighbouring threads add into neighbouring cells); offsets beyond the box do nothing.
struct AtomicVotes {
  const VoteKernel* kernels;
  BallLayout layout;
  double* votes;
  APRON_HD void operator()(std::size_t i) const {
    constexpr std::size_t span3 = std::size_t{kKernelSpan} * kKernelSpan * kKernelSpan;
    const std::size_t c = i / span3;
    const int local = static_cast<int>(i % span3);
    const VoteKernel& k = kernels[c];
    const KernelBox box(k, layout);
    const int j = box.ring_lo + local / (kKernelSpan * kKernelSpan);
    const int r = box.r_lo + local % kKernelSpan;
    if (j > box.ring_hi || r > box.r_hi) return;
    int t_lo, t_hi;
    KernelBox::theta_range(k, layout, j, t_lo, t_hi);
    const int t = t_lo + (local / kKernelSpan) % kKernelSpan;
    if (t > t_hi) return;
    std::uint32_t cell;
    const double v = KernelBox::vote_at(k, layout, j, t, r, cell);
    add_atomic(votes + cell, v);
  }
};

struct GatherValues {
  const double* value;
  const std::uint32_t* id;
  double* sorted;
  APRON_HD void operator()(std::size_t i) const { sorted[i] = value[id[i]]; }
};

// Run r of the sorted votes (cells, from starts[r] on) into its cell.
struct ScatterSums {
  const std::uint32_t* cells;
  const std::uint32_t* starts;
  const double* sums;
  double* votes;
  APRON_HD void operator()(std::size_t r) const { votes[cells[starts[r]]] = sums[r]; }
};

// Whether sorted vote i begins a run of one cell.
struct RunHead {
  const std::uint32_t* cells;
  APRON_HD bool operator()(std::uint32_t i) const { return i == 0 || cells[i] != cells[i - 1]; }
};

struct ReadCount {
  const std::uint32_t* in;
  APRON_HD std::uint32_t operator()(std::size_t i) const { return in[i]; }
};

struct Smooth {
  BallLayout layout;
  const double* votes;
  double* smoothed;
  APRON_HD void operator()(std::size_t c) const {
    double sum = 0;
    int count = 0;
    for_each_neighbour(layout, static_cast<std::uint32_t>(c), [&](std::uint32_t nb) {
      sum += votes[nb];
      ++count;
    });
    smoothed[c] = 0.5 * votes[c] + (count > 0 ? 0.5 * sum / count : 0.5 * votes[c]);
  }
};

struct IsPeak {
  BallLayout layout;
  const double* votes;
  const double* smoothed;
  double min_value;
  APRON_HD bool operator()(std::uint32_t c) const {
    const double s = smoothed[c];
    if (!(votes[c] > 0) || s < min_value) return false;
    bool highest = true;
    for_each_neighbour(layout, c, [&](std::uint32_t nb) {
      const double o = smoothed[nb];
      if (o > s || (o == s && nb < c)) highest = false;
    });
    return highest;
  }
};

// Whether each cell is a peak, a thread a cell: the selection's few blocks (CUB's tiles of
// thousands of cells) tested their cells one after another, a neighbour walk each, 0.12 ms at 1M.
struct MarkPeaks {
  IsPeak is_peak;
  std::uint8_t* flag;
  APRON_HD void operator()(std::size_t c) const {
    flag[c] = is_peak(static_cast<std::uint32_t>(c)) ? 1 : 0;
  }
};

struct GatherPeakValues {
  const std::uint32_t* cells;
  const double* smoothed;
  double* values;
  APRON_HD void operator()(std::size_t i) const { values[i] = smoothed[cells[i]]; }
};

struct Zero {
  double* values;
  APRON_HD void operator()(std::size_t i) const { values[i] = 0; }
};

#if !defined(__CUDACC__)  // the GPU takes a warp per kernel (assign_clusters_kernel)
struct AssignClusters {
  const VoteKernel* kernels;
  BallLayout layout;
  const std::uint32_t* peaks;
  int peak_count;
  std::int32_t* cluster_peak;
  APRON_HD void operator()(std::size_t c) const {
    cluster_peak[c] = nearest_peak(kernels[c], layout, peaks, peak_count);
  }
};
#else
constexpr int kWarp = 32;

// A warp per kernel, lane l testing peaks l, l + 32, ...; the lanes' choices are merged by
// nearest_peak's rule (the least distance, then the lower peak index), so the warp picks its
// peak. A thread per kernel testing every peak in turn left all but a few SMs idle (0.04 ms at
// 1M points: ~2.7k kernels, 27 peaks).
__global__ void __launch_bounds__(kBlockThreads)
    assign_clusters_kernel(std::size_t count, const VoteKernel* kernels, BallLayout layout,
                           const std::uint32_t* peaks, int peak_count, std::int32_t* cluster_peak) {
  const std::size_t c = (blockIdx.x * std::size_t{kBlockThreads} + threadIdx.x) / kWarp;
  if (c >= count) return;  // the whole warp: the shuffles below need all its lanes
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const VoteKernel& k = kernels[c];
  int best = -1;
  double best_q = 0;
  for (int p = lane; p < peak_count; p += kWarp) {
    double q;
    if (peak_distance(k, layout, peaks[p], q) && (best < 0 || q < best_q)) best = p, best_q = q;
  }
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const int other = __shfl_xor_sync(0xffffffffu, best, offset);
    const double other_q = __shfl_xor_sync(0xffffffffu, best_q, offset);
    if (other >= 0 && (best < 0 || other_q < best_q || (other_q == best_q && other < best)))
      best = other, best_q = other_q;
  }
  if (lane == 0) cluster_peak[c] = best;
}
#endif

}  // namespace

Accumulator::Accumulator(int phi_cells, int rho_cells, double rho_max)
    : phi_cells_(phi_cells), rho_cells_(rho_cells), rho_max_(rho_max) {
  if (phi_cells < 2 || rho_cells < 1 || !(rho_max > 0))
    throw std::invalid_argument("accumulator: needs phi_cells >= 2, rho_cells >= 1, rho_max > 0");
  host_ring_start_ = ball_ring_starts(phi_cells);
  upload(ring_start_, host_ring_start_);
  votes.resize(static_cast<std::size_t>(host_ring_start_.back()) * rho_cells);
  smoothed.resize(votes.size());
}

BallLayout Accumulator::layout() const {
  return {phi_cells_, rho_cells_, rho_max_, raw(ring_start_)};
}
BallLayout Accumulator::host_layout() const {
  return {phi_cells_, rho_cells_, rho_max_, host_ring_start_.data()};
}

void Accumulator::vote(const DeviceVector<Cluster>& clusters, Voting voting) {
  const std::size_t n = clusters.size();
  const BallLayout b = layout();
  grow_to(kernels, n);
  kernel_count = n;
  grow_to(vote_offset_, n);
  for_each_index(n, MakeKernels{raw(clusters), b, raw(kernels), raw(vote_offset_)});
  const std::uint64_t total = n ? reduce_sum(vote_offset_, n) : 0;
  if (total >= (std::uint64_t{1} << 32))
    throw std::runtime_error("voting: more than 2^32 votes on one rank");
  vote_count = total;
  for_each_index(votes.size(), Zero{raw(votes)});
  if (total == 0) return;
  if (voting == Voting::atomic)
    vote_atomic(n, b);
  else
    vote_sorted(n, b);
}

void Accumulator::vote_atomic(std::size_t n, const BallLayout& b) {
  constexpr std::size_t span3 = std::size_t{kKernelSpan} * kKernelSpan * kKernelSpan;
  for_each_index(n * span3, AtomicVotes{raw(kernels), b, raw(votes)});
}

void Accumulator::vote_sorted(std::size_t n, const BallLayout& b) {
  const std::size_t total = vote_count;
  exclusive_scan(n, ReadCount{raw(vote_offset_)}, raw(vote_offset_));  // in place
  grow_to(vote_cell_, total);
  grow_to(vote_id_, total);
  grow_to(vote_value_, total);
  for_each_index(total,
                 WriteVotes{raw(kernels), b, raw(vote_offset_), static_cast<std::uint32_t>(n),
                            raw(vote_cell_), raw(vote_id_), raw(vote_value_)});
  // With kept double buffers: the sorted pairs are swapped in, not copied back.
  sort_pairs(vote_cell_, vote_id_, total, key_bits(votes.size()), vote_cell_alt_, vote_id_alt_);
  grow_to(sorted_value_, total);
  for_each_index(total, GatherValues{raw(vote_value_), raw(vote_id_), raw(sorted_value_)});
  grow_to(run_start_, total + 1);
  const std::size_t runs = copy_indices_if(total, raw(run_start_), RunHead{raw(vote_cell_)});
  write_element(run_start_, runs, static_cast<std::uint32_t>(total));
  segmented_reduce(sorted_value_, run_start_, runs, Reduction::sum, run_sum_);
  for_each_index(runs, ScatterSums{raw(vote_cell_), raw(run_start_), raw(run_sum_), raw(votes)});
}

void Accumulator::smooth() {
  for_each_index(votes.size(), Smooth{layout(), raw(votes), raw(smoothed)});
}

Accumulator::VotePairs Accumulator::sorted_pairs() const {
  VotePairs pairs;
  pairs.cells = to_host(vote_cell_, vote_count);
  pairs.ids = to_host(vote_id_, vote_count);
  pairs.values = to_host(sorted_value_, vote_count);
  return pairs;
}

std::vector<std::uint32_t> Accumulator::peaks(double min_value) {
  grow_to(peak_cells_, votes.size());
  grow_to(peak_flag_, votes.size());
  for_each_index(votes.size(), MarkPeaks{IsPeak{layout(), raw(votes), raw(smoothed), min_value},
                                         raw(peak_flag_)});
  const std::size_t count = copy_flagged_indices(raw(peak_flag_), votes.size(), raw(peak_cells_));
  // Only the peaks' values come to the host (the accumulator may hold millions of cells).
  grow_to(peak_values_, count);
  for_each_index(count, GatherPeakValues{raw(peak_cells_), raw(smoothed), raw(peak_values_)});
  std::vector<std::uint32_t> cells(count);
  std::vector<double> values(count);
  apron::copy(peak_cells_.begin(), peak_cells_.begin() + count, cells.begin());
  apron::copy(peak_values_.begin(), peak_values_.begin() + static_cast<std::ptrdiff_t>(count),
              values.begin());
  std::vector<std::size_t> order(count);
  for (std::size_t k = 0; k < count; ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return values[a] != values[b] ? values[a] > values[b] : cells[a] < cells[b];
  });
  std::vector<std::uint32_t> sorted(count);
  for (std::size_t k = 0; k < count; ++k) sorted[k] = cells[order[k]];
  return sorted;
}

void assign_clusters(const DeviceVector<VoteKernel>& kernels, std::size_t count,
                     const BallLayout& layout, const DeviceVector<std::uint32_t>& peak_cells,
                     DeviceVector<std::int32_t>& cluster_peak) {
  if (count > kernels.size()) throw std::invalid_argument("assign_clusters: count exceeds kernels");
  grow_to(cluster_peak, count);
#if defined(__CUDACC__)
  if (count == 0) return;
  const std::size_t blocks = (count * kWarp + kBlockThreads - 1) / kBlockThreads;
  assign_clusters_kernel<<<static_cast<unsigned>(blocks), kBlockThreads>>>(
      count, raw(kernels), layout, raw(peak_cells), static_cast<int>(peak_cells.size()),
      raw(cluster_peak));
  check_launch("assign_clusters_kernel");
#else
  for_each_index(count, AssignClusters{raw(kernels), layout, raw(peak_cells),
                                       static_cast<int>(peak_cells.size()), raw(cluster_peak)});
#endif
}

}  // namespace apron::planes
