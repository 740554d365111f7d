#include "decomposition/particle_exchange.hpp"

#include "kernels/common/algorithms.hpp"

namespace apron {
namespace {

struct OwnerOf {
  OwnerLookup lookup;
  const Vec4* pos;
  int* destination;
  APRON_HD void operator()(std::size_t i) const { destination[i] = lookup(pos[i]); }
};

struct NotEqual {
  const int* values;
  int rank;
  APRON_HD bool operator()(std::uint32_t i) const { return values[i] != rank; }
};

struct Inside {
  Box box;
  const Vec4* pos;
  APRON_HD bool operator()(std::uint32_t i) const { return box.contains(pos[i]); }
};

}  // namespace

ParticleExchange::ParticleExchange(Transport& transport)
    : comm_(transport.comm()), transport_(transport), halo_(transport) {
  MPI_Comm_rank(comm_, &rank_);
}

void ParticleExchange::set_partition(const Partition& partition, double halo_width) {
  partition_ = partition;
  halo_width_ = halo_width;
  ownership_boxes_ =
      DeviceVector<Box>(partition.ownership_boxes().begin(), partition.ownership_boxes().end());
  neighbours_ = partition.neighbours(rank_, halo_width);
  transport_.connect(neighbours_);
}

MigrationStats ParticleExchange::migrate(ParticleStore& store,
                                         const DeviceVector<Vec4>& positions) {
  const std::size_t n = store.size();
  resize_per_particle(destination_, n);
  const auto& boxes = ownership_boxes_;
  for_each_index(
      n, OwnerOf{{raw(boxes), static_cast<int>(boxes.size())}, raw(positions), raw(destination_)});
  return migrate(store, destination_);
}

MigrationStats ParticleExchange::migrate(ParticleStore& store,
                                         const DeviceVector<int>& destination) {
  const std::size_t n = store.size();
  // Select: the leavers and their owners.
  auto& leavers = selected_;
  resize_per_particle(leavers, n);
  leavers.resize(copy_indices_if(n, raw(leavers), NotEqual{raw(destination), rank_}));
  leaver_rank_.resize(leavers.size());
  apron::gather(leavers.begin(), leavers.end(), destination.begin(), leaver_rank_.begin());

  // Plan: grouped by destination rank; counts all-to-all (particles may jump to any rank after a
  // re-partition, so the peers are not just the halo neighbours).
  halo_.build(leavers, leaver_rank_);
  const std::vector<FieldRef> all_fields = store.all_fields();
  halo_.send(store, all_fields);

  // Drop the leavers (in the plan's order, grouped by destination), then append the arrivals.
  store.erase(halo_.export_rows());
  const MigrationStats stats{halo_.export_total(), halo_.import_total()};
  halo_.append(store, all_fields);
  halo_.clear();  // arrivals are owned particles, not copies
  return stats;
}

std::size_t ParticleExchange::send_ghosts(ParticleStore& store, const DeviceVector<Vec4>& positions,
                                          std::span<const FieldRef> fields) {
  const std::size_t n_owned = store.size();
  const std::size_t npeers = neighbours_.size();
  // Select, neighbour by neighbour, straight into the plan's export rows.
  IndexVector& sources = halo_.grouped_rows();
  sources.clear();
  std::vector<std::size_t> counts(npeers, 0);
  resize_per_particle(selected_, n_owned);
  for (std::size_t k = 0; k < npeers; ++k) {
    const Box near = partition_.ownership_boxes()[neighbours_[k]].expanded(halo_width_);
    counts[k] = copy_indices_if(n_owned, raw(selected_), Inside{near, raw(positions)});
    const std::size_t at = sources.size();
    resize_per_particle(sources, at + counts[k]);
    apron::copy_n(selected_.begin(), counts[k], sources.begin() + at);
  }
  // Place: the counts travel in the message headers of this one exchange.
  halo_.build_grouped(neighbours_, counts);
  return halo_.gather(store, fields);
}

std::size_t ParticleExchange::device_bytes() const {
  return halo_.device_bytes() + selected_.capacity() * sizeof(std::uint32_t) +
         (destination_.capacity() + leaver_rank_.capacity()) * sizeof(int);
}

void ParticleExchange::drop_ghosts(ParticleStore& store) {
  store.erase(halo_.import_slots());
  halo_.clear();
}

void ParticleExchange::follow_permutation(const IndexVector& order) {
  halo_.follow_permutation(order);
}

void ParticleExchange::update_ghosts(ParticleStore& store, std::span<const FieldRef> fields) {
  halo_.update(store, fields);
}

}  // namespace apron
