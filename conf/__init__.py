"""Hydra configs for the `rlvr` commands (YAML only)."""

if __name__ != "rlvr.conf":  # the folder is mapped to rlvr.conf; a bare `conf` is another package
    raise ImportError("import this package as rlvr.conf, not as a bare 'conf' (see pyproject's package-dir)")
