/* GDTE_* variables in the environment that name no knob. A misspelt knob (GDTE_FRAG_SZIE)
 * would otherwise be ignored without a word; UCX warns about unused UCX_* variables the same
 * way. Test programs read GDTETEST_* variables, a prefix this never looks at. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

extern char **environ;

#define PREFIX "GDTE_"
#define NAME_MAX_LEN 64

/* Edit distance (insertions, deletions, substitutions, adjacent swaps), capped: only the
 * question "is it within 2" matters. */
static int distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la >= NAME_MAX_LEN || lb >= NAME_MAX_LEN) return 99;
    int d[NAME_MAX_LEN + 1][NAME_MAX_LEN + 1];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

int gdte_env_unknown(void (*fn)(const char *name, const char *closest, void *arg), void *arg)
{
    int n = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, PREFIX, sizeof PREFIX - 1)) continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        char name[NAME_MAX_LEN * 2];
        if (len >= sizeof name) len = sizeof name - 1;
        memcpy(name, *e, len);
        name[len] = 0;
        const char *closest = NULL;
        int best = 3, known = 0;
        for (int i = 0; i < GDTE_KNOB_COUNT_; i++) {
            const char *k = gdte_knob_desc((gdte_knob_id_t)i)->name;
            if (!strcmp(k, name)) {
                known = 1;
                break;
            }
            int dist = distance(name, k);
            if (dist < best) {
                best = dist;
                closest = k;
            }
        }
        if (known) continue;
        n++;
        if (fn) fn(name, closest, arg);
    }
    return n;
}

static void warn_one(const char *name, const char *closest, void *arg)
{
    (void)arg;
    if (closest)
        gdte_warn("%s is set, but gdte has no such variable (did you mean %s?); gdte_info lists them", name, closest);
    else
        gdte_warn("%s is set, but gdte has no such variable; gdte_info lists them", name);
}

void gdte_env_warn_unknown(void)
{
    static atomic_int done;
    if (atomic_exchange(&done, 1)) return;
    gdte_env_unknown(warn_one, NULL);
}
