// ParaView's in-situ runtime (catalyst_runtime.hpp), the one file that sees ParaView, built as
// the module the Catalyst adaptor loads.
//
// How the pieces fit: a vtkCPProcessor holds one pipeline per Python script (or the built-in
// writer). Each is wrapped in a ReportingPipeline, which runs it and collects what VTK and
// Python print meanwhile (CapturingOutputWindow), so a traceback can be reported under the name
// of the script that raised it; the adaptor has the ranks agree on what failed after each call.
#include "io/catalyst_runtime.hpp"

#include <vtkAOSDataArrayTemplate.h>
#include <vtkCPDataDescription.h>
#include <vtkCPInputDataDescription.h>
#include <vtkCPPipeline.h>
#include <vtkCPProcessor.h>
#include <vtkCPPythonPipeline.h>
#include <vtkCellArray.h>
#include <vtkCellData.h>
#include <vtkIdTypeArray.h>
#include <vtkImageData.h>
#include <vtkLogger.h>
#include <vtkMPI.h>
#include <vtkMPICommunicator.h>
#include <vtkMultiProcessController.h>
#include <vtkObjectFactory.h>
#include <vtkOutputWindow.h>
#include <vtkPointData.h>
#include <vtkPoints.h>
#include <vtkPolyData.h>
#include <vtkSmartPointer.h>
#include <vtkTrivialProducer.h>
#include <vtkUnstructuredGrid.h>
#include <vtkXMLPDataSetWriter.h>

#include <cstdio>
#include <functional>
#include <map>
#include <numeric>
#include <string_view>
#include <type_traits>
#include <utility>

#include "io/atomic_file.hpp"
#include "io/hdf5_file.hpp"

// vtkTypeMacro ends in a member function and so takes no ';' (-Wpedantic); the static_assert
// makes the ';' that formatters and readers expect part of the declaration.
#define APRON_VTK_TYPE(thisClass, superclass) \
  vtkTypeMacro(thisClass, superclass) static_assert(true)

namespace apron::io {
namespace {

namespace fs = std::filesystem;

// ---- what VTK and Python print ---------------------------------------------------------------

// Replaces VTK's output window for the whole process. Errors (Python tracebacks arrive here,
// through vtkPythonInterpreter's stderr) and warnings are kept until the adaptor asks for them;
// plain text (a script's print()) goes to stdout on rank 0, like apron's own log.
class CapturingOutputWindow : public vtkOutputWindow {
 public:
  static CapturingOutputWindow* New();
  APRON_VTK_TYPE(CapturingOutputWindow, vtkOutputWindow);

  void DisplayText(const char* text) override {
    switch (GetCurrentMessageType()) {
      case MESSAGE_TYPE_ERROR:
        errors_ += text;
        // VTK's own errors ("ERROR: In file, line ...") go out at once too: some precede an
        // abort() in VTK (no X display for a render window) that no report would outlive.
        if (std::string_view(text).starts_with("ERROR: In ")) {
          std::fprintf(stderr, "catalyst (rank %d): %s", rank_, text);
          std::fflush(stderr);
        }
        break;
      case MESSAGE_TYPE_WARNING:
      case MESSAGE_TYPE_GENERIC_WARNING:
        warnings_ += text;
        break;
      default:
        if (print_text_) std::fputs(text, stdout);
    }
  }
  std::string take_errors() { return std::exchange(errors_, {}); }
  std::string take_warnings() { return std::exchange(warnings_, {}); }
  void print_text(bool on) { print_text_ = on; }
  void set_rank(int rank) { rank_ = rank; }

 private:
  std::string errors_, warnings_;
  int rank_ = 0;
  bool print_text_ = false;
};
vtkStandardNewMacro(CapturingOutputWindow);

// Messages reach apron through the output window above, so vtkLogger's own copy on stderr is
// turned off. But ParaView 5.11's Python log handler fails (and prints a "Logging error" per
// message) on the debug messages it lets through whenever vtkLogger's cutoff is OFF; a callback
// that ignores what it gets keeps the cutoff at WARNING.
constexpr const char* kLoggerCallback = "apron-catalyst";
void quiet_vtk_logger() {
  vtkLogger::SetStderrVerbosity(vtkLogger::VERBOSITY_OFF);
  vtkLogger::AddCallback(
      kLoggerCallback, [](void*, const vtkLogger::Message&) {}, nullptr,
      vtkLogger::VERBOSITY_WARNING);
}

// One script's failure at one call, as it will be reported.
struct Failure {
  std::string script;
  std::string what;  // "loading it", "step 40"
  std::string text;  // the traceback or VTK's message
};

// ParaView's producer of a script's input warns at the first call (step 0 at t = 0) that the
// time did not advance past its initial 0: nothing a user can or should act on.
bool is_harmless(const std::string& warning) {
  return warning.find("vtkPVTrivialProducer") != std::string::npos &&
         warning.find("New time step is not after last time step") != std::string::npos;
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// ---- the pipelines ---------------------------------------------------------------------------

// Runs one pipeline and notes a failure under its script's name: a CoProcess that returns 0, or
// anything printed as an error while it ran. (RequestDataDescription returning 0 only means
// "nothing to do at this step".)
class ReportingPipeline : public vtkCPPipeline {
 public:
  static ReportingPipeline* New();
  APRON_VTK_TYPE(ReportingPipeline, vtkCPPipeline);

  void wrap(vtkSmartPointer<vtkCPPipeline> inner, std::string script, CapturingOutputWindow* output,
            std::vector<Failure>* failures) {
    inner_ = std::move(inner);
    script_ = std::move(script);
    output_ = output;
    failures_ = failures;
  }
  int RequestDataDescription(vtkCPDataDescription* d) override {
    return run(false, d, [&] { return inner_->RequestDataDescription(d); });
  }
  int CoProcess(vtkCPDataDescription* d) override {
    return run(true, d, [&] { return inner_->CoProcess(d); });
  }
  int Finalize() override {
    const int ok = inner_->Finalize();
    note(ok, "finalising it", true);
    return ok;
  }

 private:
  int run(bool zero_fails, vtkCPDataDescription* d, const std::function<int()>& call) {
    const int result = call();
    note(result, "step " + std::to_string(d->GetTimeStep()), zero_fails);
    return result;
  }
  void note(int result, const std::string& what, bool zero_fails) {
    std::string errors = trimmed(output_->take_errors());
    if (errors.empty() && zero_fails && !result) errors = "the pipeline reported a failure";
    if (!errors.empty()) failures_->push_back({script_, what, errors});
  }

  vtkSmartPointer<vtkCPPipeline> inner_;
  std::string script_;
  CapturingOutputWindow* output_ = nullptr;
  std::vector<Failure>* failures_ = nullptr;
};
vtkStandardNewMacro(ReportingPipeline);

const char* file_extension(vtkDataObject* data) {
  switch (data->GetDataObjectType()) {
    case VTK_POLY_DATA:
      return "pvtp";
    case VTK_IMAGE_DATA:
      return "pvti";
    default:
      return "pvtu";
  }
}

// Without scripts: every channel, every call, as parallel VTK XML (one piece per rank, the
// summary file from rank 0) in OUTPUT/catalyst/<channel>_<step>.pvt?, and a <channel>.pvd
// index of the steps written so far that ParaView opens as a time series.
class WriterPipeline : public vtkCPPipeline {
 public:
  static WriterPipeline* New();
  APRON_VTK_TYPE(WriterPipeline, vtkCPPipeline);
  void configure(fs::path dir, MPI_Comm comm) {
    dir_ = std::move(dir);
    comm_ = comm;
  }

  int RequestDataDescription(vtkCPDataDescription* d) override {
    for (unsigned i = 0; i < d->GetNumberOfInputDescriptions(); ++i) {
      d->GetInputDescription(i)->AllFieldsOn();
      d->GetInputDescription(i)->GenerateMeshOn();
    }
    return 1;
  }

  int CoProcess(vtkCPDataDescription* d) override {
    on_root(comm_, [&] { make_output_directory(dir_); });
    for (unsigned i = 0; i < d->GetNumberOfInputDescriptions(); ++i) {
      vtkDataObject* grid = d->GetInputDescription(i)->GetGrid();
      if (grid == nullptr) continue;
      char step[32];
      std::snprintf(step, sizeof step, "_%06lld", static_cast<long long>(d->GetTimeStep()));
      const std::string channel = d->GetInputDescriptionName(i);
      const std::string file = channel + step + "." + file_extension(grid);
      // A producer that knows the whole extent: the summary file of an image's pieces
      // describes the global grid, not rank 0's piece.
      vtkNew<vtkTrivialProducer> producer;
      producer->SetOutput(grid);
      if (grid->GetDataObjectType() == VTK_IMAGE_DATA)
        producer->SetWholeExtent(d->GetInputDescription(i)->GetWholeExtent());
      vtkNew<vtkXMLPDataSetWriter> writer;
      writer->SetInputConnection(producer->GetOutputPort());
      writer->SetFileName((dir_ / file).c_str());
      writer->SetController(vtkMultiProcessController::GetGlobalController());
      writer->SetNumberOfPieces(size_of(comm_));
      writer->SetStartPiece(rank_of(comm_));
      writer->SetEndPiece(rank_of(comm_));
      writer->SetDataModeToAppended();
      writer->EncodeAppendedDataOff();  // raw binary: the fastest to write and to read
      writer->SetCompressorTypeToNone();
      if (!writer->Write()) return 0;
      add_to_index(channel, d->GetTime(), file);
    }
    return 1;
  }

 private:
  void add_to_index(const std::string& channel, double time, const std::string& file) {
    if (rank_of(comm_) != 0) return;
    auto& entries = index_[channel];
    entries.emplace_back(time, file);
    std::string xml = "<?xml version=\"1.0\"?>\n<VTKFile type=\"Collection\" version=\"0.1\">\n";
    xml += "  <Collection>\n";
    for (const auto& [t, name] : entries) {
      char line[64];
      std::snprintf(line, sizeof line, "%.17g", t);
      xml += "    <DataSet timestep=\"" + std::string(line) + "\" part=\"0\" file=\"" + name +
             "\"/>\n";
    }
    xml += "  </Collection>\n</VTKFile>\n";
    write_file_atomically(dir_ / (channel + ".pvd"), xml);
  }

  fs::path dir_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::map<std::string, std::vector<std::pair<double, std::string>>> index_;
};
vtkStandardNewMacro(WriterPipeline);

// ---- apron's arrays as VTK arrays, without copying -------------------------------------------

template <class T>
vtkSmartPointer<vtkDataArray> borrow(const HostField& f, std::size_t tuples) {
  auto array = vtkSmartPointer<vtkAOSDataArrayTemplate<T>>::New();
  array->SetName(f.name.c_str());
  array->SetNumberOfComponents(f.components);
  // save = 1: VTK never frees the memory, which the workload owns.
  array->SetArray(const_cast<T*>(static_cast<const T*>(f.data)),
                  static_cast<vtkIdType>(tuples * f.components), 1);
  return array;
}

vtkSmartPointer<vtkDataArray> borrow(const HostField& f, std::size_t tuples) {
  switch (f.type) {
    case Dtype::f32:
      return borrow<float>(f, tuples);
    case Dtype::f64:
      return borrow<double>(f, tuples);
    case Dtype::i32:
      return borrow<vtkTypeInt32>(f, tuples);
    case Dtype::u32:
      return borrow<vtkTypeUInt32>(f, tuples);
    case Dtype::i64:
      return borrow<vtkTypeInt64>(f, tuples);
    case Dtype::u8:
      return borrow<vtkTypeUInt8>(f, tuples);
  }
  throw std::invalid_argument("catalyst: unknown Dtype of field '" + f.name + "'");
}

bool is_geometry(const VisualBlock& b, const HostField& f) {
  return b.kind != VisualBlock::Kind::image && f.name == "position";
}

void add_fields(const VisualBlock& b, vtkDataSet* data) {
  for (const HostField& f : b.point_fields)
    if (!is_geometry(b, f)) data->GetPointData()->AddArray(borrow(f, b.points));
  for (const HostField& f : b.cell_fields) data->GetCellData()->AddArray(borrow(f, b.cells));
}

vtkSmartPointer<vtkPoints> borrow_points(const VisualBlock& b) {
  for (const HostField& f : b.point_fields) {
    if (!is_geometry(b, f)) continue;
    if (f.components != 3 || (f.type != Dtype::f32 && f.type != Dtype::f64))
      throw std::invalid_argument("catalyst: channel '" + b.channel +
                                  "': 'position' must be 3 floats or doubles per point");
    auto points = vtkSmartPointer<vtkPoints>::New();
    points->SetData(borrow(f, b.points));
    return points;
  }
  throw std::invalid_argument("catalyst: channel '" + b.channel + "' has no 'position' field");
}

// Vertex cells 0..n-1 for n particles: offsets 0..n and connectivity 0..n-1 are both views of
// one ascending sequence, grown when needed, so no call allocates for them.
class VertexCells {
 public:
  vtkSmartPointer<vtkCellArray> cells(std::size_t n) {
    if (ids_.size() < n + 1) {
      ids_.resize(n + 1);
      std::iota(ids_.begin(), ids_.end(), vtkIdType{0});
    }
    auto offsets = vtkSmartPointer<vtkIdTypeArray>::New();
    auto connectivity = vtkSmartPointer<vtkIdTypeArray>::New();
    offsets->SetArray(ids_.data(), static_cast<vtkIdType>(n + 1), 1);
    connectivity->SetArray(ids_.data(), static_cast<vtkIdType>(n), 1);
    auto cells = vtkSmartPointer<vtkCellArray>::New();
    cells->SetData(offsets, connectivity);
    return cells;
  }

 private:
  std::vector<vtkIdType> ids_;
};

vtkSmartPointer<vtkDataObject> make_grid(const VisualBlock& b, VertexCells& vertices) {
  switch (b.kind) {
    case VisualBlock::Kind::points: {
      auto poly = vtkSmartPointer<vtkPolyData>::New();
      poly->SetPoints(borrow_points(b));
      poly->SetVerts(vertices.cells(b.points));
      add_fields(b, poly);
      return poly;
    }
    case VisualBlock::Kind::image: {
      auto image = vtkSmartPointer<vtkImageData>::New();
      std::array<int, 6> extent = b.extent;  // VTK takes int*, not const int*
      image->SetExtent(extent.data());
      image->SetOrigin(b.origin.data());
      image->SetSpacing(b.spacing.data());
      add_fields(b, image);
      return image;
    }
    case VisualBlock::Kind::mesh: {
      auto mesh = vtkSmartPointer<vtkUnstructuredGrid>::New();
      mesh->SetPoints(borrow_points(b));
      const HostField connectivity{"connectivity", Dtype::i64, 1, b.connectivity};
      auto cells = vtkSmartPointer<vtkCellArray>::New();
      cells->SetData(b.points_per_cell, borrow(connectivity, b.cells * b.points_per_cell));
      mesh->SetCells(b.cell_type, cells);
      add_fields(b, mesh);
      return mesh;
    }
  }
  throw std::invalid_argument("catalyst: unknown kind of channel '" + b.channel + "'");
}

// ---- the runtime ----------------------------------------------------------------------------

class ParaViewRuntime final : public CatalystRuntime {
 public:
  ParaViewRuntime(MPI_Comm comm, CatalystSettings settings);
  ~ParaViewRuntime() override;
  ParaViewRuntime(const ParaViewRuntime&) = delete;
  ParaViewRuntime& operator=(const ParaViewRuntime&) = delete;

  void execute(long step, double time, std::span<const VisualBlock> blocks) override;
  std::string take_failures() override;

 private:
  void add_script(const std::string& script);
  void add_writer();

  MPI_Comm comm_ = MPI_COMM_NULL;
  CatalystSettings settings_;
  vtkSmartPointer<CapturingOutputWindow> output_;
  vtkSmartPointer<vtkCPProcessor> processor_;
  vtkSmartPointer<vtkCPDataDescription> description_;
  std::vector<Failure> failures_;             // this call's, on this rank
  std::map<std::string, long> failed_calls_;  // per script, for shorter repeated reports
  VertexCells vertices_;
};

ParaViewRuntime::ParaViewRuntime(MPI_Comm comm, CatalystSettings settings)
    : comm_(comm), settings_(std::move(settings)) {
  quiet_vtk_logger();
  processor_ = vtkSmartPointer<vtkCPProcessor>::New();
  vtkMPICommunicatorOpaqueComm opaque(&comm_);
  on_root(comm_, [&] { make_output_directory(settings_.output_dir); });
  // Relative paths in scripts (extract folders) resolve against the run's output folder.
  if (!processor_->Initialize(opaque, fs::absolute(settings_.output_dir).c_str()))
    throw std::runtime_error("catalyst: ParaView's in-situ runtime did not start");
  // After Initialize, which installs ParaView's own output window.
  output_ = vtkSmartPointer<CapturingOutputWindow>::New();
  output_->print_text(rank_of(comm_) == 0);
  output_->set_rank(rank_of(comm_));
  vtkOutputWindow::SetInstance(output_);
  for (const std::string& script : settings_.scripts) add_script(script);
  if (settings_.scripts.empty()) add_writer();
  description_ = vtkSmartPointer<vtkCPDataDescription>::New();
}

ParaViewRuntime::~ParaViewRuntime() {
  processor_->Finalize();
  processor_ = nullptr;  // deleted here, while MPI is still up
  failures_.clear();
  vtkOutputWindow::SetInstance(nullptr);
  vtkLogger::RemoveCallback(kLoggerCallback);
}

void ParaViewRuntime::add_script(const std::string& script) {
  // Scripts with no "script-version" marker are taken as ParaView 5.9+ ones (a plain module
  // defining catalyst_execute(info)); the GUI's exports carry "# script-version: 2".
  vtkSmartPointer<vtkCPPythonPipeline> pipeline =
      vtkCPPythonPipeline::CreateAndInitializePipeline(script.c_str(), 2);
  std::string errors = trimmed(output_->take_errors());
  if (!pipeline) {
    if (errors.empty()) errors = "ParaView could not load it as a Catalyst script";
    failures_.push_back({script, "loading it", errors});
    return;
  }
  if (!errors.empty()) failures_.push_back({script, "loading it", errors});
  auto reporting = vtkSmartPointer<ReportingPipeline>::New();
  reporting->wrap(pipeline, script, output_, &failures_);
  processor_->AddPipeline(reporting);
}

void ParaViewRuntime::add_writer() {
  auto writer = vtkSmartPointer<WriterPipeline>::New();
  writer->configure(settings_.output_dir / "catalyst", comm_);
  auto reporting = vtkSmartPointer<ReportingPipeline>::New();
  reporting->wrap(writer, "the built-in writer pipeline", output_, &failures_);
  processor_->AddPipeline(reporting);
}

std::string ParaViewRuntime::take_failures() {
  std::string text;
  for (const Failure& f : failures_) {
    const long earlier = failed_calls_[f.script]++;
    if (earlier == 0 || f.what == "loading it") {
      text += "catalyst: script " + f.script + " failed (" + f.what + "):\n" + f.text + "\n";
    } else {  // the traceback was shown the first time; now its last line
      const std::size_t last_line = f.text.find_last_of('\n');
      text += "catalyst: script " + f.script + " failed again (" + f.what + ", " +
              std::to_string(earlier + 1) + " failures): " +
              (last_line == std::string::npos ? f.text : f.text.substr(last_line + 1)) + "\n";
    }
  }
  failures_.clear();
  const std::string warnings = trimmed(output_->take_warnings());
  if (!warnings.empty() && !is_harmless(warnings) && rank_of(comm_) == 0)
    std::fprintf(stderr, "warning: catalyst: %s\n", warnings.c_str());
  return trimmed(text);
}

void ParaViewRuntime::execute(long step, double time, std::span<const VisualBlock> blocks) {
  vtkCPDataDescription* d = description_;
  for (const VisualBlock& b : blocks)
    if (d->GetInputDescriptionByName(b.channel.c_str()) == nullptr) d->AddInput(b.channel.c_str());
  d->SetTimeData(time, step);
  if (!processor_->RequestDataDescription(d)) return;
  std::vector<vtkSmartPointer<vtkDataObject>> grids;  // alive until CoProcess returns
  for (const VisualBlock& b : blocks) {
    vtkCPInputDataDescription* input = d->GetInputDescriptionByName(b.channel.c_str());
    if (!input->GetIfGridIsNecessary()) continue;
    grids.push_back(make_grid(b, vertices_));
    if (b.kind == VisualBlock::Kind::image) {
      std::array<int, 6> whole = b.whole_extent;
      input->SetWholeExtent(whole.data());
    }
    input->SetGrid(grids.back());
  }
  processor_->CoProcess(d);
}

}  // namespace

}  // namespace apron::io

extern "C" apron::io::CatalystRuntime* apron_make_catalyst_runtime(
    MPI_Comm comm, const apron::io::CatalystSettings& settings) {
  return new apron::io::ParaViewRuntime(comm, settings);
}
static_assert(std::is_same_v<decltype(apron_make_catalyst_runtime), apron::io::MakeCatalystRuntime>,
              "the entry point the adaptor looks up");
