"""The files the command line writes (`run --requests-csv`, `plan --write-scenario`).

Three rules, for every output flag:

- an output is never one of the command's inputs (the scenario, mission or plan file, the
  trace): the same real path or the same file (a symlink or a hard link) is refused;
- an output is checked before any run (its folder exists and takes a new file, it is no
  folder, device or FIFO), so a long plan is not lost to a typo at the end;
- it is written to a temporary file beside it and renamed into place, so a failed write
  leaves the old file whole.

`check_outputs` does the first two, `write_atomic` the third; both raise LabError naming
the flag and the path.
"""

import contextlib
import os
import stat
import tempfile

from lab.core.errors import LabError

__all__ = ["check_outputs", "write_atomic"]


def check_outputs(outputs, inputs):
    """Refuse any (flag, path) in `outputs` that names an input or cannot be written.

    `inputs` are the command's input paths (None entries are skipped). Nothing is created.
    """
    inputs = [str(p) for p in inputs if p]
    for flag, path in outputs:
        if path is None:
            continue
        path = str(path)
        if not path or "\0" in path:
            raise LabError(flag, f"{path!r} is not a usable file path")
        for source in inputs:
            if _same_file(path, source):
                raise LabError(flag, f"{path!r} is an input of this command ({source}); write to another file")
        _check_writable(flag, path)


def _same_file(a, b):
    """One file under two names: the same real path, or the same inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _check_writable(flag, path):
    def refuse(why):
        raise LabError(flag, f"cannot write {path!r}: {why}")

    full = os.path.realpath(path)  # a symlink's target is the file written
    if os.path.isdir(full):
        refuse("it is a folder; give a file path")
    folder = os.path.dirname(full)
    if not os.path.isdir(folder):
        refuse(f"there is no folder {folder!r}")
    if os.path.exists(full):
        if not stat.S_ISREG(os.stat(full).st_mode):
            refuse("it is not a regular file (a device, FIFO or socket); give a file path")
        if not os.access(full, os.W_OK):
            refuse("the file is read-only")
    # The folder's permissions (and a read-only filesystem) show only in a real attempt.
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".lab-", suffix=".tmp")
    except OSError as exc:
        refuse(exc.strerror or exc)
    os.close(fd)
    os.unlink(probe)


def write_atomic(path, flag, write):
    """Call `write(fh)` on a text file that then replaces `path` whole (os.replace).

    The new file keeps an existing file's permissions (else the umask's). On any failure the
    temporary file is removed and the old file stays as it was.
    """
    full = os.path.realpath(str(path))
    folder = os.path.dirname(full)
    try:
        mode = stat.S_IMODE(os.stat(full).st_mode)
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, temp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(full)}.", suffix=".tmp")
    except OSError as exc:
        raise LabError(flag, f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(temp, mode)
        os.replace(temp, full)
    except OSError as exc:
        _remove(temp)
        raise LabError(flag, f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        _remove(temp)
        raise


def _remove(path):
    with contextlib.suppress(OSError):
        os.unlink(path)
