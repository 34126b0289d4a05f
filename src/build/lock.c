/* The build lock: one build of a library at a time, in threads or
 * processes (out_dir/.lib<name>.so.lock, an flock, which the kernel drops
 * when its holder exits).
 *
 * Waiting is never silent nor endless: the holder writes its pid into the
 * file, a waiter polls the lock, names that pid on stderr (at once when the
 * holder is stopped, ^Z in a shell, which will not let go by itself; after
 * a second when it is running) and gives up after
 * $OPCORE_BUILD_LOCK_TIMEOUT seconds, 60 by default (a stopped build would
 * otherwise block every later build of the library for good). A lock whose named holder is dead (its descriptor lives on in a
 * process it started) is taken over: the file is replaced, so the stale
 * lock guards nothing any more. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "build/build_internal.h"
#include "core/internal.h"

#define DEFAULT_TIMEOUT_S 60.0
#define POLL_NS 50000000L /* 50 ms between tries */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double timeout_s(void)
{
    const char *e = getenv("OPCORE_BUILD_LOCK_TIMEOUT");
    char *end = NULL;
    double t = e && *e ? strtod(e, &end) : -1;
    return end && !*end && t >= 0 ? t : DEFAULT_TIMEOUT_S;
}

static long holder_pid(int fd)
{
    char buf[32] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    long pid = strtol(buf, NULL, 10);
    return pid > 0 ? pid : 0;
}

/* "running", "stopped" or NULL if the process is gone (or a zombie). */
static const char *holder_state(long pid)
{
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return NULL;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return "running";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the state follows the command name */
    char s = p && p[1] == ' ' ? p[2] : 'R';
    if (s == 'Z' || s == 'X') return NULL;
    return s == 'T' || s == 't' ? "stopped" : "running";
}

/* What to do about a stopped holder, for messages. */
static const char *pid_hint(long pid)
{
    static _Thread_local char hint[128];
    snprintf(hint, sizeof hint, ", which is stopped: resume it (kill -CONT %ld) or end it", pid);
    return hint;
}

static bool same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int oc__build_lock(const char *out_dir, const char *name)
{
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/.lib%s.so.lock", out_dir, name);
    double start = now_s(), limit = timeout_s();
    const char *told = NULL; /* the holder's state when the user was told */
    for (;;) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            oc_set_error(OC_EIO, "opcore build: library '%s': cannot open the build lock %s: %s", name, path,
                         strerror(errno));
            return -1;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            if (!same_file(fd, path)) { /* taken over meanwhile: lock the new file */
                close(fd);
                continue;
            }
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
                /* the lock holds anyway; waiters just cannot name us */
            }
            return fd;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) {
            oc_set_error(OC_EIO, "opcore build: library '%s': cannot lock %s: %s", name, path, strerror(errno));
            close(fd);
            return -1;
        }
        long pid = holder_pid(fd);
        const char *state = pid ? holder_state(pid) : "running";
        if (!state) {
            if (same_file(fd, path)) {
                fprintf(stderr, "opcore build: library '%s': the build lock %s names process %ld, which is "
                        "dead: taking it over\n", name, path, pid);
                unlink(path);
            }
            close(fd);
            continue;
        }
        close(fd);
        double waited = now_s() - start;
        char who[64] = "an unknown process";
        if (pid) snprintf(who, sizeof who, "process %ld (%s)", pid, state);
        if (waited >= limit) {
            oc_set_error(OC_EBUILD,
                         "opcore build: library '%s': gave up after %.0f s waiting for the build lock %s, "
                         "held by %s%s; set OPCORE_BUILD_LOCK_TIMEOUT (seconds) to wait longer",
                         name, waited, path, who, strcmp(state, "stopped") == 0 ? pid_hint(pid) : "");
            return -1;
        }
        bool stopped = strcmp(state, "stopped") == 0;
        if ((!told && (waited >= 1.0 || stopped)) || (told && stopped && told != state)) {
            fprintf(stderr, "opcore build: library '%s': waiting for %s, which holds the build lock %s "
                    "(giving up after %.0f s; OPCORE_BUILD_LOCK_TIMEOUT sets it)%s\n", name, who, path, limit,
                    stopped ? pid_hint(pid) : "");
            told = state;
        }
        nanosleep(&(struct timespec){0, POLL_NS}, NULL);
    }
}
