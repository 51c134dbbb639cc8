/*
 * twoproc.h: the little a two-process test or benchmark needs from a launcher: ranks, an
 * allgather for gdte_comm_create, barrier, broadcast, sum. Under mpirun (and built with MPI) it
 * is MPI; otherwise, or with --fork, the program forks itself into two processes joined by a
 * socketpair, which runs where there is no MPI development setup (the GPU machine) and lets a
 * process die without a launcher killing its peer.
 *
 * Header-only, for tests/protocols and bench/pingpong. Call tp_init first thing in main, before
 * anything touches a GPU (a CUDA context does not survive fork).
 */
#ifndef GDTE_TWOPROC_H
#define GDTE_TWOPROC_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef TP_HAVE_MPI
#include <mpi.h>
#endif

typedef struct {
    int rank, size;
    int mpi;     /* launched by mpirun */
    int fd;      /* fork mode: the socket to the other process */
    pid_t child; /* fork mode, rank 0: the other process */
    int left;    /* MPI finalized early (tp_leave) */
} tp_t;

static tp_t tp;

static inline double tp_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void tp_abort(int code)
{
#ifdef TP_HAVE_MPI
    if (tp.mpi && !tp.left) MPI_Abort(MPI_COMM_WORLD, code);
#endif
    if (tp.child > 0) kill(tp.child, SIGKILL);
    _exit(code);
}

/* One direction only (a broadcast from rank 0). */
static inline void tp_xfer_dir(const void *buf, size_t len, int sending)
{
    size_t done = 0;
    while (done < len) {
        struct pollfd pf = {.fd = tp.fd, .events = (short)(sending ? POLLOUT : POLLIN)};
        if (poll(&pf, 1, -1) < 0) {
            if (errno == EINTR) continue;
            tp_abort(3);
        }
        ssize_t k = sending ? write(tp.fd, (const char *)buf + done, len - done)
                            : read(tp.fd, (char *)buf + done, len - done);
        if (k == 0 && !sending) tp_abort(3);
        if (k < 0 && errno != EINTR && errno != EAGAIN) tp_abort(3);
        if (k > 0) done += (size_t)k;
    }
}

/* Send `len` bytes and receive `len` bytes at once; non-blocking, so two large exchanges in
 * opposite directions cannot block each other on full socket buffers. */
static inline void tp_xfer(const void *out, void *in, size_t len)
{
    const char *o = out;
    char *i = in;
    size_t w = 0, r = 0;
    while (w < len || r < len) {
        struct pollfd pf = {.fd = tp.fd, .events = (short)((w < len ? POLLOUT : 0) | (r < len ? POLLIN : 0))};
        if (poll(&pf, 1, -1) < 0) {
            if (errno == EINTR) continue;
            tp_abort(3);
        }
        if (w < len && (pf.revents & POLLOUT)) {
            ssize_t k = write(tp.fd, o + w, len - w);
            if (k < 0 && errno != EINTR && errno != EAGAIN) tp_abort(3);
            if (k > 0) w += (size_t)k;
        }
        if (r < len && (pf.revents & (POLLIN | POLLHUP))) {
            ssize_t k = read(tp.fd, i + r, len - r);
            if (k == 0) tp_abort(3); /* the other process is gone */
            if (k < 0 && errno != EINTR && errno != EAGAIN) tp_abort(3);
            if (k > 0) r += (size_t)k;
        }
    }
}

static inline void tp_send_only(const void *p, size_t len) { tp_xfer_dir(p, len, 1); }
static inline void tp_recv_only(void *p, size_t len) { tp_xfer_dir(p, len, 0); }

/* Fork mode is chosen by --fork anywhere in argv (removed from it), or by the absence of an
 * MPI launcher. */
static inline void tp_init(int *argc, char ***argv)
{
    int fork_mode = getenv("OMPI_COMM_WORLD_SIZE") == NULL && getenv("PMI_SIZE") == NULL;
    for (int i = 1; i < *argc; i++)
        if (!strcmp((*argv)[i], "--fork")) {
            fork_mode = 1;
            memmove(&(*argv)[i], &(*argv)[i + 1], (size_t)(*argc - i) * sizeof(char *));
            (*argc)--;
            break;
        }
#ifndef TP_HAVE_MPI
    fork_mode = 1;
#endif
    if (!fork_mode) {
#ifdef TP_HAVE_MPI
        MPI_Init(argc, argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &tp.rank);
        MPI_Comm_size(MPI_COMM_WORLD, &tp.size);
        tp.mpi = 1;
        tp.fd = -1;
        return;
#endif
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
        perror("socketpair");
        exit(2);
    }
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p < 0) {
        perror("fork");
        exit(2);
    }
    tp.size = 2;
    tp.rank = p == 0 ? 1 : 0;
    tp.child = p;
    tp.fd = sv[p == 0 ? 1 : 0];
    close(sv[p == 0 ? 0 : 1]);
    fcntl(tp.fd, F_SETFL, fcntl(tp.fd, F_GETFL) | O_NONBLOCK);
}

static inline int tp_allgather(const void *mine, size_t len, void *all, void *arg)
{
    (void)arg;
#ifdef TP_HAVE_MPI
    if (tp.mpi) return MPI_Allgather(mine, (int)len, MPI_BYTE, all, (int)len, MPI_BYTE, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
#endif
    memcpy((char *)all + (size_t)tp.rank * len, mine, len);
    tp_xfer(mine, (char *)all + (size_t)(1 - tp.rank) * len, len);
    return 0;
}

static inline void tp_barrier(void)
{
#ifdef TP_HAVE_MPI
    if (tp.mpi) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
#endif
    char a = 1, b;
    tp_xfer(&a, &b, 1);
}

static inline void tp_bcast(void *p, size_t len)
{
#ifdef TP_HAVE_MPI
    if (tp.mpi) {
        MPI_Bcast(p, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD);
        return;
    }
#endif
    if (tp.rank == 0) tp_send_only(p, len);
    else tp_recv_only(p, len);
}

static inline int tp_sum(int v)
{
#ifdef TP_HAVE_MPI
    if (tp.mpi) {
        int s;
        MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        return s;
    }
#endif
    int o;
    tp_xfer(&v, &o, sizeof v);
    return v + o;
}

/* Leave the launcher early (MPI_Finalize) so that one process may die without mpirun
 * killing the other; only gdte talks afterwards. */
static inline void tp_leave(void)
{
#ifdef TP_HAVE_MPI
    if (tp.mpi && !tp.left) {
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
        tp.left = 1;
    }
#endif
}

/* Returns the exit code for main: in fork mode rank 0 also collects rank 1's. */
static inline int tp_finalize(int code)
{
#ifdef TP_HAVE_MPI
    if (tp.mpi) {
        if (!tp.left) MPI_Finalize();
        return code;
    }
#endif
    if (tp.rank == 0 && tp.child > 0) {
        int status = 0;
        if (waitpid(tp.child, &status, 0) == tp.child) {
            if (WIFSIGNALED(status)) {
                fprintf(stderr, "rank 1 died of signal %d\n", WTERMSIG(status));
                if (!code) code = 1;
            } else if (WIFEXITED(status) && WEXITSTATUS(status) && !code) {
                code = WEXITSTATUS(status);
            }
        }
    }
    close(tp.fd);
    return code;
}

#endif
