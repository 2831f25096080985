"""The benchmark's own venvs: one per peer (``bench/.envs/<env>``) and the bench-tools
one that renders the report, created or reused from their requirements."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENVS_DIR, LOGS_DIR, ROOT_DIR, log

TOOLS_ENV = ENVS_DIR / "bench-tools"
TOOLS_REQUIREMENTS = ("matplotlib",)
INSTALL_TIMEOUT = 900.0


def ensure_env(path: Path, requirements: tuple[str, ...]) -> str | None:
    """Create or reuse a venv with ``requirements``; return an error message or None."""
    stamp = path / ".bench-requirements.json"
    wanted = json.dumps(sorted(requirements))
    python = path / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return None
    LOGS_DIR.mkdir(parents=True, exist_ok=True)
    install_log = LOGS_DIR / f"install-{path.name}.log"
    log(f"  installing {', '.join(requirements)} into {path.relative_to(ROOT_DIR)}")
    with install_log.open("w") as out:
        try:
            if not python.exists():
                subprocess.run(
                    [sys.executable, "-m", "venv", "--clear", str(path)],
                    check=True,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=120,
                )
            subprocess.run(
                [str(python), "-m", "pip", "install", "--disable-pip-version-check", *requirements],
                check=True,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=INSTALL_TIMEOUT,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            return f"installing {requirements} failed ({exc}); see {install_log}"
    stamp.write_text(wanted)
    return None
