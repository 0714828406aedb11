/* C shims for the GAP SDK's static-inline pmsis functions (GAP8, FreeRTOS port), so that Rust can
 * call them. Each shim only forwards; see gap_rust_sdk/src/pmsis/ffi.rs for the Rust declarations.
 * The _Static_asserts repeat the layout checks of ffi.rs against the real headers. */
#include "gap_compat.h"
#include "pmsis.h"
#include <stddef.h>

void gap_rust_sdk_w_cl_team_fork(int nb_cores, void (*entry)(void *), void *arg)
{
    pi_cl_team_fork(nb_cores, entry, arg);
}

void gap_rust_sdk_w_cl_team_barrier(void)
{
    pi_cl_team_barrier();
}

uint32_t gap_rust_sdk_w_core_id(void)
{
    return pi_core_id();
}

uint32_t gap_rust_sdk_w_cluster_id(void)
{
    return pi_cluster_id();
}

void gap_rust_sdk_w_cl_dma_cmd(uint32_t ext, uint32_t loc, uint32_t size, uint32_t dir,
                               pi_cl_dma_cmd_t *cmd)
{
    pi_cl_dma_cmd(ext, loc, size, (pi_cl_dma_dir_e) dir, cmd);
}

void gap_rust_sdk_w_cl_dma_cmd_2d(uint32_t ext, uint32_t loc, uint32_t size, uint32_t stride,
                                  uint32_t length, uint32_t dir, pi_cl_dma_cmd_t *cmd)
{
    pi_cl_dma_cmd_2d(ext, loc, size, stride, length, (pi_cl_dma_dir_e) dir, cmd);
}

void gap_rust_sdk_w_cl_dma_cmd_wait(pi_cl_dma_cmd_t *cmd)
{
    pi_cl_dma_cmd_wait(cmd);
}

void gap_rust_sdk_w_cl_dma_flush(void)
{
    pi_cl_dma_flush();
}

struct pi_cluster_task *gap_rust_sdk_w_cluster_task(struct pi_cluster_task *task,
                                                    void (*entry)(void *), void *arg)
{
    return pi_cluster_task(task, entry, arg);
}

struct pi_cluster_task *gap_rust_sdk_w_cluster_task_stacks(struct pi_cluster_task *task,
                                                           void *stacks, int stack_size)
{
    return pi_cluster_task_stacks(task, stacks, stack_size);
}

/* Layouts (must match gap_rust_sdk/src/pmsis/ffi.rs). */
_Static_assert(sizeof(struct pi_device) == 12, "pi_device size");
_Static_assert(offsetof(struct pi_device, data) == 8, "pi_device.data");
_Static_assert(sizeof(struct pi_cluster_conf) == 32, "pi_cluster_conf size");
_Static_assert(offsetof(struct pi_cluster_conf, cc_stack_size) == 8, "cc_stack_size");
_Static_assert(offsetof(struct pi_cluster_conf, scratch_size) == 12, "scratch_size");
_Static_assert(offsetof(struct pi_cluster_conf, event_kernel) == 24, "event_kernel");
_Static_assert(offsetof(struct pi_cluster_conf, flags) == 28, "flags");
_Static_assert(sizeof(struct pi_cluster_task) == 40, "pi_cluster_task size");
_Static_assert(offsetof(struct pi_cluster_task, stack_size) == 12, "stack_size");
_Static_assert(offsetof(struct pi_cluster_task, slave_stack_size) == 16, "slave_stack_size");
_Static_assert(offsetof(struct pi_cluster_task, nb_cores) == 20, "nb_cores");
_Static_assert(offsetof(struct pi_cluster_task, next) == 32, "next");
_Static_assert(offsetof(struct pi_cluster_task, cluster_team_mask) == 36, "cluster_team_mask");
_Static_assert(sizeof(pi_cl_dma_cmd_t) == 32, "pi_cl_dma_cmd_t size");
_Static_assert(offsetof(pi_cl_dma_cmd_t, loc) == 20, "pi_cl_dma_cmd_t.loc");
_Static_assert(offsetof(pi_cl_dma_cmd_t, ext) == 24, "pi_cl_dma_cmd_t.ext");
_Static_assert(offsetof(pi_cl_dma_cmd_t, next) == 28, "pi_cl_dma_cmd_t.next");
_Static_assert(PI_CL_DMA_DIR_EXT2LOC == 1 && PI_CL_DMA_DIR_LOC2EXT == 0, "dma dir");
_Static_assert(PI_DEVICE_CLUSTER_TYPE == 1, "cluster device type");
