// P2G on sparse bricks, two organisations of the same gather (issue 15; bench/NOTES.md, "P2G:
// voxel gather against the paper's subcells"):
//  - apron's: one thread per stored voxel, reading the particles of the <= 27 voxels around it
//    from their voxel-sorted runs in global memory (kernels/flip particle_to_grid);
//  - the paper's (Wu et al. 2018): one thread block per subcell, which first stages the particles
//    that can reach its voxels in shared memory (positions quantised to 16 bits relative to the
//    subcell), then each thread sums its voxel's weights over that list. With voxel-sorted
//    particles the subcell's list is its region's runs, so no separate count/scan/fill pass.
// The paper's dam break block: 64 x 128 x 128 voxels in bricks of 8^3, 8 particles per voxel
// (8.39M), every brick held. Prints the median of 20 timed runs of each and their largest
// difference (relative to the largest value).
// Usage: flip_p2g [particles per voxel]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"
#include "kernels/flip/flip_kernels.hpp"

using namespace apron;
using namespace apron::flip;

namespace {

#if defined(__CUDACC__)
// A subcell: half of a brick's stored voxels along each axis ([-1, B/2) and [B/2, B + 1)), so
// 8 per brick, (B/2 + 1)^3 = 125 voxels each at B = 8. Its particles: the interior voxels within
// one voxel of them.
constexpr int kSubThreads = 128;
constexpr int kChunk = 1024;  // particles staged per pass (18 KiB of shared memory)

__device__ inline float hat_d(float r) {
  const float a = fabsf(r);
  return a < 1 ? 1 - a : 0;
}

double max_difference(const DeviceVector<Vec4>& a, const DeviceVector<Vec4>& b) {
  std::vector<Vec4> x(a.size()), y(b.size());
  apron::copy(a.begin(), a.end(), x.begin());
  apron::copy(b.begin(), b.end(), y.begin());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float u[4] = {x[i].x, x[i].y, x[i].z, x[i].w}, v[4] = {y[i].x, y[i].y, y[i].z, y[i].w};
    for (int c = 0; c < 4; ++c) {
      diff = std::max(diff, static_cast<double>(std::fabs(u[c] - v[c])));
      scale = std::max(scale, static_cast<double>(std::fabs(u[c])));
    }
  }
  return diff / std::max(scale, 1e-30);
}

__global__ void __launch_bounds__(kSubThreads)
    subcell_p2g(BrickGrid grid, const std::uint32_t* first, const std::uint32_t* last,
                const Vec4* pos, const Vec4* vel, Vec4* momentum, Vec4* weight) {
  __shared__ unsigned short qx[kChunk], qy[kChunk], qz[kChunk];
  __shared__ float ux[kChunk], uy[kChunk], uz[kChunk];
  const int b = grid.b, half = b / 2, span = half + 1;
  const auto slot = static_cast<std::uint32_t>(blockIdx.x / 8);
  const int sub = static_cast<int>(blockIdx.x % 8);
  int lo[3], plo[3], phi[3];
  for (int d = 0; d < 3; ++d) {
    lo[d] = (sub >> d & 1) ? half : -1;  // first stored voxel of the subcell on axis d
    plo[d] = max(lo[d] - 1, 0);
    phi[d] = min(lo[d] + span, b - 1);  // last interior voxel that reaches it
  }
  // This thread's voxel, relative to the subcell's first one.
  const int t = static_cast<int>(threadIdx.x);
  const bool active = t < span * span * span;
  const int vi = t % span, vj = (t / span) % span, vk = t / (span * span);
  // Quantisation: the region spans at most span + 2 voxels from plo; 16 bits over 8 voxels.
  const float scale = 65535.0f / 8.0f;
  int3 brick;
  {
    int c[3];
    grid.brick_coords(static_cast<std::uint32_t>(slot), c);  // every brick held: slot == key
    brick = make_int3(c[0] * b, c[1] * b, c[2] * b);
  }
  // The voxel's corner relative to the region's first voxel, in voxel units.
  const float cx = static_cast<float>(lo[0] + vi - plo[0]);
  const float cy = static_cast<float>(lo[1] + vj - plo[1]);
  const float cz = static_cast<float>(lo[2] + vk - plo[2]);
  Vec4 m{0, 0, 0, 0}, w{0, 0, 0, 0};
  // The region's particles are one run per (j, k) row: first[row start] .. last[row end].
  const int rows_j = phi[1] - plo[1] + 1, rows = rows_j * (phi[2] - plo[2] + 1);
  int row = 0;
  std::uint32_t next = 0, end = 0;
  auto open_row = [&](int r) {
    const int j = plo[1] + r % rows_j, k = plo[2] + r / rows_j;
    next = first[grid.interior_index(slot, plo[0], j, k)];
    end = last[grid.interior_index(slot, phi[0], j, k)];
  };
  open_row(0);
  for (;;) {
    // Stage up to kChunk particles (every thread walks the same runs; thread t takes every
    // kSubThreads-th).
    __syncthreads();
    int staged = 0;
    while (staged < kChunk && row < rows) {
      const std::uint32_t take = min(end - next, static_cast<std::uint32_t>(kChunk - staged));
      for (std::uint32_t q = static_cast<std::uint32_t>(t); q < take; q += kSubThreads) {
        const Vec4 x = load(pos + next + q), u = load(vel + next + q);
        const float gx = grid.grid_coord(x.x, 0) - static_cast<float>(brick.x + plo[0]);
        const float gy = grid.grid_coord(x.y, 1) - static_cast<float>(brick.y + plo[1]);
        const float gz = grid.grid_coord(x.z, 2) - static_cast<float>(brick.z + plo[2]);
        qx[staged + q] = static_cast<unsigned short>(fminf(fmaxf(gx, 0.f), 8.f) * scale + 0.5f);
        qy[staged + q] = static_cast<unsigned short>(fminf(fmaxf(gy, 0.f), 8.f) * scale + 0.5f);
        qz[staged + q] = static_cast<unsigned short>(fminf(fmaxf(gz, 0.f), 8.f) * scale + 0.5f);
        ux[staged + q] = u.x, uy[staged + q] = u.y, uz[staged + q] = u.z;
      }
      staged += static_cast<int>(take);
      next += take;
      if (next == end && ++row < rows) open_row(row);
    }
    __syncthreads();
    if (staged == 0) break;
    if (active)
      for (int q = 0; q < staged; ++q) {
        const float gx = qx[q] / scale - cx, gy = qy[q] / scale - cy, gz = qz[q] / scale - cz;
        if (gx <= -1 || gx >= 2 || gy <= -1 || gy >= 2 || gz <= -1 || gz >= 2) continue;
        const float hx = hat_d(gx), hy = hat_d(gy), hz = hat_d(gz);
        const float ax = hat_d(gx - 0.5f), ay = hat_d(gy - 0.5f), az = hat_d(gz - 0.5f);
        const float wx = hx * ay * az, wy = ax * hy * az, wz = ax * ay * hz;
        m.x += wx * ux[q], m.y += wy * uy[q], m.z += wz * uz[q];
        w.x += wx, w.y += wy, w.z += wz;
        // The particle count of the voxel itself (P2G's w.w, the fluid marker's input).
        if (gx >= 0 && gx < 1 && gy >= 0 && gy < 1 && gz >= 0 && gz < 1) w.w += 1;
      }
  }
  if (active) {
    const std::size_t r = grid.row(slot, lo[0] + vi, lo[1] + vj, lo[2] + vk);
    momentum[r] = m;
    weight[r] = w;
  }
}
#endif

template <class F>
double median_ms(F f, int runs) {
  std::vector<double> ms;
  for (int r = 0; r < runs + 1; ++r) {
    device_synchronize();
    const auto start = std::chrono::steady_clock::now();
    f();
    device_synchronize();
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) ms.push_back(t);  // the first is a warm-up
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int per_voxel = argc > 1 ? std::atoi(argv[1]) : 8;
  BrickGrid grid;
  grid.dx = 1.0f / 256;
  const int voxels[3] = {64, 128, 128};
  for (int d = 0; d < 3; ++d) {
    grid.voxels[d] = voxels[d];
    grid.bricks[d] = voxels[d] / grid.b;
  }
  const std::size_t slots = grid.brick_count();
  std::vector<std::int32_t> slot_of(slots);
  std::vector<int> origin(3 * slots);
  for (std::size_t s = 0; s < slots; ++s) {
    slot_of[s] = static_cast<std::int32_t>(s);
    int c[3];
    grid.brick_coords(static_cast<std::uint32_t>(s), c);
    for (int d = 0; d < 3; ++d) origin[3 * s + d] = c[d] * grid.b;
  }
  // Jittered particles, per_voxel in every voxel, random velocities.
  const std::size_t n = static_cast<std::size_t>(voxels[0]) * voxels[1] * voxels[2] * per_voxel;
  std::vector<Vec4> hp(n), hv(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  std::size_t p = 0;
  for (int k = 0; k < voxels[2]; ++k)
    for (int j = 0; j < voxels[1]; ++j)
      for (int i = 0; i < voxels[0]; ++i)
        for (int q = 0; q < per_voxel; ++q, ++p) {
          hp[p] = {(i + u01(rng)) * grid.dx, (j + u01(rng)) * grid.dx, (k + u01(rng)) * grid.dx, 0};
          hv[p] = {u01(rng) - 0.5f, u01(rng) - 0.5f, u01(rng) - 0.5f, 0};
        }
  DeviceVector<Vec4> pos, vel, sorted_pos, sorted_vel;
  upload(pos, hp);
  upload(vel, hv);
  DeviceVector<std::int32_t> slot_table;
  DeviceVector<int> origins;
  upload(slot_table, slot_of);
  upload(origins, origin);
  SlotGeometry g;
  g.grid = grid;
  g.origin = raw(origins);
  g.slots = slots;
  DeviceVector<std::uint32_t> keys, order, first, last;
  particle_voxel_keys(g, raw(slot_table), pos, n, keys, order);
  sort_pairs(keys, order, n);
  resize_per_particle(sorted_pos, n);
  resize_per_particle(sorted_vel, n);
  apron::gather(order.begin(), order.end(), pos.begin(), sorted_pos.begin());
  apron::gather(order.begin(), order.end(), vel.begin(), sorted_vel.begin());
  voxel_ranges(g, keys, n, first, last);

  DeviceVector<Vec4> momentum(g.stored_voxels()), weight(g.stored_voxels());
  GridFields f{};
  f.momentum = raw(momentum);
  f.weight = raw(weight);
  const double gather_ms =
      median_ms([&] { particle_to_grid(g, first, last, sorted_pos, sorted_vel, f); }, 20);
  std::printf("%zu particles (%d per voxel), %zu bricks of %d^3, %zu stored voxels\n", n, per_voxel,
              slots, grid.b, g.stored_voxels());
  std::printf("voxel gather (apron):   %.3f ms\n", gather_ms);
#if defined(__CUDACC__)
  DeviceVector<Vec4> momentum2(g.stored_voxels()), weight2(g.stored_voxels());
  const double subcell_ms = median_ms(
      [&] {
        subcell_p2g<<<static_cast<unsigned>(slots * 8), kSubThreads>>>(
            grid, raw(first), raw(last), raw(sorted_pos), raw(sorted_vel), raw(momentum2),
            raw(weight2));
        check_launch("subcell_p2g");
      },
      20);
  std::printf(
      "subcell staging (paper): %.3f ms; largest difference: momentum %.2e, weight %.2e "
      "(relative to the largest value; 16-bit positions)\n",
      subcell_ms, max_difference(momentum, momentum2), max_difference(weight, weight2));
#else
  std::printf("subcell staging (paper): CUDA only\n");
#endif
  return 0;
}
