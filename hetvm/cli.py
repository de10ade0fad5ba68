"""Command line: ``hetvm demo | run | explain | plan | show``.

Each command is a thin layer over the public API (``hetvm.frontend.from_onnx``,
``hetvm.build``, ``hetvm.VirtualMachine``, ``hetvm.explain``); the pieces live in
:mod:`hetvm.cli_support`. A deliberate error (bad model, bad input, impossible
placement) prints one line ``hetvm: error: ...`` and exits with status 1; a
traceback is shown only with ``--debug``. See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

from .errors import HetvmError

EXIT_ERROR = 1
EXIT_INTERNAL = 3


# -- shared steps ----------------------------------------------------------------
def _console(args: argparse.Namespace):
    from .cli_support.console import Console

    return Console(plain=getattr(args, "plain", False))


def _setup(args: argparse.Namespace):
    from .cli_support.placement import parse_devices, parse_missing, parse_stages

    setup = parse_devices(args.devices, parse_missing(args.missing_kernel))
    return parse_stages(getattr(args, "stages", None), setup)


def _load(args: argparse.Namespace, console) -> Any:
    from .cli_support.inputs import parse_shapes
    from .cli_support.loading import load

    shapes = parse_shapes(getattr(args, "shape", None))
    with console.status(f"importing {args.model}"):
        return load(args.model, shapes or None)


def _place(model: Any, args: argparse.Namespace, setup: Any) -> Any:
    from .cli_support.placement import apply_pins, parse_place_rules

    rules = parse_place_rules(getattr(args, "place", None), setup)
    mod, _ = apply_pins(model.mod, rules)
    bounds = getattr(args, "bound", None)
    if bounds:
        from .cli_support.inputs import parse_dims
        from .transform.declare_dim_bounds import declare_dim_bounds

        mod = declare_dim_bounds(mod, parse_dims(bounds, "--bound"))
    return mod


def _compile(mod: Any, setup: Any, executor: str, console, want_explain: bool = True,
             plan_memory: bool = True, model: Any = None) -> Any:  # fmt: skip
    from .cli_support.naming import origins_of_source
    from .cli_support.session import compile_program
    from .pipeline import default_pipeline

    origins = origins_of_source(model.mod, model.proto) if model is not None else None
    total = len(default_pipeline().passes)
    with console.progress("building", total) as advance:
        return compile_program(mod, setup, executor, on_pass=lambda _name: advance(),
                               want_explain=want_explain, plan_memory=plan_memory, origins=origins)  # fmt: skip


def _inputs(model: Any, mod: Any, args: argparse.Namespace, with_dims: bool = False):
    """``main``'s arguments, notes on the made-up ones, and one line per symbolic dim
    (``with_dims``: and the dims' values by name)."""
    from .cli_support.input_roles import broadcast_pairs, index_extents, input_roles
    from .cli_support.inputs import (
        choose_dims,
        make_inputs,
        parse_assignments,
        parse_dims,
        read_inputs,
    )

    params = list(mod["main"].params)
    files = parse_assignments(getattr(args, "input", None), "--input")
    sources: dict = {}
    given, env = read_inputs(files, params, model.input_names, sources)
    env, dim_notes = choose_dims(params, env, parse_dims(getattr(args, "dim", None)), sources,
                                 related=broadcast_pairs(mod["main"]),
                                 extents=index_extents(mod["main"]))  # fmt: skip
    roles = input_roles(mod["main"], mod.attrs.get("onnx_node_of"))
    args_np, notes = make_inputs(params, given, env, seed=getattr(args, "seed", 0), roles=roles)
    if with_dims:
        return args_np, notes, dim_notes, {v.name: int(n) for v, n in env.items()}
    return args_np, notes, dim_notes


def _memory_rows(compiled: Any, result: Any, dims: dict | None = None) -> list[dict]:
    from .cli_support.reports import memory_rows, plan_of

    return memory_rows(plan_of(compiled.exe, compiled.lowered, dims), result.memory)


def _header(console, model: Any, setup: Any, args: argparse.Namespace) -> None:
    devices = ", ".join(setup.names)
    missing = "; ".join(f"{d} lacks {', '.join(sorted(o))}" for d, o in setup.missing_kernels.items())
    console.paragraph(f"model:    {model.label} ({model.kind})", " " * 10)
    console.paragraph(f"devices:  {devices} (default {setup.names[0]})" + (f"; {missing}" if missing else ""),
                      " " * 10)  # fmt: skip
    if getattr(args, "place", None):
        console.paragraph(f"pinned:   {', '.join(args.place)}", " " * 10)


def _run_and_report(console, model: Any, mod: Any, setup: Any, args: argparse.Namespace) -> int:
    from .cli_support.reports import copies_table, memory_table, outputs_table
    from .cli_support.session import run

    args_np, notes, dim_notes, dims = _inputs(model, mod, args, with_dims=True)
    for note in model.dim_notes + dim_notes:
        console.print(note)
    t0 = time.perf_counter()
    compiled = _compile(mod, setup, args.executor, console, model=model)
    build_s = time.perf_counter() - t0
    for note in notes:
        console.print(f"input:    {note}")
    with console.status("running"):
        result = run(compiled, args_np, trace=False, repeat=getattr(args, "repeat", 1),
                     threads=getattr(args, "threads", None))  # fmt: skip
    threads = getattr(args, "threads", None)
    budget = f", {threads} thread{'s' if threads != 1 else ''}" if threads else ""
    console.print(f"build:    {build_s:.2f} s;  run: {result.seconds * 1000:.1f} ms ({args.executor}{budget})")
    if result.compile_seconds >= 0.1:  # the first call compiled its segments (Numba)
        console.print(f"compile:  {result.compile_seconds:.2f} s of Numba compiling (or loading from the "
                      "kernel cache) during the run: segments compile at their first call")
    names = _output_names(model)
    console.table(outputs_table(result.outputs, names))
    if getattr(args, "save_outputs", None):
        _save_outputs(args.save_outputs, result.outputs, names)
        console.print(f"outputs saved to {args.save_outputs}")
    console.table(copies_table(compiled.explain if setup.heterogeneous else None, compiled.planned_names))
    _transfers(console, compiled)
    _usage(console, compiled, args)
    console.table(memory_table(_memory_rows(compiled, result, dims), result.memory_note))
    return 0


def _usage(console, compiled: Any, args: argparse.Namespace) -> None:
    """Says so when a listed device ends up (nearly) unused, and why."""
    from .cli_support.usage import usage_notes

    for note in usage_notes(compiled, getattr(args, "place", None) or ()):
        console.paragraph(f"note:     {note}", " " * 10)


def _output_names(model: Any) -> list[str] | None:
    if model.proto is None:
        return None
    return [o.name for o in model.proto.graph.output]


def _save_outputs(path: str, outputs: Sequence[Any], names: Sequence[str] | None) -> None:
    import numpy as np

    keys = list(names) if names and len(names) == len(outputs) else [f"output_{i}" for i in range(len(outputs))]
    np.savez(path, **dict(zip(keys, outputs)))


# -- commands -------------------------------------------------------------------
def _positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_run(args: argparse.Namespace) -> int:
    console = _console(args)
    setup = _setup(args)
    model = _load(args, console)
    _header(console, model, setup, args)
    mod = _place(model, args, setup)
    return _run_and_report(console, model, mod, setup, args)


def _transfers(console, compiled) -> None:  # noqa: ANN001
    """The cross-host transfers table, for a build over devices of named hosts."""
    from .cli_support.reports import transfers_table

    table = transfers_table(compiled.exe, compiled.planned_names)
    if table is not None:
        console.table(table)


def cmd_explain(args: argparse.Namespace) -> int:
    from .cli_support.reports import copies_table

    console = _console(args)
    setup = _setup(args)
    model = _load(args, console)
    _header(console, model, setup, args)
    mod = _place(model, args, setup)
    compiled = _compile(mod, setup, "vm", console, model=model)
    console.table(copies_table(compiled.explain if setup.heterogeneous else None, compiled.planned_names))
    _transfers(console, compiled)
    _usage(console, compiled, args)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from .cli_support.console import format_bytes
    from .cli_support.memory_view import live_series, program_layout, unplanned_of
    from .cli_support.reports import memory_table
    from .cli_support.session import run

    console = _console(args)
    setup = _setup(args)
    model = _load(args, console)
    _header(console, model, setup, args)
    mod = _place(model, args, setup)
    if args.fit:
        from .cli_support.inputs import parse_dims
        from .cli_support.plan_report import fit_table, formula_lines

        compiled = _compile(mod, setup, "vm", console, want_explain=False, model=model)
        for line in formula_lines(compiled.exe, setup.names):
            console.print(line)
        console.table(fit_table(compiled.exe, args.fit, parse_dims(args.dim), setup.names))
        return 0
    args_np, _, dim_notes, dims = _inputs(model, mod, args, with_dims=True)
    for note in model.dim_notes + dim_notes:
        console.print(note)
    compiled = _compile(mod, setup, "vm", console, want_explain=bool(args.html), model=model)
    from .cli_support.plan_report import formula_lines, unplanned_lines

    for line in formula_lines(compiled.exe, setup.names):
        console.print(line)
    with console.status("running (traced)"):
        result = run(compiled, args_np, trace=True)
    rows = _memory_rows(compiled, result, dims)
    console.table(memory_table(rows))
    from .cli_support.order_report import order_lines

    for line in order_lines(getattr(compiled.exe, "metadata", None)):
        console.print(line)
    for line in unplanned_lines(compiled.exe, setup.names):
        console.print(line)
    # live bytes tensor by tensor: the same program without the static plan,
    # so every intermediate is its own allocation and every kill frees it
    unplanned = _compile(mod, setup, "vm", console, want_explain=False, plan_memory=False)
    with console.status("running without the static plan (traced)"):
        traced = run(unplanned, args_np, trace=True)
    series = live_series(traced.events)
    for dev, s in series.items():
        console.print(
            f"{dev}: tensor by tensor, peak {format_bytes(s.peak)} with kills, "
            f"{format_bytes(s.peak_without_kills)} without kills ({len(s.steps)} allocator events)"
        )
    if args.plot:
        from .cli_support.plots import plot_memory

        bounds = {r["device"]: r.get("lower_bound") for r in rows}
        planned = {r["device"]: r.get("planned") for r in rows}
        predicted = {r["device"]: r.get("predicted_peak") for r in rows}
        layout = program_layout(compiled.lowered, names=compiled.names, unplanned=unplanned_of(compiled.exe))
        plot_memory(args.plot, series, layout.arenas, bounds, planned,
                    title=f"{os.path.basename(model.label)} on {', '.join(setup.names)}",
                    device_names=setup.names, predicted=predicted)  # fmt: skip
        console.print(f"plot written to {args.plot}")
    if args.html:
        from .cli_support.plan_html import page_from_compiled, write_plan_html

        title = f"hetvm plan: {os.path.basename(model.label)} on {', '.join(setup.names)}"
        write_plan_html(args.html, page_from_compiled(compiled, rows, title))
        console.print(f"plan viewer written to {args.html} (one file, opens offline)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from .cli_support.graph_model import extract_graph
    from .cli_support.graph_render import to_dot, to_svg
    from .cli_support.ir_text import module_text
    from .cli_support.placement import device_name

    console = _console(args)
    setup = _setup(args)
    model = _load(args, console)
    mod = _place(model, args, setup)
    from .cli_support.naming import origins_of_source

    stage = args.stage
    origins = origins_of_source(model.mod, model.proto) if model.proto is not None else None
    if stage != "source":
        compiled = _compile(mod, setup, "vm", console, want_explain=False, model=model)
        mod = compiled.lowered if stage == "lowered" else (compiled.planned or compiled.source)
        if origins is not None:
            origins = compiled.names if stage == "lowered" else compiled.planned_names
    if args.format == "text":
        text = module_text(mod, full=args.full)
    else:
        graph = extract_graph(mod, default_device=device_name(setup.default), origins=origins)
        text = to_dot(graph) if args.format == "dot" else to_svg(graph, prefer_graphviz=not args.builtin_layout)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
        console.print(f"{args.format} written to {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .cli_support.demo_model import DEMO_DEVICES, DEMO_MISSING, demo_module
    from .cli_support.loading import LoadedModel
    from .cli_support.placement import parse_devices

    console = _console(args)
    if args.save_model:
        import onnx

        from .cli_support.demo_model import demo_onnx_model

        onnx.save(demo_onnx_model(batch=args.batch), args.save_model)
        console.print(f"demo model written to {args.save_model}")
        return 0
    with console.status("building the demo model"):
        mod, origin = demo_module(batch=args.batch)
    console.heading("hetvm demo")
    console.paragraph(
        "A small CNN classifier (built in code"
        + (" as an ONNX graph and imported" if origin == "onnx" else " with the BlockBuilder")
        + ") runs on a simulated accelerator (sim:0) and the CPU. sim:0 has no softmax "
        "kernel, so the device planner moves that op to the CPU and inserts the copy its input needs."
    )
    setup = parse_devices(DEMO_DEVICES, DEMO_MISSING)
    proto = None
    if origin == "onnx":
        from .cli_support.demo_model import demo_onnx_model

        proto = demo_onnx_model(batch=args.batch)  # the same seeded graph: its names for the reports
    params = [p.name_hint for p in mod["main"].params]
    model = LoadedModel(mod, "the demo CNN", origin, proto, dict(zip(params, params)))
    _header(console, model, setup, args)
    args.executor = "vm"
    return _run_and_report(console, model, mod, setup, args)


# -- argument parsing ---------------------------------------------------------------
def _common(p: argparse.ArgumentParser, model: bool = True) -> None:
    if model:
        p.add_argument("model", metavar="MODEL", help="an .onnx model or a TVMScript .py file")
        p.add_argument("--shape", action="append", metavar="NAME=D0xD1x...",
                       help="override an ONNX input's shape at import: 1x128 or 1,128 "
                            "(a name keeps a dim symbolic)")  # fmt: skip
        p.add_argument("--devices", default="cpu", metavar="DEV,DEV",
                       help="devices in order, the first is the default (e.g. sim:0,cpu)")  # fmt: skip
        p.add_argument("--place", action="append", metavar="OP_OR_NODE=DEVICE",
                       help="pin an ONNX op type, node name, hetvm op or value to a device")  # fmt: skip
        p.add_argument("--missing-kernel", action="append", metavar="DEVICE=OP[,OP]",
                       help="configure a sim device without kernels for these hetvm ops")  # fmt: skip
        p.add_argument("--stages", metavar="DEV,DEV|all",
                       help="stage mode: cut the model into contiguous pipeline stages on these devices")  # fmt: skip
    if model:
        p.add_argument("--bound", action="append", metavar="NAME=N",
                       help="declare the largest value of a symbolic dim (the memory plan is "
                            "sized for it; without one, it is planned with formulas in the dim)")  # fmt: skip
    p.add_argument("--plain", action="store_true", help="plain-text tables (no rich)")
    p.add_argument("--debug", action="store_true", help="show tracebacks of errors")


def _inputs_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy",
                   help="an input array (.npy); its shape sets the input's symbolic dims")  # fmt: skip
    p.add_argument("--dim", action="append", metavar="NAME=N",
                   help="the value of a symbolic dim for the random inputs (e.g. batch=4)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hetvm", description="hetvm: tensor programs across devices")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("demo", help="run the built-in example on sim:0 + cpu (no file needed)")
    _common(p, model=False)
    p.add_argument("--batch", type=int, default=2, help="batch size of the demo model")
    p.add_argument("--save-model", metavar="FILE.onnx", help="write the demo model as ONNX and stop")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo, repeat=1)

    p = sub.add_parser("run", help="run a model; print outputs, copies and memory")
    _common(p)
    _inputs_args(p)
    p.add_argument("--executor", choices=("vm", "graph"), default="vm")
    p.add_argument("--repeat", type=_positive_int, default=1, help="run N times, report the last")
    p.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                   help="one budget of N threads for BLAS and generated kernels (default: as the process has it)")  # fmt: skip
    p.add_argument("--save-outputs", metavar="FILE.npz", help="save the outputs")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("explain", help="the table of device copies and their reasons")
    _common(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("plan", help="memory: no-reuse, lower bound, planned and measured peak")
    _common(p)
    _inputs_args(p)
    p.add_argument("--memory", action="store_true", help="the memory report (the default)")
    p.add_argument("--plot", metavar="FILE.png", help="draw live bytes and the arena layout")
    p.add_argument("--html", metavar="FILE.html", help="write the plan as an interactive page (offline, one file)")
    p.add_argument("--fit", metavar="SIZE",
                   help="the largest value of each free dim whose predicted peak (weights and inputs "
                        "included) fits SIZE (e.g. 16GiB) on each device; --dim fixes the others")  # fmt: skip
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("show", help="the IR as text, or the graph as dot/svg")
    _common(p)
    p.add_argument("--format", choices=("text", "dot", "svg"), default="text")
    p.add_argument("--stage", choices=("source", "planned", "lowered"), default=None,
                   help="which IR: as loaded, after device planning (graph default), or lowered")  # fmt: skip
    p.add_argument("--full", action="store_true", help="print constants in full")
    p.add_argument("--builtin-layout", action="store_true", help="svg without graphviz")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_show)
    return parser


def _one_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "show" and args.stage is None:
        args.stage = "source" if args.format == "text" else "planned"
    try:
        return int(args.func(args))
    except HetvmError as err:
        if args.debug:
            raise
        print(f"hetvm: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except (OSError, MemoryError) as err:
        if args.debug:
            raise
        print(f"hetvm: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("hetvm: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - a bug: say so, keep the traceback behind --debug
        if args.debug:
            raise
        print(
            f"hetvm: internal error: {type(err).__name__}: {_one_line(err)} (run with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
