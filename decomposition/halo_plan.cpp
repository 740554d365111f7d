#include "decomposition/halo_plan.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/common/algorithms.hpp"
#include "kernels/common/primitives.hpp"

namespace apron {
namespace {
struct RankKey {
  const int* rank;
  std::uint32_t* key;
  APRON_HD void operator()(std::size_t i) const { key[i] = static_cast<std::uint32_t>(rank[i]); }
};

// inverse[order[i]] = i.
struct Invert {
  const std::uint32_t* order;
  std::uint32_t* inverse;
  APRON_HD void operator()(std::size_t i) const {
    inverse[order[i]] = static_cast<std::uint32_t>(i);
  }
};

// Every message starts with a 16-byte header holding the row count.
constexpr std::size_t kHeader = 16;
constexpr std::size_t pad16(std::size_t bytes) {
  return (bytes + 15) & ~std::size_t{15};
}

struct WriteCount {
  std::uint64_t count;
  std::byte* header;
  APRON_HD void operator()(std::size_t) const { *reinterpret_cast<std::uint64_t*>(header) = count; }
};

std::uint64_t read_count(const ByteVector& bytes, std::size_t offset) {
  std::uint64_t count = 0;
  apron::copy_n(bytes.begin() + offset, sizeof count, reinterpret_cast<std::byte*>(&count));
  return count;
}

// Calls f(field, byte offset of its block) for the given fields of a message of `count` rows
// whose field blocks start at `offset`.
template <class F>
void for_each_block(const ParticleStore& store, std::span<const FieldRef> fields, std::size_t count,
                    std::size_t offset, F f) {
  for (const FieldRef ref : fields) {
    auto& field = store.field(ref);
    f(field, offset);
    offset += pad16(count * field.element_size());
  }
}

}  // namespace

std::size_t packed_bytes(const ParticleStore& store, std::span<const FieldRef> fields,
                         std::size_t count) {
  std::size_t bytes = kHeader;
  for (const FieldRef ref : fields) bytes += pad16(count * store.field(ref).element_size());
  return bytes;
}

HaloPlan::HaloPlan(Transport& transport) : transport_(transport), comm_(transport.comm()) {
  MPI_Comm_rank(comm_, &rank_);
}

void HaloPlan::group_by_destination(const IndexVector& exports,
                                    const DeviceVector<int>& destinations,
                                    std::span<const int> peers) {
  if (exports.size() != destinations.size())
    throw std::invalid_argument("HaloPlan: one destination rank per export row");
  int nranks = 1;
  MPI_Comm_size(comm_, &nranks);
  const std::size_t n = exports.size();
  resize_per_particle(export_rows_, n);
  resize_per_particle(sorted_ranks_, n);
  apron::copy(exports.begin(), exports.end(), export_rows_.begin());
  // As unsigned keys a negative rank sorts last, past every bound: refused below.
  for_each_index(n, RankKey{raw(destinations), raw(sorted_ranks_)});
  sort_pairs(sorted_ranks_, export_rows_, n, 32);
  // Where each rank's exports begin in the sorted list: nranks + 1 bounds to the host.
  lower_bounds(sorted_ranks_, n, nranks + 1, bounds_);
  const std::vector<std::uint32_t> host_bounds = to_host(bounds_);
  if (host_bounds[nranks] != n || (n > 0 && host_bounds[0] != 0))
    throw std::invalid_argument("HaloPlan: destination rank outside the communicator");
  if (host_bounds[rank_ + 1] != host_bounds[rank_])
    throw std::invalid_argument("HaloPlan: a row exported to its own rank");
  std::vector<unsigned long long> send_counts(nranks), recv_counts(nranks, 0);
  for (int r = 0; r < nranks; ++r) send_counts[r] = host_bounds[r + 1] - host_bounds[r];

  if (peers.data() == nullptr) {
    MPI_Alltoall(send_counts.data(), 1, MPI_UNSIGNED_LONG_LONG, recv_counts.data(), 1,
                 MPI_UNSIGNED_LONG_LONG, comm_);
    peers_.clear();
    for (int r = 0; r < nranks; ++r)
      if (r != rank_ && (send_counts[r] || recv_counts[r])) peers_.push_back(r);
  } else {
    peers_.assign(peers.begin(), peers.end());
    std::sort(peers_.begin(), peers_.end());
    peers_.erase(std::unique(peers_.begin(), peers_.end()), peers_.end());
    std::size_t listed = 0;
    for (int p : peers_) {
      if (p == rank_ || p < 0 || p >= nranks)
        throw std::invalid_argument("HaloPlan: peer " + std::to_string(p) + " is not another rank");
      listed += send_counts[p];
    }
    if (listed != n) throw std::invalid_argument("HaloPlan: a destination is not among the peers");
    constexpr int kCountTag = 711;
    std::vector<MPI_Request> requests(2 * peers_.size());
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      MPI_Irecv(&recv_counts[peers_[k]], 1, MPI_UNSIGNED_LONG_LONG, peers_[k], kCountTag, comm_,
                &requests[2 * k]);
      MPI_Isend(&send_counts[peers_[k]], 1, MPI_UNSIGNED_LONG_LONG, peers_[k], kCountTag, comm_,
                &requests[2 * k + 1]);
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  }
  export_counts_.assign(peers_.size(), 0);
  import_counts_.assign(peers_.size(), 0);
  for (std::size_t k = 0; k < peers_.size(); ++k) {
    export_counts_[k] = send_counts[peers_[k]];
    import_counts_[k] = recv_counts[peers_[k]];
  }
  import_slots_.clear();
  transport_.connect(peers_);  // a new peer's links now, not in the step loop's first exchange
}

void HaloPlan::build(const IndexVector& exports, const DeviceVector<int>& destinations) {
  group_by_destination(exports, destinations, {});
}

void HaloPlan::build(const IndexVector& exports, const DeviceVector<int>& destinations,
                     std::span<const int> peers) {
  static const int kNone = -1;  // a non-null empty span: "the peers are given, and none"
  group_by_destination(exports, destinations,
                       peers.data() ? peers : std::span<const int>(&kNone, 0));
}

void HaloPlan::build_grouped(std::span<const int> peers, std::span<const std::size_t> counts) {
  if (peers.size() != counts.size() ||
      std::accumulate(counts.begin(), counts.end(), std::size_t{0}) != export_rows_.size())
    throw std::invalid_argument("HaloPlan: grouped rows do not match their counts");
  peers_.assign(peers.begin(), peers.end());
  transport_.connect(peers_);
  export_counts_.assign(counts.begin(), counts.end());
  import_counts_.clear();  // learnt from the first gather's headers
  import_slots_.clear();
}

std::size_t HaloPlan::import_total() const {
  return std::accumulate(import_counts_.begin(), import_counts_.end(), std::size_t{0});
}

std::vector<std::size_t> HaloPlan::pack(const ParticleStore& store,
                                        std::span<const FieldRef> fields, const IndexVector& rows,
                                        const std::vector<std::size_t>& counts, bool announce) {
  const auto offsets = message_offsets(store, fields, counts);
  grow(send_bytes_, offsets.back());
  for (std::size_t k = 0, first = 0; k < counts.size(); first += counts[k], ++k) {
    const std::size_t count = counts[k];
    // Written on the device (a host-to-device copy would wait for the queued work), and only
    // when the receiver reads it: a launch per message, hundreds per step in a multigrid solve.
    if (announce) for_each_index(1, WriteCount{count, raw(send_bytes_) + offsets[k]});
    for_each_block(store, fields, count, offsets[k] + kHeader,
                   [&](const ParticleField& field, std::size_t at) {
                     field.pack(raw(rows) + first, count, send_bytes_, at);
                   });
  }
  return offsets;
}

std::vector<std::size_t> HaloPlan::message_offsets(const ParticleStore& store,
                                                   std::span<const FieldRef> fields,
                                                   const std::vector<std::size_t>& counts) const {
  std::vector<std::size_t> offsets{0};
  for (std::size_t count : counts)
    offsets.push_back(offsets.back() + packed_bytes(store, fields, count));
  return offsets;
}

void HaloPlan::require_imports(const char* what) const {
  if (import_counts_.size() != peers_.size())
    throw std::logic_error(std::string("HaloPlan::") + what +
                           ": the import counts are not known yet (gather first)");
}

void HaloPlan::send(const ParticleStore& store, std::span<const FieldRef> fields) {
  // Both ends of a link learn the counts at the same exchange (build or first gather), so this
  // rank's knowing its imports means its peers know theirs: no header to read.
  if (import_counts_.size() == peers_.size()) {
    start_forward(store, fields);
    transport_.wait();
    return;
  }
  const auto send_offsets = pack(store, fields, export_rows_, export_counts_, true);
  transport_.exchange(peers_, send_bytes_, send_offsets, recv_bytes_, recv_offsets_);
  import_counts_.assign(peers_.size(), 0);
  for (std::size_t k = 0; k < peers_.size(); ++k)
    import_counts_[k] = read_count(recv_bytes_, recv_offsets_[k]);
}

// Packs the owners' rows and posts the messages to peers whose sizes both ends know.
void HaloPlan::start_forward(const ParticleStore& store, std::span<const FieldRef> fields) {
  const auto send_offsets = pack(store, fields, export_rows_, export_counts_, false);
  recv_offsets_ = message_offsets(store, fields, import_counts_);
  grow(recv_bytes_, recv_offsets_.back());
  transport_.start_known_sizes(peers_, send_bytes_, send_offsets, recv_bytes_, recv_offsets_);
}

std::size_t HaloPlan::append(ParticleStore& store, std::span<const FieldRef> fields) {
  const std::size_t first = store.size(), total = import_total();
  store.resize(first + total);
  for (std::size_t k = 0, at = first; k < peers_.size(); at += import_counts_[k], ++k)
    for_each_block(store, fields, import_counts_[k], recv_offsets_[k] + kHeader,
                   [&](ParticleField& field, std::size_t offset) {
                     field.unpack(recv_bytes_, offset, at, import_counts_[k]);
                   });
  import_slots_.resize(total);
  apron::sequence(import_slots_.begin(), import_slots_.end(), static_cast<std::uint32_t>(first));
  return first;
}

std::size_t HaloPlan::gather(ParticleStore& store, std::span<const FieldRef> fields) {
  send(store, fields);
  return append(store, fields);
}

void HaloPlan::set_import_slots(const IndexVector& slots) {
  require_imports("set_import_slots");
  if (slots.size() != import_total())
    throw std::invalid_argument("HaloPlan: one import slot per import");
  resize_per_particle(import_slots_, slots.size());
  apron::copy(slots.begin(), slots.end(), import_slots_.begin());
}

void HaloPlan::gather_into(ParticleStore& store, std::span<const FieldRef> fields,
                           const IndexVector& slots) {
  set_import_slots(slots);
  update(store, fields);
}

void HaloPlan::update(ParticleStore& store, std::span<const FieldRef> fields) {
  update_begin(store, fields);
  update_finish(store, fields);
}

void HaloPlan::update_begin(const ParticleStore& store, std::span<const FieldRef> fields) {
  require_copies("update");
  // Each rank knows how many rows every peer sends: no size exchange.
  start_forward(store, fields);
}

void HaloPlan::update_finish(ParticleStore& store, std::span<const FieldRef> fields) {
  transport_.wait();
  for (std::size_t k = 0, first = 0; k < peers_.size(); first += import_counts_[k], ++k)
    for_each_block(store, fields, import_counts_[k], recv_offsets_[k] + kHeader,
                   [&](ParticleField& field, std::size_t offset) {
                     field.scatter(recv_bytes_, offset, raw(import_slots_) + first,
                                   import_counts_[k]);
                   });
}

void HaloPlan::reverse(ParticleStore& store, std::span<const FieldRef> fields, Reduction op) {
  reverse_begin(store, fields);
  reverse_finish(store, fields, op);
}

void HaloPlan::reverse_begin(const ParticleStore& store, std::span<const FieldRef> fields) {
  require_copies("reverse");
  // The owners know what each peer sends back: no header.
  const auto send_offsets = pack(store, fields, import_slots_, import_counts_, false);
  recv_offsets_ = message_offsets(store, fields, export_counts_);
  grow(recv_bytes_, recv_offsets_.back());
  transport_.start_known_sizes(peers_, send_bytes_, send_offsets, recv_bytes_, recv_offsets_);
}

void HaloPlan::reverse_finish(ParticleStore& store, std::span<const FieldRef> fields,
                              Reduction op) {
  transport_.wait();
  // One peer after another: a row exported to several peers is combined once per launch, so
  // the launches need no atomics (rows are distinct within one peer's block).
  for (std::size_t k = 0, first = 0; k < peers_.size(); first += export_counts_[k], ++k)
    for_each_block(store, fields, export_counts_[k], recv_offsets_[k] + kHeader,
                   [&](ParticleField& field, std::size_t offset) {
                     field.scatter_reduce(recv_bytes_, offset, raw(export_rows_) + first,
                                          export_counts_[k], op);
                   });
}

void HaloPlan::require_copies(const char* what) const {
  require_imports(what);
  if (import_slots_.size() != import_total())
    throw std::logic_error(std::string("HaloPlan::") + what +
                           ": the copies have no slots yet (gather first)");
}

void HaloPlan::follow_permutation(const IndexVector& order) {
  if (export_rows_.empty() && import_slots_.empty()) return;  // nothing to map
  resize_per_particle(inverse_, order.size());
  for_each_index(order.size(), Invert{raw(order), raw(inverse_)});
  for (IndexVector* slots : {&export_rows_, &import_slots_}) {
    scratch_.resize(slots->size());
    apron::gather(slots->begin(), slots->end(), inverse_.begin(), scratch_.begin());
    slots->swap(scratch_);
  }
}

void HaloPlan::clear() {
  export_rows_.clear();
  import_slots_.clear();
  export_counts_.assign(peers_.size(), 0);
  import_counts_.assign(peers_.size(), 0);
}

std::size_t HaloPlan::device_bytes() const {
  const std::size_t indices = export_rows_.capacity() + import_slots_.capacity() +
                              inverse_.capacity() + scratch_.capacity();
  return indices * sizeof(std::uint32_t) + sorted_ranks_.capacity() * sizeof(int) +
         bounds_.capacity() * sizeof(std::uint32_t) + send_bytes_.capacity() +
         recv_bytes_.capacity();
}

}  // namespace apron
