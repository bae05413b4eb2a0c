/*
 * vigil-floor: the C floor for Vigil's process-level benchmarks.
 *
 * The least a daemon can do for the same lifecycle as vigild, written the way a careful C
 * programmer would: libsystemd for sd_notify, a signalfd loop (no threads), a timerfd for the
 * watchdog only when WATCHDOG_USEC asks for one.
 *
 *   start:  read the configuration file, read the state file, write the unclean-shutdown
 *           marker (<state>.running, fsync + rename + fsync of the directory), log a line,
 *           READY=1 with STATUS=.
 *   SIGHUP: RELOADING=1 with MONOTONIC_USEC=, read the configuration again, log, READY=1.
 *   SIGTERM/SIGINT: STOPPING=1, checkpoint the state file (write a temporary file, fsync,
 *           rename, fsync the directory), remove the marker, fsync the directory, exit 0.
 *   watchdog: WATCHDOG=1 every WATCHDOG_USEC / 2.
 *
 * Usage: vigil-floor run --config FILE --state-directory DIR [--runtime-directory DIR]
 * (the arguments vigild takes; the runtime directory is accepted and ignored).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

static const char *config_path;
static char state_path[4096], marker_path[4200], temp_path[4200], state_dir[4096];
static char config_buffer[65536];
static unsigned long long generation;

static void die(const char *what) {
    fprintf(stderr, "<3>vigil-floor: %s: %s\n", what, strerror(errno));
    sd_notifyf(0, "STATUS=%s failed: %s", what, strerror(errno));
    exit(1);
}

static size_t read_file(const char *path, char *buffer, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return (size_t)-1;
    size_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buffer + total, size - total);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        total += (size_t)n;
    }
    close(fd);
    return total;
}

static void make_directories(const char *path) {
    char partial[4096];
    snprintf(partial, sizeof partial, "%s", path);
    for (char *slash = partial + 1; *slash; slash++) {
        if (*slash != '/') continue;
        *slash = 0;
        if (mkdir(partial, 0700) < 0 && errno != EEXIST) die("create state directory");
        *slash = '/';
    }
    if (mkdir(partial, 0700) < 0 && errno != EEXIST) die("create state directory");
}

static void fsync_directory(void) {
    int fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) < 0) die("fsync state directory");
    close(fd);
}

static void write_atomically(const char *path, const char *text) {
    snprintf(temp_path, sizeof temp_path, "%s.tmp", path);
    int fd = open(temp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("open temporary file");
    size_t length = strlen(text);
    if (write(fd, text, length) != (ssize_t)length || fsync(fd) < 0) die("write temporary file");
    close(fd);
    if (rename(temp_path, path) < 0) die("rename");
    fsync_directory();
}

static void load_configuration(void) {
    size_t n = read_file(config_path, config_buffer, sizeof config_buffer - 1);
    if (n == (size_t)-1) die("read configuration");
    config_buffer[n] = 0;
    if (strchr(config_buffer, '{') == NULL) {
        errno = EINVAL;
        die("parse configuration");
    }
    generation++;
}

static uint64_t monotonic_usec(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

int main(int argc, char **argv) {
    const char *state_directory = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) config_path = argv[++i];
        else if (strcmp(argv[i], "--state-directory") == 0 && i + 1 < argc) state_directory = argv[++i];
        else if (strcmp(argv[i], "--runtime-directory") == 0 && i + 1 < argc) i++;
    }
    if (!config_path || !state_directory) {
        fprintf(stderr, "usage: vigil-floor run --config FILE --state-directory DIR\n");
        return 2;
    }
    snprintf(state_dir, sizeof state_dir, "%s", state_directory);
    snprintf(state_path, sizeof state_path, "%s/state.json", state_directory);
    snprintf(marker_path, sizeof marker_path, "%s.running", state_path);

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGUSR1);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) die("sigprocmask");
    int signals = signalfd(-1, &mask, SFD_CLOEXEC);
    if (signals < 0) die("signalfd");

    load_configuration();
    static char state_buffer[65536];
    size_t state_length = read_file(state_path, state_buffer, sizeof state_buffer - 1);
    unsigned long long heartbeats = 0;
    if (state_length != (size_t)-1) {
        state_buffer[state_length] = 0;
        const char *count = strstr(state_buffer, "\"heartbeat\":");
        if (count) heartbeats = strtoull(count + 12, NULL, 10);
    }
    make_directories(state_dir);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "%d\n", getpid());
    write_atomically(marker_path, pid_text);

    int timer = -1;
    uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0) {
        timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        struct itimerspec every = {0};
        every.it_interval.tv_sec = (time_t)(watchdog_usec / 2 / 1000000u);
        every.it_interval.tv_nsec = (long)(watchdog_usec / 2 % 1000000u) * 1000;
        every.it_value = every.it_interval;
        if (timer < 0 || timerfd_settime(timer, 0, &every, NULL) < 0) die("timerfd");
    }

    fprintf(stderr, "<6>Started vigil-floor (generation %llu)\n", generation);
    sd_notify(0, "READY=1\nSTATUS=Running");

    struct pollfd fds[2] = {{.fd = signals, .events = POLLIN}, {.fd = timer, .events = POLLIN}};
    for (;;) {
        if (poll(fds, timer >= 0 ? 2 : 1, -1) < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if (timer >= 0 && (fds[1].revents & POLLIN)) {
            uint64_t expirations;
            if (read(timer, &expirations, sizeof expirations) > 0) sd_notify(0, "WATCHDOG=1");
        }
        if (!(fds[0].revents & POLLIN)) continue;
        struct signalfd_siginfo info;
        if (read(signals, &info, sizeof info) != sizeof info) continue;
        switch (info.ssi_signo) {
        case SIGHUP:
            sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)monotonic_usec());
            load_configuration();
            fprintf(stderr, "<6>Reloaded: configuration generation %llu\n", generation);
            sd_notify(0, "READY=1\nSTATUS=Running");
            break;
        case SIGUSR1:
            break;
        case SIGTERM:
        case SIGINT: {
            sd_notify(0, "STOPPING=1");
            char state_text[128];
            snprintf(state_text, sizeof state_text, "{\"formatVersion\":1,\"values\":{\"heartbeat\":%llu}}\n",
                     heartbeats);
            write_atomically(state_path, state_text);
            if (unlink(marker_path) < 0) die("remove marker");
            fsync_directory();
            fprintf(stderr, "<6>Stopped\n");
            return 0;
        }
        }
    }
}
