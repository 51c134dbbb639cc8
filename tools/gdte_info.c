/* gdte_info: what this gdte build is and what it sees on this machine: version and build
 * options, GPU backends and devices (with links between GPUs), UCX version, transports and
 * memory kinds, protocols, and every GDTE_* knob with its value and where it came from.
 *   gdte_info            the report
 *   gdte_info --knobs-md the knob table in the README's Markdown form (a test compares them) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gdte.h"
#include "gpu/gpu.h"
#include "util/util.h"
#ifdef GDTE_HAVE_UCX
#include <ucp/api/ucp.h>
#endif

static void knobs_markdown(void)
{
    printf("| variable | default | accepted | meaning |\n| --- | --- | --- | --- |\n");
    for (int i = 0; i < GDTE_KNOB_COUNT_; i++) {
        const gdte_knob_desc_t *d = gdte_knob_desc((gdte_knob_id_t)i);
        printf("| `%s` | `%s` | %s | %s |\n", d->name, d->def, d->accepted, d->doc);
    }
}

static void ucx_report(void)
{
#ifdef GDTE_HAVE_UCX
    unsigned maj, min, rel;
    ucp_get_version(&maj, &min, &rel);
    printf("UCX:\n  library        %u.%u.%u (built against %d.%d)\n", maj, min, rel, UCP_API_MAJOR, UCP_API_MINOR);
    ucp_config_t *cfg;
    ucp_context_h ctx;
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_TAG};
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK) {
        printf("  (could not read UCX configuration)\n");
        return;
    }
    ucs_status_t s = ucp_init(&p, cfg, &ctx);
    ucp_config_release(cfg);
    if (s != UCS_OK) {
        printf("  ucp_init failed: %s\n", ucs_status_string(s));
        return;
    }
    ucp_context_attr_t a = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(ctx, &a) == UCS_OK) {
        printf("  memory types  ");
        static const char *names[] = {"host", "cuda", "cuda-managed", "rocm", "rocm-managed"};
        for (int m = 0; m < 5; m++)
            if (a.memory_types & (1ull << m)) printf(" %s", names[m]);
        printf("\n  device memory  %s\n", (a.memory_types & ~1ull) ? "reachable by UCX" : "not reachable by UCX (gdte stages it)");
    }
    const char *tls = getenv("UCX_TLS");
    printf("  UCX_TLS        %s\n", tls ? tls : "(UCX default: all available)");
    ucp_cleanup(ctx);
#else
    printf("UCX:\n  not built (GDTE_WITH_UCX=OFF)\n");
#endif
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--knobs-md")) {
        knobs_markdown();
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "usage: %s [--knobs-md]\n", argv[0]);
        return 2;
    }
    gdte_status_t st = gdte_init(NULL);
    printf("gdte %s\n", gdte_version_string());
    if (st != GDTE_OK) {
        printf("gdte_init failed: %s\n", gdte_status_string(st));
        return 1;
    }
    printf("build:\n  GPU backend    %s\n", gdte_gpu_backend_name());
#ifdef GDTE_HAVE_UCX
    printf("  UCX            yes\n");
#else
    printf("  UCX            no\n");
#endif
#ifdef GDTE_HAVE_MPI
    printf("  MPI            yes\n");
#else
    printf("  MPI            no\n");
#endif
    printf("backends:\n  host           yes (always)\n");
    int n = gdte_gpu_available() ? gdte_gpu_device_count() : 0;
    if (gdte_gpu_backend() == GDTE_GPU_BACKEND_NONE)
        printf("  gpu            none built (GDTE_GPU=NONE)\n");
    else
        printf("  %-14s %s\n", gdte_gpu_backend_name(), n > 0 ? "available" : "built, but no usable device here");
    for (int d = 0; d < n; d++) {
        gdte_gpu_props_t pr;
        if (gdte_gpu_get_props(d, &pr) != GDTE_OK) continue;
        printf("  device %d       %s, %d SMs, %.1f GiB, L2 %d KiB, PCI %04x:%02x:%02x\n", d, pr.name, pr.sm_count,
               (double)pr.total_mem / (1 << 30), pr.l2_bytes >> 10, pr.pci_domain, pr.pci_bus, pr.pci_device);
        for (int e = 0; e < n; e++) {
            int can = 0;
            if (e != d && gdte_gpu_can_access_peer(d, e, &can) == GDTE_OK)
                printf("    peer %d -> %d  %s\n", d, e, can ? "direct access" : "no direct access");
        }
    }
    ucx_report();
#ifdef GDTE_HAVE_UCX
    printf("protocols (UCX):\n  copyinout      yes (pinned host staging%s)\n", n > 0 ? ", GPU pack" : ", host pack");
    printf("  rdma           %s\n", n > 0 ? "yes (GPU IPC within a node)" : "no (needs a GPU)");
#else
    printf("protocols (UCX):\n  none           built without UCX\n");
#endif
    printf("knobs:\n");
    for (int i = 0; i < GDTE_KNOB_COUNT_; i++) {
        const gdte_knob_desc_t *d = gdte_knob_desc((gdte_knob_id_t)i);
        printf("  %-22s %-12s (%s)\n", d->name, gdte_knob_text((gdte_knob_id_t)i), gdte_knob_source((gdte_knob_id_t)i));
    }
    gdte_finalize();
    return 0;
}
