"""Atomic saves: a file or directory is written beside its destination under a
hidden name and renamed into place once complete, so a save that fails (an
exception, a full disk, a killed process) leaves the previous one loadable.

Replacing a directory takes two renames (the old one aside, the new one in);
`recover(path)`, which loading and the next save call, puts back a previous
save left aside by a process killed between them. Scratch names are
`.{name}.{pid}-{8 hex}.{saving|old|deleting}{extension}`; a save removes those
of processes no longer running, so two processes never remove each other's.
"""

import contextlib
import os
import re
import secrets
import shutil

SAVING, OLD, DELETING = "saving", "old", "deleting"


@contextlib.contextmanager
def replacing_directory(path, keep=(), replace=True):
    """Yields a new, empty scratch directory beside `path`; when the block
    ends without an error, the scratch directory becomes `path` (replacing
    the directory there), else it is removed and `path` is untouched.

    Args:
        path: str or os.PathLike. The directory to write.
        keep: iterable of str. Entries of the existing directory copied into
            the scratch directory first (an update of some of its files).
            Defaults to `()`.
        replace: bool. Whether an existing directory is replaced; `False`
            keeps it (e.g. written meanwhile by another process) and drops
            the scratch directory. Defaults to `True`.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "preset")
    >>> with replacing_directory(path) as scratch:
    ...     open(os.path.join(scratch, "config.json"), "w").close()
    >>> os.listdir(path)
    ['config.json']
    >>> with replacing_directory(path) as scratch:
    ...     raise OSError("No space left on device")
    Traceback (most recent call last):
    ...
    OSError: No space left on device
    >>> os.listdir(path), os.listdir(os.path.dirname(path))
    (['config.json'], ['preset'])
    """
    target = _prepare(path)
    scratch = _sibling(target, SAVING)
    os.mkdir(scratch)
    try:
        if os.path.isdir(target):
            shutil.copymode(target, scratch)
            for name in keep:
                source = os.path.join(target, name)
                if os.path.isdir(source):
                    shutil.copytree(source, os.path.join(scratch, name))
                elif os.path.exists(source):
                    shutil.copy2(source, os.path.join(scratch, name))
        yield scratch
        if not os.path.isdir(target):
            try:
                os.rename(scratch, target)
            except OSError:
                if replace or not os.path.isdir(target):  # not written meanwhile by another process
                    raise
        elif replace:
            _swap(scratch, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # gone already once renamed


@contextlib.contextmanager
def replacing_file(path):
    """Yields a path beside `path` to write a file to; when the block ends
    without an error, that file replaces `path` (`os.replace`), else it is
    removed and `path` is untouched. It ends like `path` (`.keras`,
    `.weights.h5`, ...), for writers that check the extension.

    Args:
        path: str or os.PathLike. The file to write.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.weights.h5")
    >>> with replacing_file(path) as scratch:
    ...     scratch.endswith(".weights.h5")
    ...     open(scratch, "w").close()
    True
    >>> os.listdir(os.path.dirname(path))
    ['model.weights.h5']
    """
    target = _prepare(path)
    scratch = _sibling(target, SAVING)
    try:
        yield scratch
        if os.path.exists(target):
            shutil.copymode(target, scratch)
        os.replace(scratch, target)
    finally:
        if os.path.isdir(scratch):  # a writer that made a directory
            shutil.rmtree(scratch, ignore_errors=True)
        elif os.path.lexists(scratch):
            os.remove(scratch)


@contextlib.contextmanager
def replacing_file_of_keras(filepath, overwrite, one_file):
    """`replacing_file(filepath)` for a Keras `save` or `save_weights`: its
    scratch path, renamed to `filepath` on success; `filepath` itself where
    Keras writes in its own way (not a local path, not `one_file`, or
    `overwrite=False` over an existing file, which Keras refuses)."""
    local = isinstance(filepath, (str, os.PathLike)) and "://" not in os.fspath(filepath)
    if not (local and one_file) or (not overwrite and os.path.exists(filepath)):
        yield filepath
        return
    with replacing_file(filepath) as scratch:
        yield scratch


def recover(path):
    """Puts back the previous save of `path` when a process was killed while
    replacing it (between its two renames): `path` is missing, and the
    previous save is beside it under its aside name. Otherwise nothing.

    Args:
        path: str or os.PathLike. A directory written by `replacing_directory`
            (anything else, such as an `hf://` handle, is left alone).

    Example:

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.mkdir(os.path.join(folder, ".preset.999999999-0123abcd.old"))  # as a killed save left it
    >>> recover(os.path.join(folder, "preset"))
    >>> os.listdir(folder)
    ['preset']
    """
    if not isinstance(path, (str, os.PathLike)) or "://" in os.fspath(path):
        return
    target = os.path.realpath(os.path.expanduser(os.fspath(path)))
    if os.path.lexists(target) or not os.path.isdir(os.path.dirname(target)):
        return
    aside = _leftovers(target, (OLD,))  # one, unless a rename failed twice; the newest is the last save
    if aside:
        try:
            os.rename(max(aside, key=os.path.getmtime), target)
        except OSError:
            if not os.path.isdir(target):  # not put back by another process first
                raise


def _prepare(path):
    """`path` made absolute, its folder created, an interrupted replacement
    recovered and the scratch names a killed save left removed. A symbolic
    link is followed: what it points to is replaced, the link kept."""
    target = os.path.realpath(os.path.expanduser(os.fspath(path)))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    recover(target)
    for leftover in _leftovers(target, (SAVING, DELETING, OLD)):
        _remove(leftover)
    return target


def _swap(scratch, target):
    """Replaces directory `target` by `scratch`: the old one aside, the new
    one in (the old one back if that fails), then the old one removed."""
    aside = _sibling(target, OLD)
    os.rename(target, aside)
    try:
        os.rename(scratch, target)
    except BaseException:
        os.rename(aside, target)
        raise
    deleting = _sibling(target, DELETING)
    try:  # not `OLD` any more, so `recover` never puts back a half-removed directory
        os.rename(aside, deleting)
    except OSError:
        deleting = aside
    _remove(deleting)


def _sibling(target, kind):
    folder, name = os.path.split(target)
    extension = name[name.find("."):] if "." in name.lstrip(".") else ""
    return os.path.join(folder, f".{name}.{os.getpid()}-{secrets.token_hex(4)}.{kind}{extension}")


def _leftovers(target, kinds):
    """The names of `kinds` beside `target` left by processes no longer running."""
    folder, name = os.path.split(target)
    pattern = re.compile(rf"\.{re.escape(name)}\.(\d+)-[0-9a-f]{{8}}\.({'|'.join(kinds)})")
    found = [(pattern.match(entry), entry) for entry in os.listdir(folder)]
    return [os.path.join(folder, entry) for match, entry in found if match and not _running(int(match.group(1)))]


def _running(pid):
    if pid == os.getpid():
        return False  # this process: a save of its own that failed
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid < 2**31  # another user's process (or a number no process can have)
    return True


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        try:
            os.remove(path)
        except OSError:
            pass  # removed by someone else, or cleaned up by the next save
