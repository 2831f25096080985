"""The version of durq, read by the build backend and by `durq --version`."""

__version__ = "0.1.0"
