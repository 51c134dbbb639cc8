/*
 * C helpers of the Fortran tests (fortran_halo_test.F90, fortran_calls_test.F90; their interface
 * blocks are fortran_helper.inc), called through bind(C): "device"
 * memory for it (host memory registered with libgdte_mpi.so's fake-device hook, reached through
 * a weak reference as the C tests do in mpitest.h) and gdte's counters.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int gdte_fake_device_unregister(void *ptr) __attribute__((weak));
extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));
extern int64_t gdte_mpi_reduce_counter(const char *name) __attribute__((weak));

/* Zeroed memory of `bytes`, registered as fake device memory when the interposer is loaded. */
void *ft_dev_alloc(int64_t bytes)
{
    void *p = calloc(1, bytes > 0 ? (size_t)bytes : 1);
    if (p && gdte_fake_device_register && gdte_fake_device_register(p, bytes > 0 ? (size_t)bytes : 1) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void ft_dev_free(void *p)
{
    if (!p) return;
    if (gdte_fake_device_unregister) gdte_fake_device_unregister(p);
    free(p);
}

/* Device messages, reductions and collectives gdte has carried so far. */
int64_t ft_gdte_traffic(void)
{
    if (!gdte_mpi_counter) return 0;
    int64_t n = gdte_mpi_counter("sends") + gdte_mpi_counter("recvs") + gdte_mpi_counter("packs") +
                gdte_mpi_counter("unpacks") + gdte_mpi_counter("coll_calls");
    if (gdte_mpi_reduce_counter) n += gdte_mpi_reduce_counter("reduce_staged");
    return n;
}

/* Collective calls gdte has carried (one per call, one per start of a persistent one). */
int64_t ft_coll_calls(void) { return gdte_mpi_counter ? gdte_mpi_counter("coll_calls") : 0; }

/* Reductions gdte staged through host mirrors (one per call, one per start of a persistent one). */
int64_t ft_reduce_staged(void) { return gdte_mpi_reduce_counter ? gdte_mpi_reduce_counter("reduce_staged") : 0; }

/* 1 when this run must go through gdte (GDTETEST_MODE=fake, as the C tests), else 0. */
int ft_expect_gdte(void)
{
    const char *m = getenv("GDTETEST_MODE");
    return m && !strcmp(m, "fake");
}

/* 1 when a device buffer of a call gdte does not carry must be refused (MPI_ERR_BUFFER): fake
 * mode under an MPI that cannot read device memory (GDTE_MPI_GPU_AWARE not 1). */
int ft_expect_refuse(void)
{
    const char *ga = getenv("GDTE_MPI_GPU_AWARE");
    return ft_expect_gdte() && !(ga && !strcmp(ga, "1"));
}
