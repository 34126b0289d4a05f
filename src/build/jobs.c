/* Running compiler commands in parallel.
 *
 * Each job is started with posix_spawnp, its stdout and stderr joined into
 * one close-on-exec pipe; poll() reads every running job's pipe, so a job is
 * done when its pipe reaches EOF and we then reap exactly that pid (never
 * waitpid(-1): the host process may have children of its own). Each job
 * runs in its own session; one that waits to open a FIFO is ended. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/alloc.h"
#include "build/build_internal.h"

extern char **environ;

int oc__num_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void oc__job_free(oc__job *job)
{
    oc__argv_free(&job->argv);
    oc__free(job->output);
    job->output = NULL;
    job->output_len = 0;
}

typedef struct running {
    int job;
    pid_t pid;
    int fd;
    oc__sb out;
} running;

static bool start(oc__job *job, running *r, bool verbose)
{
    int fds[2];
    if (verbose) {
        oc__sb cmd = {0};
        oc__argv_format(&job->argv, &cmd);
        fprintf(stderr, "%s\n", oc__sb_str(&cmd));
        fflush(stderr);
        oc__sb_free(&cmd);
    }
    if (pipe2(fds, O_CLOEXEC) != 0) goto fail;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    /* The child starts with default signal dispositions and no blocked
     * signals, whatever the host process (Python, a test harness) set. */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    /* Its own session: no controlling terminal, so a source that includes
     * /dev/tty fails at once instead of waiting for the terminal (stdin is
     * /dev/null above for the same reason: /dev/stdin reads nothing). */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
    pid_t pid;
    int rc = posix_spawnp(&pid, job->argv.v[0], &fa, &attr, job->argv.v, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        errno = rc;
        goto fail;
    }
    memset(&r->out, 0, sizeof r->out);
    r->pid = pid;
    r->fd = fds[0];
    return true;
fail:;
    char msg[512];
    snprintf(msg, sizeof msg, "cannot run %s: %s\n", job->argv.v[0], strerror(errno));
    job->output = oc__strdup(msg);
    job->output_len = job->output ? strlen(msg) : 0;
    job->exit_code = -1;
    return false;
}

static void finish(oc__job *job, running *r)
{
    int status = 0;
    close(r->fd);
    while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) job->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) {
        job->exit_code = 128 + WTERMSIG(status);
        oc__sb_printf(&r->out, "%s: killed by signal %d (%s)\n", job->argv.v[0], WTERMSIG(status),
                      strsignal(WTERMSIG(status)));
    } else job->exit_code = 1;
    if (r->out.oom) {
        job->oom = true;
        job->exit_code = job->exit_code ? job->exit_code : 1;
    }
    job->output = r->out.s ? r->out.s : oc__strdup("");
    if (!job->output) {
        job->oom = true;
        job->exit_code = job->exit_code ? job->exit_code : 1;
    }
    job->output_len = job->output ? r->out.len : 0;
    r->out.s = NULL;
}

/* True if `pid` or a process it started waits to open a FIFO that has no
 * writer (the kernel's wait channel "wait_for_partner"): an #include of a
 * pipe, spelled through a macro so that sources.c could not see it. That
 * wait never ends by itself. */
static bool opens_a_fifo(pid_t pid, int depth)
{
    char path[96], buf[4096];
    snprintf(path, sizeof path, "/proc/%ld/wchan", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (strcmp(buf, "wait_for_partner") == 0) return true;
    if (depth >= 8) return false;
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    f = fopen(path, "r");
    if (!f) return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (char *p = buf, *end; *p; p = end) {
        long child = strtol(p, &end, 10);
        if (end == p) break;
        if (child > 0 && opens_a_fifo((pid_t)child, depth + 1)) return true;
    }
    return false;
}

/* A job blocked for good is ended (it runs in its own session: its process
 * group is the compiler and everything it started), with a message. */
static void end_if_stuck(running *r)
{
    if (!opens_a_fifo(r->pid, 0)) return;
    oc__sb_put(&r->out, "error: the compiler is waiting to open a FIFO (a named pipe): an #include of a "
                        "pipe or device? A build reads only regular files\n");
    kill(-r->pid, SIGKILL);
}

int oc__jobs_run(oc__job *jobs, int njobs, int parallel, bool verbose)
{
    if (parallel < 1) parallel = 1;
    if (parallel > 64) parallel = 64;
    running run[64];
    struct pollfd pfd[64];
    int nrun = 0, next = 0, failed = 0;
    while (next < njobs || nrun > 0) {
        while (nrun < parallel && next < njobs) {
            oc__job *job = &jobs[next];
            running *r = &run[nrun];
            r->job = next++;
            if (job->argv.oom) { /* an incomplete command must not run */
                job->oom = true;
                job->exit_code = -1;
                failed++;
            } else if (start(job, r, verbose)) {
                nrun++;
            } else {
                failed++;
            }
        }
        if (nrun <= 0) continue;
        for (int i = 0; i < nrun; i++) {
            pfd[i].fd = run[i].fd;
            pfd[i].events = POLLIN;
            pfd[i].revents = 0;
        }
        int ready = poll(pfd, (nfds_t)nrun, 1000);
        if (ready == 0) { /* a quiet second: is a job stuck on a FIFO? */
            for (int i = 0; i < nrun; i++) end_if_stuck(&run[i]);
            continue;
        }
        if (ready < 0) {
            if (errno == EINTR) continue;
            /* Should not happen; fall back to blocking reads below. */
            for (int i = 0; i < nrun; i++) pfd[i].revents = POLLIN;
        }
        for (int i = nrun - 1; i >= 0; i--) {
            if (!pfd[i].revents) continue;
            char buf[8192];
            ssize_t n = read(run[i].fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n > 0) {
                oc__sb_putn(&run[i].out, buf, (size_t)n);
                continue;
            }
            oc__job *job = &jobs[run[i].job];
            finish(job, &run[i]);
            if (job->exit_code != 0) failed++;
            run[i] = run[--nrun];
        }
    }
    return failed;
}

oc_status oc__jobs_oom(const oc__job *jobs, int njobs, const char *name)
{
    for (int i = 0; i < njobs; i++)
        if (jobs[i].oom || jobs[i].argv.oom)
            return oc_set_error(OC_ENOMEM, "opcore build: library '%s': out of memory running %s", name,
                                jobs[i].what ? jobs[i].what : "the compiler");
    return OC_OK;
}
