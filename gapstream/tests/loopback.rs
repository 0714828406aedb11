//! Loopback tests of the whole chain: simulated drone -> host bridge -> receiver, on 127.0.0.1.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{any, raw_file, raw_frames};
use esp32_bridge::host::{HostBridge, HostConfig};
use gapstream::images::{FrameSource, SourceSpec};
use gapstream::receiver::outputs::Console;
use gapstream::receiver::{
    self, Bus, Frame, Policy, ReceiverConfig, SessionKind, Subscription, Summary, Transport,
};
use gapstream::run::{self, Security};
use gapstream::sim::{self, Node, NodeConfig};
use gapstream_drone::{DroneConfig, Mode};
use gapstream_protocol::cpx::{LastFlag, Packetizer, StreamDecoder};
use gapstream_protocol::padding::Padding;
use gapstream_protocol::suite::{KexMode, Suite};

fn bridge_at(spi: SocketAddr, tcp: SocketAddr, udp: SocketAddr) -> HostBridge {
    // A just-closed port may need a moment before it can be bound again.
    let t0 = Instant::now();
    loop {
        match HostBridge::start(HostConfig {
            spi_listen: spi,
            tcp_listen: tcp,
            udp_listen: Some(udp),
            ..HostConfig::default()
        }) {
            Ok(b) => return b,
            Err(e) if t0.elapsed() < Duration::from_secs(5) => {
                eprintln!("bridge bind retry: {e}");
                thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("bridge: {e}"),
        }
    }
}

/// A bridge with room for 64 frames per client and a minute before a client that takes no bytes
/// is cut off: on a loaded machine a receiver that falls behind gets its frames late rather than
/// dropped or disconnected (a reconnect starts after a gap).
fn roomy_bridge() -> HostBridge {
    HostBridge::start(HostConfig {
        spi_listen: any(),
        tcp_listen: any(),
        udp_listen: Some(any()),
        core: esp32_bridge::forward::Config {
            client_queue_bytes: 64 * 82_000,
            ..esp32_bridge::forward::Config::default()
        },
        client_write_timeout: Duration::from_secs(60),
        ..HostConfig::default()
    })
    .unwrap()
}

fn node_with(
    spec: &SourceSpec,
    spi: SocketAddr,
    fps: f64,
    frames: Option<u64>,
    packet: usize,
    mode: Mode,
) -> Node {
    node_coded(spec, spi, fps, frames, packet, mode, None, Padding::Off)
}

#[allow(clippy::too_many_arguments)]
fn node_coded(
    spec: &SourceSpec,
    spi: SocketAddr,
    fps: f64,
    frames: Option<u64>,
    packet: usize,
    mode: Mode,
    coder: Option<Box<dyn gapstream_drone::FrameCoder + Send>>,
    padding: Padding,
) -> Node {
    sim::start_node(NodeConfig {
        source: FrameSource::open(spec).unwrap(),
        fps,
        bridge_spi: spi,
        spi_hz: None,
        drone: DroneConfig {
            mode,
            packet_payload: packet,
        },
        frames,
        engine: sim::EngineChoice::default(),
        coder,
        padding,
        flight: None,
    })
    .unwrap()
}

/// The drone's state and the frames' stamps through the whole chain: the simulated flight
/// controller's `!STA` messages at 100 Hz into the drone, the state record in every frame's
/// header, and on the receiver every frame with a valid, fresh state on the 1 m circle, and, once
/// a KEEPALIVE round trip anchored the drone's clock (one a second), a two-way stamp with a
/// stated bound that holds (one machine: the drone's clock is this one, the truth is the header's
/// capture time).
#[test]
fn frames_carry_the_drones_state_and_a_two_way_stamp() {
    let d = tempfile::tempdir().unwrap();
    let (spec, _) = raw_frames(d.path(), 8);
    let (mode, session) = secure(Suite::ChaCha20Poly1305, 1020);
    let b = roomy_bridge();
    let rx = receiver_on(b.tcp_addr, Transport::Tcp, session);
    wait_clients(&b, 1);
    let n = sim::start_node(NodeConfig {
        source: FrameSource::open(&spec).unwrap(),
        fps: 30.0,
        bridge_spi: b.spi_addr,
        spi_hz: None,
        drone: DroneConfig {
            mode,
            packet_payload: 1020,
        },
        frames: None,
        engine: sim::EngineChoice::default(),
        flight: Some(gapstream::flight::Circle::default()),
        coder: None,
        padding: Padding::Off,
    })
    .unwrap();
    let got = rx.take(100, Duration::from_secs(60));
    rx.finish();
    n.stop();
    assert_eq!(got.len(), 100);
    let mut two_way = 0;
    for f in &got {
        let s = f.state.expect("every frame carries the state");
        assert!(
            s.record.is_valid() && !s.record.is_stale(),
            "{:?}",
            s.record
        );
        assert!(s.age_ms().unwrap() <= 50.0);
        let r = s.position_m[0].hypot(s.position_m[1]);
        assert!(
            (r - 1.0).abs() < 0.002 && s.position_m[2] == 1.0,
            "{:?}",
            s.position_m
        );
        let c = f.capture.expect("a capture time on this clock");
        assert!(c.receiver_ns <= f.receive_ns, "a stamp after the arrival");
        if let Some(bound) = c.bound_ns() {
            two_way += 1;
            let err = (c.receiver_ns as i128 - f.header.capture_ns as i128).unsigned_abs();
            assert!(
                err <= bound as u128 + 1,
                "error {err} ns beyond the bound {bound} ns"
            );
        }
    }
    // 100 frames at 30 fps: 3.3 s, so at least the last second's are anchored two-way.
    assert!(two_way >= 30, "{two_way} frames with a two-way stamp");
}

/// A drone mode and a receiver session paired with each other.
fn secure(suite: Suite, packet: usize) -> (Mode, SessionKind) {
    let (d, r) = run::fresh_pairing().unwrap();
    let sec = Security::Secure {
        suite,
        kex: KexMode::X25519,
    };
    (
        run::drone_mode(&sec, Some(d.into())).unwrap(),
        run::receiver_session(&sec, Some(r), packet).unwrap(),
    )
}

struct Rx {
    stop: Arc<AtomicBool>,
    frames: Subscription,
    thread: thread::JoinHandle<Result<Summary, receiver::ReceiverError>>,
}

fn receiver_on(addr: SocketAddr, transport: Transport, session: SessionKind) -> Rx {
    let stop = Arc::new(AtomicBool::new(false));
    let mut bus = Bus::new();
    let frames = bus.subscribe("test", Policy::Every(4096));
    bus.attach(Box::new(Console::new(false, true)));
    let cfg = ReceiverConfig {
        stop: stop.clone(),
        duration: Some(Duration::from_secs(60)),
        idle_timeout: Duration::from_secs(2),
        ..ReceiverConfig::new(addr, transport, session)
    };
    let thread = thread::spawn(move || receiver::run(cfg, bus));
    Rx {
        stop,
        frames,
        thread,
    }
}

impl Rx {
    fn take(&self, n: usize, within: Duration) -> Vec<Arc<Frame>> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        while got.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.frames.frame(left) {
                Some(f) => got.push(f),
                None => break,
            }
        }
        got
    }
    fn finish(self) -> Summary {
        self.finish_all().0
    }
    /// Stops the receiver; also returns the frames delivered but not taken yet.
    fn finish_all(self) -> (Summary, Vec<Arc<Frame>>) {
        self.stop.store(true, Ordering::Relaxed);
        let s = self.thread.join().unwrap().unwrap();
        (s, self.frames.drain())
    }
}

/// Waits until the bridge has `n` clients (the receiver registered), so no frame is sent too early.
fn wait_clients(b: &HostBridge, n: usize) {
    let t0 = Instant::now();
    while b.with_core(|c| c.client_ids().count()) < n {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "receiver did not connect"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn n_frames_in_the_identical_n_frames_out() {
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = raw_frames(d.path(), 12);
    let cases = [
        (Some(Suite::ChaCha20Poly1305), 1020),
        (Some(Suite::ChaCha20Poly1305), 128),
        (Some(Suite::Aes128Gcm), 512),
        (Some(Suite::None), 256),
        (None, 1020), // the stock plaintext stream
    ];
    for (suite, packet) in cases {
        let (mode, session) = match suite {
            Some(s) => secure(s, packet),
            None => (Mode::StockPlaintext, SessionKind::StockPlaintext),
        };
        // The stock stream has no sequence number to tell a drop from a corrupted frame.
        let b = roomy_bridge();
        let rx = receiver_on(b.tcp_addr, Transport::Tcp, session);
        wait_clients(&b, 1);
        // 60 fps keeps the bridge queue (4 frames) from overflowing on a loaded machine. The first
        // frames may go out before the handshake completes (skipped), so run the source twice.
        let n = node_with(&spec, b.spi_addr, 60.0, None, packet, mode);
        let got = rx.take(frames.len(), Duration::from_secs(30));
        let s = rx.finish();
        n.stop();
        assert_eq!(
            got.len(),
            frames.len(),
            "{suite:?} packet size {packet}: {s:?}"
        );
        // Consecutive frames of the source, in order, byte-identical.
        let start = frames
            .iter()
            .position(|f| f[..] == got[0].pixels[..])
            .expect("first frame is a source frame");
        for (k, g) in got.iter().enumerate() {
            assert!(
                g.pixels[..] == frames[(start + k) % frames.len()][..],
                "{suite:?}/{packet}: frame {k} differs"
            );
            assert_eq!((g.width(), g.height()), (324, 244));
        }
        assert_eq!(
            (
                s.counters.malformed,
                s.counters.tag_failures,
                s.counters.lost
            ),
            (0, 0, 0),
            "{suite:?}"
        );
    }
}

/// `n` smooth 324x244 frames (gradients, a moving disc, mild noise: a camera-like scene that
/// JPEG and JPEG-LS compress) in a raw file.
fn scene_frames(dir: &std::path::Path, n: usize) -> (SourceSpec, Vec<Vec<u8>>) {
    let mut x = 0x9e37_79b9u32;
    let frames = (0..n as i32)
        .map(|k| {
            (0..324 * 244)
                .map(|i| {
                    let (px, py) = (i % 324, i / 324);
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let (dx, dy) = (px - 40 - 20 * k, py - 120);
                    let disc = if dx * dx + dy * dy < 900 { 90 } else { 0 };
                    ((px / 3 + py / 2 + disc + (x & 7) as i32) & 0xff) as u8
                })
                .collect()
        })
        .collect();
    raw_file(dir, "scene.raw", frames)
}

/// Compress, then seal, end to end per codec: every frame verified and decoded by the receiver,
/// its coded bytes those the drone's encoder writes for that source frame; JPEG-LS bit-exact
/// against the drone's frame, JPEG within the quality's error; with length-hiding padding too
/// (the receiver takes the padding off: the coded bytes are the encoder's).
#[test]
fn coded_frames_are_verified_and_decoded_per_codec() {
    use gapstream::codec::{Codec, HostCoder};
    use gapstream_drone::{FrameCoder, FrameFormat, PixelFormat};
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = scene_frames(d.path(), 8);
    for (codec, format, padding) in [
        (Codec::Jpeg, PixelFormat::Jpeg, Padding::Padme),
        (Codec::Jpegls, PixelFormat::JpegLs, Padding::Pow2),
        (Codec::Jpeg, PixelFormat::Jpeg, Padding::Off),
    ] {
        let (mode, session) = secure(Suite::ChaCha20Poly1305, 1020);
        let b = roomy_bridge();
        let rx = receiver_on(b.tcp_addr, Transport::Tcp, session);
        wait_clients(&b, 1);
        let coder = HostCoder::boxed(codec, 75).unwrap();
        let n = node_coded(&spec, b.spi_addr, 60.0, None, 1020, mode, coder, padding);
        let got = rx.take(frames.len(), Duration::from_secs(30));
        let s = rx.finish();
        let rep = n.stop();
        let d = rep.drone;
        if padding == Padding::Off {
            assert_eq!((d.frames_padded, d.padding_bytes), (0, 0));
        } else {
            // Every coded frame went out padded, at least by its 4-byte trailer.
            assert_eq!(d.frames_padded, d.frames_coded, "{codec:?}");
            assert!(d.padding_bytes >= 4 * d.frames_padded);
            // Coded and padded bytes went on the wire, all but the frame the stop may have cut
            // short (counted when coded, sent after; a padded frame is at most the raw frame's
            // length): on a busy machine the stop often lands in the middle of a send.
            assert!(d.bytes_sent + 79_056 + 1_024 > d.coded_bytes + d.padding_bytes);
        }
        assert_eq!(got.len(), frames.len(), "{codec:?}: {s:?}");
        for (k, g) in got.iter().enumerate() {
            assert_eq!(g.format(), Ok(format), "{codec:?} frame {k}");
            assert_eq!((g.width(), g.height()), (324, 244));
            let coded = g.coded.as_deref().expect("coded bytes kept");
            assert_eq!(g.header.payload_len as usize, coded.len());
            // Which source frame: the one whose coding gives these bytes.
            let src = frames
                .iter()
                .find(|f| {
                    // A fresh coder: these frames code as photographs do (noise, over 1.5 bits
                    // a sample), so the JPEG-LS band count stays 8 on every frame.
                    let mut out = Vec::new();
                    HostCoder::new(codec, 75)
                        .code(FrameFormat::HM01B0, f, &mut out)
                        .unwrap()
                        .is_some()
                        && out == coded
                })
                .unwrap_or_else(|| panic!("{codec:?} frame {k}: not a coded source frame"));
            assert!(
                coded.len() * 2 < src.len(),
                "{codec:?}: {} bytes",
                coded.len()
            );
            match codec {
                Codec::Jpegls => assert!(g.pixels[..] == src[..], "frame {k} not bit-exact"),
                _ => {
                    let mse = g
                        .pixels
                        .iter()
                        .zip(src)
                        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
                        .sum::<f64>()
                        / src.len() as f64;
                    let psnr = 10.0 * (255.0f64.powi(2) / mse.max(1e-9)).log10();
                    assert!(psnr > 30.0, "frame {k}: PSNR {psnr:.1} dB");
                }
            }
        }
        assert_eq!(
            (s.counters.malformed, s.counters.tag_failures),
            (0, 0),
            "{codec:?}"
        );
    }
}

/// `gapstream view --quality Q`: the receiver asks the drone (SET_QUALITY, over its session's
/// control channel) for quality 30 while the drone codes at 90; the drone's stream switches once,
/// and every frame after the switch is the quality-30 coding of its source frame.
#[test]
fn the_receiver_sets_the_drones_jpeg_quality() {
    use gapstream::codec::{Codec, HostCoder};
    use gapstream_drone::{FrameCoder, FrameFormat};
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = scene_frames(d.path(), 8);
    let (mode, mut session) = secure(Suite::ChaCha20Poly1305, 1020);
    let SessionKind::Secure(s) = &mut session else {
        unreachable!()
    };
    s.quality = Some(30);
    let b = roomy_bridge();
    let rx = receiver_on(b.tcp_addr, Transport::Tcp, session);
    wait_clients(&b, 1);
    let coder = HostCoder::boxed(Codec::Jpeg, 90).unwrap();
    let n = node_coded(
        &spec,
        b.spi_addr,
        60.0,
        None,
        1020,
        mode,
        coder,
        Padding::Padme,
    );
    let got = rx.take(24, Duration::from_secs(30));
    let s = rx.finish();
    let rep = n.stop();
    assert_eq!(got.len(), 24, "{s:?}");
    assert_eq!(rep.drone.quality, Some(30));
    assert_eq!(rep.drone.quality_requests, 1);
    // The quality each frame was coded with: the one whose coding of a source frame gives it.
    let quality_of = |coded: &[u8]| {
        [90u8, 30].into_iter().find(|&q| {
            let mut c = HostCoder::new(Codec::Jpeg, q);
            frames.iter().any(|f| {
                let mut out = Vec::new();
                c.code(FrameFormat::HM01B0, f, &mut out).unwrap().is_some() && out == coded
            })
        })
    };
    let qs: Vec<Option<u8>> = got
        .iter()
        .map(|g| quality_of(g.coded.as_deref().expect("coded")))
        .collect();
    assert!(qs.iter().all(Option::is_some), "{qs:?}");
    let switch = qs
        .iter()
        .position(|q| *q == Some(30))
        .expect("never switched");
    assert!(qs[switch..].iter().all(|q| *q == Some(30)), "{qs:?}");
    assert_eq!(s.counters.malformed, 0);
}

/// `--stock --codec jpeg`: the drone sends Bitcraze's image type 1 with the JPEG file; the
/// receiver's stock session decodes it (as Bitcraze's viewer does) into the source frames.
#[test]
fn stock_stream_with_jpeg_is_image_type_1_and_decodes() {
    use gapstream::codec::{Codec, HostCoder};
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = scene_frames(d.path(), 6);
    let b = roomy_bridge();
    let rx = receiver_on(b.tcp_addr, Transport::Tcp, SessionKind::StockPlaintext);
    wait_clients(&b, 1);
    let coder = HostCoder::boxed(Codec::Jpeg, 90).unwrap();
    let n = node_coded(
        &spec,
        b.spi_addr,
        60.0,
        None,
        1020,
        Mode::StockPlaintext,
        coder,
        Padding::Padme,
    );
    let got = rx.take(4, Duration::from_secs(30));
    let s = rx.finish();
    let rep = n.stop();
    assert_eq!(got.len(), 4, "{s:?}");
    assert!(rep.drone.frames_coded >= 4);
    // The stock stream has no AEAD to hide a length in: never padded.
    assert_eq!(rep.drone.frames_padded, 0);
    // Each frame close to one source frame (JPEG quality 90), and the stream was JPEG-sized.
    for g in &got {
        assert_eq!((g.width(), g.height()), (324, 244));
        let best = frames
            .iter()
            .map(|f| {
                let mse = g
                    .pixels
                    .iter()
                    .zip(f)
                    .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
                    .sum::<f64>()
                    / f.len() as f64;
                10.0 * (255.0f64.powi(2) / mse.max(1e-9)).log10()
            })
            .fold(0.0, f64::max);
        assert!(best > 30.0, "PSNR {best:.1} dB");
    }
    assert!(rep.drone.bytes_sent < rep.drone.frames_sent * 324 * 244 / 2);
    assert_eq!(s.counters.malformed, 0);
}

/// A receiver over UDP registers through the bridge's cookie exchange (request, cookie, echo,
/// welcome) and then gets the authenticated stream, while an address that only sent empty
/// datagrams gets no slot and nothing back; when the receiver stops, its leave frees the slot.
#[test]
fn finding5_receiver_streams_over_udp_after_the_cookie_exchange() {
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = raw_frames(d.path(), 6);
    let b = bridge_at(any(), any(), any());
    let udp = b.udp_addr.unwrap();
    let stranger = std::net::UdpSocket::bind(any()).unwrap();
    stranger
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    for _ in 0..5 {
        stranger.send_to(&[], udp).unwrap();
    }
    let (mode, session) = secure(Suite::ChaCha20Poly1305, 1020);
    let rx = receiver_on(udp, Transport::Udp, session);
    wait_clients(&b, 1);
    let n = node_with(&spec, b.spi_addr, 60.0, None, 1020, mode);
    let got = rx.take(6, Duration::from_secs(30));
    assert_eq!(b.udp_clients(), 1, "only the receiver holds a UDP slot");
    let s = rx.finish();
    n.stop();
    assert_eq!(got.len(), 6, "{s:?}");
    for g in &got {
        assert!(
            frames.iter().any(|f| f[..] == g.pixels[..]),
            "frame {} is not a source frame",
            g.seq()
        );
    }
    assert_eq!((s.counters.tag_failures, s.counters.malformed), (0, 0));
    // The receiver said it leaves (with a current token): its slot is free at once.
    let t0 = Instant::now();
    while b.udp_clients() > 0 && t0.elapsed() < Duration::from_secs(5) {
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        b.udp_clients(),
        0,
        "the receiver's leave ends its registration"
    );
    assert_eq!(b.udp_stats().left, 1);
    let mut buf = [0u8; 2048];
    assert!(
        stranger.recv_from(&mut buf).is_err(),
        "nothing to the address that only sent empty datagrams"
    );
    assert!(b.refused() >= 5);
}

/// The receiver keeps its UDP registration by answering the bridge's probes, and only so: with
/// the bridge's timers shortened (a probe every 200 ms, dropped 1 s after the newest answered
/// token), it streams through four timeouts without a reconnect, every probe answered. (Small
/// frames: a loaded machine's socket buffers may drop datagrams of large ones, which is not what
/// this is about.)
#[test]
fn a_udp_receiver_keeps_its_registration_by_answering_probes() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("small.raw");
    std::fs::write(&p, vec![0x5Au8; 64 * 32 * 4]).unwrap();
    let spec = SourceSpec::Raw {
        path: p,
        width: 64,
        height: 32,
    };
    let b = HostBridge::start(HostConfig {
        spi_listen: any(),
        tcp_listen: any(),
        udp_listen: Some(any()),
        udp: esp32_bridge::cookie::GateConfig {
            timeout_ms: 1_000,
            probe_interval_ms: 200,
            stale_ms: 600,
            ..esp32_bridge::cookie::GateConfig::default()
        },
        ..HostConfig::default()
    })
    .unwrap();
    let (mode, session) = secure(Suite::ChaCha20Poly1305, 1020);
    let rx = receiver_on(b.udp_addr.unwrap(), Transport::Udp, session);
    wait_clients(&b, 1);
    let n = node_with(&spec, b.spi_addr, 20.0, None, 1020, mode);
    let t0 = Instant::now();
    let mut got = 0;
    while t0.elapsed() < Duration::from_secs(4) {
        got += rx.take(1, Duration::from_millis(100)).len();
    }
    let st = b.udp_stats();
    let s = rx.finish();
    n.stop();
    assert!(got >= 20, "{got} frames in 4 s: {s:?}");
    assert_eq!(s.connects, 1, "no reconnect: {s:?}");
    assert_eq!((st.registered, st.expired, st.evicted), (1, 0, 0), "{st:?}");
    assert!(st.probes >= 15 && st.refreshed + 2 >= st.probes, "{st:?}");
}

#[test]
fn bridge_restarted_mid_stream_receiver_reconnects_by_itself() {
    let spec = SourceSpec::Synthetic {
        width: 324,
        height: 244,
        bayer: false,
    };
    let b = bridge_at(any(), any(), any());
    let (spi, tcp, udp) = (b.spi_addr, b.tcp_addr, b.udp_addr.unwrap());
    let (mode, session) = secure(Suite::ChaCha20Poly1305, 1020);
    let rx = receiver_on(tcp, Transport::Tcp, session);
    wait_clients(&b, 1);
    let n = node_with(&spec, spi, 30.0, None, 1020, mode);
    let before = rx.take(5, Duration::from_secs(20));
    assert_eq!(before.len(), 5);
    // Pull the ESP32's power, then bring it back on the same ports.
    b.stop();
    thread::sleep(Duration::from_millis(300));
    let b2 = bridge_at(spi, tcp, udp);
    // Drain what was in flight, then wait for frames captured after the restart.
    let t_restart = sim::unix_ns();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut after = 0;
    while after < 5 && Instant::now() < deadline {
        if let Some(f) = rx.frames.frame(Duration::from_millis(200))
            && f.capture_ns().is_some_and(|c| c > t_restart)
        {
            after += 1;
        }
    }
    let s = rx.finish();
    let r = n.stop();
    b2.stop();
    assert_eq!(after, 5, "no frames after the bridge restart: {s:?} {r:?}");
    assert!(s.connects >= 2, "receiver did not reconnect: {s:?}");
    assert!(
        s.counters.handshakes >= 2,
        "receiver did not handshake again: {s:?}"
    );
    assert!(
        r.drone.handshakes >= 2,
        "drone did not accept the new handshake: {r:?}"
    );
    assert!(r.link.reconnects >= 1, "node did not reconnect: {r:?}");
}

/// A fake bridge that sends what the test gives it, one connection at a time.
fn fake_bridge(script: Vec<Vec<Vec<u8>>>) -> (SocketAddr, thread::JoinHandle<()>) {
    let l = TcpListener::bind(any()).unwrap();
    let addr = l.local_addr().unwrap();
    let t = thread::spawn(move || {
        for conn in script {
            let (mut s, _) = l.accept().unwrap();
            for chunk in conn {
                if s.write_all(&chunk).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
            // Keep the connection open briefly, then close it (the receiver must reconnect).
            thread::sleep(Duration::from_millis(100));
            let _ = s.shutdown(std::net::Shutdown::Both);
            let mut sink = [0u8; 64];
            let _ = s.read(&mut sink);
        }
    });
    (addr, t)
}

/// The stock stream of one synthetic frame, as the drone sends it.
fn stock_frame(index: u32) -> Vec<u8> {
    use gapstream_protocol::cpx::{Function, LastFlag, Packetizer, Route, Target};
    let mut img = vec![0u8; 324 * 244];
    gapstream_drone::testpattern::render(
        &mut img,
        324,
        244,
        gapstream_drone::testpattern::Stamp {
            frame: index,
            capture_ns: sim::unix_ns(),
        },
    )
    .unwrap();
    let fmt = gapstream_drone::FrameFormat::HM01B0;
    let route = Route::new(Target::Gap8, Target::WifiHost, Function::App);
    let header = gapstream_drone::drone::stock_header(fmt);
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    for part in [&header[..], &img[..]] {
        let mut p = Packetizer::new(route, [part, &[], &[]], 1020, LastFlag::Every).unwrap();
        while let Some(n) = p.next_packet(&mut buf) {
            out.extend_from_slice(&buf[..n.unwrap()]);
        }
    }
    out
}

/// A stock JPEG image (header type 1, size = the JPEG file's bytes), as the stock streamer sends
/// in its JPEG mode: the `--stock` receiver decodes it to 8-bit grey. The JPEG is made here from
/// the test pattern (frame 42), so the decoded frame must carry its stamp.
#[test]
fn stock_jpeg_frames_are_decoded() {
    use gapstream_protocol::compat::{StockHeader, StockStreamer};
    let (w, h) = (324u16, 244u16);
    let mut img = vec![0u8; w as usize * h as usize];
    gapstream_drone::testpattern::render(
        &mut img,
        w as usize,
        h as usize,
        gapstream_drone::testpattern::Stamp {
            frame: 42,
            capture_ns: sim::unix_ns(),
        },
    )
    .unwrap();
    let mut jpeg = Vec::new();
    jpeg_encoder::Encoder::new(&mut jpeg, 95)
        .encode(&img, w, h, jpeg_encoder::ColorType::Luma)
        .unwrap();
    let header = StockHeader {
        width: w,
        height: h,
        depth: 1,
        kind: 1,
        size: jpeg.len() as u32,
    };
    let mut wire = Vec::new();
    let mut s = StockStreamer::new(&jpeg, header, 1020).unwrap();
    let mut buf = [0u8; 1024];
    while let Some(n) = s.next_packet(&mut buf) {
        wire.extend_from_slice(&buf[..n.unwrap()]);
    }
    let (addr, t) = fake_bridge(vec![vec![wire.clone(), wire]]);
    let rx = receiver_on(addr, Transport::Tcp, SessionKind::StockPlaintext);
    let got = rx.take(2, Duration::from_secs(20));
    let s = rx.finish();
    t.join().unwrap();
    assert_eq!(got.len(), 2, "{s:?}");
    let f = &got[0];
    assert_eq!((f.width(), f.height()), (w as usize, h as usize));
    assert_eq!(
        f.seq(),
        42,
        "the test pattern's stamp survives JPEG at quality 95"
    );
    let mean_err: f64 = f
        .pixels
        .iter()
        .zip(&img)
        .map(|(a, b)| (*a as f64 - *b as f64).abs())
        .sum::<f64>()
        / img.len() as f64;
    assert!(
        mean_err < 4.0,
        "decoded JPEG too far from the image: {mean_err}"
    );
    // A JPEG that does not decode is one clear error, not a panic.
    assert!(gapstream::receiver::decode_stock_jpeg(&jpeg[..200]).is_err());
    assert!(gapstream::receiver::decode_stock_jpeg(b"not a jpeg").is_err());
}

#[test]
fn truncated_or_garbled_cpx_gives_a_clear_error_and_the_connection_recovers() {
    let good = stock_frame(1);
    let mut garbled_len = stock_frame(2);
    garbled_len[0] = 0xFF;
    garbled_len[1] = 0xFF;
    let truncated = stock_frame(3)[..30_000].to_vec();
    let script = vec![
        // Connection 1: garbage bytes, a frame with an impossible length, then a good frame.
        vec![vec![0xFF; 7], garbled_len, good.clone(), truncated],
        // Connection 2 (after the receiver reconnected): good frames.
        vec![stock_frame(10), stock_frame(11)],
    ];
    let (addr, t) = fake_bridge(script);
    let rx = receiver_on(addr, Transport::Tcp, SessionKind::StockPlaintext);
    let got = rx.take(3, Duration::from_secs(20));
    let s = rx.finish();
    t.join().unwrap();
    let seqs: Vec<u64> = got.iter().map(|f| f.seq()).collect();
    assert!(
        seqs.contains(&10) && seqs.contains(&11),
        "no frames after reconnect: {seqs:?} {s:?}"
    );
    assert!(
        s.counters.malformed >= 1,
        "garbled input not counted: {s:?}"
    );
    assert!(s.connects >= 2, "{s:?}");
}

/// A TCP relay between the bridge and the receiver that can alter the drone's messages: every
/// whole gapstream message (CPX packets up to `last_packet`) goes through `hook(index, message)`,
/// which returns the messages to forward in its place.
fn tampering_relay(
    bridge: SocketAddr,
    hook: impl FnMut(usize, Vec<u8>) -> Vec<Vec<u8>> + Send + 'static,
) -> (SocketAddr, Arc<AtomicBool>) {
    let l = TcpListener::bind(any()).unwrap();
    let addr = l.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    thread::spawn(move || {
        let mut hook = hook;
        let Ok((client, _)) = l.accept() else { return };
        let up = std::net::TcpStream::connect(bridge).unwrap();
        let (mut c_rd, mut up_wr) = (client.try_clone().unwrap(), up.try_clone().unwrap());
        thread::spawn(move || {
            let _ = std::io::copy(&mut c_rd, &mut up_wr);
        });
        let (mut up_rd, mut c_wr) = (up, client);
        up_rd
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut dec = StreamDecoder::new();
        let mut msg = Vec::new();
        let mut route = None;
        let mut index = 0;
        let mut buf = vec![0u8; 65536];
        let mut pkt = vec![0u8; 1024];
        while !st.load(Ordering::Relaxed) {
            let n = match up_rd.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => n,
                Err(_) => continue,
            };
            let mut input = &buf[..n];
            while let Some(r) = dec.decode(&mut input) {
                let p = r.unwrap();
                route.get_or_insert(p.route);
                msg.extend_from_slice(p.payload);
                if p.route.last_packet {
                    let r0 = route.take().unwrap();
                    for m in hook(index, std::mem::take(&mut msg)) {
                        let mut pz =
                            Packetizer::new(r0, [&m, &[], &[]], 1020, LastFlag::Final).unwrap();
                        while let Some(k) = pz.next_packet(&mut pkt) {
                            if c_wr.write_all(&pkt[..k.unwrap()]).is_err() {
                                return;
                            }
                        }
                    }
                    index += 1;
                }
            }
        }
    });
    (addr, stop)
}

/// Is this gapstream message a FRAME ("GS" 02 10)?
fn is_frame(m: &[u8]) -> bool {
    use gapstream_protocol::wire::{MsgType, prefix};
    m.len() > 4 && m[..4] == prefix(MsgType::Frame)
}

#[test]
fn a_flipped_byte_anywhere_rejects_that_frame_and_the_stream_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = raw_frames(d.path(), 10);
    let b = bridge_at(any(), any(), any());
    let (mode, session) = secure(Suite::ChaCha20Poly1305, 1020);
    // Flip one byte in every third frame: in the header, the payload or the tag.
    let flipped = Arc::new(std::sync::Mutex::new(0usize));
    let fl = flipped.clone();
    let mut nframe = 0usize;
    let (relay, stop) = tampering_relay(b.tcp_addr, move |_, mut m| {
        if is_frame(&m) {
            nframe += 1;
            // Alter every third of the first 24 frames, then leave the stream alone so every
            // altered frame is processed before the test stops.
            if nframe % 3 == 0 && nframe <= 24 {
                let len = m.len();
                let pos = match (nframe / 3) % 3 {
                    0 => 4 + nframe % 32,               // header (after the prefix)
                    1 => 36 + (nframe * 7919) % 79_056, // payload
                    _ => len - 1 - nframe % 16,         // tag
                };
                m[pos] ^= 0x20;
                *fl.lock().unwrap() += 1;
            }
        }
        vec![m]
    });
    let rx = receiver_on(relay, Transport::Tcp, session);
    wait_clients(&b, 1);
    let n = node_with(&spec, b.spi_addr, 60.0, None, 1020, mode);
    let mut got = rx.take(20, Duration::from_secs(30));
    assert_eq!(got.len(), 20);
    thread::sleep(Duration::from_millis(500));
    let (s, rest) = rx.finish_all();
    got.extend(rest);
    n.stop();
    stop.store(true, Ordering::Relaxed);
    let flipped = *flipped.lock().unwrap();
    assert_eq!(flipped, 8, "the relay saw fewer than 24 frames");
    // Every delivered frame is intact; each altered one was rejected and counted.
    for g in &got {
        assert!(
            frames.iter().any(|f| f[..] == g.pixels[..]),
            "an altered frame was delivered (seq {})",
            g.seq()
        );
    }
    // (An altered epoch number names an epoch the receiver has no key for: `no_key`.)
    let rejected = s.counters.tag_failures + s.counters.malformed + s.counters.no_key;
    assert_eq!(
        rejected, flipped as u64,
        "{flipped} altered, {rejected} rejected: {s:?}"
    );
    assert!(s.counters.tag_failures >= 1, "{s:?}");
}

#[test]
fn a_replayed_frame_is_rejected() {
    let spec = SourceSpec::Synthetic {
        width: 324,
        height: 244,
        bayer: false,
    };
    let b = bridge_at(any(), any(), any());
    let (mode, session) = secure(Suite::Aes128Gcm, 1020);
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut nframe = 0;
    let (relay, stop) = tampering_relay(b.tcp_addr, move |_, m| {
        if !is_frame(&m) {
            return vec![m];
        }
        nframe += 1;
        kept.push(m.clone());
        // Frame 5 is sent again right after itself, and frame 2 again after frame 8.
        match nframe {
            5 => vec![m.clone(), m],
            8 => vec![m, kept[1].clone()],
            _ => vec![m],
        }
    });
    let rx = receiver_on(relay, Transport::Tcp, session);
    wait_clients(&b, 1);
    let n = node_with(&spec, b.spi_addr, 60.0, None, 1020, mode);
    let got = rx.take(12, Duration::from_secs(30));
    let s = rx.finish();
    n.stop();
    stop.store(true, Ordering::Relaxed);
    assert_eq!(got.len(), 12);
    let mut seqs: Vec<u64> = got.iter().map(|f| f.seq()).collect();
    seqs.dedup();
    assert_eq!(
        seqs.len(),
        12,
        "a replay was delivered: {:?}",
        got.iter().map(|f| f.seq()).collect::<Vec<_>>()
    );
    assert_eq!(s.counters.replays, 2, "{s:?}");
}

/// `gapstream view --keylog FILE`: the key-log line the receiver writes opens a frame captured on
/// the wire with RustCrypto's `chacha20poly1305`, an implementation independent of the protocol
/// crate's (nonce = iv XOR (0^32 || be64(sequence)), AAD = the 36-byte header; docs/protocol.md §12).
#[test]
fn the_key_log_opens_a_captured_frame_with_an_independent_implementation() {
    use chacha20poly1305::aead::{AeadInOut, KeyInit};
    use std::os::unix::fs::PermissionsExt;
    let spec = SourceSpec::Synthetic {
        width: 324,
        height: 244,
        bayer: false,
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("keys.log");
    let b = bridge_at(any(), any(), any());
    let (mode, mut session) = secure(Suite::ChaCha20Poly1305, 1020);
    match &mut session {
        SessionKind::Secure(s) => s.keylog = Some(log.clone()),
        _ => unreachable!("a secure session"),
    }
    let wire: Arc<std::sync::Mutex<Vec<Vec<u8>>>> = Arc::default();
    let w = wire.clone();
    let (relay, stop) = tampering_relay(b.tcp_addr, move |_, m| {
        if is_frame(&m) {
            w.lock().unwrap().push(m.clone());
        }
        vec![m]
    });
    let rx = receiver_on(relay, Transport::Tcp, session);
    wait_clients(&b, 1);
    let n = node_with(&spec, b.spi_addr, 60.0, None, 1020, mode);
    let got = rx.take(3, Duration::from_secs(30));
    rx.finish();
    n.stop();
    stop.store(true, Ordering::Relaxed);
    assert_eq!(got.len(), 3);

    let text = std::fs::read_to_string(&log).expect("the key log was written");
    assert_eq!(
        std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let line = text.lines().next().expect("one line per epoch");
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!(f.len(), 10, "{line}");
    assert_eq!((f[0], f[3]), ("GAPSTREAM_KEYLOG_V2", "chacha20poly1305"));
    let unhex = |h: &str| -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    };
    let (epoch, key, iv) = (f[2].parse::<u32>().unwrap(), unhex(f[4]), unhex(f[5]));
    assert_eq!((key.len(), iv.len()), (32, 12));

    let wire = wire.lock().unwrap();
    let m = wire
        .iter()
        .find(|m| u64::from_le_bytes(m[16..24].try_into().unwrap()) == got[0].seq())
        .expect("the delivered frame was seen on the wire");
    let (header, body) = m.split_at(36);
    assert_eq!(
        u32::from_le_bytes(header[12..16].try_into().unwrap()),
        epoch
    );
    let (ct, tag) = body.split_at(body.len() - 16);
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&got[0].seq().to_be_bytes());
    for (n, i) in nonce.iter_mut().zip(&iv) {
        *n ^= i;
    }
    let aead = chacha20poly1305::ChaCha20Poly1305::new_from_slice(&key).unwrap();
    let mut pt = ct.to_vec();
    aead.decrypt_inout_detached(
        &nonce.into(),
        header,
        pt.as_mut_slice().into(),
        tag.try_into().unwrap(),
    )
    .expect("the key-log key opens the captured frame");
    assert!(
        pt[..] == got[0].pixels[..],
        "decrypted payload = delivered frame"
    );
}

/// A receiver paired with another drone: every HELLO is refused (ALERT 1, "the HELLO did not
/// authenticate ... wrong pairing?", printed on each attempt); since an ALERT is unauthenticated
/// it ends only that attempt, so the receiver keeps trying (with backoff) until its duration,
/// gets nothing, and the drone completes no handshake.
#[test]
fn wrong_pairing_keys_are_refused_with_a_clear_message() {
    let spec = SourceSpec::Synthetic {
        width: 324,
        height: 244,
        bayer: false,
    };
    let b = bridge_at(any(), any(), any());
    let (mode, _) = secure(Suite::ChaCha20Poly1305, 1020);
    let (_, other_receiver) = secure(Suite::ChaCha20Poly1305, 1020);
    let n = node_with(&spec, b.spi_addr, 30.0, None, 1020, mode);
    let r = receiver::run(
        ReceiverConfig {
            duration: Some(Duration::from_secs(4)),
            idle_timeout: Duration::from_secs(2),
            ..ReceiverConfig::new(b.tcp_addr, Transport::Tcp, other_receiver)
        },
        Bus::new(),
    );
    let rep = n.stop();
    let summary = r.expect("a refused handshake is not a reason to exit");
    assert_eq!(summary.counters.frames, 0);
    assert_eq!(summary.counters.handshakes, 0);
    assert_eq!(rep.drone.handshakes, 0);
    assert!(rep.drone.hellos_refused >= 2, "no retry: {rep:?}");
    // The message each refused attempt prints.
    let e = gapstream_protocol::handshake::HandshakeError::Refused(1).to_string();
    assert!(e.contains("pair"), "unclear message: {e}");
}

#[test]
fn udp_with_5_percent_loss_counts_lost_frames_and_delivers_the_rest_intact() {
    // Small frames (64 x 32 = 2 KiB, 3 CPX packets) so that a useful share survives 5 % packet
    // loss; each frame carries its index in its first bytes.
    let d = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    let frames: Vec<Vec<u8>> = (0..400u32)
        .map(|i| {
            let mut f: Vec<u8> = (0..64 * 32)
                .map(|k| (k as u32 ^ i.wrapping_mul(2654435761)) as u8)
                .collect();
            f[..4].copy_from_slice(&i.to_le_bytes());
            all.extend_from_slice(&f);
            f
        })
        .collect();
    let p = d.path().join("small.raw");
    std::fs::write(&p, all).unwrap();
    let spec = SourceSpec::Raw {
        path: p,
        width: 64,
        height: 32,
    };
    let b = bridge_at(any(), any(), any());
    let bridge_udp = b.udp_addr.unwrap();
    // The lossy UDP relay: receiver <-> relay <-> bridge, dropping 5 % of the bridge's datagrams
    // (seeded, so the run is reproducible).
    let relay = std::net::UdpSocket::bind(any()).unwrap();
    let relay_addr = relay.local_addr().unwrap();
    let to_bridge = std::net::UdpSocket::bind(any()).unwrap();
    to_bridge.connect(bridge_udp).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (st1, st2) = (stop.clone(), stop.clone());
    let receiver_addr = Arc::new(std::sync::Mutex::new(None::<SocketAddr>));
    let ra = receiver_addr.clone();
    let (r1, b1) = (relay.try_clone().unwrap(), to_bridge.try_clone().unwrap());
    thread::spawn(move || {
        r1.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 2048];
        while !st1.load(Ordering::Relaxed) {
            if let Ok((n, from)) = r1.recv_from(&mut buf) {
                *ra.lock().unwrap() = Some(from);
                let _ = b1.send(&buf[..n]);
            }
        }
    });
    let dropped = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let dr = dropped.clone();
    thread::spawn(move || {
        to_bridge
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 2048];
        let mut x = 0x9E37_79B9u32;
        while !st2.load(Ordering::Relaxed) {
            if let Ok(n) = to_bridge.recv(&mut buf) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if x % 100 < 5 {
                    dr.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if let Some(to) = *receiver_addr.lock().unwrap() {
                    let _ = relay.send_to(&buf[..n], to);
                }
            }
        }
    });
    let (mode, session) = secure(Suite::ChaCha20Poly1305, 1020);
    let rx = receiver_on(relay_addr, Transport::Udp, session);
    wait_clients(&b, 1);
    // The handshake itself may lose a datagram: the receiver retries its HELLO after 2 s.
    let n = node_with(
        &spec,
        b.spi_addr,
        200.0,
        Some(frames.len() as u64 + 400),
        1020,
        mode,
    );
    let mut got = rx.take(200, Duration::from_secs(60));
    thread::sleep(Duration::from_millis(200));
    let (s, rest) = rx.finish_all();
    got.extend(rest);
    n.stop();
    stop.store(true, Ordering::Relaxed);
    assert!(
        got.len() >= 100,
        "only {} frames delivered: {s:?}",
        got.len()
    );
    for g in &got {
        let i = u32::from_le_bytes(g.pixels[..4].try_into().unwrap()) as usize;
        assert!(
            i < frames.len() && g.pixels[..] == frames[i][..],
            "frame seq {} damaged",
            g.seq()
        );
    }
    // Every sequence number from the first delivered to the last delivered one was either
    // delivered or counted lost (the session counts loss from its first frame).
    let first = got.iter().map(|f| f.seq()).min().unwrap();
    let last = got.iter().map(|f| f.seq()).max().unwrap();
    assert!(
        s.counters.lost > 0,
        "5 % loss but nothing counted lost: {s:?}"
    );
    assert_eq!(got.len() as u64, s.counters.frames);
    assert_eq!(
        got.len() as u64 + s.counters.lost,
        last + 1 - first,
        "delivered + lost must cover first..=last: {s:?}"
    );
    assert!(dropped.load(Ordering::Relaxed) > 0);
}

/// A leader and two listeners through the bridge, a group test: each receiver has its own key and handshake, every frame is sealed once and all three
/// open it byte-identical; one listener leaves mid-run (CLOSE: the drone rekeys without it) and the
/// other two go on through the rekey without a gap of the protocol's.
///
/// The bridge has its ordinary bounded queues: on a loaded machine (a debug build, every core
/// busy) three receivers may decrypt fewer frames per second than the drone seals, and then the
/// bridge drops whole frames for the one behind, counts them, and keeps its latency bounded. (An
/// earlier version gave the bridge room for 64 frames "so that any gap would be the protocol's":
/// under load that only delayed the drop — the backlog grew to 6-12 s of latency, then the full
/// queue dropped anyway and the test failed on a gap the protocol had nothing to do with.) So
/// every hole in a receiver's sequence must be one it counted as lost, and everything the
/// receivers counted lost must be frames the bridge says it dropped.
#[test]
fn leader_and_two_listeners_one_leaves_the_others_are_unaffected() {
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = raw_frames(d.path(), 10);
    let (drone_id, rx_ids) = run::fresh_group(3).unwrap();
    let sec = Security::Secure {
        suite: Suite::ChaCha20Poly1305,
        kex: KexMode::X25519,
    };
    let mode = run::drone_mode(&sec, Some(drone_id)).unwrap();
    let b = bridge_at(any(), any(), any());
    let rxs: Vec<Rx> = rx_ids
        .into_iter()
        .map(|id| {
            let session = run::receiver_session(&sec, Some(id), 1020).unwrap();
            receiver_on(b.tcp_addr, Transport::Tcp, session)
        })
        .collect();
    wait_clients(&b, 3);
    let n = node_with(&spec, b.spi_addr, 20.0, None, 1020, mode);
    let [leader, leaving, staying]: [Rx; 3] = rxs.try_into().ok().unwrap();
    let mut got_leader = leader.take(12, Duration::from_secs(30));
    let mut got_staying = staying.take(12, Duration::from_secs(30));
    let mut got_leaving = leaving.take(12, Duration::from_secs(30));
    assert_eq!(
        (got_leader.len(), got_staying.len(), got_leaving.len()),
        (12, 12, 12)
    );
    // The listener leaves (its receiver stops and sends CLOSE).
    let (s_leaving, rest) = leaving.finish_all();
    got_leaving.extend(rest);
    let left_epoch = got_leaving.iter().filter_map(|f| f.epoch()).max().unwrap();
    // The other two go on until they are 10 frames into an epoch the leaver never got.
    for (rx, got) in [(&leader, &mut got_leader), (&staying, &mut got_staying)] {
        let deadline = Instant::now() + Duration::from_secs(30);
        while got.iter().filter(|f| f.epoch() > Some(left_epoch)).count() < 10 {
            assert!(Instant::now() < deadline, "no new epoch after the leave");
            got.extend(rx.take(1, Duration::from_secs(5)));
        }
    }
    // Stop the drone first: the other two leaving afterwards is not part of the test.
    let rep = n.stop();
    let (s_leader, rest) = leader.finish_all();
    got_leader.extend(rest);
    let (s_staying, rest) = staying.finish_all();
    got_staying.extend(rest);
    let bridge_dropped = b.with_core(|c| c.stats().frames_dropped);
    b.stop();
    let mut lost = 0;
    for (name, got, s) in [
        ("leader", &got_leader, &s_leader),
        ("listener 2", &got_staying, &s_staying),
        ("listener 1", &got_leaving, &s_leaving),
    ] {
        assert_eq!(s.connects, 1, "{name} reconnected: {s:?}");
        // Every hole in the sequence is a frame the receiver counted as lost.
        let span = got.last().unwrap().seq() + 1 - got[0].seq();
        assert_eq!(
            span - got.len() as u64,
            s.counters.lost,
            "{name}: holes and counted losses differ: {s:?}"
        );
        lost += s.counters.lost;
        // Every frame is a source frame, byte for byte, in order.
        for (k, g) in got.iter().enumerate() {
            assert!(k == 0 || g.seq() > got[k - 1].seq(), "{name}: out of order");
            assert!(
                frames.iter().any(|f| f[..] == g.pixels[..]),
                "{name}: frame seq {} differs from the source",
                g.seq()
            );
        }
        assert_eq!(
            (s.counters.tag_failures, s.counters.malformed),
            (0, 0),
            "{name}: {s:?}"
        );
    }
    // What was lost, the bridge dropped (counted): none of it is the protocol's.
    assert!(
        lost <= bridge_dropped,
        "the receivers lost {lost} frames, the bridge dropped {bridge_dropped}"
    );
    eprintln!(
        "group test: {lost} frames lost, all dropped by the bridge ({bridge_dropped} dropped)"
    );
    // All three got the same bytes for the same sequence numbers.
    for g in got_staying.iter().chain(&got_leaving) {
        if let Some(l) = got_leader.iter().find(|l| l.seq() == g.seq()) {
            assert!(
                l.pixels[..] == g.pixels[..],
                "seq {} differs between receivers",
                g.seq()
            );
        }
    }
    // The two that stayed went through the rekey the leave caused (their sequences, checked
    // above, run from before the leave into the new epoch, every hole a counted bridge drop).
    let last_left = got_leaving.last().unwrap().seq();
    for got in [&got_leader, &got_staying] {
        assert!(got[0].seq() <= last_left && got.iter().any(|f| f.epoch() > Some(left_epoch)));
    }
    assert_eq!(rep.drone.handshakes, 3, "{rep:?}");
    assert_eq!(rep.drone.receivers_left, 1, "{rep:?}");
    assert_eq!(rep.drone.receivers, 2, "{rep:?}");
}
