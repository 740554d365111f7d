#include "kernels/cloth/coarse.hpp"

#include <atomic>
#include <cmath>

#include "kernels/common/algorithms.hpp"

namespace apron::cloth {
namespace {

using V3 = Vector3<double>;

struct LargestComponent {
  const V3* y;
  APRON_HD double operator()(std::size_t i) const {
    const double x = std::fabs(y[i].x), u = std::fabs(y[i].y), z = std::fabs(y[i].z);
    return x > u ? (x > z ? x : z) : (u > z ? u : z);
  }
};

// One chunk's terms, all of one node, in fixed point (as restrict_to_coarse rounds them).
struct GatherChunks {
  const std::uint32_t *row, *first;
  const double* weight;
  const V3* y;
  double scale;
  std::int64_t* partial;
  APRON_HD void operator()(std::size_t c) const {
    std::int64_t x = 0, u = 0, z = 0;
    for (std::uint32_t e = first[c]; e < first[c + 1]; ++e) {
      const double h = weight[e] * scale;
      const V3 v = y[row[e]];
      x += std::llround(h * v.x);
      u += std::llround(h * v.y);
      z += std::llround(h * v.z);
    }
    partial[3 * c] = x;
    partial[3 * c + 1] = u;
    partial[3 * c + 2] = z;
  }
};

struct SumNodeChunks {
  const std::uint32_t* chunks;
  const std::int64_t* partial;
  std::int64_t* sums;
  APRON_HD void operator()(std::size_t n) const {
    std::int64_t x = 0, u = 0, z = 0;
    for (std::uint32_t c = chunks[n]; c < chunks[n + 1]; ++c) {
      x += partial[3 * c];
      u += partial[3 * c + 1];
      z += partial[3 * c + 2];
    }
    sums[3 * n] = x;
    sums[3 * n + 1] = u;
    sums[3 * n + 2] = z;
  }
};

struct ProlongRows {
  const std::uint32_t *offsets, *node;
  const double* weight;
  const double* c;
  V3* out;
  APRON_HD void operator()(std::size_t i) const {
    V3 s{0, 0, 0};
    for (std::uint32_t e = offsets[i]; e < offsets[i + 1]; ++e) {
      const std::size_t n = 3 * static_cast<std::size_t>(node[e]);
      const double h = weight[e];
      s = s + V3{h * c[n], h * c[n + 1], h * c[n + 2]};
    }
    out[i] = s;
  }
};

// An integer add that concurrent threads may make to one sum; integers add associatively, so
// the result is the same whatever order the threads' adds land in.
APRON_HD inline void add_fixed(std::int64_t* at, std::int64_t v) {
#if defined(__CUDA_ARCH__)
  atomicAdd(reinterpret_cast<unsigned long long*>(at), static_cast<unsigned long long>(v));
#else
  std::atomic_ref<std::int64_t>(*at).fetch_add(v, std::memory_order_relaxed);
#endif
}

struct FillProbe {
  const std::uint32_t* owner;
  const double* share;
  int axis;
  V3* probe;
  APRON_HD void operator()(std::size_t i) const {
    const double s = owner[i] != kNoOwner && share[i] > 0 ? share[i] : 0.0;
    probe[i] = V3{axis == 0 ? s : 0.0, axis == 1 ? s : 0.0, axis == 2 ? s : 0.0};
  }
};

struct LargestOwned {
  const std::uint32_t* owner;
  const V3* y;
  APRON_HD double operator()(std::size_t i) const {
    return owner[i] == kNoOwner ? 0.0 : LargestComponent{y}(i);
  }
};

// A row's terms of one probed column: one thread a row. The column's entries gather the rows
// near one node (a few hundred adds each at 1M vertices), so the atomics contend little.
struct AccumulateColumn {
  const std::uint32_t *offsets, *node;
  const double* weight;
  const std::uint32_t* owner;
  const V3* y;
  int axis;
  double scale;
  std::size_t band;
  std::int64_t* fixed;
  APRON_HD void operator()(std::size_t i) const {
    if (owner[i] == kNoOwner) return;
    const std::size_t q = 3 * static_cast<std::size_t>(owner[i]) + static_cast<std::size_t>(axis);
    const std::size_t width = 2 * band + 1;
    const double row[3] = {y[i].x, y[i].y, y[i].z};
    for (std::uint32_t c = offsets[i]; c < offsets[i + 1]; ++c)
      for (std::size_t a = 0; a < 3; ++a) {
        const std::size_t p = 3 * static_cast<std::size_t>(node[c]) + a;
        const std::size_t offset = q + band - p;        // q - p + band, >= 0 within the band
        if (q + band < p || offset >= width) continue;  // beyond two lattice steps: none
        add_fixed(fixed + p * width + offset, std::llround(weight[c] * row[a] * scale));
      }
  }
};

// Column j of (L L^T)^-1: the forward solve of e_j, then the backward one, in the column's own
// stride-n slots of x (neighbouring threads' columns side by side, so their reads coalesce). The
// forward solve's rows above j are zero; it starts at the multiple of 32 below j, so that a warp's
// lanes walk the same rows and read each factor entry once between them.
struct InvertColumn {
  const double *lower, *upper;
  std::size_t n, band;
  double* x;
  APRON_HD void operator()(std::size_t j) const {
    const std::size_t width = band + 1, start = j - j % 32;
    for (std::size_t p = start; p < n; ++p) {
      const std::size_t first = p > start + band ? p - band : start;
      double sum = p == j ? 1.0 : 0.0;
      for (std::size_t m = first; m < p; ++m) sum -= lower[p * width + p - m] * x[m * n + j];
      x[p * n + j] = sum / lower[p * width];
    }
    for (std::size_t p = n; p-- > 0;) {
      double sum = p >= start ? x[p * n + j] : 0.0;
      const std::size_t last = p + width < n ? p + width : n;
      for (std::size_t m = p + 1; m < last; ++m) sum -= upper[p * width + m - p] * x[m * n + j];
      x[p * n + j] = sum / upper[p * width];
    }
  }
};

// a[p][q] and a[q][p] (p < q) both set to their mean.
struct Symmetrise {
  double* a;
  std::size_t n;
  APRON_HD void operator()(std::size_t k) const {
    const std::size_t p = k / n, q = k % n;
    if (p >= q) return;
    const double mean = 0.5 * (a[p * n + q] + a[q * n + p]);
    a[p * n + q] = mean;
    a[q * n + p] = mean;
  }
};

struct NotFinite {
  const double* a;
  APRON_HD double operator()(std::size_t k) const { return std::isfinite(a[k]) ? 0.0 : 1.0; }
};

// The columns one thread of the dense product sums: enough threads to keep a GPU's memory busy
// at n ~ 6000 (n^2 / 64 of them), few enough chunks for the second pass.
constexpr std::size_t kProductChunk = 64;

// partial[c][p] = sum over columns j of chunk c of a[j][p] x[j] (= a[p][j] x[j]: symmetric),
// neighbouring threads on neighbouring p, so that their reads of a's row j coalesce.
struct ProductChunks {
  const double *a, *x;
  std::size_t n;
  double* partial;
  APRON_HD void operator()(std::size_t k) const {
    const std::size_t p = k % n, chunk = k / n;
    const std::size_t first = chunk * kProductChunk;
    const std::size_t last = first + kProductChunk < n ? first + kProductChunk : n;
    double sum = 0;
    for (std::size_t j = first; j < last; ++j) sum += a[j * n + p] * x[j];
    partial[chunk * n + p] = sum;
  }
};

struct SumChunks {
  const double* partial;
  std::size_t n, chunks;
  double* y;
  APRON_HD void operator()(std::size_t p) const {
    double sum = 0;
    for (std::size_t c = 0; c < chunks; ++c) sum += partial[c * n + p];
    y[p] = sum;
  }
};

}  // namespace

CoarseGather gather_by_node(const std::vector<std::uint32_t>& offsets,
                            const std::vector<std::uint32_t>& node,
                            const std::vector<double>& weight, std::size_t nodes) {
  // Counting sort of the terms by node, rows ascending within a node (neighbouring rows of a
  // chunk share cache lines of y).
  std::vector<std::uint32_t> start(nodes + 1, 0);
  for (const std::uint32_t n : node) ++start[n + 1];
  for (std::size_t n = 0; n < nodes; ++n) start[n + 1] += start[n];
  std::vector<std::uint32_t> row(node.size()), at(start.begin(), start.end() - 1);
  std::vector<double> sorted_weight(node.size());
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i)
    for (std::uint32_t e = offsets[i]; e < offsets[i + 1]; ++e) {
      const std::uint32_t to = at[node[e]]++;
      row[to] = static_cast<std::uint32_t>(i);
      sorted_weight[to] = weight[e];
    }
  std::vector<std::uint32_t> first, chunks{0};
  for (std::size_t n = 0; n < nodes; ++n) {
    for (std::uint32_t e = start[n]; e < start[n + 1]; e += kGatherChunk) first.push_back(e);
    chunks.push_back(static_cast<std::uint32_t>(first.size()));
  }
  first.push_back(static_cast<std::uint32_t>(node.size()));
  CoarseGather g;
  to_device(row, g.row);
  to_device(sorted_weight, g.weight);
  to_device(first, g.first);
  to_device(chunks, g.chunks);
  g.partial.resize(3 * (first.size() - 1));
  return g;
}

double largest_component(const Vectors& y, std::size_t count) {
  return transform_reduce(count, LargestComponent{raw(y)}, 0.0, Maximum{});
}

void restrict_gather(CoarseGather& gather, const Vectors& y, double scale,
                     DeviceVector<std::int64_t>& sums) {
  const std::size_t nodes = gather.chunks.size() - 1;
  sums.resize(3 * nodes);
  for_each_index(gather.first.size() - 1,
                 GatherChunks{raw(gather.row), raw(gather.first), raw(gather.weight), raw(y), scale,
                              raw(gather.partial)});
  for_each_index(nodes, SumNodeChunks{raw(gather.chunks), raw(gather.partial), raw(sums)});
}

void prolong_rows(const CoarseCorners& corners, const DeviceVector<double>& c, std::size_t count,
                  Vectors& out) {
  for_each_index(count, ProlongRows{raw(corners.offsets), raw(corners.node), raw(corners.weight),
                                    raw(c), raw(out)});
}

}  // namespace apron::cloth

namespace apron::cloth {

bool invert_banded_factor(const DeviceVector<double>& lower, const DeviceVector<double>& upper,
                          std::size_t n, std::size_t band, DeviceVector<double>& inverse) {
  inverse.resize(n * n);
  for_each_index(n, InvertColumn{raw(lower), raw(upper), n, band, raw(inverse)});
  for_each_index(n * n, Symmetrise{raw(inverse), n});
  return transform_reduce(n * n, NotFinite{raw(inverse)}, 0.0, Maximum{}) == 0.0;
}

void multiply_symmetric(const DeviceVector<double>& matrix, std::size_t n,
                        const DeviceVector<double>& x, DeviceVector<double>& partial,
                        DeviceVector<double>& y) {
  const std::size_t chunks = (n + kProductChunk - 1) / kProductChunk;
  partial.resize(chunks * n);
  y.resize(n);
  for_each_index(chunks * n, ProductChunks{raw(matrix), raw(x), n, raw(partial)});
  for_each_index(n, SumChunks{raw(partial), n, chunks, raw(y)});
}

}  // namespace apron::cloth

namespace apron::cloth {

void fill_probe(const std::uint32_t* owner, const double* share, std::size_t count, int axis,
                Vectors& probe) {
  apron::fill(probe.begin(), probe.end(), V3{0, 0, 0});
  for_each_index(count, FillProbe{owner, share, axis, raw(probe)});
}

double largest_owned_component(const std::uint32_t* owner, const Vectors& y, std::size_t count) {
  return transform_reduce(count, LargestOwned{owner, raw(y)}, 0.0, Maximum{});
}

void accumulate_column(const CoarseCorners& corners, const std::uint32_t* owner, const Vectors& y,
                       std::size_t count, int axis, double scale, std::size_t band,
                       DeviceVector<std::int64_t>& fixed) {
  for_each_index(
      count, AccumulateColumn{raw(corners.offsets), raw(corners.node), raw(corners.weight), owner,
                              raw(y), axis, scale, band, raw(fixed)});
}

}  // namespace apron::cloth
