#include "decomposition/mesh_halo.hpp"

#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/common/algorithms.hpp"

namespace apron {

MeshHalo::MeshHalo(Transport& transport) : halo_(transport) {}

std::int64_t MeshHalo::local_index(std::int64_t global_id) const {
  const auto it = local_.find(global_id);
  return it == local_.end() ? -1 : static_cast<std::int64_t>(it->second);
}

void MeshHalo::build(std::span<const std::int64_t> owned, std::span<const std::int64_t> triangles,
                     std::span<const int> corner_owners) {
  if (triangles.size() % 3 != 0 || corner_owners.size() != triangles.size())
    throw std::invalid_argument("MeshHalo::build: three ids and three owners per triangle");
  const int rank = register_owned(owned);
  // Ghosts: the non-owned corners, by (owner, global id).
  std::set<std::pair<int, std::int64_t>> ghosts;
  for (std::size_t c = 0; c < triangles.size(); ++c) {
    const bool mine = local_.count(triangles[c]) > 0;
    if ((corner_owners[c] == rank) != mine)
      throw std::invalid_argument("MeshHalo::build: vertex " + std::to_string(triangles[c]) +
                                  (mine ? " is listed as owned but its owner is another rank"
                                        : " is owned here but not listed as owned"));
    if (!mine) ghosts.emplace(corner_owners[c], triangles[c]);
  }
  connect(ghosts);

  // Triangles in local rows; each computed by the owner of its lowest-id corner.
  triangles_.resize(triangles.size());
  computes_.assign(triangles.size() / 3, 0);
  for (std::size_t t = 0; t < triangles.size() / 3; ++t) {
    std::size_t lowest = 3 * t;
    bool has_owned = false;
    for (std::size_t c = 3 * t; c < 3 * t + 3; ++c) {
      triangles_[c] = local_.at(triangles[c]);
      has_owned |= corner_owners[c] == rank;
      if (triangles[c] < triangles[lowest]) lowest = c;
    }
    if (!has_owned) throw std::invalid_argument("MeshHalo::build: a triangle with no owned vertex");
    computes_[t] = corner_owners[lowest] == rank;
  }
  device_triangles_ = IndexVector(triangles_.begin(), triangles_.end());
}

void MeshHalo::build_ghosts(std::span<const std::int64_t> owned,
                            std::span<const std::int64_t> ghost_ids,
                            std::span<const int> ghost_owners) {
  if (ghost_ids.size() != ghost_owners.size())
    throw std::invalid_argument("MeshHalo::build_ghosts: one owner per ghost");
  const int rank = register_owned(owned);
  std::set<std::pair<int, std::int64_t>> ghosts;
  for (std::size_t g = 0; g < ghost_ids.size(); ++g) {
    if (ghost_owners[g] == rank || local_.count(ghost_ids[g]))
      throw std::invalid_argument("MeshHalo::build_ghosts: vertex " + std::to_string(ghost_ids[g]) +
                                  " is owned here");
    ghosts.emplace(ghost_owners[g], ghost_ids[g]);
  }
  connect(ghosts);
  triangles_.clear();
  computes_.clear();
  device_triangles_.clear();
}

int MeshHalo::register_owned(std::span<const std::int64_t> owned) {
  owned_ = owned.size();
  global_ids_.assign(owned.begin(), owned.end());
  local_.clear();
  for (std::size_t i = 0; i < owned_; ++i)
    if (!local_.emplace(owned[i], static_cast<std::uint32_t>(i)).second)
      throw std::invalid_argument("MeshHalo::build: vertex " + std::to_string(owned[i]) +
                                  " listed twice");
  int rank = 0;
  MPI_Comm_rank(halo_.transport_comm(), &rank);
  return rank;
}

void MeshHalo::connect(const std::set<std::pair<int, std::int64_t>>& ghosts) {
  MPI_Comm comm = halo_.transport_comm();
  int nranks = 1;
  MPI_Comm_size(comm, &nranks);
  std::vector<int> request_counts(nranks, 0), offer_counts(nranks, 0);
  std::vector<std::int64_t> requests;
  for (const auto& [owner, id] : ghosts) {
    if (owner < 0 || owner >= nranks)
      throw std::invalid_argument("MeshHalo::build: vertex " + std::to_string(id) +
                                  " has no valid owner rank");
    local_.emplace(id, static_cast<std::uint32_t>(global_ids_.size()));
    global_ids_.push_back(id);
    requests.push_back(id);
    ++request_counts[owner];
  }

  // Ask each owner for its vertices; the owners export them in the order asked.
  MPI_Alltoall(request_counts.data(), 1, MPI_INT, offer_counts.data(), 1, MPI_INT, comm);
  std::vector<int> request_displs(nranks), offer_displs(nranks);
  std::exclusive_scan(request_counts.begin(), request_counts.end(), request_displs.begin(), 0);
  std::exclusive_scan(offer_counts.begin(), offer_counts.end(), offer_displs.begin(), 0);
  std::vector<std::int64_t> offers(offer_displs.back() + offer_counts.back());
  MPI_Alltoallv(requests.data(), request_counts.data(), request_displs.data(), MPI_INT64_T,
                offers.data(), offer_counts.data(), offer_displs.data(), MPI_INT64_T, comm);
  std::vector<std::uint32_t> rows(offers.size());
  std::vector<int> destinations(offers.size());
  for (int p = 0; p < nranks; ++p)
    for (int k = offer_displs[p]; k < offer_displs[p] + offer_counts[p]; ++k) {
      const auto it = local_.find(offers[k]);
      if (it == local_.end() || it->second >= owned_)
        throw std::invalid_argument("MeshHalo::build: rank " + std::to_string(p) +
                                    " takes vertex " + std::to_string(offers[k]) +
                                    " for one of this rank's, but it is not");
      rows[k] = it->second;
      destinations[k] = p;
    }
  halo_.build(IndexVector(rows.begin(), rows.end()),
              DeviceVector<int>(destinations.begin(), destinations.end()));
  // Imports arrive by owner ascending, each in the order asked: the ghost rows in order.
  IndexVector slots(ghost_count());
  apron::sequence(slots.begin(), slots.end(), static_cast<std::uint32_t>(owned_));
  halo_.set_import_slots(slots);
}

void MeshHalo::check_store(const ParticleStore& store) const {
  if (store.size() != vertex_count())
    throw std::invalid_argument("MeshHalo: the store holds " + std::to_string(store.size()) +
                                " rows, the mesh halo " + std::to_string(vertex_count()));
}

void MeshHalo::gather(ParticleStore& store, std::span<const FieldRef> fields) {
  gather_begin(store, fields);
  gather_finish(store, fields);
}

void MeshHalo::gather_begin(const ParticleStore& store, std::span<const FieldRef> fields) {
  check_store(store);
  halo_.update_begin(store, fields);
}

void MeshHalo::gather_finish(ParticleStore& store, std::span<const FieldRef> fields) {
  halo_.update_finish(store, fields);
}

void MeshHalo::reverse(ParticleStore& store, std::span<const FieldRef> fields, Reduction op) {
  check_store(store);
  halo_.reverse(store, fields, op);
}

}  // namespace apron
