/* gdte_info: what this gdte build is and what it sees on this machine: version and build
 * (compiler, build type, revision, GPU architectures, the MPI and UCX it was built against),
 * GPU devices and the links between them, UCX's transports and devices, protocols, every
 * GDTE_* knob with its value and where it came from, and GDTE_* variables that name no knob.
 * Options: see usage() and docs/gdte_info.1. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gdte.h"
#include "gdte_build_revision.h" /* GDTE_BUILD_REVISION, written at each build */
#include "gpu/gpu.h"
#include "util/util.h"
#ifdef GDTE_HAVE_UCX
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>
#endif
#ifdef GDTE_HAVE_MPI
#include <mpi.h> /* for its version macros only: gdte_info does not link MPI */
#include "mpi/refuse.h" /* the table of calls the interposer refuses on device memory */
#endif

#ifndef GDTE_BUILD_COMPILER
#define GDTE_BUILD_COMPILER "unknown"
#endif
#ifndef GDTE_BUILD_TYPE
#define GDTE_BUILD_TYPE "unknown"
#endif
#ifndef GDTE_BUILD_GPU_ARCHS
#define GDTE_BUILD_GPU_ARCHS "none"
#endif
#ifndef GDTE_BUILD_UCX_VERSION
#define GDTE_BUILD_UCX_VERSION "unknown"
#endif

static int parsable;
static const char *section;

/* One fact. Parsable: "section:key:value" (key may itself hold colons, as ompi_info's do).
 * Report: a heading per section, then "  key            value". */
static void fact(const char *sec, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fact(const char *sec, const char *key, const char *fmt, ...)
{
    char val[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    if (parsable) {
        printf("%s:%s:%s\n", sec, key, val);
        return;
    }
    if (!section || strcmp(section, sec)) printf("%s:\n", sec);
    section = sec;
    printf("  %-22s %s\n", key, val);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "Usage: %s [OPTION]...\n"
            "Show how this gdte was built and what it finds on this machine: GPUs, UCX transports and\n"
            "devices, protocols, and every GDTE_* variable with its value and origin.\n"
            "\n"
            "  -p, --parsable   one fact per line as section:key:value (like ompi_info --parsable)\n"
            "      --knobs-md   the table of GDTE_* variables in the README's Markdown form\n"
            "  -V, --version    print the version and exit\n"
            "  -h, --help       print this help and exit\n"
            "\n"
            "GDTE_* variables that name no knob are reported (and warned about by gdte_init).\n"
            "See gdte_info(1).\n",
            prog);
}

static void knobs_markdown(void)
{
    printf("| variable | default | accepted | meaning |\n| --- | --- | --- | --- |\n");
    for (int i = 0; i < GDTE_KNOB_COUNT_; i++) {
        const gdte_knob_desc_t *d = gdte_knob_desc((gdte_knob_id_t)i);
        printf("| `%s` | `%s` | %s%s | %s |\n", d->name, d->def, d->accepted,
               d->kind == GDTE_KNOB_SIZE ? "; bytes, or with a k, m or g suffix" : "", d->doc);
    }
}

static void build_facts(void)
{
    fact("build", "version", "%d.%d.%d", GDTE_VERSION_MAJOR, GDTE_VERSION_MINOR, GDTE_VERSION_PATCH);
    fact("build", "revision", "%s", GDTE_BUILD_REVISION);
    fact("build", "compiler", "%s", GDTE_BUILD_COMPILER);
    fact("build", "build_type", "%s", GDTE_BUILD_TYPE);
    fact("build", "gpu_backend", "%s", gdte_gpu_backend_name());
    fact("build", "gpu_archs", "%s", GDTE_BUILD_GPU_ARCHS);
#ifdef GDTE_HAVE_MPI
#if defined(OMPI_MAJOR_VERSION)
    fact("build", "mpi", "Open MPI %d.%d.%d (MPI %d.%d)", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION,
         MPI_VERSION, MPI_SUBVERSION);
#elif defined(MPICH_VERSION)
    fact("build", "mpi", "MPICH %s (MPI %d.%d)", MPICH_VERSION, MPI_VERSION, MPI_SUBVERSION);
#else
    fact("build", "mpi", "MPI %d.%d", MPI_VERSION, MPI_SUBVERSION);
#endif
#else
    fact("build", "mpi", "no (GDTE_WITH_MPI=OFF)");
#endif
#ifdef GDTE_HAVE_UCX
    fact("build", "ucx", "%s (UCP API %d.%d)", GDTE_BUILD_UCX_VERSION, UCP_API_MAJOR, UCP_API_MINOR);
#else
    fact("build", "ucx", "no (GDTE_WITH_UCX=OFF)");
#endif
}

static void gpu_facts(void)
{
    int n = gdte_gpu_available() ? gdte_gpu_device_count() : 0;
    fact("backends", "host", "yes (always)");
    if (gdte_gpu_backend() == GDTE_GPU_BACKEND_NONE)
        fact("backends", "gpu", "none built (GDTE_GPU=NONE)");
    else
        fact("backends", "gpu", "%s, %s", gdte_gpu_backend_name(), n > 0 ? "available" : "built, but no usable device here");
    fact("backends", "gpu_devices", "%d", n);
    for (int d = 0; d < n; d++) {
        gdte_gpu_props_t pr;
        if (gdte_gpu_get_props(d, &pr) != GDTE_OK) continue;
        char key[64];
        snprintf(key, sizeof key, "device:%d", d);
        fact("backends", key, "%s, %d SMs, %.1f GiB, L2 %d KiB, PCI %04x:%02x:%02x", pr.name, pr.sm_count,
             (double)pr.total_mem / (1 << 30), pr.l2_bytes >> 10, pr.pci_domain, pr.pci_bus, pr.pci_device);
        for (int e = 0; e < n; e++) {
            int can = 0;
            if (e == d || gdte_gpu_can_access_peer(d, e, &can) != GDTE_OK) continue;
            snprintf(key, sizeof key, "peer:%d:%d", d, e);
            fact("backends", key, "%s", can ? "direct access" : "no direct access");
        }
    }
}

#ifdef GDTE_HAVE_UCX
static const char *uct_device_type(uct_device_type_t t)
{
    switch (t) {
    case UCT_DEVICE_TYPE_NET: return "network";
    case UCT_DEVICE_TYPE_SHM: return "intra-node";
    case UCT_DEVICE_TYPE_ACC: return "accelerator";
    case UCT_DEVICE_TYPE_SELF: return "loopback";
    default: return "other";
    }
}

/* Transports and devices per memory domain, as `ucx_info -d` walks them: components, their
 * memory domains, each domain's transport resources. */
static void ucx_transports(void)
{
    uct_component_h *comps;
    unsigned ncomps, listed = 0;
    if (uct_query_components(&comps, &ncomps) != UCS_OK) {
        fact("ucx", "transports", "(could not query UCX components)");
        return;
    }
    for (unsigned c = 0; c < ncomps; c++) {
        uct_component_attr_t ca = {.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT};
        if (uct_component_query(comps[c], &ca) != UCS_OK || ca.md_resource_count == 0) continue;
        uct_md_resource_desc_t *mds = calloc(ca.md_resource_count, sizeof *mds);
        if (!mds) break;
        ca.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
        ca.md_resources = mds;
        if (uct_component_query(comps[c], &ca) == UCS_OK) {
            for (unsigned m = 0; m < ca.md_resource_count; m++) {
                uct_md_config_t *cfg;
                uct_md_h md;
                if (uct_md_config_read(comps[c], NULL, NULL, &cfg) != UCS_OK) continue;
                ucs_status_t s = uct_md_open(comps[c], mds[m].md_name, cfg, &md);
                uct_config_release(cfg);
                if (s != UCS_OK) continue;
                uct_tl_resource_desc_t *tl;
                unsigned ntl;
                if (uct_md_query_tl_resources(md, &tl, &ntl) == UCS_OK) {
                    for (unsigned t = 0; t < ntl; t++) {
                        char key[160];
                        snprintf(key, sizeof key, "transport:%s:%s", tl[t].tl_name, tl[t].dev_name);
                        fact("ucx", key, "%s (memory domain %s)", uct_device_type(tl[t].dev_type), mds[m].md_name);
                        listed++;
                    }
                    uct_release_tl_resource_list(tl);
                }
                uct_md_close(md);
            }
        }
        free(mds);
    }
    uct_release_component_list(comps);
    if (!listed) fact("ucx", "transports", "none found");
}
#endif

static void ucx_facts(int ngpu)
{
#ifdef GDTE_HAVE_UCX
    unsigned maj, min, rel;
    ucp_get_version(&maj, &min, &rel);
    fact("ucx", "library", "%u.%u.%u (built against %s)", maj, min, rel, GDTE_BUILD_UCX_VERSION);
    const char *tls = getenv("UCX_TLS");
    fact("ucx", "UCX_TLS", "%s", tls ? tls : "(UCX default: all available)");
    ucp_config_t *cfg;
    ucp_context_h ctx;
    ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_TAG};
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK) {
        fact("ucx", "context", "could not read the UCX configuration");
    } else {
        ucs_status_t s = ucp_init(&p, cfg, &ctx);
        ucp_config_release(cfg);
        if (s != UCS_OK) {
            fact("ucx", "context", "ucp_init failed: %s", ucs_status_string(s));
        } else {
            ucp_context_attr_t a = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
            if (ucp_context_query(ctx, &a) == UCS_OK) {
                static const char *names[] = {"host", "cuda", "cuda-managed", "rocm", "rocm-managed"};
                char buf[128] = "";
                for (int m = 0; m < 5; m++)
                    if (a.memory_types & (1ull << m)) {
                        if (*buf) strcat(buf, ",");
                        strcat(buf, names[m]);
                    }
                fact("ucx", "memory_types", "%s", buf);
                fact("ucx", "device_memory", "%s",
                     (a.memory_types & ~1ull) ? "reachable by UCX" : "not reachable by UCX (gdte stages it)");
            }
            ucp_cleanup(ctx);
        }
    }
    ucx_transports();
    fact("protocols", "copyinout", "yes (pinned host staging, %s)", ngpu > 0 ? "GPU pack" : "host pack");
    fact("protocols", "rdma", "%s", ngpu > 0 ? "yes (GPU IPC within a node)" : "no (needs a GPU)");
#else
    (void)ngpu;
    fact("ucx", "library", "not built (GDTE_WITH_UCX=OFF)");
    fact("protocols", "none", "built without UCX");
#endif
}

/* What libgdte_mpi.so does with a device buffer, from the table its shims are generated from
 * (src/mpi/refuse.h): one summary, and in parsable form the calls of each refused family. */
static void mpi_facts(void)
{
#ifdef GDTE_HAVE_MPI
    enum {
#define GDTE_X_FAM_ID(id, key) FAM_##id,
        GDTE_REFUSE_FAMILIES(GDTE_X_FAM_ID)
#undef GDTE_X_FAM_ID
            FAM_COUNT_
    };
    static const char *const fam_key[] = {
#define GDTE_X_FAM_KEY(id, key) key,
        GDTE_REFUSE_FAMILIES(GDTE_X_FAM_KEY)
#undef GDTE_X_FAM_KEY
    };
    static const struct {
        int fam;
        const char *name;
    } calls[] = {
#define GDTE_X_CALL(fam, name, params, args, hk, h, probes) {FAM_##fam, #name},
        GDTE_REFUSE_LIST(GDTE_X_CALL)
#undef GDTE_X_CALL
    };
    const int ncalls = (int)(sizeof calls / sizeof calls[0]);
    char refused[512] = "";
    size_t len = 0;
    for (int f = 0; f < FAM_COUNT_; f++) {
        int n = 0;
        for (int i = 0; i < ncalls; i++) n += calls[i].fam == f;
        len += (size_t)snprintf(refused + len, sizeof refused - len, "%s%s (%d call%s)", f ? ", " : "", fam_key[f], n,
                                n == 1 ? "" : "s");
        if (len >= sizeof refused) break;
    }
    fact("mpi", "coverage",
         "carried: %s; refused on device memory unless the MPI is GPU-aware: %s; other calls go to the MPI untouched",
         GDTE_MPI_CARRIED, refused);
    if (!parsable) return;
    for (int f = 0; f < FAM_COUNT_; f++) {
        char key[64], names[4096] = "";
        size_t at = 0;
        for (int i = 0; i < ncalls && at < sizeof names; i++)
            if (calls[i].fam == f) at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", at ? "," : "", calls[i].name);
        snprintf(key, sizeof key, "refused:%s", fam_key[f]);
        fact("mpi", key, "%s", names);
    }
#else
    fact("mpi", "coverage", "no interposer (GDTE_WITH_MPI=OFF)");
#endif
}

static void knob_facts(void)
{
    for (int i = 0; i < GDTE_KNOB_COUNT_; i++) {
        const gdte_knob_desc_t *d = gdte_knob_desc((gdte_knob_id_t)i);
        const char *v = gdte_knob_text((gdte_knob_id_t)i), *src = gdte_knob_source((gdte_knob_id_t)i);
        if (parsable) {
            char key[96];
            snprintf(key, sizeof key, "%s:value", d->name);
            fact("knob", key, "%s", v);
            snprintf(key, sizeof key, "%s:source", d->name);
            fact("knob", key, "%s", src);
        } else {
            fact("knobs", d->name, "%-12s (%s)", v, src);
        }
    }
}

static void unknown_var(const char *name, const char *closest, void *arg)
{
    (void)arg;
    if (parsable)
        fact("env", "unknown", "%s", name);
    else if (closest)
        fact("environment", name, "set, but no such variable (did you mean %s?)", closest);
    else
        fact("environment", name, "set, but no such variable");
}

int main(int argc, char **argv)
{
    enum { OPT_KNOBS_MD = 256 };
    static const struct option opts[] = {
        {"parsable", no_argument, NULL, 'p'},   {"knobs-md", no_argument, NULL, OPT_KNOBS_MD},
        {"version", no_argument, NULL, 'V'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int c;
    while ((c = getopt_long(argc, argv, "pVh", opts, NULL)) != -1) {
        switch (c) {
        case 'p': parsable = 1; break;
        case OPT_KNOBS_MD: knobs_markdown(); return 0;
        case 'V':
            printf("gdte_info (gdte) %d.%d.%d\nrevision %s, GPU backend %s\n", GDTE_VERSION_MAJOR, GDTE_VERSION_MINOR,
                   GDTE_VERSION_PATCH, GDTE_BUILD_REVISION, gdte_gpu_backend_name());
            return 0;
        case 'h': usage(stdout, prog); return 0;
        default: usage(stderr, prog); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
        usage(stderr, prog);
        return 2;
    }
    gdte_status_t st = gdte_init(NULL);
    if (!parsable) printf("gdte %s\n", gdte_version_string());
    build_facts();
    if (st != GDTE_OK) {
        fact("status", "init", "gdte_init failed: %s", gdte_status_string(st));
        return 1;
    }
    gpu_facts();
    ucx_facts(gdte_gpu_available() ? gdte_gpu_device_count() : 0);
    mpi_facts();
    knob_facts();
    if (gdte_env_unknown(unknown_var, NULL) == 0 && !parsable) fact("environment", "GDTE_*", "every one is a known knob");
    gdte_finalize();
    return 0;
}
