"""``python -m durq``: the durq command line."""

from durq.cli import main

main()
