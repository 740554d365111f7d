#include "decomposition/brick_halo.hpp"

#include <mpi.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>

#include <thrust/copy.h>

namespace apron {
namespace {

int floor_div(int a, int b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

BrickCoord plus(const BrickCoord& a, const BrickCoord& o) {
  return {a[0] + o[0], a[1] + o[1], a[2] + o[2]};
}

// The 26 directions to neighbouring bricks.
std::vector<BrickCoord> directions() {
  std::vector<BrickCoord> d;
  for (int z = -1; z <= 1; ++z)
    for (int y = -1; y <= 1; ++y)
      for (int x = -1; x <= 1; ++x)
        if (x || y || z) d.push_back({x, y, z});
  return d;
}

int direction_index(const BrickCoord& o) {
  return (o[0] + 1) + 3 * (o[1] + 1) + 9 * (o[2] + 1);
}

// Sends per-rank lists of brick coordinates (3 ints each) to every rank; returns the lists
// received, concatenated by source rank ascending, and how many came from each rank.
std::vector<BrickCoord> all_to_all(const std::vector<std::vector<BrickCoord>>& out, MPI_Comm comm,
                                   std::vector<int>& from_count) {
  const int n = static_cast<int>(out.size());
  std::vector<int> send_counts(n), recv_counts(n), send_displs(n), recv_displs(n);
  std::vector<int> send;
  for (int r = 0; r < n; ++r) {
    send_counts[r] = static_cast<int>(3 * out[r].size());
    for (const auto& c : out[r]) send.insert(send.end(), c.begin(), c.end());
  }
  MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm);
  std::exclusive_scan(send_counts.begin(), send_counts.end(), send_displs.begin(), 0);
  std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_displs.begin(), 0);
  std::vector<int> recv(recv_displs.back() + recv_counts.back());
  MPI_Alltoallv(send.data(), send_counts.data(), send_displs.data(), MPI_INT, recv.data(),
                recv_counts.data(), recv_displs.data(), MPI_INT, comm);
  from_count.resize(n);
  for (int r = 0; r < n; ++r) from_count[r] = recv_counts[r] / 3;
  std::vector<BrickCoord> coords(recv.size() / 3);
  for (std::size_t k = 0; k < coords.size(); ++k)
    coords[k] = {recv[3 * k], recv[3 * k + 1], recv[3 * k + 2]};
  return coords;
}

template <class T>
DeviceVector<T> to_device(const std::vector<T>& h) {
  return DeviceVector<T>(h.begin(), h.end());
}

}  // namespace

BrickHalo::BrickHalo(Transport& transport, int brick_size, int apron)
    : b_(brick_size), a_(apron), halo_(transport) {
  if (b_ < 1 || a_ < 0 || a_ > b_)
    throw std::invalid_argument("BrickHalo: need brick size >= 1 and 0 <= apron <= brick size");
  voxels_ = static_cast<std::size_t>(side()) * side() * side();
}

void BrickHalo::plan(std::span<const BrickCoord> bricks,
                     const std::function<int(const BrickCoord&)>& owner) {
  MPI_Comm comm = halo_.transport_comm();
  int rank = 0, nranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &nranks);
  local_.assign(bricks.begin(), bricks.end());
  std::map<BrickCoord, std::uint32_t> index;
  for (std::size_t i = 0; i < local_.size(); ++i) {
    if (owner(local_[i]) != rank)
      throw std::invalid_argument(
          "BrickHalo::plan: a brick is not owned by the rank that holds it");
    if (!index.emplace(local_[i], static_cast<std::uint32_t>(i)).second)
      throw std::invalid_argument("BrickHalo::plan: a brick is listed twice");
  }
  const auto dirs = directions();

  // 1. Tell the owner of every remote neighbour position which local bricks border it.
  std::vector<std::set<BrickCoord>> announce(nranks);
  for (const auto& b : local_)
    for (const auto& o : dirs) {
      const int q = owner(plus(b, o));
      if (q != rank) announce[q].insert(b);
    }
  std::vector<std::vector<BrickCoord>> out(nranks);
  for (int r = 0; r < nranks; ++r) out[r].assign(announce[r].begin(), announce[r].end());
  std::vector<int> from_count;
  const auto announced = all_to_all(out, comm, from_count);

  // 2. Each local brick next to an announced one goes to the announcer, once: its interior.
  std::vector<std::vector<BrickCoord>> needed(nranks);
  for (int p = 0, at = 0; p < nranks; at += from_count[p], ++p) {
    std::set<BrickCoord> mine;
    for (int k = at; k < at + from_count[p]; ++k)
      for (const auto& o : dirs) {
        const auto y = plus(announced[k], o);
        if (index.count(y)) mine.insert(y);
      }
    needed[p].assign(mine.begin(), mine.end());
  }
  std::vector<std::uint32_t> rows;
  std::vector<int> destinations;
  for (int p = 0; p < nranks; ++p)
    for (const auto& y : needed[p])
      for (int k = 0; k < b_; ++k)
        for (int j = 0; j < b_; ++j)
          for (int i = 0; i < b_; ++i) {
            rows.push_back(static_cast<std::uint32_t>(voxel(index[y], i, j, k)));
            destinations.push_back(p);
          }
  // The receivers learn which bricks they get, in the plan's order (peers ascending, then the
  // sender's order).
  remote_ = all_to_all(needed, comm, from_count);
  halo_.build(to_device(rows), to_device(destinations));
  const std::size_t interior = static_cast<std::size_t>(b_) * b_ * b_;
  if (halo_.import_total() != remote_.size() * interior)
    throw std::logic_error("BrickHalo::plan: remote bricks and halo imports disagree");
  std::vector<std::uint32_t> slots;
  slots.reserve(halo_.import_total());
  for (std::size_t r = 0; r < remote_.size(); ++r) {
    index.emplace(remote_[r], static_cast<std::uint32_t>(local_.size() + r));
    for (int k = 0; k < b_; ++k)
      for (int j = 0; j < b_; ++j)
        for (int i = 0; i < b_; ++i)
          slots.push_back(static_cast<std::uint32_t>(voxel(local_.size() + r, i, j, k)));
  }
  halo_.set_import_slots(to_device(slots));

  // 3. Every apron voxel of every local brick: its neighbour's interior voxel, by direction. The
  // neighbour is looked up once per brick and direction (not per voxel: replanning thousands of
  // bricks every step of a moving fluid must stay cheap).
  std::vector<std::vector<std::uint32_t>> apron(27), source(27);
  std::vector<std::uint32_t> empty;
  for (std::size_t bi = 0; bi < local_.size(); ++bi) {
    std::int64_t neighbour[27];
    for (int d = 0; d < 27; ++d) {
      const BrickCoord o{d % 3 - 1, (d / 3) % 3 - 1, d / 9 - 1};
      const auto it = index.find(plus(local_[bi], o));
      neighbour[d] = it == index.end() ? -1 : static_cast<std::int64_t>(it->second);
    }
    for (int k = -a_; k < b_ + a_; ++k)
      for (int j = -a_; j < b_ + a_; ++j)
        for (int i = -a_; i < b_ + a_; ++i) {
          const int v[3] = {i, j, k};
          BrickCoord o, g;
          for (int d = 0; d < 3; ++d) {
            o[d] = floor_div(v[d], b_);
            g[d] = v[d] - o[d] * b_;  // voxel inside the neighbour, in [0, B)
          }
          if (o == BrickCoord{0, 0, 0}) continue;  // interior
          const auto to = static_cast<std::uint32_t>(voxel(bi, i, j, k));
          const int d = direction_index(o);
          if (neighbour[d] < 0) {
            empty.push_back(to);
            continue;
          }
          apron[d].push_back(to);
          source[d].push_back(static_cast<std::uint32_t>(
              voxel(static_cast<std::size_t>(neighbour[d]), g[0], g[1], g[2])));
        }
  }
  std::vector<std::uint32_t> all_apron, all_source;
  group_.assign(1, 0);
  for (int d = 0; d < 27; ++d) {
    all_apron.insert(all_apron.end(), apron[d].begin(), apron[d].end());
    all_source.insert(all_source.end(), source[d].begin(), source[d].end());
    group_.push_back(all_apron.size());
  }
  apron_ = to_device(all_apron);
  source_ = to_device(all_source);
  empty_ = to_device(empty);
}

void BrickHalo::check_store(const ParticleStore& store) const {
  if (store.size() != total_voxels())
    throw std::invalid_argument("BrickHalo: the store holds " + std::to_string(store.size()) +
                                " rows, the plan " + std::to_string(total_voxels()));
}

void BrickHalo::fill_bytes(ParticleStore& store, std::span<const std::string> fields,
                           const void* background, std::size_t element_size) {
  check_store(store);
  halo_.update(store, fields);
  for (const auto& name : fields) {
    auto& field = store.field(name);
    if (field.element_size() != element_size)
      throw std::invalid_argument("BrickHalo::fill: background of another type than field '" +
                                  name + "'");
    // Sources are interior voxels, targets apron voxels: no slot is both.
    field.move(source_, apron_);
    field.assign(background, raw(empty_), empty_.size());
  }
}

void BrickHalo::reverse_sum(ParticleStore& store, std::span<const std::string> fields) {
  check_store(store);
  alignas(16) const std::byte zeros[64] = {};
  for (const auto& name : fields) {
    auto& field = store.field(name);
    if (field.element_size() > sizeof zeros)
      throw std::invalid_argument("BrickHalo::reverse_sum: field '" + name + "' is too wide");
    // Remote copies collect this rank's contributions to other ranks' bricks.
    field.assign(zeros, raw(halo_.import_slots()), halo_.import_slots().size());
    // One direction at a time: within one, every interior voxel receives from one apron voxel
    // at most, so the adds need no atomics.
    for (int d = 0; d < 27; ++d) {
      const std::size_t first = group_[d], count = group_[d + 1] - group_[d];
      if (count == 0) continue;
      resize_per_particle(scratch_, count * field.element_size());
      field.pack(raw(apron_) + first, count, scratch_, 0);
      field.scatter_add(scratch_, 0, raw(source_) + first, count);
    }
  }
  halo_.reverse_sum(store, fields);
}

std::size_t BrickHalo::device_bytes() const {
  return halo_.device_bytes() +
         (apron_.capacity() + source_.capacity() + empty_.capacity()) * sizeof(std::uint32_t) +
         scratch_.capacity();
}

}  // namespace apron
