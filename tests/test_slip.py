"""Free-slip walls (issue #21): x faces in 2D, y and z faces in 3D (z the split axis): a plug
flow driven along a periodic axis stays a plug on any split, slip side walls and a no-slip pair
give the 2D Poiseuille profile in 3D, the emulated CUDA C kernels match the CPU's bit for bit,
bad input is refused (docs/bodies.md, "Free-slip walls")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from simsplit import Simulation
from simsplit.backends.cuda_c import source
from simsplit.case import validate_case
from simsplit.errors import CaseError
from simsplit.numerics import flags as fl
from simsplit.numerics.lattice import D2Q9_C, D2Q9_SPECULAR, D3Q19, specular_table
from tests.conftest import fluid_case, mpirun, needs_mpiexec
from tests.test_kernels_compile import (
    PAIRS,
    _data,
    _emulation_3d,
    _padded_copy,
    _ptr,
    _same_bits,
)

FORCE = 1e-5


def _case(shape: tuple[int, ...], bounds: dict[str, Any], force: list[float], n: int,
          **over: Any) -> dict[str, Any]:
    case = fluid_case(shape[0], shape[1], n, fluid__reynolds=None, fluid__viscosity=0.05,
                      fluid__body_force=force, **over)
    case["domain"] = {"shape": list(shape), "boundaries": {"lid": False, **bounds}}
    return case


def _runs(shape, bounds, force, steps, splits=(1, 2, 3, 4), **over) -> list[np.ndarray]:
    out = []
    for n in splits:
        sim = Simulation(_case(shape, bounds, force, n, **over))
        sim.step(steps)
        out.append(sim.velocity())
    return out


def test_specular_table_reflects_the_masked_axes() -> None:
    for c, table in ((D2Q9_C, D2Q9_SPECULAR), (D3Q19.c, specular_table(D3Q19.c))):
        for q in range(len(c)):
            assert table[q, 0] == q
            for mask in range(table.shape[1]):
                sign = np.array([-1 if mask >> a & 1 else 1 for a in range(c.shape[1])])
                np.testing.assert_array_equal(c[table[q, mask]], sign * c[q])


@pytest.mark.parametrize("bounds, force, axis", [
    ({"x": "slip", "y": "periodic"}, [0.0, FORCE], 1),  # along the split axis
    ({"x_low": "slip", "x_high": "slip", "y": "periodic"}, [0.0, FORCE], 1),  # per face
    ({"x": "slip", "y": "slip"}, [0.0, 0.0], None),  # slip corners: the fluid stays at rest
])
def test_2d_x_slip_keeps_a_plug_on_any_split(bounds, force, axis) -> None:
    """Free-slip x faces, a body force along a periodic y: no wall friction, so the flow stays
    a plug accelerating as (n - 1/2) F (Guo's half-step shift), the same bits on 1-4 slabs;
    with four slip faces (slip-slip corners) a fluid at rest stays at rest."""
    runs = _runs((10, 12), bounds, force, 120)
    if axis is not None:
        err = np.abs(runs[0][..., axis] / (FORCE * 119.5) - 1).max()
        print(f"2D x slip plug: max relative error {err:.2e}")
        assert err < 1e-9 and np.abs(runs[0][..., 1 - axis]).max() < 1e-15
    else:
        assert np.abs(runs[0]).max() < 1e-15
    for n, u in enumerate(runs[1:], start=2):
        assert np.array_equal(u, runs[0]), f"{n} slabs differ"


@pytest.mark.parametrize("bounds, force, axis", [
    ({"x": "periodic", "y": "slip", "z": "slip"}, [FORCE, 0.0, 0.0], 0),
    ({"x": "slip", "y": "slip", "z": "periodic"}, [0.0, 0.0, FORCE], 2),  # along the split axis
])
def test_3d_slip_keeps_a_plug_on_any_split(bounds, force, axis) -> None:
    """D3Q19 with free-slip y and z faces (z: the slabs' ghost planes at the domain's ends), or
    x and y faces with the flow along the split axis: a plug accelerating as (n - 1/2) F to
    1e-9, the same bits on 1-4 slabs."""
    runs = _runs((6, 5, 8), bounds, force, 60)
    err = np.abs(runs[0][..., axis] / (FORCE * 59.5) - 1).max()
    print(f"3D slip plug {bounds}: max relative error {err:.2e}")
    assert err < 1e-9
    assert np.abs(np.delete(runs[0], axis, axis=-1)).max() < 1e-15
    for n, u in enumerate(runs[1:], start=2):
        assert np.array_equal(u, runs[0]), f"{n} slabs differ"


@pytest.mark.parametrize("shape, bounds, force, body", [
    ((14, 16), {"x": "slip", "y": "periodic"}, [2e-5, 3e-5],
     {"name": "b", "shape": "box", "lower": [0, 5], "upper": [3, 8]}),
    ((14, 16), {"x_low": "slip", "x_high": "outlet", "y": "slip"}, [-2e-5, 3e-5],
     {"name": "b", "shape": "box", "lower": [0, 0], "upper": [3, 3]}),
    ((9, 7, 12), {"x": "periodic", "y": "slip", "z": "slip"}, [3e-5, 1e-5, 2e-5],
     {"name": "s", "shape": "sphere", "centre": [4.1, 2.4, 3.3], "radius": 2.2}),
    ((9, 7, 12), {"x": "slip", "y": "wall", "z": "slip"}, [3e-5, 1e-5, -2e-5],
     {"name": "s", "shape": "sphere", "centre": [2.3, 3.4, 9.3], "radius": 2.2}),
])
def test_slip_with_a_body_is_bitwise_identical_across_splits(shape, bounds, force,
                                                             body) -> None:
    """Slip faces with a body touching one, a force with components along every axis (a flow
    that is no plug): 1, 2, 3, 4 slabs and uneven weights give the same bits; the body sits
    across slab faces and next to the split axis's slip face."""
    runs = []
    for n, weights in ((1, None), (2, None), (3, None), (4, None), (3, [3, 1, 2])):
        case = _case(shape, bounds, force, n, decomposition__weights=weights)
        case["domain"]["bodies"] = [body]
        if "outlet" in bounds.values():
            case["domain"]["outlet"] = {"kind": "zero_gradient", "pressure_weight": 0.02}
        sim = Simulation(case)
        sim.step(40)
        runs.append((sim.velocity(), sim.density()))
    assert np.abs(runs[0][0]).max() > 1e-4
    for k, (u, rho) in enumerate(runs[1:], start=1):
        assert np.array_equal(u, runs[0][0]) and np.array_equal(rho, runs[0][1]), k


@pytest.mark.parametrize("bounds, across", [
    ({"x": "periodic", "y": "wall", "z": "slip"}, 1),  # no-slip pair y, slip z (split axis)
    ({"x": "periodic", "y": "slip", "z": "wall"}, 2),  # no-slip pair z, slip y
])
def test_3d_slip_side_walls_give_the_2d_poiseuille_profile(bounds, across) -> None:
    """A channel along a periodic x between a no-slip pair with free-slip side walls: the
    profile across the no-slip pair is the 2D Poiseuille parabola F y (H - y) / (2 nu)
    (halfway walls, TRT at the magic 3/16: exact up to round-off), the same along the slip
    axis; 2 and 3 slabs give the same bits."""
    nu, h = 0.05, 6
    shape = [4, 5, 6]
    shape[across] = h
    runs = _runs(tuple(shape), bounds, [FORCE, 0.0, 0.0], 1500, splits=(1, 3))
    u = runs[0][..., 0]  # (nz, ny, nx)
    pos = np.arange(h) + 0.5
    exact = FORCE * pos * (h - pos) / (2 * nu)
    profile = np.moveaxis(u, 2 - across, 0)  # the no-slip axis first
    err = np.abs(profile - exact.reshape(-1, *[1] * (profile.ndim - 1))).max() / exact.max()
    print(f"3D Poiseuille between slip side walls {bounds}: max relative error {err:.2e} "
          f"(u_max {u.max():.6e}, exact {exact.max():.6e})")
    assert err < 1e-6
    assert np.abs(runs[0][..., 1:]).max() < 1e-15
    assert np.array_equal(runs[1], runs[0])


DRIVER = """
import json, sys
import numpy as np
from simsplit import Simulation
sim = Simulation(json.loads(open(sys.argv[1]).read()))
sim.step(30)
u, rho = sim.velocity(), sim.density()
if sim.context.rank == 0:
    np.savez(sys.argv[2], velocity=u, density=rho, size=sim.context.size)
"""


@needs_mpiexec
@pytest.mark.mpi
def test_mpiexec_z_slip_matches_one_process(tmp_path) -> None:
    """3D with slip y and z faces and a sphere on the z = 0 slip face: 3 ranks under mpiexec
    (ranks own the slabs whose ghost planes are the slip faces) give one process's bits."""
    import json

    case = _case((8, 6, 12), {"x": "periodic", "y": "slip", "z": "slip"}, [3e-5, 1e-5, 2e-5],
                 3, run__transport="auto")
    case["domain"]["bodies"] = [{"name": "s", "shape": "sphere", "centre": [3.1, 2.2, 2.1],
                                 "radius": 2.0}]
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    (tmp_path / "driver.py").write_text(DRIVER)
    out = tmp_path / "fields.npz"
    proc = mpirun(3, [str(tmp_path / "driver.py"), str(path), str(out)], timeout=600)
    assert proc.returncode == 0, proc.stderr
    got = np.load(out)
    assert int(got["size"]) == 3
    case["decomposition"]["subdomains"] = 1
    sim = Simulation(case)
    sim.step(30)
    assert np.abs(sim.velocity()).max() > 1e-4
    assert np.array_equal(got["velocity"], sim.velocity())
    assert np.array_equal(got["density"], sim.density())


@pytest.mark.parametrize("bounds, key, match", [
    ({"z": "slip", "lid": True}, "domain.boundaries.lid", "needs domain.boundaries.z: wall"),
    ({"y": "slip", "lid": True}, "domain.boundaries.lid", None),
    ({"x": "periodic", "x_low": "slip"}, "domain.boundaries.x_low", "not allowed with"),
])
def test_bad_slip_input_is_refused(bounds, key, match) -> None:
    case = _case((6, 5, 8), {"lid": False, **bounds}, [0.0, 0.0, 0.0], 1)
    if match is None:  # a lid on z with y slip: allowed
        validate_case(case)
        return
    with pytest.raises(CaseError, match=key + ".*" + match):
        validate_case(case)


def test_slip_refuses_in_place_streaming_and_a_2d_lid() -> None:
    case = _case((6, 5, 8), {"y": "slip"}, [0.0, 0.0, 0.0], 1)
    case["run"]["streaming"] = "aa"
    with pytest.raises(CaseError, match="run.streaming: aa is not allowed with .*free-slip"):
        validate_case(case)
    case = _case((8, 8), {"y": "slip", "lid": True}, [0.0, 0.0], 1)
    with pytest.raises(CaseError, match="domain.boundaries.lid: a lid needs domain.boundaries.y"):
        validate_case(case)
    case = _case((8, 8), {"x": "slip"}, [0.0, 0.0], 1)
    case["domain"]["boundaries"]["x"] = "free"
    with pytest.raises(CaseError, match="domain.boundaries.x"):
        validate_case(case)


def test_slip_slabs_take_the_bodies_kernel_with_the_slip_rule() -> None:
    """The launcher's pick: a slab whose flags hold SLIP takes the variant with every rule."""
    for kind in range(3):
        assert source.d3q19_bodies_open(fl.SLIP, kind) == "slip"
        assert source.d3q19_bodies_open(fl.INLET | fl.OUTLET | fl.SLIP, kind) == "slip"
    assert source.d3q19_bodies_open(fl.INLET | fl.OUTLET, 0) == "pressure_outlet"
    assert source.d3q19_bodies_open(fl.INLET | fl.OUTLET, 1) == "any_outlet"
    assert source.d3q19_bodies_open(0, 0) == "walls"


@pytest.fixture(scope="module")
def emulated_bodies_3d(tmp_path_factory):
    """d3q19.cu as host C++ with the bodies kernel's launchers only (the slip rule's)."""
    return _emulation_3d(tmp_path_factory, 1, parts=("BODIES",))


@pytest.mark.parametrize("precision, storage", PAIRS)
@pytest.mark.parametrize("x_kinds, faces, periodic_x", [
    (("wall", "wall"), ("SLIP", "HALO"), False),
    (("periodic", "periodic"), ("HALO", "SLIP"), True),
    (("slip", "outlet"), ("SLIP", "SLIP"), False),
    (("inlet", "slip"), ("HALO", "HALO"), False)])
@pytest.mark.parametrize("padded", [False, True])
def test_emulated_d3q19_slip_matches_cpu(emulated_bodies_3d, precision, storage, x_kinds,
                                         faces, periodic_x, padded) -> None:
    """D3Q19 free-slip y faces and z faces (the slab's ghost planes at the domain's ends; halo
    faces beside them), x faces walls, periodic, slip, an inlet or an outlet, a body touching
    a y slip face: the CUDA C bodies kernel (the variant the launcher picks for a slip slab)
    gives the CPU kernel's bits, fp16 storage included."""
    import ctypes

    from simsplit.backends.cpu import CPUBackend
    from simsplit.backends.cpu.d3q19 import raw_view
    from simsplit.backends.layout import field_strides
    from simsplit.fluid.block import D3Q19Block, Face
    from simsplit.fluid.geometry.grid import GridGeometry
    from simsplit.numerics.lbm_params import D3Q19Params

    nx, ny, nz = 11, 6, 5
    solid = np.zeros((nz, ny, nx), dtype=bool)
    solid[1:4, 0:2, 4:6] = True  # on the slip face y = 0
    inflow = np.full((nz, ny), 0.03 if x_kinds[0] == "inlet" else 0.0)
    geometry = GridGeometry(solid, x_kinds, inflow, False, y_slip=True)
    params = D3Q19Params(1 / 0.8, 1 / 1.2, 0.0, 1e-5, 2e-5, -1e-5, periodic_x, False,
                         inlet_scale=0.6)
    block = D3Q19Block(CPUBackend(), nx, ny, nz, 0, tuple(Face[f] for f in faces), params,
                       precision, storage, geometry=geometry)
    assert block.open_faces & fl.SLIP and (block.flags[1:-1, 0] == fl.SLIP).all()
    rng = np.random.default_rng(9)
    dev = 0.04 * rng.standard_normal((19, nz + 2, ny + 2, nx + 2))
    full = block.storage.encode(D3Q19.w[:, None, None, None] * (1 + dev), D3Q19.w)
    full = full.astype(block.f_src.dtype)
    flags, inlet = block.flags, block.inlet
    cpu_dst = np.zeros_like(full)
    cpu_macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    block.kernels.stream_collide(full, cpu_dst, flags, *cpu_macro, (1, nz + 1), params, True,
                                 inlet=inlet)
    f_src = full
    if padded:
        f_src, flags = _padded_copy(full), _padded_copy(flags)
    fn = getattr(emulated_bodies_3d, f"bodies3_{block.dtype.name}_{block.storage.name}")
    c_int, c_dbl = ctypes.c_int, ctypes.c_double
    variant = source.d3q19_bodies_open(block.open_faces, params.outlet_kind)
    emu_dst = _padded_copy(np.zeros_like(full)) if padded else np.zeros_like(full)
    macro = [np.zeros((nz, ny, nx), block.dtype) for _ in range(4)]
    strides = [ctypes.c_longlong(v) for v in field_strides(f_src, flags, emu_dst)]
    fn(*(_data(raw_view(a)) for a in (f_src, emu_dst, flags)), *(_ptr(a) for a in macro),
       c_int(nx), c_int(ny), c_int(nz), *strides, c_int(1), c_int(nz + 1),
       c_dbl(params.omega_plus), c_dbl(params.omega_minus), c_dbl(0.0),
       c_dbl(params.force_x), c_dbl(params.force_y), c_dbl(params.force_z),
       c_int(int(periodic_x)), c_int(0), c_int(1), _ptr(inlet), c_dbl(params.inlet_scale),
       c_dbl(params.outlet_density), _data(np.full(1, -1.0, block.dtype)),
       c_int(params.outlet_kind), *(c_dbl(v) for v in params.convective_weights),
       c_dbl(params.outlet_pressure_weight), _ptr(np.zeros(1, block.dtype)),
       c_int(source.D3Q19_BODIES_OPEN.index(variant)), c_int(0), _data(raw_view(f_src)),
       c_int(0), c_int(1), c_int(nx + 1))  # every column
    fluid = ~solid
    interior = (slice(None), *(slice(1, -1),) * 3)
    _same_bits(emu_dst[interior][:, fluid], cpu_dst[interior][:, fluid])
    for got, want in zip(macro, cpu_macro, strict=True):
        np.testing.assert_array_equal(got[fluid], want[fluid])
