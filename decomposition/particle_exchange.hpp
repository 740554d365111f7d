// Moves particles between ranks: migration of owned particles that left their subdomain, and the
// halo ("apron") of read-only ghost copies of particles within the interaction radius of a
// neighbour's subdomain. Works on any ParticleStore; the caller names the fields that travel.
// Selection is by box (leavers: outside the ownership box; ghosts: inside a neighbour's box grown
// by the halo width); the selected rows and their destinations go to a HaloPlan, which moves them.
#pragma once

#include <mpi.h>

#include <span>
#include <string>
#include <vector>

#include "decomposition/halo_plan.hpp"
#include "decomposition/partition.hpp"
#include "decomposition/transport.hpp"
#include "kernels/common/particle_store.hpp"

namespace apron {

struct MigrationStats {
  std::size_t sent = 0;
  std::size_t received = 0;
};

class ParticleExchange {
 public:
  // The transport (and its communicator) is shared with the caller's other halos, not owned.
  explicit ParticleExchange(Transport& transport);

  // Adopts a partition; halo_width is the interaction radius (ghosts are sent within it).
  void set_partition(const Partition& partition, double halo_width);
  const Partition& partition() const { return partition_; }
  const std::vector<int>& neighbours() const { return neighbours_; }

  // Sends every particle whose position is outside this rank's subdomain to its owner and
  // appends the particles other ranks send here. `store` must hold owned particles only.
  MigrationStats migrate(ParticleStore& store, const DeviceVector<Vec4>& positions);
  // The same where the caller decides each particle's owner (destination[i], one per particle):
  // a sparse grid whose bricks, not boxes, say who owns a particle.
  MigrationStats migrate(ParticleStore& store, const DeviceVector<int>& destination);

  // Appends ghost copies (the given fields) of other ranks' particles near this subdomain.
  // Returns the index of the first ghost; ghosts occupy [first, store.size()).
  std::size_t send_ghosts(ParticleStore& store, const DeviceVector<Vec4>& positions,
                          std::span<const FieldRef> fields);

  // After store.permute(order) (slot -> previous index): keeps track of where owned particles
  // that others hold as ghosts, and this rank's ghosts, went.
  void follow_permutation(const IndexVector& order);

  // Removes this rank's ghosts (their slots are known, so this costs in proportion to their
  // number); the owned particles that fill their slots lose their order.
  void drop_ghosts(ParticleStore& store);

  // Refreshes the given fields of this rank's ghosts from their owners' current values.
  void update_ghosts(ParticleStore& store, std::span<const FieldRef> fields);

  std::size_t ghost_count() const { return halo_.import_slots().size(); }
  // The plan behind the ghosts (valid from send_ghosts() until drop_ghosts()): e.g. for a
  // reverse sum of ghost contributions into their owners.
  HaloPlan& halo_plan() { return halo_; }
  std::size_t device_bytes() const;  // exchange buffers and bookkeeping

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  Partition partition_;
  DeviceVector<Box> ownership_boxes_;
  std::vector<int> neighbours_;
  double halo_width_ = 0;
  Transport& transport_;
  // Ghosts: export rows (owned particles sent, neighbour after neighbour) and import slots (where
  // each received ghost sits), valid from send_ghosts() until the ghosts are dropped. Migration
  // uses the same plan (the store then holds no ghosts).
  HaloPlan halo_;
  IndexVector selected_;  // leavers, or particles near one neighbour
  DeviceVector<int> destination_, leaver_rank_;
};

}  // namespace apron
