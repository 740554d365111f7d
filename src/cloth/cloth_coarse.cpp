// Vertex block descent's coarse correction (cloth.implicit.coarse): Gauss-Seidel sweeps remove
// the error that varies from vertex to vertex and barely touch the smooth error (on the 1 mm sheet
// at 1/240 s, dt^2 H_ii / m ~ 5e6: ~1e5 sweeps a step at 1M vertices). Between sweeps, the step's
// incremental potential Phi(v) is minimised to second order over a coarse space v + P c: Galerkin,
// (P^T A P) c = P^T R, A = M' + dt^2 H at the iterate, R = -grad Phi there, then v += alpha P c
// with Newton's line search on the whole sheet's Phi (so no correction raises it).
//
// The coarse space: multilinear hat functions on a lattice over the bounding box of the rest
// positions, `factor` shortest edges apart (an axis along which the box is thinner than half a
// spacing gets one node: a flat sheet's lattice is 2D). They reproduce every linear field of the
// rest positions, translations included, and need nothing of the mesh but its rest positions, so
// any sheet the cloth accepts has one; on a curved or folded rest mesh two parts of the sheet
// close in rest space share coarse unknowns (a worse, still valid, coarse space: the line search
// keeps Phi falling). Pinned rows and the colliders' normal parts are filtered out of P.
//
// The coarse operator is probed, as H is everywhere else here (finite differences of the exact
// gradient): the hat functions of one colour (lattice index mod p per axis) displaced together,
// one axis at a time, A times that sum, and each row's product attributed to the colour's node
// nearest to it. That is exact when no row is within the Hessian's reach (four rings) of two
// supports of one colour: p = 3 when the spacing exceeds twice the reach along every axis, else
// p = 4 (the spacing must exceed the reach: refused otherwise). 3 p^2 products a build on a flat
// sheet (27 or 48), at every correction, since H changes with the iterate. The coarse matrix is
// banded (nodes couple within two lattice steps) and factored on the host by a banded Cholesky
// (shifted where H's compression makes it indefinite). Each rank assembles its owned rows' parts
// in fixed point on the device (only the band comes to the host) and the integers are summed over
// ranks, so every rank factors the same matrix and N ranks correct as one does, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <span>
#include <string>

#include "cloth/cloth_solver.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"

namespace apron::cloth {

namespace {

constexpr std::uint32_t kNoNode = kNoOwner;

// The hat function's weight along one axis at lattice coordinate u for node j.
double hat(double u, int j) {
  return std::max(0.0, 1.0 - std::abs(u - j));
}

// The node of residue r (mod p) nearest to u, or -1 if it lies outside [0, count).
int nearest_of_residue(double u, int r, int p, int count) {
  const int base = static_cast<int>(std::floor(u));
  int best = -1;
  double distance = std::numeric_limits<double>::infinity();
  for (int j = base - p; j <= base + p; ++j) {
    if (((j % p) + p) % p != r) continue;
    if (std::abs(u - j) < distance) {
      distance = std::abs(u - j);
      best = j;
    }
  }
  return best >= 0 && best < count ? best : -1;
}

// Whether two_level applies Ac^-1 as a dense product on the device. auto: where the device is a
// GPU (the host's banded solves are sequential and leave it waiting: ~7 ms an application at 1M
// vertices against ~0.1 ms for the product) and the inverse's n^2 doubles fit in 8 GiB (n = 32768:
// beyond it, forming the inverse at each build costs seconds).
bool dense_coarse_solve(IntegratorConfig::CoarseSolve solve, std::size_t unknowns) {
  switch (solve) {
    case IntegratorConfig::CoarseSolve::banded:
      return false;
    case IntegratorConfig::CoarseSolve::dense:
      return true;
    case IntegratorConfig::CoarseSolve::automatic:
      break;
  }
#if defined(APRON_DEVICE_CUDA)
  return unknowns <= 32768;
#else
  (void)unknowns;
  return false;
#endif
}

}  // namespace

void ClothSolver::setup_coarse(const HostMesh& mesh) {
  CoarseWork& k = coarse_;
  const double factor = case_.integrator.coarse_factor;
  if (!(factor > 0)) return;
  // The rows' rest positions and the box, and how far one Hessian row reaches along each axis
  // (four rings: four times the longest edge's extent along it).
  double low[3], high[3], reach[3] = {0, 0, 0};
  for (int a = 0; a < 3; ++a) low[a] = high[a] = mesh.positions.empty() ? 0 : mesh.positions[0][a];
  for (const auto& p : mesh.positions)
    for (int a = 0; a < 3; ++a) {
      low[a] = std::min(low[a], p[a]);
      high[a] = std::max(high[a], p[a]);
    }
  for (const auto& t : mesh.triangles)
    for (int e = 0; e < 3; ++e)
      for (int a = 0; a < 3; ++a)
        reach[a] = std::max(reach[a],
                            std::abs(mesh.positions[t[e]][a] - mesh.positions[t[(e + 1) % 3]][a]));
  const double spacing = factor * shortest_.length;
  for (int a = 0; a < 3; ++a) {
    reach[a] *= kGhostRings;
    const double extent = high[a] - low[a];
    k.count[a] = extent < 0.5 * spacing ? 1 : 1 + static_cast<int>(std::ceil(extent / spacing));
    k.origin[a] = low[a];
    k.spacing[a] = k.count[a] > 1 ? extent / (k.count[a] - 1) : 1;
    k.period[a] = 1;
    if (k.count[a] == 1) continue;
    if (!(k.spacing[a] > reach[a])) {
      char text[320];
      std::snprintf(text, sizeof text,
                    ": key 'cloth.implicit.coarse.factor' (%g): its lattice spacing, %.3g m along "
                    "axis %d, is not above the Hessian's reach there (four rings, %.3g m); raise "
                    "it",
                    factor, k.spacing[a], a, reach[a]);
      throw config::ConfigError(config_.file + text);
    }
    // (With no more nodes than the period, every node is a residue of its own.)
    k.period[a] = std::min(k.spacing[a] > 2 * reach[a] ? 3 : 4, k.count[a]);
  }
  // Node numbering: the axis with the most nodes varies slowest (the narrowest band).
  int order[3] = {0, 1, 2};
  std::sort(order, order + 3, [&](int x, int y) { return k.count[x] < k.count[y]; });
  std::size_t stride = 1;
  for (int a : order) {
    k.stride[a] = stride;
    stride *= static_cast<std::size_t>(k.count[a]);
  }
  k.nodes = stride;
  std::size_t far = 0;  // the largest index difference of two coupled nodes (two lattice steps)
  for (int a = 0; a < 3; ++a)
    if (k.count[a] > 1) far += 2 * k.stride[a];
  k.band = 3 * far + 2;
  const std::size_t unknowns = 3 * k.nodes;
  if (static_cast<double>(unknowns) * static_cast<double>(2 * k.band + 1) > 4e8) {
    char text[320];
    std::snprintf(text, sizeof text,
                  ": key 'cloth.implicit.coarse.factor' (%g): %zu coarse nodes of band %zu would "
                  "need %.3g GB of host memory; raise it",
                  factor, k.nodes, k.band,
                  static_cast<double>(unknowns) * static_cast<double>(2 * k.band + 1) * 8e-9);
    throw config::ConfigError(config_.file + text);
  }
  // The owned rows' lattice coordinates.
  const auto& ids = halo_.global_ids();
  k.lattice.resize(3 * owned_);
  for (std::size_t i = 0; i < owned_; ++i)
    for (int a = 0; a < 3; ++a)
      k.lattice[3 * i + static_cast<std::size_t>(a)] =
          k.count[a] > 1
              ? std::clamp((mesh.positions[static_cast<std::size_t>(ids[i])][a] - k.origin[a]) /
                               k.spacing[a],
                           0.0, static_cast<double>(k.count[a] - 1))
              : 0.0;
  k.pinned = to_host(pinned_, owned_);
  k.colours = k.period[0] * k.period[1] * k.period[2];
  // Each row's corners (none where pinned), and per probing colour its node (the colour's
  // nearest per axis) and its hat weight there.
  k.corner_offsets.assign(1, 0);
  k.corner_node.clear();
  k.corner_weight.clear();
  std::size_t node[8];
  double weight[8];
  for (std::size_t i = 0; i < owned_; ++i) {
    const int n = k.pinned[i] ? 0 : coarse_corners(i, node, weight);
    for (int c = 0; c < n; ++c) {
      k.corner_node.push_back(static_cast<std::uint32_t>(node[c]));
      k.corner_weight.push_back(weight[c]);
    }
    k.corner_offsets.push_back(static_cast<std::uint32_t>(k.corner_node.size()));
  }
  k.owner.assign(static_cast<std::size_t>(k.colours) * owned_, kNoNode);
  k.share.assign(static_cast<std::size_t>(k.colours) * owned_, 0.0);
  for (int colour = 0; colour < k.colours; ++colour) {
    const int residue[3] = {colour % k.period[0], (colour / k.period[0]) % k.period[1],
                            colour / (k.period[0] * k.period[1])};
    const std::size_t base = static_cast<std::size_t>(colour) * owned_;
    // Each row's node of this colour (nearest per axis) and its hat weight there.
    // Rows outside every support of the colour may still see one within the reach: attributed
    // to the nearest node all the same (share 0: not displaced).
    for (std::size_t i = 0; i < owned_; ++i) {
      double s = 1;
      std::size_t index = 0;
      bool found = true;
      for (int a = 0; a < 3; ++a) {
        const double u = k.lattice[3 * i + static_cast<std::size_t>(a)];
        const int j = nearest_of_residue(u, residue[a], k.period[a], k.count[a]);
        if (j < 0) {
          found = false;
          break;
        }
        if (k.count[a] > 1) s *= hat(u, j);
        index += static_cast<std::size_t>(j) * k.stride[a];
      }
      if (!found) continue;
      k.owner[base + i] = static_cast<std::uint32_t>(index);
      k.share[base + i] = k.pinned[i] ? 0 : s;
    }
  }
  // The operator's probes run on the device (both integrators), and two_level's transfers.
  k.corners =
      CoarseCorners{DeviceVector<std::uint32_t>(k.corner_offsets.begin(), k.corner_offsets.end()),
                    DeviceVector<std::uint32_t>(k.corner_node.begin(), k.corner_node.end()),
                    DeviceVector<double>(k.corner_weight.begin(), k.corner_weight.end())};
  to_device(k.owner, k.owner_rows);
  to_device(k.share, k.share_rows);
  // Per colour: whether this rank displaces any row, and the nodes its rows own (the columns
  // that colour's probes set).
  k.colour_moves.assign(static_cast<std::size_t>(k.colours), 0);
  k.colour_nodes.assign(static_cast<std::size_t>(k.colours), {});
  for (int colour = 0; colour < k.colours; ++colour) {
    const std::size_t base = static_cast<std::size_t>(colour) * owned_;
    std::vector<std::uint8_t> owns(k.nodes, 0);
    for (std::size_t i = 0; i < owned_; ++i) {
      if (k.share[base + i] > 0) k.colour_moves[static_cast<std::size_t>(colour)] = 1;
      if (k.owner[base + i] != kNoNode) owns[k.owner[base + i]] = 1;
    }
    for (std::size_t n = 0; n < k.nodes; ++n)
      if (owns[n]) k.colour_nodes[static_cast<std::size_t>(colour)].push_back(n);
  }
  if (case_.integrator.two_level) {  // its transfers run on the device; vbd's on the host
    k.gather = gather_by_node(k.corner_offsets, k.corner_node, k.corner_weight, k.nodes);
    k.sums.resize(3 * k.nodes);
    k.solution.resize(3 * k.nodes);
    k.dense = dense_coarse_solve(case_.integrator.coarse_solve, unknowns);
  }
  Log::info(
      "cloth: coarse lattice: %zu x %zu x %zu lattice (%zu nodes, %.3g m apart), %d probing "
      "colours (%d products a build), band %zu",
      static_cast<std::size_t>(k.count[0]), static_cast<std::size_t>(k.count[1]),
      static_cast<std::size_t>(k.count[2]), k.nodes,
      std::max({k.spacing[0] * (k.count[0] > 1), k.spacing[1] * (k.count[1] > 1),
                k.spacing[2] * (k.count[2] > 1)}),
      k.colours, 3 * k.colours, k.band);
}

// The row's corners: up to 8 nodes and weights (weight 0: no node).
int ClothSolver::coarse_corners(std::size_t row, std::size_t* node, double* weight) const {
  const CoarseWork& k = coarse_;
  int n = 0;
  int lo[3], hi[3];
  for (int a = 0; a < 3; ++a) {
    const double u = k.lattice[3 * row + static_cast<std::size_t>(a)];
    lo[a] = std::min(static_cast<int>(std::floor(u)), k.count[a] - 1);
    hi[a] = std::min(lo[a] + 1, k.count[a] - 1);
  }
  for (int z = lo[2]; z <= hi[2]; ++z)
    for (int y = lo[1]; y <= hi[1]; ++y)
      for (int x = lo[0]; x <= hi[0]; ++x) {
        const int at[3] = {x, y, z};
        double w = 1;
        std::size_t index = 0;
        for (int a = 0; a < 3; ++a) {
          if (k.count[a] > 1) w *= hat(k.lattice[3 * row + static_cast<std::size_t>(a)], at[a]);
          index += static_cast<std::size_t>(at[a]) * k.stride[a];
        }
        if (w <= 0) continue;
        node[n] = index;
        weight[n] = w;
        ++n;
      }
  return n;
}

// The coarse operator P^T F A F P at the current iterate (implicit_.point), probed, checked and
// factored into coarse_.lower; false (the factor cleared) where no shift up to 1e4 x its largest
// diagonal entry made it positive definite.
bool ClothSolver::build_coarse_operator() {
  CoarseWork& k = coarse_;
  const std::size_t rows = store_.size(), unknowns = 3 * k.nodes, width = 2 * k.band + 1;
  // Every entry is a sum over rows of hat weight x product, summed in fixed point (each term
  // rounded alone, the integers added exactly, over ranks too), so that any rank count assembles
  // the same matrix: a column's terms all come from one probe, whose largest |product| over the
  // sheet sets that column's power-of-two scale (restriction_scale, as for P^T y).
  const std::size_t band = k.band;
  ++k.builds;
  k.fixed_rows.resize(unknowns * width);  // row p, column q at p * width + q - p + band
  apron::fill(k.fixed_rows.begin(), k.fixed_rows.end(), std::int64_t{0});
  std::vector<double> column_scale(unknowns, 0.0);
  k.probe.resize(rows);
  // The operator: one colour and axis at a time, on the device.
  for (int colour = 0; colour < k.colours; ++colour) {
    const std::uint32_t* owner = raw(k.owner_rows) + static_cast<std::size_t>(colour) * owned_;
    const double* share = raw(k.share_rows) + static_cast<std::size_t>(colour) * owned_;
    const std::int64_t moves = k.colour_moves[static_cast<std::size_t>(colour)];
    if (global_sum(ranks_.comm, moves) == 0) continue;
    for (int b = 0; b < 3; ++b) {
      fill_probe(owner, share, owned_, b, k.probe);
      filtered_product_on_device();
      const double scale = restriction_scale(largest_owned_component(owner, k.product, owned_));
      if (!(scale > 0)) continue;
      for (const std::size_t n : k.colour_nodes[static_cast<std::size_t>(colour)])
        column_scale[3 * n + static_cast<std::size_t>(b)] = scale;
      accumulate_column(k.corners, owner, k.product, owned_, b, scale, band, k.fixed_rows);
    }
  }
  std::vector<std::int64_t> fixed = to_host(k.fixed_rows);
  global_sum(ranks_.comm, std::span<std::int64_t>(fixed));
  // (A column no rank reached has no scale: every rank sets it alike.)
  global_max(ranks_.comm, std::span<double>(column_scale));
  std::vector<double> matrix(unknowns * width, 0.0);
  for (std::size_t p = 0; p < unknowns; ++p)
    for (std::size_t offset = 0; offset < width; ++offset) {
      const std::size_t q = p + offset;  // + band - band
      if (q < k.band || q - k.band >= unknowns) continue;
      const double scale = column_scale[q - k.band];
      if (scale > 0)
        matrix[p * width + offset] = static_cast<double>(fixed[p * width + offset]) / scale;
    }
  check_coarse_operator(matrix);
  auto factor_time = timers_.scope("coarse factor");
  // Its symmetric part's banded lower factor L (row p, column p - d at p * (band + 1) + d).
  std::vector<double>& lower = k.lower;
  lower.assign(unknowns * (band + 1), 0.0);
  const auto entry = [&](std::size_t p, std::size_t q) {  // symmetric part, q <= p
    return 0.5 * (matrix[p * width + q + band - p] + matrix[q * width + p + band - q]);
  };
  double largest = 0;
  for (std::size_t p = 0; p < unknowns; ++p) largest = std::max(largest, entry(p, p));
  double shift = 0;
  for (;;) {
    bool ok = true;
    for (std::size_t p = 0; p < unknowns && ok; ++p) {
      const std::size_t first = p > band ? p - band : 0;
      for (std::size_t q = first; q <= p; ++q) {
        double sum = entry(p, q) + (p == q ? shift : 0);
        const std::size_t from = std::max(first, q > band ? q - band : 0);
        for (std::size_t m = from; m < q; ++m)
          sum -= lower[p * (band + 1) + p - m] * lower[q * (band + 1) + q - m];
        if (p == q) {
          // An unknown no row reaches (a node whose support holds only held rows): identity.
          if (entry(p, p) == 0 && sum == 0) sum = 1;
          if (!(sum > 0)) {
            ok = false;
            break;
          }
          lower[p * (band + 1)] = std::sqrt(sum);
        } else {
          lower[p * (band + 1) + p - q] = sum / lower[q * (band + 1)];
        }
      }
    }
    if (ok) {
      store_upper_factor();
      return true;
    }
    shift = shift == 0 ? 1e-8 * largest : 100 * shift;
    ++k.shifted;
    if (!(shift < 1e4 * largest)) {
      lower.clear();
      return false;
    }
  }
}

// F A F q for the host rows q (every local row; the ghosts refreshed here), the owned rows of the
// product back on the host: a column of the probed operator, or its check's product. Through the
// coarse work's own vectors, as the CG's are live while the operator is built.
std::vector<Vector3<double>> ClothSolver::filtered_product(const std::vector<Vector3<double>>& q) {
  to_device(q, coarse_.probe);
  filtered_product_on_device();
  return to_host(coarse_.product, owned_);
}

// coarse_.product = F A F coarse_.probe (the probe's owned rows set; its ghosts refreshed here).
void ClothSolver::filtered_product_on_device() {
  ImplicitWork& w = implicit_;
  CoarseWork& k = coarse_;
  k.product.resize(store_.size());
  if (held_contact()) filter(w.constraints, owned_, k.probe);
  refresh_ghost_rows(k.probe);
  implicit_product(k.probe, k.product);
  if (held_contact()) filter(w.constraints, owned_, k.product);
}

// L^T by rows (row p, column p + d at p * (band + 1) + d), so that the backward solve reads it in
// order: from L's columns it strode band + 1 entries a term, through a factor larger than the
// caches (14.5 MB at 1M vertices and factor 32).
void ClothSolver::store_upper_factor() {
  CoarseWork& k = coarse_;
  const std::size_t unknowns = 3 * k.nodes, band = k.band;
  k.upper.assign(unknowns * (band + 1), 0.0);
  for (std::size_t p = 0; p < unknowns; ++p)
    for (std::size_t d = 0; d <= band && p + d < unknowns; ++d)
      k.upper[p * (band + 1) + d] = k.lower[(p + d) * (band + 1) + d];
}

// c = (L L^T)^-1 c in place, by the factor's two banded triangular solves; false where the result
// is not finite (a factor that lost its precision: every rank has the same c, so all agree).
bool ClothSolver::solve_coarse(std::vector<double>& c) const {
  const CoarseWork& k = coarse_;
  const std::size_t unknowns = 3 * k.nodes, band = k.band;
  const std::vector<double>& lower = k.lower;
  const std::vector<double>& upper = k.upper;
  for (std::size_t p = 0; p < unknowns; ++p) {
    const std::size_t first = p > band ? p - band : 0;
    double sum = c[p];
    for (std::size_t m = first; m < p; ++m) sum -= lower[p * (band + 1) + p - m] * c[m];
    c[p] = sum / lower[p * (band + 1)];
  }
  for (std::size_t p = unknowns; p-- > 0;) {
    double sum = c[p];
    for (std::size_t m = p + 1; m < std::min(unknowns, p + band + 1); ++m)
      sum -= upper[p * (band + 1) + m - p] * c[m];
    c[p] = sum / upper[p * (band + 1)];
  }
  return std::all_of(c.begin(), c.end(), [](double x) { return std::isfinite(x); });
}

// P c on `rows` rows (the owned ones set, the rest zero): each row's hat-weighted corners.
std::vector<Vector3<double>> ClothSolver::prolong(const std::vector<double>& c,
                                                  std::size_t rows) const {
  const CoarseWork& k = coarse_;
  std::vector<Vector3<double>> out(rows, Vector3<double>{0, 0, 0});
  for (std::size_t i = 0; i < owned_; ++i) {
    Vector3<double> s{0, 0, 0};
    for (std::uint32_t e = k.corner_offsets[i]; e < k.corner_offsets[i + 1]; ++e) {
      const std::size_t n = 3 * static_cast<std::size_t>(k.corner_node[e]);
      const double h = k.corner_weight[e];
      s = s + Vector3<double>{h * c[n], h * c[n + 1], h * c[n + 2]};
    }
    out[i] = s;
  }
  return out;
}

// One correction at the current iterate (newton_residual's point, elastic gradient and residual
// current): returns whether the line search moved v. Leaves the residual stale.
bool ClothSolver::coarse_correction(bool rebuild) {
  ImplicitWork& w = implicit_;
  CoarseWork& k = coarse_;
  // The operator and its factor: at every correction, or (refresh: step) at a step's first.
  if ((rebuild || k.lower.empty()) && !build_coarse_operator()) return false;
  // The right-hand side P^T R (R filtered).
  apron::copy(w.newton.begin(), w.newton.end(), w.filtered.begin());
  if (held_contact()) filter(w.constraints, owned_, w.filtered);
  std::vector<double> c = restrict_to_coarse(to_host(w.filtered, owned_));
  if (!solve_coarse(c)) {
    ++k.corrections;
    return false;
  }
  // The step P c, filtered, and the line search on Phi.
  to_device(prolong(c, store_.size()), w.step);
  if (held_contact()) filter(w.constraints, owned_, w.step);
  refresh_ghost_rows(w.step);
  ++k.corrections;
  const LineSearch search = line_search();
  if (search != LineSearch::moved) return false;
  ++k.moved;
  k.phi_drop += -w.last_change;
  k.step_lengths += w.last_alpha;
  return true;
}

// P^T y for rows y of this rank: each term rounded alone in fixed point (the scale from the largest
// |y| over all ranks) and the integers summed exactly over ranks, so that any rank count gives
// the same sums.
std::vector<double> ClothSolver::restrict_to_coarse(const std::vector<Vector3<double>>& y) const {
  const CoarseWork& k = coarse_;
  double local = 0;
  for (std::size_t i = 0; i < owned_; ++i)
    local = std::max({local, std::abs(y[i].x), std::abs(y[i].y), std::abs(y[i].z)});
  const double scale = restriction_scale(local);
  std::vector<std::int64_t> sums(3 * k.nodes, 0);
  if (scale > 0)
    for (std::size_t i = 0; i < owned_; ++i)
      for (std::uint32_t e = k.corner_offsets[i]; e < k.corner_offsets[i + 1]; ++e) {
        const std::size_t n = 3 * static_cast<std::size_t>(k.corner_node[e]);
        const double h = k.corner_weight[e] * scale;
        sums[n] += std::llround(h * y[i].x);
        sums[n + 1] += std::llround(h * y[i].y);
        sums[n + 2] += std::llround(h * y[i].z);
      }
  global_sum(ranks_.comm, std::span<std::int64_t>(sums));
  std::vector<double> restricted(sums.size(), 0.0);
  if (scale > 0)
    for (std::size_t n = 0; n < sums.size(); ++n)
      restricted[n] = static_cast<double>(sums[n]) / scale;
  return restricted;
}

// The power of two by which restricted terms are rounded (8 corners a row, every row's largest
// |component| over all ranks below 2^62 summed): 0 where every row is zero.
double ClothSolver::restriction_scale(double local_largest) const {
  const double top = global_max(ranks_.comm, local_largest);
  return top > 0 ? std::ldexp(
                       1.0, 62 - std::ilogb(top * 8.0 * static_cast<double>(global_vertices_)) - 1)
                 : 0.0;
}

// The probed operator against the products it stands for, at every build: for one coarse vector
// c (fixed, every entry nonzero), P^T F A F P c from one product A (F P c) (the probes' own
// product), against the banded matrix times c, and the matrix's asymmetry; the largest of each
// relative to its largest entry, over the builds, into the run report. Probing is exact but for
// the finite differences (measured ~1e-10 on a smooth sheet, 1e-6 to 1e-4 at the patch's first
// contact, on CPU and GPU alike): a colouring whose supports overlap within the Hessian's reach
// (0.46 with the period forced to 2), a stale or unrefreshed buffer, or a device gradient that
// differs from the portable one would show as far more. One product a build (of 3 p^2).
void ClothSolver::check_coarse_operator(const std::vector<double>& matrix) {
  auto t = timers_.scope("coarse checks");
  CoarseWork& k = coarse_;
  const std::size_t unknowns = 3 * k.nodes, band = k.band, width = 2 * band + 1;
  std::vector<double> c(unknowns);
  for (std::size_t n = 0; n < unknowns; ++n)
    c[n] = 0.5 + 0.5 * std::sin(1.7 * static_cast<double>(n) + 0.3);  // in (0, 1]
  const std::vector<double> probed =
      restrict_to_coarse(filtered_product(prolong(c, store_.size())));
  double largest = 0, difference = 0, entry = 0, asymmetry = 0;
  for (std::size_t p = 0; p < unknowns; ++p) {
    double product = 0;
    for (std::size_t offset = 0; offset < width; ++offset) {
      const std::size_t q = p + offset;  // column q - band
      if (q < band || q - band >= unknowns) continue;
      const double a = matrix[p * width + offset];
      const std::size_t column = q - band;
      product += a * c[column];
      entry = std::max(entry, std::abs(a));
      asymmetry = std::max(asymmetry, std::abs(a - matrix[column * width + p + band - column]));
    }
    largest = std::max(largest, std::abs(probed[p]));
    difference = std::max(difference, std::abs(probed[p] - product));
  }
  if (largest > 0) k.operator_error = std::max(k.operator_error, difference / largest);
  if (entry > 0) k.asymmetry = std::max(k.asymmetry, asymmetry / entry);
}

}  // namespace apron::cloth
