"""What stepping from Python costs over the program, and what a field costs to read: the Python package's
figures in docs/PERFORMANCE.md.

    python crates/eddies-py/bench/overhead.py [--eddies target/release/eddies] [--repeats 5] [--json]

1. A 256² `dam-break-reint` stepped 1000 times: `eddies run` against a loop of `sim.step()` from Python, and
   against one `sim.step_frame()` (the frame's 1000 steps in one call), on the same scene, the same steps. The program's 1000 steps are the difference between its runs of two
   frames and of one frame of 1000 steps each (process start, set-up and the first frame cancel; the second
   frame's picture, a few ms, stays in). Alternated, the median of each.
2. `sim.field("density")` of a 1024² grid: the median of 50 reads.
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import tempfile
import time

import eddies

ROOT = pathlib.Path(__file__).resolve().parents[3]
SETS = ["domain.resolution=[256, 256]", "time.frames=2", "time.steps_per_frame=1000"]
STEPS = 1000


def scene(sets):
    s = eddies.Scene.load("dam-break-reint")
    for kv in sets:
        key, value = kv.split("=", 1)
        s.set(key, json.loads(value))
    return s


def cli_seconds(program, out):
    """The program's wall time for 1000 steps: a run of two frames less a run of one."""
    walls = []
    for frames in (1, 2):
        args = [str(program), "run", "dam-break-reint", "--out", str(out), "-q", "--frames", str(frames)]
        for kv in SETS:
            args += ["--set", kv]
        start = time.perf_counter()
        subprocess.run(args, capture_output=True, text=True, check=True)
        walls.append(time.perf_counter() - start)
    return walls[1] - walls[0]


def python_seconds():
    """1000 calls of `sim.step()`."""
    sim = eddies.Simulation(scene(SETS))
    start = time.perf_counter()
    for _ in range(STEPS):
        sim.step()
    return time.perf_counter() - start


def frame_seconds():
    """One `sim.step_frame()`: the frame's 1000 steps in one call."""
    sim = eddies.Simulation(scene(SETS))
    start = time.perf_counter()
    records = sim.step_frame()
    assert len(records) == STEPS
    return time.perf_counter() - start


def field_seconds(reads=50):
    sim = eddies.Simulation(scene(["domain.resolution=[1024, 1024]"]))
    sim.step()
    times = []
    for _ in range(reads):
        start = time.perf_counter()
        sim.field("density")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eddies", default=str(ROOT / "target" / "release" / "eddies"))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args()
    cli, py, frame = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.repeats):
            cli.append(cli_seconds(a.eddies, pathlib.Path(tmp) / f"run{i}"))
            py.append(python_seconds())
            frame.append(frame_seconds())
    cli_s, py_s, frame_s = (statistics.median(x) for x in (cli, py, frame))
    rows = [
        ("python-overhead", "256x256", "cli-1000-steps", cli_s * 1e3, "ms"),
        ("python-overhead", "256x256", "step-1000-calls", py_s * 1e3, "ms"),
        ("python-overhead", "256x256", "step-overhead", (py_s / cli_s - 1) * 100, "%"),
        ("python-overhead", "256x256", "step-frame-1000", frame_s * 1e3, "ms"),
        ("python-overhead", "256x256", "frame-overhead", (frame_s / cli_s - 1) * 100, "%"),
        ("python-field", "1024x1024", "field-density", field_seconds() * 1e3, "ms"),
    ]
    for bench, size, metric, value, unit in rows:
        if a.json:
            print(json.dumps(dict(bench=bench, size=size, metric=metric, value=value, unit=unit)))
        else:
            print(f"{bench:<16} {size:>9}  {metric:<18} {value:10.2f} {unit}")


if __name__ == "__main__":
    main()
