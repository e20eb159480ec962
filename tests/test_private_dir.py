"""Folders cosim loads code from (the compile cache, its fallback in the temp folder, the
generated entries, the cached FMU binary) are created 0700 and refused when another user
could have written them: another owner, group/other write bits, a planted symbolic link,
a folder above them that others may write.  The error names the folder and the fix."""
import os
import stat
import subprocess
import sys
import tempfile

import pytest

from cosim import jit
from cosim.private_dir import UnsafeDirectoryError, check_private, private_dir

ROOT = os.geteuid() == 0
OTHER = 65534  # nobody


@pytest.fixture
def fallback(tmp_path, monkeypatch):
    """No COSIM_CACHE_DIR, an unusable ~/.cache (XDG_CACHE_HOME below a file), and a temp
    folder of the test's own: jit.cache_dir() goes to <tmp>/cosim-numba-<uid>."""
    monkeypatch.delenv("COSIM_CACHE_DIR", raising=False)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker / "cache"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)  # like /tmp: writable by all, sticky
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp / f"cosim-numba-{os.getuid()}"


def _refused(path, *needles):
    with pytest.raises(UnsafeDirectoryError) as info:
        jit.cache_dir()
    message = str(info.value)
    assert f"compile cache folder {str(path)!r}" in message and "set COSIM_CACHE_DIR" in message, message
    for needle in needles:
        assert needle in message, message
    assert "\n" not in message


def test_the_fallback_is_created_private(fallback):
    assert jit.cache_dir() == str(fallback)
    assert stat.S_IMODE(os.stat(fallback).st_mode) == 0o700 and os.stat(fallback).st_uid == os.geteuid()
    assert jit.cache_dir() == str(fallback)  # and accepted the next time


@pytest.mark.parametrize("mode, who", [(0o777, "group and others"), (0o757, "group and others"),
                                       (0o770, "its group")])
def test_a_planted_group_or_other_writable_fallback_is_refused(fallback, mode, who):
    fallback.mkdir()
    fallback.chmod(mode)
    _refused(fallback, f"is writable by {who} (mode {mode:04o})")
    assert stat.S_IMODE(os.stat(fallback).st_mode) == mode  # nothing changed on disk


@pytest.mark.skipif(not ROOT, reason="making a folder owned by another user needs root (os.chown)")
def test_a_fallback_owned_by_another_user_is_refused(fallback):
    fallback.mkdir(mode=0o755)
    os.chown(fallback, OTHER, OTHER)
    _refused(fallback, f"is owned by uid {OTHER}, not by you (uid 0)")


@pytest.mark.skipif(not ROOT, reason="a symbolic link owned by another user needs root (os.lchown)")
def test_a_symbolic_link_planted_by_another_user_is_refused(fallback, tmp_path):
    target = tmp_path / "theirs"
    target.mkdir(mode=0o700)
    fallback.symlink_to(target)
    os.lchown(fallback, OTHER, OTHER)
    _refused(fallback, f"is a symbolic link made by uid {OTHER}")


def test_a_folder_below_a_shared_writable_folder_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone may rename what is in it
    mine = shared / "cache"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv("COSIM_CACHE_DIR", str(mine))
    _refused(mine, f"lies in {str(shared)!r}, writable by group and others (mode 0777, no sticky bit)")


def test_cosim_cache_dir_is_created_0700_with_its_parents(tmp_path, monkeypatch):
    target = tmp_path / "new" / "cache"
    monkeypatch.setenv("COSIM_CACHE_DIR", str(target))
    assert jit.cache_dir() == str(target)
    for folder in (target, target.parent):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_a_planted_entries_folder_is_refused(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    (cache / "entries").mkdir(parents=True)
    cache.chmod(0o755)
    (cache / "entries").chmod(0o777)
    monkeypatch.setenv("COSIM_CACHE_DIR", str(cache))
    with pytest.raises(UnsafeDirectoryError, match=r"compile cache folder '.*/cache/entries' is writable by "
                                                   r"group and others \(mode 0777\).*set COSIM_CACHE_DIR"):
        jit.cache_dir()


def test_private_dir_checks(tmp_path):
    mine = private_dir(tmp_path / "a" / "b", "folder")
    assert stat.S_IMODE(os.stat(mine).st_mode) == 0o700
    assert check_private(mine) == mine
    afile = tmp_path / "f"
    afile.write_text("")
    with pytest.raises(UnsafeDirectoryError, match="exists and is not a directory"):
        check_private(afile)


def test_the_command_line_refuses_a_planted_cache_and_imports_nothing_from_it(tmp_path):
    """`cosim simulate pendulum --backend numba` with the fallback planted 0777 and a module
    in its entries folder: one line naming the folder and COSIM_CACHE_DIR, exit 2, the
    planted module never ran."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    planted = tmp / f"cosim-numba-{os.getuid()}"
    (planted / "entries").mkdir(parents=True)
    marker = tmp_path / "planted_code_ran"
    for name in os.listdir(os.path.join(jit.cache_dir(), "entries")):
        if name.endswith(".py"):  # every entry module name cosim knows, each writing the marker
            (planted / "entries" / name).write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    planted.chmod(0o777)
    env = {k: v for k, v in os.environ.items() if k != "COSIM_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "unusable_file" / "cache"), TMPDIR=str(tmp))
    (tmp_path / "unusable_file").write_text("")
    proc = subprocess.run([sys.executable, "-m", "cosim", "simulate", "pendulum", "--t-end", "0.05",
                           "--backend", "numba"], capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0] == (f"cosim: error: compile cache folder {str(planted)!r} is writable by group and others "
                        f"(mode 0777): cosim loads code from it and refuses it; set COSIM_CACHE_DIR to a "
                        f"folder of your own (created with mode 0700 if missing)")
    assert not marker.exists()


def test_the_fmu_binary_cache_is_private_too(tmp_path, monkeypatch):
    from fmu.native import native_library
    cache = tmp_path / "cache"
    (cache / "fmu-native").mkdir(parents=True)
    (cache / "fmu-native").chmod(0o777)
    monkeypatch.setenv("COSIM_CACHE_DIR", str(cache))
    with pytest.raises(UnsafeDirectoryError, match=r"FMU binary cache folder '.*/fmu-native/[0-9a-f]{16}' lies "
                                                   r"in '.*/fmu-native', writable by group and others"):
        native_library()
