"""Fixtures of the Python package's tests: the `eddies` program to compare against, and small scenes."""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _program():
    """The `eddies` program: $EDDIES_BIN, else the workspace's release or test build."""
    named = os.environ.get("EDDIES_BIN")
    if named:
        return pathlib.Path(named)
    for build in ("release", "debug"):
        path = ROOT / "target" / build / "eddies"
        if path.is_file():
            return path
    pytest.fail(
        "no eddies program to compare with: build it (cargo build --release) or set EDDIES_BIN"
    )


@pytest.fixture(scope="session")
def cli():
    """Runs the `eddies` program with these arguments; fails the test on a non-zero exit."""
    program = _program()

    def run(*args, cwd=None):
        done = subprocess.run(
            [str(program), *map(str, args)], cwd=cwd, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done

    return run


# A 2D dam break small enough to step in milliseconds: the built-in scene on a 64² grid, two frames.
SMALL_REINT = [
    "domain.resolution=[64, 64]",
    "time.frames=2",
]


@pytest.fixture
def small_reint():
    """The built-in `dam-break-reint` scene on a 64² grid, two frames, and the `--set`s that make it."""
    import eddies

    scene = eddies.Scene.load("dam-break-reint")
    for s in SMALL_REINT:
        key, value = s.split("=", 1)
        scene.set(key, eval(value))
    return scene, SMALL_REINT
