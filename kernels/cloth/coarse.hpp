// The two-level preconditioner's grid transfers on the device (src/cloth/cloth_two_level.cpp):
// restriction to a coarse lattice of hat functions, P^T y, and prolongation, z += P c. Each owned
// row has up to 8 corners (a node index and its hat weight, CSR over the rows). Restriction sums
// in fixed point, each term round(weight x scale x y) added as an integer, so the sums do not
// depend on the order the terms arrive in (threads, ranks): the same integers as the host's
// ClothSolver::restrict_to_coarse for the same rows and scale.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cloth/implicit.hpp"

namespace apron::cloth {

// Each owned row's corners on the lattice: offsets (count + 1), node, weight.
struct CoarseCorners {
  DeviceVector<std::uint32_t> offsets, node;
  DeviceVector<double> weight;
};

// The largest |component| of rows [0, count).
double largest_component(const Vectors& y, std::size_t count);
// sums (3 per node, set to zero first) += round(weight x scale x y), per component.
void restrict_fixed(const CoarseCorners& corners, const Vectors& y, std::size_t count, double scale,
                    DeviceVector<std::int64_t>& sums);
// out_i = sum over row i's corners of weight x c[node] (3 per node), for rows [0, count).
void prolong_rows(const CoarseCorners& corners, const DeviceVector<double>& c, std::size_t count,
                  Vectors& out);

}  // namespace apron::cloth
