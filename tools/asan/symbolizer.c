/* The symbolizer the sanitizer builds' tests use (tools/test.sh builds this file statically as
 * build-ci-asan/asan-tools/llvm-symbolizer and names it in ASAN_OPTIONS external_symbolizer_path;
 * the sanitizers accept only a known tool's name, hence the file name it is given).
 *
 * Why: the MPI tests preload the instrumented libgdte_mpi.so into their ranks (LD_PRELOAD), and a
 * sanitizer runtime starts its symbolizer with the rank's environment. Any dynamically linked
 * program started so (the real llvm-symbolizer, or a shell running a wrapper script) loads that
 * library first and dies on its undefined sanitizer symbols, and the report being written (a leak
 * to match against the suppressions, or an error) is lost behind "Can't read from symbolizer" and
 * a SIGPIPE. A statically linked program is not touched by LD_PRELOAD: this one drops it from the
 * environment and then becomes the real symbolizer. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    static const char *const real[] = {
        "/usr/bin/llvm-symbolizer",    "/usr/bin/llvm-symbolizer-16", "/usr/bin/llvm-symbolizer-15",
        "/usr/bin/llvm-symbolizer-14", "/usr/lib/llvm-14/bin/llvm-symbolizer",
    };
    (void)argc;
    unsetenv("LD_PRELOAD");
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        if (access(real[i], X_OK) == 0) {
            argv[0] = (char *)real[i];
            execv(real[i], argv);
        }
    }
    fputs("gdte asan-tools/llvm-symbolizer: no llvm-symbolizer found in /usr/bin\n", stderr);
    return 1;
}
