"""The long run of the reliability properties: one command, figures at the end.

    python tools/long_fuzz.py [--factor 20] [-n 2]

Runs tests/reliability with ``HETVM_LONG=1`` (every Hypothesis example count
times ``--factor``, random seeds instead of the CI's fixed one) and prints the
pytest summary; failures shrink to minimal programs in the pytest output.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=int, default=20, help="multiplier of every example count")
    parser.add_argument("-n", "--workers", default="2", help="pytest-xdist workers")
    parser.add_argument("-k", default=None, help="pytest -k expression")
    args = parser.parse_args(argv)
    env = dict(os.environ, HETVM_LONG="1", HETVM_FUZZ_FACTOR=str(args.factor))
    cmd = [sys.executable, "-m", "pytest", "-q", "tests/reliability", "-m", "slow or not slow",
           "-p", "no:warnings", "-n", args.workers]
    if args.k:
        cmd += ["-k", args.k]
    start = time.perf_counter()
    code = subprocess.call(cmd, env=env)
    print(f"long fuzz: factor {args.factor}, {time.perf_counter() - start:.0f} s, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
