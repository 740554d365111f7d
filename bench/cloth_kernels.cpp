// The cloth kernels' speed (issue 17): per vertex, the seed's tensor step (normals, frames,
// metric and curvature fits, strains; float, the seed's 2.1 ms at 100x100 on its GPU) and, in
// float64, the energy density, the adjoint gradient (float64, mixed precision, and mixed with the
// hourglass control of the solver's default) and the forward-mode gradient it replaced.
// A perturbed grid of n x n vertices bent onto a cylinder and shaken, or a mesh file (shaken);
// median of 5 after a warm-up. The vertex order is the data-structure question of the issue:
// `as_given` (grid rows, or the file's), `random` (a shuffle: what an unordered mesh costs) or
// `morton` (a space-filling curve over the rest positions) or `valence` (grouped by valence, the
// seed's proposal for uniform loop counts per warp; Morton order within a group). Each mesh also
// runs the normals and fits on the seed's other layout, coalesced redundant 1-ring copies
// (redundant_tensor_step), against the CSR rings, with the bytes per vertex of each.
//   usage: cloth_kernels [--order as_given|random|morton|valence] [--mesh FILE] [n ...]
//          (default: as_given, grids of 100 and 300)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "io/mesh_reader.hpp"
#include "kernels/cloth/energy.hpp"
#include "kernels/cloth/tensors.hpp"
#include "kernels/cloth/vertex_geometry.hpp"

using namespace apron;
using namespace apron::cloth;

namespace {

double median_ms(const std::function<void()>& f) {
  f();
  device_synchronize();
  std::vector<double> ms;
  for (int r = 0; r < 5; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    device_synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

// The sheet wrapped onto a cylinder of radius 0.9 and shaken by 0.2 cell widths.
std::vector<std::array<double, 3>> bent(const HostMesh& mesh, int n) {
  std::vector<std::array<double, 3>> x = mesh.positions;
  for (auto& p : x) {
    const double angle = p[0] / 0.9;
    p = {0.9 * std::sin(angle), p[1], 0.9 * (1 - std::cos(angle))};
  }
  std::mt19937_64 random(11);
  std::uniform_real_distribution<double> shake(-0.1 / n, 0.1 / n);
  for (auto& p : x)
    for (double& c : p) c += shake(random);
  return x;
}

// The mesh without the vertices no triangle uses (scans carry some).
HostMesh without_isolated(HostMesh mesh) {
  std::vector<std::int64_t> new_of(mesh.positions.size(), -1);
  std::vector<std::array<double, 3>> kept;
  for (auto& t : mesh.triangles)
    for (auto& v : t) {
      if (new_of[v] < 0) {
        new_of[v] = static_cast<std::int64_t>(kept.size());
        kept.push_back(mesh.positions[v]);
      }
      v = static_cast<std::uint32_t>(new_of[v]);
    }
  mesh.positions = std::move(kept);
  return mesh;
}

// The mesh with its vertices renumbered in the given order.
HostMesh reordered(const HostMesh& mesh, const std::string& order) {
  if (order == "morton") return renumbered(mesh, locality_order(mesh));
  if (order == "valence") {  // grouped by valence (triangle count), Morton order within a group
    std::vector<std::uint32_t> triangles(mesh.positions.size(), 0), by = locality_order(mesh);
    for (const auto& t : mesh.triangles)
      for (const std::uint32_t v : t) ++triangles[v];
    std::stable_sort(by.begin(), by.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return triangles[a] < triangles[b]; });
    return renumbered(mesh, by);
  }
  if (order != "random") return mesh;
  std::vector<std::uint32_t> shuffled(mesh.positions.size());
  std::iota(shuffled.begin(), shuffled.end(), 0u);
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(5));
  return renumbered(mesh, shuffled);
}

// ---- the seed's coalesced redundant 1-ring copies ----------------------------------------------
// Every ring entry's neighbour value copied slot-major: entry s of vertex v at s V + v, so that a
// warp (consecutive vertices) reads consecutive addresses at every s; padded to the largest
// valence. Positions and normals change every step, so their copies are gathered again before
// each use; the material coordinates are copied once. The tensor functions are the production
// ones (vertex_geometry.hpp), run on a ring type with a stride.

struct StridedRing {
  std::uint32_t begin, end, stride, count;
  bool open;
  APRON_HD std::uint32_t after(std::uint32_t k) const { return k + stride; }
  APRON_HD std::uint32_t next(std::uint32_t k) const {
    return k + stride != end ? k + stride : begin;
  }
  APRON_HD std::uint32_t triangles() const { return open ? count - 1 : count; }
};

// Entry k (= s V + v) names "vertex" V + k: the accessors below read its copy there.
struct CopiedRings {
  std::uint32_t vertices;
  const std::uint8_t* valence;
  const std::uint8_t* boundary;
  const double* spoke_weights;  // slot-major, like the copies
  APRON_HD StridedRing ring(std::size_t v) const {
    const auto u = static_cast<std::uint32_t>(v);
    const std::uint32_t count = valence[v];
    return {u, u + count * vertices, vertices, count, boundary[v] != 0};
  }
  APRON_HD std::uint32_t neighbour(std::uint32_t k) const { return vertices + k; }
  APRON_HD double spoke_weight(std::uint32_t k) const { return spoke_weights[k]; }
};

// A vertex's own value for i < V, ring entry i - V's copy above.
struct Copied {
  const Vector3<float>* own;
  const Vector3<float>* copies;
  std::uint32_t vertices;
  APRON_HD Vector3<float> operator()(std::uint32_t i) const {
    return i < vertices ? own[i] : copies[i - vertices];
  }
};

template <class Value>
struct GatherCopies {
  RingView rings;
  const Value* values;
  Value* copies;
  std::uint32_t vertices;
  APRON_HD void operator()(std::size_t v) const {
    const Ring ring = rings.ring(v);
    for (std::uint32_t k = ring.begin, s = 0; k < ring.end; ++k, ++s)
      copies[s * vertices + v] = values[rings.neighbour(k)];
  }
};

struct CopiedNormals {
  CopiedRings rings;
  Copied x;
  Vector3<float>* normal;
  float* area;
  APRON_HD void operator()(std::size_t v) const {
    const auto u = static_cast<std::uint32_t>(v);
    normal[v] = vertex_normal(x, rings, u);
    area[v] = vertex_area(x, rings, u);
  }
};

struct CopiedTensors {
  CopiedRings rings;
  Copied x, normals;
  const Vector2<float>* coordinates;  // slot-major, like the copies
  Vector3<float>* tangent;
  Sym2<float>* metric;
  Sym2<float>* curvature;
  std::uint8_t* valid;
  APRON_HD void operator()(std::size_t v) const {
    const auto u = static_cast<std::uint32_t>(v);
    Vector3<float> t;
    Sym2<float> a, c;
    valid[v] = vertex_tensors(x, normals, rings, coordinates, u, normals.own[u], t, a, c);
    tangent[v] = t;
    metric[v] = a;
    curvature[v] = c;
  }
};

// The tensor step on redundant copies: gather positions, normals, gather normals, tensors (the
// strains are per vertex and laid out alike in both). Returns its time and device bytes per vertex.
struct RedundantResult {
  double ms, gathers_ms, bytes_per_vertex;
  float largest_difference;  // against the CSR kernels' tensors
};
RedundantResult redundant_tensor_step(const HostMesh& rest, const DeviceMesh<float>& mesh,
                                      const ReferenceState<float>& reference,
                                      const DeviceVector<Vector3<float>>& x,
                                      const SurfaceTensors<float>& csr) {
  const auto n = static_cast<std::uint32_t>(rest.positions.size());
  const Rings rings = build_rings(rest);
  std::vector<std::uint8_t> valence(n);
  std::uint32_t widest = 0;
  for (std::uint32_t v = 0; v < n; ++v) {
    valence[v] = static_cast<std::uint8_t>(rings.offsets[v + 1] - rings.offsets[v]);
    widest = std::max<std::uint32_t>(widest, valence[v]);
  }
  const std::vector<Vector2<float>> csr_coordinates = to_host(reference.ring_coordinates);
  const std::vector<double> csr_weights = to_host(mesh.spoke_weights);
  std::vector<Vector2<float>> coordinates(std::size_t{widest} * n, Vector2<float>{0, 0});
  std::vector<double> weights(coordinates.size(), 0.0);
  for (std::uint32_t v = 0; v < n; ++v)
    for (std::uint32_t k = rings.offsets[v], s = 0; k < rings.offsets[v + 1]; ++k, ++s) {
      coordinates[std::size_t{s} * n + v] = csr_coordinates[k];
      weights[std::size_t{s} * n + v] = csr_weights[k];
    }
  const DeviceVector<std::uint8_t> valence_d(valence.begin(), valence.end());
  const DeviceVector<Vector2<float>> coordinates_d(coordinates.begin(), coordinates.end());
  const DeviceVector<double> weights_d(weights.begin(), weights.end());
  DeviceVector<Vector3<float>> x_copies(std::size_t{widest} * n), n_copies(x_copies.size());
  SurfaceTensors<float> out;
  out.resize(n);
  const RingView csr_rings = ring_view(mesh);
  const CopiedRings copied{n, raw(valence_d), raw(mesh.boundary), raw(weights_d)};
  const Copied positions{raw(x), raw(x_copies), n}, normals{raw(out.normal), raw(n_copies), n};
  const auto gather_positions = [&] {
    for_each_index(n, GatherCopies<Vector3<float>>{csr_rings, raw(x), raw(x_copies), n});
  };
  const auto gather_normals = [&] {
    for_each_index(n, GatherCopies<Vector3<float>>{csr_rings, raw(out.normal), raw(n_copies), n});
  };
  RedundantResult result{};
  result.ms = median_ms([&] {
    gather_positions();
    for_each_index(n, CopiedNormals{copied, positions, raw(out.normal), raw(out.area)});
    gather_normals();
    for_each_index(n,
                   CopiedTensors{copied, positions, normals, raw(coordinates_d), raw(out.tangent),
                                 raw(out.metric), raw(out.curvature), raw(out.valid)});
  });
  result.gathers_ms = median_ms([&] {
    gather_positions();
    gather_normals();
  });
  // Copies of positions and normals (12 bytes each), coordinates (8), normal weights (8),
  // valences (1).
  result.bytes_per_vertex = (24.0 + 16.0) * widest + 1;
  const std::vector<Sym2<float>> a = to_host(out.curvature), b = to_host(csr.curvature);
  for (std::uint32_t v = 0; v < n; ++v)
    result.largest_difference =
        std::max({result.largest_difference, std::abs(a[v].xx - b[v].xx),
                  std::abs(a[v].xy - b[v].xy), std::abs(a[v].yy - b[v].yy)});
  return result;
}

void measure(const std::string& name, const HostMesh& rest,
             const std::vector<std::array<double, 3>>& shaken) {
  const DeviceMesh<float> mesh32 = upload_mesh<float>(rest);
  const ReferenceState<float> reference32 = make_reference(mesh32, mesh32.positions);
  const DeviceVector<Vector3<float>> x32 = upload_positions<float>(shaken);
  SurfaceTensors<float> tensors;
  Strains<float> strain;
  const double tensor_step = median_ms([&] {
    surface_tensors(mesh32, x32, reference32, tensors);
    strains(tensors, reference32, strain);
  });
  const double fits = median_ms([&] { surface_tensors(mesh32, x32, reference32, tensors); });
  const RedundantResult redundant = redundant_tensor_step(rest, mesh32, reference32, x32, tensors);
  // CSR: positions (12), ring offsets (4), boundary flag (1); per ring entry its neighbour index
  // (4), coordinates (8) and normal weights (8: the spoke's; the rim's only the gradient reads).
  const double csr_bytes =
      17.0 + 20.0 * static_cast<double>(mesh32.ring_neighbours.size()) / rest.positions.size();
  std::printf(
      "%s: normals and fits, CSR %.3f ms (%.0f bytes/vertex), redundant copies %.3f ms of which "
      "gathers %.3f ms (%.0f bytes/vertex; curvature differs by %.1e)\n",
      name.c_str(), fits, csr_bytes, redundant.ms, redundant.gathers_ms,
      redundant.bytes_per_vertex + csr_bytes, redundant.largest_difference);

  const DeviceMesh<double> mesh = upload_mesh<double>(rest);
  const ReferenceState<double> reference = make_reference(mesh, mesh.positions);
  const EnergyModel model = make_energy_model(mesh, Material{100, 1e-3, 0});
  const DeviceVector<Vector3<double>> x = upload_positions<double>(shaken);
  DeviceVector<double> density;
  DeviceVector<Vector3<double>> g;
  const double w = median_ms([&] { energy_density(mesh, x, reference, model, density); });
  const double adjoint = median_ms([&] { energy_gradient(mesh, x, reference, model, g); });
  const EnergyModel mixed_model =
      make_energy_model(mesh, Material{100, 1e-3, 0}, GradientPrecision::mixed);
  const double mixed = median_ms([&] { energy_gradient(mesh, x, reference, mixed_model, g); });
  // The solver's default: mixed precision with hourglass control (cloth.material.hourglass).
  const EnergyModel controlled_model =
      make_energy_model(mesh, Material{100, 1e-3, 0, 0.1}, GradientPrecision::mixed);
  const double controlled =
      median_ms([&] { energy_gradient(mesh, x, reference, controlled_model, g); });
  const double forward = median_ms([&] { energy_gradient_forward(mesh, x, reference, model, g); });
  std::printf(
      "%s, %zu vertices: tensor step (float) %.3f ms, energy density %.3f ms, gradient %.3f ms "
      "(mixed precision %.3f ms, with hourglass control %.3f ms), forward-mode gradient %.1f ms "
      "(%.0fx the adjoint)\n",
      name.c_str(), rest.positions.size(), tensor_step, w, adjoint, mixed, controlled, forward,
      forward / adjoint);
}

}  // namespace

int main(int argc, char** argv) {
  std::string order = "as_given", file;
  std::vector<int> sizes;
  for (int a = 1; a < argc; ++a) {
    if (!std::strcmp(argv[a], "--order") && a + 1 < argc) {
      order = argv[++a];
    } else if (!std::strcmp(argv[a], "--mesh") && a + 1 < argc) {
      file = argv[++a];
    } else {
      sizes.push_back(std::atoi(argv[a]));
    }
  }
  if (order != "as_given" && order != "random" && order != "morton" && order != "valence") {
    std::fprintf(stderr, "cloth_kernels: --order must be as_given, random, morton or valence\n");
    return 2;
  }
  if (!file.empty()) {
    const io::TriangleMesh read = io::read_mesh(file);
    const HostMesh mesh = reordered(without_isolated({read.vertices, read.triangles}), order);
    std::vector<std::array<double, 3>> shaken = mesh.positions;
    std::mt19937_64 random(11);
    std::uniform_real_distribution<double> shake(-1e-4, 1e-4);
    for (auto& p : shaken)
      for (double& c : p) c += shake(random);
    measure(file + " (" + order + ")", mesh, shaken);
    return 0;
  }
  if (sizes.empty()) sizes = {100, 300};
  for (const int n : sizes) {
    const HostMesh mesh = reordered(
        grid_mesh(GridSpec{.nx = n - 1, .ny = n - 1, .perturbed = true, .seed = 3}), order);
    measure(std::to_string(n) + " x " + std::to_string(n) + " grid (" + order + ")", mesh,
            bent(mesh, n));
  }
}
