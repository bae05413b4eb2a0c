#!/usr/bin/python3
"""A FUSE file system that hangs on demand (issue 21 #7), for tests of reads that never return.

    hangfs.py MOUNTPOINT SOURCE CONTROL [--writable]

Serves the files of the directory SOURCE, read-only, at MOUNTPOINT (with allow_other, so a
service's user can read them); with --writable, files can be created, written, synced, renamed
and removed too (a state directory). While CONTROL/hang-open, CONTROL/hang-read,
CONTROL/hang-getattr or CONTROL/hang-fsync exists, that operation on any file (never on the root
directory) does not answer; it answers
again once the file is removed. Each hanging request first creates CONTROL/hung-<op>, so a test
awaits the moment its reader is inside the call instead of sleeping. CONTROL/ready appears once
the file system is mounted.

Interrupts are honoured (mounted with -o intr): a request whose caller is killed (a process
exiting while one of its threads waits here) answers EINTR, as well-behaved FUSE servers do. A
server that ignores them keeps such a thread, and so its exiting process, in the kernel until it
answers or the connection is aborted (/sys/fs/fuse/connections/N/abort).

Runs in the foreground until MOUNTPOINT is unmounted (umount MOUNTPOINT). Needs fuse3's /dev/fuse and fusepy
(Debian: fuse3 python3-fusepy, whose module is `fusepy`).
"""
import errno
import os
import stat
import sys
import time

try:
    import fusepy as fuse
except ImportError:  # fusepy from PyPI names its module `fuse`
    import fuse


class HangFS(fuse.Operations):
    def __init__(self, source, control, writable=False):
        self.source = source
        self.control = control
        self.writable = writable

    def _hang(self, op, path):
        if path == "/":
            return
        flag = os.path.join(self.control, "hang-" + op)
        if not os.path.exists(flag):
            return
        with open(os.path.join(self.control, "hung-" + op), "w") as marker:
            marker.write(path + "\n")
        # fuse_interrupted() is libfuse's "the caller gave up" for this request.
        while os.path.exists(flag):
            if fuse._libfuse.fuse_interrupted():
                raise fuse.FuseOSError(errno.EINTR)
            time.sleep(0.02)

    def _real(self, path):
        return os.path.join(self.source, path.lstrip("/"))

    def init(self, path):
        with open(os.path.join(self.control, "ready"), "w") as ready:
            ready.write("%d\n" % os.getpid())

    def getattr(self, path, fh=None):
        self._hang("getattr", path)
        try:
            info = os.lstat(self._real(path))
        except OSError as error:
            raise fuse.FuseOSError(error.errno)
        attributes = {key: getattr(info, key) for key in (
            "st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_atime", "st_mtime", "st_ctime")}
        # Read-only for everyone: the files belong to whoever runs the test, the reader may not.
        if not self.writable:
            attributes["st_mode"] = (info.st_mode & ~0o7777) | (0o755 if stat.S_ISDIR(info.st_mode) else 0o444)
        return attributes

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._real(path))

    def open(self, path, flags):
        self._hang("open", path)
        if flags & (os.O_WRONLY | os.O_RDWR) and not self.writable:
            raise fuse.FuseOSError(errno.EROFS)
        try:
            return os.open(self._real(path), flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_TRUNC | os.O_DIRECTORY))
        except OSError as error:
            raise fuse.FuseOSError(error.errno)

    def _write_call(self, call, *arguments):
        if not self.writable:
            raise fuse.FuseOSError(errno.EROFS)
        try:
            return call(*arguments)
        except OSError as error:
            raise fuse.FuseOSError(error.errno)

    def create(self, path, mode, fi=None):
        return self._write_call(os.open, self._real(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode & 0o7777)

    def write(self, path, data, offset, fh):
        return self._write_call(os.pwrite, fh, data, offset)

    def truncate(self, path, length, fh=None):
        self._write_call(os.truncate, self._real(path), length)
        return 0

    def chmod(self, path, mode):
        self._write_call(os.chmod, self._real(path), mode & 0o7777)
        return 0

    def chown(self, path, uid, gid):
        self._write_call(os.lchown, self._real(path), uid, gid)
        return 0

    def utimens(self, path, times=None):
        self._write_call(os.utime, self._real(path), times)
        return 0

    def unlink(self, path):
        self._write_call(os.unlink, self._real(path))
        return 0

    def mkdir(self, path, mode):
        self._write_call(os.mkdir, self._real(path), mode & 0o7777)
        return 0

    def rmdir(self, path):
        self._write_call(os.rmdir, self._real(path))
        return 0

    def rename(self, old, new):
        self._write_call(os.rename, self._real(old), self._real(new))
        return 0

    def fsync(self, path, datasync, fh):
        self._hang("fsync", path)
        self._write_call(os.fsync, fh)
        return 0

    def fsyncdir(self, path, datasync, fh):
        return 0

    def flush(self, path, fh):
        return 0

    def read(self, path, size, offset, fh):
        self._hang("read", path)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)
        return 0


def main():
    mountpoint, source, control = sys.argv[1:4]
    writable = "--writable" in sys.argv[4:]
    fuse.FUSE(HangFS(source, control, writable), mountpoint, foreground=True, allow_other=True, intr=True,
              direct_io=True, ro=not writable)


if __name__ == "__main__":
    main()
