/* Running compiler commands in parallel.
 *
 * Each job is started with posix_spawnp, its stdout and stderr joined into
 * one close-on-exec pipe; poll() reads every running job's pipe, so a job is
 * done when its pipe reaches EOF and we then reap exactly that pid (never
 * waitpid(-1): the host process may have children of its own). */
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
    free(job->output);
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
    job->output = strdup(msg);
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
    if (r->out.oom) job->exit_code = job->exit_code ? job->exit_code : 1;
    job->output = r->out.s ? r->out.s : strdup("");
    job->output_len = r->out.len;
    r->out.s = NULL;
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
            if (start(job, r, verbose)) nrun++;
            else failed++;
        }
        if (nrun <= 0) continue;
        for (int i = 0; i < nrun; i++) {
            pfd[i].fd = run[i].fd;
            pfd[i].events = POLLIN;
            pfd[i].revents = 0;
        }
        if (poll(pfd, (nfds_t)nrun, -1) < 0) {
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
