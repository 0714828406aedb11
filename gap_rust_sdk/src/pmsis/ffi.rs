//! Raw FFI to the GAP SDK's pmsis (GAP8, FreeRTOS port). Layouts are copied from gap_sdk and
//! checked below (size, alignment, every field offset) for the 32-bit target; the C shims in
//! `gap_rust_sdk_w` repeat the same checks with `_Static_assert` against the real headers when the
//! SDK is present. Do not use pulp-sdk layouts: they differ.
#![allow(missing_docs, non_camel_case_types)]

use core::ffi::c_void;
use core::marker::{PhantomData, PhantomPinned};

/// `struct pi_device`, gap_sdk `rtos/pmsis/api/include/pmsis/pmsis_types.h`:
/// `{ struct pi_device_api *api; void *config; void *data; }`.
#[repr(C)]
pub struct pi_device {
    pub api: *mut pi_device_api,
    pub config: *mut c_void,
    pub data: *mut c_void,
}

/// `struct pi_cluster_conf`, gap_sdk `rtos/pmsis/api/include/pmsis/cluster/cl_pmsis_types.h`:
/// `{ pi_device_e device_type; int id; uint32_t cc_stack_size; uint32_t scratch_size;
///    void *heap_start; uint32_t heap_size; struct pmsis_event_kernel_wrap *event_kernel;
///    pi_cluster_flags_e flags; }`.
#[repr(C)]
pub struct pi_cluster_conf {
    pub device_type: u32,
    pub id: i32,
    pub cc_stack_size: u32,
    pub scratch_size: u32,
    pub heap_start: *mut c_void,
    pub heap_size: u32,
    pub event_kernel: *mut pmsis_event_kernel_wrap,
    pub flags: u32,
}

/// `pi_cluster_task_t` for GAP8 (the `#ifndef __GAP9__` branch), gap_sdk
/// `rtos/pmsis/api/include/pmsis/cluster/cl_pmsis_types.h`, with the FreeRTOS port's
/// `CLUSTER_TASK_IMPLEM` = `uint32_t cluster_team_mask;`
/// (`rtos/freeRTOS/vendors/gwt/pmsis/include/pmsis/backend/implementation_specific_defines.h`).
#[repr(C)]
pub struct pi_cluster_task {
    pub entry: Option<unsafe extern "C" fn(*mut c_void)>,
    pub arg: *mut c_void,
    pub stacks: *mut c_void,
    pub stack_size: u32,
    pub slave_stack_size: u32,
    pub nb_cores: i32,
    pub completion_callback: *mut pi_task,
    pub stack_allocated: i32,
    pub next: *mut pi_cluster_task,
    pub cluster_team_mask: u32,
}

/// `struct pi_cl_dma_cmd_s` (`pi_cl_dma_cmd_t`), gap_sdk
/// `rtos/freeRTOS/vendors/gwt/gap8/pmsis/include/pmsis/implem/cluster/dma/cl_dma.h`:
/// `{ uint32_t tid, cmd, size, stride, length, loc, ext; struct pi_cl_dma_cmd_s *next; }`.
#[repr(C)]
pub struct pi_cl_dma_cmd_t {
    pub tid: u32,
    pub cmd: u32,
    pub size: u32,
    pub stride: u32,
    pub length: u32,
    pub loc: u32,
    pub ext: u32,
    pub next: *mut pi_cl_dma_cmd_t,
}

/// `pi_cl_dma_dir_e`, gap_sdk `rtos/pmsis/api/include/pmsis/cluster/dma/cl_dma.h`.
pub const PI_CL_DMA_DIR_LOC2EXT: u32 = 0;
/// See [`PI_CL_DMA_DIR_LOC2EXT`].
pub const PI_CL_DMA_DIR_EXT2LOC: u32 = 1;
/// `PI_DEVICE_CLUSTER_TYPE` of `pi_device_e` (pmsis_types.h).
pub const PI_DEVICE_CLUSTER_TYPE: u32 = 1;

macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        /// Only ever used behind a pointer; not constructible, and neither `Send`, `Sync` nor
        /// `Unpin` (we do not know what C does with it).
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// `struct pi_device_api` (pmsis_types.h).
    pi_device_api;
    /// `struct pi_task` (pmsis_types.h; layout differs per OS port).
    pi_task;
    /// `struct pmsis_event_kernel_wrap` (reserved for the runtime).
    pmsis_event_kernel_wrap;
}

unsafe extern "C" {
    // rtos/pmsis/api/include/pmsis/cluster/cluster_sync/fc_to_cl_delegate.h
    pub fn pi_cluster_conf_init(conf: *mut pi_cluster_conf);
    pub fn pi_cluster_open(device: *mut pi_device) -> i32;
    pub fn pi_cluster_close(device: *mut pi_device) -> i32;
    pub fn pi_cluster_send_task_to_cl(device: *mut pi_device, task: *mut pi_cluster_task) -> i32;
    // rtos/pmsis/api/include/pmsis/device.h
    pub fn pi_open_from_conf(device: *mut pi_device, conf: *mut c_void);
    // rtos/pmsis/api/include/pmsis/rtos/malloc/cl_l1_malloc.h
    pub fn pi_cl_l1_malloc(device: *mut pi_device, size: u32) -> *mut c_void;
    pub fn pi_cl_l1_free(device: *mut pi_device, chunk: *mut c_void, size: i32);
    pub fn pi_cl_l1_malloc_align(device: *mut pi_device, size: i32, align: i32) -> *mut c_void;
    // rtos/pmsis/api/include/pmsis/rtos/malloc/l2_malloc.h
    pub fn pi_l2_malloc(size: i32) -> *mut c_void;
    pub fn pi_l2_free(chunk: *mut c_void, size: i32);
    pub fn pi_l2_malloc_align(size: i32, align: i32) -> *mut c_void;
}

// The C shims for pmsis' static-inline functions, built and linked by `gap_rust_sdk_w`
// (gap_rust_sdk_w/csrc/shims.c, which includes the SDK headers and re-checks the layouts above).
use gap_rust_sdk_w as _;

unsafe extern "C" {
    /// `pi_cl_team_fork` (cluster/team/cl_team_internal.h, GAP8 FreeRTOS port).
    pub fn gap_rust_sdk_w_cl_team_fork(
        nb_cores: i32,
        entry: unsafe extern "C" fn(*mut c_void),
        arg: *mut c_void,
    );
    /// `pi_cl_team_barrier`.
    pub fn gap_rust_sdk_w_cl_team_barrier();
    /// `pi_cl_team_nb_cores`.
    pub fn gap_rust_sdk_w_cl_team_nb_cores() -> i32;
    /// `pi_core_id` (targets/target.h).
    pub fn gap_rust_sdk_w_core_id() -> u32;
    /// `pi_cluster_id`.
    pub fn gap_rust_sdk_w_cluster_id() -> u32;
    /// `pi_cl_dma_cmd` (cluster/dma/cl_dma.h, GAP8 FreeRTOS port).
    pub fn gap_rust_sdk_w_cl_dma_cmd(
        ext: u32,
        loc: u32,
        size: u32,
        dir: u32,
        cmd: *mut pi_cl_dma_cmd_t,
    );
    /// `pi_cl_dma_cmd_2d`: `size` bytes in lines of `length` bytes, `stride` bytes apart at `ext`
    /// (one mchan 2-D command for `stride < 32768`), packed at `loc`.
    pub fn gap_rust_sdk_w_cl_dma_cmd_2d(
        ext: u32,
        loc: u32,
        size: u32,
        stride: u32,
        length: u32,
        dir: u32,
        cmd: *mut pi_cl_dma_cmd_t,
    );
    /// `pi_cl_dma_cmd_wait`.
    pub fn gap_rust_sdk_w_cl_dma_cmd_wait(cmd: *mut pi_cl_dma_cmd_t);
    /// `pi_cl_dma_flush`.
    pub fn gap_rust_sdk_w_cl_dma_flush();
    /// `pi_cluster_task` (cluster_sync/fc_to_cl_delegate.h).
    pub fn gap_rust_sdk_w_cluster_task(
        task: *mut pi_cluster_task,
        entry: unsafe extern "C" fn(*mut c_void),
        arg: *mut c_void,
    ) -> *mut pi_cluster_task;
    /// `pi_cluster_task_stacks`.
    pub fn gap_rust_sdk_w_cluster_task_stacks(
        task: *mut pi_cluster_task,
        stacks: *mut c_void,
        stack_size: i32,
    ) -> *mut pi_cluster_task;
}

#[cfg(target_pointer_width = "32")]
mod layout {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    const _: () = assert!(size_of::<pi_device>() == 12 && align_of::<pi_device>() == 4);
    const _: () = assert!(offset_of!(pi_device, api) == 0);
    const _: () = assert!(offset_of!(pi_device, config) == 4);
    const _: () = assert!(offset_of!(pi_device, data) == 8);

    const _: () = assert!(size_of::<pi_cluster_conf>() == 32 && align_of::<pi_cluster_conf>() == 4);
    const _: () = assert!(offset_of!(pi_cluster_conf, device_type) == 0);
    const _: () = assert!(offset_of!(pi_cluster_conf, id) == 4);
    const _: () = assert!(offset_of!(pi_cluster_conf, cc_stack_size) == 8);
    const _: () = assert!(offset_of!(pi_cluster_conf, scratch_size) == 12);
    const _: () = assert!(offset_of!(pi_cluster_conf, heap_start) == 16);
    const _: () = assert!(offset_of!(pi_cluster_conf, heap_size) == 20);
    const _: () = assert!(offset_of!(pi_cluster_conf, event_kernel) == 24);
    const _: () = assert!(offset_of!(pi_cluster_conf, flags) == 28);

    const _: () = assert!(size_of::<pi_cluster_task>() == 40 && align_of::<pi_cluster_task>() == 4);
    const _: () = assert!(offset_of!(pi_cluster_task, entry) == 0);
    const _: () = assert!(offset_of!(pi_cluster_task, arg) == 4);
    const _: () = assert!(offset_of!(pi_cluster_task, stacks) == 8);
    const _: () = assert!(offset_of!(pi_cluster_task, stack_size) == 12);
    const _: () = assert!(offset_of!(pi_cluster_task, slave_stack_size) == 16);
    const _: () = assert!(offset_of!(pi_cluster_task, nb_cores) == 20);
    const _: () = assert!(offset_of!(pi_cluster_task, completion_callback) == 24);
    const _: () = assert!(offset_of!(pi_cluster_task, stack_allocated) == 28);
    const _: () = assert!(offset_of!(pi_cluster_task, next) == 32);
    const _: () = assert!(offset_of!(pi_cluster_task, cluster_team_mask) == 36);

    const _: () = assert!(size_of::<pi_cl_dma_cmd_t>() == 32 && align_of::<pi_cl_dma_cmd_t>() == 4);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, tid) == 0);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, cmd) == 4);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, size) == 8);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, stride) == 12);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, length) == 16);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, loc) == 20);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, ext) == 24);
    const _: () = assert!(offset_of!(pi_cl_dma_cmd_t, next) == 28);
}
