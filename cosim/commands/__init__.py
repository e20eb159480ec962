"""Subcommands of the ``cosim`` CLI, one module each with ``register(subparsers)``."""
