// Aprons of sparse bricks. A brick holds B^3 voxels; each local brick stores (B + 2A)^3 values:
// its interior and an apron A voxels wide that mirrors the neighbouring bricks' interiors. Layout
// (for every field of the caller's ParticleStore, one row per voxel): brick-major, then voxel
// (i, j, k) in [-A, B + A)^3 with x fastest; local bricks first in the order given to plan(), then
// the remote copies of other ranks' bricks that touch a local brick. Of a remote copy only the
// interior voxels within A of a local brick (across a face, edge or corner) are kept up to date;
// the rest of its rows are never read or written.
//
// plan() (collective, on the host; again after every topology change) finds which bricks exist
// next to the local ones and builds a HaloPlan that exports, to every rank holding one of a
// brick's neighbours, the part of its interior within A of that rank's bricks. fill() refreshes the
// remote copies and then fills every apron voxel on the device from the neighbour brick's interior
// (local or remote copy) or with a background value where no brick exists. reverse_sum() adds apron
// contributions back into the interior voxels they overlap, on whichever rank owns that brick
// (particle-to-grid transfers).
#pragma once

#include <array>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "decomposition/halo_plan.hpp"
#include "kernels/sparse/brick_layout.hpp"

namespace apron {

using BrickCoord = std::array<int, 3>;

class BrickHalo {
 public:
  // brick_size B >= 1, apron 0 <= A <= B.
  BrickHalo(Transport& transport, int brick_size, int apron);

  int brick_size() const { return b_; }
  int apron() const { return a_; }
  const BrickLayout& layout() const { return layout_; }
  int side() const { return layout_.side(); }
  std::size_t voxels_per_brick() const { return voxels_; }
  // Row of voxel (i, j, k), each in [-A, B + A), of brick slot `brick`.
  std::size_t voxel(std::size_t brick, int i, int j, int k) const {
    return layout_.row(brick, i, j, k);
  }

  // Collective. bricks: this rank's bricks (distinct); owner: the rank of any brick coordinate,
  // the same function on every rank, with owner(b) == this rank for each local brick. Afterwards
  // the store must hold at least total_voxels() rows (the caller resizes it; rows past them are
  // left alone, so a store that only grows saves re-initialising rows at every replan).
  void plan(std::span<const BrickCoord> bricks, const std::function<int(const BrickCoord&)>& owner);
  // Collective. The same bricks, neighbours and peers as `other`'s last plan, for this halo's
  // brick size (the coarser levels of a multigrid hierarchy on the same bricks); no lookups.
  void plan_like(const BrickHalo& other);

  std::size_t local_bricks() const { return local_.size(); }
  std::size_t remote_bricks() const { return remote_.size(); }
  const std::vector<BrickCoord>& local_coords() const { return local_; }
  const std::vector<BrickCoord>& remote_coords() const { return remote_; }  // slots after local
  std::size_t total_voxels() const { return (local_.size() + remote_.size()) * voxels_; }
  const HaloPlan& halo_plan() const { return halo_; }

  // Refreshes the remote copies of the fields, then fills every local brick's apron:
  // from the neighbour brick's interior, or `background` (of the fields' element type) where no
  // brick exists anywhere.
  template <class T>
  void fill(ParticleStore& store, std::span<const FieldRef> fields, const T& background) {
    fill_bytes(store, fields, &background, sizeof(T));
  }
  // Refreshes the remote copies of the fields only, for kernels that read across brick
  // faces (at most A voxels deep) through neighbour_table() instead of a filled apron (nothing
  // to do without peers).
  void refresh(ParticleStore& store, std::span<const FieldRef> fields);
  // Per slot (local, then remote copies) the slot of its neighbour in each of the 27 directions
  // ((x + 1) + 3 (y + 1) + 9 (z + 1)), -1 where no brick is.
  const std::int32_t* neighbour_table() const { return raw(neighbours_); }

  // Adds every local brick's apron values into the interior voxels they overlap, local bricks
  // and other ranks' alike (contributions where no brick exists are dropped). The remote copies'
  // values are used as scratch; aprons keep their values. Arithmetic fields only.
  void reverse_sum(ParticleStore& store, std::span<const FieldRef> fields);

  std::size_t device_bytes() const;

 private:
  void fill_bytes(ParticleStore& store, std::span<const FieldRef> fields, const void* background,
                  std::size_t element_size);
  void check_store(const ParticleStore& store) const;
  void build_halo();
  template <class F>
  void for_each_reached_voxel(std::uint32_t directions, F f) const;

  int b_, a_;
  BrickLayout layout_;
  std::size_t voxels_;
  // Per interior voxel (i fastest), the directions whose apron-wide side holds it: a plan lists
  // a brick's travelling voxels with one AND per voxel.
  std::vector<std::uint32_t> reached_by_;
  HaloPlan halo_;
  std::vector<BrickCoord> local_, remote_;
  // The local slots whose interiors go to other ranks, the rank of each, and the directions
  // (bits (x + 1) + 3 (y + 1) + 9 (z + 1)) in which that rank's bricks lie around it; of each
  // remote copy, the directions of this rank's bricks around it. Only the voxels facing those
  // directions travel.
  std::vector<std::uint32_t> export_slots_;
  std::vector<int> export_ranks_;
  std::vector<std::uint32_t> export_directions_;
  std::vector<std::uint32_t> remote_directions_;
  // Per slot (local, then remote copies) the slot of its neighbour in each of the 27 directions
  // ((x + 1) + 3 (y + 1) + 9 (z + 1)), -1 where no brick is: the device kernels that fill and
  // sum the aprons look their sources up in it.
  DeviceVector<std::int32_t> neighbours_;
};

}  // namespace apron
