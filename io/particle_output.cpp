// Particle series output (see particle_output.hpp): one parallel-HDF5 file per step, written
// collectively by every rank under a .tmp name and renamed by rank 0, plus an XDMF index that
// rank 0 rewrites after every step.
//
// Error policy: a failure on one rank must become an exception on *every* rank, or the ranks
// that did not fail would wait forever in the next collective call. So each phase of write()
// ends in agree() (io/hdf5_file.hpp), which hands the first failing rank's message to all ranks.
#include "io/particle_output.hpp"

#include <hdf5.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include "io/atomic_file.hpp"
#include "io/hdf5_file.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

// ---- checking the arguments ----------------------------------------------------------------

// FNV-1a, because the same bytes must hash the same on every rank (std::hash promises nothing).
std::uint64_t hash_bytes(std::uint64_t h, const void* bytes, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<const unsigned char*>(bytes)[i];
    h *= 1099511628211ull;
  }
  return h;
}

template <class T>
std::uint64_t hash_value(std::uint64_t h, const T& value) {
  return hash_bytes(h, &value, sizeof value);
}

// Collective. Attributes and dataset layouts are file metadata, which parallel HDF5 requires to
// be identical on all ranks (else the file is silently corrupt), so compare a hash of them. The
// verdict is the same on every rank, so all ranks throw together.
void check_same_on_all_ranks(MPI_Comm comm, long step, double time,
                             std::span<const HostField> fields) {
  std::uint64_t h = 14695981039346656037ull;
  h = hash_value(hash_value(hash_value(h, step), std::bit_cast<std::uint64_t>(time)),
                 fields.size());
  for (const HostField& f : fields) {
    h = hash_bytes(hash_value(h, f.name.size()), f.name.data(), f.name.size());
    h = hash_value(hash_value(h, f.type), f.components);
  }
  std::array<std::uint64_t, 2> max_and_inverted_min{h, ~h};
  MPI_Allreduce(MPI_IN_PLACE, max_and_inverted_min.data(), 2, MPI_UINT64_T, MPI_MAX, comm);
  if (max_and_inverted_min[0] != ~max_and_inverted_min[1]) {
    throw std::logic_error(
        "ParticleSeriesWriter::write: ranks passed different steps, times or field lists");
  }
}

// Same verdict on every rank, since check_same_on_all_ranks has run first.
void check_fields(std::span<const HostField> fields) {
  std::set<std::string_view> names;
  bool geometry = false;
  for (const HostField& f : fields) {
    if (f.name.empty() || f.name == "." || f.name.find('/') != std::string::npos) {
      throw std::invalid_argument("ParticleSeriesWriter::write: '" + f.name +
                                  "' cannot be a dataset name");
    }
    if (!names.insert(f.name).second || f.components < 1) {
      throw std::invalid_argument("ParticleSeriesWriter::write: field '" + f.name +
                                  "' is given twice or has no components");
    }
    if (f.name == "position") geometry = f.components == 3;
  }
  if (!geometry) {
    throw std::invalid_argument(
        "ParticleSeriesWriter::write: needs a 3-component 'position' field (the geometry)");
  }
}

// Local check (a null pointer with data to write); the caller shares the outcome via agree().
std::string missing_data(std::size_t n_local, std::span<const HostField> fields) {
  for (const HostField& f : fields) {
    if (n_local > 0 && f.data == nullptr) {
      return "ParticleSeriesWriter::write: field '" + f.name + "' has no data";
    }
  }
  return {};
}

// ---- XDMF ------------------------------------------------------------------------------------

std::string step_file_name(const std::string& basename, long step) {
  std::array<char, 32> digits{};
  std::snprintf(digits.data(), digits.size(), "_%06ld.h5", step);
  return basename + digits.data();
}

std::string xml_escaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Shortest text that reads back as the same double, so the index's times match the files'.
std::string exact_text(double value) {
  std::array<char, 32> text{};
  const auto end = std::to_chars(text.data(), text.data() + text.size(), value).ptr;
  return std::string(text.data(), end);
}

std::string number_type(Dtype type) {
  switch (type) {
    case Dtype::f32:
      return R"(NumberType="Float" Precision="4")";
    case Dtype::f64:
      return R"(NumberType="Float" Precision="8")";
    case Dtype::i32:
      return R"(NumberType="Int" Precision="4")";
    case Dtype::u32:
      return R"(NumberType="UInt" Precision="4")";
    case Dtype::i64:
      return R"(NumberType="Int" Precision="8")";
    case Dtype::u8:
      return R"(NumberType="UChar" Precision="1")";
  }
  throw std::invalid_argument("ParticleSeriesWriter: unknown Dtype");
}

const char* attribute_type(int components) {
  switch (components) {
    case 1:
      return "Scalar";
    case 3:
      return "Vector";
    case 6:
      return "Tensor6";
    case 9:
      return "Tensor";
    default:
      return "Matrix";
  }
}

// The HDF5 path is relative ("file.h5:/name"): the index sits beside the files, so the output
// folder can be moved or copied as a whole.
std::string data_item(const std::string& file, unsigned long long global, const std::string& name,
                      Dtype type, int components) {
  std::string dims = std::to_string(global);
  // ' ', not " ": g++ 12 -O2 falsely warns (-Wrestrict) on "literal" + std::string&&.
  if (components != 1) dims += ' ' + std::to_string(components);
  return R"(<DataItem Dimensions=")" + dims + "\" " + number_type(type) + R"( Format="HDF">)" +
         xml_escaped(file) + ":/" + xml_escaped(name) + "</DataItem>";
}

// One uniform grid of the temporal collection. `entry` is a ParticleSeriesWriter::Entry (a
// private type, hence auto).
std::string xdmf_grid(const auto& entry) {
  const std::string n = std::to_string(entry.global);
  const std::string grid_name = fs::path(entry.file).stem().string();
  std::string xml = "      <Grid Name=\"" + xml_escaped(grid_name) + "\" GridType=\"Uniform\">\n";
  xml += "        <Time Value=\"" + exact_text(entry.time) + "\"/>\n";
  xml += "        <Topology TopologyType=\"Polyvertex\" NumberOfElements=\"" + n +
         "\" NodesPerElement=\"1\"/>\n";
  for (const auto& [name, layout] : entry.fields) {
    const std::string item = data_item(entry.file, entry.global, name, layout.first, layout.second);
    if (name == "position") {
      xml +=
          "        <Geometry GeometryType=\"XYZ\">\n          " + item + "\n        </Geometry>\n";
    } else {
      xml += "        <Attribute Name=\"" + xml_escaped(name) + "\" AttributeType=\"" +
             attribute_type(layout.second) + "\" Center=\"Node\">\n          " + item +
             "\n        </Attribute>\n";
    }
  }
  return xml + "      </Grid>\n";
}

std::string xdmf_series(const std::string& basename, const auto& entries) {
  std::string xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Xdmf Version=\"3.0\">\n";
  xml += "  <Domain>\n    <Grid Name=\"" + xml_escaped(basename) +
         "\" GridType=\"Collection\" CollectionType=\"Temporal\">\n";
  for (const auto& entry : entries) xml += xdmf_grid(entry);
  return xml + "    </Grid>\n  </Domain>\n</Xdmf>\n";
}

}  // namespace

ParticleSeriesWriter::ParticleSeriesWriter(MPI_Comm comm, std::filesystem::path dir,
                                           std::string basename)
    : comm_(comm),
      dir_(std::move(dir)),
      basename_(std::move(basename)),
      xmf_path_(dir_ / (basename_ + ".xmf")) {}

void ParticleSeriesWriter::write(long step, double time, std::size_t n_local,
                                 std::span<const HostField> fields) {
  check_same_on_all_ranks(comm_, step, time, fields);
  check_fields(fields);
  agree(comm_, missing_data(n_local, fields));
  on_root(comm_, [&] { make_output_directory(dir_); });

  Entry entry{step, time, step_file_name(basename_, step), 0, {}};
  const fs::path path = dir_ / entry.file;
  const Slab slab = slab_of(comm_, n_local);
  entry.global = slab.global;
  for (const HostField& f : fields) entry.fields.push_back({f.name, {f.type, f.components}});
  write_atomically(comm_, path, [&](Hdf5File& file) {
    file.attribute("step", std::int64_t{step});
    file.attribute("time", time);
    file.attribute("ranks", std::int64_t{size_of(comm_)});
    for (const HostField& field : fields) file.dataset(field, slab);
  });

  // A step written again (say, a final output on a regular output step) replaces its entry.
  const auto same_step = std::find_if(entries_.begin(), entries_.end(),
                                      [&](const Entry& e) { return e.step == step; });
  if (same_step != entries_.end()) {
    *same_step = std::move(entry);
  } else {
    entries_.push_back(std::move(entry));
  }
  on_root(comm_, [&] { write_file_atomically(xmf_path_, xdmf_series(basename_, entries_)); });
}

void ParticleSeriesWriter::resume(long step) {
  entries_.clear();
  on_root(comm_, [&] {
    const QuietHdf5Errors quiet;
    const std::string prefix = basename_ + "_";
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(dir_, ec)) {
      const std::string name = item.path().filename().string();
      if (name.rfind(prefix, 0) != 0 || item.path().extension() != ".h5") continue;
      const Hdf5File file = Hdf5File::open_serial(item.path());
      Entry entry{file.integer("step"), file.real("time"), name, 0, {}};
      if (entry.step > step) continue;
      for (const std::string& set : file.datasets("/")) {
        const DatasetInfo info = file.info(set);
        entry.global = info.rows;
        entry.fields.push_back({set.substr(1), {info.type, info.components}});
      }
      entries_.push_back(std::move(entry));
    }
    std::sort(entries_.begin(), entries_.end(),
              [](const Entry& a, const Entry& b) { return a.step < b.step; });
    if (!entries_.empty()) write_file_atomically(xmf_path_, xdmf_series(basename_, entries_));
  });
}

}  // namespace apron::io
