// Vigil's single-threaded executor. See include/CVigilEventLoop.h.
//
// Swift's concurrency runtime lets a process replace where jobs go through exported hook
// variables (swift_task_enqueueGlobal_hook and friends; SwiftNIO installs the first the same
// way). Every hook here puts the job on one queue that `cvigil_loop_run` drains on its thread;
// delayed jobs wait in a binary heap under one timerfd; signals arrive through a signalfd.
// The hooks use Swift's calling convention, which clang spells `swiftcall`.
#define _GNU_SOURCE
#include "CVigilEventLoop.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define SWIFTCALL __attribute__((swiftcall))

typedef struct Job Job;
typedef struct {
    void *identity;
    uintptr_t implementation;
} SerialExecutorRef;

typedef SWIFTCALL void (*EnqueueOriginal)(Job *);
typedef SWIFTCALL void (*EnqueueHook)(Job *, EnqueueOriginal);
typedef SWIFTCALL void (*DelayOriginal)(unsigned long long, Job *);
typedef SWIFTCALL void (*DelayHook)(unsigned long long, Job *, DelayOriginal);
typedef SWIFTCALL void (*DeadlineOriginal)(long long, long long, long long, long long, int, Job *);
typedef SWIFTCALL void (*DeadlineHook)(long long, long long, long long, long long, int, Job *, DeadlineOriginal);
typedef SWIFTCALL void (*MainOriginal)(Job *);
typedef SWIFTCALL void (*MainHook)(Job *, MainOriginal);

extern EnqueueHook swift_task_enqueueGlobal_hook;
extern DelayHook swift_task_enqueueGlobalWithDelay_hook;
extern DeadlineHook swift_task_enqueueGlobalWithDeadline_hook;
extern MainHook swift_task_enqueueMainExecutor_hook;
extern SWIFTCALL void swift_job_run(Job *job, SerialExecutorRef executor);
extern SWIFTCALL SerialExecutorRef swift_task_getMainExecutor(void);

// Swift's clocks on Linux: ContinuousClock is CLOCK_BOOTTIME, SuspendingClock CLOCK_MONOTONIC.
enum { swift_clock_continuous = 1, swift_clock_suspending = 2 };

typedef struct {
    Job *job;
    bool main;
} Entry;

typedef struct {
    uint64_t deadline;  // CLOCK_MONOTONIC, ns
    uint64_t sequence;  // FIFO among equal deadlines; a callback timer's id
    Entry entry;        // a delayed job, or
    cvigil_timer_callback callback;  // a callback timer (cancellable)
    void *context;
} Timer;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *ready;
static size_t ready_count, ready_capacity;
static Timer *timers;
static size_t timer_count, timer_capacity;
static uint64_t timer_sequence;
static uint64_t armed_deadline;  // what the timerfd is set to; 0 = disarmed
static bool installed, running, stopping;
static pthread_t loop_thread;
static int epoll_fd = -1, wake_fd = -1, timer_fd = -1, signal_fd = -1;
static sigset_t watched;
static cvigil_signal_callback callbacks[_NSIG];
static void *contexts[_NSIG];

static uint64_t now_on(clockid_t clock) {
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void grow(void **array, size_t *capacity, size_t element) {
    size_t next = *capacity ? *capacity * 2 : 64;
    void *grown = realloc(*array, next * element);
    if (!grown) abort();
    *array = grown;
    *capacity = next;
}

static bool on_loop_thread(void) { return running && pthread_equal(pthread_self(), loop_thread); }

static void wake(void) {
    if (wake_fd < 0 || on_loop_thread()) return;
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd, &one, sizeof one);
    (void)ignored;
}

static void push_ready(Job *job, bool main) {
    pthread_mutex_lock(&lock);
    if (ready_count == ready_capacity) grow((void **)&ready, &ready_capacity, sizeof(Entry));
    ready[ready_count++] = (Entry){job, main};
    pthread_mutex_unlock(&lock);
    wake();
}

static bool earlier(const Timer *a, const Timer *b) {
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->sequence < b->sequence);
}

// The heap helpers are called with the lock held.
static void sift_up(size_t index, Timer timer) {
    while (index > 0 && earlier(&timer, &timers[(index - 1) / 2])) {
        timers[index] = timers[(index - 1) / 2];
        index = (index - 1) / 2;
    }
    timers[index] = timer;
}

static void sift_down(size_t index, Timer timer) {
    for (;;) {
        size_t child = index * 2 + 1;
        if (child >= timer_count) break;
        if (child + 1 < timer_count && earlier(&timers[child + 1], &timers[child])) child++;
        if (!earlier(&timers[child], &timer)) break;
        timers[index] = timers[child];
        index = child;
    }
    timers[index] = timer;
}

static Timer remove_timer(size_t index) {
    Timer removed = timers[index];
    Timer last = timers[--timer_count];
    if (index < timer_count) {
        if (index > 0 && earlier(&last, &timers[(index - 1) / 2])) sift_up(index, last);
        else sift_down(index, last);
    }
    return removed;
}

static uint64_t push_timer(uint64_t deadline, Job *job, cvigil_timer_callback callback, void *context) {
    pthread_mutex_lock(&lock);
    if (timer_count == timer_capacity) grow((void **)&timers, &timer_capacity, sizeof(Timer));
    uint64_t sequence = ++timer_sequence;
    Timer timer = {deadline, sequence, {job, false}, callback, context};
    sift_up(timer_count++, timer);
    bool rearm = armed_deadline == 0 || deadline < armed_deadline;
    pthread_mutex_unlock(&lock);
    if (rearm) wake();
    return sequence;
}

uint64_t cvigil_loop_add_timer(uint64_t deadline, cvigil_timer_callback callback, void *context) {
    return push_timer(deadline, NULL, callback, context);
}

bool cvigil_loop_cancel_timer(uint64_t id) {
    pthread_mutex_lock(&lock);
    bool found = false;
    for (size_t index = 0; index < timer_count; index++) {
        if (timers[index].sequence == id && timers[index].callback) {
            remove_timer(index);
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    // The loop re-arms (or disarms) the timerfd for the new earliest deadline before it sleeps.
    if (found) wake();
    return found;
}

uint64_t cvigil_loop_now(void) { return now_on(CLOCK_MONOTONIC); }

static SWIFTCALL void enqueue_global(Job *job, EnqueueOriginal original) {
    (void)original;
    push_ready(job, false);
}

static SWIFTCALL void enqueue_main(Job *job, MainOriginal original) {
    (void)original;
    push_ready(job, true);
}

static SWIFTCALL void enqueue_delayed(unsigned long long delay, Job *job, DelayOriginal original) {
    (void)original;
    push_timer(now_on(CLOCK_MONOTONIC) + delay, job, NULL, NULL);
}

static SWIFTCALL void enqueue_deadline(long long seconds, long long nanoseconds, long long tolerance_seconds,
                                       long long tolerance_nanoseconds, int clock, Job *job,
                                       DeadlineOriginal original) {
    (void)original;
    (void)tolerance_seconds;
    (void)tolerance_nanoseconds;
    int64_t deadline = (int64_t)seconds * 1000000000 + (int64_t)nanoseconds;
    // Express the deadline on CLOCK_MONOTONIC, the timerfd's clock.
    int64_t now = (int64_t)now_on(clock == swift_clock_continuous ? CLOCK_BOOTTIME : CLOCK_MONOTONIC);
    int64_t delay = deadline > now ? deadline - now : 0;
    push_timer(now_on(CLOCK_MONOTONIC) + (uint64_t)delay, job, NULL, NULL);
}

bool cvigil_loop_install(void) {
    if (installed) return true;
    if (swift_task_enqueueGlobal_hook || swift_task_enqueueGlobalWithDelay_hook ||
        swift_task_enqueueGlobalWithDeadline_hook || swift_task_enqueueMainExecutor_hook)
        return false;
    sigemptyset(&watched);
    swift_task_enqueueGlobal_hook = enqueue_global;
    swift_task_enqueueGlobalWithDelay_hook = enqueue_delayed;
    swift_task_enqueueGlobalWithDeadline_hook = enqueue_deadline;
    swift_task_enqueueMainExecutor_hook = enqueue_main;
    installed = true;
    return true;
}

bool cvigil_loop_installed(void) { return installed; }

void cvigil_loop_stop(void) {
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_mutex_unlock(&lock);
    wake();
}

static int add(int fd) {
    struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
    return epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
}

static int open_descriptors(void) {
    if (epoll_fd >= 0) return 0;
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (epoll_fd < 0 || wake_fd < 0 || timer_fd < 0) return errno;
    if (add(wake_fd) < 0 || add(timer_fd) < 0) return errno;
    return 0;
}

int cvigil_loop_watch_signal(int signal, cvigil_signal_callback callback, void *context) {
    int failed = open_descriptors();
    if (failed) return failed;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, signal);
    if (pthread_sigmask(SIG_BLOCK, &one, NULL) != 0) return errno;
    pthread_mutex_lock(&lock);
    callbacks[signal] = callback;
    contexts[signal] = context;
    sigaddset(&watched, signal);
    bool first = signal_fd < 0;
    signal_fd = signalfd(signal_fd, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
    pthread_mutex_unlock(&lock);
    if (signal_fd < 0) return errno;
    if (first && add(signal_fd) < 0) return errno;
    return 0;
}

void cvigil_loop_unwatch_signal(int signal) {
    // The signal stays blocked: unblocking a pending SIGTERM here would kill the process with
    // the default action while it is already stopping.
    pthread_mutex_lock(&lock);
    sigdelset(&watched, signal);
    callbacks[signal] = NULL;
    if (signal_fd >= 0) signalfd(signal_fd, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
    pthread_mutex_unlock(&lock);
}

static void arm(uint64_t deadline) {
    if (deadline == armed_deadline) return;
    struct itimerspec when = {0};
    if (deadline) {
        when.it_value.tv_sec = (time_t)(deadline / 1000000000u);
        when.it_value.tv_nsec = (long)(deadline % 1000000000u);
    }
    timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, NULL);
    armed_deadline = deadline;
}

static void deliver_signals(void) {
    struct signalfd_siginfo info;
    while (read(signal_fd, &info, sizeof info) == sizeof info) {
        int signal = (int)info.ssi_signo;
        pthread_mutex_lock(&lock);
        cvigil_signal_callback callback = signal < _NSIG ? callbacks[signal] : NULL;
        void *context = signal < _NSIG ? contexts[signal] : NULL;
        pthread_mutex_unlock(&lock);
        if (callback) callback(signal, context);
    }
}

int cvigil_loop_run(void) {
    int failed = open_descriptors();
    if (failed) return failed;
    loop_thread = pthread_self();
    running = true;
    SerialExecutorRef generic = {0, 0};
    SerialExecutorRef main_executor = swift_task_getMainExecutor();
    Entry *batch = NULL;
    size_t batch_capacity = 0;
    for (;;) {
        // Fire due callback timers (outside the lock: they enqueue jobs).
        pthread_mutex_lock(&lock);
        uint64_t now = timer_count ? now_on(CLOCK_MONOTONIC) : 0;
        while (timer_count && timers[0].deadline <= now && timers[0].callback) {
            Timer due = remove_timer(0);
            pthread_mutex_unlock(&lock);
            due.callback(due.context);
            pthread_mutex_lock(&lock);
        }
        // Move due jobs to the ready queue, take the whole queue, run it.
        while (timer_count && timers[0].deadline <= now && !timers[0].callback) {
            Timer due = remove_timer(0);
            if (ready_count == ready_capacity) grow((void **)&ready, &ready_capacity, sizeof(Entry));
            ready[ready_count++] = due.entry;
        }
        size_t count = ready_count;
        if (count) {
            Entry *swap = batch;
            size_t swap_capacity = batch_capacity;
            batch = ready;
            batch_capacity = ready_capacity;
            ready = swap;
            ready_capacity = swap_capacity;
            ready_count = 0;
        }
        bool stop = stopping && count == 0;
        uint64_t next = timer_count ? timers[0].deadline : 0;
        pthread_mutex_unlock(&lock);
        if (stop) break;
        if (count) {
            for (size_t index = 0; index < count; index++) {
                swift_job_run(batch[index].job, batch[index].main ? main_executor : generic);
            }
            continue;
        }
        arm(next);
        struct epoll_event events[4];
        int ready_events = epoll_wait(epoll_fd, events, 4, -1);
        for (int index = 0; index < ready_events; index++) {
            int fd = events[index].data.fd;
            uint64_t value;
            if (fd == wake_fd || fd == timer_fd) {
                ssize_t ignored = read(fd, &value, sizeof value);
                (void)ignored;
                if (fd == timer_fd) armed_deadline = 0;
            } else if (fd == signal_fd) {
                deliver_signals();
            }
        }
    }
    running = false;
    free(batch);
    return 0;
}
