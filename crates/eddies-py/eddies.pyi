"""Fluid simulation: reintegration tracking, PIC/FLIP/APIC liquids and vortex particles.

The types of the `eddies` module (built from crates/eddies-py with maturin). See docs/python.md.
"""

import os
from typing import Any, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str

class Error(Exception):
    """The base of every error eddies raises."""

class SceneError(Error):
    """A scene eddies cannot run: a syntax error, an unknown key, a value out of range, a missing file.

    The message is the CLI's, with the source line and a caret where there is one.
    """

    location: Optional[str]
    """`FILE:LINE:COL`, or the call that supplied the value (`Scene.set("time.fps", 0)`)."""
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    key: Optional[str]
    """The dotted key the error is about (`domain.resolution`), or None."""
    allowed: Optional[str]
    """What would be accepted, where that can be said."""

class DivergedError(Error):
    """The simulation blew up: a non-finite value, a runaway speed or a failed linear solve."""

class Scene:
    """A scene: its text, the values set on it, and the resolved scene they make, checked as
    `eddies run` checks it."""

    @staticmethod
    def load(source: Union[str, os.PathLike[str]]) -> Scene:
        """A scene file (`.toml`) or a built-in scene by name (see `scenes()`)."""
    @staticmethod
    def from_toml(text: str, name: str = "scene") -> Scene:
        """A scene from TOML text; `name` names its default output folder (`out/NAME`)."""
    @staticmethod
    def from_dict(scene: dict[str, Any], name: str = "scene") -> Scene:
        """A scene from a dict laid out as the scene file (nested dicts are tables, lists of dicts
        arrays of tables such as `region`)."""
    def set(self, key: str, value: Any) -> None:
        """Sets a dotted key (`reint.viscosity`, `region.0.density`), as `--set` does. A value the scene
        refuses raises SceneError and leaves the scene as it was."""
    def get(self, key: str) -> Any:
        """The resolved value of a dotted key, every default filled in (KeyError if there is none)."""
    def to_toml(self) -> str:
        """The resolved scene as TOML (what `eddies run` writes as scene.toml)."""
    @property
    def name(self) -> str: ...
    @property
    def method(self) -> str:
        """`reint`, `flip` or `vpm`."""
    @property
    def dim(self) -> int: ...
    @property
    def resolution(self) -> list[int]: ...
    @property
    def backend(self) -> str:
        """`cpu` or `gpu`."""
    @property
    def frames(self) -> int: ...
    @property
    def fps(self) -> float: ...

class Simulation:
    """A scene's simulation, built and stepped as `eddies run` builds and steps it.

    Steps release the GIL and run on the simulation's own thread pool; the state is bit-identical
    to the CLI's for the same scene, and for any number of threads.
    """

    def __init__(
        self, scene: Scene, threads: Optional[int] = None, backend: Optional[str] = None
    ) -> None:
        """`threads`: worker threads (None: one per core). `backend`: "cpu", "gpu", or None for the
        scene's own `backend`."""
    def step(self, dt: Optional[float] = None) -> dict[str, Any]:
        """One step; its record has the keys of a stats.jsonl line (`step`, `time`, `dt`, `substeps`,
        `wall_ms`, `stage_ms`, then the method's quantities). Without `dt`, the step `eddies run` takes."""
    def step_frame(self) -> list[dict[str, Any]]:
        """Steps to the end of the frame in progress; the steps' records."""
    def run(
        self,
        frames: Optional[int] = None,
        out: Union[str, os.PathLike[str], None] = None,
        progress: Optional[bool] = None,
    ) -> dict[str, Any]:
        """Runs on to `frames` frames in all, writing what `eddies run` writes into `out`
        (default out/<scene name>). Ctrl-C stops it between steps and raises KeyboardInterrupt.
        Returns `out`, `frames`, `steps`, `time`, `wall_s`, `frames_held_s`, `animation`."""
    def field(self, name: str) -> npt.NDArray[np.float32]:
        """A grid field, shape (ny, nx) or (nz, ny, nx), C order, SI units (as output.npy)."""
    def particles(self) -> npt.NDArray[np.float32]:
        """Particle positions (m), shape (n, dim)."""
    def tracers(self) -> npt.NDArray[np.float32]:
        """Passive tracer positions (m), shape (n, dim); empty where the method has none."""
    def particle_values(self, name: str) -> npt.NDArray[np.float32]:
        """A per-particle quantity, one value per particle."""
    def apply_impulse(
        self, center: Sequence[float], radius: float, velocity: Sequence[float]
    ) -> None:
        """Adds `velocity` (m/s) within `radius` (m) of `center` (m), falling off as (1 - (d/r)^2)^2."""
    def checksum(self) -> int:
        """The CRC-32 of the saved state (as its checkpoint file carries): equal when two states are equal bit for bit."""
    def max_dt(self, cfl: Optional[float] = None) -> float:
        """The largest time step (s) at CFL number `cfl` (None: the scene's time.cfl)."""
    @property
    def time(self) -> float:
        """Simulated time (s)."""
    @property
    def steps(self) -> int: ...
    @property
    def frames_done(self) -> int:
        """Frames completed on the CLI's frame clock."""
    @property
    def dim(self) -> int: ...
    @property
    def resolution(self) -> list[int]:
        """Cells per axis, [nx, ny] or [nx, ny, nz]."""
    @property
    def cell_size(self) -> float:
        """Cell edge (m)."""
    @property
    def method(self) -> str: ...
    @property
    def fields(self) -> list[str]:
        """The names `field` takes."""
    @property
    def particle_value_names(self) -> list[str]: ...
    @property
    def stages(self) -> list[str]:
        """The stages a step times, in order (the keys of a record's `stage_ms`)."""
    @property
    def memory_bytes(self) -> int: ...

def scenes() -> list[dict[str, str]]:
    """The built-in scenes: `name` and `description`."""

def validate(
    filter: Optional[str] = None, quick: bool = False, soak: bool = False
) -> list[dict[str, Any]]:
    """The validation cases whose name contains `filter`; rows as `eddies validate --json`."""

def bench(
    filter: Optional[str] = None, quick: bool = False, backend: str = "cpu"
) -> list[dict[str, Any]]:
    """The benchmarks whose name contains `filter`; rows as `eddies bench --json`."""
