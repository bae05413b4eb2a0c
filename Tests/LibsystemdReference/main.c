/*
 * vigil-libsystemd-reference: libsystemd's own answer for the inputs a conformance test gives
 * Vigil (Tests/VigilSystemdTests/LibsystemdConformanceTests.swift). Vigil speaks the journal
 * and LISTEN_FDS protocols itself; this helper is the reference it is compared with.
 *
 *   vigil-libsystemd-reference journal INPUT OUTPUT
 *       INPUT holds fields, each as a little-endian 64-bit length and that many bytes
 *       (NAME=value, the value may hold newlines and NUL). They go to sd_journal_sendv(3),
 *       which sends to the fixed path /run/systemd/journal/socket: so the helper first enters a
 *       private mount namespace with a tmpfs on /run and binds that socket itself, as journald
 *       would. OUTPUT gets one byte, 'D' (the entry came as a datagram) or 'M' (as a sealed
 *       memfd passed with SCM_RIGHTS, libsystemd's path for entries too big for one
 *       datagram), then the entry's bytes in the native protocol, exactly as journald would
 *       read them.
 *
 *   vigil-libsystemd-reference listen PID FDS NAMES OPEN OUTPUT
 *       Sets LISTEN_PID (PID: literal, with "self" replaced by this process's pid and "other" by
 *       the next one, or "-" for unset), LISTEN_FDS and LISTEN_FDNAMES (literal, or "-" for
 *       unset), opens OPEN descriptors from fd 3 upwards, calls
 *       sd_listen_fds_with_names(3) and writes "r=<result>\n" and then each name ending in NUL.
 *
 * Exits 0 when it produced its output, 1 (with the reason on stderr) when it could not.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
/* The fields given are the whole entry: no CODE_FILE=/CODE_LINE=/CODE_FUNC= of this file. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>
#include <unistd.h>

static int fail(const char *what) {
    fprintf(stderr, "vigil-libsystemd-reference: %s: %s\n", what, strerror(errno));
    return 1;
}

static int write_file(const char *path, const char *bytes, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return fail(path);
    if (size > 0 && fwrite(bytes, 1, size, f) != size) return fail(path);
    if (fclose(f) != 0) return fail(path);
    return 0;
}

static int write_text(const char *path, const char *text) {
    return write_file(path, text, strlen(text));
}

/* A private mount namespace with a tmpfs on /run: as root directly, otherwise in a user
 * namespace of our own (mapped to our uid). */
static int private_run(void) {
    if (unshare(CLONE_NEWNS) < 0) {
        if (errno != EPERM) return fail("unshare(CLONE_NEWNS)");
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return fail("unshare(CLONE_NEWUSER|CLONE_NEWNS)");
        char map[64];
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
        if (write_text("/proc/self/uid_map", map) || write_text("/proc/self/setgroups", "deny")) return 1;
        snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
        if (write_text("/proc/self/gid_map", map)) return 1;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return fail("make / private");
    if (mount("vigil-reference", "/run", "tmpfs", 0, "mode=0755") < 0) return fail("mount tmpfs on /run");
    if (mkdir("/run/systemd", 0755) < 0 || mkdir("/run/systemd/journal", 0755) < 0)
        return fail("mkdir /run/systemd/journal");
    return 0;
}

static int journal(const char *input, const char *output) {
    FILE *in = fopen(input, "rb");
    if (!in) return fail(input);
    struct iovec iov[256];
    size_t n = 0;
    uint64_t length;
    while (fread(&length, sizeof length, 1, in) == 1) {
        if (n == 256 || length > (1u << 30)) { errno = E2BIG; return fail("fields in INPUT"); }
        char *field = malloc(length ? length : 1);
        if (!field || fread(field, 1, length, in) != length) return fail("read INPUT");
        iov[n].iov_base = field;
        iov[n].iov_len = length;
        n++;
    }
    fclose(in);

    if (private_run()) return 1;
    int journald = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (journald < 0) return fail("socket");
    struct sockaddr_un address = { .sun_family = AF_UNIX, .sun_path = "/run/systemd/journal/socket" };
    if (bind(journald, (struct sockaddr *)&address, sizeof address) < 0) return fail("bind /run/systemd/journal/socket");

    int r = sd_journal_sendv(iov, (int)n);
    if (r < 0) { errno = -r; return fail("sd_journal_sendv"); }

    /* The datagram's size first (MSG_PEEK|MSG_TRUNC), then the datagram and any descriptor. */
    char probe;
    ssize_t size = recv(journald, &probe, 1, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
    if (size < 0) return fail("nothing arrived at the socket");
    char *buffer = malloc((size_t)size + 2);
    if (!buffer) return fail("malloc");
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int))]; } control;
    struct iovec data = { .iov_base = buffer + 1, .iov_len = (size_t)size };
    struct msghdr message = { .msg_iov = &data, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof control };
    ssize_t got = recvmsg(journald, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got < 0) return fail("recvmsg");
    struct cmsghdr *c = CMSG_FIRSTHDR(&message);
    if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        /* journald accepts a memfd only when sealed against every change, and then reads it
         * from the start: the same here. */
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof fd);
        int seals = fcntl(fd, F_GET_SEALS);
        int needed = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;
        if (seals < 0 || (seals & needed) != needed) { errno = EPERM; return fail("the memfd is not sealed"); }
        struct stat st;
        if (fstat(fd, &st) < 0) return fail("fstat memfd");
        char *entry = malloc((size_t)st.st_size + 1);
        if (!entry) return fail("malloc");
        entry[0] = 'M';
        if (pread(fd, entry + 1, (size_t)st.st_size, 0) != st.st_size) return fail("read memfd");
        return write_file(output, entry, (size_t)st.st_size + 1);
    }
    buffer[0] = 'D';
    return write_file(output, buffer, (size_t)got + 1);
}

static int listen_fds(const char *pid, const char *fds, const char *names, const char *open_count, const char *output) {
    char value[256];
    if (strcmp(pid, "-") != 0) {
        /* "self" and "other" stand for this pid and the next, wherever they appear. */
        const char *self = strstr(pid, "self"), *other = strstr(pid, "other");
        if (self) snprintf(value, sizeof value, "%.*s%d%s", (int)(self - pid), pid, (int)getpid(), self + 4);
        else if (other) snprintf(value, sizeof value, "%.*s%d%s", (int)(other - pid), pid, (int)getpid() + 1, other + 5);
        else snprintf(value, sizeof value, "%s", pid);
        setenv("LISTEN_PID", value, 1);
    } else unsetenv("LISTEN_PID");
    if (strcmp(fds, "-") != 0) setenv("LISTEN_FDS", fds, 1); else unsetenv("LISTEN_FDS");
    if (strcmp(names, "-") != 0) setenv("LISTEN_FDNAMES", names, 1); else unsetenv("LISTEN_FDNAMES");

    int count = atoi(open_count);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0) return fail("/dev/null");
    for (int i = 0; i < count; i++)
        if (3 + i != null && dup2(null, 3 + i) < 0) return fail("dup2");

    char **list = NULL;
    int r = sd_listen_fds_with_names(0, &list);
    size_t size = 64;
    for (char **name = list; name && *name; name++) size += strlen(*name) + 1;
    char *text = malloc(size);
    if (!text) return fail("malloc");
    int at = snprintf(text, size, "r=%d\n", r);
    for (char **name = list; r > 0 && name && *name; name++) {
        size_t length = strlen(*name) + 1; /* with its NUL: a name may hold a newline */
        memcpy(text + at, *name, length);
        at += (int)length;
    }
    return write_file(output, text, (size_t)at);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "journal") == 0) return journal(argv[2], argv[3]);
    if (argc == 7 && strcmp(argv[1], "listen") == 0) return listen_fds(argv[2], argv[3], argv[4], argv[5], argv[6]);
    fprintf(stderr, "usage: vigil-libsystemd-reference journal INPUT OUTPUT | listen PID FDS NAMES OPEN OUTPUT\n");
    return 2;
}
