#include "workload_registry.hpp"

#include <map>
#include <stdexcept>

#include "workload.hpp"

namespace apron {
namespace {

std::map<std::string, WorkloadSpec>& registry() {
  static std::map<std::string, WorkloadSpec> specs = [] {
    std::map<std::string, WorkloadSpec> builtins;
    for (auto& spec : builtin_workloads()) builtins.emplace(spec.name, std::move(spec));
    return builtins;
  }();
  return specs;
}

}  // namespace

void register_workload(WorkloadSpec spec) {
  if (spec.name.empty() || !spec.schema.read || !spec.make)
    throw std::logic_error("register_workload: a workload needs a name, a schema and a factory");
  const std::string name = spec.name;
  if (!registry().emplace(name, std::move(spec)).second)
    throw std::logic_error("register_workload: '" + name + "' is registered already");
}

const WorkloadSpec& workload_spec(const std::string& name) {
  const auto it = registry().find(name);
  if (it == registry().end()) throw std::logic_error("no workload '" + name + "' is registered");
  return it->second;
}

std::vector<const WorkloadSpec*> registered_workloads() {
  std::vector<const WorkloadSpec*> out;
  for (const auto& [name, spec] : registry()) out.push_back(&spec);
  return out;
}

namespace config {

const WorkloadSchema* find_schema(const std::string& workload) {
  const auto it = registry().find(workload);
  return it == registry().end() ? nullptr : &it->second.schema;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const auto& [name, spec] : registry()) names.push_back(name);
  return names;
}

}  // namespace config
}  // namespace apron
