"""hetvm plan's lines about the memory-aware order and in-place ops."""

from hetvm.cli_support.order_report import order_lines


def test_a_chosen_order_is_said_with_both_peaks_and_the_heuristic():
    meta = {
        "memory_order": {"main": {"given_peak_bytes": 4 << 20, "chosen_peak_bytes": 3 << 20,
                                  "heuristics": {"greedy-freed": 2}, "planner_bound_given": 4 << 20,
                                  "planner_bound_chosen": 3 << 20}},  # fmt: skip
        "inplace_elementwise": {"main": 3},
    }
    order, inplace = order_lines(meta)
    assert "greedy-freed" in order and "3.00 MiB" in order and "4.00 MiB" in order and "-25.0%" in order
    assert "the planner's bound 4.00 MiB -> 3.00 MiB" in order
    assert inplace.startswith("in place: 3 element-wise op")


def test_the_given_order_is_said_too():
    assert order_lines({}) == ["order: the given order (no topological order of its blocks holds fewer bytes)"]
    assert order_lines(None, "other")[0].startswith("order: the given order")
