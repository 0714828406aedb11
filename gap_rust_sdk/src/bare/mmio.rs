//! GAP8 addresses and register helpers (no SDK). Each address cites gap_sdk's archi headers
//! (`rtos/pulp/gap_archi/include/archi/...`); the sequences were checked on the GAP8 GVSOC model.

/// Cluster L1 (TCDM), global alias (`ARCHI_CLUSTER_GLOBAL_ADDR(0)`): 64 KiB.
pub const L1_BASE: usize = 0x1000_0000;
/// Size of the cluster L1.
pub const L1_SIZE: usize = 64 * 1024;
/// L2: 512 KiB.
pub const L2_BASE: usize = 0x1C00_0000;
/// Size of L2.
pub const L2_SIZE: usize = 512 * 1024;

/// APB SoC control (`ARCHI_APB_SOC_CTRL_ADDR`, chips/gap8/memory_map.h).
pub const APB_SOC_CTRL: usize = 0x1A10_4000;
/// Cluster isolation (`APB_SOC_CL_ISOLATE_OFFSET` 0x0C, chips/gap8/apb_soc.h).
pub const APB_SOC_CL_ISOLATE: usize = APB_SOC_CTRL + 0x0C;
/// Cluster power / clock / reset bypass (`APB_SOC_CL_BYPASS_OFFSET` 0x70).
pub const APB_SOC_CL_BYPASS: usize = APB_SOC_CTRL + 0x70;
/// End-of-computation status (`APB_SOC_CORESTATUS_OFFSET` 0xA0): bit 31 = done, low bits = status.
pub const APB_SOC_CORESTATUS: usize = APB_SOC_CTRL + 0xA0;
/// `CL_BYPASS` bits: `BYP_POW`, `CL_STATE`, `BYP_CLK`, `CL_CG`, `CL_RST`.
pub const BYP_POW: u32 = 1 << 0;
/// See [`BYP_POW`].
pub const CL_STATE: u32 = 1 << 3;
/// See [`BYP_POW`].
pub const BYP_CLK: u32 = 1 << 9;
/// See [`BYP_POW`].
pub const CL_CG: u32 = 1 << 10;
/// See [`BYP_POW`].
pub const CL_RST: u32 = 1 << 13;

/// GVSOC's stdout peripheral (`ARCHI_STDOUT_ADDR`): one channel per core, `(cluster << 7) | (core << 3)`.
pub const STDOUT: usize = 0x1A11_0000;
/// FC instruction-cache control (`ARCHI_FC_ICACHE_ADDR`).
pub const FC_ICACHE_CTRL: usize = 0x1B20_1400;

/// Cluster control unit (`ARCHI_CLUSTER_CTRL_ADDR`, global alias of cluster 0's peripherals).
pub const CL_CTRL: usize = 0x1020_0000;
/// Fetch enable, one bit per core.
pub const CL_CTRL_FETCH_EN: usize = CL_CTRL + 0x08;
/// Boot address of core `i`: `CL_CTRL_BOOTADDR + 4 * i` (the core starts at boot address + 0x80).
pub const CL_CTRL_BOOTADDR: usize = CL_CTRL + 0x40;
/// Cluster instruction-cache control (`ARCHI_ICACHE_CTRL_OFFSET` 0x1400).
pub const CL_ICACHE_CTRL: usize = CL_CTRL + 0x1400;
/// Cluster timer (`ARCHI_TIMER_OFFSET` 0x400, archi/timer/timer_v2.h): `CFG_LO` +0x0, `CNT_LO` +0x8.
pub const CL_TIMER: usize = CL_CTRL + 0x400;
/// Timer 0 configuration (`TIMER_CFG_LO_OFFSET`).
pub const CL_TIMER_CFG_LO: usize = CL_TIMER;
/// Timer 0 count (`TIMER_CNT_LO_OFFSET`).
pub const CL_TIMER_CNT_LO: usize = CL_TIMER + 0x8;
/// `TIMER_CFG_LO` bits: enable (`ENABLE_BIT` 0) and reset (`RESET_BIT` 1); clock source
/// (`CCFG_BIT` 7) and prescaler (`PEN_BIT` 6) left 0: the counter counts cluster clock cycles.
pub const TIMER_ENABLE: u32 = 1 << 0;
/// See [`TIMER_ENABLE`].
pub const TIMER_RESET: u32 = 1 << 1;

/// Event unit, core-local demux (`ARCHI_EU_DEMUX_ADDR`, cluster cores only).
pub const EU_DEMUX: usize = 0x0020_4000;
/// This core's event mask (`EU_CORE_MASK`, archi/eu/eu_v3.h): the events that end a wait.
pub const EU_CORE_MASK: usize = EU_DEMUX;
/// OR into this core's event mask (`EU_CORE_MASK_OR`).
pub const EU_CORE_MASK_OR: usize = EU_DEMUX + 0x08;
/// Clear events from this core's event buffer (`EU_CORE_BUFFER_CLEAR`).
pub const EU_CORE_BUFFER_CLEAR: usize = EU_DEMUX + 0x28;
/// Hardware barrier `b` through the demux (`EU_BARRIER_DEMUX_OFFSET` 0x200, `EU_BARRIER_SIZE` 0x20).
pub const fn eu_barrier(b: usize) -> usize {
    EU_DEMUX + 0x200 + b * 0x20
}
/// Barrier register: cores whose arrival completes it (`EU_HW_BARR_TRIGGER_MASK`).
pub const EU_HW_BARR_TRIGGER_MASK: usize = 0x00;
/// Barrier register: cores woken when it completes (`EU_HW_BARR_TARGET_MASK`).
pub const EU_HW_BARR_TARGET_MASK: usize = 0x0C;
/// Barrier register: arrive, sleep until complete, clear the event (`EU_HW_BARR_TRIGGER_WAIT_CLEAR`).
pub const EU_HW_BARR_TRIGGER_WAIT_CLEAR: usize = 0x1C;
/// Event line of the hardware barriers (`PULP_HW_BAR_EVENT`).
pub const EVT_BARRIER: u32 = 16;
/// Event line of the cluster DMA (`CL_EVT_DMA0`).
pub const EVT_DMA: u32 = 8;

/// Cluster DMA (mchan v6), core-local demux (`ARCHI_MCHAN_DEMUX_ADDR`).
pub const MCHAN_DEMUX: usize = 0x0020_4400;
/// Command queue: read = allocate a transfer id; write = command word, then L1 address, then L2 address.
pub const MCHAN_CMD: usize = MCHAN_DEMUX;
/// Status: bit `tid` set while transfer `tid` runs; write `1 << tid` to free the id.
pub const MCHAN_STATUS: usize = MCHAN_DEMUX + 0x4;
/// Command word bits (archi/dma/mchan_v6.h): size in bits 0..16, then type, incr, 2D, ELE, ILE, BLE.
pub const DMA_EXT2LOC: u32 = 1 << 16;
/// Incrementing addresses.
pub const DMA_INCR: u32 = 1 << 17;
/// mchan command: 2-D transfer (one more word follows the addresses: `stride << 16 | length`).
pub const DMA_2D: u32 = 1 << 18;
/// Event at the end of the transfer (`ELE`; not used: a broadcast DMA event would wake cores
/// sleeping in a barrier).
pub const DMA_ELE: u32 = 1 << 19;
/// Broadcast the end event (`BLE`; not used, see [`DMA_ELE`]).
pub const DMA_BLE: u32 = 1 << 21;
/// Largest size of one command (16-bit size field; kept below 32 KiB like the SDK's 1D path).
pub const DMA_MAX_LEN: usize = (1 << 15) - 1;

/// Reads a 32-bit device register.
///
/// # Safety
/// `addr` is a readable device register or memory word of this chip.
#[inline(always)]
pub unsafe fn read(addr: usize) -> u32 {
    // SAFETY: caller contract.
    unsafe { core::ptr::read_volatile(addr as *const u32) }
}

/// Writes a 32-bit device register.
///
/// # Safety
/// `addr` is a writable device register or memory word of this chip, and writing `v` there has
/// no effect on memory Rust owns.
#[inline(always)]
pub unsafe fn write(addr: usize, v: u32) {
    // SAFETY: caller contract.
    unsafe { core::ptr::write_volatile(addr as *mut u32, v) }
}

/// `mhartid`: `cluster << 5 | core`; the FC is cluster 32.
#[inline(always)]
pub fn hartid() -> u32 {
    #[cfg(target_arch = "riscv32")]
    {
        let r: u32;
        // SAFETY: reading the hart id has no side effect.
        unsafe {
            core::arch::asm!("csrr {0}, 0xF14", out(reg) r, options(nomem, nostack, preserves_flags))
        };
        r
    }
    #[cfg(not(target_arch = "riscv32"))]
    {
        32 << 5
    }
}

/// True on the fabric controller.
#[inline(always)]
pub fn is_fc() -> bool {
    hartid() >> 5 == 32
}

/// Cluster core index (0..8) of the calling core.
#[inline(always)]
pub fn core_id() -> usize {
    (hartid() & 0x1F) as usize
}
