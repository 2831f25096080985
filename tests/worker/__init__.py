"""Tests of the worker runtime (durq.worker), with real servers and processes."""
