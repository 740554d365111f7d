#include "io/mesh_reader.hpp"

#include "io/mesh_reader_detail.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string_view>

namespace apron::io {

namespace fs = std::filesystem;

namespace detail {

std::string read_whole_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw MeshReadError(file.string() + ": cannot open the mesh file (does it exist?)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string line_place(const fs::path& file, std::size_t line) {
  return file.string() + ":" + std::to_string(line);
}

std::string byte_place(const fs::path& file, std::size_t offset) {
  return file.string() + ": byte offset " + std::to_string(offset);
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const std::size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

// The device computes in float: a coordinate beyond its range would become infinite there.
constexpr double kFloatMax = std::numeric_limits<float>::max();

bool coordinates_ok(double x, double y, double z) {
  return std::fabs(x) <= kFloatMax && std::fabs(y) <= kFloatMax && std::fabs(z) <= kFloatMax;
}

void throw_bad_coordinates(double x, double y, double z, const std::string& place,
                           const std::string& what) {
  if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(z))
    throw MeshReadError(place + ": " + what +
                        " has a coordinate that is not a finite number (NaN or infinity)");
  throw MeshReadError(place + ": " + what +
                      " has a coordinate beyond the float range (3.4e38) apron computes in; "
                      "rescale the mesh");
}

MeshBuilder::MeshBuilder(fs::path file, const MeshReadOptions& options)
    : file_(std::move(file)), options_(options) {}

void MeshBuilder::add_vertex(double x, double y, double z, const std::string& place) {
  if (!coordinates_ok(x, y, z))
    throw_bad_coordinates(x, y, z, place, "vertex " + std::to_string(mesh_.vertices.size()));
  mesh_.vertices.push_back({x, y, z});
}

void MeshBuilder::add_polygon(const std::vector<long long>& indices, const std::string& place,
                              std::size_t vertex_total) {
  if (indices.size() < 3)
    throw MeshReadError(place + ": a face needs at least 3 vertices, this one has " +
                        std::to_string(indices.size()));
  for (long long i : indices)
    if (i < 0 || static_cast<unsigned long long>(i) >= vertex_total)
      throw MeshReadError(place + ": vertex index " + std::to_string(i) +
                          " is out of range (the mesh has " + std::to_string(vertex_total) +
                          " vertices, indices from 0)");
  ++mesh_.polygons;
  for (std::size_t k = 1; k + 1 < indices.size(); ++k)  // fan from the first corner
    add_triangle(static_cast<std::uint32_t>(indices[0]), static_cast<std::uint32_t>(indices[k]),
                 static_cast<std::uint32_t>(indices[k + 1]));
}

void MeshBuilder::add_facet(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  ++mesh_.polygons;
  add_triangle(a, b, c);
}

TriangleMesh MeshBuilder::finish() {
  if (mesh_.triangles.empty())
    throw MeshReadError(file_.string() + ": the mesh is empty (" +
                        std::to_string(mesh_.vertices.size()) + " vertices, " +
                        std::to_string(mesh_.polygons) + " faces, " +
                        std::to_string(mesh_.degenerate_skipped) +
                        " zero-area triangles skipped): no triangle to measure against");
  mesh_.vertices_read = mesh_.vertices.size();  // STL's welding overrides it
  return std::move(mesh_);
}

void MeshBuilder::add_triangle(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  if (zero_area(a, b, c)) {
    if (!options_.keep_degenerate) {
      ++mesh_.degenerate_skipped;
      return;
    }
    ++mesh_.degenerate_kept;
  }
  mesh_.triangles.push_back({a, b, c});
}

// Zero area in the float32 geometry the device uses (then it is zero in double as well).
bool MeshBuilder::zero_area(std::uint32_t a, std::uint32_t b, std::uint32_t c) const {
  if (a == b || b == c || a == c) return true;
  double e1[3], e2[3];
  for (int d = 0; d < 3; ++d) {
    const double pa = static_cast<float>(mesh_.vertices[a][d]);
    e1[d] = static_cast<float>(mesh_.vertices[b][d]) - pa;
    e2[d] = static_cast<float>(mesh_.vertices[c][d]) - pa;
  }
  const double cx = e1[1] * e2[2] - e1[2] * e2[1];
  const double cy = e1[2] * e2[0] - e1[0] * e2[2];
  const double cz = e1[0] * e2[1] - e1[1] * e2[0];
  return cx == 0 && cy == 0 && cz == 0;
}

}  // namespace detail

namespace {

using detail::byte_place;
using detail::line_place;
using detail::MeshBuilder;
using detail::parse_number;
using detail::read_whole_file;
using detail::split_words;

// Text split into lines, each with its 1-based number; '#' comments removed when asked.
struct Lines {
  std::vector<std::pair<std::size_t, std::string_view>> rows;  // (line number, content)
  static Lines of(std::string_view text, bool strip_comments) {
    Lines out;
    std::size_t number = 0, start = 0;
    while (start <= text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      ++number;
      std::string_view row = text.substr(start, end - start);
      if (strip_comments) row = row.substr(0, row.find('#'));
      if (!split_words(row).empty()) out.rows.emplace_back(number, row);
      start = end + 1;
    }
    return out;
  }
};

// ---- OBJ -------------------------------------------------------------------------------------

// "7", "7/2", "7//3", "-1/2/3": the vertex index, resolved to 0-based (negative counts back).
long long obj_index(std::string_view word, std::size_t vertices, const std::string& place) {
  const std::string_view first = word.substr(0, word.find('/'));
  long long i = 0;
  if (!parse_number(first, i) || i == 0)
    throw MeshReadError(place + ": '" + std::string(word) +
                        "' is not a vertex index (1-based, or negative to count back)");
  return i > 0 ? i - 1 : static_cast<long long>(vertices) + i;
}

}  // namespace

TriangleMesh read_obj(const fs::path& file, const MeshReadOptions& options) {
  const std::string text = read_whole_file(file);
  MeshBuilder mesh(file, options);
  for (const auto& [number, row] : Lines::of(text, true).rows) {
    const auto words = split_words(row);
    const std::string place = line_place(file, number);
    if (words[0] == "v") {
      double xyz[3];
      if (words.size() < 4)
        throw MeshReadError(place + ": a vertex needs 3 coordinates, found " +
                            std::to_string(words.size() - 1));
      for (int d = 0; d < 3; ++d)
        if (!parse_number(words[d + 1], xyz[d]))
          throw MeshReadError(place + ": '" + std::string(words[d + 1]) + "' is not a number");
      mesh.add_vertex(xyz[0], xyz[1], xyz[2], place);
    } else if (words[0] == "f") {
      std::vector<long long> indices;
      for (std::size_t k = 1; k < words.size(); ++k)
        indices.push_back(obj_index(words[k], mesh.vertex_count(), place));
      mesh.add_polygon(indices, place, mesh.vertex_count());
    }
    // Normals, texture coordinates, groups, materials, lines: not part of the surface.
  }
  return mesh.finish();
}

// ---- OFF -------------------------------------------------------------------------------------

TriangleMesh read_off(const fs::path& file, const MeshReadOptions& options) {
  const std::string text = read_whole_file(file);
  const auto rows = Lines::of(text, true).rows;
  MeshBuilder mesh(file, options);
  std::size_t r = 0;
  auto next_words = [&](const char* what) {
    if (r >= rows.size())
      throw MeshReadError(file.string() + ": the file ends before " + what + " (truncated?)");
    const auto& row = rows[r++];
    return std::pair{row.first, split_words(row.second)};
  };
  auto [header_line, header] = next_words("the OFF header");
  // OFF and its 3-D variants ([ST][C][N]OFF: texture, colour, normal per vertex); not 4OFF
  // (4-D) nor anything else ending in OFF.
  const std::string_view magic = header[0];
  static const std::set<std::string_view> kVariants = {"OFF",   "COFF",   "NOFF",   "CNOFF",
                                                       "STOFF", "STCOFF", "STNOFF", "STCNOFF"};
  if (!kVariants.count(magic))
    throw MeshReadError(line_place(file, header_line) +
                        ": expected the keyword 'OFF' (or COFF, NOFF, CNOFF, STOFF...), found '" +
                        std::string(magic) + "'");
  // The counts may follow the keyword on the same line.
  std::vector<std::string_view> counts(header.begin() + 1, header.end());
  std::size_t counts_line = header_line;
  if (counts.empty()) std::tie(counts_line, counts) = next_words("the vertex and face counts");
  long long nv = -1, nf = -1;
  if (counts.size() < 2 || !parse_number(counts[0], nv) || !parse_number(counts[1], nf) || nv < 0 ||
      nf < 0)
    throw MeshReadError(line_place(file, counts_line) +
                        ": expected the counts 'vertices faces [edges]' as non-negative integers");
  for (long long v = 0; v < nv; ++v) {
    auto [line, words] = next_words(
        ("vertex " + std::to_string(v) + " of " + std::to_string(nv) + " declared").c_str());
    const std::string place = line_place(file, line);
    double xyz[3];
    if (words.size() < 3)
      throw MeshReadError(place + ": a vertex needs 3 coordinates, found " +
                          std::to_string(words.size()));
    for (int d = 0; d < 3; ++d)
      if (!parse_number(words[d], xyz[d]))
        throw MeshReadError(place + ": '" + std::string(words[d]) + "' is not a number");
    mesh.add_vertex(xyz[0], xyz[1], xyz[2], place);
  }
  for (long long f = 0; f < nf; ++f) {
    auto [line, words] = next_words(
        ("face " + std::to_string(f) + " of " + std::to_string(nf) + " declared").c_str());
    const std::string place = line_place(file, line);
    long long n = 0;
    if (!parse_number(words[0], n) || n < 0)
      throw MeshReadError(place + ": expected the face's vertex count, found '" +
                          std::string(words[0]) + "'");
    if (words.size() < static_cast<std::size_t>(n) + 1)
      throw MeshReadError(place + ": the face declares " + std::to_string(n) +
                          " vertices but lists " + std::to_string(words.size() - 1));
    std::vector<long long> indices(static_cast<std::size_t>(n));
    for (long long k = 0; k < n; ++k)
      if (!parse_number(words[k + 1], indices[k]))
        throw MeshReadError(place + ": '" + std::string(words[k + 1]) + "' is not a vertex index");
    mesh.add_polygon(indices, place, mesh.vertex_count());
  }
  if (r < rows.size())
    throw MeshReadError(line_place(file, rows[r].first) + ": more lines follow the " +
                        std::to_string(nf) +
                        " faces the header declares (is its face count too small?)");
  return mesh.finish();
}

// ---- PLY -------------------------------------------------------------------------------------

namespace {

enum class PlyType { i8, u8, i16, u16, i32, u32, f32, f64 };

struct PlyProperty {
  std::string name;
  PlyType type = PlyType::f32;
  bool is_list = false;
  PlyType count_type = PlyType::u8;
};

struct PlyElement {
  std::string name;
  long long count = 0;
  std::vector<PlyProperty> properties;
};

struct PlyHeader {
  enum class Format { ascii, little, big } format = Format::ascii;
  std::vector<PlyElement> elements;
  std::size_t data_offset = 0;  // first byte after "end_header\n"
  std::size_t lines = 0;        // header lines (for ascii line numbers)
};

PlyType ply_type(std::string_view name, const std::string& place) {
  static const std::pair<const char*, PlyType> names[] = {
      {"char", PlyType::i8},    {"int8", PlyType::i8},     {"uchar", PlyType::u8},
      {"uint8", PlyType::u8},   {"short", PlyType::i16},   {"int16", PlyType::i16},
      {"ushort", PlyType::u16}, {"uint16", PlyType::u16},  {"int", PlyType::i32},
      {"int32", PlyType::i32},  {"uint", PlyType::u32},    {"uint32", PlyType::u32},
      {"float", PlyType::f32},  {"float32", PlyType::f32}, {"double", PlyType::f64},
      {"float64", PlyType::f64}};
  for (const auto& [n, t] : names)
    if (name == n) return t;
  throw MeshReadError(place + ": unknown PLY property type '" + std::string(name) + "'");
}

std::size_t ply_size(PlyType t) {
  switch (t) {
    case PlyType::i8:
    case PlyType::u8:
      return 1;
    case PlyType::i16:
    case PlyType::u16:
      return 2;
    case PlyType::i32:
    case PlyType::u32:
    case PlyType::f32:
      return 4;
    case PlyType::f64:
      return 8;
  }
  return 0;
}

PlyHeader read_ply_header(const std::string& text, const fs::path& file) {
  PlyHeader h;
  std::size_t pos = 0;
  bool saw_format = false;
  while (true) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos)
      throw MeshReadError(file.string() + ": the PLY header has no 'end_header' line (truncated?)");
    ++h.lines;
    std::string_view row(text.data() + pos, end - pos);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    pos = end + 1;
    const std::string place = line_place(file, h.lines);
    const auto words = split_words(row);
    if (h.lines == 1) {
      if (row != "ply")
        throw MeshReadError(place + ": not a PLY file (the first line is not 'ply')");
      continue;
    }
    if (words.empty() || words[0] == "comment" || words[0] == "obj_info") continue;
    if (words[0] == "end_header") break;
    if (words[0] == "format") {
      if (words.size() != 3)
        throw MeshReadError(place +
                            ": expected 'format <ascii|binary_little_endian|"
                            "binary_big_endian> 1.0'");
      if (words[1] == "ascii")
        h.format = PlyHeader::Format::ascii;
      else if (words[1] == "binary_little_endian")
        h.format = PlyHeader::Format::little;
      else if (words[1] == "binary_big_endian")
        h.format = PlyHeader::Format::big;
      else
        throw MeshReadError(place + ": unknown PLY format '" + std::string(words[1]) +
                            "' (accepted: ascii, binary_little_endian, binary_big_endian)");
      saw_format = true;
    } else if (words[0] == "element") {
      PlyElement e;
      if (words.size() != 3 || !parse_number(words[2], e.count) || e.count < 0)
        throw MeshReadError(place + ": expected 'element <name> <count>' with a count >= 0");
      e.name = words[1];
      h.elements.push_back(e);
    } else if (words[0] == "property") {
      if (h.elements.empty()) throw MeshReadError(place + ": a property before any 'element' line");
      PlyProperty p;
      if (words.size() == 5 && words[1] == "list") {
        p.is_list = true;
        p.count_type = ply_type(words[2], place);
        p.type = ply_type(words[3], place);
        p.name = words[4];
      } else if (words.size() == 3) {
        p.type = ply_type(words[1], place);
        p.name = words[2];
      } else {
        throw MeshReadError(place +
                            ": expected 'property <type> <name>' or "
                            "'property list <count type> <type> <name>'");
      }
      h.elements.back().properties.push_back(p);
    } else {
      throw MeshReadError(place + ": unknown PLY header line '" + std::string(words[0]) + "'");
    }
  }
  if (!saw_format) throw MeshReadError(file.string() + ": the PLY header has no 'format' line");
  h.data_offset = pos;
  return h;
}

// Values of the PLY body, one at a time, with the place of the last one for messages.
class PlyValues {
 public:
  PlyValues(const std::string& text, const PlyHeader& h, fs::path file)
      : text_(text),
        format_(h.format),
        file_(std::move(file)),
        pos_(h.data_offset),
        line_(h.lines + 1) {}

  double next(PlyType t) {
    return format_ == PlyHeader::Format::ascii ? next_word(t) : next_binary(t);
  }
  // An ascii item is one line: a line with a value too many or too few would shift every later
  // value into the wrong property. Binary items have no such marks.
  void begin_item() { item_line_ = 0; }
  void end_item(const PlyElement& e) {
    if (format_ != PlyHeader::Format::ascii) return;
    if (item_line_ != 0 && item_line_ != line_)
      throw MeshReadError(line_place(file_, item_line_) + ": fewer values than " + described(e) +
                          " (the item goes on to line " + std::to_string(line_) + ")");
    while (pos_ < text_.size() && text_[pos_] != '\n' &&
           std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
    if (pos_ < text_.size() && text_[pos_] != '\n')
      throw MeshReadError(line_place(file_, line_) + ": more values than " + described(e) +
                          " (a stray value, or a property missing from the header?)");
  }
  std::string place() const {
    return format_ == PlyHeader::Format::ascii ? line_place(file_, line_)
                                               : byte_place(file_, value_offset_);
  }
  // After the last element: nothing may follow but white space (ascii) or nothing (binary), or
  // the header's counts are smaller than what the file holds and data would be dropped.
  void expect_end() {
    if (format_ == PlyHeader::Format::ascii)
      while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
        if (text_[pos_++] == '\n') ++line_;
    if (pos_ >= text_.size()) return;
    value_offset_ = pos_;
    throw MeshReadError(place() +
                        ": data follows the last element the header declares (are its element "
                        "counts too small?)");
  }

 private:
  static std::string described(const PlyElement& e) {
    std::string text = "element '" + e.name + "' (";
    for (const PlyProperty& p : e.properties)
      text += p.name + (p.is_list ? "[]" : "") + (&p == &e.properties.back() ? ")" : " ");
    return text;
  }

  double next_word(PlyType t) {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      if (text_[pos_++] == '\n') ++line_;
    if (pos_ >= text_.size())
      throw MeshReadError(place() +
                          ": the file ends early (truncated, or the element counts "
                          "in the header are too large)");
    if (item_line_ == 0) item_line_ = line_;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    const std::string_view word(text_.data() + start, pos_ - start);
    double v = 0;
    if (t == PlyType::f32 || t == PlyType::f64) {
      if (parse_number(word, v)) return v;
    } else {
      long long i = 0;
      if (parse_number(word, i)) return static_cast<double>(i);
    }
    throw MeshReadError(place() + ": '" + std::string(word) + "' is not a valid " +
                        (t == PlyType::f32 || t == PlyType::f64 ? "number" : "integer"));
  }

  double next_binary(PlyType t) {
    const std::size_t n = ply_size(t);
    value_offset_ = pos_;
    if (pos_ + n > text_.size())
      throw MeshReadError(place() +
                          ": the file ends early (truncated, or the element counts "
                          "in the header are too large)");
    unsigned char bytes[8];
    std::memcpy(bytes, text_.data() + pos_, n);
    pos_ += n;
    const bool file_big = format_ == PlyHeader::Format::big;
    if (file_big != (std::endian::native == std::endian::big)) std::reverse(bytes, bytes + n);
    return decode(t, bytes);
  }

  static double decode(PlyType t, const unsigned char* b) {
    switch (t) {
      case PlyType::i8:
        return static_cast<double>(static_cast<std::int8_t>(b[0]));
      case PlyType::u8:
        return b[0];
      case PlyType::i16:
        return as<std::int16_t>(b);
      case PlyType::u16:
        return as<std::uint16_t>(b);
      case PlyType::i32:
        return as<std::int32_t>(b);
      case PlyType::u32:
        return as<std::uint32_t>(b);
      case PlyType::f32:
        return as<float>(b);
      case PlyType::f64:
        return as<double>(b);
    }
    return 0;
  }
  template <class T>
  static double as(const unsigned char* b) {
    T v;
    std::memcpy(&v, b, sizeof v);
    return static_cast<double>(v);
  }

  const std::string& text_;
  PlyHeader::Format format_;
  fs::path file_;
  std::size_t pos_;
  std::size_t line_;
  std::size_t value_offset_ = 0;
  std::size_t item_line_ = 0;  // where the current ascii item's first value is; 0: none yet
};

long long as_index(double v, const std::string& place) {
  if (v != std::floor(v) || !std::isfinite(v))
    throw MeshReadError(place + ": a list count or index must be an integer");
  if (std::fabs(v) > 9007199254740992.0)  // 2^53: beyond it a double holds no exact integer
    throw MeshReadError(place + ": a list count or index is out of range");
  return static_cast<long long>(v);
}

// One item of an element: its scalar values by property index, the values of one list property
// (`keep_list`, or none), and where it starts.
struct PlyItem {
  std::vector<double> scalars;
  std::vector<long long> list;
  std::string place;
};

void read_ply_item(PlyValues& values, const PlyElement& e, int keep_list, PlyItem& item) {
  item.scalars.assign(e.properties.size(), 0.0);
  item.list.clear();
  values.begin_item();
  for (std::size_t p = 0; p < e.properties.size(); ++p) {
    const PlyProperty& prop = e.properties[p];
    if (!prop.is_list) {
      item.scalars[p] = values.next(prop.type);
      if (p == 0) item.place = values.place();
      continue;
    }
    const double length = values.next(prop.count_type);  // before place(): its line
    const long long n = as_index(length, values.place());
    if (p == 0) item.place = values.place();
    if (n < 0) throw MeshReadError(values.place() + ": a negative list length");
    for (long long k = 0; k < n; ++k) {
      const double v = values.next(prop.type);
      if (static_cast<int>(p) == keep_list) item.list.push_back(as_index(v, values.place()));
    }
  }
  values.end_item(e);
}

int find_property(const PlyElement& e, std::initializer_list<const char*> names) {
  for (std::size_t i = 0; i < e.properties.size(); ++i)
    for (const char* n : names)
      if (e.properties[i].name == n) return static_cast<int>(i);
  return -1;
}

}  // namespace

TriangleMesh read_ply(const fs::path& file, const MeshReadOptions& options) {
  const std::string text = read_whole_file(file);
  const PlyHeader header = read_ply_header(text, file);
  auto vertex_element = std::find_if(header.elements.begin(), header.elements.end(),
                                     [](const PlyElement& e) { return e.name == "vertex"; });
  if (vertex_element == header.elements.end())
    throw MeshReadError(file.string() + ": the PLY header declares no 'vertex' element");
  const auto vertex_total = static_cast<std::size_t>(vertex_element->count);
  for (auto e = header.elements.begin(); e != vertex_element; ++e)
    if (e->name == "face")  // indices are checked against vertices already read
      throw MeshReadError(file.string() + ": the PLY 'face' element must follow 'vertex'");
  MeshBuilder mesh(file, options);
  PlyValues values(text, header, file);
  for (const PlyElement& e : header.elements) {
    const bool is_vertex = e.name == "vertex", is_face = e.name == "face";
    if (e.properties.empty() && !is_vertex && !is_face) continue;  // no bytes, whatever its count
    const int coord[3] = {find_property(e, {"x"}), find_property(e, {"y"}),
                          find_property(e, {"z"})};
    const int corners = find_property(e, {"vertex_indices", "vertex_index"});
    if (is_vertex && (coord[0] < 0 || coord[1] < 0 || coord[2] < 0))
      throw MeshReadError(file.string() + ": the PLY vertex element lacks x, y or z");
    if (is_face && (corners < 0 || !e.properties[corners].is_list))
      throw MeshReadError(file.string() +
                          ": the PLY face element lacks a 'vertex_indices' list property");
    PlyItem item;
    for (long long k = 0; k < e.count; ++k) {
      read_ply_item(values, e, is_face ? corners : -1, item);
      if (is_vertex)
        mesh.add_vertex(item.scalars[coord[0]], item.scalars[coord[1]], item.scalars[coord[2]],
                        item.place);
      if (is_face) mesh.add_polygon(item.list, item.place, vertex_total);
    }
  }
  values.expect_end();
  return mesh.finish();
}

TriangleMesh read_mesh(const fs::path& file, const MeshReadOptions& options) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext == ".obj") return read_obj(file, options);
  if (ext == ".ply") return read_ply(file, options);
  if (ext == ".off") return read_off(file, options);
  if (ext == ".stl") return read_stl(file, options);
  throw MeshReadError(file.string() + ": unknown mesh format '" + ext +
                      "' (accepted: .obj, .ply, .off, .stl)");
}

// ---- point clouds ------------------------------------------------------------------------------

namespace {

// Collects points (and normals), checking each.
class CloudBuilder {
 public:
  explicit CloudBuilder(fs::path file) : file_(std::move(file)) {}

  void add(const double xyz[3], const double* normal, const std::string& place) {
    for (int d = 0; d < 3; ++d) {
      if (!std::isfinite(xyz[d]))
        throw MeshReadError(place + ": point " + std::to_string(cloud_.points.size()) +
                            " has a coordinate that is not a finite number (NaN or infinity)");
      if (std::fabs(xyz[d]) > std::numeric_limits<float>::max())
        throw MeshReadError(place + ": point " + std::to_string(cloud_.points.size()) +
                            " has a coordinate beyond the float32 range (" +
                            std::to_string(xyz[d]) + ")");
    }
    cloud_.points.push_back({xyz[0], xyz[1], xyz[2]});
    if (normal == nullptr) return;
    for (int d = 0; d < 3; ++d)
      if (!std::isfinite(normal[d]))
        throw MeshReadError(place + ": the normal of point " +
                            std::to_string(cloud_.points.size() - 1) +
                            " is not a finite number (NaN or infinity)");
    cloud_.normals.push_back({normal[0], normal[1], normal[2]});
  }

  PointCloud finish() {
    if (cloud_.points.empty())
      throw MeshReadError(file_.string() + ": the point cloud is empty (no points)");
    return std::move(cloud_);
  }

 private:
  fs::path file_;
  PointCloud cloud_;
};

// "1 2 3", "1,2,3", "1, 2, 3": the fields of a line; commas, when present, separate them.
std::vector<std::string_view> split_fields(std::string_view line, const std::string& place) {
  if (line.find(',') == std::string_view::npos) return split_words(line);
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(line.find(',', start), line.size());
    const auto words = split_words(line.substr(start, end - start));
    if (words.size() != 1)
      throw MeshReadError(place + ": field " + std::to_string(fields.size() + 1) +
                          (words.empty() ? " is empty" : " holds more than one value") +
                          " (between commas)");
    fields.push_back(words[0]);
    if (end == line.size()) break;
    start = end + 1;
  }
  return fields;
}

}  // namespace

PointCloud read_xyz(const fs::path& file) {
  const std::string text = read_whole_file(file);
  CloudBuilder cloud(file);
  int column[6] = {0, 1, 2, -1, -1, -1};  // x y z nx ny nz
  std::size_t width = 0;                  // fields per line, fixed by the first line
  bool first = true;
  for (const auto& [number, raw] : Lines::of(text, true).rows) {
    std::string_view row = raw;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    const std::string place = line_place(file, number);
    const auto fields = split_fields(row, place);
    double value = 0;
    if (first && !fields.empty() && !parse_number(fields[0], value)) {
      // A header line naming the columns.
      static const char* names[6] = {"x", "y", "z", "nx", "ny", "nz"};
      for (int k = 0; k < 6; ++k) {
        column[k] = -1;
        for (std::size_t f = 0; f < fields.size(); ++f) {
          std::string name(fields[f]);
          std::transform(name.begin(), name.end(), name.begin(),
                         [](unsigned char c) { return std::tolower(c); });
          if (name == names[k]) column[k] = static_cast<int>(f);
        }
      }
      if (column[0] < 0 || column[1] < 0 || column[2] < 0)
        throw MeshReadError(place + ": a header line must name the columns x, y and z");
      const int normals = (column[3] >= 0) + (column[4] >= 0) + (column[5] >= 0);
      if (normals != 0 && normals != 3)
        throw MeshReadError(place + ": the header names some of nx, ny, nz but not all three");
      width = fields.size();
      first = false;
      continue;
    }
    if (width == 0) {
      width = fields.size();
      if (width == 6) {
        column[3] = 3, column[4] = 4, column[5] = 5;
      } else if (width != 3) {
        throw MeshReadError(place + ": expected 3 values (x y z) or 6 (x y z nx ny nz), found " +
                            std::to_string(width) + " (a header line can name other columns)");
      }
    }
    first = false;
    if (fields.size() != width)
      throw MeshReadError(place + ": " + std::to_string(fields.size()) + " values, but " +
                          std::to_string(width) + " on the lines before");
    double v[6] = {0, 0, 0, 0, 0, 0};
    for (int k = 0; k < 6; ++k) {
      if (column[k] < 0) continue;
      if (!parse_number(fields[column[k]], v[k]))
        throw MeshReadError(place + ": '" + std::string(fields[column[k]]) + "' is not a number");
    }
    cloud.add(v, column[3] >= 0 ? v + 3 : nullptr, place);
  }
  return cloud.finish();
}

PointCloud read_ply_points(const fs::path& file) {
  const std::string text = read_whole_file(file);
  const PlyHeader header = read_ply_header(text, file);
  auto vertex = std::find_if(header.elements.begin(), header.elements.end(),
                             [](const PlyElement& e) { return e.name == "vertex"; });
  if (vertex == header.elements.end())
    throw MeshReadError(file.string() + ": the PLY header declares no 'vertex' element");
  const int coord[3] = {find_property(*vertex, {"x"}), find_property(*vertex, {"y"}),
                        find_property(*vertex, {"z"})};
  const int normal[3] = {find_property(*vertex, {"nx"}), find_property(*vertex, {"ny"}),
                         find_property(*vertex, {"nz"})};
  for (const int c : coord)
    if (c < 0 || vertex->properties[c].is_list)
      throw MeshReadError(file.string() + ": the PLY vertex element lacks x, y or z");
  const int normals = (normal[0] >= 0) + (normal[1] >= 0) + (normal[2] >= 0);
  if (normals != 0 && normals != 3)
    throw MeshReadError(file.string() +
                        ": the PLY vertex element has some of nx, ny, nz but "
                        "not all three");
  for (const int c : normal)
    if (c >= 0 && vertex->properties[c].is_list)
      throw MeshReadError(file.string() + ": the PLY normal properties must not be lists");
  CloudBuilder cloud(file);
  PlyValues values(text, header, file);
  // Every element is read through, so that the counts are checked against the file's end:
  // counts smaller than the file holds would drop points without a word.
  PlyItem item;
  for (auto e = header.elements.begin(); e != header.elements.end(); ++e) {
    if (e->properties.empty()) continue;  // no bytes, whatever its count says
    for (long long k = 0; k < e->count; ++k) {
      read_ply_item(values, *e, -1, item);
      if (e != vertex) continue;
      double xyz[3], n[3] = {0, 0, 0};
      for (int d = 0; d < 3; ++d) {
        xyz[d] = item.scalars[coord[d]];
        if (normals) n[d] = item.scalars[normal[d]];
      }
      cloud.add(xyz, normals ? n : nullptr, item.place);
    }
  }
  values.expect_end();
  return cloud.finish();
}

PointCloud read_point_cloud(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext == ".ply") return read_ply_points(file);
  if (ext == ".xyz" || ext == ".csv" || ext == ".txt") return read_xyz(file);
  throw MeshReadError(file.string() + ": unknown point-cloud format '" + ext +
                      "' (accepted: .ply, .xyz, .csv, .txt)");
}

}  // namespace apron::io
