"""The generator itself: well-formed modules, every feature reached, determinism."""

import pytest
from hypothesis import given

from hetvm.analysis import check_well_formed
from hetvm.ir import structural_equal
from hetvm.testing import interpret
from hetvm.testing.generators import GenConfig, programs

from .conftest import LONG, fuzz_settings

DEVICES = GenConfig(devices=True, missing_kernels=True)


@fuzz_settings(40)
@given(programs(DEVICES))
def test_generated_modules_are_well_formed_and_interpretable(prog):
    check_well_formed(prog.mod)
    interpret(prog.mod, *prog.inputs)


def test_generator_reaches_every_feature():
    seen: dict[str, int] = {}
    marks = {
        "if": "if ",
        "call": "cls.helper",
        "loop": "= cls.loop",  # a loop helper (its call of itself, or main's call)
        "match_cast": "R.match_cast",
        "tuple": "R.Tuple",
        "hint": "R.hint_on_device",
        "copy": "R.to_vdevice",
        "symbolic": "tir_var_upper_bound",
        "dataflow": "R.dataflow",
        "float16": "float16",
        "int32": "int32",
        "bool": '"bool"',
    }

    @fuzz_settings(120)
    @given(programs(DEVICES))
    def collect(prog):
        text = prog.mod.script()
        for name, mark in marks.items():
            if mark in text:
                seen[name] = seen.get(name, 0) + 1

    collect()
    assert set(seen) == set(marks), f"never generated: {set(marks) - set(seen)}"


@pytest.mark.skipif(LONG, reason="the long run draws random seeds on purpose")
def test_generation_is_deterministic():
    texts = []
    for _ in range(2):
        found = []

        @fuzz_settings(5)
        @given(programs(DEVICES))
        def collect(prog):
            found.append(prog.mod)  # noqa: B023 - runs before the loop moves on

        collect()
        texts.append(found)
    assert len(texts[0]) == len(texts[1])
    assert all(structural_equal(a, b) for a, b in zip(*texts))
