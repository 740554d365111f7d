// The cloth's self-contact across ranks (kernels/cloth/self_contact.hpp does the geometry). A
// pair may join vertices of any ranks. When the pair list is (re)built, every rank takes the
// positions of the whole sheet (one all-gather of the owned rows) and lists the pairs that touch
// its own vertices; until the next build, each step brings only the other ranks' vertices those
// pairs name (a halo planned at the build: usually the few near the rank's boundary that are in
// contact). Each rank sums its pairs' forces in the list's key order, so its vertices move as on
// one rank, bit for bit.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cloth/cloth_config.hpp"
#include "kernels/cloth/self_contact.hpp"
#include "runtime/json.hpp"

namespace apron::cloth {

class SheetSelfContact {
 public:
  struct Setup {
    const HostMesh* sheet;
    std::vector<std::int64_t> owned_ids;  // the sheet's vertex of each owned row
    double dt, density;  // dt: the step the repulsion is made as stiff as can be for
    bool at_rest;        // refuse pairs already closer than the thickness
    std::string file;    // the case, for messages
    std::vector<std::uint32_t> file_index;  // a mesh file's vertex of each sheet vertex, or empty
  };
  SheetSelfContact(const ClothCase& c, MPI_Comm comm) : case_(c), comm_(comm) {}

  // Collective. The primitives, this rank's rows, the stiffness; the positions from `position`.
  void setup(const Setup& s, const DeviceVector<Point>& position);
  // Collective: the positions of this rank's rows and of the other ranks' vertices its pairs
  // name (before the first build: of the whole sheet).
  void refresh(const DeviceVector<Point>& position);
  // Adds the contact forces' gradient to the owned rows and fixes this step's bounds (the pair
  // list is rebuilt first when it no longer holds every pair within the thickness).
  void add_gradient(DeviceVector<Point>& gradient);
  // Collective. The implicit step's product with the repulsion's Hessian (its positive part, at
  // the positions of the last add_gradient): out[row] += scale (H q)[row] for the owned rows, the
  // other ranks' vertices its pairs name taking q from their owners.
  void add_product(const DeviceVector<Point>& q, double scale, DeviceVector<Point>& out);
  // After the step's motion, before the halo: each owned vertex's displacement since the start
  // of the step (the positions refresh() last took) within its bound.
  void clamp(DeviceVector<Point>& position, DeviceVector<Point>& velocity);
  // This rank's share of the contact energy at the refreshed positions.
  double energy();
  // Collective; warns when the bound slowed any vertex (the run's motion was then not physical).
  void report(Json& json) const;
  std::size_t device_bytes() const;
  // The farthest any vertex may move in a step, where no pair is closer than the thickness.
  double largest_step() const;

 private:
  void refuse_unresolved(const HostMesh& sheet, const std::string& file) const;
  void refuse_touching_at_rest(const std::string& file) const;
  void rebuild_if_stale();
  void gather_whole_sheet();
  void plan_halo();
  void exchange_halo(DeviceVector<Point>& sheet);

  const ClothCase& case_;
  MPI_Comm comm_;
  int ranks_ = 1;
  SelfContactParams params_;
  SheetPrimitives sheet_;
  SelfContact contact_;
  std::size_t owned_ = 0;
  DeviceVector<Point> all_;  // the whole sheet, by vertex
  DeviceVector<std::uint32_t> owned_ids_;
  std::vector<std::uint32_t> row_of_;  // each sheet vertex's owned row, or kNotHere
  std::vector<int> owner_;             // each sheet vertex's rank
  DeviceVector<double> bound_, energy_;
  DeviceVector<Point> sheet_q_;  // the implicit step's q by vertex of the sheet
  // The all-gather: each rank's row count and the sheet's vertex of every row, in rank order.
  std::vector<int> counts_, displacements_;
  std::vector<std::int64_t> gathered_ids_;
  std::vector<Point> all_host_;
  // The halo until the next build: the owned vertices each rank asked for, and the vertices
  // asked of each rank, both grouped by rank; counts and offsets in doubles.
  bool halo_planned_ = false;
  DeviceVector<std::uint32_t> send_ids_, receive_ids_;
  DeviceVector<Point> send_buffer_, receive_buffer_;
  std::vector<int> send_counts_, send_offsets_, receive_counts_, receive_offsets_;
  long long whole_gathers_ = 0, halo_exchanges_ = 0, halo_vertices_ = 0;
  std::vector<std::uint32_t> file_index_;
  long long clamped_ = 0;
  std::size_t most_pairs_ = 0;
};

}  // namespace apron::cloth
