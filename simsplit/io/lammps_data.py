"""LAMMPS data files of ``atom_style atomic``: read (:func:`read_lammps_data`) and write
(:func:`write_lammps_data`).

What is read (https://docs.lammps.org/read_data.html): the title line; header counts (``atoms``,
``atom types``; bonds, angles, dihedrals, impropers and their types only if 0); the box
(``xlo xhi``, ``ylo yhi``, ``zlo zhi``; ``xy xz yz`` only if all 0: orthorhombic boxes); and the
sections ``Masses``, ``Atoms`` (``id type x y z`` with optional image flags ``ix iy iz``),
``Velocities`` (``id vx vy vz``), ``Pair Coeffs`` (``type epsilon sigma [cutoff]``),
``PairIJ Coeffs`` (``t1 t2 epsilon sigma [cutoff]``) and ``Atom Type Labels`` (``type label``;
Atoms may then name types by label). ``#`` starts a comment anywhere. Anything else (another
atom style, bonds, triclinic boxes) is refused with one line naming the file's line and what is
allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from simsplit.errors import InputFileError
from simsplit.io.atoms import AtomSystem

#: the sections an atom_style atomic file may hold
SECTIONS = ("Masses", "Atoms", "Velocities", "Pair Coeffs", "PairIJ Coeffs", "Atom Type Labels")
#: header counts that must be 0 (or absent) in an atomic file
_ZERO_COUNTS = ("bonds", "angles", "dihedrals", "impropers", "bond types", "angle types",
                "dihedral types", "improper types", "ellipsoids", "lines", "triangles", "bodies")
#: other headers LAMMPS writes that do not matter to an atomic file
_IGNORED = ("extra bond per atom", "extra angle per atom", "extra dihedral per atom",
            "extra improper per atom", "extra special per atom")
#: sections of other atom styles or force fields: named in the refusal
_FOREIGN = ("Bonds", "Angles", "Dihedrals", "Impropers", "Bond Coeffs", "Angle Coeffs",
            "Dihedral Coeffs", "Improper Coeffs", "Ellipsoids", "Lines", "Triangles", "Bodies",
            "BondBond Coeffs", "BondAngle Coeffs", "Bond Type Labels", "Angle Type Labels",
            "Dihedral Type Labels", "Improper Type Labels")

#: file names taken for LAMMPS data files (besides names starting with ``data.``)
SUFFIXES = (".data", ".lmp", ".lammps", ".lammpsdata")


class LammpsDataError(InputFileError):
    """A data file that cannot be read as ``atom_style atomic``; the message is one line."""


def is_lammps_data(path: str | Path) -> bool:
    """Whether ``path`` is named like a LAMMPS data file (``*.data``, ``*.lmp``, ``data.*``)."""
    p = Path(path)
    return p.suffix.lower() in SUFFIXES or p.name.lower().startswith("data.")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, text without comment and surrounding blanks); the title skipped."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise LammpsDataError(f"{path}: cannot be read: {exc}") from None
    for k, raw in enumerate(text.splitlines()[1:], start=2):
        yield k, raw.split("#", 1)[0].strip()


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts: dict[str, int] = {}
        self.bounds: dict[str, tuple[float, float]] = {}
        self.sections: dict[str, list[tuple[int, list[str]]]] = {}

    def fail(self, line: int, what: str) -> LammpsDataError:
        return LammpsDataError(f"{self.path} line {line}: {what}")

    def parse(self) -> None:
        lines = list(_lines(self.path))
        raw = self.path.read_text().splitlines()
        k = 0
        while k < len(lines):  # header: up to the first section keyword
            num, text = lines[k]
            if text and _section_name(text) is not None:
                break
            if text:
                self._header(num, text)
            k += 1
        if "atoms" not in self.counts:
            raise LammpsDataError(f"{self.path}: no 'N atoms' line in the header")
        self.counts.setdefault("atom types", 1)
        while k < len(lines):
            num, text = lines[k]
            k += 1
            if not text:
                continue
            name = _section_name(text)
            if name is None:
                raise self.fail(num, f"expected a section keyword ({', '.join(SECTIONS)}), got "
                                     f"'{text}'")
            if name in _FOREIGN or name not in SECTIONS:
                raise self.fail(num, f"section '{name}' is not supported: atom_style atomic "
                                     f"files hold {', '.join(SECTIONS)}")
            if name in self.sections:
                raise self.fail(num, f"section '{name}' appears twice")
            hint = raw[num - 1].split("#", 1)[1].strip() if "#" in raw[num - 1] else ""
            if name == "Atoms" and hint and hint != "atomic":
                raise self.fail(num, f"Atoms section of atom_style '{hint}' is not "
                                     "supported (only atomic)")
            if name in ("Pair Coeffs", "PairIJ Coeffs") and hint and hint != "lj/cut":
                raise self.fail(num, f"{name} of pair style '{hint}' are not supported "
                                     "(only lj/cut)")
            want = self._rows(name)
            rows: list[tuple[int, list[str]]] = []
            while len(rows) < want and k < len(lines):
                num2, text2 = lines[k]
                if text2 and _section_name(text2) is not None:
                    break
                k += 1
                if text2:
                    rows.append((num2, text2.split()))
            if len(rows) < want:
                raise self.fail(num, f"section '{name}' has {len(rows)} entries, the header asks "
                                     f"for {want}")
            self.sections[name] = rows
        if "Atoms" not in self.sections and self.counts["atoms"] > 0:
            raise LammpsDataError(f"{self.path}: no Atoms section")

    def _rows(self, name: str) -> int:
        ntypes, natoms = self.counts["atom types"], self.counts["atoms"]
        return {"Masses": ntypes, "Atoms": natoms, "Velocities": natoms,
                "Pair Coeffs": ntypes, "PairIJ Coeffs": ntypes * (ntypes + 1) // 2,
                "Atom Type Labels": ntypes}[name]

    def _header(self, num: int, text: str) -> None:
        words = text.split()
        try:
            if len(words) >= 4 and words[2:4] in (["xlo", "xhi"], ["ylo", "yhi"],
                                                 ["zlo", "zhi"]):
                lo, hi = float(words[0]), float(words[1])
                if not hi > lo:
                    raise self.fail(num, f"box bounds {words[2]} {words[3]}: {lo} {hi} must "
                                         "have hi > lo")
                self.bounds[words[2][0]] = (lo, hi)
                return
            if words[3:] == ["xy", "xz", "yz"]:
                if any(float(w) != 0.0 for w in words[:3]):
                    raise self.fail(num, "triclinic box (xy xz yz not 0) is not supported: "
                                         "orthorhombic boxes only")
                return
            key = " ".join(words[1:])
            if key in ("atoms", "atom types") or key in _ZERO_COUNTS:
                n = int(words[0])
                if n < 0:
                    raise self.fail(num, f"'{key}' count {n} is negative")
                if key in _ZERO_COUNTS and n:
                    raise self.fail(num, f"{n} {key}: atom_style atomic has none (bonded "
                                         "models are not supported)")
                self.counts[key] = n
                return
            if key in _IGNORED:
                int(words[0])
                return
        except LammpsDataError:
            raise
        except ValueError:
            raise self.fail(num, f"cannot read the numbers of header line '{text}'") from None
        raise self.fail(num, f"unknown header line '{text}' (atomic files have 'N atoms', "
                             "'N atom types', 'lo hi xlo xhi' and the like)")


def _section_name(text: str) -> str | None:
    for name in SECTIONS + _FOREIGN:
        if text == name:
            return name
    words = text.split()
    if words and words[0][0].isalpha() and words[0] not in ("atoms", "atom"):
        return text  # an unknown keyword: refused by the caller
    return None


def read_lammps_data(path: str | Path) -> AtomSystem:
    """Read an ``atom_style atomic`` LAMMPS data file; rows come out sorted by atom id."""
    r = _Reader(Path(path))
    r.parse()
    p = r.path
    natoms, ntypes = r.counts["atoms"], r.counts["atom types"]
    if ntypes < 1:
        raise LammpsDataError(f"{p}: 'atom types' must be at least 1")
    lo, box = _box(r)
    labels = _type_labels(r, ntypes)
    ids, types, pos, img = _atoms(r, natoms, ntypes, labels)
    order = np.argsort(ids, kind="stable")
    dup = np.flatnonzero(np.diff(ids[order]) == 0)
    if dup.size:
        atom = ids[order][dup[0]]
        raise LammpsDataError(f"{p}: atom id {atom} appears twice in Atoms")
    if natoms and ids[order][0] < 1:
        raise LammpsDataError(f"{p}: atom ids must be positive, found {ids[order][0]}")
    rows_of = {int(i): k for k, i in enumerate(ids[order])}
    vel = _velocities(r, natoms, rows_of) if "Velocities" in r.sections else None
    masses = _masses(r, ntypes) if "Masses" in r.sections else None
    coeffs = _pair_coeffs(r, ntypes)
    return AtomSystem(positions=pos[order] - lo, box=box, origin=lo,
                      typeid=(types[order] - 1).astype(np.int32), type_names=labels,
                      ids=ids[order], images=img[order], masses=masses,
                      velocities=vel, pair_coeffs=coeffs,
                      source=str(p))


def _box(r: _Reader) -> tuple[np.ndarray, np.ndarray]:
    """The box's lower corner and edge lengths from the header's ``xlo xhi`` lines."""
    missing = [a for a in "xyz" if a not in r.bounds]
    if missing:
        raise LammpsDataError(f"{r.path}: no '{missing[0]}lo {missing[0]}hi' line in the header")
    lo = np.array([r.bounds[a][0] for a in "xyz"])
    return lo, np.array([r.bounds[a][1] for a in "xyz"]) - lo


def _type_labels(r: _Reader, ntypes: int) -> list[str]:
    """Each type's name: its label from ``Atom Type Labels``, else its number."""
    labels = [str(t + 1) for t in range(ntypes)]
    for num, w in r.sections.get("Atom Type Labels", []):
        t = _type_index(r, num, w, 2, "Atom Type Labels", "type label")
        labels[t] = w[1]
    return labels


def _atoms(r: _Reader, natoms: int, ntypes: int, labels: list[str]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ``Atoms`` section in file order: ids, types (1-based), positions, image flags."""
    by_label = {name: t + 1 for t, name in enumerate(labels)}
    ids = np.empty(natoms, np.int64)
    types = np.empty(natoms, np.int64)
    pos = np.empty((natoms, 3))
    img = np.zeros((natoms, 3), np.int64)
    for row, (num, w) in enumerate(r.sections.get("Atoms", [])):
        if len(w) not in (5, 8):
            raise r.fail(num, f"Atoms: expected 'id type x y z' or 'id type x y z ix iy iz' "
                              f"(atom_style atomic), got {len(w)} values")
        try:
            ids[row] = int(w[0])
            types[row] = by_label[w[1]] if w[1] in by_label and "Atom Type Labels" in \
                r.sections else int(w[1])
            pos[row] = [float(v) for v in w[2:5]]
            if len(w) == 8:
                img[row] = [int(v) for v in w[5:8]]
        except ValueError:
            raise r.fail(num, f"Atoms: cannot read '{' '.join(w)}' as id type x y z "
                              "[ix iy iz] (integers, numbers, integers)") from None
        if not 1 <= types[row] <= ntypes:
            raise r.fail(num, f"Atoms: atom {ids[row]} has type {types[row]}, the header has "
                              f"types 1 to {ntypes}")
        if not np.all(np.isfinite(pos[row])):
            raise r.fail(num, f"Atoms: atom {ids[row]} has a non-finite position")
    return ids, types, pos, img


def _velocities(r: _Reader, natoms: int, rows_of: dict[int, int]) -> np.ndarray:
    """The ``Velocities`` section, in the rows of the atoms sorted by id."""
    vel = np.full((natoms, 3), np.nan)
    for num, w in r.sections["Velocities"]:
        if len(w) != 4:
            raise r.fail(num, f"Velocities: expected 'id vx vy vz', got {len(w)} values")
        try:
            atom, v = int(w[0]), [float(x) for x in w[1:4]]
        except ValueError:
            raise r.fail(num, f"Velocities: cannot read '{' '.join(w)}' as id vx vy vz") \
                from None
        k = rows_of.get(atom)
        if k is None:
            raise r.fail(num, f"Velocities: atom {atom} is not in the Atoms section")
        if not np.isnan(vel[k, 0]):
            raise r.fail(num, f"Velocities: atom {atom} appears twice")
        vel[k] = v
    if not np.all(np.isfinite(vel)):
        raise LammpsDataError(f"{r.path}: Velocities has non-finite or missing entries")
    return vel


def _masses(r: _Reader, ntypes: int) -> np.ndarray:
    """The ``Masses`` section: one positive mass per type."""
    masses = np.full(ntypes, np.nan)
    for num, w in r.sections["Masses"]:
        t = _type_index(r, num, w, 2, "Masses", "type mass")
        masses[t] = _positive(r, num, w[1], "Masses", "mass")
    if np.any(np.isnan(masses)):
        raise LammpsDataError(f"{r.path}: Masses gives no mass for type "
                              f"{int(np.flatnonzero(np.isnan(masses))[0]) + 1}")
    return masses


def _type_index(r: _Reader, num: int, w: list[str], width: int, section: str,
                form: str) -> int:
    if len(w) < width:
        raise r.fail(num, f"{section}: expected '{form}', got {len(w)} values")
    try:
        t = int(w[0])
    except ValueError:
        raise r.fail(num, f"{section}: type '{w[0]}' is not an integer") from None
    if not 1 <= t <= r.counts["atom types"]:
        raise r.fail(num, f"{section}: type {t} outside 1 to {r.counts['atom types']}")
    return t - 1


def _positive(r: _Reader, num: int, text: str, section: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise r.fail(num, f"{section}: {what} '{text}' must be a positive number")
    return value


def _pair_coeffs(r: _Reader, ntypes: int) -> np.ndarray | None:
    """(epsilon, sigma, cutoff) per type pair from Pair Coeffs (i i; mixed pairs left NaN) or
    PairIJ Coeffs (every pair); a cutoff not given is NaN."""
    if "Pair Coeffs" not in r.sections and "PairIJ Coeffs" not in r.sections:
        return None
    out = np.full((ntypes, ntypes, 3), np.nan)
    for section, form, nt in (("Pair Coeffs", "type epsilon sigma [cutoff]", 1),
                              ("PairIJ Coeffs", "t1 t2 epsilon sigma [cutoff]", 2)):
        for num, w in r.sections.get(section, []):
            if len(w) not in (nt + 2, nt + 3):
                raise r.fail(num, f"{section}: expected '{form}' (lj/cut), got {len(w)} values")
            t1 = _type_index(r, num, w, nt + 2, section, form)
            t2 = _type_index(r, num, w[nt - 1:], 1, section, form)
            row = [_nonneg(r, num, w[nt], section, "epsilon"),
                   _positive(r, num, w[nt + 1], section, "sigma"),
                   _positive(r, num, w[nt + 2], section, "cutoff") if len(w) == nt + 3
                   else np.nan]
            out[t1, t2] = out[t2, t1] = row
    return out


def _nonneg(r: _Reader, num: int, text: str, section: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise r.fail(num, f"{section}: {what} '{text}' must be a number >= 0")
    return value


def write_lammps_data(path: str | Path, system: AtomSystem, title: str = "simsplit") -> None:
    """Write ``system`` as an ``atom_style atomic`` data file (every digit: ``%.17g``)."""
    s = system
    lo, hi = s.origin, s.origin + s.box
    out = [f"LAMMPS data file ({title})", "", f"{s.n_atoms} atoms",
           f"{s.n_types} atom types", ""]
    out += [f"{lo[k]:.17g} {hi[k]:.17g} {a}lo {a}hi" for k, a in enumerate("xyz")]
    if s.masses is not None:
        out += ["", "Masses", ""] + [f"{t + 1} {m:.17g}" for t, m in enumerate(s.masses)]
    if s.type_names != [str(t + 1) for t in range(s.n_types)]:
        out += ["", "Atom Type Labels", ""] + [f"{t + 1} {n}" for t, n in
                                               enumerate(s.type_names)]
    out += ["", "Atoms # atomic", ""]
    x = s.positions + s.origin
    out += [f"{i} {t + 1} {p[0]:.17g} {p[1]:.17g} {p[2]:.17g} {m[0]} {m[1]} {m[2]}"
            for i, t, p, m in zip(s.ids, s.typeid, x, s.images, strict=True)]
    if s.velocities is not None:
        out += ["", "Velocities", ""]
        out += [f"{i} {v[0]:.17g} {v[1]:.17g} {v[2]:.17g}"
                for i, v in zip(s.ids, s.velocities, strict=True)]
    Path(path).write_text("\n".join(out) + "\n")
