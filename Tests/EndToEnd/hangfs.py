#!/usr/bin/python3
"""A FUSE file system that hangs on demand (issue 21 #7), for tests of reads that never return.

    hangfs.py MOUNTPOINT SOURCE CONTROL

Serves the files of the directory SOURCE, read-only, at MOUNTPOINT (with allow_other, so a
service's user can read them). While CONTROL/hang-open, CONTROL/hang-read or CONTROL/hang-getattr
exists, that operation on any file (never on the root directory) does not answer; it answers
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
    def __init__(self, source, control):
        self.source = source
        self.control = control

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
        attributes["st_mode"] = (info.st_mode & ~0o7777) | (0o755 if stat.S_ISDIR(info.st_mode) else 0o444)
        return attributes

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._real(path))

    def open(self, path, flags):
        self._hang("open", path)
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise fuse.FuseOSError(errno.EROFS)
        try:
            return os.open(self._real(path), os.O_RDONLY)
        except OSError as error:
            raise fuse.FuseOSError(error.errno)

    def read(self, path, size, offset, fh):
        self._hang("read", path)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)
        return 0


def main():
    mountpoint, source, control = sys.argv[1:4]
    fuse.FUSE(HangFS(source, control), mountpoint, foreground=True, allow_other=True, intr=True,
              direct_io=True, ro=True)


if __name__ == "__main__":
    main()
