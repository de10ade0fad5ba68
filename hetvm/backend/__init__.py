"""Code generators: VM bytecode and graph-executor JSON."""
