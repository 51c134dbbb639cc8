/* Library lifetime and version. */
#include <pthread.h>
#include <stdio.h>
#include "gdte.h"
#include "gpu/gpu.h"
#include "kernels/devplan.h"
#include "util/util.h"

#ifndef GDTE_GPU_BACKEND_NAME
#define GDTE_GPU_BACKEND_NAME "NONE"
#endif

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;

GDTE_API unsigned gdte_version(void)
{
    return GDTE_VERSION_MAJOR * 10000u + GDTE_VERSION_MINOR * 100u + GDTE_VERSION_PATCH;
}

GDTE_API const char *gdte_version_string(void)
{
    static char buf[96];
    snprintf(buf, sizeof buf, "%d.%d.%d (gpu=%s)", GDTE_VERSION_MAJOR, GDTE_VERSION_MINOR, GDTE_VERSION_PATCH,
             GDTE_GPU_BACKEND_NAME);
    return buf;
}

GDTE_API gdte_status_t gdte_init(const gdte_init_params_t *params)
{
    gdte_status_t st = GDTE_OK;
    pthread_mutex_lock(&init_lock);
    if (init_count++ > 0) goto out;
    gdte_knobs_reset();
    if ((st = gdte_knobs_load()) != GDTE_OK) goto fail;
    gdte_env_warn_unknown();
    int device = -1;
    uint64_t flags = 0;
    if (params && (params->field_mask & GDTE_INIT_FIELD_DEVICE)) device = params->device;
    if (params && (params->field_mask & GDTE_INIT_FIELD_FLAGS)) flags = params->flags;
    if (!(flags & GDTE_INIT_FLAG_HOST_ONLY) && (st = gdte_gpu_init(device)) != GDTE_OK) goto fail;
    gdte_info("gdte %s initialised; GPU %s", gdte_version_string(), gdte_gpu_available() ? "available" : "not available");
    goto out;
fail:
    init_count--;
out:
    pthread_mutex_unlock(&init_lock);
    return st;
}

GDTE_API gdte_status_t gdte_finalize(void)
{
    pthread_mutex_lock(&init_lock);
    if (init_count == 0) {
        pthread_mutex_unlock(&init_lock);
        return GDTE_ERR_NOT_INITIALIZED;
    }
    if (--init_count == 0) {
        gdte_devplan_finalize();
        gdte_gpu_finalize();
    }
    pthread_mutex_unlock(&init_lock);
    return GDTE_OK;
}
