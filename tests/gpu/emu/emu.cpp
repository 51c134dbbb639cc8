/* The emulator's scheduler (see cuda_runtime_api.h) and the GPU-layer calls the kernels make,
 * answered for a pretend device with few SMs so that grid-stride loops take many turns. */
#include "cuda_runtime_api.h"
extern "C" {
#include "gpu/gpu.h"
}

gdte_emu_fiber *gdte_emu_cur;
dim3 gdte_emu_block, gdte_emu_bdim, gdte_emu_gdim;
ucontext_t gdte_emu_sched;
std::function<void()> *gdte_emu_fn;
int64_t gdte_emu_launches;

#define STACK_BYTES (256 * 1024)

static void fiber_main(void)
{
    (*gdte_emu_fn)();
    gdte_emu_cur->done = true;
}

void gdte_emu_run(dim3 grid, dim3 block, std::function<void()> fn)
{
    static std::vector<gdte_emu_fiber> fibers;
    static std::vector<char *> stacks;
    const unsigned nt = block.x * block.y * block.z;
    if (fibers.size() < nt) fibers.resize(nt);
    while (stacks.size() < nt) stacks.push_back((char *)malloc(STACK_BYTES));
    gdte_emu_fn = &fn;
    gdte_emu_bdim = block;
    gdte_emu_gdim = grid;
    gdte_emu_launches++;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                gdte_emu_block = dim3(bx, by, bz);
                for (unsigned i = 0; i < nt; i++) {
                    gdte_emu_fiber &f = fibers[i];
                    f.tid = dim3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
                    f.done = false;
                    getcontext(&f.ctx);
                    f.ctx.uc_stack.ss_sp = stacks[i];
                    f.ctx.uc_stack.ss_size = STACK_BYTES;
                    f.ctx.uc_link = &gdte_emu_sched;
                    makecontext(&f.ctx, fiber_main, 0);
                }
                /* Rounds: every unfinished fiber runs to its next barrier or to its end. */
                for (bool again = true; again;) {
                    again = false;
                    for (unsigned i = 0; i < nt; i++) {
                        if (fibers[i].done) continue;
                        gdte_emu_cur = &fibers[i];
                        swapcontext(&gdte_emu_sched, &fibers[i].ctx);
                        if (!fibers[i].done) again = true;
                    }
                }
            }
}

cudaError_t cudaGetDriverEntryPointByVersion(const char *, void **, unsigned, unsigned long long,
                                             enum cudaDriverEntryPointQueryResult *)
{
    return cudaErrorNotSupported;
}

/* The GPU layer, for the kernels' host code only. */
extern "C" {
int gdte_gpu_available(void) { return 1; }
int gdte_gpu_current_device(void) { return 0; }
gdte_status_t gdte_gpu_get_props(int device, gdte_gpu_props_t *p)
{
    (void)device;
    memset(p, 0, sizeof *p);
    strcpy(p->name, "emulated GPU");
    p->sm_count = 2;
    p->max_threads_per_sm = 512;
    p->warp_size = 32;
    return GDTE_OK;
}
}
