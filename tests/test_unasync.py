"""The blocking front end is generated from the asyncio one, and CI notices drift."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "unasync.py"


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "unasync.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_generated_files_are_up_to_date() -> None:
    result = _run(ROOT, "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def _copy(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts" / "unasync.py")
    for part in ("_async", "_sync"):
        shutil.copytree(ROOT / "src" / "durq" / part, tmp_path / "src" / "durq" / part)
    return tmp_path


def test_a_hand_edit_of_a_generated_file_is_reported(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    target = root / "src" / "durq" / "_sync" / "queue.py"
    target.write_text(target.read_text() + "\n# edited by hand\n")
    result = _run(root, "--check")
    assert result.returncode == 1
    assert "_sync/queue.py" in result.stdout


def test_regenerating_restores_the_generated_files(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    target = root / "src" / "durq" / "_sync" / "queue.py"
    original = target.read_text()
    target.write_text("broken\n")
    assert _run(root).returncode == 0
    assert target.read_text() == original
    assert _run(root, "--check").returncode == 0


def test_generated_files_say_where_to_edit_and_have_no_asyncio_left() -> None:
    for path in (ROOT / "src" / "durq" / "_sync").glob("*.py"):
        text = path.read_text()
        if path.name != "__init__.py":
            assert "GENERATED from durq/_async/" in text, path.name
        for leftover in ("async def", "await ", "AsyncQueue", "redis.asyncio", "aclose"):
            assert leftover not in text, f"{path.name} contains {leftover!r}"
