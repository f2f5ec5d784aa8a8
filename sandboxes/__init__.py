"""Run untrusted code: `factory.get_sandbox("docker"|"local").run(program, stdin, limits) -> Execution` (see README.md)."""

if __name__ != "rlvr.sandboxes":  # the folder is mapped to rlvr.sandboxes; a bare `sandboxes` is another package
    raise ImportError("import this package as rlvr.sandboxes, not as a bare 'sandboxes' (see pyproject's package-dir)")
