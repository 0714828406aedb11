//! `gapstream_drone::Camera` for the AI-deck's Himax HM01B0: captures by uDMA (CPI) into a buffer
//! the camera holds by value while the transfer runs, so the drone seals and sends the other
//! buffer meanwhile (double buffering). "The paper" below: F. Barchi et al., "RUST-Encoded Stream
//! Ciphers on a RISC-V Parallel Ultra-Low-Power Processor", PARMA-DITAM 2023.
//!
//! | type | what |
//! |---|---|
//! | [`CameraHw`] | what the board provides: start a capture into raw memory, wait, the timer values at start and completion |
//! | [`HimaxCamera`] | the `Camera`: buffer ownership, size checks, timestamps, per-capture timing, pixel noise and timing into the entropy pool |
//! | [`OneShot`] | a wrapper that makes any `Camera` capture only when the frame is asked for (no overlap): the sequential baseline the paper measured |

use alloc::vec::Vec;

use gapstream_drone::{Camera, Capture, FrameFormat};

use crate::clock::{Counter32, WideClock};
use crate::entropy::SharedPool;

/// The capture hardware (GAP8: `fw_cam_*` in firmware/src/board.c).
pub trait CameraHw {
    /// Starts a capture of `len` bytes into `buf` in the background.
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid, unmoved and otherwise untouched until [`CameraHw::wait`]
    /// returned for this capture.
    unsafe fn start(&mut self, buf: *mut u8, len: usize) -> Result<(), CameraError>;
    /// Waits until the capture started last is complete.
    fn wait(&mut self) -> Result<(), CameraError>;
    /// Raw timer values (the clock's counter) when the last capture started / completed.
    fn started_at(&self) -> u32;
    fn done_at(&self) -> u32;
}

/// Why a capture failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CameraError {
    /// The driver refused to start (already busy, not open).
    Start,
    /// No capture in flight to wait for.
    NotStarted,
    /// A buffer of the wrong size.
    BufferSize { expected: usize, got: usize },
    /// `start` while a capture is in flight.
    Busy,
}

impl core::fmt::Display for CameraError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CameraError::Start => f.write_str("the camera driver refused to start a capture"),
            CameraError::NotStarted => f.write_str("no capture in flight"),
            CameraError::BufferSize { expected, got } => {
                write!(
                    f,
                    "frame buffer of {got} bytes, the camera needs {expected}"
                )
            }
            CameraError::Busy => f.write_str("a capture is already in flight"),
        }
    }
}

/// Timing of the captures, in counter cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureTiming {
    pub captures: u64,
    /// Sum over captures of (completion - start): the capture stage.
    pub capture_cycles: u64,
    /// Completion time of the last capture (64-bit cycles).
    pub last_done: u64,
}

/// Pixels sampled for the entropy pool: every 16th (about 4,900 per 324x244 frame).
pub const NOISE_STRIDE: usize = 16;

/// The camera.
pub struct HimaxCamera<'k, H: CameraHw, T: Counter32> {
    hw: H,
    clock: &'k WideClock<T>,
    format: FrameFormat,
    in_flight: Option<Vec<u8>>,
    pool: Option<SharedPool>,
    timing: CaptureTiming,
}

impl<'k, H: CameraHw, T: Counter32> HimaxCamera<'k, H, T> {
    pub fn new(
        hw: H,
        clock: &'k WideClock<T>,
        format: FrameFormat,
        pool: Option<SharedPool>,
    ) -> Self {
        HimaxCamera {
            hw,
            clock,
            format,
            in_flight: None,
            pool,
            timing: CaptureTiming::default(),
        }
    }

    pub fn timing(&self) -> CaptureTiming {
        self.timing
    }

    pub fn hw(&self) -> &H {
        &self.hw
    }
}

impl<H: CameraHw, T: Counter32> Camera for HimaxCamera<'_, H, T> {
    type Error = CameraError;

    fn format(&self) -> FrameFormat {
        self.format
    }

    fn start(&mut self, mut buf: Vec<u8>) -> Result<(), CameraError> {
        if self.in_flight.is_some() {
            return Err(CameraError::Busy);
        }
        let expected = self.format.bytes();
        if buf.len() != expected {
            return Err(CameraError::BufferSize {
                expected,
                got: buf.len(),
            });
        }
        // SAFETY: the Vec's heap block stays where it is when the Vec is moved into `in_flight`,
        // and nothing reads, writes, resizes or frees it until `wait` has returned (the only way
        // to get the Vec back out, except `Drop`, which waits first).
        unsafe { self.hw.start(buf.as_mut_ptr(), expected)? };
        self.in_flight = Some(buf);
        Ok(())
    }

    fn wait(&mut self) -> Result<Capture, CameraError> {
        if self.in_flight.is_none() {
            return Err(CameraError::NotStarted);
        }
        self.hw.wait()?;
        let buf = self.in_flight.take().ok_or(CameraError::NotStarted)?;
        let (start, done) = (self.hw.started_at(), self.hw.done_at());
        let done64 = self.clock.extend(done);
        self.timing.captures += 1;
        self.timing.capture_cycles += done.wrapping_sub(start) as u64;
        self.timing.last_done = done64;
        if let Some(p) = &self.pool {
            let mut p = p.borrow_mut();
            p.absorb_timing(done);
            p.absorb_pixel_lsbs(&buf, NOISE_STRIDE);
        }
        Ok(Capture {
            buf,
            capture_ns: self.clock.cycles_to_ns(done64),
        })
    }
}

impl<H: CameraHw, T: Counter32> Drop for HimaxCamera<'_, H, T> {
    fn drop(&mut self) {
        // The DMA must not write into a freed buffer. If waiting fails, the transfer may still be
        // running: the block is leaked (one frame buffer, once) rather than freed and reused
        // while the uDMA writes into it.
        if self.in_flight.is_some() && self.hw.wait().is_err() {
            core::mem::forget(self.in_flight.take());
        }
    }
}

/// Any camera, but capturing only when [`Camera::wait`] asks for the frame: the stages then run
/// one after the other (capture, seal, send), as in the paper's measurement. For comparison runs.
pub struct OneShot<C: Camera> {
    inner: C,
    pending: Option<Vec<u8>>,
}

impl<C: Camera> OneShot<C> {
    pub fn new(inner: C) -> Self {
        OneShot {
            inner,
            pending: None,
        }
    }
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<C: Camera> Camera for OneShot<C> {
    type Error = C::Error;
    fn format(&self) -> FrameFormat {
        self.inner.format()
    }
    fn start(&mut self, buf: Vec<u8>) -> Result<(), C::Error> {
        self.pending = Some(buf);
        Ok(())
    }
    fn wait(&mut self) -> Result<Capture, C::Error> {
        let buf = self
            .pending
            .take()
            .unwrap_or_else(|| alloc::vec![0u8; self.inner.format().bytes()]);
        self.inner.start(buf)?;
        self.inner.wait()
    }
    /// Captures only inside `wait`: the drone keeps one frame buffer.
    fn captures_ahead(&self) -> bool {
        false
    }
}

/// A camera that captures ahead ([`Pipelined`](Staged::Pipelined)) or only when asked
/// ([`OneShot`]), chosen at run time: the firmware then carries one copy of the code that drives
/// it instead of one per mode (each copy is ~9 KB of L2, which the frame buffers need).
pub enum Staged<C: Camera> {
    Pipelined(C),
    OneShot(OneShot<C>),
}

impl<C: Camera> Staged<C> {
    pub fn new(camera: C, pipelined: bool) -> Self {
        if pipelined {
            Staged::Pipelined(camera)
        } else {
            Staged::OneShot(OneShot::new(camera))
        }
    }
    pub fn inner(&self) -> &C {
        match self {
            Staged::Pipelined(c) => c,
            Staged::OneShot(c) => c.inner(),
        }
    }
}

impl<C: Camera> Camera for Staged<C> {
    type Error = C::Error;
    fn format(&self) -> FrameFormat {
        self.inner().format()
    }
    fn start(&mut self, buf: Vec<u8>) -> Result<(), C::Error> {
        match self {
            Staged::Pipelined(c) => c.start(buf),
            Staged::OneShot(c) => c.start(buf),
        }
    }
    fn wait(&mut self) -> Result<Capture, C::Error> {
        match self {
            Staged::Pipelined(c) => c.wait(),
            Staged::OneShot(c) => c.wait(),
        }
    }
    fn captures_ahead(&self) -> bool {
        match self {
            Staged::Pipelined(c) => c.captures_ahead(),
            Staged::OneShot(c) => c.captures_ahead(),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::clock::tests::FakeCounter;
    use crate::entropy::EntropyPool;
    use core::cell::{Cell, RefCell};
    use gapstream_drone::PixelFormat;
    use std::rc::Rc;

    /// Pixel `i` of fake frame `frame`: a ramp plus hash noise in the low bits (like sensor noise).
    pub fn fake_pixel(frame: u8, i: usize) -> u8 {
        let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ frame as u64;
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 32;
        frame.wrapping_add(i as u8) ^ (x as u8 & 3)
    }

    /// A capture engine that "DMAs" frame `n` ([`fake_pixel`]) into the raw pointer at `wait`,
    /// advancing the fake counter by `cycles` per capture, and records the pointers it wrote to.
    pub struct FakeHw {
        pub counter: Rc<Cell<u32>>,
        pub cycles: u32,
        pub frame: u8,
        pub target: Option<(*mut u8, usize)>,
        pub started: u32,
        pub done: u32,
        pub pointers: Vec<usize>,
    }

    impl FakeHw {
        pub fn new(counter: Rc<Cell<u32>>, cycles: u32) -> Self {
            FakeHw {
                counter,
                cycles,
                frame: 0,
                target: None,
                started: 0,
                done: 0,
                pointers: Vec::new(),
            }
        }
    }

    impl CameraHw for FakeHw {
        unsafe fn start(&mut self, buf: *mut u8, len: usize) -> Result<(), CameraError> {
            if self.target.is_some() {
                return Err(CameraError::Start);
            }
            self.started = self.counter.get();
            self.target = Some((buf, len));
            self.pointers.push(buf as usize);
            Ok(())
        }
        fn wait(&mut self) -> Result<(), CameraError> {
            let (p, len) = self.target.take().ok_or(CameraError::NotStarted)?;
            // SAFETY: the contract of `start`: the block is valid and ours until wait returns.
            let s = unsafe { core::slice::from_raw_parts_mut(p, len) };
            for (i, b) in s.iter_mut().enumerate() {
                *b = fake_pixel(self.frame, i);
            }
            self.frame = self.frame.wrapping_add(1);
            self.counter
                .set(self.counter.get().wrapping_add(self.cycles));
            self.done = self.counter.get();
            Ok(())
        }
        fn started_at(&self) -> u32 {
            self.started
        }
        fn done_at(&self) -> u32 {
            self.done
        }
    }

    pub const SMALL: FrameFormat = FrameFormat {
        width: 16,
        height: 4,
        pixel: PixelFormat::Grey8,
    };

    #[test]
    fn captures_into_the_given_buffer_and_times_them() {
        let c = Rc::new(Cell::new(100));
        let clock = WideClock::new(FakeCounter(c.clone(), 1_000_000));
        let pool = Rc::new(RefCell::new(EntropyPool::new()));
        let mut cam = HimaxCamera::new(
            FakeHw::new(c.clone(), 500),
            &clock,
            SMALL,
            Some(pool.clone()),
        );
        let a = vec![0u8; 64];
        let pa = a.as_ptr() as usize;
        cam.start(a).unwrap();
        assert_eq!(cam.start(vec![0u8; 64]), Err(CameraError::Busy));
        let cap = cam.wait().unwrap();
        assert_eq!(cap.buf.as_ptr() as usize, pa, "the same buffer comes back");
        assert_eq!(
            cap.buf[..3],
            [fake_pixel(0, 0), fake_pixel(0, 1), fake_pixel(0, 2)]
        );
        assert_eq!(cap.capture_ns, 600 * 1000, "completion time at 1 MHz");
        assert_eq!(cam.timing().capture_cycles, 500);
        assert_eq!(cam.hw().pointers, vec![pa]);
        assert!(
            pool.borrow().stats().inputs >= 1,
            "pixel noise went to the pool"
        );
        assert_eq!(cam.wait().unwrap_err(), CameraError::NotStarted);
    }

    /// Watches one heap block: set [`WATCHED`] to its address, [`WATCHED_FREED`] tells whether it
    /// was freed since (the test binary's allocator, the system's otherwise).
    static WATCHED: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    static WATCHED_FREED: core::sync::atomic::AtomicBool =
        core::sync::atomic::AtomicBool::new(false);

    struct Watching;
    // SAFETY: forwards every call to the system allocator unchanged; only reads the pointer.
    unsafe impl core::alloc::GlobalAlloc for Watching {
        unsafe fn alloc(&self, l: core::alloc::Layout) -> *mut u8 {
            // SAFETY: the caller's contract, passed on.
            unsafe { std::alloc::System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: core::alloc::Layout) {
            use core::sync::atomic::Ordering::SeqCst;
            if p as usize == WATCHED.load(SeqCst) {
                WATCHED_FREED.store(true, SeqCst);
            }
            // SAFETY: the caller's contract, passed on.
            unsafe { std::alloc::System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static ALLOC: Watching = Watching;

    /// A capture engine whose wait fails (a DMA that did not report completion).
    struct StuckHw;
    impl CameraHw for StuckHw {
        unsafe fn start(&mut self, _: *mut u8, _: usize) -> Result<(), CameraError> {
            Ok(())
        }
        fn wait(&mut self) -> Result<(), CameraError> {
            Err(CameraError::NotStarted)
        }
        fn started_at(&self) -> u32 {
            0
        }
        fn done_at(&self) -> u32 {
            0
        }
    }

    /// Dropping a camera whose capture cannot be waited for: the uDMA may still write the buffer,
    /// so it must not go back to the heap (leaked instead). After a good wait it is freed as usual.
    #[test]
    fn finding6_camera_drop_after_a_failed_wait_leaks_the_buffer() {
        use core::sync::atomic::Ordering::SeqCst;
        let c = Rc::new(Cell::new(0));
        let clock = WideClock::new(FakeCounter(c.clone(), 1000));
        let mut cam = HimaxCamera::new(StuckHw, &clock, SMALL, None);
        let buf = vec![0u8; 64];
        WATCHED.store(buf.as_ptr() as usize, SeqCst);
        WATCHED_FREED.store(false, SeqCst);
        cam.start(buf).unwrap();
        assert!(cam.wait().is_err());
        drop(cam);
        assert!(
            !WATCHED_FREED.load(SeqCst),
            "the buffer of a capture that may still run was freed"
        );
        // A capture that completes: its buffer is freed when the camera is dropped.
        let mut cam = HimaxCamera::new(FakeHw::new(c, 1), &clock, SMALL, None);
        let buf = vec![0u8; 64];
        WATCHED.store(buf.as_ptr() as usize, SeqCst);
        WATCHED_FREED.store(false, SeqCst);
        cam.start(buf).unwrap();
        drop(cam);
        assert!(WATCHED_FREED.load(SeqCst));
        WATCHED.store(0, SeqCst);
    }

    #[test]
    fn wrong_buffer_sizes_are_refused_without_starting() {
        let c = Rc::new(Cell::new(0));
        let clock = WideClock::new(FakeCounter(c.clone(), 1000));
        let mut cam = HimaxCamera::new(FakeHw::new(c, 1), &clock, SMALL, None);
        assert_eq!(
            cam.start(vec![0u8; 63]),
            Err(CameraError::BufferSize {
                expected: 64,
                got: 63
            })
        );
        assert!(cam.hw().pointers.is_empty());
    }

    #[test]
    fn one_shot_captures_only_when_asked() {
        let c = Rc::new(Cell::new(0));
        let clock = WideClock::new(FakeCounter(c.clone(), 1000));
        let mut cam = OneShot::new(HimaxCamera::new(
            FakeHw::new(c.clone(), 7),
            &clock,
            SMALL,
            None,
        ));
        cam.start(vec![0u8; 64]).unwrap();
        assert!(
            cam.inner().hw().pointers.is_empty(),
            "nothing captured at start"
        );
        let f = cam.wait().unwrap();
        assert_eq!(f.buf[0], fake_pixel(0, 0));
        assert_eq!(cam.inner().hw().pointers.len(), 1);
    }

    /// `Staged` chosen at run time behaves as the camera it wraps: pipelined captures at `start`,
    /// one-shot only at `wait`.
    #[test]
    fn staged_follows_the_mode_chosen_at_run_time() {
        for pipelined in [true, false] {
            let c = Rc::new(Cell::new(0));
            let clock = WideClock::new(FakeCounter(c.clone(), 1000));
            let mut cam = Staged::new(
                HimaxCamera::new(FakeHw::new(c.clone(), 7), &clock, SMALL, None),
                pipelined,
            );
            cam.start(vec![0u8; 64]).unwrap();
            assert_eq!(
                cam.inner().hw().pointers.len(),
                usize::from(pipelined),
                "pipelined={pipelined}"
            );
            let f = cam.wait().unwrap();
            assert_eq!(f.buf[0], fake_pixel(0, 0));
            assert_eq!(cam.inner().hw().pointers.len(), 1);
            assert_eq!(cam.format(), SMALL);
        }
    }
}
