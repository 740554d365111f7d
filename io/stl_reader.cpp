// STL, ascii and binary, read into the indexed TriangleMesh the other readers give. STL stores
// each triangle's three corners, not shared vertices, so the corners are welded (a hash grid,
// O(n)) before MeshBuilder sees them: its checks (finite, float-range coordinates; zero-area
// triangles skipped or kept) are the other formats' checks.
#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/mesh_reader.hpp"
#include "io/mesh_reader_detail.hpp"
#include "io/point_cloud_reader.hpp"  // available_memory_bytes

namespace apron::io {
namespace {

namespace fs = std::filesystem;
using detail::byte_place;
using detail::line_place;
using detail::parse_number;

constexpr std::size_t kHeaderBytes = 80;    // binary: free text (often "solid ...")
constexpr std::size_t kPrefixBytes = 84;    // the header and the uint32 triangle count
constexpr std::size_t kTriangleBytes = 50;  // normal, 3 corners (float32 x 12), uint16 attribute
// The shortest ascii facet, "facet normal 0 0 0 outer loop vertex 0 0 0 (x3) endloop endfacet",
// has 85 bytes: a file of n bytes holds at most n / 80 facets.
constexpr double kMinAsciiFacetBytes = 80;
// Memory per triangle while reading: 3 corners and up to 3 vertices in double (144), the weld
// map and grid (about 3 x 60 with the hash table's nodes), the triangle (12).
constexpr double kBytesPerTriangle = 340;
// Vertex indices are uint32: at most this many corners (3 per facet).
constexpr std::size_t kMaxCorners = std::numeric_limits<std::uint32_t>::max();

using Point = std::array<double, 3>;

// What either parser gives: 3 corners per facet, and the solids as runs of facets.
struct Facets {
  std::vector<Point> corners;
  std::vector<std::string> solid_names;
  std::vector<std::size_t> solid_end;  // one past each solid's last facet
};

std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

bool same_word(std::string_view word, std::string_view keyword) {  // exporters write SOLID too
  return word.size() == keyword.size() &&
         std::equal(word.begin(), word.end(), keyword.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

// ---- ascii -------------------------------------------------------------------------------------

// solid NAME / facet normal N N N / outer loop / vertex X Y Z (x3) / endloop / endfacet /
// endsolid [NAME], several solids one after another. Words, not lines: some exporters put a
// whole facet on one line.
class AsciiStl {
 public:
  AsciiStl(std::string_view text, const fs::path& file) : text_(text), file_(file) {}

  Facets parse() {
    Facets out;
    for (Word w = next(); !w.text.empty(); w = next()) {
      if (!same_word(w.text, "solid"))
        throw MeshReadError(line_place(file_, w.line) +
                            ": expected 'solid' (another solid) after " + "'endsolid', found '" +
                            std::string(w.text) + "'");
      parse_solid(out, w.line);
    }
    return out;
  }

 private:
  struct Word {
    std::string_view text;  // empty at the end of the file
    std::size_t line = 0;
  };

  Word next() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      if (text_[pos_++] == '\n') ++line_;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && !std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    return {text_.substr(start, pos_ - start), line_};
  }

  // The rest of the current line (a solid's name, which may hold spaces).
  std::string rest_of_line() {
    const std::size_t end = std::min(text_.find('\n', pos_), text_.size());
    std::string rest = trimmed(text_.substr(pos_, end - pos_));
    pos_ = end;
    return rest;
  }

  void parse_solid(Facets& out, std::size_t solid_line) {
    const std::string name = rest_of_line();
    out.solid_names.push_back(name);
    while (true) {
      const Word w = next();
      if (w.text.empty())
        throw MeshReadError(line_place(file_, line_) + ": the file ends inside solid '" + name +
                            "' (begun at line " + std::to_string(solid_line) +
                            "): 'endsolid' is missing (truncated?)");
      if (same_word(w.text, "endsolid")) {
        rest_of_line();  // its name, which exporters do not always repeat faithfully
        out.solid_end.push_back(out.corners.size() / 3);
        return;
      }
      if (!same_word(w.text, "facet"))
        throw MeshReadError(line_place(file_, w.line) +
                            ": expected 'facet' or 'endsolid' in solid '" + name + "', found '" +
                            std::string(w.text) + "'");
      parse_facet(out, w.line);
    }
  }

  void parse_facet(Facets& out, std::size_t facet_line) {
    expect("normal", facet_line);
    double normal[3];  // ignored: the corners' order gives the orientation
    for (double& n : normal) number(next_in(facet_line), n);
    expect("outer", facet_line);
    expect("loop", facet_line);
    int corners = 0;
    while (true) {
      const Word w = next_in(facet_line);
      if (same_word(w.text, "endloop")) break;
      if (!same_word(w.text, "vertex"))
        throw MeshReadError(
            line_place(file_, w.line) + ": expected " +
            (corners == 3 ? "'endloop' after the facet's 3 vertices" : "'vertex' or 'endloop'") +
            ", found '" + std::string(w.text) + "'");
      if (corners == 3)
        throw MeshReadError(line_place(file_, w.line) +
                            ": a 4th vertex in the facet begun at line " +
                            std::to_string(facet_line) +
                            "; an STL facet is a triangle (3 vertices): triangulate the polygon");
      add_corner(out, w.line, facet_line, corners++);
    }
    if (corners != 3)
      throw MeshReadError(line_place(file_, line_) + ": the facet begun at line " +
                          std::to_string(facet_line) + " has " + std::to_string(corners) +
                          " vertices; an STL facet is a triangle (3 vertices)");
    expect("endfacet", facet_line);
  }

  void add_corner(Facets& out, std::size_t line, std::size_t facet_line, int corner) {
    Point p;
    for (double& c : p) number(next_in(facet_line), c);
    if (!detail::coordinates_ok(p[0], p[1], p[2]))
      detail::throw_bad_coordinates(
          p[0], p[1], p[2], line_place(file_, line),
          "facet " + std::to_string(out.corners.size() / 3) + ", vertex " + std::to_string(corner));
    if (out.corners.size() == kMaxCorners)
      throw MeshReadError(line_place(file_, line) +
                          ": more facets than 32-bit vertex indices can address; split the mesh");
    out.corners.push_back(p);
  }

  Word next_in(std::size_t facet_line) {
    const Word w = next();
    if (w.text.empty())
      throw MeshReadError(line_place(file_, line_) + ": the file ends inside the facet begun at " +
                          "line " + std::to_string(facet_line) + " (truncated?)");
    return w;
  }

  void expect(std::string_view keyword, std::size_t facet_line) {
    const Word w = next_in(facet_line);
    if (!same_word(w.text, keyword))
      throw MeshReadError(line_place(file_, w.line) + ": expected '" + std::string(keyword) +
                          "' in the facet begun at line " + std::to_string(facet_line) +
                          ", found '" + std::string(w.text) + "'");
  }

  void number(const Word& w, double& out) {
    std::string_view s = w.text;
    if (s.size() > 1 && s[0] == '+') s.remove_prefix(1);  // from_chars takes no '+'; C's printf may
    if (!parse_number(s, out))
      throw MeshReadError(line_place(file_, w.line) + ": '" + std::string(w.text) +
                          "' is not a number");
  }

  std::string_view text_;
  const fs::path& file_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

// ---- binary ------------------------------------------------------------------------------------

std::uint32_t little_u32(const char* p) {
  std::uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(p[k]);
  return v;
}

// The header's leading printable text ("solid cube", "Exported from ..."), as the solid's name.
std::string header_name(std::string_view header) {
  std::size_t n = 0;
  while (n < header.size() && std::isprint(static_cast<unsigned char>(header[n]))) ++n;
  return trimmed(header.substr(0, n));
}

Facets parse_binary(const std::string& bytes, std::uint32_t count, const fs::path& file) {
  Facets out;
  out.solid_names.push_back(header_name(std::string_view(bytes).substr(0, kHeaderBytes)));
  out.solid_end.push_back(count);
  out.corners.reserve(3 * std::size_t{count});
  for (std::size_t t = 0; t < count; ++t) {
    const std::size_t facet = kPrefixBytes + kTriangleBytes * t;
    for (int k = 0; k < 3; ++k) {
      const std::size_t offset = facet + 12 + 12 * k;  // after the normal
      Point p;
      for (int d = 0; d < 3; ++d)
        p[d] = std::bit_cast<float>(little_u32(bytes.data() + offset + 4 * d));
      if (!detail::coordinates_ok(p[0], p[1], p[2]))
        detail::throw_bad_coordinates(
            p[0], p[1], p[2], byte_place(file, offset),
            "triangle " + std::to_string(t) + ", vertex " + std::to_string(k));
      out.corners.push_back(p);
    }
  }
  return out;
}

// ---- welding -----------------------------------------------------------------------------------

struct Cell {
  long long i, j, k;
  bool operator==(const Cell&) const = default;
};
struct CellHash {
  std::size_t operator()(const Cell& c) const {
    std::uint64_t h = static_cast<std::uint64_t>(c.i) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<std::uint64_t>(c.j) * 0xC2B2AE3D27D4EB4Full + (h << 6) + (h >> 2);
    h ^= static_cast<std::uint64_t>(c.k) * 0x165667B19E3779F9ull + (h << 6) + (h >> 2);
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

struct Box {
  Point lo, hi;
  double diagonal() const { return std::hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]); }
};

Box bounds_of(const std::vector<Point>& points) {
  Box box{points.front(), points.front()};
  for (const Point& p : points)
    for (int d = 0; d < 3; ++d)
      box.lo[d] = std::min(box.lo[d], p[d]), box.hi[d] = std::max(box.hi[d], p[d]);
  return box;
}

// Corners to vertices: each corner becomes the nearest vertex already made within `tolerance`
// (the lowest index on a tie), or a new vertex. Vertices sit in a hash grid of cells at least
// 2 x tolerance wide, so a corner's reach spans at most 2 cells per axis: 8 cells to look in.
class Welder {
 public:
  Welder(const Box& box, double tolerance, std::size_t corners)
      : tolerance_(tolerance), origin_(box.lo) {
    // Not below diagonal / 2^32: cell indices stay far inside long long however small the
    // tolerance (0 welds exact duplicates only).
    cell_ = std::max(2 * tolerance, std::ldexp(box.diagonal(), -32));
    if (!(cell_ > 0)) cell_ = 1;  // every corner at one point
    heads_.reserve(corners / 2);
  }

  std::uint32_t add(const Point& p) {
    // Widened by a few ulps so that rounding in the cell arithmetic cannot miss a vertex at
    // exactly `tolerance`; the distance test below decides.
    const double reach = tolerance_ * (1 + 1e-12);
    long long from[3], to[3];
    for (int d = 0; d < 3; ++d) {
      from[d] = index(p[d] - reach, d);
      to[d] = index(p[d] + reach, d);
    }
    std::uint32_t best = kNone;
    double best_d2 = 0;
    for (long long i = from[0]; i <= to[0]; ++i)
      for (long long j = from[1]; j <= to[1]; ++j)
        for (long long k = from[2]; k <= to[2]; ++k) {
          const auto head = heads_.find({i, j, k});
          if (head == heads_.end()) continue;
          for (std::uint32_t v = head->second; v != kNone; v = next_[v]) {
            const double d2 = distance2(p, vertices_[v]);
            if (d2 > tolerance_ * tolerance_) continue;
            if (best == kNone || d2 < best_d2 || (d2 == best_d2 && v < best))
              best = v, best_d2 = d2;
          }
        }
    if (best != kNone) return best;
    const auto v = static_cast<std::uint32_t>(vertices_.size());
    vertices_.push_back(p);
    const Cell own{index(p[0], 0), index(p[1], 1), index(p[2], 2)};
    const auto [head, fresh] = heads_.try_emplace(own, v);
    next_.push_back(fresh ? kNone : head->second);
    head->second = v;
    return v;
  }

  const std::vector<Point>& vertices() const { return vertices_; }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  long long index(double x, int d) const {
    return static_cast<long long>(std::floor((x - origin_[d]) / cell_));
  }
  static double distance2(const Point& a, const Point& b) {
    const double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    return dx * dx + dy * dy + dz * dz;
  }

  double tolerance_;
  Point origin_;
  double cell_;
  std::vector<Point> vertices_;
  std::vector<std::uint32_t> next_;  // the next vertex in the same cell
  std::unordered_map<Cell, std::uint32_t, CellHash> heads_;
};

// Welds the corners and hands vertices and facets to MeshBuilder (its checks, its degenerate
// rule, applied after welding: a facet whose corners weld together has no area left).
TriangleMesh build(const Facets& facets, const fs::path& file, const MeshReadOptions& options) {
  if (facets.corners.empty())
    throw MeshReadError(file.string() +
                        ": the mesh is empty (its solids hold no facets): no triangle to "
                        "measure against");
  const Box box = bounds_of(facets.corners);
  // A tolerance beyond the diagonal reaches every corner, as the diagonal does: clamped, the grid
  // arithmetic stays finite.
  const double tolerance = std::min(
      box.diagonal(), std::max(options.weld_absolute, options.weld_relative * box.diagonal()));
  Welder welder(box, tolerance, facets.corners.size());
  std::vector<std::uint32_t> vertex_of(facets.corners.size());
  for (std::size_t c = 0; c < facets.corners.size(); ++c)
    vertex_of[c] = welder.add(facets.corners[c]);
  detail::MeshBuilder mesh(file, options);
  const std::string place = file.string();
  for (const Point& v : welder.vertices()) mesh.add_vertex(v[0], v[1], v[2], place);
  std::vector<MeshSolid> solids;
  std::size_t facet = 0;
  for (std::size_t s = 0; s < facets.solid_names.size(); ++s) {
    const std::size_t first = mesh.triangle_count();
    for (; facet < facets.solid_end[s]; ++facet)
      mesh.add_facet(vertex_of[3 * facet], vertex_of[3 * facet + 1], vertex_of[3 * facet + 2]);
    solids.push_back({facets.solid_names[s], first, mesh.triangle_count() - first});
  }
  TriangleMesh out = mesh.finish();
  out.vertices_read = facets.corners.size();
  out.welded_vertices = facets.corners.size() - out.vertices.size();
  out.solids = std::move(solids);
  return out;
}

// ---- telling the forms apart
// ---------------------------------------------------------------------

void check_options(const MeshReadOptions& options, const fs::path& file) {
  const auto ok = [](double v) { return std::isfinite(v) && v >= 0; };
  if (!ok(options.weld_relative) || !ok(options.weld_absolute))
    throw MeshReadError(file.string() + ": the weld tolerances must be finite and >= 0 (" +
                        "weld_relative " + std::to_string(options.weld_relative) +
                        ", weld_absolute " + std::to_string(options.weld_absolute) + ")");
}

// Refuses, before anything is allocated, a read of `triangles` that would not fit in memory.
void check_memory(const std::string& place, std::size_t file_bytes, double triangles,
                  const MeshReadOptions& options) {
  const std::size_t available =
      options.available_bytes ? options.available_bytes : available_memory_bytes();
  const double need = static_cast<double>(file_bytes) + triangles * kBytesPerTriangle;
  if (need <= 0.9 * static_cast<double>(available)) return;
  char text[320];
  std::snprintf(text, sizeof text,
                ": reading this STL needs about %.3g GB of memory (%.3g GB of file, up to %.4g "
                "triangles), but %.3g GB are available; split the mesh or read it on a larger "
                "machine",
                need / 1e9, static_cast<double>(file_bytes) / 1e9, triangles,
                static_cast<double>(available) / 1e9);
  throw MeshReadError(place + text);
}

std::string read_bytes(const fs::path& file, std::size_t size) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in || static_cast<std::size_t>(in.gcount()) != size)
    throw MeshReadError(file.string() + ": cannot read the STL file (" +
                        std::to_string(in.gcount()) + " of " + std::to_string(size) +
                        " bytes; did it change while being read?)");
  return bytes;
}

// Ascii STL begins with the word "solid" (after white space).
bool begins_with_solid(std::string_view prefix) {
  std::size_t i = 0;
  while (i < prefix.size() && std::isspace(static_cast<unsigned char>(prefix[i]))) ++i;
  return i + 5 <= prefix.size() && same_word(prefix.substr(i, 5), "solid") &&
         (i + 5 == prefix.size() || std::isspace(static_cast<unsigned char>(prefix[i + 5])));
}

// The first byte that text does not hold (control characters other than white space), or npos.
std::size_t first_binary_byte(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if ((c < 0x20 && !std::isspace(c)) || c == 0x7f) return i;
  }
  return std::string_view::npos;
}

// A binary reading whose byte count disagrees with its triangle count: truncated, a count that
// lies, or not an STL file at all. `why_not_ascii` says why it was not read as ascii STL.
[[noreturn]] void throw_size_mismatch(const fs::path& file, std::size_t size, std::uint32_t count,
                                      const std::string& why_not_ascii) {
  const std::size_t expected = kPrefixBytes + kTriangleBytes * std::size_t{count};
  const std::string declared = "its triangle count (byte offset 80) declares " +
                               std::to_string(count) + " triangles, " + std::to_string(expected) +
                               " bytes in all (84 + 50 per triangle), but the file has " +
                               std::to_string(size);
  if (size < expected) {
    const std::size_t whole = (size - kPrefixBytes) / kTriangleBytes;
    throw MeshReadError(byte_place(file, kPrefixBytes + kTriangleBytes * whole) +
                        ": the file ends inside triangle " + std::to_string(whole) + ": " +
                        declared + "; truncated? (" + why_not_ascii + ")");
  }
  throw MeshReadError(byte_place(file, expected) + ": " + std::to_string(size - expected) +
                      " bytes follow the last triangle: " + declared + "; is the count wrong? (" +
                      why_not_ascii + ")");
}

}  // namespace

TriangleMesh read_stl(const fs::path& file, const MeshReadOptions& options) {
  check_options(options, file);
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  std::ifstream in(file, std::ios::binary);
  if (ec || !in)
    throw MeshReadError(file.string() + ": cannot open the mesh file (does it exist?)");
  if (size == 0)
    throw MeshReadError(file.string() +
                        ": the file is empty (0 bytes); an STL file is ascii ('solid NAME', "
                        "facets, 'endsolid') or binary (an 80-byte header, a triangle count, 50 "
                        "bytes per triangle)");
  std::string prefix(static_cast<std::size_t>(std::min<std::uintmax_t>(size, kPrefixBytes)), '\0');
  in.read(prefix.data(), static_cast<std::streamsize>(prefix.size()));
  if (!in) throw MeshReadError(file.string() + ": cannot read the STL file's first bytes");
  const std::uint32_t count = size >= kPrefixBytes ? little_u32(prefix.data() + kHeaderBytes) : 0;
  // A binary file has exactly the bytes its count says; that decides before "solid" does.
  if (size >= kPrefixBytes && size == kPrefixBytes + kTriangleBytes * std::size_t{count}) {
    check_memory(byte_place(file, kHeaderBytes), size, count, options);
    return build(parse_binary(read_bytes(file, size), count, file), file, options);
  }
  if (begins_with_solid(prefix)) {
    check_memory(file.string(), size, static_cast<double>(size) / kMinAsciiFacetBytes, options);
    const std::string text = read_bytes(file, size);
    const std::size_t binary_byte = first_binary_byte(text);
    if (binary_byte == std::string::npos) return build(AsciiStl(text, file).parse(), file, options);
    if (size >= kPrefixBytes)
      throw_size_mismatch(file, size, count,
                          "it begins with 'solid' but is not ascii STL: byte " +
                              std::to_string(binary_byte) + " is not text");
    throw MeshReadError(byte_place(file, binary_byte) +
                        ": not an STL file: it begins with 'solid' but this byte is not text "
                        "(not ascii STL), and it is shorter than a binary STL's 84-byte header");
  }
  if (size < kPrefixBytes)
    throw MeshReadError(file.string() +
                        ": not an STL file: it does not begin with 'solid' (ascii "
                        "STL) and has " +
                        std::to_string(size) +
                        " bytes, fewer than a binary STL's 84-byte header and count");
  if (first_binary_byte(prefix) == std::string::npos)  // text, but not "solid": e.g. an OBJ
    throw MeshReadError(byte_place(file, kHeaderBytes) +
                        ": not an STL file: it is text but does not begin with 'solid' (ascii "
                        "STL), and read as binary STL its triangle count here (" +
                        std::to_string(count) + ") does not match its " + std::to_string(size) +
                        " bytes (84 + 50 per triangle)");
  throw_size_mismatch(file, size, count,
                      "or not an STL file at all: ascii STL begins with 'solid', this does not");
}

}  // namespace apron::io
