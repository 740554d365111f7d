// A test-only workload registered from the test tree: adding a workload touches its own folder
// and one registration line. `workload: toy` counts `toy.items` widgets split over the
// ranks; each step adds `toy.increment` to every widget. It goes through the same command line,
// registry, shared sections and driver as the built-in workloads: this program is apron's CLI with
// one more workload, and no shared file knows of it.
#include <mpi.h>

#include <cmath>
#include <memory>

#include "cli.hpp"
#include "config/case_config.hpp"
#include "config/yaml_reader.hpp"
#include "engine/stepping_workload.hpp"
#include "runtime/json.hpp"

namespace apron::toy {
namespace {

struct ToySettings : config::WorkloadSettings {
  long items = 0;
  double increment = 1;
  double dt = 0.1;
};

std::shared_ptr<const config::WorkloadSettings> read_toy(const config::CaseConfig&,
                                                         config::MapReader& root) {
  auto r = root.child("toy");
  auto s = std::make_shared<ToySettings>();
  s->items = r.get<long>("items");
  if (s->items < 1) r.fail("items", "must be at least 1");
  s->increment = r.get<double>("increment", s->increment);
  s->dt = r.positive("dt", s->dt);
  r.finish();
  return s;
}

// The time-stepping core's smallest user: one table of widgets (id, value), one point series
// (widget k at x = k), two diagnostic columns.
SteppingDeclaration toy_declaration() {
  SteppingDeclaration d;
  d.description = {"widget", "widgets.xmf; diagnostics.csv; checkpoints/; run_report.json"};
  d.columns = {{"widgets", 0}, {"total", 12}};
  d.series = {"widgets"};
  d.tables = {{"widgets",
               {{"id", io::Dtype::i64, 1}, {"value", io::Dtype::f64, 1, ValueCheck::finite}},
               "widgets"}};
  d.state_name = "widget values";
  d.unstable_hint = "lower toy.increment";
  return d;
}

class Toy final : public SteppingWorkload {
 public:
  explicit Toy(const WorkloadContext& x)
      : SteppingWorkload(x, toy_declaration()), settings_(config_.settings_as<ToySettings>()) {}
  std::size_t global_items() const override { return static_cast<std::size_t>(settings_.items); }

 private:
  // Rank r holds widgets [items r / ranks, items (r + 1) / ranks): a checkpoint's even share.
  void start() override {
    const long first = settings_.items * ranks_.rank / ranks_.size;
    const long last = settings_.items * (ranks_.rank + 1) / ranks_.size;
    for (long k = first; k < last; ++k) id_.push_back(k);
    value_.assign(id_.size(), 0.0);
  }
  double take_step() override {
    bool finite = true;
    for (double& v : value_) finite &= std::isfinite(v += settings_.increment);
    require_finite(finite, clock_.step + 1);
    return settings_.dt;
  }
  StepLimit largest_step() const override { return {settings_.dt, "key 'toy.dt'", "raise it"}; }
  double total() const {
    double sum = 0;
    for (const double v : value_) sum += v;
    MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_DOUBLE, MPI_SUM, ranks_.comm);
    return sum;
  }
  std::vector<double> diagnostics_row() override {
    return {static_cast<double>(settings_.items), total()};
  }
  void write_series() override {
    std::vector<float> position(3 * id_.size(), 0.0f);
    for (std::size_t k = 0; k < id_.size(); ++k) position[3 * k] = static_cast<float>(id_[k]);
    const io::HostField fields[] = {{"position", io::Dtype::f32, 3, position.data()},
                                    {"value", io::Dtype::f64, 1, value_.data()},
                                    {"id", io::Dtype::i64, 1, id_.data()}};
    series(0).write(clock_.step, clock_.time, io::PointSetPart{id_.size(), fields});
  }
  void save_state(SavedState& state) const override {
    auto rows =
        std::make_shared<std::pair<std::vector<std::int64_t>, std::vector<double>>>(id_, value_);
    state.rows("widgets", id_.size(), {{rows->first.data()}, {rows->second.data()}});
    state.keep(rows);
    state.scalar("widgets", static_cast<double>(settings_.items));
  }
  void restore(const LoadedState& state) override {
    if (state.total_rows("widgets") != static_cast<std::uint64_t>(settings_.items))
      throw std::runtime_error(state.where() + ": the checkpoint holds " +
                               std::to_string(state.total_rows("widgets")) + " widgets, the case " +
                               std::to_string(settings_.items));
    id_ = state.column<std::int64_t>("widgets", "id");
    value_ = state.column<double>("widgets", "value");
  }
  void report_fields(Json& j) const override {
    j.value("total", total());  // items * steps * increment on any rank count
  }

  const ToySettings& settings_;
  std::vector<std::int64_t> id_;
  std::vector<double> value_;
};

WorkloadSpec toy_spec() {
  const unsigned sections = config::kTime | config::kOutputSeries | config::kCheckpoint;
  return workload_spec_of<Toy>("toy", "test-only: counts widgets", {sections, read_toy},
                               {"toy.items", 1.0});
}

}  // namespace
}  // namespace apron::toy

int main(int argc, char** argv) {
  apron::register_workload(apron::toy::toy_spec());  // the one registration line
  return apron::run_cli(argc, argv);
}
