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

struct WriteVotes {
  const VoteKernel* kernels;
  BallLayout layout;
  const std::uint32_t* offset;
  std::uint32_t* cell;
  std::uint32_t* id;
  double* value;
  APRON_HD void operator()(std::size_t c) const {
    std::uint32_t i = offset[c];
    for_each_kernel_cell(kernels[c], layout, [&](std::uint32_t at, double v) {
      cell[i] = at;
      id[i] = i;
      value[i] = v;
      ++i;
    });
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
  for_each_index(n, WriteVotes{raw(kernels), b, raw(vote_offset_), raw(vote_cell_), raw(vote_id_),
                               raw(vote_value_)});
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

std::vector<std::uint32_t> Accumulator::peaks(double min_value) {
  grow_to(peak_cells_, votes.size());
  const std::size_t count = copy_indices_if(votes.size(), raw(peak_cells_),
                                            IsPeak{layout(), raw(votes), raw(smoothed), min_value});
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
  for_each_index(count, AssignClusters{raw(kernels), layout, raw(peak_cells),
                                       static_cast<int>(peak_cells.size()), raw(cluster_peak)});
}

}  // namespace apron::planes
