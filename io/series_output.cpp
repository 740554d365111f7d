// Visual output series (see series_output.hpp): one parallel-HDF5 file per step, written
// collectively by every rank under a .tmp name and renamed by rank 0, plus an XDMF index that
// rank 0 rewrites after every step.
//
// Error policy: a failure on one rank must become an exception on *every* rank, or the ranks
// that did not fail would wait forever in the next collective call. So each phase of write()
// ends in agree() (io/hdf5_file.hpp), which hands the first failing rank's message to all ranks.
//
// Step file layout (root attributes step, time, ranks, kind):
//   points: one dataset per field at the root ("position" the geometry).
//   mesh:   vertex fields at the root, /triangles (int64 [n, 3], global vertex numbers),
//           per-triangle fields under /triangle_fields.
//   bricks: fields at the root (every brick's values one after the other), and per brick
//           /bricks/origin, /bricks/spacing (float64 [b, 3]), /bricks/dims (int64 [b, 3]) and
//           /bricks/first (int64 [b], the row of its first value); attribute cell_data.
#include "io/series_output.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

#include "io/atomic_file.hpp"

namespace apron::io {
namespace {

namespace fs = std::filesystem;

using FieldLayout = std::pair<std::string, std::pair<Dtype, int>>;
using Layouts = std::vector<FieldLayout>;

// The bytes `rows` rows of these fields take in a file.
std::uint64_t bytes_of(std::span<const HostField> fields, std::size_t rows) {
  std::uint64_t row = 0;
  for (const HostField& f : fields)
    row += dtype_size(f.type) * static_cast<std::uint64_t>(f.components);
  return row * rows;
}

Layouts layouts_of(std::span<const HostField> fields) {
  Layouts out;
  for (const HostField& f : fields) out.push_back({f.name, {f.type, f.components}});
  return out;
}

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

std::uint64_t hash_fields(std::uint64_t h, std::span<const HostField> fields) {
  h = hash_value(h, fields.size());
  for (const HostField& f : fields) {
    h = hash_bytes(hash_value(h, f.name.size()), f.name.data(), f.name.size());
    h = hash_value(hash_value(h, f.type), f.components);
  }
  return h;
}

// Collective. Attributes and dataset layouts are file metadata, which parallel HDF5 requires to
// be identical on all ranks (else the file is silently corrupt), so compare a hash of them. The
// verdict is the same on every rank, so all ranks throw together.
void check_same_on_all_ranks(MPI_Comm comm, long step, double time, int kind,
                             std::span<const HostField> a, std::span<const HostField> b = {},
                             bool flag = false) {
  std::uint64_t h = 14695981039346656037ull;
  h = hash_value(hash_value(hash_value(h, step), std::bit_cast<std::uint64_t>(time)), kind);
  h = hash_value(hash_fields(hash_fields(h, a), b), flag);
  std::array<std::uint64_t, 2> max_and_inverted_min{h, ~h};
  MPI_Allreduce(MPI_IN_PLACE, max_and_inverted_min.data(), 2, MPI_UINT64_T, MPI_MAX, comm);
  if (max_and_inverted_min[0] != ~max_and_inverted_min[1]) {
    throw std::logic_error(
        "SeriesWriter::write: ranks passed different steps, times or field lists");
  }
}

// Same verdict on every rank, since check_same_on_all_ranks has run first.
void check_fields(std::span<const HostField> fields, bool needs_position,
                  std::set<std::string_view> names = {}) {
  bool geometry = false;
  for (const HostField& f : fields) {
    if (f.name.empty() || f.name == "." || f.name.find('/') != std::string::npos) {
      throw std::invalid_argument("SeriesWriter::write: '" + f.name + "' cannot be a dataset name");
    }
    if (!names.insert(f.name).second || f.components < 1) {
      throw std::invalid_argument("SeriesWriter::write: field '" + f.name +
                                  "' is given twice, is reserved or has no components");
    }
    if (f.name == "position") geometry = f.components == 3;
  }
  if (needs_position && !geometry) {
    throw std::invalid_argument(
        "SeriesWriter::write: needs a 3-component 'position' field (the geometry)");
  }
}

// Local check (a null pointer with data to write); the caller shares the outcome via agree().
std::string missing_data(std::size_t n_local, std::span<const HostField> fields) {
  for (const HostField& f : fields) {
    if (n_local > 0 && f.data == nullptr) {
      return "SeriesWriter::write: field '" + f.name + "' has no data";
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
  throw std::invalid_argument("SeriesWriter: unknown Dtype");
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

std::string grid_name(const std::string& file) {
  return fs::path(file).stem().string();
}

std::string attributes_xml(const std::string& file, unsigned long long rows, const Layouts& fields,
                           const std::string& prefix, const char* center) {
  std::string xml;
  for (const auto& [name, layout] : fields) {
    if (name == "position" && std::string_view(center) == "Node") continue;
    const std::string item = data_item(file, rows, prefix + name, layout.first, layout.second);
    xml += "        <Attribute Name=\"" + xml_escaped(name) + "\" AttributeType=\"" +
           attribute_type(layout.second) + "\" Center=\"" + center + "\">\n          " + item +
           "\n        </Attribute>\n";
  }
  return xml;
}

std::string geometry_xml(const std::string& file, unsigned long long rows, const Layouts& fields) {
  for (const auto& [name, layout] : fields)
    if (name == "position")
      return "        <Geometry GeometryType=\"XYZ\">\n          " +
             data_item(file, rows, name, layout.first, layout.second) + "\n        </Geometry>\n";
  return {};
}

std::string points_grid(const std::string& file, double time, unsigned long long global,
                        const Layouts& fields) {
  const std::string n = std::to_string(global);
  std::string xml =
      "      <Grid Name=\"" + xml_escaped(grid_name(file)) + "\" GridType=\"Uniform\">\n";
  xml += "        <Time Value=\"" + exact_text(time) + "\"/>\n";
  xml += "        <Topology TopologyType=\"Polyvertex\" NumberOfElements=\"" + n +
         "\" NodesPerElement=\"1\"/>\n";
  // The geometry first, then the attributes in the order given (as the files list them).
  xml += geometry_xml(file, global, fields);
  xml += attributes_xml(file, global, fields, "", "Node");
  return xml + "      </Grid>\n";
}

std::string mesh_grid(const std::string& file, double time, unsigned long long vertices,
                      unsigned long long triangles, const Layouts& vertex_fields,
                      const Layouts& triangle_fields) {
  std::string xml =
      "      <Grid Name=\"" + xml_escaped(grid_name(file)) + "\" GridType=\"Uniform\">\n";
  xml += "        <Time Value=\"" + exact_text(time) + "\"/>\n";
  xml += "        <Topology TopologyType=\"Triangle\" NumberOfElements=\"" +
         std::to_string(triangles) + "\">\n          " +
         data_item(file, triangles, "triangles", Dtype::i64, 3) + "\n        </Topology>\n";
  xml += geometry_xml(file, vertices, vertex_fields);
  xml += attributes_xml(file, vertices, vertex_fields, "", "Node");
  xml += attributes_xml(file, triangles, triangle_fields, "triangle_fields/", "Cell");
  return xml + "      </Grid>\n";
}

struct BrickMeta {
  ImageBrick brick;
  std::int64_t first = 0;
};

std::string zyx(const std::array<double, 3>& v) {
  return exact_text(v[2]) + " " + exact_text(v[1]) + " " + exact_text(v[0]);
}

// A brick's values: rows [first, first + count) of the field's dataset, shaped z, y, x.
std::string brick_item(const std::string& file, unsigned long long total, const BrickMeta& b,
                       const std::string& name, Dtype type, int components) {
  const auto& d = b.brick.dims;
  const long long count = d[0] * d[1] * d[2];
  std::string shape =
      std::to_string(d[2]) + " " + std::to_string(d[1]) + " " + std::to_string(d[0]);
  std::string selection;
  std::string selection_dims;
  if (components == 1) {
    selection_dims = "3 1";
    selection = std::to_string(b.first) + " 1 " + std::to_string(count);
  } else {
    shape += ' ' + std::to_string(components);
    selection_dims = "3 2";
    selection = std::to_string(b.first) + " 0 1 1 " + std::to_string(count) + ' ' +
                std::to_string(components);
  }
  return "<DataItem ItemType=\"HyperSlab\" Dimensions=\"" + shape + "\" Type=\"HyperSlab\">\n" +
         "              <DataItem Dimensions=\"" + selection_dims + "\" Format=\"XML\">" +
         selection + "</DataItem>\n              " +
         data_item(file, total, name, type, components) + "\n            </DataItem>";
}

std::string bricks_grid(const std::string& file, double time, unsigned long long total,
                        const std::vector<BrickMeta>& bricks, const Layouts& fields,
                        bool cell_data) {
  std::string xml = "      <Grid Name=\"" + xml_escaped(grid_name(file)) +
                    "\" GridType=\"Collection\" CollectionType=\"Spatial\">\n";
  xml += "        <Time Value=\"" + exact_text(time) + "\"/>\n";
  for (std::size_t i = 0; i < bricks.size(); ++i) {
    const BrickMeta& b = bricks[i];
    const auto& d = b.brick.dims;
    const int plus = cell_data ? 1 : 0;
    xml += "        <Grid Name=\"brick_" + std::to_string(i) + "\" GridType=\"Uniform\">\n";
    xml += "          <Topology TopologyType=\"3DCoRectMesh\" Dimensions=\"" +
           std::to_string(d[2] + plus) + " " + std::to_string(d[1] + plus) + " " +
           std::to_string(d[0] + plus) + "\"/>\n";
    xml += "          <Geometry GeometryType=\"ORIGIN_DXDYDZ\">\n";
    xml +=
        "            <DataItem Dimensions=\"3\" NumberType=\"Float\" Precision=\"8\" "
        "Format=\"XML\">" +
        zyx(b.brick.origin) + "</DataItem>\n";
    xml +=
        "            <DataItem Dimensions=\"3\" NumberType=\"Float\" Precision=\"8\" "
        "Format=\"XML\">" +
        zyx(b.brick.spacing) + "</DataItem>\n";
    xml += "          </Geometry>\n";
    for (const auto& [name, layout] : fields) {
      xml += "          <Attribute Name=\"" + xml_escaped(name) + "\" AttributeType=\"" +
             attribute_type(layout.second) + "\" Center=\"" + (cell_data ? "Cell" : "Node") +
             "\">\n            " + brick_item(file, total, b, name, layout.first, layout.second) +
             "\n          </Attribute>\n";
    }
    xml += "        </Grid>\n";
  }
  return xml + "      </Grid>\n";
}

std::string xdmf_series(const std::string& basename, const auto& entries) {
  std::string xml = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Xdmf Version=\"3.0\">\n";
  xml += "  <Domain>\n    <Grid Name=\"" + xml_escaped(basename) +
         "\" GridType=\"Collection\" CollectionType=\"Temporal\">\n";
  for (const auto& entry : entries) xml += entry.grid;
  return xml + "    </Grid>\n  </Domain>\n</Xdmf>\n";
}

void write_step_attributes(Hdf5File& file, MPI_Comm comm, long step, double time,
                           const char* kind) {
  file.attribute("step", std::int64_t{step});
  file.attribute("time", time);
  file.attribute("ranks", std::int64_t{size_of(comm)});
  file.attribute("kind", std::string(kind));
}

// Rank 0 gets every rank's items in rank order.
template <class T>
std::vector<T> gather_on_root(MPI_Comm comm, const std::vector<T>& mine) {
  const int bytes = static_cast<int>(mine.size() * sizeof(T));
  const int ranks = size_of(comm);
  std::vector<int> counts(ranks), displs(ranks);
  MPI_Gather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm);
  int total = 0;
  for (int r = 0; r < ranks; ++r) displs[r] = total, total += counts[r];
  std::vector<T> all(rank_of(comm) == 0 ? total / sizeof(T) : 0);
  MPI_Gatherv(mine.data(), bytes, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, 0,
              comm);
  return all;
}

template <class T>
std::vector<T> read_whole(const Hdf5File& file, const std::string& name, Dtype type) {
  const DatasetInfo info = file.info(name);
  std::vector<T> out(info.rows * static_cast<std::size_t>(info.components));
  file.read(name, type, 0, info.rows, out.data());
  return out;
}

Layouts layouts_in(const Hdf5File& file, const std::string& group, unsigned long long& rows,
                   const std::set<std::string>& skip = {}) {
  Layouts out;
  for (const std::string& set : file.datasets(group)) {
    const std::string name = set.substr(set.rfind('/') + 1);
    if (skip.count(name)) continue;
    const DatasetInfo info = file.info(set);
    rows = info.rows;
    out.push_back({name, {info.type, info.components}});
  }
  return out;
}

// The grid of a step file written earlier, from its metadata (and the small brick tables).
std::string grid_from_file(const Hdf5File& file, const std::string& name, double time) {
  const std::string kind = file.has_attribute("kind") ? file.text("kind") : "points";
  unsigned long long rows = 0;
  if (kind == "points") {
    const Layouts fields = layouts_in(file, "/", rows);
    return points_grid(name, time, rows, fields);
  }
  if (kind == "mesh") {
    const Layouts vertex_fields = layouts_in(file, "/", rows, {"triangles"});
    const unsigned long long triangles = file.info("/triangles").rows;
    unsigned long long ignored = 0;
    const Layouts triangle_fields = file.has_group("/triangle_fields")
                                        ? layouts_in(file, "/triangle_fields", ignored)
                                        : Layouts{};
    return mesh_grid(name, time, rows, triangles, vertex_fields, triangle_fields);
  }
  if (kind == "bricks") {
    const Layouts fields = layouts_in(file, "/", rows);
    const auto origin = read_whole<double>(file, "/bricks/origin", Dtype::f64);
    const auto spacing = read_whole<double>(file, "/bricks/spacing", Dtype::f64);
    const auto dims = read_whole<std::int64_t>(file, "/bricks/dims", Dtype::i64);
    const auto first = read_whole<std::int64_t>(file, "/bricks/first", Dtype::i64);
    std::vector<BrickMeta> bricks(first.size());
    for (std::size_t i = 0; i < bricks.size(); ++i) {
      for (int d = 0; d < 3; ++d) {
        bricks[i].brick.origin[d] = origin.at(3 * i + d);
        bricks[i].brick.spacing[d] = spacing.at(3 * i + d);
        bricks[i].brick.dims[d] = dims.at(3 * i + d);
      }
      bricks[i].first = first[i];
    }
    return bricks_grid(name, time, rows, bricks, fields, file.integer("cell_data") != 0);
  }
  throw std::runtime_error(file.path() + ": unknown output kind '" + kind + "'");
}

}  // namespace

SeriesWriter::SeriesWriter(MPI_Comm comm, fs::path dir, std::string basename)
    : comm_(comm),
      dir_(std::move(dir)),
      basename_(std::move(basename)),
      xmf_path_(dir_ / (basename_ + ".xmf")) {}

void SeriesWriter::add(Entry entry) {
  // A step written again (say, a final output on a regular output step) replaces its entry.
  const auto same_step = std::find_if(entries_.begin(), entries_.end(),
                                      [&](const Entry& e) { return e.step == entry.step; });
  if (same_step != entries_.end()) {
    *same_step = std::move(entry);
  } else {
    entries_.push_back(std::move(entry));
  }
  on_root(comm_, [&] { write_file_atomically(xmf_path_, xdmf_series(basename_, entries_)); });
}

void SeriesWriter::write(long step, double time, const PointSetPart& points) {
  check_same_on_all_ranks(comm_, step, time, 0, points.fields);
  check_fields(points.fields, true);
  agree(comm_, missing_data(points.n_local, points.fields));
  on_root(comm_, [&] { make_output_directory(dir_); });

  const std::string name = step_file_name(basename_, step);
  const Slab slab = slab_of(comm_, points.n_local);
  write_atomically(
      comm_, dir_ / name,
      [&](Hdf5File& file) {
        write_step_attributes(file, comm_, step, time, "points");
        for (const HostField& field : points.fields) file.dataset(field, slab);
      },
      bytes_of(points.fields, points.n_local));
  add({step, time, points_grid(name, time, slab.global, layouts_of(points.fields))});
}

void SeriesWriter::write(long step, double time, const TriangleMeshPart& mesh) {
  check_same_on_all_ranks(comm_, step, time, 1, mesh.vertex_fields, mesh.triangle_fields);
  check_fields(mesh.vertex_fields, true, {"triangles", "triangle_fields"});
  check_fields(mesh.triangle_fields, false);
  agree(comm_, capture([&] {
          if (const std::string e = missing_data(mesh.vertices, mesh.vertex_fields); !e.empty())
            throw std::invalid_argument(e);
          if (const std::string e = missing_data(mesh.triangles, mesh.triangle_fields); !e.empty())
            throw std::invalid_argument(e);
          if (mesh.triangles > 0 && mesh.connectivity == nullptr)
            throw std::invalid_argument("SeriesWriter::write: triangles without connectivity");
          for (std::size_t i = 0; i < 3 * mesh.triangles; ++i)
            if (mesh.connectivity[i] >= mesh.vertices)
              throw std::invalid_argument(
                  "SeriesWriter::write: triangle " + std::to_string(i / 3) + " refers to vertex " +
                  std::to_string(mesh.connectivity[i]) + " of " + std::to_string(mesh.vertices) +
                  " on rank " + std::to_string(rank_of(comm_)));
        }));
  on_root(comm_, [&] { make_output_directory(dir_); });

  const std::string name = step_file_name(basename_, step);
  const Slab vertices = slab_of(comm_, mesh.vertices);
  const Slab triangles = slab_of(comm_, mesh.triangles);
  // Local vertex numbers become global ones: this rank's vertices follow those of lower ranks.
  std::vector<std::int64_t> global(3 * mesh.triangles);
  for (std::size_t i = 0; i < global.size(); ++i)
    global[i] = static_cast<std::int64_t>(vertices.offset + mesh.connectivity[i]);
  write_atomically(
      comm_, dir_ / name,
      [&](Hdf5File& file) {
        write_step_attributes(file, comm_, step, time, "mesh");
        for (const HostField& field : mesh.vertex_fields) file.dataset(field, vertices);
        file.dataset({"triangles", Dtype::i64, 3, global.data()}, triangles);
        file.group("triangle_fields");
        for (HostField field : mesh.triangle_fields) {
          field.name = "triangle_fields/" + field.name;
          file.dataset(field, triangles);
        }
      },
      bytes_of(mesh.vertex_fields, mesh.vertices) + bytes_of(mesh.triangle_fields, mesh.triangles) +
          24 * mesh.triangles);
  add({step, time,
       mesh_grid(name, time, vertices.global, triangles.global, layouts_of(mesh.vertex_fields),
                 layouts_of(mesh.triangle_fields))});
}

void SeriesWriter::write(long step, double time, const BrickSetPart& part) {
  check_same_on_all_ranks(comm_, step, time, 2, part.fields, {}, part.cell_data);
  check_fields(part.fields, false, {"bricks"});
  std::size_t rows = 0;
  agree(comm_, capture([&] {
          for (const ImageBrick& b : part.bricks) {
            for (int d = 0; d < 3; ++d)
              if (b.dims[d] < 1 || !std::isfinite(b.origin[d]) || !std::isfinite(b.spacing[d]) ||
                  b.spacing[d] <= 0)
                throw std::invalid_argument(
                    "SeriesWriter::write: a brick needs dims >= 1 and finite origin and "
                    "positive spacing");
            rows += static_cast<std::size_t>(b.dims[0] * b.dims[1] * b.dims[2]);
          }
          if (const std::string e = missing_data(rows, part.fields); !e.empty())
            throw std::invalid_argument(e);
        }));
  on_root(comm_, [&] { make_output_directory(dir_); });

  const std::string name = step_file_name(basename_, step);
  const Slab values = slab_of(comm_, rows);
  const Slab bricks = slab_of(comm_, part.bricks.size());
  std::vector<double> origin, spacing;
  std::vector<std::int64_t> dims, first;
  std::vector<BrickMeta> mine;
  std::int64_t row = static_cast<std::int64_t>(values.offset);
  for (const ImageBrick& b : part.bricks) {
    origin.insert(origin.end(), b.origin.begin(), b.origin.end());
    spacing.insert(spacing.end(), b.spacing.begin(), b.spacing.end());
    dims.insert(dims.end(), b.dims.begin(), b.dims.end());
    first.push_back(row);
    mine.push_back({b, row});
    row += b.dims[0] * b.dims[1] * b.dims[2];
  }
  write_atomically(
      comm_, dir_ / name,
      [&](Hdf5File& file) {
        write_step_attributes(file, comm_, step, time, "bricks");
        file.attribute("cell_data", std::int64_t{part.cell_data ? 1 : 0});
        for (const HostField& field : part.fields) file.dataset(field, values);
        file.group("bricks");
        file.dataset({"bricks/origin", Dtype::f64, 3, origin.data()}, bricks);
        file.dataset({"bricks/spacing", Dtype::f64, 3, spacing.data()}, bricks);
        file.dataset({"bricks/dims", Dtype::i64, 3, dims.data()}, bricks);
        file.dataset({"bricks/first", Dtype::i64, 1, first.data()}, bricks);
      },
      bytes_of(part.fields, rows) + 80 * part.bricks.size());
  const std::vector<BrickMeta> all = gather_on_root(comm_, mine);
  add({step, time,
       rank_of(comm_) == 0
           ? bricks_grid(name, time, values.global, all, layouts_of(part.fields), part.cell_data)
           : std::string{}});
}

void SeriesWriter::resume(long step, double time) {
  entries_.clear();
  on_root(comm_, [&] {
    const QuietHdf5Errors quiet;
    const std::string prefix = basename_ + "_";
    // A file is the checkpoint's past exactly when it is not later in simulated time: a
    // checkpoint whose step or time disagrees with the series (damaged, or resealed by hand)
    // would rewrite files of the earlier run, so it is refused before anything is written.
    const double slack = 1e-9 * std::max(1.0, std::abs(time));
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(dir_, ec)) {
      const std::string name = item.path().filename().string();
      if (name.rfind(prefix, 0) != 0 || item.path().extension() != ".h5") continue;
      const Hdf5File file = Hdf5File::open_serial(item.path());
      const long file_step = file.integer("step");
      const double file_time = file.real("time");
      const bool past = file_step <= step;
      if (past != (file_time <= time + slack) || (file_step == step && file_time < time - slack))
        throw std::runtime_error(
            "the checkpoint (step " + std::to_string(step) + ", t = " + std::to_string(time) +
            " s) disagrees with the output series on disk: " + item.path().string() +
            " holds step " + std::to_string(file_step) + " at t = " + std::to_string(file_time) +
            " s; the checkpoint is damaged or belongs to another run");
      if (past) entries_.push_back({file_step, file_time, grid_from_file(file, name, file_time)});
    }
    std::sort(entries_.begin(), entries_.end(),
              [](const Entry& a, const Entry& b) { return a.step < b.step; });
  });
}

std::vector<long> SeriesWriter::steps_on_disk() const {
  std::vector<long> steps;
  on_root(comm_, [&] {
    const std::string prefix = basename_ + "_";
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(dir_, ec)) {
      const std::string name = item.path().filename().string();
      if (name.rfind(prefix, 0) != 0 || item.path().extension() != ".h5") continue;
      const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - 3);
      long value = -1;
      const auto [end, error] =
          std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (error == std::errc{} && end == digits.data() + digits.size() && value >= 0)
        steps.push_back(value);
    }
    std::sort(steps.begin(), steps.end());
  });
  unsigned long n = steps.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG, 0, comm_);
  steps.resize(n);
  MPI_Bcast(steps.data(), static_cast<int>(n), MPI_LONG, 0, comm_);
  return steps;
}

}  // namespace apron::io
