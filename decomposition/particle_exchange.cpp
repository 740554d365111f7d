#include "decomposition/particle_exchange.hpp"

#include <algorithm>
#include <numeric>

#include <thrust/copy.h>
#include <thrust/gather.h>
#include <thrust/scatter.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

namespace apron {
namespace {

// Every message starts with a 16-byte header holding the particle count.
constexpr std::size_t kHeader = 16;
constexpr std::size_t pad16(std::size_t bytes) {
  return (bytes + 15) & ~std::size_t{15};
}

struct OwnerOf {
  OwnerLookup lookup;
  const Vec4* pos;
  int* destination;
  APRON_HD void operator()(std::size_t i) const { destination[i] = lookup(pos[i]); }
};

struct WriteCount {
  std::uint64_t count;
  std::byte* header;
  APRON_HD void operator()(std::size_t) const { *reinterpret_cast<std::uint64_t*>(header) = count; }
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

std::uint64_t read_count(const ByteVector& bytes, std::size_t offset) {
  std::uint64_t count = 0;
  thrust::copy_n(bytes.begin() + offset, sizeof count, reinterpret_cast<std::byte*>(&count));
  return count;
}

// Calls f(field, byte offset of its block) for the named fields of a message of `count`
// particles whose field blocks start at `offset`.
template <class F>
void for_each_block(const ParticleStore& store, std::span<const std::string> fields,
                    std::size_t count, std::size_t offset, F f) {
  for (const auto& name : fields) {
    auto& field = store.field(name);
    f(field, offset);
    offset += pad16(count * field.element_size());
  }
}

}  // namespace

std::size_t packed_bytes(const ParticleStore& store, std::span<const std::string> fields,
                         std::size_t count) {
  std::size_t bytes = kHeader;
  for (const auto& name : fields) bytes += pad16(count * store.field(name).element_size());
  return bytes;
}

ParticleExchange::ParticleExchange(MPI_Comm comm) : comm_(comm), transport_(comm) {
  MPI_Comm_rank(comm, &rank_);
}

void ParticleExchange::set_partition(const Partition& partition, double halo_width) {
  partition_ = partition;
  halo_width_ = halo_width;
  ownership_boxes_ =
      DeviceVector<Box>(partition.ownership_boxes().begin(), partition.ownership_boxes().end());
  neighbours_ = partition.neighbours(rank_, halo_width);
  transport_.connect(neighbours_);
}

void ParticleExchange::pack(const ParticleStore& store, std::span<const std::string> fields,
                            const IndexVector& indices, std::size_t first, std::size_t count,
                            ByteVector& out) {
  const std::size_t offset = out.size();
  out.resize(offset + packed_bytes(store, fields, count));
  // Written on the device: a host-to-device copy would wait for the queued work.
  for_each_index(1, WriteCount{count, raw(out) + offset});
  for_each_block(store, fields, count, offset + kHeader,
                 [&](const ParticleField& field, std::size_t at) {
                   field.pack(raw(indices) + first, count, out, at);
                 });
}

std::vector<std::size_t> ParticleExchange::pack_halo(const ParticleStore& store,
                                                     std::span<const std::string> fields) {
  send_bytes_.clear();
  std::vector<std::size_t> send_offsets{0};
  for (std::size_t k = 0, first = 0; k < neighbours_.size(); first += halo_counts_[k], ++k) {
    pack(store, fields, halo_sources_, first, halo_counts_[k], send_bytes_);
    send_offsets.push_back(send_bytes_.size());
  }
  return send_offsets;
}

MigrationStats ParticleExchange::migrate(ParticleStore& store,
                                         const DeviceVector<Vec4>& positions) {
  const std::size_t n = store.size();
  resize_per_particle(destination_, n);
  const auto& boxes = ownership_boxes_;
  for_each_index(
      n, OwnerOf{{raw(boxes), static_cast<int>(boxes.size())}, raw(positions), raw(destination_)});

  // Leavers, grouped by destination rank.
  auto& leavers = selected_;
  resize_per_particle(leavers, n);
  auto end = thrust::copy_if(policy(), thrust::counting_iterator<std::uint32_t>(0),
                             thrust::counting_iterator<std::uint32_t>(n), leavers.begin(),
                             NotEqual{raw(destination_), rank_});
  leavers.resize(end - leavers.begin());
  auto& leaver_rank = leaver_rank_;
  leaver_rank.resize(leavers.size());
  thrust::gather(policy(), leavers.begin(), leavers.end(), destination_.begin(),
                 leaver_rank.begin());
  thrust::stable_sort_by_key(policy(), leaver_rank.begin(), leaver_rank.end(), leavers.begin());

  // Who sends to whom: counts per destination, then all-to-all (particles may jump to any rank
  // after a re-partition, so the peers are not just the halo neighbours).
  const int nranks = partition_.ranks();
  std::vector<int> host_ranks(leaver_rank.size());
  thrust::copy(leaver_rank.begin(), leaver_rank.end(), host_ranks.begin());
  std::vector<int> send_counts(nranks, 0), recv_counts(nranks, 0);
  for (int r : host_ranks) ++send_counts[r];
  MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm_);

  std::vector<std::string> all_fields;
  for (const auto& f : store.fields()) all_fields.push_back(f->name());
  std::vector<int> peers;
  std::vector<std::size_t> send_offsets{0};
  send_bytes_.clear();
  std::size_t first = 0;
  for (int r = 0; r < nranks; ++r) {
    if (r == rank_ || (send_counts[r] == 0 && recv_counts[r] == 0)) continue;
    peers.push_back(r);
    pack(store, all_fields, leavers, first, send_counts[r], send_bytes_);
    first += send_counts[r];
    send_offsets.push_back(send_bytes_.size());
  }
  std::vector<std::size_t> recv_offsets;
  transport_.exchange(peers, send_bytes_, send_offsets, recv_bytes_, recv_offsets);

  // Drop the leavers, then append the arrivals.
  store.erase(leavers);
  MigrationStats stats{leavers.size(), 0};
  for (std::size_t k = 0; k < peers.size(); ++k) {
    const std::size_t count = read_count(recv_bytes_, recv_offsets[k]);
    const std::size_t at = store.size();
    store.resize(at + count);
    for_each_block(store, all_fields, count, recv_offsets[k] + kHeader,
                   [&](ParticleField& field, std::size_t offset) {
                     field.unpack(recv_bytes_, offset, at, count);
                   });
    stats.received += count;
  }
  return stats;
}

std::size_t ParticleExchange::send_ghosts(ParticleStore& store, const DeviceVector<Vec4>& positions,
                                          std::span<const std::string> fields) {
  const std::size_t n_owned = store.size();
  const std::size_t npeers = neighbours_.size();
  halo_sources_.clear();
  halo_counts_.assign(npeers, 0);
  resize_per_particle(selected_, n_owned);
  for (std::size_t k = 0; k < npeers; ++k) {
    const Box near = partition_.ownership_boxes()[neighbours_[k]].expanded(halo_width_);
    auto end = thrust::copy_if(policy(), thrust::counting_iterator<std::uint32_t>(0),
                               thrust::counting_iterator<std::uint32_t>(n_owned), selected_.begin(),
                               Inside{near, raw(positions)});
    halo_counts_[k] = end - selected_.begin();
    halo_sources_.insert(halo_sources_.end(), selected_.begin(), end);
  }

  std::vector<std::size_t> recv_offsets;
  transport_.exchange(neighbours_, send_bytes_, pack_halo(store, fields), recv_bytes_,
                      recv_offsets);
  ghost_counts_.assign(npeers, 0);
  std::size_t ghosts = 0;
  for (std::size_t k = 0; k < npeers; ++k)
    ghosts += ghost_counts_[k] = read_count(recv_bytes_, recv_offsets[k]);
  store.resize(n_owned + ghosts);
  for (std::size_t k = 0, at = n_owned; k < npeers; at += ghost_counts_[k], ++k)
    for_each_block(store, fields, ghost_counts_[k], recv_offsets[k] + kHeader,
                   [&](ParticleField& field, std::size_t offset) {
                     field.unpack(recv_bytes_, offset, at, ghost_counts_[k]);
                   });
  ghost_slots_.resize(ghosts);
  thrust::sequence(policy(), ghost_slots_.begin(), ghost_slots_.end(),
                   static_cast<std::uint32_t>(n_owned));
  return n_owned;
}

std::size_t ParticleExchange::device_bytes() const {
  const std::size_t indices = halo_sources_.capacity() + ghost_slots_.capacity() +
                              inverse_.capacity() + scratch_.capacity() + selected_.capacity();
  return indices * sizeof(std::uint32_t) +
         (destination_.capacity() + leaver_rank_.capacity()) * sizeof(int) +
         send_bytes_.capacity() + recv_bytes_.capacity();
}

void ParticleExchange::drop_ghosts(ParticleStore& store) {
  store.erase(ghost_slots_);
  ghost_slots_.clear();
  halo_sources_.clear();
  halo_counts_.assign(neighbours_.size(), 0);
  ghost_counts_.assign(neighbours_.size(), 0);
}

void ParticleExchange::follow_permutation(const IndexVector& order) {
  if (halo_sources_.empty() && ghost_slots_.empty()) return;  // no halo this step: nothing to map
  resize_per_particle(inverse_, order.size());
  thrust::scatter(policy(), thrust::counting_iterator<std::uint32_t>(0),
                  thrust::counting_iterator<std::uint32_t>(order.size()), order.begin(),
                  inverse_.begin());
  for (IndexVector* slots : {&halo_sources_, &ghost_slots_}) {
    scratch_.resize(slots->size());
    thrust::gather(policy(), slots->begin(), slots->end(), inverse_.begin(), scratch_.begin());
    slots->swap(scratch_);
  }
}

void ParticleExchange::update_ghosts(ParticleStore& store, std::span<const std::string> fields) {
  // Each rank knows how many ghosts every neighbour sends: no size exchange.
  std::vector<std::size_t> recv_offsets{0};
  for (std::size_t count : ghost_counts_)
    recv_offsets.push_back(recv_offsets.back() + packed_bytes(store, fields, count));
  recv_bytes_.resize(recv_offsets.back());
  transport_.exchange_known_sizes(neighbours_, send_bytes_, pack_halo(store, fields), recv_bytes_,
                                  recv_offsets);
  for (std::size_t k = 0, first = 0; k < neighbours_.size(); first += ghost_counts_[k], ++k)
    for_each_block(store, fields, ghost_counts_[k], recv_offsets[k] + kHeader,
                   [&](ParticleField& field, std::size_t offset) {
                     field.scatter(recv_bytes_, offset, raw(ghost_slots_) + first,
                                   ghost_counts_[k]);
                   });
}

}  // namespace apron
