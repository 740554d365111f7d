// FLIP's checkpointed state: the particle and brick tables, saved and restored.
#include "flip/flip_solver.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "config/yaml_reader.hpp"
#include "decomposition/conjugate_gradient.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"
#include "kernels/common/checksum.hpp"
#include "kernels/common/element_hash.hpp"
#include "kernels/common/primitives.hpp"
#include "runtime/json.hpp"

namespace apron::flip {

// ---- checkpoints -------------------------------------------------------------------------------
// A checkpoint holds the particles in each rank's order (table "particles"), each rank's bricks in
// slot order (table "bricks": the order of the float64 dot products), the partition and the
// counters. The voxels are rebuilt from the particles by the next step, so continuing on the same
// rank count repeats the uninterrupted run bit for bit.

void FlipSolver::save_state(SavedState& state) const {
  struct Rows {
    Snapshot particles;
    std::vector<std::uint32_t> bricks;
  };
  auto rows = std::make_shared<Rows>();
  {
    auto t = timers_.scope("checkpoint copy");
    rows->particles = snapshot();
    rows->bricks = pool_.keys();
  }
  const std::size_t n = particles_.size();
  state.rows("particles", n,
             {{rows->particles.pos.data(),
               [this, n](std::uint64_t first) { return device_checksum(pos_, n, first); }},
              {rows->particles.vel.data(),
               [this, n](std::uint64_t first) { return device_checksum(vel_, n, first); }},
              {rows->particles.id.data()}});
  state.rows("bricks", rows->bricks.size(), {{rows->bricks.data()}});
  state.partition(exchange_.partition());
  state.keep(rows);
  state.seed(case_.flip.seed);
  state.scalar("replans", static_cast<double>(replans_));
  state.scalar("rebalances", static_cast<double>(rebalances_));
  state.scalar("particles", static_cast<double>(global_particles_));
}

void FlipSolver::restore(const LoadedState& state) {
  const std::vector<Vec4> pos = state.column<Vec4>("particles", "position");
  const std::vector<std::uint32_t> bricks = state.column<std::uint32_t>("bricks", "key");
  const bool in_grid = std::all_of(bricks.begin(), bricks.end(),
                                   [&](std::uint32_t key) { return key < grid_.brick_count(); });
  if (global_min(ranks_.comm, in_grid ? 1.0 : 0.0) == 0)  // every rank fails alike
    throw std::runtime_error(state.where() +
                             ": a brick key is outside the grid: the checkpoint is "
                             "damaged");
  global_particles_ = static_cast<std::int64_t>(state.total_rows("particles"));
  dt_ = clock_.dt;
  const auto snap = [&](const Partition& p) { return snapped(p); };
  adopt(continuing_partition(state, pos, snap), pos, state.column<Vec4>("particles", "velocity"),
        state.column<std::int64_t>("particles", "id"));
  // The same rank count continues with the saved slots (bitwise: they are the bricks of the
  // last step's start, which the next step updates as the uninterrupted run would); another
  // rank count keeps the bricks adopt() built. Every rank must hold its own distinct bricks, and
  // all ranks agree before any fails.
  if (state.same_ranks()) {
    std::vector<std::uint32_t> sorted = bricks;
    std::sort(sorted.begin(), sorted.end());
    bool mine = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    for (const std::uint32_t key : bricks) mine = mine && owner_[key] == ranks_.rank;
    if (global_min(ranks_.comm, mine ? 1.0 : 0.0) == 0)
      throw std::runtime_error(state.where() +
                               ": a rank's saved bricks are repeated or another rank's: "
                               "the checkpoint is damaged");
    pool_.assign(bricks);
    replan();
  }
  replans_ = static_cast<long>(state.scalar("replans"));
  rebalances_ = static_cast<long>(state.scalar("rebalances"));
  log_summary();
}

}  // namespace apron::flip
