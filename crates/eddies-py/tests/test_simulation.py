"""Simulations from Python against the `eddies` program on the same scene: the same records, arrays and bits."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import eddies


def bits(a):
    """The array's bits, so that equality is exact (and NaN equals itself)."""
    return np.ascontiguousarray(a).view(np.uint32)


def cli_frames(cli, tmp_path, sets, frames):
    """Runs the program on the small dam break with NPY output and returns its folder."""
    out = tmp_path / "cli"
    args = ["run", "dam-break-reint", "--out", out, "--frames", frames, "-q"]
    for s in sets + ["output.npy=true"]:
        args += ["--set", s]
    cli(*args)
    return out


def test_a_step_record_has_the_keys_of_a_stats_line(cli, tmp_path, small_reint):
    scene, sets = small_reint
    out = cli_frames(cli, tmp_path, sets, 1)
    first = json.loads((out / "stats.jsonl").read_text().splitlines()[0])
    record = eddies.Simulation(scene).step()
    assert list(record) == list(first)
    assert record["step"] == 1 and record["dt"] > 0
    assert list(record["stage_ms"]) == list(first["stage_ms"])
    # Quantities are the same bits as the program's: the same scene, the same first step.
    for key in ("time", "dt", "mass", "kinetic_energy", "momentum"):
        assert record[key] == first[key], key


def test_fields_and_particles_match_the_programs_npy_bit_for_bit(cli, tmp_path, small_reint):
    scene, sets = small_reint
    out = cli_frames(cli, tmp_path, sets, 2)
    sim = eddies.Simulation(scene)
    for frame in range(2):
        records = sim.step_frame()
        assert records and sim.frames_done == frame + 1
        mass = np.load(out / f"field_mass_{frame:05d}.npy")
        field = sim.field("mass")
        assert field.dtype == np.float32 and field.flags["C_CONTIGUOUS"]
        assert field.shape == mass.shape == (64, 64)
        assert np.array_equal(bits(field), bits(mass)), f"frame {frame}"
        points = np.load(out / f"particles_{frame:05d}.npy")
        assert sim.particles().shape == points.shape
        assert np.array_equal(bits(sim.particles()), bits(points))
    lines = (out / "stats.jsonl").read_text().splitlines()
    assert sim.steps == len(lines)
    assert sim.time == json.loads(lines[-1])["time"]


def test_run_writes_what_the_program_writes(cli, tmp_path, small_reint):
    scene, sets = small_reint
    scene.set("output.npy", True)
    expected = cli_frames(cli, tmp_path, sets, 2)
    sim = eddies.Simulation(scene)
    summary = sim.run(out=tmp_path / "py", progress=False)
    assert summary["frames"] == 2 and summary["steps"] == sim.steps
    written = sorted(p.name for p in (tmp_path / "py").iterdir() if not p.name.startswith("."))
    assert written == sorted(p.name for p in expected.iterdir() if not p.name.startswith("."))
    for name in ("field_mass_00001.npy", "particles_00001.npy"):
        assert np.array_equal(
            bits(np.load(tmp_path / "py" / name)), bits(np.load(expected / name))
        ), name
    py_stats = [json.loads(l) for l in (tmp_path / "py" / "stats.jsonl").read_text().splitlines()]
    cli_stats = [json.loads(l) for l in (expected / "stats.jsonl").read_text().splitlines()]
    assert [r["time"] for r in py_stats] == [r["time"] for r in cli_stats]
    # On from where it stands: frames in all, so asking for those done is refused.
    with pytest.raises(ValueError, match="has 2 frames already"):
        sim.run(frames=2, out=tmp_path / "again", progress=False)


def test_the_state_is_the_same_for_any_thread_count(small_reint):
    scene, _ = small_reint
    one, two = eddies.Simulation(scene, threads=1), eddies.Simulation(scene, threads=2)
    for _ in range(5):
        one.step()
        two.step()
    assert one.checksum() == two.checksum()
    assert np.array_equal(bits(one.field("density")), bits(two.field("density")))
    # The checksum tells states apart.
    one.step()
    assert one.checksum() != two.checksum()


def test_an_impulse_pushes_the_fluid_where_it_is_given(small_reint):
    scene, _ = small_reint
    still, pushed = eddies.Simulation(scene), eddies.Simulation(scene)
    # Inside the water column (x 0–0.3 m, y 0–0.6 m of the 1 m tank), pushing along +x.
    pushed.apply_impulse([0.15, 0.3], 0.1, [1.0, 0.0])
    still.step(1e-4)
    pushed.step(1e-4)
    du = pushed.field("velocity_x") - still.field("velocity_x")
    n = du.shape[0]
    inside = du[int(0.25 * n) : int(0.35 * n), int(0.1 * n) : int(0.2 * n)]
    assert inside.mean() > 0.5, inside.mean()
    assert abs(du[:, int(0.7 * n) :]).max() < 1e-3
    with pytest.raises(ValueError, match="components"):
        pushed.apply_impulse([0.1, 0.2, 0.3], 0.1, [1.0, 0.0])


def test_bad_input_to_a_step_and_unknown_names_raise():
    sim = eddies.Simulation(eddies.Scene.load("dye-drop"))
    with pytest.raises(ValueError, match="must be positive"):
        sim.step(-1.0)
    with pytest.raises(KeyError, match="no field"):
        sim.field("no-such-field")
    with pytest.raises(ValueError, match="does not take impulses"):
        sim.apply_impulse([0, 0, 0], 0.1, [1, 0, 0])
    assert sim.tracers().shape[1] == 3


def test_steps_release_the_gil(small_reint):
    scene, _ = small_reint
    # A step of tens of milliseconds: a grid of 2048² on one thread.
    scene.set("domain.resolution", [2048, 2048])
    sim = eddies.Simulation(scene, threads=1)
    walls = []

    def stepping():
        for _ in range(3):
            walls.append(sim.step(2e-4)["wall_ms"] / 1e3)

    worker = threading.Thread(target=stepping)
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    worker.join()
    gaps = np.diff(ticks)
    # Holding the GIL through a step would stall this loop for the whole step.
    assert gaps.max() < 0.5 * min(walls), (gaps.max(), walls)


def test_ctrl_c_stops_a_run_between_steps_and_keeps_what_was_written(tmp_path):
    script = textwrap.dedent(
        f"""
        import eddies
        scene = eddies.Scene.load("dam-break-reint")
        scene.set("domain.resolution", [128, 128])
        sim = eddies.Simulation(scene, threads=1)
        try:
            sim.run(frames=10000, out={str(tmp_path / "run")!r}, progress=False)
        except KeyboardInterrupt as e:
            print("interrupted at step", sim.steps, flush=True)
            print(str(e), flush=True)
            sim.step()
            print("stepped on to", sim.steps, flush=True)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    stats = tmp_path / "run" / "stats.jsonl"
    deadline = time.monotonic() + 120
    while not (tmp_path / "run" / "frame_00001.png").exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "no frame within two minutes"
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("interrupted at step"), out
    assert "SIGINT" in out and "kept" in out, out
    steps = int(lines[0].split()[-1])
    assert int(lines[-1].split()[-1]) == steps + 1
    # stats.jsonl holds every step taken, the last one complete.
    records = [json.loads(l) for l in stats.read_text().splitlines()]
    assert records[-1]["step"] == steps


def test_validate_and_bench_return_their_rows():
    rows = eddies.validate("reint/mass-conservation-2d", quick=True)
    assert [r["case"] for r in rows] == ["reint/mass-conservation-2d"]
    assert set(rows[0]) >= {"case", "measured", "reference", "tolerance", "unit", "pass"}
    assert all(r["pass"] for r in rows)
    rows = eddies.bench("reint-2d-step", quick=True)
    assert rows and set(rows[0]) == {"bench", "size", "metric", "value", "unit", "threads", "device"}
    with pytest.raises(eddies.SceneError, match="no benchmark matches"):
        eddies.bench("no-such-bench")


def test_the_gpu_backend_steps_and_repeats_bit_for_bit(small_reint):
    scene, _ = small_reint
    try:
        runs = [eddies.Simulation(scene, backend="gpu") for _ in range(2)]
    except eddies.SceneError as e:
        if os.environ.get("EDDIES_REQUIRE_GPU") == "1":
            raise
        pytest.skip(f"no GPU adapter: {e}")
    cpu = eddies.Simulation(scene)
    records = {id(sim): [sim.step() for _ in range(5)] for sim in runs + [cpu]}
    # The device's diagnostics are read back with each step: the record is as complete as the CPU's.
    assert list(records[id(runs[0])][-1]) == list(records[id(cpu)][-1])
    first, second = runs
    assert first.checksum() == second.checksum()
    assert np.array_equal(bits(first.field("mass")), bits(second.field("mass")))
    # Reintegration tracking keeps the mass on the GPU as on the CPU (to float32 rounding of the sums).
    assert first.field("mass").sum() == pytest.approx(cpu.field("mass").sum(), rel=1e-5)


def test_flip_solves_its_pressure_on_the_gpu():
    scene = eddies.Scene.load("dam-break")
    scene.set("domain.resolution", [64, 32])
    try:
        gpu = eddies.Simulation(scene, backend="gpu")
    except eddies.SceneError as e:
        if os.environ.get("EDDIES_REQUIRE_GPU") == "1":
            raise
        pytest.skip(f"no GPU adapter: {e}")
    cpu = eddies.Simulation(scene)
    for _ in range(3):
        a, b = cpu.step(), gpu.step()
        assert list(a) == list(b)
        # The same conjugate gradients to the same tolerance: iterations within one, volume to 1e-6.
        assert abs(a["pressure_iterations"] - b["pressure_iterations"]) <= 1
        assert b["pressure_residual"] <= 1e-6
        assert b["fluid_volume"] == pytest.approx(a["fluid_volume"], rel=1e-6)
    assert np.abs(gpu.field("pressure") - cpu.field("pressure")).max() <= 1e-3 * np.abs(cpu.field("pressure")).max()


def test_the_frame_clock_follows_steps_of_the_callers_dt(small_reint):
    scene, _ = small_reint
    sim = eddies.Simulation(scene)
    # 30 frames per second: a step of 0.09 s passes two frame times, one more of 0.011 s the third.
    sim.step(0.09)
    assert sim.frames_done == 2
    sim.step(0.011)
    assert sim.frames_done == 3
    # The next step of the program's choice ends on the fourth frame's time at the latest.
    record = sim.step()
    assert record["time"] <= 4 / 30 + 1e-12


def test_flip_on_the_gpu_reads_its_particles_back_when_they_are_read(cli, tmp_path):
    """FLIP on the GPU leaves its particles on the device between steps; what reads the state brings them back
    first, so each frame's particles and fields are the program's, bit for bit."""
    sets = ["domain.resolution=[64,32]", "backend=gpu"]
    scene = eddies.Scene.load("dam-break")
    for s in sets:
        key, value = s.split("=", 1)
        scene.set(key, json.loads(value) if value.startswith("[") else value)
    try:
        sim = eddies.Simulation(scene)
    except eddies.SceneError as e:
        if os.environ.get("EDDIES_REQUIRE_GPU") == "1":
            raise
        pytest.skip(f"no GPU adapter: {e}")
    out = tmp_path / "cli"
    args = ["run", "dam-break", "--out", out, "--frames", 2, "-q", "--set", "output.npy=true"]
    for s in sets:
        args += ["--set", s]
    cli(*args)
    for frame in range(2):
        sim.step_frame()
        points = np.load(out / f"particles_{frame:05d}.npy")
        assert np.array_equal(bits(sim.particles()), bits(points)), f"frame {frame}"
    lines = (out / "stats.jsonl").read_text().splitlines()
    assert sim.steps == len(lines)
