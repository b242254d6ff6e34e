"""The Python examples of docs/python.md and the README, run as they are written."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

PAGES = [ROOT / "docs" / "python.md", ROOT / "README.md"]


def python_blocks(page):
    return re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_examples_run(page, tmp_path):
    blocks = python_blocks(page)
    assert blocks, f"{page.name} has no Python example"
    for code in blocks:
        env = dict(os.environ, MPLBACKEND="Agg")
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{page.name}:\n{code}\n{done.stderr}"
        if "savefig" in code:
            figure = re.search(r'savefig\("([^"]+)"', code).group(1)
            assert (tmp_path / figure).stat().st_size > 10_000, "the figure is written"
        if "mass drift" in code:
            drift = float(done.stdout.split()[-1])
            # Reintegration tracking conserves mass exactly up to float32 rounding of the sums.
            assert drift < 1e-5, done.stdout
