"""Support code for the ``hetvm`` command line (:mod:`hetvm.cli`).

Each module does one job so the commands stay thin and each piece is testable
without a terminal: loading a model, making inputs, placing it on devices,
compiling and running it, measuring memory, and rendering tables, graphs and
plots. ``rich`` and ``matplotlib`` are optional; every module imports them
lazily and falls back to plain text (or a clear error for plots).
"""
