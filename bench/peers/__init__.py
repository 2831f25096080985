"""One module per peer; each is imported inside that peer's venv (see bench/driver.py)."""
