// A test-only workload registered from the test tree (issue 14: adding a workload touches its own
// folder and one registration line). `workload: toy` counts `toy.items` widgets split over the
// ranks; each step adds `toy.increment` to every widget. It goes through the same command line,
// registry, shared sections and driver as the built-in workloads: this program is apron's CLI with
// one more workload, and no shared file knows of it.
#include <mpi.h>

#include <memory>

#include "cli.hpp"
#include "config/case_config.hpp"
#include "config/yaml_reader.hpp"
#include "runtime/json.hpp"
#include "workload.hpp"
#include "workload_registry.hpp"

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

class Toy final : public Workload {
 public:
  explicit Toy(const WorkloadContext& x)
      : config_(x.config), settings_(x.config.settings_as<ToySettings>()), ranks_(x.ranks) {}
  void setup() override {
    const long first = settings_.items * ranks_.rank / ranks_.size;
    mine_ = settings_.items * (ranks_.rank + 1) / ranks_.size - first;
  }
  void advance() override {
    ++step_;
    time_ += settings_.dt;
    value_ += settings_.increment;
  }
  bool done() const override { return config_.time.reached(step_, time_); }
  long step() const override { return step_; }
  double time() const override { return time_; }
  double end_time() const override { return config_.time.end; }
  double last_dt() const override { return settings_.dt; }
  std::size_t global_items() const override { return static_cast<std::size_t>(settings_.items); }
  void write_outputs(bool) override {}
  void report(Json& j) const override {
    double total = mine_ * value_;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, ranks_.comm);
    j.begin_object("toy");
    j.value("total", total);  // items * steps * increment on any rank count
    j.end_object();
  }
  std::string output_dir() const override { return config_.output.dir; }
  std::string item_name() const override { return "widget"; }
  std::string output_hint() const override { return "run_report.json"; }

 private:
  const config::CaseConfig& config_;
  const ToySettings& settings_;
  RankInfo ranks_;
  long mine_ = 0, step_ = 0;
  double time_ = 0, value_ = 0;
};

WorkloadSpec toy_spec() {
  WorkloadSpec spec;
  spec.name = "toy";
  spec.summary = "test-only: counts widgets";
  spec.schema.sections = config::kTime;
  spec.schema.read = read_toy;
  spec.make = [](const WorkloadContext& x) -> std::unique_ptr<Workload> {
    return std::make_unique<Toy>(x);
  };
  spec.weak_scaling = {"toy.items", 1.0};
  return spec;
}

}  // namespace
}  // namespace apron::toy

int main(int argc, char** argv) {
  apron::register_workload(apron::toy::toy_spec());  // the one registration line
  return apron::run_cli(argc, argv);
}
