"""Tests of the durq command line (durq.cli), invoked as a user would."""
