// Partition of the global domain box into one subdomain box per rank: cartesian (a process grid
// whose shape minimises the cut area) or recursive coordinate bisection balanced by particle count
// (or by a weight per point),
// each cut across the longest side of its particles' bounding box.
#pragma once

#include <mpi.h>

#include <array>
#include <span>
#include <vector>

#include "kernels/common/vec.hpp"

namespace apron {

class Partition {
 public:
  Partition() = default;
  Partition(const Box& domain, std::vector<Box> subdomains);

  // dims = {0,0,0} picks the process grid; otherwise the product must equal ranks.
  static Partition cartesian(const Box& domain, int ranks, std::array<int, 3> dims = {0, 0, 0});
  // Collective over comm: boxes that hold (nearly) equal numbers of the given points. Each rank
  // passes its own points; the result is identical on every rank.
  static Partition rcb(const Box& domain, MPI_Comm comm, std::span<const Vec4> points);
  // The same balanced by weight: boxes that hold (nearly) equal total weight, one weight per
  // point (particles per brick, work per vertex...). Unit weights give exactly the boxes of the
  // overload above, which calls this one.
  static Partition rcb(const Box& domain, MPI_Comm comm, std::span<const Vec4> points,
                       std::span<const double> weights);

  const Box& domain() const { return domain_; }
  const Box& subdomain(int rank) const { return boxes_[rank]; }
  const std::vector<Box>& subdomains() const { return boxes_; }
  // The subdomains with faces on the domain boundary pushed out to infinity, so every point,
  // even a stray outside the domain, has exactly one owner.
  const std::vector<Box>& ownership_boxes() const { return ownership_; }
  int ranks() const { return static_cast<int>(boxes_.size()); }
  // Ranks other than `rank` whose subdomain lies within `halo` of rank's subdomain.
  std::vector<int> neighbours(int rank, double halo) const;

 private:
  Box domain_;
  std::vector<Box> boxes_;
  std::vector<Box> ownership_;
};

// Process-grid shape for `ranks` over a box with these extents: the factorisation with the least
// total cut area (MPI_Dims_create ignores the box shape, which matters for slabs and columns).
std::array<int, 3> process_grid(int ranks, const std::array<double, 3>& extents);

// Device-side owner lookup over Partition::ownership_boxes(): the first box that holds p.
struct OwnerLookup {
  const Box* boxes;
  int count;

  APRON_HD int operator()(const Vec4& p) const {
    for (int r = 0; r < count; ++r)
      if (boxes[r].contains(p)) return r;
    return 0;  // unreachable: the ownership boxes cover all of space
  }
};

}  // namespace apron
