#include "kernels/cloth/self_contact.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"

namespace apron::cloth {
namespace {

constexpr std::uint64_t kEdgeEdgeKey = std::uint64_t(1) << 63;

// The cells of the box [lo - grow, hi + grow] around a primitive's corners. Cell coordinates are
// taken from the float-rounded bounds: rounding and floor are monotone, so two boxes that overlap
// in float64 get cell ranges that overlap.
struct CellRange {
  int lo[3], hi[3];
};

APRON_HD inline CellRange cell_range(const apron::GridSpec& g, const Point* x,
                                     const std::uint32_t* corner, int corners, double grow) {
  double lo[3] = {x[corner[0]].x, x[corner[0]].y, x[corner[0]].z};
  double hi[3] = {lo[0], lo[1], lo[2]};
  for (int k = 1; k < corners; ++k) {
    const Point p = x[corner[k]];
    const double q[3] = {p.x, p.y, p.z};
    for (int d = 0; d < 3; ++d) {
      lo[d] = q[d] < lo[d] ? q[d] : lo[d];
      hi[d] = q[d] > hi[d] ? q[d] : hi[d];
    }
  }
  CellRange r;
  for (int d = 0; d < 3; ++d) {
    r.lo[d] = g.coord(static_cast<float>(lo[d] - grow), d);
    r.hi[d] = g.coord(static_cast<float>(hi[d] + grow), d);
  }
  return r;
}

struct CountCells {
  apron::GridSpec grid;
  const Point* x;
  const std::uint32_t* items;
  int corners;
  std::uint32_t* count;
  APRON_HD void operator()(std::size_t i) const {
    const CellRange r = cell_range(grid, x, items + corners * i, corners, 0);
    count[i] = static_cast<std::uint32_t>((r.hi[0] - r.lo[0] + 1) * (r.hi[1] - r.lo[1] + 1) *
                                          (r.hi[2] - r.lo[2] + 1));
  }
};

struct WriteCells {
  apron::GridSpec grid;
  const Point* x;
  const std::uint32_t* items;
  int corners;
  const std::uint32_t* offset;
  std::uint32_t* cell;
  std::uint32_t* item;
  APRON_HD void operator()(std::size_t i) const {
    const CellRange r = cell_range(grid, x, items + corners * i, corners, 0);
    std::uint32_t out = offset[i];
    for (int k = r.lo[2]; k <= r.hi[2]; ++k)
      for (int j = r.lo[1]; j <= r.hi[1]; ++j)
        for (int c = r.lo[0]; c <= r.hi[0]; ++c) {
          cell[out] = grid.linear(c, j, k);
          item[out++] = static_cast<std::uint32_t>(i);
        }
  }
};

APRON_HD inline bool shares_vertex(const std::uint32_t* a, int na, const std::uint32_t* b, int nb) {
  for (int i = 0; i < na; ++i)
    for (int j = 0; j < nb; ++j)
      if (a[i] == b[j]) return true;
  return false;
}

// The pairs of query q (q < vertices: vertex q against the triangles; then edge q - vertices
// against the edges of higher index) within `radius` that touch a vertex of this rank, in the
// order the grid's cells give them (the list is sorted by key afterwards). A pair met in several
// cells is taken in one: the lowest cell of both boxes' overlap.
struct PairQuery {
  const Point* x;
  const std::uint32_t* triangles;
  const std::uint32_t* edges;
  std::size_t vertices;
  CellListView triangle_cells, edge_cells;
  const std::uint32_t* triangle_items;
  const std::uint32_t* edge_items;
  const std::uint32_t* row_of;
  double radius;

  APRON_HD bool here(const std::uint32_t* v, int n) const {
    for (int k = 0; k < n; ++k)
      if (row_of[v[k]] != SelfContact::kNotHere) return true;
    return false;
  }

  template <class Emit>
  APRON_HD void operator()(std::size_t q, Emit&& emit) const {
    const bool vertex = q < vertices;
    const std::uint32_t self = static_cast<std::uint32_t>(vertex ? q : q - vertices);
    const std::uint32_t* own = vertex ? &self : edges + 2 * self;
    const int own_corners = vertex ? 1 : 2, corners = vertex ? 3 : 2;
    const CellListView& cells = vertex ? triangle_cells : edge_cells;
    const std::uint32_t* items = vertex ? triangle_items : edge_items;
    const std::uint32_t* other_corners = vertex ? triangles : edges;
    const CellRange box = cell_range(cells.grid, x, own, own_corners, radius);
    for (int k = box.lo[2]; k <= box.hi[2]; ++k)
      for (int j = box.lo[1]; j <= box.hi[1]; ++j)
        for (int i = box.lo[0]; i <= box.hi[0]; ++i) {
          const std::uint32_t cell = cells.grid.linear(i, j, k);
          for (std::uint32_t n = cells.start[cell]; n < cells.start[cell + 1]; ++n) {
            const std::uint32_t other = items[n];
            if (!vertex && other <= self) continue;
            const std::uint32_t* corner = other_corners + corners * other;
            if (shares_vertex(own, own_corners, corner, corners)) continue;
            const CellRange r = cell_range(cells.grid, x, corner, corners, 0);
            const int first[3] = {r.lo[0] > box.lo[0] ? r.lo[0] : box.lo[0],
                                  r.lo[1] > box.lo[1] ? r.lo[1] : box.lo[1],
                                  r.lo[2] > box.lo[2] ? r.lo[2] : box.lo[2]};
            if (first[0] != i || first[1] != j || first[2] != k) continue;
            ContactPair pair;
            pair.edge_edge = vertex ? 0u : 1u;
            pair.vertex[0] = own[0];
            if (vertex) {
              for (int c = 0; c < 3; ++c) pair.vertex[c + 1] = corner[c];
            } else {
              pair.vertex[1] = own[1], pair.vertex[2] = corner[0], pair.vertex[3] = corner[1];
            }
            if (!here(pair.vertex, 4)) continue;
            if (pair_geometry(pair, x).distance > radius) continue;
            const std::uint64_t key =
                (vertex ? 0 : kEdgeEdgeKey) | (static_cast<std::uint64_t>(self) << 32) | other;
            emit(pair, key);
          }
        }
  }
};

struct CountPairs {
  PairQuery query;
  std::uint32_t* count;
  APRON_HD void operator()(std::size_t q) const {
    std::uint32_t n = 0;
    query(q, [&](const ContactPair&, std::uint64_t) { ++n; });
    count[q] = n;
  }
};

struct WritePairs {
  PairQuery query;
  const std::uint32_t* offset;
  ContactPair* pairs;
  std::uint64_t* keys;
  std::uint32_t* order;
  APRON_HD void operator()(std::size_t q) const {
    std::uint32_t out = offset[q];
    query(q, [&](const ContactPair& pair, std::uint64_t key) {
      pairs[out] = pair;
      keys[out] = key;
      order[out] = out;
      ++out;
    });
  }
};

struct CountEntries {
  const ContactPair* pairs;
  const std::uint32_t* row_of;
  std::uint32_t* count;
  APRON_HD void operator()(std::size_t p) const {
    std::uint32_t n = 0;
    for (int k = 0; k < 4; ++k) n += row_of[pairs[p].vertex[k]] != SelfContact::kNotHere;
    count[p] = n;
  }
};

struct WriteEntries {
  const ContactPair* pairs;
  const std::uint32_t* row_of;
  const std::uint32_t* offset;
  std::uint32_t* row;
  std::uint32_t* entry;
  APRON_HD void operator()(std::size_t p) const {
    std::uint32_t out = offset[p];
    for (int k = 0; k < 4; ++k) {
      const std::uint32_t r = row_of[pairs[p].vertex[k]];
      if (r == SelfContact::kNotHere) continue;
      row[out] = r;
      entry[out++] = static_cast<std::uint32_t>(4 * p + k);
    }
  }
};

struct EvaluatePairs {
  const ContactPair* pairs;
  const Point* x;
  SelfContactParams p;
  SelfContactPairState* state;
  APRON_HD void operator()(std::size_t i) const {
    const PairGeometry g = pair_geometry(pairs[i], x);
    SelfContactPairState s;
    s.distance = g.distance;
    for (int k = 0; k < 4; ++k) s.weight[k] = g.weight[k];
    const double depth = p.thickness - g.distance;
    const bool touching = depth > 0 && g.distance > 0;
    s.force = touching ? (p.stiffness * depth) * g.normal : Point{0, 0, 0};
    s.normal = touching ? g.normal : Point{0, 0, 0};
    s.energy = touching ? 0.5 * p.stiffness * depth * depth : 0.0;
    state[i] = s;
  }
};

// A row's pairs in the list's (key) order: the force sum and the bound, the same bits on any
// rank that holds the row.
struct GatherRows {
  const std::uint32_t* start;
  const std::uint32_t* entries;
  const SelfContactPairState* state;
  SelfContactParams p;
  Point* gradient;
  double* bound;
  APRON_HD void operator()(std::size_t r) const {
    Point sum{0, 0, 0};
    double nearest = p.thickness;
    for (std::uint32_t e = start[r]; e < start[r + 1]; ++e) {
      const SelfContactPairState& s = state[entries[e] >> 2];
      sum += (-s.weight[entries[e] & 3u]) * s.force;
      nearest = s.distance < nearest ? s.distance : nearest;
    }
    gradient[r] += sum;
    bound[r] = nearest > p.gap ? p.bound * (nearest - p.gap) : 0.0;
  }
};

// k dd/dx . q of each pair (dd/dx_j = weight_j n; zero where it does not touch).
struct PairProducts {
  const ContactPair* pairs;
  const SelfContactPairState* state;
  const Point* q;
  double stiffness;
  double* out;
  APRON_HD void operator()(std::size_t i) const {
    const SelfContactPairState& s = state[i];
    double along = 0;
    for (int k = 0; k < 4; ++k) along += s.weight[k] * dot(s.normal, q[pairs[i].vertex[k]]);
    out[i] = stiffness * along;
  }
};

// A row's pairs in the list's (key) order: scale sum weight_row n (k dd/dx . q).
struct GatherProducts {
  const std::uint32_t* start;
  const std::uint32_t* entries;
  const SelfContactPairState* state;
  const double* products;
  double scale;
  Point* out;
  APRON_HD void operator()(std::size_t r) const {
    Point sum{0, 0, 0};
    for (std::uint32_t e = start[r]; e < start[r + 1]; ++e) {
      const std::uint32_t pair = entries[e] >> 2;
      sum += (state[pair].weight[entries[e] & 3u] * products[pair]) * state[pair].normal;
    }
    out[r] += scale * sum;
  }
};

struct GatherEnergies {
  const std::uint32_t* start;
  const std::uint32_t* entries;
  const SelfContactPairState* state;
  double* energy;
  APRON_HD void operator()(std::size_t r) const {
    double sum = 0;
    for (std::uint32_t e = start[r]; e < start[r + 1]; ++e)
      sum += 0.25 * state[entries[e] >> 2].energy;
    energy[r] = sum;
  }
};

struct SquaredDrift {
  const Point* x;
  const Point* built;
  APRON_HD double operator()(std::size_t i) const {
    const Point d = x[i] - built[i];
    return dot(d, d);
  }
};

struct Coordinate {
  const Point* x;
  int axis;
  double sign;  // -1 to take a minimum through a maximum
  APRON_HD double operator()(std::size_t i) const {
    const Point p = x[i];
    return sign * (axis == 0 ? p.x : (axis == 1 ? p.y : p.z));
  }
};

struct EdgeLength {
  const Point* x;
  const std::uint32_t* edges;
  APRON_HD double operator()(std::size_t e) const {
    return norm(x[edges[2 * e + 1]] - x[edges[2 * e]]);
  }
};

struct Clamp {
  Point* x;
  Point* v;
  const Point* start;
  const std::uint32_t* id;
  const double* bound;
  std::uint32_t* clamped;
  APRON_HD void operator()(std::size_t r) const {
    const Point from = start[id[r]];
    const Point step = x[r] - from;
    const double length = norm(step);
    clamped[r] = length > bound[r];
    if (!clamped[r]) return;
    const double scale = bound[r] / length;
    x[r] = from + scale * step;
    v[r] = scale * v[r];
  }
};

}  // namespace

SheetPrimitives sheet_primitives(const HostMesh& mesh) {
  std::vector<std::uint32_t> triangles, edges;
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> seen;
  for (const auto& t : mesh.triangles)
    for (int k = 0; k < 3; ++k) {
      triangles.push_back(t[k]);
      const std::uint32_t a = t[k], b = t[(k + 1) % 3];
      if (seen.emplace(std::minmax(a, b), 0).second) {
        edges.push_back(std::min(a, b));
        edges.push_back(std::max(a, b));
      }
    }
  SheetPrimitives s;
  to_device(triangles, s.triangles);
  to_device(edges, s.edges);
  s.vertices = mesh.positions.size();
  return s;
}

void SelfContact::set_rows(const std::vector<std::uint32_t>& row_of, std::size_t rows) {
  to_device(row_of, row_of_);
  rows_ = rows;
  built_at_.clear();
}

// Cells no smaller than the search radius or the longest edge (a triangle then covers at most
// 2 x 2 x 2 of them, a query box 3 x 3 x 3), coarsened until there are at most 8 per edge.
apron::GridSpec SelfContact::grid_for(const DeviceVector<Point>& x, std::size_t edges,
                                      double radius) const {
  Box box;
  for (int d = 0; d < 3; ++d) {
    box.lo[d] = -transform_reduce(x.size(), Coordinate{raw(x), d, -1}, -1e300, Maximum{});
    box.hi[d] = transform_reduce(x.size(), Coordinate{raw(x), d, 1}, -1e300, Maximum{});
  }
  double cell = radius;
  const double limit = 8.0 * static_cast<double>(edges + 1);
  for (;;) {
    const apron::GridSpec g = apron::GridSpec::covering(box, cell);
    if (static_cast<double>(g.cell_count()) <= limit) return g;
    cell *= 1.25;
  }
}

void SelfContact::bin(const DeviceVector<std::uint32_t>& items, int corners,
                      const DeviceVector<Point>& x, const apron::GridSpec& grid, CellList& cells) {
  const std::size_t n = items.size() / corners;
  counts_.resize(n);
  for_each_index(n, CountCells{grid, raw(x), raw(items), corners, raw(counts_)});
  const std::uint64_t total = reduce_sum(counts_, n);
  exclusive_scan(counts_, n, counts_);
  cells.resize_entries(total);
  for_each_index(n, WriteCells{grid, raw(x), raw(items), corners, raw(counts_), cells.entry_cells(),
                               cells.entry_items()});
  cells.build_from_entries(grid);
}

void SelfContact::build(const SheetPrimitives& sheet, const DeviceVector<Point>& x,
                        const SelfContactParams& p) {
  const double radius = p.thickness + p.skin;
  const std::size_t edges = sheet.edges.size() / 2;
  double longest = transform_reduce(edges, EdgeLength{raw(x), raw(sheet.edges)}, 0.0, Maximum{});
  const apron::GridSpec grid = grid_for(x, edges, std::max(radius, longest));
  bin(sheet.triangles, 3, x, grid, triangle_cells_);
  bin(sheet.edges, 2, x, grid, edge_cells_);
  list_pairs(sheet, x, radius);
  sort_pairs_by_key();
  index_rows();
  built_at_ = x;
  ++builds_;
}

void SelfContact::list_pairs(const SheetPrimitives& sheet, const DeviceVector<Point>& x,
                             double radius) {
  const std::size_t queries = sheet.vertices + sheet.edges.size() / 2;
  const PairQuery query{raw(x),
                        raw(sheet.triangles),
                        raw(sheet.edges),
                        sheet.vertices,
                        triangle_cells_.view(),
                        edge_cells_.view(),
                        raw(triangle_cells_.order()),
                        raw(edge_cells_.order()),
                        raw(row_of_),
                        radius};
  counts_.resize(queries);
  for_each_index(queries, CountPairs{query, raw(counts_)});
  const std::uint64_t total = reduce_sum(counts_, queries);
  if (total >= (std::uint64_t(1) << 30))
    throw std::runtime_error("cloth self-contact: " + std::to_string(total) +
                             " pairs within reach exceed the list's 2^30 (is the sheet crushed?)");
  exclusive_scan(counts_, queries, counts_);
  pairs_.resize(total);
  keys_.resize(total);
  order_.resize(total);
  for_each_index(queries, WritePairs{query, raw(counts_), raw(pairs_), raw(keys_), raw(order_)});
}

// Key order: every vertex-triangle pair by (vertex, triangle), then every edge-edge pair by
// (edge, edge), whatever the grid and the rank.
void SelfContact::sort_pairs_by_key() {
  const std::size_t n = pairs_.size();
  if (n == 0) return;
  sort_pairs(keys_, order_, n, 64);
  DeviceVector<ContactPair> sorted(n);
  apron::gather(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), pairs_.begin(),
                sorted.begin());
  pairs_.swap(sorted);
}

void SelfContact::index_rows() {
  const std::size_t n = pairs_.size();
  counts_.resize(n);
  for_each_index(n, CountEntries{raw(pairs_), raw(row_of_), raw(counts_)});
  const std::uint64_t total = reduce_sum(counts_, n);
  exclusive_scan(counts_, n, counts_);
  entry_rows_.resize(total);
  entries_.resize(total);
  for_each_index(
      n, WriteEntries{raw(pairs_), raw(row_of_), raw(counts_), raw(entry_rows_), raw(entries_)});
  // Stable: within a row the entries keep the list's key order.
  if (total > 0) sort_pairs(entry_rows_, entries_, total, key_bits(rows_ + 1));
  lower_bounds(entry_rows_, total, rows_ + 1, row_start_);
}

bool SelfContact::stale(const DeviceVector<Point>& x, const SelfContactParams& p) const {
  if (built_at_.size() != x.size()) return true;
  const double drift2 =
      transform_reduce(x.size(), SquaredDrift{raw(x), raw(built_at_)}, 0.0, Maximum{});
  return drift2 > 0.25 * p.skin * p.skin;
}

void SelfContact::evaluate(const DeviceVector<Point>& x, const SelfContactParams& p) {
  state_.resize(pairs_.size());
  for_each_index(pairs_.size(), EvaluatePairs{raw(pairs_), raw(x), p, raw(state_)});
}

void SelfContact::forces(const DeviceVector<Point>& x, const SelfContactParams& p,
                         DeviceVector<Point>& gradient, DeviceVector<double>& bound) {
  evaluate(x, p);
  bound.resize(rows_);
  for_each_index(
      rows_, GatherRows{raw(row_start_), raw(entries_), raw(state_), p, raw(gradient), raw(bound)});
}

void SelfContact::add_product(const DeviceVector<Point>& q, const SelfContactParams& p,
                              double scale, DeviceVector<Point>& out) {
  pair_products_.resize(pairs_.size());
  for_each_index(pairs_.size(),
                 PairProducts{raw(pairs_), raw(state_), raw(q), p.stiffness, raw(pair_products_)});
  for_each_index(rows_, GatherProducts{raw(row_start_), raw(entries_), raw(state_),
                                       raw(pair_products_), scale, raw(out)});
}

void SelfContact::energies(const DeviceVector<Point>& x, const SelfContactParams& p,
                           DeviceVector<double>& energy) {
  evaluate(x, p);
  energy.resize(rows_);
  for_each_index(rows_, GatherEnergies{raw(row_start_), raw(entries_), raw(state_), raw(energy)});
}

double SelfContact::closest(const DeviceVector<Point>& x, ContactPair& pair) const {
  const std::vector<ContactPair> pairs = to_host(pairs_);
  const std::vector<Point> positions = to_host(x);
  double nearest = -1;
  for (const ContactPair& candidate : pairs) {
    const double d = pair_geometry(candidate, positions.data()).distance;
    if (nearest < 0 || d < nearest) nearest = d, pair = candidate;
  }
  return nearest;
}

std::size_t SelfContact::device_bytes() const {
  return triangle_cells_.device_bytes() + edge_cells_.device_bytes() +
         4 * (row_of_.capacity() + counts_.capacity() + entries_.capacity() +
              entry_rows_.capacity() + row_start_.capacity() + order_.capacity()) +
         8 * keys_.capacity() + sizeof(ContactPair) * pairs_.capacity() +
         sizeof(Point) * built_at_.capacity() + sizeof(SelfContactPairState) * state_.capacity();
}

std::size_t clamp_displacements(DeviceVector<Point>& x, DeviceVector<Point>& v,
                                const DeviceVector<Point>& start,
                                const DeviceVector<std::uint32_t>& id,
                                const DeviceVector<double>& bound, std::size_t rows) {
  DeviceVector<std::uint32_t> clamped(rows);
  for_each_index(rows, Clamp{raw(x), raw(v), raw(start), raw(id), raw(bound), raw(clamped)});
  return rows ? reduce_sum(clamped, rows) : 0;
}

}  // namespace apron::cloth
