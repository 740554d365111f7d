// The bricks a rank holds, in slots (brick_grid.hpp): which brick sits in which slot, kept up to
// date from step to step by an incremental update (Wu et al. 2018: only new bricks are listed,
// emptied ones removed, slots reused), and the device-side steps that find which bricks the
// particles need. The per-voxel values of the slots live in the caller's store; they are rebuilt
// from the particles every step, so moving a brick to another slot moves no data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/common/backend.hpp"
#include "kernels/sparse/brick_grid.hpp"

namespace apron {

class BrickPool {
 public:
  explicit BrickPool(const BrickGrid& grid);

  struct Change {
    std::size_t added = 0, removed = 0;
    bool any() const { return added || removed; }
  };
  // Makes `needed` (distinct keys) the live set: bricks no longer needed leave (the last slot
  // moves into each hole), new ones are appended, the others keep their slots. O(changes) plus
  // one pass over `needed`.
  Change update(std::span<const std::uint32_t> needed);
  // Forgets every brick and takes `keys` in this slot order (a full rebuild, or a restart that
  // continues a run bit for bit).
  void assign(std::span<const std::uint32_t> keys);

  std::size_t size() const { return keys_.size(); }
  const std::vector<std::uint32_t>& keys() const { return keys_; }      // slot -> key
  std::int32_t slot(std::uint32_t key) const { return slot_of_[key]; }  // -1: not held
  const std::vector<std::int32_t>& slot_table() const { return slot_of_; }
  // The most bricks held at once: the storage the pool's slots ever needed.
  std::size_t peak() const { return peak_; }

 private:
  void remove(std::uint32_t key);
  void add(std::uint32_t key);

  std::vector<std::int32_t> slot_of_;  // per brick key of the domain
  std::vector<std::uint32_t> keys_;
  std::vector<std::uint32_t> stamp_;  // update(): the pass that last saw each key as needed
  std::uint32_t pass_ = 0;
  std::size_t peak_ = 0;
};

// flags[key] = 1 for every brick that holds a voxel within one voxel of a particle (its
// influence in particle-to-grid transfers and the pressure stencil around its voxel); flags is
// resized to grid.brick_count() and cleared first. Strays are clamped to the edge voxels.
void flag_needed_bricks(const BrickGrid& grid, const DeviceVector<Vec4>& positions, std::size_t n,
                        DeviceVector<std::uint8_t>& flags);

}  // namespace apron
