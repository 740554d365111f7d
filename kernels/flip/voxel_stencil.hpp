// Pieces the FLIP kernels and the pressure multigrid share (device code only, not an API): the
// walk over interior voxels, the 7-point stencil's encoding and the reduction over indices.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/backend.hpp"
#include "kernels/sparse/brick_grid.hpp"

namespace apron::flip::detail {

// Stencil bits: neighbour n (0..5: -x +x -y +y -z +z) is fluid; the voxel itself is fluid; the
// count of non-solid neighbours from bit kDiagShift on.
constexpr int kSelfFluid = 1 << 6;
constexpr int kDiagShift = 8;

// Interior index t -> slot and voxel (i, j, k) in [0, B)^3.
struct InteriorVoxel {
  std::size_t slot;
  int i, j, k;
  APRON_HD InteriorVoxel(const BrickGrid& grid, std::size_t t) {
    const std::size_t per = grid.interior_per_brick();
    slot = t / per;
    const auto r = static_cast<int>(t - slot * per);
    i = r % grid.b;
    j = (r / grid.b) % grid.b;
    k = r / (grid.b * grid.b);
  }
};

// The six neighbours' offsets, in stencil bit order.
APRON_HD inline void neighbour(int n, int& di, int& dj, int& dk) {
  di = n == 0 ? -1 : (n == 1 ? 1 : 0);
  dj = n == 2 ? -1 : (n == 3 ? 1 : 0);
  dk = n == 4 ? -1 : (n == 5 ? 1 : 0);
}

// Reads values at (i, j, k) relative to a slot's first voxel, each in [-1, B + 1): from the
// slot's filled apron (ApronReader), or through the slots' neighbour table (NeighbourReader, 27
// per slot as BrickHalo keeps it: no apron to fill first; 0 where no brick is).
struct ApronReader {
  BrickGrid grid;
  APRON_HD float operator()(const float* x, std::size_t slot, int i, int j, int k) const {
    return x[grid.row(slot, i, j, k)];
  }
};

struct NeighbourReader {
  BrickGrid grid;
  const std::int32_t* neighbours;
  // The row of the interior voxel at (i, j, k), each in [-B, 2B), or -1 where no brick is.
  APRON_HD long long row(std::size_t slot, int i, int j, int k) const {
    const int b = grid.b;
    const int oi = i < 0 ? -1 : (i >= b ? 1 : 0), oj = j < 0 ? -1 : (j >= b ? 1 : 0),
              ok = k < 0 ? -1 : (k >= b ? 1 : 0);
    if (!oi && !oj && !ok) return static_cast<long long>(grid.row(slot, i, j, k));
    const int n = neighbours[27 * slot + (oi + 1) + 3 * (oj + 1) + 9 * (ok + 1)];
    if (n < 0) return -1;
    return static_cast<long long>(
        grid.row(static_cast<std::size_t>(n), i - oi * b, j - oj * b, k - ok * b));
  }
  template <class T>
  APRON_HD T read(const T* x, std::size_t slot, int i, int j, int k, T missing) const {
    const long long r = row(slot, i, j, k);
    return r < 0 ? missing : x[r];
  }
  APRON_HD float operator()(const float* x, std::size_t slot, int i, int j, int k) const {
    return read(x, slot, i, j, k, 0.0f);
  }
};

// (A x) at a fluid voxel of the given stencil bits: the sum over fluid neighbours of x - x_n,
// plus x per air neighbour. The same as diag x - sum x_n, but the differences are small where x
// is smooth, so float32 rounds far less away: it sets the floor a float32 CG's true residual can
// reach (a hydrostatic pressure 64 voxels deep: diag x - sum x_n stalls near 1e-5).
template <class Reader>
APRON_HD inline float apply_row(const Reader& read, const InteriorVoxel& v, int bits,
                                const float* x) {
  const float centre = x[read.grid.row(v.slot, v.i, v.j, v.k)];
  int air = bits >> kDiagShift;
  float sum = 0;
  for (int n = 0; n < 6; ++n)
    if (bits & (1 << n)) {
      int di, dj, dk;
      neighbour(n, di, dj, dk);
      sum += centre - read(x, v.slot, v.i + di, v.j + dj, v.k + dk);
      --air;
    }
  return sum + static_cast<float>(air) * centre;
}

}  // namespace apron::flip::detail
