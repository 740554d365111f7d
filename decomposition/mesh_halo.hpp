// The halo of a triangle mesh distributed by vertex owner. Each vertex has a global id and an owner
// rank; each rank holds its owned vertices and the triangles with at least one owned vertex. The
// halo is the 1-ring of the rank's boundary: the non-owned vertices of its triangles (ghost
// vertices), found by global id, with a global -> local map and the local triangles in local
// vertex rows. Vertex fields travel through a HaloPlan: gather() copies owners' values to the
// ghosts; reverse_sum() adds the ghosts' values (forces accumulated per triangle) into their
// owners' rows.
//
// Rows of the caller's ParticleStore: the owned vertices first, in the order given to build(),
// then the ghosts, grouped by owner rank ascending and by global id within an owner.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "decomposition/halo_plan.hpp"

namespace apron {

class MeshHalo {
 public:
  explicit MeshHalo(Transport& transport);

  // Collective. owned: global ids of this rank's vertices (rows 0 .. owned.size()); triangles:
  // three global ids each; corner_owners: the owner rank of each of those corners. Every
  // triangle must have an owned corner. Afterwards the store must hold vertex_count() rows.
  void build(std::span<const std::int64_t> owned, std::span<const std::int64_t> triangles,
             std::span<const int> corner_owners);

  // Collective. The same with the ghosts given directly (any vertices of other ranks the caller
  // needs: several rings deep, say), each with its owner rank; no triangles are kept.
  void build_ghosts(std::span<const std::int64_t> owned, std::span<const std::int64_t> ghost_ids,
                    std::span<const int> ghost_owners);

  std::size_t owned_count() const { return owned_; }
  std::size_t ghost_count() const { return global_ids_.size() - owned_; }
  std::size_t vertex_count() const { return global_ids_.size(); }
  // Global id of each local row, and the local row of a global id (-1 when not held here).
  const std::vector<std::int64_t>& global_ids() const { return global_ids_; }
  std::int64_t local_index(std::int64_t global_id) const;
  // The triangles in local rows (3 per triangle), on the host and on the device; and whether
  // this rank is the one that computes each (the owner of its lowest-id corner), so that a
  // per-triangle sum counts every triangle once over all ranks.
  const std::vector<std::uint32_t>& local_triangles() const { return triangles_; }
  const IndexVector& device_triangles() const { return device_triangles_; }
  const std::vector<std::uint8_t>& computes_triangle() const { return computes_; }
  const HaloPlan& halo_plan() const { return halo_; }

  // Owners' fields to their ghosts (no size exchange), whole or in halves.
  void gather(ParticleStore& store, std::span<const FieldRef> fields);
  void gather_begin(const ParticleStore& store, std::span<const FieldRef> fields);
  void gather_finish(ParticleStore& store, std::span<const FieldRef> fields);
  // The ghosts' fields combined into their owners' rows by `op` (ghosts keep their values).
  void reverse(ParticleStore& store, std::span<const FieldRef> fields, Reduction op);

 private:
  void check_store(const ParticleStore& store) const;
  int register_owned(std::span<const std::int64_t> owned);  // returns this rank
  // Ghost rows in (owner, id) order, the requests to their owners and the plan.
  void connect(const std::set<std::pair<int, std::int64_t>>& ghosts);

  HaloPlan halo_;
  std::size_t owned_ = 0;
  std::vector<std::int64_t> global_ids_;
  std::unordered_map<std::int64_t, std::uint32_t> local_;
  std::vector<std::uint32_t> triangles_;
  IndexVector device_triangles_;
  std::vector<std::uint8_t> computes_;
};

}  // namespace apron
