"""Atomic output (niroc/output.py): a failure never leaves a partial file or touches an old one."""

import os
import stat

import pytest

from niroc.output import OutputError, check_output_path, open_output


def _leftovers(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


def test_a_new_file_gets_the_content_and_umask_permissions(tmp_path):
    target = tmp_path / "out.mlir"
    with open_output(str(target)) as stream:
        stream.write(b"module {}\n")
    assert target.read_bytes() == b"module {}\n"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    assert _leftovers(tmp_path) == []


def test_a_failure_leaves_an_existing_file_untouched_and_no_temporary_file(tmp_path):
    target = tmp_path / "out.mlir"
    target.write_bytes(b"old contents\n")
    with pytest.raises(RuntimeError, match="lowering exploded"):
        with open_output(str(target)) as stream:
            stream.write(b"half of the new ")
            raise RuntimeError("lowering exploded")
    assert target.read_bytes() == b"old contents\n"
    assert _leftovers(tmp_path) == []


def test_a_failure_creates_no_file(tmp_path):
    target = tmp_path / "out.mlir"
    with pytest.raises(KeyboardInterrupt):
        with open_output(str(target)) as stream:
            stream.write(b"partial")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_replacing_a_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "out.mlir"
    target.write_bytes(b"old")
    target.chmod(0o640)
    with open_output(str(target)) as stream:
        stream.write(b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_folder_is_refused(tmp_path):
    with pytest.raises(OutputError, match=r": output path is a folder$"):
        check_output_path(str(tmp_path))


def test_a_missing_folder_is_refused(tmp_path):
    target = tmp_path / "missing" / "out.mlir"
    with pytest.raises(OutputError, match=r"output folder '.*missing' does not exist$"):
        check_output_path(str(target))
    assert not (tmp_path / "missing").exists()


def test_a_parent_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "plain").write_text("x")
    with pytest.raises(OutputError, match=r"'.*plain' is not a folder$"):
        check_output_path(str(tmp_path / "plain" / "out.mlir"))


def test_stdout_needs_no_checks():
    check_output_path("-")
