"""The version of durq, read by the build backend and by `durq --version`."""

__version__ = "0.2.0.dev0"
