/* All GDTE_* environment variables are parsed and validated here, once, at gdte_init. A bad
 * value is an error naming the knob and what it accepts: never a silent default. */
#include <ctype.h>
#include <stdatomic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

static const gdte_knob_desc_t knob_desc[GDTE_KNOB_COUNT_] = {
#define GDTE_X_KNOB_DESC(id, name, kind, def, acc, doc) {name, GDTE_KNOB_##kind, def, acc, doc},
    GDTE_KNOB_LIST(GDTE_X_KNOB_DESC)
#undef GDTE_X_KNOB_DESC
};

static int64_t knob_value[GDTE_KNOB_COUNT_];
static int knob_from_env[GDTE_KNOB_COUNT_];
static char knob_txt[GDTE_KNOB_COUNT_][64];
static int knobs_loaded;

static int parse_i64(const char *s, int64_t *v, int allow_suffix)
{
    while (isspace((unsigned char)*s)) s++;
    if (!*s) return -1;
    /* Decimal only (strtoll's base 0 would read "065536" as octal 27,486 and take "0x..."):
     * an optional sign, then digits, then for sizes one k/m/g suffix. */
    const char *digits = s + (*s == '+' || *s == '-');
    if (!isdigit((unsigned char)*digits)) return -1;
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s) return -1;
    int64_t mult = 1;
    if (allow_suffix && *end) {
        switch (tolower((unsigned char)*end)) {
        case 'k': mult = 1LL << 10; break;
        case 'm': mult = 1LL << 20; break;
        case 'g': mult = 1LL << 30; break;
        default: return -1;
        }
        end++;
        if (*end == 'b' || *end == 'B') end++;
        if (*end == 'i') return -1; /* "KiB"-style spelled oddly: refuse rather than guess */
    }
    while (isspace((unsigned char)*end)) end++;
    if (*end) return -1;
    if (gdte_mul_ovf(x, mult, v)) return -1;
    return 0;
}

/* Range checks that the accepted-values text states. */
static int knob_in_range(gdte_knob_id_t id, int64_t v)
{
    switch (id) {
    case GDTE_KNOB_DEV_UNIT: return v >= 256 && v <= 65536 && v % 256 == 0;
    case GDTE_KNOB_MAX_BLOCKS: return v >= 0 && v <= 65535;
    case GDTE_KNOB_FRAG_SIZE: return v == 0 || (v >= 4096 && v <= (1LL << 30));
    case GDTE_KNOB_PIPELINE_DEPTH: return v >= 1 && v <= 64;
    case GDTE_KNOB_TIMEOUT: return v >= 1 && v <= 86400;
    case GDTE_KNOB_CACHE_MAX: return v >= 0 && v <= (1LL << 40);
    case GDTE_KNOB_MPI_IPC_MIN: return v >= 0 && v <= (1LL << 40);
    case GDTE_KNOB_STAGING_MAX: return v >= 65536 && v <= (1LL << 40);
    case GDTE_KNOB_FAULT_STAGING_OOM:
    case GDTE_KNOB_FAULT_UCX_ERROR: return v >= 0 && v <= 1000000;
    default: return 1;
    }
}

gdte_status_t gdte_knob_parse(gdte_knob_id_t id, const char *text, int64_t *value_p)
{
    if ((int)id < 0 || id >= GDTE_KNOB_COUNT_ || !text || !value_p) return GDTE_ERR_INVALID_ARG;
    const gdte_knob_desc_t *d = &knob_desc[id];
    int64_t v = 0;
    switch (d->kind) {
    case GDTE_KNOB_SIZE:
    case GDTE_KNOB_INT:
        if (parse_i64(text, &v, d->kind == GDTE_KNOB_SIZE) || !knob_in_range(id, v)) return GDTE_ERR_BAD_KNOB;
        break;
    case GDTE_KNOB_BOOL:
        if (!strcmp(text, "1") || !strcasecmp(text, "yes") || !strcasecmp(text, "on") || !strcasecmp(text, "true")) v = 1;
        else if (!strcmp(text, "0") || !strcasecmp(text, "no") || !strcasecmp(text, "off") || !strcasecmp(text, "false")) v = 0;
        else return GDTE_ERR_BAD_KNOB;
        break;
    case GDTE_KNOB_ENUM: {
        const char *p = d->accepted;
        size_t tl = strlen(text);
        int idx = 0;
        for (;;) {
            const char *bar = strchr(p, '|');
            size_t l = bar ? (size_t)(bar - p) : strlen(p);
            if (l == tl && !strncasecmp(p, text, l)) { v = idx; break; }
            if (!bar) return GDTE_ERR_BAD_KNOB;
            p = bar + 1;
            idx++;
        }
        break;
    }
    }
    *value_p = v;
    return GDTE_OK;
}

gdte_status_t gdte_knobs_load(void)
{
    if (knobs_loaded) return GDTE_OK;
    gdte_status_t st = GDTE_OK;
    for (int i = 0; i < GDTE_KNOB_COUNT_; i++) {
        const char *env = getenv(knob_desc[i].name);
        const char *txt = (env && *env) ? env : knob_desc[i].def;
        int64_t v;
        if (gdte_knob_parse((gdte_knob_id_t)i, txt, &v) != GDTE_OK) {
            /* Always printed, whatever GDTE_LOG says: the user must see why init failed. */
            fprintf(stderr, "[gdte] error: %s=\"%s\" is not valid; accepted: %s\n", knob_desc[i].name,
                    txt, knob_desc[i].accepted);
            st = GDTE_ERR_BAD_KNOB;
            continue;
        }
        knob_value[i] = v;
        knob_from_env[i] = (env && *env) ? 1 : 0;
        snprintf(knob_txt[i], sizeof knob_txt[i], "%s", txt);
    }
    if (st != GDTE_OK) return st;
    gdte_log_level_g = (int)knob_value[GDTE_KNOB_LOG];
    knobs_loaded = 1;
    return GDTE_OK;
}

void gdte_knobs_reset(void) { knobs_loaded = 0; }

int64_t gdte_knob(gdte_knob_id_t id)
{
    if (!knobs_loaded) {
        /* Used before init (e.g. a type built before gdte_init): defaults, never garbage. */
        int64_t v = 0;
        gdte_knob_parse(id, knob_desc[id].def, &v);
        return v;
    }
    return knob_value[id];
}

const char *gdte_knob_source(gdte_knob_id_t id) { return knob_from_env[id] ? "environment" : "default"; }
const char *gdte_knob_text(gdte_knob_id_t id) { return knobs_loaded ? knob_txt[id] : knob_desc[id].def; }
const gdte_knob_desc_t *gdte_knob_desc(gdte_knob_id_t id) { return &knob_desc[id]; }

int gdte_fault_hit(gdte_knob_id_t knob)
{
    static _Atomic int64_t calls[GDTE_KNOB_COUNT_];
    int64_t k = gdte_knob(knob);
    if (k <= 0) return 0;
    return ++calls[knob] == k;
}
