/*
 * GDTE_LOG=debug writes one line per gdte_pack/gdte_unpack call (bytes, offset, layout, the
 * memory kind of each buffer, the executor that ran); the default level writes none.
 * stderr is captured in a temporary file around the calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "gdte.h"
#include "check.h"

/* Three calls (a whole pack, a fragment, an unpack) with stderr captured; returns what they wrote. */
static char *three_calls(void)
{
    static double m[8][8], out[12];
    gdte_type_h sub;
    if (gdte_type_create_vector(4, 3, 8, gdte_type_predefined(GDTE_BASIC_DOUBLE), &sub) != GDTE_OK ||
        gdte_type_commit(sub) != GDTE_OK)
        exit(2);
    FILE *tmp = tmpfile();
    if (!tmp) exit(2);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    int64_t n;
    gdte_pack_params_t frag = {.field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES, .offset = 8,
                               .max_bytes = 40};
    CHECK(gdte_pack(&m[2][1], 1, sub, out, sizeof out, NULL, &n) == GDTE_OK && n == 96, "pack");
    CHECK(gdte_pack(&m[2][1], 1, sub, out, sizeof out, &frag, &n) == GDTE_OK && n == 40, "fragment");
    CHECK(gdte_unpack(out, sizeof out, &m[2][1], 1, sub, NULL, &n) == GDTE_OK && n == 96, "unpack");
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    gdte_type_free(&sub);
    long len = ftell(tmp);
    char *text = calloc(1, (size_t)len + 1);
    rewind(tmp);
    if (!text || fread(text, 1, (size_t)len, tmp) != (size_t)len) exit(2);
    fclose(tmp);
    return text;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++) n++;
    return n;
}

int main(void)
{
    unsetenv("GDTE_LOG");
    gdte_init_params_t host = {.field_mask = GDTE_INIT_FIELD_FLAGS, .flags = GDTE_INIT_FLAG_HOST_ONLY};
    if (gdte_init(&host) != GDTE_OK) return 2;
    char *quiet = three_calls();
    CHECK(count(quiet, "gdte_pack") == 0 && count(quiet, "gdte_unpack") == 0,
          "the default level wrote about the calls:\n%s", quiet);
    gdte_finalize();

    setenv("GDTE_LOG", "debug", 1);
    if (gdte_init(&host) != GDTE_OK) return 2;
    char *loud = three_calls();
    gdte_finalize();
    CHECK(count(loud, "debug: gdte_pack: ") == 2 && count(loud, "debug: gdte_unpack: ") == 1,
          "expected two pack lines and one unpack line:\n%s", loud);
    CHECK(strstr(loud, "gdte_pack: 96 bytes at offset 0 of 1 element(s), strided layout; user buffer host, packed "
                       "buffer host -> host executor") != NULL,
          "the whole pack's line lacks bytes, layout, memory kinds or executor:\n%s", loud);
    CHECK(strstr(loud, "gdte_pack: 40 bytes at offset 8 ") != NULL, "the fragment's line:\n%s", loud);
    CHECK(strstr(loud, "gdte_unpack: 96 bytes at offset 0 ") != NULL, "the unpack's line:\n%s", loud);
    free(quiet);
    free(loud);
    if (failures) return 1;
    printf("log: one debug line per call, none at the default level\n");
    return 0;
}
