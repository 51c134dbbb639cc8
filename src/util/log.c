#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "util.h"

int gdte_log_level_g = GDTE_LOG_WARN;
static int log_rank = -1;

void gdte_log_set_rank(int rank) { log_rank = rank; }

void gdte_log_emit(gdte_log_level_t lvl, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"error", "warn", "info", "debug", "trace"};
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    /* One write per line, so lines of concurrent ranks do not interleave mid-line. */
    char out[1280];
    int n;
    if (log_rank >= 0)
        n = snprintf(out, sizeof out, "[gdte %d:%d] %s: %s (%s:%d)\n", log_rank, (int)getpid(),
                     names[lvl], msg, base, line);
    else
        n = snprintf(out, sizeof out, "[gdte -:%d] %s: %s (%s:%d)\n", (int)getpid(), names[lvl], msg,
                     base, line);
    if (n > (int)sizeof out) n = (int)sizeof out;
    ssize_t w = write(STDERR_FILENO, out, (size_t)n);
    (void)w;
}

double gdte_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
