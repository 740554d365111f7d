// Voting and peaks of 3D-KHT (issue 16, "The method" 2 and 3) in the spherical accumulator of
// Borrmann et al. (2011, "The 3D Hough Transform for plane detection in point clouds: a review
// and a new accumulator design"): phi (the normal's angle from +z) in equal rings, each ring cut
// in theta (around z) into as many cells as keep the cells' areas about equal, rho (the plane's
// distance from the origin, >= 0) in equal steps. A plane is n.x = rho with
// n = (sin phi cos theta, sin phi sin theta, cos phi).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/backend.hpp"
#include "kernels/planes/octree.hpp"
#include "kernels/planes/plane_math.hpp"

namespace apron::planes {

// The accumulator's shape, usable on host and device (ring_start points to memory of the side
// that uses it).
struct BallLayout {
  int phi_cells = 30;
  int rho_cells = 100;
  double rho_max = 1;
  const std::uint32_t* ring_start = nullptr;  // phi_cells + 1 entries: first theta cell of a ring

  APRON_HD int theta_cells(int ring) const {
    return static_cast<int>(ring_start[ring + 1] - ring_start[ring]);
  }
  APRON_HD double dphi() const { return kPi / phi_cells; }
  APRON_HD double dtheta(int ring) const { return 2 * kPi / theta_cells(ring); }
  APRON_HD double drho() const { return rho_max / rho_cells; }
  APRON_HD std::uint32_t cells() const { return ring_start[phi_cells] * rho_cells; }
  APRON_HD std::uint32_t cell(int ring, int t, int r) const {
    return (ring_start[ring] + static_cast<std::uint32_t>(t)) * rho_cells + r;
  }
  APRON_HD void decode(std::uint32_t cell, int& ring, int& t, int& r) const {
    r = static_cast<int>(cell % rho_cells);
    const std::uint32_t angular = cell / rho_cells;
    int lo = 0, hi = phi_cells - 1;  // the last ring whose start is <= angular
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (ring_start[mid] <= angular)
        lo = mid;
      else
        hi = mid - 1;
    }
    ring = lo;
    t = static_cast<int>(angular - ring_start[ring]);
  }
  // The cell's centre in (theta, phi, rho).
  APRON_HD void centre(std::uint32_t cell, double out[3]) const {
    int ring, t, r;
    decode(cell, ring, t, r);
    out[0] = (t + 0.5) * dtheta(ring);
    out[1] = (ring + 0.5) * dphi();
    out[2] = (r + 0.5) * drho();
  }
};

// Theta cells per ring: 2 * phi_cells * sin(phi) rounded (at least 1), so that a cell spans about
// as much theta as phi at the equator and about the same area everywhere; and their prefix sums.
std::vector<std::uint32_t> ball_ring_starts(int phi_cells);

// Calls f(neighbour) for each cell that shares a face, edge or corner with `cell`: rho +-1 and the
// theta cells of the same and the adjacent rings whose theta range touches the cell's (exact
// integer arithmetic, so that the relation is symmetric). Each neighbour once; not the cell.
// The cell visitors take host lambdas in host code (the tests' references) and device ones in
// kernels: nvcc must not check the callee's execution space per instantiation.
#if defined(__CUDACC__)
#define APRON_PLANES_HD_TEMPLATE _Pragma("nv_exec_check_disable")
#else
#define APRON_PLANES_HD_TEMPLATE
#endif

APRON_PLANES_HD_TEMPLATE
template <class F>
APRON_HD void for_each_neighbour(const BallLayout& b, std::uint32_t cell, F&& f) {
  int ring, t, r;
  b.decode(cell, ring, t, r);
  const int n = b.theta_cells(ring);
  for (int j = ring - 1; j <= ring + 1; ++j) {
    if (j < 0 || j >= b.phi_cells) continue;
    const int m = b.theta_cells(j);
    int lo, hi;
    if (j == ring) {
      lo = t - 1, hi = t + 1;
    } else {  // u/m <= (t+1)/n and t/n <= (u+1)/m
      lo = (t * m - n) >= 0 ? (t * m - n + n - 1) / n : -((n - t * m) / n);
      hi = ((t + 1) * m) / n;
    }
    if (hi - lo + 1 >= m) lo = 0, hi = m - 1;
    for (int u = lo; u <= hi; ++u) {
      const int uu = ((u % m) + m) % m;
      for (int q = r - 1; q <= r + 1; ++q) {
        if (q < 0 || q >= b.rho_cells) continue;
        if (j == ring && uu == t && q == r) continue;
        f(b.cell(j, uu, q));
      }
    }
  }
}

// A cluster's trivariate Gaussian in (theta, phi, rho).
struct VoteKernel {
  double centre[3];   // theta, phi, rho
  double inverse[6];  // inverse covariance, xx xy xz yy yz zz over (theta, phi, rho)
  double sigma[3];
  double weight;  // the vote at the centre: the cluster's point count
};

// Half-widths of a kernel are capped at this many cells per axis (a cluster so uncertain that
// its 2 sigma span more is not a plane worth a wider vote).
inline constexpr int kMaxHalfCells = 4;

// The kernel of a cluster: the plane's normal and offset have the covariance of a least-squares
// fit (tilt toward in-plane axis k: lambda_min / (count lambda_k); offset: lambda_min / count,
// coupled to the tilt through the centroid), propagated to (theta, phi, rho) through the Jacobian
// of the Cartesian-to-spherical map of the normal; plus the variance of a uniform position within
// one accumulator cell, so that a very certain cluster still votes where its cell's neighbours
// would alias it.
APRON_HD inline VoteKernel make_kernel(const Cluster& c, const BallLayout& b) {
  VoteKernel k{};
  const double* n = c.normal;
  const double count = c.count;
  const double lmin = c.eig[0] > 0 ? c.eig[0] : 0;
  double sn[6] = {0, 0, 0, 0, 0, 0};  // covariance of the normal
  const double* axes[2] = {c.axis_mid, c.axis_max};
  for (int a = 0; a < 2; ++a) {
    const double lk = c.eig[1 + a] > 0 ? c.eig[1 + a] : 1e-300;
    const double var = lmin / (count * lk);
    const double* v = axes[a];
    sn[0] += var * v[0] * v[0], sn[1] += var * v[0] * v[1], sn[2] += var * v[0] * v[2];
    sn[3] += var * v[1] * v[1], sn[4] += var * v[1] * v[2], sn[5] += var * v[2] * v[2];
  }
  auto times = [&](const double x[3], double out[3]) {  // out = Sigma_n x
    out[0] = sn[0] * x[0] + sn[1] * x[1] + sn[2] * x[2];
    out[1] = sn[1] * x[0] + sn[3] * x[1] + sn[4] * x[2];
    out[2] = sn[2] * x[0] + sn[4] * x[1] + sn[5] * x[2];
  };
  auto dot3 = [](const double x[3], const double y[3]) {
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2];
  };
  double theta = std::atan2(n[1], n[0]);
  if (theta < 0) theta += 2 * kPi;
  const double nz = n[2] > 1 ? 1 : (n[2] < -1 ? -1 : n[2]);
  const double phi = std::acos(nz);
  const double rho = dot3(n, c.mean);
  k.centre[0] = theta, k.centre[1] = phi, k.centre[2] = rho < 0 ? 0 : rho;
  // Jacobian rows of theta = atan2(ny, nx) and phi = acos(nz) in n.
  const double w = n[0] * n[0] + n[1] * n[1] > 1e-12 ? n[0] * n[0] + n[1] * n[1] : 1e-12;
  const double s = std::sqrt(1 - nz * nz) > 1e-6 ? std::sqrt(1 - nz * nz) : 1e-6;
  const double dtheta[3] = {-n[1] / w, n[0] / w, 0};
  const double dphi[3] = {0, 0, -1 / s};
  double g[3], st[3], sp[3];
  times(c.mean, g);
  times(dtheta, st);
  times(dphi, sp);
  int ring = static_cast<int>(phi / b.dphi());
  ring = ring < 0 ? 0 : (ring >= b.phi_cells ? b.phi_cells - 1 : ring);
  const double q_theta = b.dtheta(ring), q_phi = b.dphi(), q_rho = b.drho();
  double cov[6];
  cov[0] = dot3(dtheta, st) + q_theta * q_theta / 12;
  cov[1] = dot3(dtheta, sp);
  cov[2] = dot3(dtheta, g);
  cov[3] = dot3(dphi, sp) + q_phi * q_phi / 12;
  cov[4] = dot3(dphi, g);
  cov[5] = dot3(c.mean, g) + lmin / count + q_rho * q_rho / 12;
  // Inverse by the adjugate (the added cell variance keeps the matrix positive definite).
  const double a = cov[0], bb = cov[1], cc = cov[2], d = cov[3], e = cov[4], f = cov[5];
  const double A = d * f - e * e, B = cc * e - bb * f, C = bb * e - cc * d;
  const double det = a * A + bb * B + cc * C;
  k.inverse[0] = A / det;
  k.inverse[1] = B / det;
  k.inverse[2] = C / det;
  k.inverse[3] = (a * f - cc * cc) / det;
  k.inverse[4] = (bb * cc - a * e) / det;
  k.inverse[5] = (a * d - bb * bb) / det;
  k.sigma[0] = std::sqrt(cov[0]);
  k.sigma[1] = std::sqrt(cov[3]);
  k.sigma[2] = std::sqrt(cov[5]);
  k.weight = count;
  return k;
}

// theta difference wrapped to [-pi, pi].
APRON_HD inline double wrap_angle(double d) {
  while (d > kPi) d -= 2 * kPi;
  while (d < -kPi) d += 2 * kPi;
  return d;
}

// The vote of kernel k at a point (theta, phi, rho): weight * exp(-d^2 / 2), d the Mahalanobis
// distance.
APRON_HD inline double kernel_vote(const VoteKernel& k, const double at[3]) {
  const double d[3] = {wrap_angle(at[0] - k.centre[0]), at[1] - k.centre[1], at[2] - k.centre[2]};
  const double* m = k.inverse;
  const double q = m[0] * d[0] * d[0] + m[3] * d[1] * d[1] + m[5] * d[2] * d[2] +
                   2 * (m[1] * d[0] * d[1] + m[2] * d[0] * d[2] + m[4] * d[1] * d[2]);
  return k.weight * std::exp(-0.5 * (q > 0 ? q : 0));
}

APRON_HD inline int clamp_int(int v, int lo, int hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// The cells a kernel votes into: rings ring_lo..ring_hi, in each a run of theta cells (wrapped
// around the ring), rho cells r_lo..r_hi; at most kKernelSpan along each axis.
inline constexpr int kKernelSpan = 2 * kMaxHalfCells + 1;

struct KernelBox {
  int ring_lo, ring_hi, r_lo, r_hi;
  APRON_HD KernelBox(const VoteKernel& k, const BallLayout& b) {
    const double dphi = b.dphi(), drho = b.drho();
    const int ring_c = clamp_int(static_cast<int>(k.centre[1] / dphi), 0, b.phi_cells - 1);
    ring_lo = clamp_int(static_cast<int>(std::floor((k.centre[1] - 2 * k.sigma[1]) / dphi)),
                        ring_c - kMaxHalfCells, ring_c);
    ring_hi = clamp_int(static_cast<int>(std::floor((k.centre[1] + 2 * k.sigma[1]) / dphi)), ring_c,
                        ring_c + kMaxHalfCells);
    const int r_c = clamp_int(static_cast<int>(k.centre[2] / drho), 0, b.rho_cells - 1);
    r_lo = clamp_int(static_cast<int>(std::floor((k.centre[2] - 2 * k.sigma[2]) / drho)),
                     r_c - kMaxHalfCells, r_c);
    r_hi = clamp_int(static_cast<int>(std::floor((k.centre[2] + 2 * k.sigma[2]) / drho)), r_c,
                     r_c + kMaxHalfCells);
    ring_lo = ring_lo < 0 ? 0 : ring_lo;
    ring_hi = ring_hi < b.phi_cells ? ring_hi : b.phi_cells - 1;
    r_lo = r_lo < 0 ? 0 : r_lo;
    r_hi = r_hi < b.rho_cells ? r_hi : b.rho_cells - 1;
  }
  // The theta cells t_lo..t_hi of ring j (unwrapped; the whole ring if the span covers it).
  APRON_HD static void theta_range(const VoteKernel& k, const BallLayout& b, int j, int& t_lo,
                                   int& t_hi) {
    const int m = b.theta_cells(j);
    const double dt = 2 * kPi / m;
    const int t_c = static_cast<int>(std::floor(k.centre[0] / dt));
    t_lo = clamp_int(static_cast<int>(std::floor((k.centre[0] - 2 * k.sigma[0]) / dt)),
                     t_c - kMaxHalfCells, t_c);
    t_hi = clamp_int(static_cast<int>(std::floor((k.centre[0] + 2 * k.sigma[0]) / dt)), t_c,
                     t_c + kMaxHalfCells);
    if (t_hi - t_lo + 1 >= m) t_lo = 0, t_hi = m - 1;
  }
  // The vote of kernel k in the cell of ring j, unwrapped theta index t, rho index r.
  APRON_HD static double vote_at(const VoteKernel& k, const BallLayout& b, int j, int t, int r,
                                 std::uint32_t& cell) {
    const int m = b.theta_cells(j);
    const double dt = 2 * kPi / m;
    const int tt = ((t % m) + m) % m;
    const double at[3] = {(tt + 0.5) * dt, (j + 0.5) * b.dphi(), (r + 0.5) * b.drho()};
    cell = b.cell(j, tt, r);
    return kernel_vote(k, at);
  }
};

// Calls f(cell, vote) for every cell within 2 sigma of the kernel's centre along each axis (at
// most kMaxHalfCells cells either side of the centre's cell), the centre's cell included.
APRON_PLANES_HD_TEMPLATE
template <class F>
APRON_HD void for_each_kernel_cell(const VoteKernel& k, const BallLayout& b, F&& f) {
  const KernelBox box(k, b);
  for (int j = box.ring_lo; j <= box.ring_hi; ++j) {
    int t_lo, t_hi;
    KernelBox::theta_range(k, b, j, t_lo, t_hi);
    for (int t = t_lo; t <= t_hi; ++t) {
      for (int r = box.r_lo; r <= box.r_hi; ++r) {
        std::uint32_t cell;
        const double v = KernelBox::vote_at(k, b, j, t, r, cell);
        f(cell, v);
      }
    }
  }
}

// How votes reach the accumulator's cells.
enum class Voting {
  sort,    // (cell, vote) pairs sorted by cell, each run summed: the same sums on every run
  atomic,  // each vote added atomically (float64) into its cell: sums depend on the order
};

// The accumulator: its layout on the device and its cells' votes.
class Accumulator {
 public:
  Accumulator(int phi_cells, int rho_cells, double rho_max);
  BallLayout layout() const;       // device pointers
  BallLayout host_layout() const;  // host pointers
  std::size_t cells() const { return votes.size(); }

  DeviceVector<double> votes;     // summed over ranks after reduce (caller's MPI)
  DeviceVector<double> smoothed;  // low-pass filtered votes

  // Kernels of the clusters and their votes into `votes` (zeroed first). Voting::sort: each
  // kernel writes its (cell, vote) pairs at its own offset, the pairs are sorted by cell and each
  // run summed; no atomics, so no contention on popular cells, and the same sums on any run.
  // Voting::atomic: one thread per cluster and cell of its kernel's box (kKernelSpan^3 each)
  // adds its vote into the cell with a float64 atomic; the same votes, summed in an order that
  // varies from run to run (round-off only).
  void vote(const DeviceVector<Cluster>& clusters, Voting voting = Voting::sort);
  // The low-pass filter: half the cell's votes plus half its neighbours' mean.
  void smooth();
  // Peaks: voted cells whose smoothed value is at least min_value and above every neighbour's
  // (ties: the lower cell index wins, so two neighbours are never both peaks). Sorted by
  // smoothed value, highest first (ties by cell). Waits for the device.
  std::vector<std::uint32_t> peaks(double min_value);

  // The last Voting::sort vote()'s pairs sorted by cell (stable): cell, the pair's index in the
  // kernels' order (each kernel's cells in for_each_kernel_cell's order), its vote. For tests.
  struct VotePairs {
    std::vector<std::uint32_t> cells, ids;
    std::vector<double> values;
  };
  VotePairs sorted_pairs() const;

  // The last vote()'s clusters' kernels: the first kernel_count (grown, never shrunk: both
  // rounds vote here).
  DeviceVector<VoteKernel> kernels;
  std::size_t kernel_count = 0;
  std::size_t vote_count = 0;  // pairs of the last vote()

 private:
  int phi_cells_, rho_cells_;
  double rho_max_;
  std::vector<std::uint32_t> host_ring_start_;
  DeviceVector<std::uint32_t> ring_start_;
  // Scratch, grown and never shrunk (both rounds vote here): the first entries are the last
  // vote()'s or peaks()'s.
  DeviceVector<std::uint32_t> vote_offset_, vote_cell_, vote_id_, run_start_, peak_cells_;
  DeviceVector<std::uint32_t> vote_cell_alt_, vote_id_alt_;  // the vote sort's double buffers
  DeviceVector<double> vote_value_, sorted_value_, run_sum_, peak_values_;
  DeviceVector<std::uint8_t> peak_flag_;  // per cell: whether it is a peak

  void vote_sorted(std::size_t n, const BallLayout& b);
  void vote_atomic(std::size_t n, const BallLayout& b);
};

// Which peak each cluster belongs to (-1: none): among the peaks whose cell centre lies within
// 2 sigma + one cell of the cluster's kernel centre along each axis, the nearest in Mahalanobis
// distance (ties: the lower peak index).
// The first `count` kernels; cluster_peak's first `count` entries (it grows, never shrinks).
void assign_clusters(const DeviceVector<VoteKernel>& kernels, std::size_t count,
                     const BallLayout& layout, const DeviceVector<std::uint32_t>& peak_cells,
                     DeviceVector<std::int32_t>& cluster_peak);

// Whether the centre of peak cell `cell` lies within 2 sigma + one cell of kernel k's centre
// along each axis; if so, its Mahalanobis distance q (nearest_peak's measure).
APRON_HD inline bool peak_distance(const VoteKernel& k, const BallLayout& b, std::uint32_t cell,
                                   double& q) {
  double at[3];
  b.centre(cell, at);
  int ring, t, r;
  b.decode(cell, ring, t, r);
  const double d[3] = {wrap_angle(at[0] - k.centre[0]), at[1] - k.centre[1], at[2] - k.centre[2]};
  const double reach[3] = {2 * k.sigma[0] + b.dtheta(ring), 2 * k.sigma[1] + b.dphi(),
                           2 * k.sigma[2] + b.drho()};
  bool inside = true;
  for (int a = 0; a < 3; ++a) inside = inside && std::fabs(d[a]) <= reach[a];
  if (!inside) return false;
  const double* m = k.inverse;
  q = m[0] * d[0] * d[0] + m[3] * d[1] * d[1] + m[5] * d[2] * d[2] +
      2 * (m[1] * d[0] * d[1] + m[2] * d[0] * d[2] + m[4] * d[1] * d[2]);
  return true;
}

// The same decision for one kernel (host and device; the portable loop calls it).
APRON_HD inline int nearest_peak(const VoteKernel& k, const BallLayout& b,
                                 const std::uint32_t* peak_cells, int peaks) {
  int best = -1;
  double best_q = 0;
  for (int p = 0; p < peaks; ++p) {
    double q;
    if (!peak_distance(k, b, peak_cells[p], q)) continue;
    if (best < 0 || q < best_q) best = p, best_q = q;
  }
  return best;
}

}  // namespace apron::planes
