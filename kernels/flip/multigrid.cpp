#include "kernels/flip/multigrid.hpp"
#include "kernels/common/algorithms.hpp"

#include "kernels/flip/voxel_stencil.hpp"

namespace apron::flip {
namespace {

using namespace detail;

struct FineCellTypes {
  SlotGeometry g;
  const std::int32_t* stencil;
  std::int32_t* type;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(g.grid, t);
    const std::size_t row = g.grid.row(v.slot, v.i, v.j, v.k);
    if (stencil[t] & kSelfFluid)
      type[row] = kCellFluid;
    else
      type[row] = g.solid_at(v.slot, v.i, v.j, v.k) ? kCellSolid : kCellAir;
  }
};

// Air wins over fluid, fluid over solid (McAdams et al. 2010): the coarse problem never extends
// the fluid past a free surface, and keeps every cell that holds fluid.
// Children outside the domain are solid whatever their type says (the padding of the dense
// brick past the domain's bricks holds air).
struct CoarsenCellTypes {
  SlotGeometry fine;
  BrickGrid coarse;
  const std::int32_t* fine_type;
  std::int32_t* coarse_type;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel c(coarse, t);
    bool air = false, fluid = false;
    for (int n = 0; n < 8; ++n) {
      const int i = 2 * c.i + (n & 1), j = 2 * c.j + ((n >> 1) & 1), k = 2 * c.k + (n >> 2);
      if (fine.solid_at(c.slot, i, j, k)) continue;
      const int type = fine_type[fine.grid.row(c.slot, i, j, k)];
      air = air || type == kCellAir;
      fluid = fluid || type == kCellFluid;
    }
    coarse_type[coarse.row(c.slot, c.i, c.j, c.k)] =
        air ? kCellAir : (fluid ? kCellFluid : kCellSolid);
  }
};

struct LevelStencil {
  SlotGeometry g;
  NeighbourReader read;
  const std::int32_t* type;
  std::int32_t* stencil;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(g.grid, t);
    if (type[g.grid.row(v.slot, v.i, v.j, v.k)] != kCellFluid) {
      stencil[t] = 0;
      return;
    }
    int bits = kSelfFluid, diag = 0;
    for (int n = 0; n < 6; ++n) {
      int di, dj, dk;
      neighbour(n, di, dj, dk);
      const int other =
          read.read(type, v.slot, v.i + di, v.j + dj, v.k + dk, std::int32_t{kCellAir});
      if (other == kCellSolid || g.solid_at(v.slot, v.i + di, v.j + dj, v.k + dk)) continue;
      ++diag;
      if (other == kCellFluid) bits |= 1 << n;
    }
    stencil[t] = bits | (diag << kDiagShift);
  }
};

struct JacobiSweep {
  NeighbourReader read;
  const std::int32_t* stencil;
  float omega;
  const float* b;
  const float* x;  // nullptr: zero
  float* out;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(read.grid, t);
    const std::size_t row = read.grid.row(v.slot, v.i, v.j, v.k);
    const int bits = stencil[t];
    const int diag = bits >> kDiagShift;
    if (!(bits & kSelfFluid) || diag == 0) {  // diag 0: a pocket walled in by solid, no equation
      out[row] = 0;
      return;
    }
    const float inverse = omega / static_cast<float>(diag);
    out[row] = x ? x[row] + inverse * (b[row] - apply_row(read, v, bits, x)) : inverse * b[row];
  }
};

struct LevelResidual {
  NeighbourReader read;
  const std::int32_t* stencil;
  const float* b;
  const float* x;
  float* r;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel v(read.grid, t);
    const std::size_t row = read.grid.row(v.slot, v.i, v.j, v.k);
    const int bits = stencil[t];
    r[row] = (bits & kSelfFluid) ? b[row] - apply_row(read, v, bits, x) : 0.0f;
  }
};

// Per axis, the weight of fine cell 2c - 1 + a in coarse cell c (cell-centred linear
// interpolation: a fine cell takes 3/4 of its parent and 1/4 of the parent's neighbour on its
// side).
APRON_HD inline float transfer_weight(int a) {
  return (a == 0 || a == 3) ? 0.25f : 0.75f;
}

struct RestrictResidual {
  NeighbourReader fine;
  BrickGrid coarse;
  const float* r;
  const std::int32_t* coarse_stencil;
  float* b;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel c(coarse, t);
    const std::size_t row = coarse.row(c.slot, c.i, c.j, c.k);
    if (!(coarse_stencil[t] & kSelfFluid)) {
      b[row] = 0;
      return;
    }
    float sum = 0;
    for (int ak = 0; ak < 4; ++ak)
      for (int aj = 0; aj < 4; ++aj) {
        const float w = transfer_weight(ak) * transfer_weight(aj);
        for (int ai = 0; ai < 4; ++ai)
          sum += w * transfer_weight(ai) *
                 fine(r, c.slot, 2 * c.i - 1 + ai, 2 * c.j - 1 + aj, 2 * c.k - 1 + ak);
      }
    b[row] = 0.5f * sum;
  }
};

struct ProlongAdd {
  NeighbourReader coarse;
  BrickGrid fine;
  const float* x_coarse;
  const std::int32_t* fine_stencil;
  float* x;
  APRON_HD void operator()(std::size_t t) const {
    const InteriorVoxel f(fine, t);
    if (!(fine_stencil[t] & kSelfFluid)) return;
    const int c[3] = {f.i >> 1, f.j >> 1, f.k >> 1};
    const int side[3] = {f.i & 1 ? 1 : -1, f.j & 1 ? 1 : -1, f.k & 1 ? 1 : -1};
    float sum = 0;
    for (int n = 0; n < 8; ++n) {
      const int s[3] = {n & 1, (n >> 1) & 1, n >> 2};  // 1: the parent's neighbour on f's side
      const float w = (s[0] ? 0.25f : 0.75f) * (s[1] ? 0.25f : 0.75f) * (s[2] ? 0.25f : 0.75f);
      sum += w * coarse(x_coarse, f.slot, c[0] + s[0] * side[0], c[1] + s[1] * side[1],
                        c[2] + s[2] * side[2]);
    }
    x[fine.row(f.slot, f.i, f.j, f.k)] += sum;
  }
};

template <class T>
struct CopyRows {
  const std::uint32_t* from_rows;
  const T* from;
  const std::uint32_t* to_rows;
  T* to;
  APRON_HD void operator()(std::size_t i) const { to[to_rows[i]] = from[from_rows[i]]; }
};

struct InteriorProduct {
  BrickGrid grid;
  const float* a;
  const float* b;
  APRON_HD double operator()(std::size_t t) const {
    const InteriorVoxel v(grid, t);
    const std::size_t row = grid.row(v.slot, v.i, v.j, v.k);
    return static_cast<double>(a[row]) * static_cast<double>(b[row]);
  }
};

}  // namespace

void fine_cell_types(const SlotGeometry& g, const std::int32_t* stencil, std::int32_t* type) {
  for_each_index(g.interior_voxels(), FineCellTypes{g, stencil, type});
}

void coarsen_cell_types(const SlotGeometry& fine, const std::int32_t* fine_type,
                        const SlotGeometry& coarse, std::int32_t* coarse_type) {
  for_each_index(coarse.interior_voxels(),
                 CoarsenCellTypes{fine, coarse.grid, fine_type, coarse_type});
}

void level_stencil(const LevelGeometry& l, const std::int32_t* type, std::int32_t* stencil) {
  for_each_index(l.g.interior_voxels(), LevelStencil{l.g, {l.g.grid, l.neighbours}, type, stencil});
}

void jacobi_sweep(const LevelGeometry& l, const std::int32_t* stencil, float omega, const float* b,
                  const float* x, float* out) {
  for_each_index(l.g.interior_voxels(),
                 JacobiSweep{{l.g.grid, l.neighbours}, stencil, omega, b, x, out});
}

void level_residual(const LevelGeometry& l, const std::int32_t* stencil, const float* b,
                    const float* x, float* r) {
  for_each_index(l.g.interior_voxels(), LevelResidual{{l.g.grid, l.neighbours}, stencil, b, x, r});
}

void restrict_residual(const LevelGeometry& fine, const float* r, const SlotGeometry& coarse,
                       const std::int32_t* coarse_stencil, float* b_coarse) {
  for_each_index(
      coarse.interior_voxels(),
      RestrictResidual{{fine.g.grid, fine.neighbours}, coarse.grid, r, coarse_stencil, b_coarse});
}

void prolong_add(const LevelGeometry& coarse, const float* x_coarse, const SlotGeometry& fine,
                 const std::int32_t* fine_stencil, float* x) {
  for_each_index(
      fine.interior_voxels(),
      ProlongAdd{{coarse.g.grid, coarse.neighbours}, fine.grid, x_coarse, fine_stencil, x});
}

void copy_rows(std::size_t n, const std::uint32_t* from_rows, const float* from,
               const std::uint32_t* to_rows, float* to) {
  for_each_index(n, CopyRows<float>{from_rows, from, to_rows, to});
}

void copy_rows(std::size_t n, const std::uint32_t* from_rows, const std::int32_t* from,
               const std::uint32_t* to_rows, std::int32_t* to) {
  for_each_index(n, CopyRows<std::int32_t>{from_rows, from, to_rows, to});
}

double interior_dot(const SlotGeometry& g, const float* a, const float* b) {
  return transform_reduce(g.interior_voxels(), InteriorProduct{g.grid, a, b}, 0.0, Plus{});
}

}  // namespace apron::flip
