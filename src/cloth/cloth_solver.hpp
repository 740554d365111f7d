// The Cosserat-surface cloth (issue 17) as a time-stepping workload. Every rank holds the whole
// sheet's connectivity (read or generated alike on each) and owns the vertices inside its RCB
// box; it also holds kGhostRings rings of other ranks' vertices around them (MeshHalo, by global
// id), whose positions it refreshes every step. The internal forces of an owned vertex read W_v
// of its 2-ring, each W_v its own 2-ring: four rings of positions, so every rank computes its
// owned forces alone, in the same arithmetic as one rank (no reverse sum), and N ranks give 1
// rank's motion.
#pragma once

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cloth/cloth_config.hpp"
#include "cloth/cloth_self_contact.hpp"
#include "decomposition/conjugate_gradient.hpp"
#include "decomposition/mesh_halo.hpp"
#include "decomposition/transport.hpp"
#include "engine/stepping_workload.hpp"
#include "kernels/cloth/barrier.hpp"
#include "kernels/cloth/coarse.hpp"
#include "kernels/cloth/energy.hpp"
#include "kernels/cloth/implicit.hpp"
#include "kernels/cloth/mesh_colliders.hpp"
#include "kernels/cloth/motion.hpp"
#include "kernels/cloth/tensors.hpp"
#include "kernels/common/particle_store.hpp"

namespace apron::cloth {

// Checkpoints hold each rank's owned vertices (position, velocity, id, float64). Every rank holds
// the whole sheet's connectivity, so a restart on any rank count takes its vertices by id from
// all the rows: the continuation is bitwise on any rank count.
class ClothSolver final : public SteppingWorkload {
 public:
  static constexpr int kGhostRings = 4;

  explicit ClothSolver(const WorkloadContext& context);

  std::size_t global_items() const override { return global_vertices_; }
  std::vector<io::VisualBlock> visual_blocks() override;

  struct Diagnostics {
    double kinetic = 0, potential = 0, stretch = 0, bend = 0, coupling = 0, hourglass = 0;
    double max_speed = 0, max_strain = 0;  // max_strain: the largest principal strain
    double contact = 0;                    // the self-contact's energy (0 without it)
    double elastic() const { return stretch + bend + coupling + hourglass; }
  };
  Diagnostics diagnostics();  // collective

  struct SheetState {
    std::vector<Vector3<double>> position, velocity;  // by vertex index
  };

 private:
  void start() override { build(true); }
  double take_step() override;
  std::vector<double> diagnostics_row() override;
  void write_series() override;  // the sheet as a triangle mesh
  void save_state(SavedState& state) const override;
  void restore(const LoadedState& state) override;
  void report_fields(Json& json) const override;

  // The sheet, its distribution and the state at rest (setup, and load: not `at_rest`).
  void build(bool at_rest);
  HostMesh sheet();
  void check_memory(std::size_t vertices) const;
  void check_pinned(const HostMesh& mesh) const;
  void distribute(const HostMesh& mesh, const Rings& rings);
  void build_local_mesh(const HostMesh& mesh, const Rings& rings);
  void build_output_triangles(const HostMesh& mesh);
  void choose_dt(const HostMesh& mesh);
  void setup_self_contact(const HostMesh& mesh, bool at_rest);
  StepLimit largest_step() const override;
  long first_unfinite_step() const override;
  struct Edge {
    double length;
    std::uint32_t a, b;  // vertices, in the sheet's numbering
  };
  static Edge shortest_edge(const HostMesh& mesh);
  std::string edge_source(const Edge& edge) const;
  void refuse_unresolved_edge(const HostMesh& mesh, const Edge& edge) const;
  void refuse_start_inside_colliders(const HostMesh& mesh) const;
  void build_mesh_colliders();
  bool has_colliders() const { return !colliders_.empty() || !mesh_colliders_.empty(); }
  // cloth.implicit.friction: inside: Newton's step holds the colliders' friction inside its
  // potential (implicit.hpp's friction_force); otherwise it is applied after the update.
  bool friction_inside() const {
    return newton_with_colliders() && case_.integrator.friction_inside;
  }
  // cloth.implicit.contact: speculative: Newton's step also holds the rows that reach a collider
  // within it (implicit.hpp's landing_constraints), the set settled between solutions.
  bool speculative_contact() const {
    return newton_with_colliders() && case_.integrator.speculative_contact;
  }
  // cloth.implicit.contact: barrier (the default): the colliders are a barrier in Newton's
  // potential (kernels/cloth/barrier.hpp) instead of constraints; no row is held.
  bool barrier_contact() const {
    return newton_with_colliders() && case_.integrator.barrier_contact;
  }
  // Whether rows are held on the colliders in the implicit step (filtered from its directions).
  bool held_contact() const { return has_colliders() && !barrier_contact(); }
  // How far the projection after a step keeps vertices outside the colliders: with the barrier,
  // its singular surface, which the step itself does not pass.
  double projection_thickness() const;
  bool newton_with_colliders() const {
    return case_.integrator.implicit && !case_.integrator.vbd && has_colliders();
  }
  struct MeshCollider;
  MeshColliderStep mesh_step(const MeshCollider& collider, double start, double dt) const;
  // Every owned vertex against each mesh collider, over the step [start, start + dt].
  void collide_with_meshes(double start, double dt);
  // The implicit step (cloth_implicit.cpp): gradient_ becomes the one that makes
  // advance_vertices' update give the backward-Euler velocity, found by Newton's method; false
  // where it did not converge and may_fail (the sheet not moved: take_step halves the step).
  bool solve_implicit(bool may_fail);
  // The same step by vertex block descent (cloth.integrator: vbd); false as solve_implicit.
  bool solve_vbd(bool may_fail);
  // The preconditioned residual R.z at the iterate (newton_residual's), infinite where a row is
  // not finite (such rows drop out of the fixed-point sums).
  double preconditioned_residual();
  // The motion over [start, start + dt] (take_step's sub-steps); false as solve_implicit.
  bool advance_motion(double start, double dt, bool may_fail);
  void report_halvings(Json& json) const;            // cloth.implicit.max_halvings' counts
  void record_residual(double rz, double first);     // collective values
  void accept_unconverged(double rz, double first);  // cloth.implicit.unconverged: accept
  double begin_implicit_step();                      // returns the residual's scale
  void finish_implicit_step(long iterations);        // Newton iterations or sweeps
  void newton_residual();  // at implicit_.velocity: implicit_.point, .elastic and .newton
  // implicit_.step, by conjugate gradients until r.z <= tolerance^2 x its first or enough^2 / 4.
  void newton_step(bool first, double enough);
  enum class LineSearch { moved, negligible, stalled };
  LineSearch line_search();             // v += alpha step where Phi falls
  void vertex_line_search(int colour);  // v += alpha_i step_i, each vertex's share falling
  void soften_contact_start();          // cloth.implicit.contact_start
  void begin_barrier_step();            // cloth.implicit.contact: barrier
  double friction_smoothing() const;    // friction inside Newton's step: eps [m/s]
  void update_barrier_terms(const Vectors& end);  // the barrier's impulse and blocks there
  void barrier_friction_at(const Vectors& points, bool at_end,
                           DeviceVector<ContactConstraint>& out);
  bool lag_barrier_friction();  // between Newton's solutions; true: the friction's rows changed
  void barrier_energies_at(const Vectors& end, DeviceVector<double>& out) const;
  long add_landings(const Vectors& end);  // landing rows for these end points; collective count
  bool settle_landings();                 // between Newton's solutions; true: the set changed
  // cloth.implicit.coarse (cloth_coarse.cpp): the lattice, and one correction of the iterate.
  void setup_coarse(const HostMesh& mesh);
  bool coarse_correction(bool rebuild);  // rebuild: probe and factor the operator anew
  bool build_coarse_operator();          // at implicit_.point; false: no factor (none left)
  bool solve_coarse(std::vector<double>& c) const;  // c = Ac^-1 c; false: not finite
  void store_upper_factor();                        // coarse_.upper from coarse_.lower
  std::vector<Vector3<double>> prolong(const std::vector<double>& c, std::size_t rows) const;
  std::vector<Vector3<double>> filtered_product(const std::vector<Vector3<double>>& q);
  void filtered_product_on_device();  // coarse_.product = F A F coarse_.probe
  // cloth.implicit.preconditioner: two_level (cloth_two_level.cpp): the CG's preconditioner
  // (precondition's blocks plus the coarse lattice's correction), its operator made ready for a
  // Newton iteration, and its check.
  bool two_level() const { return case_.integrator.two_level && coarse_.nodes > 0; }
  void prepare_two_level(bool first_iteration, double target);
  void cg_precondition(const Vectors& r, Vectors& z);
  void check_two_level();
  bool form_coarse_inverse();          // coarse_.inverse from the factor; false: not finite
  double held_part(const Vectors& z);  // z's largest row held, relative to its largest
  int coarse_corners(std::size_t row, std::size_t* node, double* weight) const;
  void check_coarse_operator(const std::vector<double>& matrix);  // into operator_error
  std::vector<double> restrict_to_coarse(const std::vector<Vector3<double>>& y) const;
  double restriction_scale(double local_largest) const;  // fixed point's, from every rank's
  void refresh_ghost_rows(Vectors& rows);  // from their owners, through the direction's field
  double global_dot(const Vectors& a, const Vectors& b) const;  // owned rows, reproducible
  void precondition(const Vectors& r, Vectors& z);              // filtered where held on colliders
  void colour_rows(const Rings& rings);                         // block_jacobi's probing colours
  void build_reach(const Rings& rings);                         // vbd's 2-rings per owned row
  // The inverted blocks of the colours [first, end) at `point`, from the elastic gradient there.
  void probe_diagonal_blocks(const Vectors& point, const Vectors& elastic, int first, int end);
  template <class Product, class Update>
  bool step_along_free_motion(const ImplicitSystem& system, Product& product, Update& update);
  [[noreturn]] void refuse_unconverged(const char* method, long iterations, const char* limit_key,
                                       double reached, double tolerance,
                                       const char* tolerance_key) const;
  ImplicitSystem implicit_system() const;  // at this step's dt
  // A q at the Newton iterate (implicit_.point); q valid on ghost rows too. implicit_product
  // by central differences of the elastic gradient (the coarse operator's probes and its checks),
  // newton_product by forward ones from the gradient there (implicit_.elastic: Newton's CG, unless
  // its tolerances are tight).
  void implicit_product(const Vectors& q, Vectors& out);
  void newton_product(const Vectors& q, Vectors& out);
  void product_by_differences(const Vectors& q, bool forward, Vectors& out);
  void add_contact_products(const Vectors& q, Vectors& out);
  template <class Fixed>
  double reproducible_sum(double largest, const Fixed& fixed) const;
  std::size_t device_bytes() const;
  SheetState gather_rows(const std::vector<Vector3<double>>& position,
                         const std::vector<Vector3<double>>& velocity,
                         const std::vector<std::int64_t>& ids) const;

  const ClothCase& case_;
  Transport transport_;
  MeshHalo halo_;

  std::size_t global_vertices_ = 0, owned_ = 0;
  std::vector<int> owner_;  // of every vertex of the sheet
  // A file's vertex index of each sheet vertex (the sheet is renumbered for locality); empty
  // for a grid. Output ids are the file's; checkpoints keep the sheet's (the same on restart).
  std::vector<std::uint32_t> file_index_;
  DeviceMesh<double> mesh_;  // local rows: owned, then ghosts; positions at rest
  ReferenceState<double> reference_;
  EnergyModel model_;
  ParticleStore store_;  // "position", "velocity" of the local rows (the halo moves them)
  Field<Vector3<double>> position_, velocity_;
  DeviceVector<Vector3<double>> gradient_;
  DeviceVector<double> mass_, scratch_;
  DeviceVector<VertexMeasures> measures_;  // for diagnostics and outputs
  DeviceVector<std::uint8_t> pinned_;
  DeviceVector<std::uint64_t> first_bad_step_;  // set by the integration kernel (motion.hpp)
  DeviceVector<Collider> colliders_;            // the analytic ones
  struct MeshCollider {
    surface::SurfaceQuery surface;  // the mesh at rest, in the case's frame
    const ColliderConfig* config;
  };
  std::vector<std::unique_ptr<MeshCollider>> mesh_colliders_;
  MotionParams motion_;
  std::unique_ptr<SheetSelfContact> self_contact_;  // with cloth.self_collision.enabled
  Edge shortest_{};
  // The implicit step's vectors over the local rows (the search direction is the store's
  // "direction", which the halo refreshes) and its counts for the run report.
  struct ImplicitWork {
    Vectors rhs, residual, preconditioned, product, velocity, shifted, gradient_plus,
        gradient_minus;
    DeviceVector<ContactConstraint> constraints;  // the colliders' rows this step
    Vectors filtered;                             // the residual in the free subspace
    Vectors free_motion, free_product;  // the deflation: f_d and A f_d (step_along_free_motion)
    double free_curvature = 0;          // f_d . A f_d
    // block_jacobi: each local row's colour (distance_colours over the gradient's reach), how
    // many there are on the whole sheet, and the owned rows' inverted blocks this step.
    DeviceVector<std::uint8_t> colour;
    int colours = 0;
    DeviceVector<Block3> blocks;
    Field<Vector3<double>> direction;
    // Newton's method: the iterate's positions x0 + dt v, its elastic gradient, its residual
    // (newton_residual), the step from it, the self-contact's gradient at x0 (the contact is
    // linearised there), the vertices' energies at the iterate and at the line search's trial.
    Vectors point, elastic, newton, step, contact_gradient, contact_product;
    DeviceVector<double> energy, trial_energy;
    // Friction inside Newton's step (friction_inside): its impulse at the iterate, each row's
    // share of its potential there and at the line search's trial, and its smoothing speed.
    Vectors friction;
    DeviceVector<double> friction_energy, trial_friction;
    double friction_eps = 0;
    // Speculative contact (speculative_contact): the rows whose constraint changed in the last
    // update of the landing rows, this step's updates, and the run's landing rows (each time a row
    // became one), releases and the updates that changed the set.
    DeviceVector<std::uint8_t> changed;
    int landing_updates = 0;
    long landings = 0, landings_released = 0, landing_updates_run = 0;
    // The contact barrier (barrier_contact): its reach, each row's impulse and Hessian block at
    // the iterate, and each row's energy there and at the line search's trial.
    ContactBarrier barrier;
    Vectors barrier_impulse;
    DeviceVector<Block3> barrier_curvature;
    DeviceVector<double> barrier_energy, trial_barrier;
    // The friction's rows taken again at a solution, this step's and the run's such updates.
    DeviceVector<ContactConstraint> lagged;
    int friction_lags = 0;
    long friction_lags_run = 0;
    VertexSearch search;  // vbd's line search per vertex (cloth.implicit.line_search: vertex)
    long search_rounds = 0, stalled_vertices = 0;  // its backtracking rounds, rows left at alpha 0
    long steps = 0, iterations = 0, most_iterations = 0, curvature_stops = 0;
    long newton_iterations = 0, most_newton = 0, capped_solves = 0;
    double smallest_step_length = 1;         // the line search's
    double last_change = 0, last_alpha = 0;  // Phi's change and alpha of its last move
    // Each step's relative residual (the solve's, at the solution taken): the largest since the
    // last diagnostics row (its "residual" column), and, with cloth.implicit.unconverged: accept,
    // the steps taken above their tolerance and their largest residual.
    double row_residual = 0, largest_accepted = 0, last_row_residual = 0;
    long accepted_unconverged = 0, row_steps = 0;  // row_steps: `steps` at the last row
    // cloth.implicit.max_halvings: this step's halvings so far; the steps subdivided, their
    // sub-steps, the halvings, the most in one step, and the iterations (vbd: sweeps) of the
    // attempts redone.
    int halving = 0;
    long subdivided = 0, substeps = 0, halvings = 0, most_halvings = 0, retried_iterations = 0;
  } implicit_;
  // cloth.implicit.coarse: the lattice (nodes per axis, origin, spacing, probing period, index
  // stride), each owned row's lattice coordinates, the pinned rows, and the counts.
  struct CoarseWork {
    int count[3] = {1, 1, 1}, period[3] = {1, 1, 1}, colours = 0;
    double origin[3] = {0, 0, 0}, spacing[3] = {1, 1, 1};
    std::size_t stride[3] = {0, 0, 0}, nodes = 0, band = 0;
    std::vector<double> lattice;
    std::vector<std::uint8_t> pinned;
    std::vector<double> lower;  // the operator's banded Cholesky factor (empty: none yet)
    std::vector<double> upper;  // its transpose by rows (store_upper_factor)
    std::vector<std::uint32_t> corner_offsets, corner_node;  // each owned row's nodes (CSR)
    std::vector<double> corner_weight;                       // and its hat weights there
    std::vector<std::uint32_t> owner;  // per probing colour and owned row: the colour's node
    std::vector<double> share;         // and the row's hat weight for it (0: outside)
    long corrections = 0, moved = 0, shifted = 0, builds = 0;
    double phi_drop = 0, step_lengths = 0;
    double operator_error = 0, asymmetry = 0;  // check_coarse_operator's, the largest
    // two_level: the corners on the device, the restriction's integer sums and the coarse
    // solution there, scratch rows, and check_two_level's largest asymmetry of the whole
    // preconditioner and smallest ratio of its quadratic form to the blocks' alone (>= 1).
    std::vector<std::uint8_t> colour_moves;              // per colour: this rank displaces a row
    std::vector<std::vector<std::size_t>> colour_nodes;  // per colour: the nodes rows own
    // On the device: the corners, owner and share, and the operator's band in fixed point.
    DeviceVector<std::uint32_t> owner_rows;
    DeviceVector<double> share_rows;
    DeviceVector<std::int64_t> fixed_rows;
    CoarseCorners corners;
    CoarseGather gather;  // the same corners by node, for the restriction
    DeviceVector<std::int64_t> sums;
    DeviceVector<double> solution;
    Vectors rows;
    // The operator's probe and its product (the CG's own vectors are live while it is built),
    // and check_two_level's images of them.
    Vectors probe, product, probe_image, product_image;
    // check_two_level's two fixed vectors, made at its first call: they depend on the global ids
    // alone, and their six sines a row on the host were made again at every build.
    Vectors fixed_u, fixed_v;
    // two_level with coarse.solve dense (auto on a GPU): the factor on the device and Ac^-1
    // formed from it at each build (form_coarse_inverse), the restricted sums there, and the
    // dense product's scratch; inverse_ready where the last build's inverse is finite.
    bool dense = false, inverse_ready = false;
    long dense_builds = 0, applications = 0;  // builds with a finite inverse; coarse solves
    DeviceVector<double> lower_rows, upper_rows, inverse, restricted, partial;
    bool stale = true;    // two_level: no operator probed yet in this (sub-)step
    bool active = false;  // two_level: the coarse part is on in this solve
    double preconditioner_asymmetry = 0, smallest_ratio = std::numeric_limits<double>::infinity();
    double held_largest = 0;  // check_two_level's largest held part of z (held_part)
  } coarse_;

  double dt_ = 0;           // the sheet's step; the last one of a run may be shorter
  double step_start_ = 0;   // the time at the start of the (sub-)step being taken
  double explicit_dt_ = 0;  // cfl x the stability limit, whichever integrator steps
  // Output: this rank's triangles (those whose lowest-id corner it owns) over the local rows
  // they use, renumbered from 0.
  std::vector<std::uint32_t> output_rows_, output_triangles_;
  std::vector<std::int64_t> visual_connectivity_;
  struct OutputStage {  // host copies of the output rows' fields (the visual blocks point here)
    std::vector<float> position, velocity, energy, strain_max, strain_min, mean_curvature,
        gaussian_curvature;
    std::vector<std::int64_t> id;
  } stage_;
  mutable std::shared_ptr<std::vector<double>> checkpoint_rows_;  // host staging of a save
  mutable std::shared_ptr<std::vector<std::int64_t>>
      checkpoint_ids_;  // the sheet's vertex index (a vertex may be on two ranks)
};

WorkloadSpec cloth_spec();

}  // namespace apron::cloth
