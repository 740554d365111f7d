// The multigrid preconditioner of the FLIP pressure solve (`flip.pressure.preconditioner:
// mgpcg`; McAdams, Sifakis, Teran 2010), one V-cycle per conjugate-gradient iteration.
//
// The levels down to one cell per brick keep the fine level's bricks and slots (each rank its
// own; the kernels read across brick faces through the neighbour table of a BrickHalo planned
// like the fine one, which also refreshes other ranks' copies). Below that the
// problem is one cell per brick of the whole domain: small (32^3 cells at 256^3 voxels), so
// every rank gathers it (an MPI_Allreduce of the bricks' values) into a dense grid of 8^3 bricks,
// all present, and runs the rest of the V-cycle on it alike; and again over that grid's bricks,
// until a single cell is left. Memory and Allreduce volume grow with the domain's bricks (4 bytes
// each per field), not the fluid's. The kernels are kernels/flip/multigrid.hpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "decomposition/brick_halo.hpp"
#include "kernels/common/particle_store.hpp"
#include "kernels/flip/flip_kernels.hpp"

namespace apron::flip {

class PressureMultigrid {
 public:
  // fine: the projection's grid; transport: the ranks' (for the per-rank levels' aprons).
  PressureMultigrid(Transport& transport, const BrickGrid& fine);
  ~PressureMultigrid();

  // Collective; after every change of the fine bricks (fine_halo planned, in slot order).
  void plan(const BrickHalo& fine_halo);
  // Collective; once per projection: every level's cell types and stencils from the fine
  // level's (g: the fine slots and solids, stencil: pressure_system()'s). Both must outlive the
  // projection's apply() calls.
  void setup(const SlotGeometry& g, const std::int32_t* stencil);
  // z = M^-1 r on the local interiors (one V-cycle; z's apron is left as it was); returns the sum
  // of r z over this rank's interiors. Collective.
  double apply(const float* r, float* z);

  int levels() const;
  std::size_t device_bytes() const;

 private:
  struct Level;
  using Hierarchy = std::vector<Level>;
  // Where hierarchy h's last level (one cell per brick) meets hierarchy h + 1's first.
  struct Handover {
    DeviceVector<std::uint32_t> from_rows, to_rows;
  };
  void set_handover(std::size_t h, const std::vector<BrickCoord>& bricks);
  void coarsen(Hierarchy& levels);
  void v_cycle(std::size_t h, std::size_t l, float* out);
  void smooth_from_zero(Level& level, int sweeps);
  void smooth(Level& level, int sweeps, float* out);
  void hand_over(std::size_t h, float* out);

  Transport& transport_;
  Transport self_;  // the dense hierarchies: every rank alone
  int ranks_ = 1;
  // [0]: this rank's bricks, down to one cell per brick; then dense ones, each over the cells of
  // the one before's last level, every rank holding them all.
  std::vector<Hierarchy> hierarchies_;
  std::vector<Handover> handovers_;
  std::vector<std::int32_t> host_types_;
};

}  // namespace apron::flip
