"""Every `.niro` file under testdata/ (and tests/cli/) round-trips through the CLI:
`niroc dump FILE` -> parse -> `niroc dump` gives the identical text.

Files whose own RUN lines expect a parse failure (`parse-error` in the name) are left out.
"""

import subprocess
from pathlib import Path

import pytest

from .niroc_runner import NIROC, ROOT

NIRO_FILES = sorted(
    path
    for folder in (ROOT / "testdata", ROOT / "tests" / "cli")
    for path in folder.rglob("*.niro")
    if "parse-error" not in path.name and "generated" not in path.parts
)


def dump(source: Path, target: Path) -> str:
    completed = subprocess.run(
        [str(NIROC), "dump", str(source), "-o", str(target)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return target.read_text(encoding="utf-8")


def test_there_are_niro_files_to_check():
    assert len(NIRO_FILES) >= 3


@pytest.mark.parametrize("path", NIRO_FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_dump_parse_dump_is_identical(path, tmp_path):
    first = dump(path, tmp_path / "first.niro")
    second = dump(tmp_path / "first.niro", tmp_path / "second.niro")
    assert first == second
