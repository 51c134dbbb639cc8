/*
 * libgdte_heapdev.so: every heap block an MPI program allocates becomes fake device memory.
 *
 * For running MPI programs written elsewhere (another MPI's test suite, an application) through
 * the interposer's device paths without a GPU and without changing them: preloaded before
 * libgdte_mpi.so with GDTE_FAKE_DEVICE=1,
 *     mpirun -x LD_PRELOAD=libgdte_heapdev.so:libgdte_mpi.so -x GDTE_FAKE_DEVICE=1 ./prog
 * each block that the program's own code gets from malloc, calloc, realloc, posix_memalign,
 * aligned_alloc, memalign or valloc is registered with gdte_fake_device_register, and unregistered
 * before it is freed. Stack and static buffers stay host memory, so a program that mixes them
 * with heap buffers exercises mixed host/device pairs too.
 *
 * "The program's own code" is decided by the caller's address: the main executable, and any
 * loaded object whose path contains one of the ':'-separated substrings of GDTETEST_HEAPDEV_LIBS
 * (for test suites whose helper library, say libmtest.so, allocates the buffers). Blocks that the
 * MPI library, the interposer, libc or any other object allocate are left alone: the interposer's
 * own staging is never "device" memory by accident.
 *
 * The real allocator is reached through glibc's __libc_* entry points, not dlsym (which may itself
 * allocate while the first allocation is being made). A test tool, not part of gdte's libraries.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

/* Bound when libgdte_mpi.so is preloaded too; without it this library only allocates. */
extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int gdte_fake_device_unregister(void *ptr) __attribute__((weak));

/* Address ranges of the objects whose allocations count as the program's. Objects loaded later
 * (dlopen) are looked up again when a caller falls outside every known object. */
#define MAX_SPANS 1024
typedef struct {
    uintptr_t lo, hi;
    int user;
} span_t;
static span_t spans[MAX_SPANS];
static int nspans;
static pthread_mutex_t span_lock = PTHREAD_MUTEX_INITIALIZER;

static int matches_user_lib(const char *name)
{
    const char *want = getenv("GDTETEST_HEAPDEV_LIBS");
    if (!want || !*want || !name || !*name) return 0;
    const char *p = want;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n > 0) {
            for (const char *s = name; *s; s++)
                if (strncmp(s, p, n) == 0) return 1;
        }
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int add_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    int *index = arg;
    int user = (*index == 0) || matches_user_lib(info->dlpi_name); /* the first object: the program */
    (*index)++;
    for (int i = 0; i < info->dlpi_phnum && nspans < MAX_SPANS; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        int known = 0;
        for (int k = 0; k < nspans; k++) known |= spans[k].lo == lo;
        if (!known) spans[nspans++] = (span_t){lo, lo + ph->p_memsz, user};
    }
    return 0;
}

/* 1 when the code at `ra` belongs to the program. */
static int from_program(const void *ra)
{
    uintptr_t a = (uintptr_t)ra;
    int answer = -1;
    pthread_mutex_lock(&span_lock);
    for (int pass = 0; pass < 2 && answer < 0; pass++) {
        for (int k = 0; k < nspans; k++)
            if (a >= spans[k].lo && a < spans[k].hi) {
                answer = spans[k].user;
                break;
            }
        if (answer < 0 && pass == 0) {
            int index = 0;
            dl_iterate_phdr(add_object, &index);
        }
    }
    pthread_mutex_unlock(&span_lock);
    return answer > 0;
}

/* A thread inside a registration does not register again (the registry's own allocations). */
static __thread int busy __attribute__((tls_model("initial-exec")));

static void *track(void *p, size_t n, const void *ra)
{
    if (p && n > 0 && !busy && gdte_fake_device_register && from_program(ra)) {
        busy = 1;
        (void)gdte_fake_device_register(p, n);
        busy = 0;
    }
    return p;
}

static void untrack(void *p)
{
    if (p && !busy && gdte_fake_device_unregister) {
        busy = 1;
        (void)gdte_fake_device_unregister(p); /* -1 when it was not registered: nothing to do */
        busy = 0;
    }
}

void *malloc(size_t n) { return track(__libc_malloc(n), n, __builtin_return_address(0)); }

void *calloc(size_t m, size_t n)
{
    void *p = __libc_calloc(m, n);
    return p ? track(p, m * n, __builtin_return_address(0)) : NULL;
}

void *realloc(void *old, size_t n)
{
    const void *ra = __builtin_return_address(0);
    if (old) untrack(old);
    void *p = __libc_realloc(old, n);
    if (!p && old && n > 0) { /* failed: the old block is unchanged and stays registered */
        track(old, malloc_usable_size(old), ra);
        return NULL;
    }
    return track(p, n, ra);
}

void free(void *p)
{
    untrack(p);
    __libc_free(p);
}

void *memalign(size_t align, size_t n) { return track(__libc_memalign(align, n), n, __builtin_return_address(0)); }

void *aligned_alloc(size_t align, size_t n)
{
    return track(__libc_memalign(align, n), n, __builtin_return_address(0));
}

void *valloc(size_t n) { return track(__libc_memalign((size_t)sysconf(_SC_PAGESIZE), n), n, __builtin_return_address(0)); }

int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = track(p, n, __builtin_return_address(0));
    return 0;
}
