// Moves particles between ranks: migration of owned particles that left their subdomain, and the
// halo ("apron") of read-only ghost copies of particles within the interaction radius of a
// neighbour's subdomain. Works on any ParticleStore; the caller names the fields that travel.
#pragma once

#include <mpi.h>

#include <span>
#include <string>
#include <vector>

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
  explicit ParticleExchange(MPI_Comm comm);

  // Adopts a partition; halo_width is the interaction radius (ghosts are sent within it).
  void set_partition(const Partition& partition, double halo_width);
  const Partition& partition() const { return partition_; }
  const std::vector<int>& neighbours() const { return neighbours_; }

  // Sends every particle whose position is outside this rank's subdomain to its owner and
  // appends the particles other ranks send here. `store` must hold owned particles only.
  MigrationStats migrate(ParticleStore& store, const DeviceVector<Vec4>& positions);

  // Appends ghost copies (the named fields) of other ranks' particles near this subdomain.
  // Returns the index of the first ghost; ghosts occupy [first, store.size()).
  std::size_t send_ghosts(ParticleStore& store, const DeviceVector<Vec4>& positions,
                          std::span<const std::string> fields);

  // After store.permute(order) (slot -> previous index): keeps track of where owned particles
  // that others hold as ghosts, and this rank's ghosts, went.
  void follow_permutation(const IndexVector& order);

  // Removes this rank's ghosts (their slots are known, so this costs in proportion to their
  // number); the owned particles that fill their slots lose their order.
  void drop_ghosts(ParticleStore& store);

  // Refreshes the named fields of this rank's ghosts from their owners' current values.
  void update_ghosts(ParticleStore& store, std::span<const std::string> fields);

  std::size_t ghost_count() const { return ghost_slots_.size(); }
  std::size_t device_bytes() const;  // exchange buffers and bookkeeping
  const TransportStats& transport_stats() const { return transport_.stats(); }
  const char* transport_name() const { return transport_.name(); }

 private:
  void pack(const ParticleStore& store, std::span<const std::string> fields,
            const IndexVector& indices, std::size_t first, std::size_t count, ByteVector& out);
  // Packs the named fields of the halo sources into send_bytes_, one message per neighbour;
  // returns the messages' offsets.
  std::vector<std::size_t> pack_halo(const ParticleStore& store,
                                     std::span<const std::string> fields);

  MPI_Comm comm_;
  int rank_ = 0;
  Partition partition_;
  DeviceVector<Box> ownership_boxes_;
  std::vector<int> neighbours_;
  double halo_width_ = 0;
  Transport transport_;

  // Halo bookkeeping, valid from send_ghosts() until the ghosts are dropped.
  IndexVector halo_sources_;               // owned slots sent, neighbour after neighbour
  std::vector<std::size_t> halo_counts_;   // per neighbour, into halo_sources_
  std::vector<std::size_t> ghost_counts_;  // received per neighbour
  IndexVector ghost_slots_;                // where each received ghost now sits
  IndexVector inverse_;                    // scratch for follow_permutation
  IndexVector scratch_;
  IndexVector selected_;  // leavers, or particles near one neighbour
  DeviceVector<int> destination_, leaver_rank_;
  ByteVector send_bytes_, recv_bytes_;
};

// Byte size of `count` elements of the named fields packed one field after another, each field's
// block padded to 16 bytes so that every block starts aligned for any element type.
std::size_t packed_bytes(const ParticleStore& store, std::span<const std::string> fields,
                         std::size_t count);

}  // namespace apron
