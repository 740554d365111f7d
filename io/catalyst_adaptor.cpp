// The Catalyst adaptor of a build with ParaView: it loads ParaView's in-situ runtime
// (catalyst_runtime.hpp) when a run asks for it, and after every call has the ranks agree on
// whether any script failed: rank 0 logs the first failing rank's report, and under
// fail_on_error every rank throws CatalystError together, so the run ends cleanly instead of in
// MPI_Abort.
#include "io/catalyst_adaptor.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "io/catalyst_runtime.hpp"
#include "io/hdf5_file.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

// Where the module may be: APRON_CATALYST_MODULE names it outright; else beside the program
// (a relocated build), else where this build put it.
std::vector<fs::path> module_candidates() {
  if (const char* named = std::getenv("APRON_CATALYST_MODULE")) return {named};
  std::vector<fs::path> places;
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);
  const fs::path built = APRON_CATALYST_MODULE;
  if (!ec) places.push_back(program.parent_path() / built.filename());
  places.push_back(built);
  return places;
}

// Loads the module once per process (never unloaded: VTK and Python do not survive it) and
// returns its entry point, or nullptr with the reason in `error`. RTLD_GLOBAL: Python's
// extension modules find libpython's symbols in the global scope.
MakeCatalystRuntime* load_module(std::string& error) {
  static MakeCatalystRuntime* make = nullptr;
  static std::string failure;
  if (make != nullptr || !failure.empty()) {
    error = failure;
    return make;
  }
  const std::vector<fs::path> candidates = module_candidates();
  for (const fs::path& path : candidates) {
    if (!fs::exists(path)) continue;
    void* module = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (module == nullptr) {
      failure =
          "catalyst: cannot load ParaView's in-situ module " + path.string() + ": " + dlerror();
      break;
    }
    make = reinterpret_cast<MakeCatalystRuntime*>(dlsym(module, kMakeCatalystRuntime));
    if (make == nullptr) failure = "catalyst: " + path.string() + " is not apron's module";
    break;
  }
  if (make == nullptr && failure.empty()) {
    failure = "catalyst: ParaView's in-situ module is not at " + candidates.back().string() +
              " (rebuild apron, or set APRON_CATALYST_MODULE to the file)";
  }
  error = failure;
  return make;
}

}  // namespace

struct CatalystAdaptor::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  bool fail_on_error = false;
  std::unique_ptr<CatalystRuntime> runtime;

  // Collective. Rank 0 logs the lowest failing rank's failures; under fail_on_error every rank
  // throws. Returns the number of failing calls (0 or 1) for the adaptor's count.
  long report(const std::string& when) {
    std::string agreed;
    try {
      agree(comm, runtime->take_failures());
    } catch (const std::runtime_error& e) {
      agreed = e.what();
    }
    if (agreed.empty()) return 0;
    if (fail_on_error)
      throw CatalystError(agreed + "\n(" + when + "; catalyst.fail_on_error is true: stopping)");
    if (rank_of(comm) == 0)
      std::fprintf(stderr, "warning: %s\n(%s; the run goes on: catalyst.fail_on_error is false)\n",
                   agreed.c_str(), when.c_str());
    std::fflush(stderr);
    return 1;
  }
};

bool CatalystAdaptor::available() {
  return true;
}

CatalystAdaptor::CatalystAdaptor(MPI_Comm comm, CatalystSettings settings)
    : impl_(std::make_unique<Impl>()) {
  impl_->comm = comm;
  impl_->fail_on_error = settings.fail_on_error;
  std::string error;
  MakeCatalystRuntime* make = load_module(error);
  agree(comm, error);
  impl_->runtime.reset(make(comm, settings));
  errors_ += impl_->report("while loading the Catalyst scripts");
}

CatalystAdaptor::~CatalystAdaptor() = default;

void CatalystAdaptor::execute(long step, double time, std::span<const VisualBlock> blocks) {
  impl_->runtime->execute(step, time, blocks);
  errors_ += impl_->report("at step " + std::to_string(step));
}

}  // namespace apron::io
