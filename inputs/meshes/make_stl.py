#!/usr/bin/env python3
"""Writes the STL meshes of the mesh-bounded SPH cases, all in metres:
- dam_break_tank.stl (ascii) and dam_break_tank_open.stl (binary, no lid): the box
  boundary.tank of inputs/dam_break.yaml, lo TANK_LO, hi TANK_HI;
- dam_break_large_tank_open.stl (binary, no lid): the tank of inputs/dam_break_large.yaml;
- hydrostatic_tank.stl (ascii): a closed 0.06 x 0.06 x 0.1 m box about its own origin;
- table_top.stl (ascii): a closed 1 x 1 x 0.05 m slab, its top face at z = 0 centred on the
  origin (tests/cloth's moving table);
- dress_form.stl (binary): a closed tailor's dummy, hips to neck (0.76 m tall, its base at z = 0):
  elliptical cross-sections through the profile DRESS_FORM, smoothly interpolated, capped at
  both ends (inputs/cloth_drape_body.yaml drapes a sheet over it);
- l_block.stl (ascii): a closed L-shaped block (non-convex) on that tank's floor, 0.1 m in x and
  z, spanning the tank's y, its foot upstream and its upright downstream, so the surge meets a
  re-entrant corner.
Each closed mesh has outward normals (pointing away from its solid; the tank's point out of the
fluid) and consistent winding: every edge is met once in each direction, the signed volume is
the box's. The script checks both before writing. Run from this folder: python3 make_stl.py"""
import struct

# The hydrostatic tank's box, centred on its own origin so that a case's rotation turns it in
# place (tests/sph/hydrostatic_rotated.yaml tilts it 30 degrees about x and y).
HYDROSTATIC_LO = (-0.03, -0.03, -0.05)
HYDROSTATIC_HI = (0.03, 0.03, 0.05)
TABLE_LO = (-0.5, -0.5, -0.05)
TABLE_HI = (0.5, 0.5, 0.0)
TANK_LO = (0.0, 0.0, 0.0)  # inputs/dam_break.yaml, boundary.tank
TANK_HI = (0.584, 0.0438, 0.365)
LARGE_TANK_HI = (0.584, 0.292, 0.365)  # inputs/dam_break_large.yaml, boundary.tank
# The L's outline in the x-z plane, counter-clockwise seen with x to the right and z up: a foot
# 0.1 long and 0.03 high from x = 0.22 (the surge reaches it at t = 0.1 s), and an upright 0.03 thick and 0.1 high at its far end.
L_OUTLINE = [(0.22, 0.0), (0.32, 0.0), (0.32, 0.1), (0.29, 0.1), (0.29, 0.03), (0.22, 0.03)]
L_REFLEX = 4  # the inner corner: every cap triangle fanned from it lies inside the L


def sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def box(lo, hi, lid=True):
    """12 triangles (10 without the lid at z = hi), wound counter-clockwise seen from outside."""
    v = [(hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1], hi[2] if i & 4 else lo[2])
         for i in range(8)]
    faces = [(0, 2, 3), (0, 3, 1), (0, 1, 5), (0, 5, 4), (2, 6, 7), (2, 7, 3),
             (0, 4, 6), (0, 6, 2), (1, 3, 7), (1, 7, 5)]
    if lid:
        faces += [(4, 5, 7), (4, 7, 6)]
    return [tuple(v[i] for i in f) for f in faces]


def l_block(y0, y1):
    """The L outline extruded from y0 to y1: 2 x 4 cap triangles and 6 x 2 side triangles."""
    n = len(L_OUTLINE)
    front = [(x, y0, z) for x, z in L_OUTLINE]  # y = y0, outward -y
    back = [(x, y1, z) for x, z in L_OUTLINE]  # y = y1, outward +y
    tris = []
    for k in range(1, n - 1):  # fan from the reflex corner
        a, b, c = L_REFLEX, (L_REFLEX + k) % n, (L_REFLEX + k + 1) % n
        # A counter-clockwise outline in (x, z) has normal -y: right for the front cap.
        tris.append((front[a], front[b], front[c]))
        tris.append((back[a], back[c], back[b]))
    for i in range(n):  # the outside of a counter-clockwise outline is right of each edge
        j = (i + 1) % n
        tris.append((front[i], back[j], front[j]))
        tris.append((front[i], back[i], back[j]))
    return tris


# (z, half-width in x, half-depth in y) of the dummy's cross-sections, hips to neck [m].
DRESS_FORM = [(0.0, 0.15, 0.11), (0.12, 0.18, 0.13), (0.34, 0.14, 0.10), (0.48, 0.17, 0.12),
              (0.58, 0.20, 0.11), (0.63, 0.15, 0.09), (0.67, 0.065, 0.06), (0.76, 0.055, 0.055)]


def dress_form(rings_per_span=6, segments=48):
    """The DRESS_FORM profile swept as ellipses (Catmull-Rom between its rows), fans at both
    ends; counter-clockwise seen from outside."""
    import math
    rows = [DRESS_FORM[0]] + DRESS_FORM + [DRESS_FORM[-1]]
    sections = []
    for i in range(1, len(rows) - 2):
        for k in range(rings_per_span if i < len(rows) - 3 else rings_per_span + 1):
            t = k / rings_per_span
            p0, p1, p2, p3 = rows[i - 1], rows[i], rows[i + 1], rows[i + 2]
            sections.append(tuple(0.5 * (2 * b + (c - a) * t + (2 * a - 5 * b + 4 * c - d) * t * t
                                         + (3 * b - a - 3 * c + d) * t ** 3)
                                  for a, b, c, d in zip(p0, p1, p2, p3)))
    ring = [[(a * math.cos(2 * math.pi * j / segments), b * math.sin(2 * math.pi * j / segments), z)
             for j in range(segments)] for z, a, b in sections]
    tris = []
    for lower, upper in zip(ring, ring[1:]):
        for j in range(segments):
            k = (j + 1) % segments
            tris.append((lower[j], lower[k], upper[k]))
            tris.append((lower[j], upper[k], upper[j]))
    bottom, top = (0.0, 0.0, sections[0][0]), (0.0, 0.0, sections[-1][0])
    for j in range(segments):
        k = (j + 1) % segments
        tris.append((bottom, ring[0][k], ring[0][j]))
        tris.append((top, ring[-1][j], ring[-1][k]))
    return tris


def check(tris, closed, volume=None):
    """Consistent winding (each directed edge once; closed: its reverse once too), no zero-area
    triangle, and for a closed mesh the signed volume (positive: normals point outward)."""
    edges = {}
    for t in tris:
        n = cross(sub(t[1], t[0]), sub(t[2], t[0]))
        assert any(abs(c) > 0 for c in n), "zero-area triangle %s" % (t,)
        for k in range(3):
            e = (t[k], t[(k + 1) % 3])
            assert e not in edges, "edge %s met twice in one direction" % (e,)
            edges[e] = True
    if closed:
        assert all((b, a) in edges for a, b in edges), "an edge without its twin: not closed"
        v = sum(sum(a * c for a, c in zip(t[0], cross(t[1], t[2]))) for t in tris) / 6
        assert v > 0, "normals point inwards (volume %g)" % v
        if volume is not None:
            assert abs(v - volume) < 1e-12 * max(1, volume), "volume %g, expected %g" % (v, volume)


def normal(t):
    n = cross(sub(t[1], t[0]), sub(t[2], t[0]))
    length = sum(c * c for c in n) ** 0.5
    return tuple(c / length + 0.0 for c in n)  # + 0.0: no "-0" in the text


def write_ascii(path, name, tris):
    with open(path, "w") as f:
        f.write("solid %s\n" % name)
        for t in tris:
            f.write("  facet normal %.9g %.9g %.9g\n    outer loop\n" % normal(t))
            for p in t:
                f.write("      vertex %.9g %.9g %.9g\n" % p)
            f.write("    endloop\n  endfacet\n")
        f.write("endsolid %s\n" % name)


def write_binary(path, header, tris):
    with open(path, "wb") as f:
        f.write(header.encode().ljust(80, b" ") + struct.pack("<I", len(tris)))
        for t in tris:
            f.write(struct.pack("<3f", *normal(t)))
            for p in t:
                f.write(struct.pack("<3f", *p))
            f.write(struct.pack("<H", 0))


def main():
    size = [h - l for l, h in zip(TANK_LO, TANK_HI)]
    tank = box(TANK_LO, TANK_HI)
    check(tank, True, size[0] * size[1] * size[2])
    write_ascii("dam_break_tank.stl", "dam_break_tank", tank)
    open_tank = box(TANK_LO, TANK_HI, lid=False)
    check(open_tank, False)
    write_binary("dam_break_tank_open.stl", "dam_break_tank_open: no lid at z = %g (apron)"
                 % TANK_HI[2], open_tank)
    block = l_block(TANK_LO[1], TANK_HI[1])
    check(block, True, (0.1 * 0.03 + 0.03 * 0.07) * size[1])
    write_ascii("l_block.stl", "l_block", block)
    large = box(TANK_LO, LARGE_TANK_HI, lid=False)
    check(large, False)
    write_binary("dam_break_large_tank_open.stl", "dam_break_large_tank_open: no lid (apron)",
                 large)
    hydro = box(HYDROSTATIC_LO, HYDROSTATIC_HI)
    check(hydro, True, 0.06 * 0.06 * 0.1)
    write_ascii("hydrostatic_tank.stl", "hydrostatic_tank", hydro)
    table = box(TABLE_LO, TABLE_HI)
    check(table, True, 1.0 * 1.0 * 0.05)
    write_ascii("table_top.stl", "table_top", table)
    dummy = dress_form()
    check(dummy, True)
    write_binary("dress_form.stl", "dress_form: a tailor's dummy, hips to neck (apron)", dummy)
    print("dam_break_tank.stl: %d triangles; dam_break_tank_open.stl: %d; l_block.stl: %d"
          % (len(tank), len(open_tank), len(block)))


if __name__ == "__main__":
    main()
