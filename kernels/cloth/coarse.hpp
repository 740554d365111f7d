// The two-level preconditioner's grid transfers on the device (src/cloth/cloth_two_level.cpp):
// restriction to a coarse lattice of hat functions, P^T y, and prolongation, z += P c. Each owned
// row has up to 8 corners (a node index and its hat weight, CSR over the rows). Restriction sums
// in fixed point, each term round(weight x scale x y) added as an integer, so the sums do not
// depend on the order the terms arrive in (threads, ranks): the same integers as the host's
// ClothSolver::restrict_to_coarse for the same rows and scale. It gathers by node (the corners
// transposed), so no two threads add to one sum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cloth/implicit.hpp"

namespace apron::cloth {

// Each owned row's corners on the lattice: offsets (count + 1), node, weight.
struct CoarseCorners {
  DeviceVector<std::uint32_t> offsets, node;
  DeviceVector<double> weight;
};

// The same corners by node (the transpose), for a restriction without atomics: each node's terms
// (row, weight) in chunks of at most kGatherChunk; chunk c holds terms [first[c], first[c + 1]),
// all of one node, and node n's chunks are [chunks[n], chunks[n + 1]); partial: 3 sums a chunk.
struct CoarseGather {
  DeviceVector<std::uint32_t> row;
  DeviceVector<double> weight;
  DeviceVector<std::uint32_t> first, chunks;
  DeviceVector<std::int64_t> partial;
};
inline constexpr std::uint32_t kGatherChunk = 64;
// From the rows' corners (offsets, node, weight on the host) over `nodes` nodes.
CoarseGather gather_by_node(const std::vector<std::uint32_t>& offsets,
                            const std::vector<std::uint32_t>& node,
                            const std::vector<double>& weight, std::size_t nodes);

// The largest |component| of rows [0, count).
double largest_component(const Vectors& y, std::size_t count);
// sums (3 per node) = the sums over each node's terms of round(weight x scale x y), per
// component: each chunk's terms summed by one thread, then each node's chunks. No two threads
// write one sum: integer atomics onto the few nodes that neighbouring rows share serialised
// (0.5 ms for 1M rows onto 2116 nodes on an H200).
void restrict_gather(CoarseGather& gather, const Vectors& y, double scale,
                     DeviceVector<std::int64_t>& sums);
// out_i = sum over row i's corners of weight x c[node] (3 per node), for rows [0, count).
void prolong_rows(const CoarseCorners& corners, const DeviceVector<double>& c, std::size_t count,
                  Vectors& out);

// The coarse operator's probes on the device (ClothSolver::build_coarse_operator): one colour's
// rows each own a node (owner, kNoOwner: none) and a hat weight there (share). probe = share
// along `axis` on rows [0, count), zero on the rest of it.
inline constexpr std::uint32_t kNoOwner = 0xffffffffu;
void fill_probe(const std::uint32_t* owner, const double* share, std::size_t count, int axis,
                Vectors& probe);
// The largest |component| of the rows [0, count) that own a node.
double largest_owned_component(const std::uint32_t* owner, const Vectors& y, std::size_t count);
// The banded operator's column entries from the product y = A probe, in fixed point: for each
// row i owning node o and each corner (node n, weight w) of it, entry (3 n + a, 3 o + axis) +=
// round(w y_i[a] scale), stored at row p, column q at p * (2 band + 1) + q - p + band (none
// beyond the band). Integers: the same sums in any order, as the host's loop made them.
void accumulate_column(const CoarseCorners& corners, const std::uint32_t* owner, const Vectors& y,
                       std::size_t count, int axis, double scale, std::size_t band,
                       DeviceVector<std::int64_t>& fixed);

// The coarse solve as one dense product, where a GPU would otherwise wait for the host's banded
// triangular solves (two sequential sweeps over the unknowns, ~7 ms at 1M vertices against a
// dense product's ~0.1 ms). The banded Cholesky factor of an n x n matrix A = L L^T (lower: row
// p, column p - d at p * (band + 1) + d; upper: L^T by rows, row p, column p + d there) to A^-1,
// n x n, symmetrised (its two triangles averaged, so that the preconditioner stays symmetric
// whatever the inversion's round-off). Column j is the host's two triangular solves of e_j, term
// for term; false where an entry is not finite.
bool invert_banded_factor(const DeviceVector<double>& lower, const DeviceVector<double>& upper,
                          std::size_t n, std::size_t band, DeviceVector<double>& inverse);
// y = A x for a symmetric n x n matrix A, summed in a fixed order (chunks of columns, then the
// chunks in turn), so every rank's product of the same A and x has the same bits; partial is
// scratch.
void multiply_symmetric(const DeviceVector<double>& matrix, std::size_t n,
                        const DeviceVector<double>& x, DeviceVector<double>& partial,
                        DeviceVector<double>& y);

}  // namespace apron::cloth
