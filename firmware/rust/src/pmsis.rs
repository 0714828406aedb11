//! The GAP8 edge: FFI to `firmware/src/board.c` (the SDK's pmsis drivers), the hardware trait
//! implementations over it, the global allocator (pmsis' L2 heap), the panic handler and the C
//! entry point [`gapstream_main`] that `firmware/src/main.c` calls from its FreeRTOS task.

use alloc::boxed::Box;
use alloc::rc::Rc;
use core::alloc::{GlobalAlloc, Layout};
use core::cell::RefCell;
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use gap_rust_cipher_s::engine::{ClusterEngine, Config as EngineConfig};
use gap_rust_sdk::mem::RawAlloc;
use gap_rust_sdk::pmsis::{PmsisCluster, PmsisConfig, PmsisL2};
use gapstream_drone::boot::FlashBootCounter;
use gapstream_drone::{
    Boot, BootCounterError, Drone, DroneConfig, FrameCoder, FrameFormat, Mode, SecureConfig,
};
use gapstream_protocol::session;

use crate::app::{self, AppConfig};
use crate::camera::{CameraError, CameraHw, HimaxCamera, Staged};
use crate::clock::{Counter32, WideClock};
use crate::coder::CodedBuffer;
#[cfg(feature = "codec-jpeg")]
use crate::coder::JpegCoder;
#[cfg(feature = "codec-jpegls")]
use crate::coder::JplsCoder;
use crate::entropy::{EntropyPool, PoolEntropy, Source};
use crate::keys;
use crate::link::queue::{self, QueuedLink, Shared, Signals};
use crate::link::{CpxSpiLink, LinkError, SpiHw, WaitUpstream};
use gapstream_protocol::padding::Padding;

// --- FFI ------------------------------------------------------------------------------------------

unsafe extern "C" {
    fn fw_cam_open(frame_drop: u32) -> i32;
    fn fw_cam_start(buf: *mut u8, len: u32) -> i32;
    fn fw_cam_wait() -> i32;
    fn fw_cam_started_at() -> u32;
    fn fw_cam_done_at() -> u32;
    fn fw_link_open(up_hz: u32, down_hz: u32) -> i32;
    fn fw_spi_actual_hz(hz: u32) -> u32;
    fn fw_spi_transfer(tx: *const u8, rx: *mut u8, len: u32, keep_cs: i32) -> i32;
    fn fw_link_task_start(
        entry: unsafe extern "C" fn(*mut core::ffi::c_void),
        arg: *mut core::ffi::c_void,
        stack_bytes: u32,
    ) -> i32;
    fn fw_link_kick();
    fn fw_link_idle(timeout_us: u32);
    fn fw_link_freed();
    fn fw_link_wait_freed(timeout_us: u32);
    fn fw_link_arrived();
    fn fw_link_wait_arrived(timeout_us: u32);
    fn fw_gap_rtt_set(level: i32);
    fn fw_esp_rtt_take() -> i32;
    fn fw_esp_rtt_wait(timeout_us: u32) -> i32;
    fn fw_timer_start();
    fn fw_timer_read() -> u32;
    fn fw_fc_hz() -> u32;
    fn fw_set_fc_hz(hz: u32) -> i32;
    fn fw_set_cl_hz(hz: u32) -> i32;
    fn fw_cl_hz() -> u32;
    fn fw_fast_stack_init(size: u32) -> i32;
    fn fw_run_on_fast_stack(
        f: unsafe extern "C" fn(*mut core::ffi::c_void),
        arg: *mut core::ffi::c_void,
    );
    fn fw_fast_stack_used() -> u32;
    fn fw_fast_stack_size() -> u32;
    fn fw_noise_uninit(out: *mut u8, len: usize) -> usize;
    fn fw_heap_dump();
    fn fw_l2_free(largest: *mut u32) -> u32;
    fn fw_l2_heap_size() -> u32;
    fn fw_console_write(s: *const u8, len: usize);
    fn fw_uart_rx_open(baud: u32) -> i32;
    fn fw_uart_rx_take(bytes: *mut u8, stamps: *mut u32, max: u32) -> u32;
    fn fw_uart_rx_overruns() -> u32;
    fn fw_uart_rx_stats(received: *mut u32, reads: *mut u32, overruns_first_poll: *mut u32);
    fn fw_exit(status: i32);
    /// The pairing file and the device seed, from `firmware/generated/keys.S` (made at build time
    /// from `gapstream pair`'s drone.key; never in the source tree).
    static gapstream_pairing_text: u8;
    static gapstream_pairing_len: u32;
    static gapstream_device_seed: [u8; 32];
}

/// The run's settings, filled by `firmware/src/main.c` from the build's make variables.
/// Layout shared with `struct gapstream_fw_config` in `firmware/src/main.c` (checked there with
/// `_Static_assert` and here with the assertions below).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FwConfig {
    /// Frames to send after the handshake (0: forever).
    pub frames: u32,
    /// CPI frame drop (sensor frames skipped between delivered ones; 0 on hardware).
    pub frame_drop: u32,
    /// SPI clock of transmit-only transfers to the ESP32 in Hz (frames; up to 30 MHz).
    pub spi_down_hz: u32,
    /// 1: double-buffered (capture N+1 while N is sealed and sent); 0: one stage after the other.
    pub pipeline: u32,
    /// Cluster cores for the encryption (1..=8).
    pub cores: u32,
    /// L1 buffer per round of the cluster engine, bytes.
    pub l1_buffer: u32,
    /// Give up when no receiver shakes hands within this many ms (0: wait forever).
    pub handshake_timeout_ms: u32,
    /// CPX payload bytes per packet (1..=1020).
    pub packet_payload: u32,
    /// Bitcraze's plaintext 0xBC stream instead of the secure protocol (no receiver handshake).
    pub stock: u32,
    /// FC clock in Hz (0: leave it).
    pub fc_hz: u32,
    /// Cluster clock in Hz (0: leave it).
    pub cl_hz: u32,
    /// Bytes of FC TCDM for the per-frame stack (0: run on the task stack).
    pub fast_stack: u32,
    /// SPI clock of transfers that read MISO in Hz (the AI-deck corrupts it above 7.2 MHz).
    pub spi_up_hz: u32,
    /// Packets the link task's ring holds (0: no link task, the drone loop sends itself).
    pub link_slots: u32,
    /// Baud rate of the UART from the Crazyflie's STM32 (0: no state; frames carry no record).
    pub state_baud: u32,
    /// A state sample older than this at the end of a frame's exposure is flagged stale, ms.
    pub state_max_age_ms: u32,
    /// Compress, then seal: 0 raw frames, 1 JPEG on the cluster (`gapstream_jpeg::cluster`),
    /// 2 lossless JPEG-LS on the cluster (`gapstream_jpegls::cluster`).
    pub codec: u32,
    /// JPEG quality 1..=100 (IJG scale).
    pub quality: u32,
    /// Bytes of L2 for the coded frame (a frame whose code does not fit goes out raw, counted).
    pub coded_bytes: u32,
    /// Length-hiding padding of coded frames (`gapstream_protocol::padding`): 0 off, 1 Padmé,
    /// 2 powers of two, 3 the raw frame's length.
    pub padding: u32,
}

const _: () = {
    assert!(core::mem::size_of::<FwConfig>() == 80);
    assert!(core::mem::offset_of!(FwConfig, padding) == 76);
    assert!(core::mem::offset_of!(FwConfig, state_baud) == 56);
    assert!(core::mem::offset_of!(FwConfig, codec) == 64);
    assert!(core::mem::offset_of!(FwConfig, spi_up_hz) == 48);
    assert!(core::mem::offset_of!(FwConfig, pipeline) == 12);
    assert!(core::mem::offset_of!(FwConfig, stock) == 32);
    assert!(core::mem::offset_of!(FwConfig, cl_hz) == 40);
};

// The key establishment the firmware answers is what its own features (firmware/Makefile `KEX`)
// ask for: nothing else in the firmware's build turns on gapstream_protocol's `kex-*` features.
const _: () = {
    use gapstream_protocol::handshake::RESPONDER_MODES;
    use gapstream_protocol::suite::KexMode;
    assert!(RESPONDER_MODES.contains(KexMode::P256) == cfg!(feature = "kex-p256"));
    assert!(RESPONDER_MODES.contains(KexMode::RsaOaep2048) == cfg!(feature = "kex-rsa2048"));
};

// --- allocator, panic, console -------------------------------------------------------------------

/// The global allocator: pmsis' L2 heap (`pi_l2_malloc` / `pi_l2_free` with the exact size).
struct L2Heap;

// SAFETY: `PmsisL2` returns blocks of at least `layout.size()` bytes aligned to `layout.align()`
// or null, and frees with the same layout (RawAlloc's contract); the firmware allocates from one
// FreeRTOS task only (the cluster code never allocates), and pmsis' allocator masks interrupts.
unsafe impl GlobalAlloc for L2Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() == 0 {
            return layout.align() as *mut u8;
        }
        match PmsisL2.alloc(layout) {
            Some(p) => {
                HEAP_STATS.note_alloc(layout.size());
                p.as_ptr()
            }
            None => {
                HEAP_STATS.report_failure(layout.size());
                core::ptr::null_mut()
            }
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        if let Some(p) = core::ptr::NonNull::new(ptr) {
            // SAFETY: allocated by `alloc` above with this layout.
            unsafe { PmsisL2.dealloc(p, layout) }
            HEAP_STATS.note_free(layout.size());
        }
    }
}

#[global_allocator]
static HEAP: L2Heap = L2Heap;

/// What the Rust side holds of the L2 heap (the C side and FreeRTOS allocate from it too): printed
/// with pmsis' own map of the heap when an allocation fails, and by `heap_line`.
struct HeapStats {
    in_use: AtomicUsize,
    peak: AtomicUsize,
    blocks: AtomicUsize,
    /// The least free L2 (pmsis' whole heap: FreeRTOS, drivers and Rust) seen after any Rust
    /// allocation; `usize::MAX` before the first.
    l2_free_min: AtomicUsize,
}

static HEAP_STATS: HeapStats = HeapStats {
    in_use: AtomicUsize::new(0),
    peak: AtomicUsize::new(0),
    blocks: AtomicUsize::new(0),
    l2_free_min: AtomicUsize::new(usize::MAX),
};

/// Free bytes of pmsis' L2 heap and its largest free block.
fn l2_free() -> (usize, usize) {
    let mut largest = 0u32;
    // SAFETY: walks pmsis' free list with interrupts masked (C side); writes one u32.
    let free = unsafe { fw_l2_free(&mut largest) };
    (free as usize, largest as usize)
}

impl HeapStats {
    // Load + store, not read-modify-write atomics (rv32imc has none): the firmware allocates from
    // one task at a time (see the `GlobalAlloc` impl), and these are figures for a report.
    fn note_alloc(&self, n: usize) {
        let now = self.in_use.load(Ordering::Relaxed) + n;
        self.in_use.store(now, Ordering::Relaxed);
        if now > self.peak.load(Ordering::Relaxed) {
            self.peak.store(now, Ordering::Relaxed);
        }
        let b = self.blocks.load(Ordering::Relaxed);
        self.blocks.store(b + 1, Ordering::Relaxed);
        // The C side allocates at start-up (tasks, drivers) and the Rust side afterwards, so the
        // least free L2 is reached at a Rust allocation: a walk of the (short) free list each.
        let (free, _) = l2_free();
        if free < self.l2_free_min.load(Ordering::Relaxed) {
            self.l2_free_min.store(free, Ordering::Relaxed);
        }
    }
    fn note_free(&self, n: usize) {
        let now = self.in_use.load(Ordering::Relaxed).saturating_sub(n);
        self.in_use.store(now, Ordering::Relaxed);
        let b = self.blocks.load(Ordering::Relaxed);
        self.blocks.store(b.saturating_sub(1), Ordering::Relaxed);
    }
    fn report_failure(&self, n: usize) {
        // No allocation here: the console writer formats into the C printf.
        let _ = writeln!(
            Console,
            "FW heap: no {n} bytes; Rust holds {} bytes in {} blocks (peak {}); pmsis L2 heap map:",
            self.in_use.load(Ordering::Relaxed),
            self.blocks.load(Ordering::Relaxed),
            self.peak.load(Ordering::Relaxed)
        );
        // SAFETY: prints pmsis' free-list (C side); allocates nothing.
        unsafe { fw_heap_dump() };
    }
}

/// One line on the L2 heap: the Rust side's use and pmsis' free bytes (now, the least seen, the
/// largest free block) of the heap the link script left (`l2_heap`).
fn heap_line(out: &mut Console, when: &str) {
    let (free, largest) = l2_free();
    let min = HEAP_STATS.l2_free_min.load(Ordering::Relaxed).min(free);
    // SAFETY: reads a link-script symbol's address.
    let size = unsafe { fw_l2_heap_size() };
    let _ = writeln!(
        out,
        "FW heap {when}: rust_in_use={} rust_blocks={} rust_peak={} l2_heap={size} l2_free={free} l2_free_min={min} l2_largest_free={largest}",
        HEAP_STATS.in_use.load(Ordering::Relaxed),
        HEAP_STATS.blocks.load(Ordering::Relaxed),
        HEAP_STATS.peak.load(Ordering::Relaxed)
    );
}

/// `core::fmt::Write` to the console (stdout on GVSOC, UART on the deck).
pub struct Console;

impl Write for Console {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // SAFETY: a valid byte range; the C side only reads it.
        unsafe { fw_console_write(s.as_ptr(), s.len()) };
        Ok(())
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let _ = writeln!(Console, "FW panic: {info}");
    // SAFETY: ends the program (pmsis_exit); never returns.
    unsafe { fw_exit(101) };
    loop {}
}

// --- hardware trait implementations --------------------------------------------------------------

/// FC timer 1 at the FC clock.
pub struct FcTimer {
    hz: u32,
}

impl Counter32 for FcTimer {
    fn read(&self) -> u32 {
        // SAFETY: reads a timer register.
        unsafe { fw_timer_read() }
    }
    fn hz(&self) -> u32 {
        self.hz
    }
}

/// The UART from the STM32 through `fw_uart_rx_*`, taken from the C ring up to 64 bytes at a
/// time (one call, not one per byte).
pub struct BoardUart {
    bytes: [u8; 64],
    stamps: [u32; 64],
    n: usize,
    i: usize,
}

impl BoardUart {
    pub const fn new() -> Self {
        BoardUart {
            bytes: [0; 64],
            stamps: [0; 64],
            n: 0,
            i: 0,
        }
    }
}

impl Default for BoardUart {
    fn default() -> Self {
        Self::new()
    }
}

impl crate::uart::UartRx for BoardUart {
    fn next(&mut self) -> Option<(u8, u32)> {
        if self.i == self.n {
            // SAFETY: both buffers hold 64 entries; the C ring is single-producer (its callback)
            // / single-consumer (this task).
            let n =
                unsafe { fw_uart_rx_take(self.bytes.as_mut_ptr(), self.stamps.as_mut_ptr(), 64) };
            (self.n, self.i) = ((n as usize).min(64), 0);
            if self.n == 0 {
                return None;
            }
        }
        let r = (self.bytes[self.i], self.stamps[self.i]);
        self.i += 1;
        Some(r)
    }
}

/// Bytes the UART ring lost (it was full).
pub fn uart_overruns() -> u32 {
    // SAFETY: reads a counter.
    unsafe { fw_uart_rx_overruns() }
}

/// Bytes the UART received, uDMA reads completed, and the overruns the drone loop's first read
/// of the ring counted (what the start-up and the handshake cost; later ones lapped it mid-stream).
pub fn uart_stats() -> (u32, u32, u32) {
    let (mut received, mut reads, mut first) = (0, 0, 0);
    // SAFETY: three valid out-pointers; plain counter reads on the C side.
    unsafe { fw_uart_rx_stats(&mut received, &mut reads, &mut first) };
    (received, reads, first)
}

/// FC cycles the drone loop spent taking the UART's bytes (parse included), in all and up to the
/// end of its first read of the ring (the bytes the start-up and the handshake left there).
static UART_POLL_CYCLES: AtomicU32 = AtomicU32::new(0);
static UART_POLL_CYCLES_FIRST: AtomicU32 = AtomicU32::new(u32::MAX);

/// [`crate::uart::UartStateSource`] with the time the drone loop spends reading it counted: from
/// a read's first byte to its end (the parser's work on the bytes included).
pub struct TimedStateSource(
    crate::uart::UartStateSource<BoardUart, FcTimer>,
    Option<u32>,
);

impl gapstream_drone::state::StateSource for TimedStateSource {
    fn next_byte(&mut self) -> Option<(u8, u64)> {
        // SAFETY: reads a timer register.
        let start = *self.1.get_or_insert_with(|| unsafe { fw_timer_read() });
        let r = self.0.next_byte();
        if r.is_none() {
            self.1 = None;
            // SAFETY: reads a timer register.
            let dt = unsafe { fw_timer_read() }.wrapping_sub(start);
            // One task (the drone loop) writes both: plain loads and stores.
            let total = UART_POLL_CYCLES.load(Ordering::Relaxed).wrapping_add(dt);
            UART_POLL_CYCLES.store(total, Ordering::Relaxed);
            if UART_POLL_CYCLES_FIRST.load(Ordering::Relaxed) == u32::MAX {
                UART_POLL_CYCLES_FIRST.store(total, Ordering::Relaxed);
            }
        }
        r
    }
}

/// The UART's state source, on the heap. Not inlined: its 320-byte buffer would otherwise pass
/// through `gapstream_main`'s frame, which lasts the whole run on the main task's stack, under
/// the handshake's deep one.
#[inline(never)]
fn state_source(hz: u32) -> Box<dyn gapstream_drone::state::StateSource> {
    Box::new(TimedStateSource(
        crate::uart::UartStateSource::new(BoardUart::new(), WideClock::new(FcTimer { hz })),
        None,
    ))
}

/// The UART read planner of `firmware/src/board.c`'s receive callbacks.
struct UartPlanner(core::cell::UnsafeCell<crate::uart::ReadPlanner>);
// SAFETY: only `gapstream_uart_plan` touches it, and only board.c's UART receive callbacks call
// that, one at a time (the pmsis event kernel task runs them in turn).
unsafe impl Sync for UartPlanner {}
static UART_PLANNER: UartPlanner =
    UartPlanner(core::cell::UnsafeCell::new(crate::uart::ReadPlanner::new()));
// board.c's read buffers hold UART_READ_MAX (76) bytes and its first reads are one byte long.
const _: () = assert!(crate::uart::ReadPlanner::MAX_READ <= 76);
const _: () = assert!(crate::uart::ReadPlanner::FIRST_READ == 1);

/// The length of the UART's next uDMA read (`crate::uart::ReadPlanner::next`): called by the
/// receive callback of a read that completed with `len` bytes at `done`, while the read of
/// `in_flight` bytes queued after it runs.
///
/// # Safety
/// `done` points to `len` readable bytes; called only from board.c's UART receive callbacks,
/// which never run at the same time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapstream_uart_plan(done: *const u8, len: u32, in_flight: u32) -> u32 {
    // SAFETY: caller contract (the only caller, one at a time: no other reference exists).
    let planner = unsafe { &mut *UART_PLANNER.0.get() };
    // SAFETY: caller contract.
    let done = unsafe { core::slice::from_raw_parts(done, len as usize) };
    planner.next(done, in_flight as usize) as u32
}

/// The Himax on CPI 0 through `fw_cam_*`.
pub struct BoardCamera;

impl CameraHw for BoardCamera {
    unsafe fn start(&mut self, buf: *mut u8, len: usize) -> Result<(), CameraError> {
        let len = u32::try_from(len).map_err(|_| CameraError::Start)?;
        // SAFETY: the caller keeps `buf..buf+len` valid and untouched until `wait` returned.
        if unsafe { fw_cam_start(buf, len) } != 0 {
            return Err(CameraError::Start);
        }
        Ok(())
    }
    fn wait(&mut self) -> Result<(), CameraError> {
        // SAFETY: waits on the driver's task for the capture in flight (checked on the C side).
        if unsafe { fw_cam_wait() } != 0 {
            return Err(CameraError::NotStarted);
        }
        Ok(())
    }
    fn started_at(&self) -> u32 {
        // SAFETY: reads a variable the capture callback wrote.
        unsafe { fw_cam_started_at() }
    }
    fn done_at(&self) -> u32 {
        // SAFETY: as above.
        unsafe { fw_cam_done_at() }
    }
}

/// SPIM1 + the ready lines through `fw_spi_*` / `fw_*_rtt_*`.
pub struct BoardSpi;

impl SpiHw for BoardSpi {
    fn transfer(
        &mut self,
        tx: &[u8],
        rx: Option<&mut [u8]>,
        keep_cs: bool,
    ) -> Result<(), LinkError> {
        if tx.is_empty() || rx.as_ref().is_some_and(|r| r.len() != tx.len()) {
            return Err(LinkError::Spi);
        }
        let rx = rx.map_or(core::ptr::null_mut(), |r| r.as_mut_ptr());
        // SAFETY: `tx` (and `rx` when not null) are valid for `len` bytes (heap memory in L2,
        // reachable by the uDMA) and stay borrowed for the whole blocking transfer.
        let r = unsafe { fw_spi_transfer(tx.as_ptr(), rx, tx.len() as u32, keep_cs as i32) };
        if r != 0 { Err(LinkError::Spi) } else { Ok(()) }
    }
    fn set_gap_rtt(&mut self, high: bool) {
        // SAFETY: writes a GPIO.
        unsafe { fw_gap_rtt_set(high as i32) }
    }
    fn take_esp_edge(&mut self) -> bool {
        // SAFETY: takes a semaphore without blocking.
        unsafe { fw_esp_rtt_take() != 0 }
    }
    fn wait_esp_edge(&mut self, timeout_us: u32) -> bool {
        // SAFETY: blocks this FreeRTOS task on a semaphore with a timeout.
        unsafe { fw_esp_rtt_wait(timeout_us) != 0 }
    }
    fn stamp(&self) -> u32 {
        // SAFETY: reads a timer register.
        unsafe { fw_timer_read() }
    }
}

/// The link task's wake-ups: FreeRTOS semaphores in board.c.
pub struct BoardSignals;

impl Signals for BoardSignals {
    fn kick(&self) {
        // SAFETY: gives a semaphore.
        unsafe { fw_link_kick() }
    }
    fn idle(&self, timeout_us: u32) {
        // SAFETY: takes a semaphore with a timeout (link task).
        unsafe { fw_link_idle(timeout_us) }
    }
    fn freed(&self) {
        // SAFETY: gives a semaphore.
        unsafe { fw_link_freed() }
    }
    fn wait_freed(&self, timeout_us: u32) {
        // SAFETY: takes a semaphore with a timeout (main task).
        unsafe { fw_link_wait_freed(timeout_us) }
    }
    fn arrived(&self) {
        // SAFETY: gives a semaphore.
        unsafe { fw_link_arrived() }
    }
    fn wait_arrived(&self, timeout_us: u32) {
        // SAFETY: takes a semaphore with a timeout (main task).
        unsafe { fw_link_wait_arrived(timeout_us) }
    }
}

// SAFETY: the semaphores are FreeRTOS objects usable from any task.
unsafe impl Sync for BoardSignals {}

type BoardShared = Shared<BoardSpi, BoardSignals>;

unsafe extern "C" fn link_task(arg: *mut core::ffi::c_void) {
    // SAFETY: `arg` is the leaked `BoardShared` that `gapstream_main` passed; it lives forever.
    let sh = unsafe { &*(arg as *const BoardShared) };
    queue::run(sh);
}

/// Runs the per-frame step on the FC-TCDM stack (`fw_run_on_fast_stack`).
pub struct FastStack;

unsafe extern "C" fn run_dyn(arg: *mut core::ffi::c_void) {
    // SAFETY: `arg` is the `&mut &mut dyn FnMut()` that `FastStack::run` keeps alive on its own
    // stack until `fw_run_on_fast_stack` returned (the call is synchronous).
    let f = unsafe { &mut *(arg as *mut &mut dyn FnMut()) };
    f();
}

impl app::StepRunner for FastStack {
    fn run(&mut self, f: &mut dyn FnMut()) {
        let mut f = f;
        // SAFETY: `run_dyn` only calls the closure behind `arg`, which outlives the call.
        unsafe { fw_run_on_fast_stack(run_dyn, (&raw mut f).cast()) }
    }
}

// --- entry point ----------------------------------------------------------------------------------

fn embedded_pairing() -> &'static [u8] {
    // SAFETY: `keys.S` defines `gapstream_pairing_text` as `gapstream_pairing_len` bytes of
    // read-only data that live for the whole program.
    unsafe {
        core::slice::from_raw_parts(
            &raw const gapstream_pairing_text,
            gapstream_pairing_len as usize,
        )
    }
}

fn fail(what: &str, code: i32) -> i32 {
    let _ = writeln!(Console, "FW error: {what}");
    code
}

/// Runs the firmware; returns the exit status (0: all frames sent).
///
/// # Safety
/// `cfg` points to a valid [`FwConfig`]; called once, from the application's FreeRTOS task, after
/// the SDK is up (`pmsis_kickoff`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gapstream_main(cfg: *const FwConfig) -> i32 {
    // SAFETY: caller contract.
    let cfg = unsafe { *cfg };
    let mut out = Console;
    let _ = writeln!(
        out,
        "FW start frames={} frame_drop={} spi_down_hz={} spi_up_hz={} link_slots={} pipeline={} cores={} l1_buffer={} packet={} stock={} fc_hz={} cl_hz={}",
        cfg.frames,
        cfg.frame_drop,
        cfg.spi_down_hz,
        cfg.spi_up_hz,
        cfg.link_slots,
        cfg.pipeline,
        cfg.cores,
        cfg.l1_buffer,
        cfg.packet_payload,
        cfg.stock,
        cfg.fc_hz,
        cfg.cl_hz
    );

    // The key establishment this build answers (firmware/Makefile KEX=...).
    let _ = write!(out, "FW kex modes=");
    let modes = gapstream_protocol::handshake::RESPONDER_MODES;
    let built = gapstream_protocol::suite::KexMode::ALL
        .into_iter()
        .filter(|m| modes.contains(*m));
    for (i, m) in built.enumerate() {
        let _ = write!(out, "{}{}", if i == 0 { "" } else { "," }, m.name());
    }
    let _ = writeln!(out);
    heap_line(&mut out, "at start");
    // Entropy: device seed and SRAM power-up state first (before the heap reaches that memory).
    let pool = Rc::new(RefCell::new(EntropyPool::new()));
    {
        let mut p = pool.borrow_mut();
        // SAFETY: 32 bytes of read-only data from keys.S.
        p.absorb(Source::DeviceSeed, unsafe { &gapstream_device_seed });
        let mut sram = [0u8; 2048];
        // SAFETY: `sram` is a valid 2 KiB buffer.
        let n = unsafe { fw_noise_uninit(sram.as_mut_ptr(), sram.len()) };
        p.absorb(Source::PowerUpSram, &sram[..n]);
    }

    let mode = if cfg.stock != 0 {
        Mode::StockPlaintext
    } else {
        let identity = match keys::drone_identity(embedded_pairing()) {
            Ok(id) => id,
            Err(e) => {
                let _ = writeln!(out, "FW error: {e}");
                return 2;
            }
        };
        // The boot counter (HyperFlash): no stored advance, no stream. It keeps every boot's
        // handshakes apart even when the entropy sources repeat (GVSOC: every run).
        let boot = match crate::bootflash::PmsisFlash::open()
            .map_err(BootCounterError::Flash)
            .and_then(|f| Boot::advance(&mut FlashBootCounter::new(f)))
        {
            Ok(b) => b,
            Err(e) => {
                let _ = writeln!(out, "FW error: {e}");
                return 11;
            }
        };
        let _ = writeln!(out, "FW boot counter {}", boot.value());
        {
            let mut input = [0u8; 8];
            input[..4].copy_from_slice(b"boot");
            input[4..].copy_from_slice(&boot.value().to_le_bytes());
            // Credited nothing, like the device seed: it keeps the pools of two boots apart.
            pool.borrow_mut().absorb(Source::DeviceSeed, &input);
        }
        // The default policy: authenticated suites only, every key-establishment mode.
        let session = session::DroneConfig::default();
        Mode::Secure(Box::new(SecureConfig {
            identity,
            session,
            boot,
        }))
    };

    // SAFETY: allocates and paints the stack (C side).
    let fast = cfg.fast_stack != 0 && unsafe { fw_fast_stack_init(cfg.fast_stack) } == 0;
    if cfg.fast_stack != 0 && !fast {
        let _ = writeln!(
            out,
            "FW no {} bytes of FC TCDM for the per-frame stack: using the task stack",
            cfg.fast_stack
        );
    }
    // SAFETY: FLL / PMU driver call, before any peripheral is opened.
    if unsafe { fw_set_fc_hz(cfg.fc_hz) } != 0 {
        return fail("could not set the FC clock", 9);
    }
    let _ = writeln!(out, "FW opening the camera, the SPI link and the cluster");
    // SAFETY: plain driver calls (C side: board.c).
    if unsafe { fw_cam_open(cfg.frame_drop) } != 0 {
        return fail("camera open failed", 3);
    }
    // SAFETY: as above.
    let link_status = unsafe { fw_link_open(cfg.spi_up_hz, cfg.spi_down_hz) };
    if link_status != 0 {
        return fail("SPI link open failed", 4);
    }
    // SAFETY: pure computations on the FLL frequency.
    let (up_hz, down_hz) = unsafe {
        (
            fw_spi_actual_hz(cfg.spi_up_hz),
            fw_spi_actual_hz(cfg.spi_down_hz),
        )
    };
    let _ = writeln!(
        out,
        "FW spi spi_up_hz={up_hz} spi_down_hz={down_hz} asked_up_hz={} asked_down_hz={} (MISO is read only at the upstream clock)",
        cfg.spi_up_hz, cfg.spi_down_hz
    );
    if up_hz > 7_200_000 {
        let _ = writeln!(
            out,
            "FW warning: the upstream SPI clock {up_hz} Hz is above the AI-deck's 7.2 MHz MISO limit: what the ESP32 sends arrives corrupted on a real deck"
        );
    }
    // After the camera is open: its driver used FC timer 1 for delays while opening.
    // SAFETY: configures FC timer 1.
    unsafe { fw_timer_start() };
    // SAFETY: reads the FLL frequency.
    let hz = unsafe { fw_fc_hz() };
    let clock = WideClock::new(FcTimer { hz });

    // Cluster stacks (`pcfg_used`): 4 KiB + 7 x 3 KiB, allocated by the SDK at each offload next
    // to the engine's 3 x L1_BUFFER (checked below, once the coder holds its own L1).
    let pcfg = pcfg_used();
    let cluster = match PmsisCluster::open(pcfg) {
        Ok(c) => c,
        Err(_) => return fail("cluster open failed", 5),
    };
    // Open for the whole run: the cipher engine and the frame coder (which the drone holds as a
    // `'static` box) both borrow it.
    let cluster: &'static PmsisCluster = Box::leak(Box::new(cluster));
    // SAFETY: FLL driver call, the cluster is on.
    if unsafe { fw_set_cl_hz(cfg.cl_hz) } != 0 {
        return fail("could not set the cluster clock", 10);
    }
    let engine_cfg = EngineConfig::new(
        cfg.cores.clamp(1, 8) as usize,
        cfg.l1_buffer.max(64) as usize,
    );
    let engine = match ClusterEngine::new(cluster, engine_cfg) {
        Ok(e) => e,
        Err(_) => return fail("cluster engine: no L1 for its buffers", 6),
    };

    let _ = writeln!(
        out,
        "FW ready: FC {hz} Hz, cluster {} Hz, waiting for a receiver's handshake ({} warm-up captures first)",
        // SAFETY: reads the FLL frequency.
        unsafe { fw_cl_hz() },
        app_cfg_warmup()
    );
    let mut engine = engine;
    heap_line(&mut out, "before self-test");
    if let Err(e) = engine_self_test(&mut engine, &clock, &mut out) {
        return fail(e, 8);
    }
    heap_line(&mut out, "after self-test");
    let padding = match cfg.padding {
        0 => Padding::Off,
        1 => Padding::Padme,
        2 => Padding::Pow2,
        3 => Padding::Max,
        _ => return fail("PAD: use off, padme, pow2 or max", 13),
    };
    let buffer = CodedBuffer {
        bytes: cfg.coded_bytes as usize,
        padding,
        raw: FrameFormat::HM01B0.bytes(),
    };
    if cfg.codec != 0 && buffer.code_limit() == 0 {
        return fail(
            "CODED_BYTES: no coded frame fits that buffer with its padding (PAD=max pads to the raw frame's length)",
            13,
        );
    }
    let coder = match cfg.codec {
        0 => None,
        #[cfg(feature = "codec-jpeg")]
        1 => match jpeg_coder(cluster, &cfg, buffer, &mut out) {
            Some(c) => Some(c),
            None => return fail("JPEG encoder: bad quality or no L1 for its buffers", 12),
        },
        #[cfg(feature = "codec-jpegls")]
        2 => match jpegls_coder(cluster, &cfg, buffer, &mut out) {
            Some(c) => Some(c),
            None => return fail("JPEG-LS encoder: bad core count", 12),
        },
        _ => {
            return fail(
                "CODEC: this build has no such coder (firmware/Makefile CODEC=raw, jpeg or jpegls)",
                12,
            );
        }
    };
    if cfg.codec != 0 {
        let _ = writeln!(
            out,
            "FW padding {} (coded frames padded inside the AEAD; code limit {} of {} bytes)",
            padding.name(),
            buffer.code_limit(),
            buffer.bytes
        );
    }
    // The SDK allocates the cluster's stacks (core 0's and 7 workers') from L1 at every offload
    // and frees them when it ends (`__pi_send_task_to_cl` in the SDK's FreeRTOS cluster driver,
    // fc_to_cl_delegate.c): what the engine and the coder keep must leave that much free, and a
    // JPEG-LS frame job's own L1 next to it. Without this check an offload that cannot get its
    // stacks fails (`pi_cluster_send_task_to_cl` returns -1): the handshake's AEAD never ran and
    // the firmware waited for a receiver that could not complete (seen with the JPEG encoder and
    // an 8 KiB engine buffer).
    let stacks = pcfg_stacks(&pcfg_used()) as usize;
    #[cfg(feature = "codec-jpegls")]
    let job_l1 = if cfg.codec == 2 {
        crate::coder::jpegls_l1_bytes(cfg.cores.clamp(1, 8) as usize, FrameFormat::HM01B0)
    } else {
        0
    };
    #[cfg(not(feature = "codec-jpegls"))]
    let job_l1 = 0usize;
    match gap_rust_sdk::Cluster::l1(cluster).alloc_zeroed(stacks + job_l1, 4) {
        Ok(probe) => {
            drop(probe);
            let _ = writeln!(
                out,
                "FW L1 ok: {} bytes free for an offload's stacks ({stacks}) and a frame job ({job_l1})",
                stacks + job_l1
            );
        }
        Err(_) => {
            let _ = writeln!(
                out,
                "FW L1: no {} bytes left for an offload's stacks ({stacks}) and a frame job ({job_l1}) next to the engine (L1_BUFFER={}) and the coder",
                stacks + job_l1,
                cfg.l1_buffer
            );
            return fail("L1 too small for the cluster stacks: lower L1_BUFFER", 14);
        }
    }
    let camera = HimaxCamera::new(BoardCamera, &clock, FrameFormat::HM01B0, Some(pool.clone()));
    let dcfg = DroneConfig {
        mode,
        packet_payload: cfg.packet_payload.clamp(1, 1020) as usize,
    };
    let app_cfg = AppConfig {
        frames: cfg.frames,
        handshake_timeout_ns: cfg.handshake_timeout_ms as u64 * 1_000_000,
        poll_us: 2_000,
        per_frame_lines: true,
        warmup_captures: app_cfg_warmup(),
    };
    let entropy = PoolEntropy(pool.clone());
    let hz64 = hz as u64;
    let camera = Staged::new(camera, cfg.pipeline != 0);
    let link = if cfg.link_slots == 0 {
        // The drone loop runs the link itself: a frame's send follows its seal.
        FwLink::Direct(CpxSpiLink::new(BoardSpi, 200_000, Some(pool.clone())))
    } else {
        // The link task sends the queued packets while the drone loop seals the next frame. The
        // link task does not touch the entropy pool (the drone loop's RefCell): its ready-line
        // timing enters the pool through the drone loop's end (`QueuedLink` stamps arrivals).
        let link = CpxSpiLink::new(BoardSpi, 200_000, None);
        let sh: &'static BoardShared = alloc::boxed::Box::leak(Box::new(Shared::new(
            link,
            cfg.link_slots as usize,
            BoardSignals,
        )));
        // SAFETY: `sh` lives forever; the task only uses it through `queue::run`.
        if unsafe {
            fw_link_task_start(
                link_task,
                (sh as *const BoardShared).cast_mut().cast(),
                4096,
            )
        } != 0
        {
            return fail("could not start the link task", 11);
        }
        let mut qlink = QueuedLink::new(sh);
        qlink.timing = Some((pool.clone(), read_timer));
        FwLink::Queued(qlink, sh)
    };
    // The flight controller's state on the deck's UART (docs/hardware.md §10): every frame's
    // header carries the record of its exposure end. The stock stream has no room for it.
    let state = if cfg.state_baud == 0 || cfg.stock != 0 {
        let _ = writeln!(out, "FW state off (STATE_BAUD=0 or the stock stream)");
        None
    } else if unsafe {
        // SAFETY: plain driver call (C side: board.c); the console's UART is already open.
        fw_uart_rx_open(cfg.state_baud)
    } != 0
    {
        let _ = writeln!(
            out,
            "FW state off: the UART from the STM32 did not open at {} baud",
            cfg.state_baud
        );
        None
    } else {
        let _ = writeln!(
            out,
            "FW state uart_baud={} max_age_ms={}",
            cfg.state_baud, cfg.state_max_age_ms
        );
        Some((
            state_source(hz),
            gapstream_drone::state::StateConfig {
                max_age_ns: cfg.state_max_age_ms as u64 * 1_000_000,
                ..Default::default()
            },
        ))
    };
    let r = drive(
        camera, link, &clock, entropy, engine, coder, padding, dcfg, hz64, app_cfg, state, &mut out,
    );
    heap_line(&mut out, "at the end");
    if fast {
        // SAFETY: reads the painted stack (C side).
        let (used, size) = unsafe { (fw_fast_stack_used(), fw_fast_stack_size()) };
        let _ = writeln!(
            out,
            "FW per-frame stack in FC TCDM: {used} of {size} bytes used"
        );
    }
    let ps = pool.borrow().stats();
    let _ = writeln!(
        out,
        "FW entropy credited_bits={} inputs={} outputs={} stuck_sources={:#x}",
        ps.credited_bits, ps.inputs, ps.outputs, ps.stuck_sources
    );
    match r {
        Ok(()) => 0,
        Err(e) => fail(&e, 7),
    }
}

/// The cluster's stacks: the engine's per-core frame is ~1.4 KiB before the kernel's own; the SDK
/// default of 2 KiB per worker overflowed into the neighbour's stack (seen on GVSOC: a worker
/// returned to a corrupted `ra`).
fn pcfg_used() -> PmsisConfig {
    PmsisConfig {
        master_stack: 4096,
        slave_stack: 3072,
        ..PmsisConfig::default()
    }
}

/// L1 bytes the SDK allocates for an offload's stacks (core 0 and 7 workers).
fn pcfg_stacks(p: &PmsisConfig) -> u32 {
    p.master_stack + 7 * p.slave_stack
}

fn read_timer() -> u32 {
    // SAFETY: reads a timer register.
    unsafe { fw_timer_read() }
}

/// Builds the drone over `camera` and `link`, runs the loop, then reports the link.
#[allow(clippy::too_many_arguments)]
fn drive(
    camera: Staged<BoardHimax<'_>>,
    link: FwLink,
    clock: &WideClock<FcTimer>,
    entropy: PoolEntropy,
    engine: ClusterEngine<'_, PmsisCluster>,
    coder: Option<Box<dyn FrameCoder + Send>>,
    padding: Padding,
    dcfg: DroneConfig,
    hz: u64,
    app_cfg: AppConfig,
    state: Option<(
        Box<dyn gapstream_drone::state::StateSource>,
        gapstream_drone::state::StateConfig,
    )>,
    out: &mut Console,
) -> Result<(), alloc::string::String> {
    match Drone::new(camera, link, clock, entropy, engine, dcfg) {
        Ok(mut d) => {
            d.set_coder(coder);
            d.set_padding(padding);
            if let Some((src, scfg)) = state {
                d.set_state_source(src, scfg);
            }
            let r = app::run(&mut d, clock, hz, app_cfg, &mut FastStack, out).map(|_| ());
            if let Some(t) = d.state_tracker() {
                let c = t.counters();
                let (received, reads, overruns_first) = uart_stats();
                let _ = writeln!(
                    out,
                    "FW state bytes={} states={} others={} bad_crc={} skipped={} overruns={} received={} uart_reads={} overruns_before_stream={} poll_cycles={} poll_cycles_first={}",
                    c.bytes,
                    c.states,
                    c.others,
                    c.bad_crc,
                    c.skipped,
                    uart_overruns(),
                    received,
                    reads,
                    overruns_first,
                    UART_POLL_CYCLES.load(Ordering::Relaxed),
                    UART_POLL_CYCLES_FIRST.load(Ordering::Relaxed)
                );
            }
            d.link_mut().finish(out);
            r.map_err(|e| alloc::format!("{e}"))
        }
        Err(e) => Err(alloc::format!("{e}")),
    }
}

/// The cluster JPEG coder in its box. Not inlined: the encoder (its tables and header, ~2.7 KB)
/// passes through this function's frame, which is gone before the handshake's deep stack, not
/// through `gapstream_main`'s, which lasts the whole run on the main task's stack.
#[cfg(feature = "codec-jpeg")]
#[inline(never)]
fn jpeg_coder(
    cluster: &'static PmsisCluster,
    cfg: &FwConfig,
    buffer: CodedBuffer,
    out: &mut Console,
) -> Option<Box<dyn FrameCoder + Send>> {
    let cores = cfg.cores.clamp(1, 8) as usize;
    let c = JpegCoder::new(cluster, cores, cfg.quality as u8, buffer).ok()?;
    let _ = writeln!(
        out,
        "FW codec jpeg quality={} bands={cores} l1_bytes={} coded_buffer={}",
        cfg.quality,
        c.l1_bytes(),
        cfg.coded_bytes
    );
    Some(Box::new(OnThisTask(c)))
}

/// The cluster JPEG-LS coder in its box (its L1 is taken by each frame's job).
#[cfg(feature = "codec-jpegls")]
#[inline(never)]
fn jpegls_coder(
    cluster: &'static PmsisCluster,
    cfg: &FwConfig,
    buffer: CodedBuffer,
    out: &mut Console,
) -> Option<Box<dyn FrameCoder + Send>> {
    let cores = cfg.cores.clamp(1, 8) as usize;
    let c = JplsCoder::new(cluster, cores, buffer).ok()?;
    let _ = writeln!(
        out,
        "FW codec jpegls bands={cores} l1_bytes={} coded_buffer={}",
        c.l1_bytes(FrameFormat::HM01B0),
        cfg.coded_bytes
    );
    Some(Box::new(OnThisTask(c)))
}

/// The frame coder on the cluster, which the drone keeps as a `Send` box. `PmsisCluster` is not
/// `Send`: the SDK's cluster device is driven from one FC task.
#[cfg(any(feature = "codec-jpeg", feature = "codec-jpegls"))]
struct OnThisTask<F: FrameCoder>(F);

// SAFETY: the coder is made, used and dropped on the firmware's main FreeRTOS task only (the drone
// that holds it never leaves `gapstream_main`'s task; the link task only gets packets), so the
// cluster it drives is only ever driven from that task.
#[cfg(any(feature = "codec-jpeg", feature = "codec-jpegls"))]
unsafe impl<F: FrameCoder> Send for OnThisTask<F> {}

#[cfg(any(feature = "codec-jpeg", feature = "codec-jpegls"))]
impl<F: FrameCoder> FrameCoder for OnThisTask<F> {
    fn code(
        &mut self,
        format: FrameFormat,
        frame: &[u8],
        out: &mut alloc::vec::Vec<u8>,
    ) -> Result<Option<gapstream_drone::PixelFormat>, gapstream_drone::CoderError> {
        self.0.code(format, frame, out)
    }
    fn set_quality(&mut self, quality: u8) {
        self.0.set_quality(quality);
    }
}

type BoardHimax<'k> = HimaxCamera<'k, BoardCamera, FcTimer>;

/// The link as configured at run time: the drone loop sends itself, or a link task sends what
/// the loop queued. An enum, not a type parameter: one copy of the drone loop in L2.
enum FwLink {
    Direct(CpxSpiLink<BoardSpi>),
    Queued(
        QueuedLink<'static, BoardSpi, BoardSignals>,
        &'static BoardShared,
    ),
}

impl FwLink {
    /// Flushes a link task and prints the link's figures.
    fn finish(&mut self, out: &mut Console) {
        match self {
            FwLink::Direct(l) => report_link(out, l.stats()),
            FwLink::Queued(l, sh) => {
                let flushed = l.flush(2_000_000);
                let hw = l.high_water;
                let stats = l.stop(1_000_000);
                let _ = writeln!(
                    out,
                    "FW link task ring={} slots, high water {} {}",
                    sh.capacity(),
                    hw,
                    if flushed.is_ok() {
                        "(flushed)"
                    } else {
                        "(not flushed)"
                    }
                );
                report_link(out, stats);
            }
        }
    }
}

impl gapstream_drone::Link for FwLink {
    type Error = LinkError;
    fn send(&mut self, packets: &[u8]) -> Result<(), LinkError> {
        match self {
            FwLink::Direct(l) => l.send(packets),
            FwLink::Queued(l, _) => l.send(packets),
        }
    }
    fn poll_recv(&mut self, buf: &mut [u8]) -> Result<usize, LinkError> {
        match self {
            FwLink::Direct(l) => l.poll_recv(buf),
            FwLink::Queued(l, _) => l.poll_recv(buf),
        }
    }
}

impl WaitUpstream for FwLink {
    fn wait_upstream_us(&mut self, timeout_us: u32) -> bool {
        match self {
            FwLink::Direct(l) => l.wait_upstream_us(timeout_us),
            FwLink::Queued(l, _) => l.wait_upstream_us(timeout_us),
        }
    }
    fn defer_upstream(&mut self, on: bool) {
        match self {
            FwLink::Direct(l) => l.defer_upstream(on),
            FwLink::Queued(l, _) => l.defer_upstream(on),
        }
    }
    fn link_send_cycles(&self) -> Option<u64> {
        match self {
            FwLink::Direct(l) => l.link_send_cycles(),
            FwLink::Queued(l, _) => l.link_send_cycles(),
        }
    }
}

/// Known-answer check of the cluster path before streaming: ChaCha20 over 16 KiB (a length that
/// is not a multiple of the round or the core count) on the cluster engine must equal the FC's
/// sequential kernel byte for byte.
fn engine_self_test<C: gap_rust_sdk::Cluster>(
    engine: &mut ClusterEngine<'_, C>,
    clock: &WideClock<FcTimer>,
    out: &mut Console,
) -> Result<(), &'static str> {
    use gap_rust_cipher_s::{CipherId, KeystreamApplier, Sequential};
    let len = 16 * 1024 + 37;
    let mut a: alloc::vec::Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let mut b = a.clone();
    let key = [0x42u8; 32];
    let nonce = [7u8; 12];
    let t0 = clock.cycles();
    engine
        .apply_keystream(CipherId::ChaCha20, &key, &nonce, 64, &mut a)
        .map_err(|_| "cluster engine self-test: the engine failed")?;
    let t1 = clock.cycles();
    Sequential
        .apply_keystream(CipherId::ChaCha20, &key, &nonce, 64, &mut b)
        .map_err(|_| "cluster engine self-test: the FC kernel failed")?;
    let t2 = clock.cycles();
    let _ = writeln!(
        out,
        "FW engine self-test bytes={len} cluster_cycles={} fc_cycles={} {}",
        t1 - t0,
        t2 - t1,
        if a == b { "ok" } else { "FAIL" }
    );
    if a != b {
        return Err("cluster engine self-test: output differs from the FC kernel");
    }
    // The cluster's share of sealing one frame (ChaCha20 over 324 x 244 bytes in L2).
    let mut frame = alloc::vec![0x5Au8; FrameFormat::HM01B0.bytes()];
    let t0 = clock.cycles();
    engine
        .apply_keystream(CipherId::ChaCha20, &key, &nonce, 64, &mut frame)
        .map_err(|_| "cluster engine: a frame failed")?;
    let t1 = clock.cycles();
    // The whole seal of one frame: Poly1305 key and ChaCha20 on the cluster, the MAC on the FC.
    let pk = gapstream_protocol::aead::PayloadKey::new(
        engine,
        gapstream_protocol::suite::Suite::ChaCha20Poly1305,
        &key,
    )
    .map_err(|_| "payload key")?;
    let hdr = [0u8; 48];
    pk.seal(engine, &nonce, &hdr, &mut frame)
        .map_err(|_| "seal")?;
    let t2 = clock.cycles();
    let _ = writeln!(
        out,
        "FW engine frame bytes={} cluster_chacha_cycles={} seal_chacha20poly1305_cycles={} fc_stack_at={:p}",
        frame.len(),
        t1 - t0,
        t2 - t1,
        &t2
    );
    Ok(())
}

const fn app_cfg_warmup() -> u32 {
    2
}

fn report_link(out: &mut Console, s: crate::link::LinkStats) {
    let _ = writeln!(
        out,
        "FW link transactions={} packets_sent={} packets_received={} bytes_clocked={} bad_rx_lengths={} rx_dropped={} timeouts={} wait_cycles={} transfer_cycles={}",
        s.transactions,
        s.packets_sent,
        s.packets_received,
        s.bytes_clocked,
        s.bad_rx_lengths,
        s.rx_dropped,
        s.timeouts,
        s.wait_cycles,
        s.transfer_cycles
    );
}
