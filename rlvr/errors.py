"""The errors every layer raises, at the bottom of the import graph.

`ConfigError` is what a user's mistake in a config, a command line or a data file becomes: its
message names the field (and the record or line) and the run stops before any work. Keeping it here
means a trainer or environment module raises it without importing the verifier registry.
"""


class ConfigError(ValueError):
    """Bad configuration: the message names the offending field."""


class UnknownNameError(ValueError):
    """A verifier or environment name that is neither built in nor provided by a plugin."""
