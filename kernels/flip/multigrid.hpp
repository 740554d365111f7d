// Device kernels of the pressure projection's multigrid preconditioner (McAdams, Sifakis, Teran,
// "A parallel multigrid Poisson solver for fluids simulation on large grids", SCA 2010) on
// sparse bricks. Every level keeps the same bricks in the same slots; level l has B / 2^l cells per
// brick edge, each cell covering 2^l voxels per axis, stored in BrickGrid's layout for brick size
// B / 2^l (its apron rows unused: the kernels read neighbours through LevelGeometry). A coarse cell
// is air (Dirichlet) where any of its eight children is air, else fluid where any is fluid, else
// solid (Neumann); its operator is the 7-point stencil of those types, in the encoding of
// apply_laplacian(). Transfers are trilinear prolongation P and restriction R = P^T / 2 (the
// unscaled stencils make P^T A P = 2 A_coarse), both masked to fluid cells, and the smoother is
// damped Jacobi: with as many sweeps after as before, the V-cycle is a symmetric positive definite
// operator, as conjugate gradient needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/flip/flip_kernels.hpp"

namespace apron::flip {

enum : std::int32_t { kCellAir = kAir, kCellFluid = kFluid, kCellSolid = 2 };

// A level's slots and how they find their neighbours: BrickHalo's table (27 slots per slot, -1
// where no brick is). The kernels read across brick faces through it, so no apron is filled: a
// V-cycle is launch-bound, and the fills were half its launches. Cells where no brick is read as
// 0 (values) or air (types); cells outside the domain (g.solid) are solid.
struct LevelGeometry {
  SlotGeometry g;
  const std::int32_t* neighbours;
};

// The finest level's cell types (every interior row): fluid from the stencil, solid from the
// geometry, air otherwise.
void fine_cell_types(const SlotGeometry& g, const std::int32_t* stencil, std::int32_t* type);
// The coarse level's interior cell types from their children in the finer level.
void coarsen_cell_types(const SlotGeometry& fine, const std::int32_t* fine_type,
                        const SlotGeometry& coarse, std::int32_t* coarse_type);
// The 7-point stencil of a coarse level from its cell types.
void level_stencil(const LevelGeometry& l, const std::int32_t* type, std::int32_t* stencil);

// out = x + omega (b - A x) / diag at fluid cells, 0 elsewhere; x = nullptr stands for x = 0 (the
// first sweep of a V-cycle).
void jacobi_sweep(const LevelGeometry& l, const std::int32_t* stencil, float omega, const float* b,
                  const float* x, float* out);
// r = b - A x at fluid cells, 0 elsewhere.
void level_residual(const LevelGeometry& l, const std::int32_t* stencil, const float* b,
                    const float* x, float* r);
// b_coarse = R r at the coarse level's fluid cells (0 elsewhere).
void restrict_residual(const LevelGeometry& fine, const float* r, const SlotGeometry& coarse,
                       const std::int32_t* coarse_stencil, float* b_coarse);
// x += P x_coarse at the fine level's fluid cells.
void prolong_add(const LevelGeometry& coarse, const float* x_coarse, const SlotGeometry& fine,
                 const std::int32_t* fine_stencil, float* x);

// to[to_rows[i]] = from[from_rows[i]] for i < n (moves cells between the per-rank bricks and the
// one dense brick that holds the coarse levels every rank solves alike).
void copy_rows(std::size_t n, const std::uint32_t* from_rows, const float* from,
               const std::uint32_t* to_rows, float* to);
void copy_rows(std::size_t n, const std::uint32_t* from_rows, const std::int32_t* from,
               const std::uint32_t* to_rows, std::int32_t* to);

// Sum over interior voxels of a b (this rank, float64).
double interior_dot(const SlotGeometry& g, const float* a, const float* b);

}  // namespace apron::flip
