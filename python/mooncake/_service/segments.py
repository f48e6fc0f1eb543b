"""The files behind the REST service's decode segments (``POST /api/reconfigure``).

A request never names a file the service opens. The service owns one directory, made for it
alone (``mkdtemp``: mode 0700, a fresh name) under a parent that defaults to ``/dev/shm``; the
request's ``path`` is only the name of a new file there: one plain name, created with
``O_CREAT | O_EXCL | O_NOFOLLOW`` relative to the directory's descriptor, so an existing file, a
symbolic link planted under that name, ``..`` or a slash can never reach anything else. The file's
range is reserved with ``posix_fallocate`` (a sparse file on a full tmpfs would otherwise kill
the process with SIGBUS on the first write into it), mapped by the store through
``/proc/self/fd/N`` (the descriptor just created, so nothing can swap the name in between) and
unlinked once mounted: the mapping keeps the memory until the segment is unmounted, and a crashed
service leaves at most an empty directory behind.

``/api/mount_shm`` (and a decode ``path`` of the form ``/dev/shm/<name>``) mounts an existing
``/dev/shm/<name>``, which the store opens itself: it does not follow a symbolic link planted in
a directory anyone may write (mc_store_mount_segment), and maps only a regular file.
"""

import errno
import mmap
import os
import re
import stat
import tempfile

__all__ = ["SegmentFileError", "SegmentDir", "default_parent", "valid_name",
           "page_aligned", "proc_path", "MAX_SEGMENT_BYTES"]

# MC_MP_MAX_SEGMENT_SIZE (1 PiB): the master refuses anything larger anyway.
MAX_SEGMENT_BYTES = 1 << 50
_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}")


class SegmentFileError(Exception):
    """A segment file that cannot be made or opened: status is the HTTP status to answer."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def default_parent():
    """/dev/shm where it is a writable directory (segments are memory), else the temp dir."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return "/dev/shm"
    return tempfile.gettempdir()


def valid_name(name):
    return (isinstance(name, str) and _NAME.fullmatch(name) is not None
            and name not in (".", ".."))


def proc_path(fd):
    """The path that opens the file of our descriptor fd again (the same inode, whatever its
    name now is)."""
    return f"/proc/self/fd/{fd}"


class SegmentDir:
    """The service's own directory of segment files, made on first use."""

    def __init__(self, parent=None):
        self.parent = parent or default_parent()
        self.path = None
        self._fd = None

    def ensure(self):
        """Makes the directory (once) and returns its path. OSError when the parent will not do."""
        if self._fd is not None:
            return self.path
        path = tempfile.mkdtemp(prefix="mc-rest-segments-", dir=self.parent)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
            os.close(fd)
            raise OSError(errno.EPERM, f"{path} is not private to this user")
        self.path, self._fd = path, fd
        return path

    def create(self, name, offset, size):
        """A new file ``name`` in the directory, [offset, offset + size) reserved: its open
        descriptor (the caller mounts proc_path(fd), then calls release). SegmentFileError for
        a bad name, a name that exists, or no room."""
        if not valid_name(name):
            raise SegmentFileError(
                400, "Invalid path: it must be a plain file name (letters, digits, '.', '_', "
                     "'-'; no '/', not '..'); the service creates the segment file in its own "
                     "directory and never opens an existing file")
        try:
            self.ensure()
        except OSError as exc:
            raise SegmentFileError(500, f"cannot make the segment directory under "
                                        f"{self.parent}: {exc}") from None
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=self._fd)
        except FileExistsError:
            raise SegmentFileError(409, f"{name!r} already exists in the segment directory; "
                                        "the service only mounts files it creates") from None
        except OSError as exc:
            raise SegmentFileError(500, f"cannot create {name!r}: {exc.strerror}") from None
        try:
            vfs = os.fstatvfs(fd)
            if size > vfs.f_bavail * vfs.f_frsize:
                raise SegmentFileError(507, f"not enough space in {self.path} for a {size}-byte "
                                            f"segment ({vfs.f_bavail * vfs.f_frsize} free)")
            try:
                os.posix_fallocate(fd, offset, size)
            except OSError as exc:
                status = 507 if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else 500
                raise SegmentFileError(status, f"cannot reserve {size} bytes for {name!r}: "
                                               f"{exc.strerror}") from None
        except BaseException:
            self.release(name, fd)
            raise
        return fd

    def release(self, name, fd):
        """Closes fd and removes the name (the mapping, if any, keeps the memory)."""
        try:
            os.unlink(name, dir_fd=self._fd)
        except OSError:
            pass
        os.close(fd)

    def close(self):
        """Removes the (normally empty) directory."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            for name in os.listdir(fd):
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    pass
            os.rmdir(self.path)
        except OSError:
            pass
        finally:
            os.close(fd)


def page_aligned(offset):
    return offset % mmap.PAGESIZE == 0

