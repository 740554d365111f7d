#include "kernels/sparse/brick_pool.hpp"
#include "kernels/common/algorithms.hpp"

#include <stdexcept>
#include <string>

namespace apron {
namespace {

struct FlagNeighbourhood {
  BrickGrid grid;
  const Vec4* pos;
  std::uint8_t* flags;

  APRON_HD void operator()(std::size_t p) const {
    const Vec4 x = pos[p];
    const int v[3] = {grid.voxel_coord(x.x, 0), grid.voxel_coord(x.y, 1), grid.voxel_coord(x.z, 2)};
    int lo[3], hi[3];
    for (int d = 0; d < 3; ++d) {
      lo[d] = (v[d] > 0 ? v[d] - 1 : 0) / grid.b;
      hi[d] = (v[d] + 1 < grid.voxels[d] ? v[d] + 1 : v[d]) / grid.b;
    }
    for (int k = lo[2]; k <= hi[2]; ++k)
      for (int j = lo[1]; j <= hi[1]; ++j)
        for (int i = lo[0]; i <= hi[0]; ++i) {
          // Read first: nearly every particle finds its bricks flagged already, and cached
          // reads cost less than thousands of writes to one byte.
          std::uint8_t& flag =
              flags[(static_cast<std::size_t>(k) * grid.bricks[1] + j) * grid.bricks[0] + i];
          if (!flag) flag = 1;
        }
  }
};

}  // namespace

BrickPool::BrickPool(const BrickGrid& grid)
    : slot_of_(grid.brick_count(), -1), stamp_(grid.brick_count(), 0) {}

void BrickPool::remove(std::uint32_t key) {
  const auto hole = static_cast<std::size_t>(slot_of_[key]);
  const std::uint32_t last = keys_.back();
  keys_[hole] = last;
  slot_of_[last] = static_cast<std::int32_t>(hole);
  keys_.pop_back();
  slot_of_[key] = -1;
}

void BrickPool::add(std::uint32_t key) {
  slot_of_[key] = static_cast<std::int32_t>(keys_.size());
  keys_.push_back(key);
}

BrickPool::Change BrickPool::update(std::span<const std::uint32_t> needed) {
  if (++pass_ == 0) {  // the stamps wrapped: start them again
    std::fill(stamp_.begin(), stamp_.end(), 0);
    pass_ = 1;
  }
  Change change;
  for (const std::uint32_t key : needed) {
    if (key >= slot_of_.size()) throw std::out_of_range("BrickPool: brick key out of range");
    stamp_[key] = pass_;
    if (slot_of_[key] < 0) add(key), ++change.added;
  }
  // Bottom-up from the end, so that a brick moved into a hole has been looked at already.
  for (std::size_t s = keys_.size(); s-- > 0;)
    if (stamp_[keys_[s]] != pass_) remove(keys_[s]), ++change.removed;
  peak_ = std::max(peak_, keys_.size());
  return change;
}

void BrickPool::assign(std::span<const std::uint32_t> keys) {
  for (const std::uint32_t key : keys_) slot_of_[key] = -1;
  keys_.clear();
  for (const std::uint32_t key : keys) {
    if (key >= slot_of_.size() || slot_of_[key] >= 0)
      throw std::invalid_argument("BrickPool::assign: brick key " + std::to_string(key) +
                                  " out of range or listed twice");
    add(key);
  }
  peak_ = std::max(peak_, keys_.size());
}

void flag_needed_bricks(const BrickGrid& grid, const DeviceVector<Vec4>& positions, std::size_t n,
                        DeviceVector<std::uint8_t>& flags) {
  flags.resize(grid.brick_count());
  apron::fill(flags.begin(), flags.end(), std::uint8_t{0});
  for_each_index(n, FlagNeighbourhood{grid, raw(positions), raw(flags)});
}

}  // namespace apron
