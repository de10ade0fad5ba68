"""The README's example runs, and its code is exactly examples/first_program.py."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _example_code() -> str:
    text = (ROOT / "examples" / "first_program.py").read_text()
    return text.split('"""\n\n', 1)[1]


def test_readme_shows_the_example_verbatim():
    assert _example_code() in (ROOT / "README.md").read_text()


def test_example_runs_and_plans_copies_and_memory():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "first_program.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "2 device copies" in result.stdout
    assert "'predicted_peak_bytes': 256" in result.stdout
