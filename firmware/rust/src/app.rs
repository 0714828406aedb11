//! The firmware's main loop around `gapstream_drone::Drone`: wait for the receiver's handshake
//! (sleeping on the ESP32's ready line, not spinning), stream frames, and report the breakdown of
//! the paper (F. Barchi et al., "RUST-Encoded Stream Ciphers on a RISC-V Parallel Ultra-Low-Power
//! Processor", PARMA-DITAM 2023): frame period, frames per second and time per stage (capture, encrypt + tag, SPI
//! send), in FC cycles.
//!
//! Output lines (parsed by `gvsoc/e2e/run.sh`):
//! ```text
//! FW handshake suite=chacha20poly1305 mode=x25519 cycles=1234567 bytes_in=.. bytes_out=..
//! FW frame n=3 seq=2 capture_cycles=.. seal_cycles=.. send_cycles=.. done_cycle=.. step_cycles=.. wait_cycles=.. code_cycles=.. coded_bytes=..
//! FW summary frames=10 period_cycles=.. fps=14.52 capture_cycles=.. seal_cycles=.. send_cycles=.. sum_cycles=.. ratio=0.520 fc_hz=50000000 code_cycles=.. coded_bytes=.. frames_coded=.. coder_errors=..
//! ```
//!
//! With a frame coder (compress, then seal) `code_cycles` is the coding's share of the step and
//! `coded_bytes` the coded frame's length; `sum_cycles` counts the coding as a stage.
//!
//! `step_cycles` is the whole per-frame step of the drone loop (with a link task: queueing the
//! packets, not sending them), `wait_cycles` the part of it spent waiting for the capture.

use core::fmt::Write;

use gap_rust_cipher_s::KeystreamApplier;
use gapstream_drone::{Camera, Clock, Drone, DroneError, DroneStats, Entropy, Link};

use crate::camera::{CaptureTiming, HimaxCamera, OneShot, Staged};
use crate::clock::Counter32;
use crate::link::WaitUpstream;

/// What the loop does.
#[derive(Clone, Copy, Debug)]
pub struct AppConfig {
    /// Frames to send after the handshake (0: forever).
    pub frames: u32,
    /// Give up when no receiver completed a handshake within this time (0: wait forever).
    pub handshake_timeout_ns: u64,
    /// Longest single sleep while waiting for the receiver.
    pub poll_us: u32,
    /// Print one line per frame.
    pub per_frame_lines: bool,
    /// Frames captured (and discarded) before the handshake: they feed the entropy pool with
    /// pixel noise before the first random numbers are needed, and let the sensor's exposure
    /// settle.
    pub warmup_captures: u32,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            frames: 0,
            handshake_timeout_ns: 0,
            poll_us: 2_000,
            per_frame_lines: true,
            warmup_captures: 2,
        }
    }
}

/// The capture stage's timing, from the camera.
pub trait CaptureTimes {
    fn capture_timing(&self) -> CaptureTiming;
}

impl<H: crate::camera::CameraHw, T: Counter32> CaptureTimes for HimaxCamera<'_, H, T> {
    fn capture_timing(&self) -> CaptureTiming {
        self.timing()
    }
}

impl<C: Camera + CaptureTimes> CaptureTimes for OneShot<C> {
    fn capture_timing(&self) -> CaptureTiming {
        self.inner().capture_timing()
    }
}

impl<C: Camera + CaptureTimes> CaptureTimes for Staged<C> {
    fn capture_timing(&self) -> CaptureTiming {
        self.inner().capture_timing()
    }
}

/// Runs the per-frame step, on the GAP8 on a stack in FC TCDM (the FC reaches it in one cycle, L2
/// in several: sealing a frame takes half the cycles there). The handshake's arithmetic needs more
/// stack than FC TCDM has room for, so upstream messages are deferred during the step (the link
/// keeps them) and handled after it, back on the task stack.
pub trait StepRunner {
    fn run(&mut self, f: &mut dyn FnMut());
}

/// Runs the step where the caller is (host tests, or no fast stack).
pub struct Inline;

impl StepRunner for Inline {
    fn run(&mut self, f: &mut dyn FnMut()) {
        f()
    }
}

/// Why the loop stopped early.
#[derive(Debug)]
pub enum AppError<CE, LE> {
    /// No receiver completed a handshake in time.
    NoReceiver,
    Drone(DroneError<CE, LE>),
}

impl<CE: core::fmt::Display, LE: core::fmt::Display> core::fmt::Display for AppError<CE, LE> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            AppError::NoReceiver => f.write_str("no receiver completed a handshake in time"),
            AppError::Drone(e) => write!(f, "{e}"),
        }
    }
}

/// The figures of a run, in clock cycles of `hz`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    pub frames: u64,
    pub hz: u64,
    /// Mean time between the ends of two consecutive frame sends (steady state).
    pub period_cycles: u64,
    /// Mean per frame of each stage.
    pub capture_cycles: u64,
    pub seal_cycles: u64,
    pub send_cycles: u64,
    /// Compress, then seal: mean per frame of the coding (0 for raw frames), mean coded bytes per
    /// coded frame, frames coded, frames the coder failed on (sent raw).
    pub code_cycles: u64,
    pub coded_bytes: u64,
    pub frames_coded: u64,
    pub coder_errors: u64,
}

impl Summary {
    pub fn sum_cycles(&self) -> u64 {
        self.capture_cycles + self.code_cycles + self.seal_cycles + self.send_cycles
    }
    /// Frames per second from the period, in hundredths (integers: the firmware links no float
    /// formatting, ~20 KB of L2 that the frame buffers need).
    pub fn fps_centi(&self) -> u64 {
        div_round(self.hz * 100, self.period_cycles)
    }
    /// period / (capture + seal + send) in thousandths: 1000 when nothing overlaps, 500 when two
    /// equal stages do.
    pub fn ratio_milli(&self) -> u64 {
        div_round(self.period_cycles * 1000, self.sum_cycles())
    }
}

/// What the session refused, printed as it happens: `FW upstream refused ...` for messages
/// (a replayed or forged control message: a KEY_ACK recorded in an earlier boot lands here),
/// `FW hello refused ...` for HELLOs.
#[derive(Default)]
struct Refusals {
    messages: u64,
    hellos: u64,
}

impl Refusals {
    fn note<W: Write>(&mut self, st: &DroneStats, out: &mut W) {
        if st.upstream_errors > self.messages {
            let _ = write!(
                out,
                "FW upstream refused n={} total={}",
                st.upstream_errors - self.messages,
                st.upstream_errors
            );
            let _ = writeln!(
                out,
                " last: {}",
                st.last_rejected
                    .map_or("bytes that were not CPX", rejected_name)
            );
            self.messages = st.upstream_errors;
        }
        if st.hellos_refused > self.hellos {
            let _ = write!(
                out,
                "FW hello refused n={} total={}",
                st.hellos_refused - self.hellos,
                st.hellos_refused
            );
            let _ = writeln!(
                out,
                " last: {}",
                st.last_refused_hello.map_or("?", refusal_name)
            );
            self.hellos = st.hellos_refused;
        }
    }
}

/// A short name for why the session rejected a message. Not the errors' `Display`: their full
/// texts cost ~4 KB of L2 (measured), which the frame buffers need.
fn rejected_name(e: gapstream_protocol::session::DroneError) -> &'static str {
    use gapstream_protocol::session::DroneError as E;
    #[allow(unreachable_patterns)]
    match e {
        E::Wire(_) => "malformed message",
        E::UnknownSession => "control message of no running session",
        E::Control(_) => "control message did not authenticate",
        E::Unexpected(_) => "a message type the drone never takes",
        E::ControlReplay => "replayed control message",
        E::BadControl => "control message out of place",
        E::NotPermitted(_) => "request from a watch-only receiver",
        _ => "other",
    }
}

/// A short name for why the session refused a HELLO (as [`rejected_name`]).
fn refusal_name(e: gapstream_protocol::handshake::HandshakeError) -> &'static str {
    use gapstream_protocol::handshake::HandshakeError as E;
    #[allow(unreachable_patterns)]
    match e {
        E::Wire(_) => "malformed HELLO",
        E::Authentication => "did not authenticate",
        E::NoCommonSuite => "no common suite",
        E::NoCommonKexMode => "no common key establishment",
        E::GroupFull => "group full",
        E::Busy => "busy (a handshake for that receiver within the second)",
        _ => "other",
    }
}

/// `a / b` rounded to the nearest integer; 0 when `b` is 0.
fn div_round(a: u64, b: u64) -> u64 {
    (a + b / 2).checked_div(b).unwrap_or(0)
}

/// `v` hundredths (or thousandths with `places` 3) as a decimal: `Fixed(1452, 2)` shows `14.52`.
struct Fixed(u64, u32);

impl core::fmt::Display for Fixed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let scale = 10u64.pow(self.1);
        write!(
            f,
            "{}.{:0width$}",
            self.0 / scale,
            self.0 % scale,
            width = self.1 as usize
        )
    }
}

fn ns_to_cycles(ns: u64, hz: u64) -> u64 {
    ((ns as u128 * hz as u128) / 1_000_000_000) as u64
}

/// Waits for the receiver's handshake (secure mode), then streams `cfg.frames` frames and
/// returns the summary. `cycles` reads the clock in cycles of `hz`.
pub fn run<C, L, K, E, A, W, R>(
    drone: &mut Drone<C, L, K, E, A>,
    clock: &dyn Clock,
    hz: u64,
    cfg: AppConfig,
    runner: &mut R,
    out: &mut W,
) -> Result<Summary, AppError<C::Error, L::Error>>
where
    C: Camera + CaptureTimes,
    L: Link + WaitUpstream,
    K: Clock,
    E: Entropy,
    A: KeystreamApplier,
    W: Write,
    R: StepRunner + ?Sized,
{
    // 0. Warm-up captures (entropy for the handshake).
    for _ in 0..cfg.warmup_captures {
        let bytes = drone.camera_mut().format().bytes();
        drone
            .camera_mut()
            .start(alloc::vec![0u8; bytes])
            .map_err(|e| AppError::Drone(DroneError::Camera(e)))?;
        drone
            .camera_mut()
            .wait()
            .map_err(|e| AppError::Drone(DroneError::Camera(e)))?;
    }

    // 1. The handshake: sleep on the ESP32's ready line until the receiver's HELLO arrived and
    //    was answered.
    let t0 = clock.now_ns();
    let mut next_note = t0 + 1_000_000_000;
    let mut refusals = Refusals::default();
    while drone.session().is_some_and(|s| !s.is_established()) {
        let now = clock.now_ns();
        if cfg.handshake_timeout_ns != 0 && now - t0 > cfg.handshake_timeout_ns {
            return Err(AppError::NoReceiver);
        }
        if now >= next_note {
            let _ = writeln!(
                out,
                "FW waiting for a receiver ({} s)",
                (now - t0) / 1_000_000_000
            );
            next_note += 1_000_000_000;
        }
        if drone.link_mut().wait_upstream_us(cfg.poll_us) {
            drone.service_upstream().map_err(AppError::Drone)?;
            refusals.note(&drone.stats(), out);
        }
    }
    if let Some(h) = drone.session().and_then(|s| s.handshake_stats()) {
        let _ = writeln!(
            out,
            "FW handshake suite={} mode={} cycles={} bytes_in={} bytes_out={}",
            h.suite.name(),
            h.mode.name(),
            ns_to_cycles(h.duration_ns, hz),
            h.bytes_received,
            h.bytes_sent
        );
    }

    // 2. Frames.
    let base_stats = drone.stats();
    let base_cap = drone.camera_mut().capture_timing();
    let mut prev_stats = base_stats;
    let mut prev_cap = base_cap;
    let mut first_done: Option<(u64, DroneStats, CaptureTiming, Option<u64>)> = None;
    // The link's own send time when it runs in a task of its own (the drone's `send_ns` is then
    // only the time to queue the packets).
    let mut prev_link = drone.link_mut().link_send_cycles();
    let mut last_done = 0u64;
    let mut sent = 0u64;
    while cfg.frames == 0 || sent < cfg.frames as u64 {
        drone.link_mut().defer_upstream(true);
        let mut r = Ok(());
        let step_t0 = clock.now_ns();
        runner.run(&mut || r = drone.step());
        let step_ns = clock.now_ns() - step_t0;
        drone.link_mut().defer_upstream(false);
        r.map_err(AppError::Drone)?;
        drone.service_upstream().map_err(AppError::Drone)?;
        let now = clock.now_ns();
        let st = drone.stats();
        refusals.note(&st, out);
        let cap = drone.camera_mut().capture_timing();
        let link = drone.link_mut().link_send_cycles();
        if st.frames_sent > prev_stats.frames_sent {
            sent += 1;
            last_done = now;
            if first_done.is_none() {
                first_done = Some((now, st, cap, link));
            }
            let send_cycles = match (link, prev_link) {
                (Some(a), Some(b)) => a - b,
                _ => ns_to_cycles(st.send_ns - prev_stats.send_ns, hz),
            };
            if cfg.per_frame_lines {
                let _ = writeln!(
                    out,
                    "FW frame n={} seq={} capture_cycles={} seal_cycles={} send_cycles={} done_cycle={} step_cycles={} wait_cycles={} code_cycles={} coded_bytes={}",
                    sent,
                    drone
                        .session()
                        .and_then(|s| s.next_sequence())
                        .map_or(0, |s| s.saturating_sub(1)),
                    cap.capture_cycles - prev_cap.capture_cycles,
                    ns_to_cycles(st.seal_ns - prev_stats.seal_ns, hz),
                    send_cycles,
                    ns_to_cycles(now, hz),
                    ns_to_cycles(step_ns, hz),
                    ns_to_cycles(st.capture_wait_ns - prev_stats.capture_wait_ns, hz),
                    ns_to_cycles(st.code_ns - prev_stats.code_ns, hz),
                    st.coded_bytes - prev_stats.coded_bytes
                );
            }
        }
        prev_stats = st;
        prev_cap = cap;
        prev_link = link;
    }

    // 3. Steady state: from the end of the first frame's send to the end of the last one's, the
    //    stages of frames 2..=n (the first frame also paid for filling the pipeline).
    let mut s = Summary {
        frames: sent,
        hz,
        ..Summary::default()
    };
    if let Some((t_first, st1, cap1, link1)) = first_done {
        let st = drone.stats();
        let cap = drone.camera_mut().capture_timing();
        let n = sent.saturating_sub(1);
        if let Some(period) = ns_to_cycles(last_done - t_first, hz).checked_div(n) {
            s.period_cycles = period;
            s.seal_cycles = ns_to_cycles(st.seal_ns - st1.seal_ns, hz) / n;
            s.code_cycles = ns_to_cycles(st.code_ns - st1.code_ns, hz) / n;
            s.coded_bytes = (st.coded_bytes - st1.coded_bytes)
                .checked_div(st.frames_coded - st1.frames_coded)
                .unwrap_or(0);
            s.send_cycles = match (prev_link, link1) {
                (Some(a), Some(b)) => (a - b) / n,
                _ => ns_to_cycles(st.send_ns - st1.send_ns, hz) / n,
            };
            s.capture_cycles = (cap.capture_cycles - cap1.capture_cycles)
                .checked_div(cap.captures - cap1.captures)
                .unwrap_or(0);
        }
    }
    let st = drone.stats();
    s.frames_coded = st.frames_coded - base_stats.frames_coded;
    s.coder_errors = st.coder_errors - base_stats.coder_errors;
    if let Some(c) = drone.session().map(|s| s.counters()) {
        let st = drone.stats();
        let _ = writeln!(
            out,
            "FW session handshakes={} hellos_refused={} keys_acked={} messages_rejected={} upstream_errors={}",
            c.handshakes, c.hellos_refused, c.keys_acked, c.messages_rejected, st.upstream_errors
        );
    }
    let _ = writeln!(
        out,
        "FW summary frames={} period_cycles={} fps={:.2} capture_cycles={} seal_cycles={} send_cycles={} sum_cycles={} ratio={:.3} fc_hz={} code_cycles={} coded_bytes={} frames_coded={} coder_errors={}",
        s.frames,
        s.period_cycles,
        Fixed(s.fps_centi(), 2),
        s.capture_cycles,
        s.seal_cycles,
        s.send_cycles,
        s.sum_cycles(),
        Fixed(s.ratio_milli(), 3),
        hz,
        s.code_cycles,
        s.coded_bytes,
        s.frames_coded,
        s.coder_errors
    );
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::camera::tests::{FakeHw, fake_pixel};
    use crate::clock::WideClock;
    use crate::clock::tests::FakeCounter;
    use crate::entropy::{EntropyPool, PoolEntropy, Source};
    use crate::link::CpxSpiLink;
    use crate::link::tests::EspModel;
    use core::cell::{Cell, RefCell};
    use esp32_bridge::forward::{Bridge, Config, Transport};
    use gap_rust_cipher_s::engine::ClusterEngine;
    use gap_rust_sdk::host::HostCluster;
    use gapstream_drone::{DroneConfig, FrameFormat, Mode, PixelFormat, SecureConfig};
    use gapstream_protocol::assembler::Assembler;
    use gapstream_protocol::cpx::StreamDecoder;
    use gapstream_protocol::handshake;
    use gapstream_protocol::padding::Padding;
    use gapstream_protocol::session::{self, ReceiverConfig, ReceiverEvent, ReceiverSession};
    use gapstream_protocol::suite::Suite;
    use std::rc::Rc;

    struct TestRng(u64);
    impl gapstream_protocol::rand_core::TryRng for TestRng {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Ok(self.try_next_u64()? as u32)
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            Ok(self.0)
        }
        fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), Self::Error> {
            for b in d {
                *b = self.try_next_u64()? as u8;
            }
            Ok(())
        }
    }
    impl gapstream_protocol::rand_core::TryCryptoRng for TestRng {}

    const FMT: FrameFormat = FrameFormat {
        width: 324,
        height: 244,
        pixel: PixelFormat::Grey8,
    };

    /// The firmware's whole chain on the host: Himax camera logic (fake capture engine), the
    /// 8-core cluster engine (host backend), the CPX-over-SPI link into esp32_bridge's SPI slave
    /// and forwarding core, and a receiver session on the bridge's TCP client side. Every frame
    /// arrives authenticated and byte-identical to what the camera captured.
    #[derive(PartialEq)]
    enum How {
        OneShot,
        Pipelined,
        /// Pipelined, the link in a task of its own (run in place here).
        Queued,
        /// As `Queued`, each frame coded by the cluster JPEG encoder before it is sealed, padded
        /// (Padmé, the firmware's default); the receiver asks for quality 40 (SET_QUALITY) once
        /// it has the first frame.
        QueuedJpeg,
        /// As `Queued`, each frame coded by the cluster JPEG-LS encoder, padded (Padmé).
        QueuedJpegls,
    }

    /// The quality the receiver of the `QueuedJpeg` stream asks for after its first frame.
    const REQUESTED_QUALITY: u8 = 40;

    fn stream(how: How, suite: Suite) {
        let counter = Rc::new(Cell::new(0u32));
        let clock = WideClock::new(FakeCounter(counter.clone(), 50_000_000));
        let pool = Rc::new(RefCell::new(EntropyPool::new()));
        pool.borrow_mut().absorb(
            Source::PowerUpSram,
            &(0..2048u32)
                .map(|i| ((i * 7919) >> 3) as u8)
                .collect::<Vec<_>>(),
        );
        let (drone_id, rx_id) = handshake::pair(&mut TestRng(7));
        let mut scfg = session::DroneConfig::default();
        scfg.policy.suites = handshake::SuiteSet::all();
        let cfg = DroneConfig {
            mode: Mode::Secure(Box::new(SecureConfig {
                identity: drone_id.into(),
                session: scfg,
                boot: gapstream_drone::Boot::advance(
                    &mut gapstream_drone::boot::RamBootCounter::new(0),
                )
                .unwrap(),
            })),
            packet_payload: 1020,
        };
        let mut esp = EspModel::new();
        esp.bridge = Bridge::new(Config {
            client_queue_bytes: 64 << 20,
            ..Config::default()
        });
        let client = esp.bridge.add_client(Transport::Tcp).unwrap();
        // The receiver, on the WiFi side of the simulated ESP32: it sends its HELLO first, then
        // reads what the bridge has for it and answers (ACCEPT -> KEY_ACK, frames) whenever the
        // ESP32's task runs.
        let mut rxs = ReceiverSession::new(
            rx_id,
            ReceiverConfig {
                suites: vec![suite],
                ..ReceiverConfig::default()
            },
        );
        rxs.connect(&mut TestRng(99), &|| 0u64).unwrap();
        let rx = Rc::new(RefCell::new(Rx {
            session: rxs,
            dec: StreamDecoder::new(),
            asm: Assembler::new(1 << 20),
            frames: Vec::new(),
            padded: Vec::new(),
            errors: Vec::new(),
            quality_after_first: (how == How::QueuedJpeg).then_some(REQUESTED_QUALITY),
        }));
        let rx2 = rx.clone();
        esp.wifi = Some(Box::new(move |b: &mut Bridge| {
            rx2.borrow_mut().pump(b, client)
        }));

        let cluster = HostCluster::new();
        let engine = ClusterEngine::new(&cluster, gap_rust_wrapper_config()).unwrap();
        let mut esp_model = Some(esp);
        let mut link = || CpxSpiLink::new(esp_model.take().unwrap(), 1000, Some(pool.clone()));
        let cam = HimaxCamera::new(
            FakeHw::new(counter.clone(), 3_000_000),
            &clock,
            FMT,
            Some(pool.clone()),
        );
        let mut out = String::new();
        let frames = 4u32;
        let app_cfg = AppConfig {
            frames,
            handshake_timeout_ns: 1_000_000_000,
            ..AppConfig::default()
        };
        let summary = if matches!(how, How::Queued | How::QueuedJpeg | How::QueuedJpegls) {
            let sh = crate::link::queue::tests::queued(esp_model.take().unwrap(), 16);
            let mut d = Drone::new(
                cam,
                crate::link::queue::QueuedLink::new(sh),
                &clock,
                PoolEntropy(pool.clone()),
                engine,
                cfg,
            )
            .unwrap();
            // The firmware's coded path: the coder's buffer holds the padded frame.
            let buffer = crate::coder::CodedBuffer {
                bytes: 60_000,
                padding: Padding::Padme,
                raw: 324 * 244,
            };
            let cl: &'static HostCluster = Box::leak(Box::new(HostCluster::new()));
            if how == How::QueuedJpeg {
                let coder = crate::coder::JpegCoder::new(cl, 8, 75, buffer).unwrap();
                d.set_coder(Some(Box::new(coder)));
                d.set_padding(Padding::Padme);
            } else if how == How::QueuedJpegls {
                let coder = crate::coder::JplsCoder::new(cl, 8, buffer).unwrap();
                d.set_coder(Some(Box::new(coder)));
                d.set_padding(Padding::Padme);
            }
            let s = run(&mut d, &clock, 50_000_000, app_cfg, &mut Inline, &mut out).unwrap();
            d.link_mut().flush(1_000_000).unwrap();
            let m = crate::link::queue::tests::esp(sh);
            assert!(m.violations.is_empty(), "{:?}", m.violations);
            assert!(m.fast.iter().any(|&f| f), "frames at the downstream clock");
            m.run_esp();
            s
        } else if how == How::OneShot {
            let mut d = Drone::new(
                OneShot::new(cam),
                link(),
                &clock,
                PoolEntropy(pool.clone()),
                engine,
                cfg,
            )
            .unwrap();
            let s = run(&mut d, &clock, 50_000_000, app_cfg, &mut Inline, &mut out).unwrap();
            let l = d.link_mut();
            assert!(l.hw().violations.is_empty(), "{:?}", l.hw().violations);
            l.hw_mut().run_esp();
            s
        } else {
            let mut d =
                Drone::new(cam, link(), &clock, PoolEntropy(pool.clone()), engine, cfg).unwrap();
            let s = run(&mut d, &clock, 50_000_000, app_cfg, &mut Inline, &mut out).unwrap();
            let l = d.link_mut();
            assert!(l.hw().violations.is_empty(), "{:?}", l.hw().violations);
            l.hw_mut().run_esp();
            s
        };
        assert_eq!(summary.frames, frames as u64);
        assert!(out.contains("FW handshake suite="), "{out}");
        assert!(out.contains("FW summary frames=4"), "{out}");
        assert!(
            summary.capture_cycles > 0 && summary.period_cycles > 0,
            "{summary:?}"
        );

        let rx = rx.borrow();
        assert!(
            rx.errors.is_empty(),
            "receiver rejected messages: {:?}",
            rx.errors
        );
        assert!(rx.session.is_established());
        assert_eq!(rx.frames.len(), frames as usize);
        if how == How::QueuedJpeg || how == How::QueuedJpegls {
            // Every coded frame went out padded, and the receiver took the padding off.
            assert!(rx.padded.iter().all(|&p| p), "{:?}", rx.padded);
        }
        // FakeHw wrote its k-th capture as fake_pixel(k, i); the warm-up took captures 0 and 1.
        let mut qualities = Vec::new();
        for (k, (f, authenticated)) in rx.frames.iter().enumerate() {
            let n = (k + 2) as u8;
            assert!(*authenticated || suite == Suite::None);
            let px: Vec<u8> = (0..324 * 244).map(|i| fake_pixel(n, i)).collect();
            if how == How::QueuedJpeg {
                // Compress, then seal: the payload is the portable encoder's file of the frame,
                // at quality 75 or, once SET_QUALITY reached the drone, 40.
                let file = |quality: u8| {
                    let spec = gapstream_jpeg::FrameSpec {
                        width: 324,
                        height: 244,
                        quality,
                        bands: 8,
                    };
                    let mut want = vec![0u8; 200_000];
                    let len =
                        gapstream_jpeg::encode::<gapstream_jpeg::Portable>(&spec, &px, &mut want)
                            .unwrap();
                    want.truncate(len);
                    want
                };
                assert!(f.len() < 324 * 244, "frame {k} was sent raw");
                let q = [75, REQUESTED_QUALITY]
                    .into_iter()
                    .find(|&q| f[..] == file(q)[..]);
                assert!(q.is_some(), "frame {k} differs");
                qualities.push(q.unwrap());
                continue;
            }
            if how == How::QueuedJpegls {
                // Lossless: the portable encoder's stream, decoded bit-exact.
                let plan = gapstream_jpegls::Plan::new(324, 244, gapstream_jpegls::Layout::Grey, 8)
                    .unwrap();
                let mut want = vec![0u8; plan.max_encoded_len()];
                let len = gapstream_jpegls::encode(&plan, &px, &mut want).unwrap();
                assert!(f.len() < 324 * 244, "frame {k} was sent raw");
                assert_eq!(f[..], want[..len], "frame {k} differs");
                assert_eq!(gapstream_jpegls::decode(f).unwrap().samples, px);
                continue;
            }
            assert_eq!(f.len(), 324 * 244);
            assert!(
                f.iter().enumerate().all(|(i, &p)| p == fake_pixel(n, i)),
                "frame {k} differs"
            );
        }
        if how == How::QueuedJpeg {
            // The first frame at the built-in quality, the last at the requested one, and no
            // frame back at 75 once the request took effect.
            assert_eq!(qualities.first(), Some(&75), "{qualities:?}");
            assert_eq!(qualities.last(), Some(&REQUESTED_QUALITY), "{qualities:?}");
            let first = qualities
                .iter()
                .position(|&q| q == REQUESTED_QUALITY)
                .unwrap();
            assert!(
                qualities[first..].iter().all(|&q| q == REQUESTED_QUALITY),
                "{qualities:?}"
            );
        }
    }

    /// The receiver end of the host stream test.
    struct Rx {
        session: ReceiverSession,
        dec: StreamDecoder,
        asm: Assembler,
        frames: Vec<(Vec<u8>, bool)>,
        /// Each frame's header flag PADDED.
        padded: Vec<bool>,
        errors: Vec<String>,
        /// SET_QUALITY to send once the first frame arrived.
        quality_after_first: Option<u8>,
    }

    impl Rx {
        fn pump(&mut self, b: &mut Bridge, client: u32) {
            let mut bytes = Vec::new();
            while let Some((m, r)) = b.next_for_client(client) {
                bytes.extend_from_slice(&m[r.clone()]);
                b.client_sent(client, r.len());
            }
            let mut input = &bytes[..];
            while let Some(p) = self.dec.decode(&mut input) {
                match p {
                    Ok(p) => {
                        if let Err(e) = self.asm.push(p.route, p.payload) {
                            self.errors.push(format!("{e:?}"));
                        }
                    }
                    Err(e) => self.errors.push(format!("{e:?}")),
                }
            }
            while let Some(m) = self.asm.next_message() {
                match self.session.handle_message(
                    &mut gap_rust_cipher_s::Sequential,
                    &mut TestRng(5),
                    &|| 0u64,
                    m,
                ) {
                    Ok(Some(ReceiverEvent::Frame(f))) => {
                        let a = f.authenticated;
                        self.padded.push(f.header.padded);
                        self.frames.push((f.into_pixels(), a));
                        if let Some(q) = self.quality_after_first.take() {
                            if let Err(e) = self
                                .session
                                .request_quality(&mut gap_rust_cipher_s::Sequential, q)
                            {
                                self.errors.push(format!("SET_QUALITY: {e:?}"));
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(e) => self.errors.push(format!("{e:?}")),
                }
            }
            while let Some(m) = self.session.poll_transmit() {
                let mut p = gapstream_protocol::cpx::Packetizer::new(
                    gapstream_protocol::cpx::Route::new(
                        gapstream_protocol::cpx::Target::WifiHost,
                        gapstream_protocol::cpx::Target::Gap8,
                        gapstream_protocol::cpx::GAPSTREAM_FUNCTION,
                    ),
                    [&m, &[], &[]],
                    1020,
                    gapstream_protocol::cpx::LastFlag::Final,
                )
                .unwrap();
                let mut pb = [0u8; 1024];
                let mut up = Vec::new();
                while let Some(n) = p.next_packet(&mut pb) {
                    up.extend_from_slice(&pb[..n.unwrap()]);
                }
                b.client_received(client, &up).unwrap();
            }
        }
    }

    fn gap_rust_wrapper_config() -> gap_rust_cipher_s::engine::Config {
        gap_rust_cipher_s::engine::Config::new(8, 8192)
    }

    /// The summary's figures without floats: what `gvsoc-e2e` parses as `fps=37.16` / `ratio=0.635`.
    #[test]
    fn summary_figures_print_as_decimals() {
        let s = Summary {
            frames: 16,
            hz: 240_000_000,
            period_cycles: 6_457_859,
            capture_cycles: 3_262_777,
            seal_cycles: 549_340,
            send_cycles: 6_355_552,
            ..Summary::default()
        };
        assert_eq!(s.fps_centi(), 3716);
        assert_eq!(s.ratio_milli(), 635);
        // The coding is a stage of its own in the sum (the JPEG run's figures).
        let coded = Summary {
            period_cycles: 4_113_458,
            capture_cycles: 3_696_620,
            code_cycles: 795_180,
            seal_cycles: 172_098,
            send_cycles: 1_219_168,
            ..s
        };
        assert_eq!(coded.sum_cycles(), 5_883_066);
        assert_eq!(coded.ratio_milli(), 699);
        assert_eq!(format!("{}", Fixed(s.fps_centi(), 2)), "37.16");
        assert_eq!(format!("{}", Fixed(s.ratio_milli(), 3)), "0.635");
        assert_eq!(format!("{}", Fixed(5, 2)), "0.05");
        assert_eq!(format!("{}", Fixed(1000, 3)), "1.000");
        // No frames: zeros, no division by zero.
        let z = Summary::default();
        assert_eq!((z.fps_centi(), z.ratio_milli()), (0, 0));
        assert_eq!(format!("{}", Fixed(z.fps_centi(), 2)), "0.00");
    }

    #[test]
    fn pipelined_stream_arrives_byte_exact_at_the_receiver() {
        stream(How::Pipelined, Suite::ChaCha20Poly1305);
    }

    #[test]
    fn with_the_link_task_the_stream_arrives_byte_exact_too() {
        stream(How::Queued, Suite::ChaCha20Poly1305);
    }

    /// JPEG, padded (Padmé), the receiver's SET_QUALITY applied from the next frame on.
    #[test]
    fn coded_with_the_cluster_jpeg_encoder_the_stream_carries_its_files() {
        stream(How::QueuedJpeg, Suite::ChaCha20Poly1305);
    }

    /// JPEG-LS, padded (Padmé): every frame the portable encoder's stream, decoded bit-exact.
    #[test]
    fn coded_with_the_cluster_jpegls_encoder_every_frame_decodes_bit_exact() {
        stream(How::QueuedJpegls, Suite::ChaCha20Poly1305);
    }

    #[test]
    fn sequential_baseline_and_aes_gcm_too() {
        stream(How::OneShot, Suite::Aes128Gcm);
    }

    #[test]
    fn no_receiver_times_out() {
        let counter = Rc::new(Cell::new(0u32));
        let clock = WideClock::new(FakeCounter(counter.clone(), 50_000_000));
        let (drone_id, _) = handshake::pair(&mut TestRng(3));
        let cfg = DroneConfig {
            mode: Mode::Secure(Box::new(SecureConfig {
                identity: drone_id.into(),
                session: session::DroneConfig::default(),
                boot: gapstream_drone::Boot::advance(
                    &mut gapstream_drone::boot::RamBootCounter::new(0),
                )
                .unwrap(),
            })),
            packet_payload: 1020,
        };
        /// A link whose ESP32 never signals; time passes 1 ms per wait.
        struct Quiet(Rc<Cell<u32>>);
        impl Link for Quiet {
            type Error = &'static str;
            fn send(&mut self, _: &[u8]) -> Result<(), &'static str> {
                Ok(())
            }
            fn poll_recv(&mut self, _: &mut [u8]) -> Result<usize, &'static str> {
                Ok(0)
            }
        }
        impl WaitUpstream for Quiet {
            fn wait_upstream_us(&mut self, us: u32) -> bool {
                self.0.set(self.0.get() + us * 50);
                false
            }
        }
        let cam = HimaxCamera::new(FakeHw::new(counter.clone(), 10), &clock, FMT, None);
        let mut d = Drone::new(
            cam,
            Quiet(counter.clone()),
            &clock,
            PoolEntropy(Rc::new(RefCell::new(EntropyPool::new()))),
            gap_rust_cipher_s::Sequential,
            cfg,
        )
        .unwrap();
        let r = run(
            &mut d,
            &clock,
            50_000_000,
            AppConfig {
                frames: 1,
                handshake_timeout_ns: 10_000_000,
                ..AppConfig::default()
            },
            &mut Inline,
            &mut String::new(),
        );
        assert!(matches!(r, Err(AppError::NoReceiver)));
    }

    /// The drone answers exactly the modes it was built with (`RESPONDER_MODES`; the firmware's
    /// default build: X25519 only, firmware/Makefile `KEX`), whatever its policy allows: a
    /// receiver that prefers a mode that is not built gets X25519, one that offers only such a
    /// mode is refused with NO_COMMON_KEX_MODE. `make firmware-test` runs this crate's tests on
    /// their own, where no other crate turns the modes on, so the refusals run there; the riscv32
    /// build asserts that the firmware's features decide `RESPONDER_MODES` (pmsis.rs).
    #[test]
    fn the_drone_answers_the_modes_it_was_built_with() {
        use gapstream_protocol::handshake::{
            DronePolicy, HandshakeError, HelloMacKey, KexSet, Offer, RESPONDER_MODES,
            ReceiverHandshake, respond,
        };
        use gapstream_protocol::suite::KexMode;
        assert!(RESPONDER_MODES.contains(KexMode::X25519));
        let mut rng = TestRng(11);
        let (drone_id, rx_id) = handshake::pair(&mut rng);
        let policy = DronePolicy {
            suites: handshake::SuiteSet::authenticated(),
            modes: KexSet::all(),
        };
        let offer = |modes| Offer {
            suites: &[Suite::ChaCha20Poly1305],
            modes,
            rsa_modulus: None,
        };
        let mac = HelloMacKey::derive(&drone_id.local, &drone_id.peer_public);
        let (mut rh, hello) = ReceiverHandshake::start(
            &rx_id,
            1,
            &offer(&[KexMode::P256, KexMode::X25519]),
            &mut rng,
        )
        .unwrap();
        let (d, accept) = respond(&drone_id, &mac, &policy, 1, &mut rng, &hello).unwrap();
        let want = if RESPONDER_MODES.contains(KexMode::P256) {
            KexMode::P256
        } else {
            KexMode::X25519
        };
        assert_eq!(d.mode, want);
        let r = rh
            .finish(&accept, &mut |_: &[u8]| Err(HandshakeError::RsaKeyMissing))
            .unwrap();
        assert_eq!((r.mode, r.hello_id), (want, d.hello_id));
        // RSA needs the receiver's modulus in the HELLO: only P-256 is offered alone here.
        let (_, hello) =
            ReceiverHandshake::start(&rx_id, 2, &offer(&[KexMode::P256]), &mut rng).unwrap();
        match respond(&drone_id, &mac, &policy, 1, &mut rng, &hello) {
            Ok((d, _)) => {
                assert!(RESPONDER_MODES.contains(KexMode::P256) && d.mode == KexMode::P256)
            }
            Err(refusal) => {
                assert!(!RESPONDER_MODES.contains(KexMode::P256));
                assert_eq!(refusal.error, HandshakeError::NoCommonKexMode);
                assert!(refusal.alert.is_some(), "the receiver is told why");
            }
        }
    }

    /// A HELLO refused by the drone's rate limit says so in the `FW hello refused` line (a second
    /// boot's replayed HELLO takes the receiver's handshake of that second: the real one is busy).
    #[test]
    fn a_busy_hello_is_named() {
        use gapstream_protocol::handshake::HandshakeError as E;
        assert!(refusal_name(E::Busy).starts_with("busy"));
        assert_eq!(refusal_name(E::GroupFull), "group full");
    }

    /// A watch-only receiver's SET_QUALITY is named as such in the `FW rejected` line.
    #[test]
    fn a_watchers_request_is_named() {
        use gapstream_protocol::session::DroneError as E;
        use gapstream_protocol::wire::MsgType;
        assert_eq!(
            rejected_name(E::NotPermitted(MsgType::SetQuality)),
            "request from a watch-only receiver"
        );
    }
}
