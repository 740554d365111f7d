// The cloth kernels' speed (issue 17): per vertex, the seed's tensor step (normals, frames,
// metric and curvature fits, strains; float, the seed's 2.1 ms at 100x100 on its GPU) and, in
// float64, the energy density, the adjoint gradient and the forward-mode gradient it replaced.
// A perturbed grid of n x n vertices bent onto a cylinder and shaken; median of 5 after a
// warm-up.   usage: cloth_kernels [n ...]   (default 100 300)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

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
std::vector<std::array<double, 3>> deformed(const HostMesh& mesh, int n) {
  std::vector<std::array<double, 3>> x = mesh.positions;
  std::srand(11);
  for (auto& p : x) {
    const double angle = p[0] / 0.9;
    p = {0.9 * std::sin(angle), p[1], 0.9 * (1 - std::cos(angle))};
    for (double& c : p) c += 0.2 / n * (std::rand() / double(RAND_MAX) - 0.5);
  }
  return x;
}

void measure(int n) {
  const GridSpec spec{.nx = n - 1, .ny = n - 1, .perturbed = true, .seed = 3};
  const HostMesh rest = grid_mesh(spec);
  const auto shaken = deformed(rest, n);

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
  const double forward = median_ms([&] { energy_gradient_forward(mesh, x, reference, model, g); });
  std::printf(
      "%d x %d vertices: tensor step (float) %.3f ms, energy density %.3f ms, gradient %.3f ms, "
      "forward-mode gradient %.1f ms (%.0fx the adjoint)\n",
      n, n, tensor_step, w, adjoint, forward, forward / adjoint);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int a = 1; a < argc; ++a) sizes.push_back(std::atoi(argv[a]));
  if (sizes.empty()) sizes = {100, 300};
  for (const int n : sizes) measure(n);
}
