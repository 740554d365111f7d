#include "kernels/cloth/mesh.hpp"

#include <algorithm>
#include <bitset>
#include <cmath>
#include <sstream>

namespace apron::cloth {
namespace {

std::string triangle_name(const HostMesh& mesh, std::size_t t) {
  const auto& c = mesh.triangles[t];
  std::ostringstream s;
  s << "triangle " << t << " (vertices " << c[0] << ", " << c[1] << ", " << c[2] << ")";
  return s.str();
}

// NaN or infinity would otherwise pass as a "zero-area triangle" and poison every neighbour.
std::string check_positions(const HostMesh& mesh) {
  for (std::size_t v = 0; v < mesh.positions.size(); ++v)
    for (double c : mesh.positions[v])
      if (!std::isfinite(c)) return "vertex " + std::to_string(v) + " has a non-finite coordinate";
  return {};
}

std::string check_corners(const HostMesh& mesh) {
  const std::size_t n = mesh.positions.size();
  for (std::size_t t = 0; t < mesh.triangles.size(); ++t) {
    const auto& c = mesh.triangles[t];
    for (std::uint32_t v : c)
      if (v >= n)
        return triangle_name(mesh, t) + ": vertex index " + std::to_string(v) +
               " is out of range (the mesh has " + std::to_string(n) + " vertices)";
    if (c[0] == c[1] || c[1] == c[2] || c[0] == c[2])
      return triangle_name(mesh, t) + " repeats a vertex (zero area)";
  }
  return {};
}

// Zero area relative to the triangle's size: collinear corners, whatever the mesh's units.
std::string check_areas(const HostMesh& mesh) {
  for (std::size_t t = 0; t < mesh.triangles.size(); ++t) {
    Vector3<double> p[3];
    for (int k = 0; k < 3; ++k) {
      const auto& x = mesh.positions[mesh.triangles[t][k]];
      p[k] = {x[0], x[1], x[2]};
    }
    const double longest2 = std::max({dot(p[1] - p[0], p[1] - p[0]), dot(p[2] - p[1], p[2] - p[1]),
                                      dot(p[0] - p[2], p[0] - p[2])});
    if (!(norm(cross(p[1] - p[0], p[2] - p[0])) > 1e-12 * longest2))
      return triangle_name(mesh, t) + " has zero area (its corners are collinear)";
  }
  return {};
}

std::string check_isolated(const HostMesh& mesh) {
  std::vector<std::uint8_t> used(mesh.positions.size(), 0);
  for (const auto& c : mesh.triangles)
    for (std::uint32_t v : c) used[v] = 1;
  for (std::size_t v = 0; v < used.size(); ++v)
    if (!used[v])
      return "vertex " + std::to_string(v) + " belongs to no triangle (isolated vertex)";
  return {};
}

// Every edge must border one triangle (boundary) or two that traverse it in opposite directions.
std::string check_edges(const HostMesh& mesh) {
  struct HalfEdge {
    std::uint64_t key;  // lower vertex << 32 | higher vertex
    std::uint32_t triangle;
    bool ascending;  // the triangle goes from the lower vertex to the higher
  };
  std::vector<HalfEdge> edges;
  edges.reserve(3 * mesh.triangles.size());
  for (std::size_t t = 0; t < mesh.triangles.size(); ++t)
    for (int k = 0; k < 3; ++k) {
      const std::uint32_t a = mesh.triangles[t][k], b = mesh.triangles[t][(k + 1) % 3];
      const std::uint64_t key = (std::uint64_t{std::min(a, b)} << 32) | std::max(a, b);
      edges.push_back({key, static_cast<std::uint32_t>(t), a < b});
    }
  std::sort(edges.begin(), edges.end(), [](const HalfEdge& x, const HalfEdge& y) {
    return x.key != y.key ? x.key < y.key : x.triangle < y.triangle;
  });
  for (std::size_t first = 0, last; first < edges.size(); first = last) {
    for (last = first + 1; last < edges.size() && edges[last].key == edges[first].key;) ++last;
    const std::string edge = "edge (" + std::to_string(edges[first].key >> 32) + ", " +
                             std::to_string(edges[first].key & 0xffffffffu) + ")";
    if (last - first > 2) {
      std::string list;
      for (std::size_t e = first; e < last; ++e)
        list += (e > first ? ", " : "") + std::to_string(edges[e].triangle);
      return edge + " is shared by " + std::to_string(last - first) + " triangles (" + list +
             "): non-manifold edge";
    }
    if (last - first == 2 && edges[first].ascending == edges[first + 1].ascending)
      return "triangles " + std::to_string(edges[first].triangle) + " and " +
             std::to_string(edges[first + 1].triangle) + " traverse " + edge +
             " in the same direction (inconsistent orientation)";
  }
  return {};
}

// Orders each vertex's neighbours by walking its triangles (v, p, q) from p to q. After
// check_edges every neighbour starts and ends at most one such step, so the walk is a single
// chain unless the triangles form several fans (a non-manifold vertex).
std::string order_rings(const HostMesh& mesh, Rings& rings) {
  const std::size_t n = mesh.positions.size();
  std::vector<std::uint32_t> first_step(n + 1, 0);
  for (const auto& c : mesh.triangles)
    for (std::uint32_t v : c) ++first_step[v + 1];
  for (std::size_t v = 0; v < n; ++v) first_step[v + 1] += first_step[v];
  std::vector<std::array<std::uint32_t, 2>> steps(first_step[n]);  // (p, q) per triangle of v
  std::vector<std::uint32_t> fill(first_step.begin(), first_step.end() - 1);
  for (const auto& c : mesh.triangles)
    for (int k = 0; k < 3; ++k) steps[fill[c[k]]++] = {c[(k + 1) % 3], c[(k + 2) % 3]};

  rings.offsets.assign(1, 0);
  rings.neighbours.clear();
  rings.boundary.assign(n, 0);
  std::vector<std::uint32_t> ends;  // the q of v's steps, sorted
  for (std::size_t v = 0; v < n; ++v) {
    // Sorted by p, so that finding the step from a neighbour is a binary search: O(k log k) for
    // valence k, also for the huge fans a malformed file can hold.
    const auto begin = steps.begin() + first_step[v], end = steps.begin() + first_step[v + 1];
    std::sort(begin, end);
    auto step_from = [&](std::uint32_t p) {
      const auto s =
          std::lower_bound(begin, end, p, [](const auto& x, std::uint32_t y) { return x[0] < y; });
      return s != end && (*s)[0] == p ? s : end;
    };
    ends.clear();
    for (auto s = begin; s != end; ++s) ends.push_back((*s)[1]);
    std::sort(ends.begin(), ends.end());
    // An open fan starts at the neighbour no step ends at; a closed one anywhere (here at its
    // lowest neighbour).
    std::size_t open_starts = 0;
    auto start = begin;
    for (auto s = begin; s != end; ++s)
      if (!std::binary_search(ends.begin(), ends.end(), (*s)[0])) {
        if (open_starts++ == 0) start = s;
      }
    std::size_t walked = 0;
    for (auto s = start; s != end && walked < static_cast<std::size_t>(end - begin);
         s = step_from((*s)[1]), ++walked) {
      rings.neighbours.push_back((*s)[0]);
      if (open_starts == 0 && (*s)[1] == (*start)[0]) {
        ++walked;
        break;
      }
      if (step_from((*s)[1]) == end) rings.neighbours.push_back((*s)[1]);  // open fan's last
    }
    if (open_starts > 1 || walked != static_cast<std::size_t>(end - begin))
      return "vertex " + std::to_string(v) +
             ": its triangles do not form a single fan (non-manifold vertex)";
    rings.boundary[v] = open_starts == 1;
    rings.offsets.push_back(static_cast<std::uint32_t>(rings.neighbours.size()));
  }
  return {};
}

std::string checked_rings(const HostMesh& mesh, Rings& rings) {
  for (auto check : {check_positions, check_corners, check_areas, check_isolated, check_edges}) {
    std::string problem = check(mesh);
    if (!problem.empty()) return problem;
  }
  return order_rings(mesh, rings);
}

// splitmix64: a counter-based generator whose output is fixed by the seed on every platform
// (std::uniform_real_distribution's is not).
double uniform_pm1(std::uint64_t seed, std::uint64_t counter) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (counter + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return 2.0 * static_cast<double>(z >> 11) * 0x1.0p-53 - 1.0;
}

double inverse_squared_distance(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  const double dx = b[0] - a[0], dy = b[1] - a[1], dz = b[2] - a[2];
  return 1 / (dx * dx + dy * dy + dz * dz);
}

}  // namespace

std::string check_mesh(const HostMesh& mesh) {
  Rings scratch;
  return checked_rings(mesh, scratch);
}

Rings build_rings(const HostMesh& mesh) {
  Rings rings;
  const std::string problem = checked_rings(mesh, rings);
  if (!problem.empty()) throw MeshError(problem);
  return rings;
}

HostMesh grid_mesh(const GridSpec& spec) {
  if (spec.nx < 1 || spec.ny < 1 || !(spec.size_x > 0) || !(spec.size_y > 0))
    throw MeshError("a grid needs at least 1 x 1 cells and a positive size");
  HostMesh mesh;
  const double hx = spec.size_x / spec.nx, hy = spec.size_y / spec.ny;
  std::uint64_t counter = 0;
  for (int j = 0; j <= spec.ny; ++j)
    for (int i = 0; i <= spec.nx; ++i) {
      double x = -spec.size_x / 2 + i * hx, y = -spec.size_y / 2 + j * hy;
      const bool interior = i > 0 && i < spec.nx && j > 0 && j < spec.ny;
      if (spec.perturbed && interior) {  // the boundary stays straight
        x += spec.jitter * hx * uniform_pm1(spec.seed, counter++);
        y += spec.jitter * hy * uniform_pm1(spec.seed, counter++);
      }
      mesh.positions.push_back({x, y, 0.0});
    }
  for (int j = 0; j < spec.ny; ++j)
    for (int i = 0; i < spec.nx; ++i) {
      const std::uint32_t a = grid_vertex(spec, i, j), b = grid_vertex(spec, i + 1, j),
                          c = grid_vertex(spec, i + 1, j + 1), d = grid_vertex(spec, i, j + 1);
      if (spec.perturbed && uniform_pm1(spec.seed, counter++) < 0) {
        mesh.triangles.push_back({a, b, d});
        mesh.triangles.push_back({b, c, d});
      } else {
        mesh.triangles.push_back({a, b, c});
        mesh.triangles.push_back({a, c, d});
      }
    }
  return mesh;
}

template <class T>
DeviceVector<Vector3<T>> upload_positions(const std::vector<std::array<double, 3>>& positions) {
  std::vector<Vector3<T>> host(positions.size());
  for (std::size_t v = 0; v < positions.size(); ++v)
    host[v] = {static_cast<T>(positions[v][0]), static_cast<T>(positions[v][1]),
               static_cast<T>(positions[v][2])};
  return DeviceVector<Vector3<T>>(host.begin(), host.end());
}

template <class T>
void upload_rings(const std::vector<std::array<double, 3>>& rest, const Rings& rings,
                  DeviceMesh<T>& out) {
  std::vector<double> spoke(rings.neighbours.size()), rim(rings.neighbours.size(), 0.0);
  for (std::size_t v = 0; v + 1 < rings.offsets.size(); ++v) {
    const std::uint32_t begin = rings.offsets[v], end = rings.offsets[v + 1];
    for (std::uint32_t k = begin; k < end; ++k) {
      const std::uint32_t next = k + 1 < end ? k + 1 : begin;
      const auto& xk = rest[rings.neighbours[k]];
      spoke[k] = inverse_squared_distance(rest[v], xk);
      if (next != k && (next != begin || !rings.boundary[v]))
        rim[k] = inverse_squared_distance(xk, rest[rings.neighbours[next]]);
    }
  }
  out.positions = upload_positions<T>(rest);
  out.ring_offsets = DeviceVector<std::uint32_t>(rings.offsets.begin(), rings.offsets.end());
  out.ring_neighbours =
      DeviceVector<std::uint32_t>(rings.neighbours.begin(), rings.neighbours.end());
  out.boundary = DeviceVector<std::uint8_t>(rings.boundary.begin(), rings.boundary.end());
  out.spoke_weights = DeviceVector<double>(spoke.begin(), spoke.end());
  out.rim_weights = DeviceVector<double>(rim.begin(), rim.end());
}

template <class T>
DeviceMesh<T> upload_mesh(const HostMesh& mesh) {
  DeviceMesh<T> out;
  upload_rings(mesh.positions, build_rings(mesh), out);
  std::vector<std::uint32_t> corners;
  corners.reserve(3 * mesh.triangles.size());
  for (const auto& c : mesh.triangles) corners.insert(corners.end(), c.begin(), c.end());
  out.corners = DeviceVector<std::uint32_t>(corners.begin(), corners.end());
  return out;
}

std::vector<std::uint32_t> locality_order(const HostMesh& mesh) {
  std::array<double, 3> lo{INFINITY, INFINITY, INFINITY};
  double size = 0;
  for (const auto& p : mesh.positions)
    for (int d = 0; d < 3; ++d) lo[d] = std::min(lo[d], p[d]);
  for (const auto& p : mesh.positions)
    for (int d = 0; d < 3; ++d) size = std::max(size, p[d] - lo[d]);
  const double scale = size > 0 ? 1023.999 / size : 0;
  std::vector<std::uint32_t> key(mesh.positions.size());
  for (std::size_t v = 0; v < key.size(); ++v) {
    std::uint32_t code = 0;
    for (int bit = 9; bit >= 0; --bit)
      for (int d = 0; d < 3; ++d) {
        const auto cell = static_cast<std::uint32_t>((mesh.positions[v][d] - lo[d]) * scale);
        code = (code << 1) | ((cell >> bit) & 1u);
      }
    key[v] = code;
  }
  std::vector<std::uint32_t> order(key.size());
  for (std::uint32_t v = 0; v < order.size(); ++v) order[v] = v;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return key[a] < key[b]; });
  return order;
}

HostMesh renumbered(const HostMesh& mesh, const std::vector<std::uint32_t>& order) {
  std::vector<std::uint32_t> new_of(order.size());
  for (std::uint32_t k = 0; k < order.size(); ++k) new_of[order[k]] = k;
  HostMesh out;
  out.positions.reserve(order.size());
  for (const std::uint32_t v : order) out.positions.push_back(mesh.positions[v]);
  out.triangles.reserve(mesh.triangles.size());
  for (const auto& t : mesh.triangles)
    out.triangles.push_back({new_of[t[0]], new_of[t[1]], new_of[t[2]]});
  return out;
}

template DeviceVector<Vector3<float>> upload_positions<float>(
    const std::vector<std::array<double, 3>>&);
template DeviceVector<Vector3<double>> upload_positions<double>(
    const std::vector<std::array<double, 3>>&);
template void upload_rings<float>(const std::vector<std::array<double, 3>>&, const Rings&,
                                  DeviceMesh<float>&);
template void upload_rings<double>(const std::vector<std::array<double, 3>>&, const Rings&,
                                   DeviceMesh<double>&);
template DeviceMesh<float> upload_mesh<float>(const HostMesh&);
template DeviceMesh<double> upload_mesh<double>(const HostMesh&);

RingWalk::RingWalk(const Rings& rings) : rings_(rings), seen_(rings.offsets.size() - 1, 0) {}

const std::vector<std::uint32_t>& RingWalk::around(std::uint32_t v, int distance) {
  ++stamp_;
  seen_[v] = stamp_;
  found_.clear();
  std::size_t ring_start = 0;
  found_.push_back(v);  // the first frontier, dropped below
  for (int step = 0; step < distance; ++step) {
    const std::size_t ring_end = found_.size();
    for (std::size_t f = ring_start; f < ring_end; ++f) {
      const std::uint32_t u = found_[f];
      for (std::uint32_t k = rings_.offsets[u]; k < rings_.offsets[u + 1]; ++k) {
        const std::uint32_t w = rings_.neighbours[k];
        if (seen_[w] == stamp_) continue;
        seen_[w] = stamp_;
        found_.push_back(w);
      }
    }
    ring_start = ring_end;
  }
  found_.erase(found_.begin());
  return found_;
}

std::vector<std::uint8_t> distance_colours(const Rings& rings, int distance) {
  const std::size_t n = rings.offsets.size() - 1;
  std::vector<std::uint8_t> colour(n, 0);
  RingWalk walk(rings);
  for (std::size_t v = 0; v < n; ++v) {
    std::bitset<256> taken;
    for (const std::uint32_t w : walk.around(static_cast<std::uint32_t>(v), distance))
      if (w < v) taken.set(colour[w]);  // coloured already
    std::size_t c = 0;
    while (c < taken.size() && taken.test(c)) ++c;
    if (c == taken.size())
      throw MeshError("vertex " + std::to_string(v) + " has more than 255 vertices within " +
                      std::to_string(distance) + " rings: the mesh's valence is too high");
    colour[v] = static_cast<std::uint8_t>(c);
  }
  return colour;
}

}  // namespace apron::cloth
