/* GPU executor when gdte is built without a GPU backend. */
#include "kernels.h"

gdte_status_t gdte_gpu_exec(const gdte_layout_t *L, gdte_dir_t dir, void *user, void *packed, int64_t offset,
                            int64_t len, gdte_stream_t stream, int max_blocks)
{
    (void)L; (void)dir; (void)user; (void)packed; (void)offset; (void)len; (void)stream; (void)max_blocks;
    return GDTE_ERR_NO_DEVICE;
}
gdte_kvar_t gdte_gpu_exec_variant(const gdte_layout_t *L, gdte_dir_t dir)
{
    (void)L; (void)dir;
    return GDTE_KVAR_NONE;
}
void gdte_gpu_exec_force_variant(gdte_kvar_t v) { (void)v; }
void gdte_gpu_exec_force_word(int bytes) { (void)bytes; }
void gdte_gpu_exec_force_wide(int on) { (void)on; }
gdte_status_t gdte_gpu_exec_ex(const gdte_layout_t *L, const gdte_gpu_exec_opts_t *opts, gdte_dir_t dir, void *user,
                               void *packed, int64_t offset, int64_t len, gdte_stream_t stream)
{
    (void)L; (void)opts; (void)dir; (void)user; (void)packed; (void)offset; (void)len; (void)stream;
    return GDTE_ERR_NO_DEVICE;
}
void gdte_gpu_exec_last(gdte_kvar_t *variant_p, int *word_p)
{
    *variant_p = GDTE_KVAR_NONE;
    *word_p = 0;
}
gdte_status_t gdte_gpu_expand_units(const gdte_run_t *runs, int64_t nruns, int64_t unit_size, gdte_unit_t *units,
                                    gdte_stream_t stream)
{
    (void)runs; (void)nruns; (void)unit_size; (void)units; (void)stream;
    return GDTE_ERR_NO_DEVICE;
}
gdte_status_t gdte_gpu_exec_copy(const gdte_layout_t *Ls, const void *src, const gdte_layout_t *Ld, void *dst,
                                 int64_t offset, int64_t len, gdte_stream_t stream, int max_blocks)
{
    (void)Ls; (void)src; (void)Ld; (void)dst; (void)offset; (void)len; (void)stream; (void)max_blocks;
    return GDTE_ERR_NO_DEVICE;
}
gdte_status_t gdte_gpu_exec_copy_units(const gdte_layout_t *L, const void *src, void *dst, int64_t offset, int64_t len,
                                       gdte_stream_t stream, int max_blocks)
{
    (void)L; (void)src; (void)dst; (void)offset; (void)len; (void)stream; (void)max_blocks;
    return GDTE_ERR_NO_DEVICE;
}
