#include "cloth/cloth_self_contact.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

#include "config/yaml_reader.hpp"
#include "decomposition/reductions.hpp"
#include "kernels/common/algorithms.hpp"
#include "runtime/runtime.hpp"

namespace apron::cloth {
namespace {

// The sheet's mean vertex mass: density x its rest area / its vertices.
double mean_vertex_mass(const HostMesh& sheet, double density) {
  double area = 0;
  for (const auto& t : sheet.triangles) {
    const auto at = [&](int k) {
      const auto& p = sheet.positions[t[k]];
      return Point{p[0], p[1], p[2]};
    };
    area += 0.5 * norm(cross(at(1) - at(0), at(2) - at(0)));
  }
  return density * area / static_cast<double>(sheet.positions.size());
}

}  // namespace

void SheetSelfContact::setup(const Setup& s, const DeviceVector<Point>& position) {
  MPI_Comm_size(comm_, &ranks_);
  const HostMesh& sheet = *s.sheet;
  file_index_ = s.file_index;
  refuse_unresolved(sheet, s.file);
  const SelfCollisionConfig& c = case_.self_collision;
  params_.thickness = case_.thickness;
  params_.skin = c.skin > 0 ? c.skin : case_.thickness;
  params_.stiffness = c.stiffness * mean_vertex_mass(sheet, s.density) / (s.dt * s.dt);
  params_.bound = c.bound;
  params_.gap = c.hard_gap * case_.thickness;
  sheet_ = sheet_primitives(sheet);

  owned_ = s.owned_ids.size();
  row_of_.assign(sheet.positions.size(), SelfContact::kNotHere);
  std::vector<std::uint32_t> ids(owned_);
  for (std::size_t r = 0; r < owned_; ++r) {
    ids[r] = static_cast<std::uint32_t>(s.owned_ids[r]);
    row_of_[ids[r]] = static_cast<std::uint32_t>(r);
  }
  contact_.set_rows(row_of_, owned_);
  to_device(ids, owned_ids_);

  const int mine = static_cast<int>(owned_);
  counts_.assign(ranks_, 0);
  MPI_Allgather(&mine, 1, MPI_INT, counts_.data(), 1, MPI_INT, comm_);
  displacements_.assign(ranks_, 0);
  std::exclusive_scan(counts_.begin(), counts_.end(), displacements_.begin(), 0);
  gathered_ids_.resize(sheet.positions.size());
  MPI_Allgatherv(s.owned_ids.data(), mine, MPI_INT64_T, gathered_ids_.data(), counts_.data(),
                 displacements_.data(), MPI_INT64_T, comm_);
  owner_.resize(sheet.positions.size());
  for (int rank = 0; rank < ranks_; ++rank)
    for (int k = 0; k < counts_[rank]; ++k) owner_[gathered_ids_[displacements_[rank] + k]] = rank;
  for (int& n : counts_) n *= 3;  // from here on in doubles
  for (int& d : displacements_) d *= 3;
  all_host_.resize(sheet.positions.size());
  all_.resize(sheet.positions.size());
  refresh(position);
  if (s.at_rest) refuse_touching_at_rest(s.file);
}

// The broad phase bins float-rounded coordinates and the output is float: a thickness within a
// few float steps of the sheet's coordinates could not be kept.
void SheetSelfContact::refuse_unresolved(const HostMesh& sheet, const std::string& file) const {
  double magnitude = 0;
  for (const auto& p : sheet.positions)
    for (const double x : p) magnitude = std::max(magnitude, std::fabs(x));
  const double resolution = std::numeric_limits<float>::epsilon() * magnitude;
  if (case_.thickness >= 100 * resolution) return;
  char text[320];
  std::snprintf(text, sizeof text,
                ": key 'cloth.thickness' (%.3g m) is too close to the float resolution of the "
                "sheet's coordinates (%.3g m at %.3g m) for self-collision; use at least %.3g m, "
                "or move the sheet nearer the origin",
                case_.thickness, resolution, magnitude, 100 * resolution);
  throw config::ConfigError(file + text);
}

// Non-adjacent primitives already closer than the thickness at rest (a thickness larger than
// the sheet's cells) would be pushed apart from the first step: refused, naming the closest.
void SheetSelfContact::refuse_touching_at_rest(const std::string& file) const {
  SelfContact whole;
  std::vector<std::uint32_t> every(all_.size());
  std::iota(every.begin(), every.end(), 0u);
  whole.set_rows(every, every.size());
  whole.build(sheet_, all_, params_);
  ContactPair pair{};
  const double nearest = whole.closest(all_, pair);
  if (nearest < 0 || nearest >= case_.thickness) return;
  std::uint32_t v[4];
  for (int k = 0; k < 4; ++k)
    v[k] = file_index_.empty() ? pair.vertex[k] : file_index_[pair.vertex[k]];
  char what[160], text[480];
  if (pair.edge_edge)
    std::snprintf(what, sizeof what, "the edges (%u, %u) and (%u, %u)", v[0], v[1], v[2], v[3]);
  else
    std::snprintf(what, sizeof what, "vertex %u and triangle (%u, %u, %u)", v[0], v[1], v[2], v[3]);
  std::snprintf(text, sizeof text,
                ": key 'cloth.thickness' (%.3g m) is larger than the gap between non-adjacent "
                "parts of the sheet at rest: %s are %.3g m apart; use a thickness below that, or "
                "coarser cells",
                case_.thickness, what, nearest);
  throw config::ConfigError(file + text);
}

void SheetSelfContact::refresh(const DeviceVector<Point>& position) {
  apron::scatter(position.begin(), position.begin() + static_cast<std::ptrdiff_t>(owned_),
                 owned_ids_.begin(), all_.begin());
  if (ranks_ == 1) return;
  if (halo_planned_)
    exchange_halo(all_);
  else
    gather_whole_sheet();
}

// Every rank's owned rows (already in all_) to every rank.
void SheetSelfContact::gather_whole_sheet() {
  DeviceVector<Point> mine(owned_);
  apron::gather(owned_ids_.begin(), owned_ids_.end(), all_.begin(), mine.begin());
  const std::vector<Point> mine_host = to_host(mine, owned_);
  std::vector<Point> gathered(all_host_.size());
  MPI_Allgatherv(mine_host.data(), static_cast<int>(3 * owned_), MPI_DOUBLE, gathered.data(),
                 counts_.data(), displacements_.data(), MPI_DOUBLE, comm_);
  for (std::size_t i = 0; i < gathered.size(); ++i) all_host_[gathered_ids_[i]] = gathered[i];
  to_device(all_host_, all_);
  ++whole_gathers_;
}

// After a build: the other ranks' vertices that this rank's pairs name, asked of their owners.
// Until the next build no other vertex can come within reach of this rank's (the list holds
// every pair within the thickness), so those are all it needs.
void SheetSelfContact::plan_halo() {
  const std::vector<ContactPair> pairs = to_host(contact_.pairs(), contact_.pairs().size());
  std::vector<std::vector<std::uint32_t>> wanted(ranks_);
  for (const ContactPair& pair : pairs)
    for (const std::uint32_t v : pair.vertex)
      if (row_of_[v] == SelfContact::kNotHere) wanted[owner_[v]].push_back(v);
  std::vector<std::uint32_t> receive_ids;
  receive_counts_.assign(ranks_, 0);
  for (int rank = 0; rank < ranks_; ++rank) {
    std::vector<std::uint32_t>& ids = wanted[rank];
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    receive_ids.insert(receive_ids.end(), ids.begin(), ids.end());
    receive_counts_[rank] = static_cast<int>(ids.size());
  }
  send_counts_.assign(ranks_, 0);
  MPI_Alltoall(receive_counts_.data(), 1, MPI_INT, send_counts_.data(), 1, MPI_INT, comm_);
  const auto offsets = [](const std::vector<int>& counts) {
    std::vector<int> at(counts.size(), 0);
    std::exclusive_scan(counts.begin(), counts.end(), at.begin(), 0);
    return at;
  };
  receive_offsets_ = offsets(receive_counts_);
  send_offsets_ = offsets(send_counts_);
  std::vector<std::uint32_t> send_ids(
      static_cast<std::size_t>(std::accumulate(send_counts_.begin(), send_counts_.end(), 0)));
  MPI_Alltoallv(receive_ids.data(), receive_counts_.data(), receive_offsets_.data(), MPI_UINT32_T,
                send_ids.data(), send_counts_.data(), send_offsets_.data(), MPI_UINT32_T, comm_);
  to_device(send_ids, send_ids_);
  to_device(receive_ids, receive_ids_);
  send_buffer_.resize(send_ids.size());
  receive_buffer_.resize(receive_ids.size());
  for (auto* counts : {&send_counts_, &send_offsets_, &receive_counts_, &receive_offsets_})
    for (int& n : *counts) n *= 3;  // in doubles
  halo_planned_ = true;
}

// Each rank's asked-for owned vertices (already in `sheet`) to the ranks that asked, into theirs.
void SheetSelfContact::exchange_halo(DeviceVector<Point>& sheet) {
  apron::gather(send_ids_.begin(), send_ids_.end(), sheet.begin(), send_buffer_.begin());
  const std::vector<Point> send = to_host(send_buffer_, send_buffer_.size());
  std::vector<Point> received(receive_buffer_.size());
  MPI_Alltoallv(send.data(), send_counts_.data(), send_offsets_.data(), MPI_DOUBLE, received.data(),
                receive_counts_.data(), receive_offsets_.data(), MPI_DOUBLE, comm_);
  to_device(received, receive_buffer_);
  apron::scatter(receive_buffer_.begin(), receive_buffer_.end(), receive_ids_.begin(),
                 sheet.begin());
  ++halo_exchanges_;
  halo_vertices_ += static_cast<long long>(received.size());
}

// A list built at any positions since which no vertex has moved skin / 2 holds every pair
// closer than the thickness; and the forces do not depend on which such list it is. A rank sees
// its own vertices and its halo move (the rest it holds stand still at their build positions),
// so the ranks decide together, as one rank seeing the whole sheet would.
void SheetSelfContact::rebuild_if_stale() {
  bool stale = contact_.stale(all_, params_);
  if (ranks_ > 1) stale = global_max(comm_, stale ? 1.0 : 0.0) > 0;
  if (!stale) return;
  if (halo_planned_) gather_whole_sheet();  // the broad phase looks at every vertex
  contact_.build(sheet_, all_, params_);
  most_pairs_ = std::max(most_pairs_, contact_.pairs().size());
  if (ranks_ > 1) plan_halo();
}

void SheetSelfContact::add_gradient(DeviceVector<Point>& gradient) {
  rebuild_if_stale();
  contact_.forces(all_, params_, gradient, bound_);
}

void SheetSelfContact::add_product(const DeviceVector<Point>& q, double scale,
                                   DeviceVector<Point>& out) {
  sheet_q_.resize(all_.size());  // only the pairs' vertices are read
  apron::scatter(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(owned_), owned_ids_.begin(),
                 sheet_q_.begin());
  if (halo_planned_) exchange_halo(sheet_q_);
  contact_.add_product(sheet_q_, params_, scale, out);
}

void SheetSelfContact::clamp(DeviceVector<Point>& position, DeviceVector<Point>& velocity) {
  clamped_ += static_cast<long long>(
      clamp_displacements(position, velocity, all_, owned_ids_, bound_, owned_));
}

double SheetSelfContact::energy() {
  rebuild_if_stale();
  contact_.energies(all_, params_, energy_);
  const std::vector<double> shares = to_host(energy_, owned_);
  return std::accumulate(shares.begin(), shares.end(), 0.0);
}

void SheetSelfContact::report(Json& json) const {
  json.begin_object("self_collision");
  json.value("stiffness", params_.stiffness);
  json.value("pair_list_builds", static_cast<long long>(contact_.builds()));
  json.value("pairs_listed_most", global_max(comm_, static_cast<double>(most_pairs_)));
  // Per rank: how often it took the whole sheet, and the largest mean halo it received a step.
  json.value("whole_sheet_gathers", whole_gathers_);
  json.value("halo_vertices_per_step_most",
             global_max(comm_, halo_exchanges_ > 0 ? static_cast<double>(halo_vertices_) /
                                                         static_cast<double>(halo_exchanges_)
                                                   : 0.0));
  const long long clamped = global_sum(comm_, static_cast<std::int64_t>(clamped_));
  json.value("clamped_vertex_steps", clamped);
  json.end_object();
  // The bound guarantees no intersection by slowing what moves too far; at steps far above the
  // explicit limit that is the motion itself, which must not pass as a result.
  if (clamped > 0)
    Log::warn(
        "cloth: self-collision's displacement bound slowed %lld vertex-steps (no vertex may "
        "move more than %.3g m a step, %.3g x cloth.thickness): the motion there is not the "
        "physics'; take shorter steps (cloth.implicit.dt or cloth.cfl) or a thicker "
        "cloth.thickness",
        clamped, largest_step(), largest_step() / params_.thickness);
}

double SheetSelfContact::largest_step() const {
  return params_.bound * (params_.thickness - params_.gap);
}

std::size_t SheetSelfContact::device_bytes() const {
  return contact_.device_bytes() +
         4 * (sheet_.triangles.capacity() + sheet_.edges.capacity() + owned_ids_.capacity() +
              send_ids_.capacity() + receive_ids_.capacity()) +
         sizeof(Point) * (all_.capacity() + sheet_q_.capacity() + send_buffer_.capacity() +
                          receive_buffer_.capacity()) +
         8 * (bound_.capacity() + energy_.capacity());
}

}  // namespace apron::cloth
