// The command line (apron run | validate | inspect | workloads | info), for apron's main() and
// for programs that register workloads of their own first (tests/workloads).
#include "cli.hpp"

#include <hdf5.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "config/case_config.hpp"
#include "config/yaml_reader.hpp"
#include "driver/driver.hpp"
#include "io/catalyst_adaptor.hpp"
#include "io/checkpoint.hpp"
#include "runtime/json.hpp"
#include "runtime/openmp_wait.hpp"
#include "runtime/runtime.hpp"
#include "version.hpp"
#include "workload_registry.hpp"

namespace {

constexpr const char* kUsage = R"(usage:
  apron run CASE.yaml [--set key.path=value ...]   run a case (under mpirun for several ranks)
      [--restart latest|auto|FILE.h5]   continue from a checkpoint (auto: if there is one)
      [--max-wall-time SECONDS|HH:MM:SS]   stop with a checkpoint before this much wall time
  apron validate CASE.yaml [--set key.path=value ...] [--json]   check a case file and exit
      (--json: print the workload, its item and its weak-scaling knob with the case's value)
  apron workloads                                   the workloads this apron runs
  apron inspect FILE.h5 [--verify]                 what a checkpoint or output file holds
  apron info                                        backend, devices, MPI and library versions
  apron --version | --help
exit status: 0 success, 1 run-time failure, 2 bad input (case file, command line, checkpoint),
3 stopped early (SIGTERM, SIGUSR1, SIGINT or --max-wall-time) after writing a checkpoint
)";

struct Command {
  std::string verb;
  std::string file;
  std::vector<std::string> overrides;
  apron::RunOptions run;
  bool verify = false;
  bool json = false;
};

// "3600", "90.5" or "HH:MM:SS" (as SLURM's --time prints it) -> seconds.
double parse_wall_time(const std::string& text) {
  int h = 0, m = 0, s = 0;
  char end = 0;
  if (std::sscanf(text.c_str(), "%d:%d:%d%c", &h, &m, &s, &end) == 3 && h >= 0 && m >= 0 && s >= 0)
    return 3600.0 * h + 60.0 * m + s;
  try {
    std::size_t used = 0;
    const double seconds = std::stod(text, &used);
    if (used == text.size() && seconds > 0) return seconds;
  } catch (const std::exception&) {
  }
  throw apron::config::ConfigError("--max-wall-time '" + text +
                                   "': give seconds (3600) or HH:MM:SS (01:00:00)");
}

// The value after an option, which must be there.
std::string option_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc || argv[i + 1][0] == '-')
    throw apron::config::ConfigError(std::string(argv[i]) + " needs a value\n" + kUsage);
  return argv[++i];
}

Command parse_command(int argc, char** argv) {
  Command c;
  if (argc < 2) throw apron::config::ConfigError(std::string("no command given\n") + kUsage);
  c.verb = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--set") {
      if (i + 1 >= argc) throw apron::config::ConfigError("--set needs key.path=value");
      c.overrides.push_back(argv[++i]);
    } else if (arg == "--restart" && c.verb == "run") {
      c.run.restart = option_value(argc, argv, i);
    } else if (arg == "--max-wall-time" && c.verb == "run") {
      c.run.max_wall_seconds = parse_wall_time(option_value(argc, argv, i));
    } else if (arg == "--verify" && c.verb == "inspect") {
      c.verify = true;
    } else if (arg == "--json" && c.verb == "validate") {
      c.json = true;
    } else if (arg.rfind("--set=", 0) == 0) {
      c.overrides.push_back(arg.substr(6));
    } else if (c.file.empty() && arg[0] != '-') {
      c.file = arg;
    } else {
      throw apron::config::ConfigError("unexpected argument '" + arg + "'\n" + kUsage);
    }
  }
  const bool needs_file = c.verb == "run" || c.verb == "validate" || c.verb == "inspect";
  if (needs_file && c.file.empty())
    throw apron::config::ConfigError("'apron " + c.verb + "' needs a case file\n" + kUsage);
  if (!needs_file && c.verb != "info" && c.verb != "workloads")
    throw apron::config::ConfigError("unknown command '" + c.verb + "'\n" + kUsage);
  return c;
}

void print_info(const apron::RankInfo& ranks, const apron::DeviceInfo& device) {
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  unsigned h5[3];
  H5get_libversion(&h5[0], &h5[1], &h5[2]);
  std::string mpi(mpi_version, strnlen(mpi_version, len));  // Open MPI counts the NUL
  mpi = mpi.substr(0, mpi.find('\n'));
  std::cout << "apron " << apron::kVersion << " (" << apron::kGitRevision << ", "
            << apron::kBuildType << ")\n"
            << "backend:   " << device.backend << "\n"
            << "device:    " << device.name << " (" << device.count << " visible, "
            << device.total_bytes / (1 << 20) << " MiB, " << device.threads << " OpenMP threads)\n"
            << "OpenMP:    idle threads wait by " << apron::openmp_waiting_source();
  if (const char* spin = std::getenv("GOMP_SPINCOUNT")) std::cout << ", GOMP_SPINCOUNT=" << spin;
  std::cout << "\n"
            << "MPI:       " << mpi << ", " << ranks.size << " rank(s)\n"
            << "HDF5:      " << h5[0] << "." << h5[1] << "." << h5[2] << " (parallel)\n"
            << apron::DeviceInfo::libraries() << "yaml-cpp:  linked\n";
}

void print_workloads() {
  for (const auto* spec : apron::registered_workloads()) {
    const auto& knob = spec->weak_scaling;
    std::cout << spec->name << ": " << spec->summary;
    if (!knob.key.empty())
      std::cout << " [weak scaling: " << knob.key << " x (r/r0)^" << knob.exponent << "]";
    std::cout << "\n";
  }
}

// `apron validate --json`: what the scaling-study driver (jobs/scaling) needs of a case.
void print_case_json(const apron::config::CaseConfig& config) {
  const auto& spec = apron::workload_spec(config.workload);
  apron::Json j;
  j.begin_object();
  j.value("file", config.file);
  j.value("workload", config.workload);
  j.value("name", config.name);
  j.begin_object("weak_scaling");
  j.value("key", spec.weak_scaling.key);
  j.value("exponent", spec.weak_scaling.exponent);
  j.value("value", apron::config::scalar_at(config.effective_text, spec.weak_scaling.key));
  j.end_object();
  j.end_object();
  std::cout << j.str() << "\n";
}

// A failure of this rank alone: other ranks may wait in a collective call, so MPI_Abort ends them.
int fail_alone(const std::string& message) {
  apron::Log::error_all(message);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

}  // namespace

namespace apron {

int run_cli(int argc, char** argv) {
  if (argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))) {
    std::cout << kUsage;
    return 0;
  }
  if (argc >= 2 && !std::strcmp(argv[1], "--version")) {
    std::cout << "apron " << apron::kVersion << " (" << apron::kGitRevision << ")\n";
    return 0;
  }
  apron::MpiSession mpi(argc, argv);
  const auto ranks = apron::RankInfo::world();
  apron::Log::init(ranks.rank);
  apron::install_terminate_handler();
  try {
    const Command cmd = parse_command(argc, argv);
    if (cmd.verb == "inspect") {
      if (ranks.rank != 0) return 0;
      try {
        const auto [text, ok] = apron::io::inspect_isolated(cmd.file, cmd.verify);
        std::cout << text;
        if (!ok)
          std::cerr << "apron: error: " << cmd.file << ": verification failed (the errors above)\n";
        return ok ? 0 : 2;
      } catch (const std::runtime_error& e) {
        std::cerr << "apron: error: " << e.what() << "\n";
        return 2;
      }
    }
    if (cmd.verb == "workloads") {
      if (ranks.rank == 0) print_workloads();
      return 0;
    }
    if (cmd.verb == "validate") {
      const auto config = apron::config::parse_case(cmd.file, cmd.overrides);
      if (cmd.json) {
        if (ranks.rank == 0) print_case_json(config);
        return 0;
      }
      apron::Log::info("%s: valid %s case '%s'", cmd.file.c_str(), config.workload.c_str(),
                       config.name.c_str());
      return 0;
    }
    // Validate the whole case before any rank allocates anything.
    const auto config = cmd.verb == "run" ? apron::config::parse_case(cmd.file, cmd.overrides)
                                          : apron::config::CaseConfig{};
    const auto device = apron::DeviceInfo::select(ranks);
    if (cmd.verb == "info") {
      if (ranks.rank == 0) print_info(ranks, device);
      return 0;
    }
    return apron::run_case(config, ranks, device, cmd.run);
  } catch (const apron::config::ConfigError& e) {
    // Every rank parsed the same input and failed the same way: report once.
    if (ranks.rank == 0) std::cerr << "apron: error: " << e.what() << "\n";
    return 2;
  } catch (const apron::io::CatalystError& e) {
    // Every rank agreed on it and threw together: no rank waits in a collective, so MPI can
    // shut down cleanly (and ParaView's runtime is already finalized).
    if (ranks.rank == 0) std::cerr << "apron: error: " << e.what() << "\n";
    return 1;
  } catch (const apron::io::AgreedError& e) {
    if (!e.every_rank()) return fail_alone(e.what());
    // Every rank threw it together (a full disk, an unwritable folder): report it once.
    if (ranks.rank == 0) std::cerr << "apron: error: " << e.what() << "\n";
    if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE) > 0) {
      // A file HDF5 failed to close (a write error in its metadata flush): libhdf5 1.10 would
      // crash closing it again in MPI_Finalize. Every rank is here: end without it.
      std::cerr.flush();
      std::fflush(nullptr);
      MPI_Barrier(MPI_COMM_WORLD);
      std::_Exit(1);
    }
    return 1;
  } catch (const std::bad_alloc& e) {
    return fail_alone(apron::out_of_memory_message(e.what()));
  } catch (const std::exception& e) {
    return fail_alone(e.what());
  }
}

}  // namespace apron
