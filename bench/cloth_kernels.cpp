// The cloth kernels' speed (issue 17): per vertex, the seed's tensor step (normals, frames,
// metric and curvature fits, strains; float, the seed's 2.1 ms at 100x100 on its GPU) and, in
// float64, the energy density, the adjoint gradient and the forward-mode gradient it replaced.
// A perturbed grid of n x n vertices bent onto a cylinder and shaken, or a mesh file (shaken);
// median of 5 after a warm-up. The vertex order is the data-structure question of the issue:
// `as_given` (grid rows, or the file's), `random` (a shuffle: what an unordered mesh costs) or
// `morton` (a space-filling curve over the rest positions) or `valence` (grouped by valence, the
// seed's proposal for uniform loop counts per warp; Morton order within a group).
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
  const double forward = median_ms([&] { energy_gradient_forward(mesh, x, reference, model, g); });
  std::printf(
      "%s, %zu vertices: tensor step (float) %.3f ms, energy density %.3f ms, gradient %.3f ms "
      "(mixed precision %.3f ms), forward-mode gradient %.1f ms (%.0fx the adjoint)\n",
      name.c_str(), rest.positions.size(), tensor_step, w, adjoint, mixed, forward,
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
