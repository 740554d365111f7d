// A halo plan over the byte Transport: which local rows go to which ranks, and where the copies
// received from each peer sit. Built once from caller-chosen export rows and destination ranks
// (message sizes are exchanged once, at build), it then moves any fields of a ParticleStore,
// given by their handles (FieldRef):
//   gather   owners -> copies, appended at the end of the receiver's store (or into import
//            slots the caller gives);
//   update   the same into the existing copies, without a size exchange;
//   reverse  copies -> owners: each copy's values are sent back and combined into the owner's
//            row by a reduction (sum, min, max; vectors component by component).
// update and reverse come in halves (begin, finish) so that work touching neither the fields
// sent nor those received can run while the messages travel; one exchange per transport is in
// flight at a time.
// Users: particle ghosts and migration (ParticleExchange), sparse-brick aprons (BrickHalo), mesh
// 1-rings (MeshHalo).
//
// Message format, one message per peer and direction: a 16-byte header holding the row count,
// then one block per field, each padded to 16 bytes so every block starts aligned for any type.
#pragma once

#include <mpi.h>

#include <span>
#include <string>
#include <vector>

#include "decomposition/transport.hpp"
#include "kernels/common/particle_store.hpp"

namespace apron {

class HaloPlan {
 public:
  // The transport (and its communicator) is shared, not owned: several plans may use one.
  explicit HaloPlan(Transport& transport);

  // Collective over the transport's communicator (one MPI_Alltoall of counts). exports: local
  // rows; destinations: a rank per export (not this rank). A row may go to several ranks, but
  // each (row, rank) pair at most once. The peers are the ranks this rank sends to or receives
  // from, ascending. The copies' slots are set by the first gather().
  void build(const IndexVector& exports, const DeviceVector<int>& destinations);
  // The same where the caller knows a symmetric set of candidate peers (each lists this rank
  // too, in any order): counts are exchanged with those peers only, and every destination must
  // be one of them. Peers with nothing either way stay listed (their messages are skipped).
  void build(const IndexVector& exports, const DeviceVector<int>& destinations,
             std::span<const int> peers);
  // For callers that select their exports peer by peer: they write the rows, grouped by peer,
  // into grouped_rows() (the plan's own buffer, reused from step to step), then call
  // build_grouped() with counts[k] rows for peers[k]. The receivers learn their counts from the
  // headers of the first gather(), whose Transport::exchange carries the sizes; until then
  // import_counts() is empty. Nothing is exchanged here.
  IndexVector& grouped_rows() { return export_rows_; }
  void build_grouped(std::span<const int> peers, std::span<const std::size_t> counts);

  // Forward: owners' named fields to the peers; the copies are appended to the store, which
  // grows by import_total(). Returns the first copy's slot; import_slots() becomes
  // [first, first + import_total()).
  std::size_t gather(ParticleStore& store, std::span<const FieldRef> fields);
  // Forward into the given slots (one per import, grouped by peer in peers() order); they become
  // import_slots(). Import counts must be known (build() or a previous gather()).
  void gather_into(ParticleStore& store, std::span<const FieldRef> fields,
                   const IndexVector& slots);
  // Sets where the copies sit without moving data (one slot per import, grouped by peer), for
  // callers that lay out the copies themselves (BrickHalo). Import counts must be known.
  void set_import_slots(const IndexVector& slots);
  // Refreshes the fields of the existing copies (import_slots()); no size exchange.
  void update(ParticleStore& store, std::span<const FieldRef> fields);
  void update_begin(const ParticleStore& store, std::span<const FieldRef> fields);  // sends
  void update_finish(ParticleStore& store, std::span<const FieldRef> fields);       // places
  // Combines each copy's fields into its owner's row by `op` (the copies keep their values).
  // With no copies anywhere the peers still swap header-only messages.
  void reverse(ParticleStore& store, std::span<const FieldRef> fields, Reduction op);
  void reverse_begin(const ParticleStore& store, std::span<const FieldRef> fields);
  void reverse_finish(ParticleStore& store, std::span<const FieldRef> fields, Reduction op);

  // gather() in two halves, for callers that change the store in between (migration erases the
  // leavers before the arrivals are appended): send() packs and exchanges, append() places.
  void send(const ParticleStore& store, std::span<const FieldRef> fields);
  std::size_t append(ParticleStore& store, std::span<const FieldRef> fields);

  // After store.permute(order) (slot -> previous slot): export rows and import slots follow.
  void follow_permutation(const IndexVector& order);
  // Forgets the exports and imports (capacity kept); peers stay.
  void clear();

  MPI_Comm transport_comm() const { return comm_; }
  const std::vector<int>& peers() const { return peers_; }
  const std::vector<std::size_t>& export_counts() const { return export_counts_; }
  // Per peer; empty between build_grouped() and the first gather().
  const std::vector<std::size_t>& import_counts() const { return import_counts_; }
  const IndexVector& export_rows() const { return export_rows_; }  // grouped by peer
  const IndexVector& import_slots() const { return import_slots_; }
  std::size_t export_total() const { return export_rows_.size(); }
  std::size_t import_total() const;
  std::size_t device_bytes() const;  // bookkeeping and message buffers

 private:
  void group_by_destination(const IndexVector& exports, const DeviceVector<int>& destinations,
                            std::span<const int> peers);
  std::vector<std::size_t> pack(const ParticleStore& store, std::span<const FieldRef> fields,
                                const IndexVector& rows, const std::vector<std::size_t>& counts,
                                bool announce);
  std::vector<std::size_t> message_offsets(const ParticleStore& store,
                                           std::span<const FieldRef> fields,
                                           const std::vector<std::size_t>& counts) const;
  void start_forward(const ParticleStore& store, std::span<const FieldRef> fields);
  void require_imports(const char* what) const;
  void require_copies(const char* what) const;  // imports known and placed

  Transport& transport_;
  MPI_Comm comm_;
  int rank_ = 0;
  std::vector<int> peers_;
  std::vector<std::size_t> export_counts_, import_counts_;
  std::vector<std::size_t> recv_offsets_;  // of the last forward exchange
  IndexVector export_rows_, import_slots_;
  IndexVector inverse_, scratch_;  // follow_permutation
  IndexVector sorted_ranks_;       // build
  IndexVector bounds_;             // build: where each rank's exports start
  ByteVector send_bytes_, recv_bytes_;
};

// Byte size of one message of `count` rows of the fields (header included).
std::size_t packed_bytes(const ParticleStore& store, std::span<const FieldRef> fields,
                         std::size_t count);

}  // namespace apron
