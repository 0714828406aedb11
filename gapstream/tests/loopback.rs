//! Loopback tests of the whole chain: simulated drone -> host bridge -> receiver, on 127.0.0.1.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use esp32_bridge::host::{HostBridge, HostConfig};
use gapstream::images::{FrameSource, SourceSpec};
use gapstream::receiver::{
    self, Delivered, ReceiverConfig, SessionKind, Sinks, Summary, Transport,
};
use gapstream::sim::{self, Node, NodeConfig};
use gapstream_drone::{DroneConfig, Mode};

fn any() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

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

/// `n` frames of 324x244 random-looking bytes in a raw file.
fn raw_frames(dir: &std::path::Path, n: usize) -> (SourceSpec, Vec<Vec<u8>>) {
    let mut all = Vec::new();
    let mut frames = Vec::new();
    let mut x = 0x1234_5678u32;
    for _ in 0..n {
        let f: Vec<u8> = (0..324 * 244)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        all.extend_from_slice(&f);
        frames.push(f);
    }
    let p = dir.join("frames.raw");
    std::fs::write(&p, all).unwrap();
    (
        SourceSpec::Raw {
            path: p,
            width: 324,
            height: 244,
        },
        frames,
    )
}

fn node(spec: &SourceSpec, spi: SocketAddr, fps: f64, frames: Option<u64>, packet: usize) -> Node {
    sim::start_node(NodeConfig {
        source: FrameSource::open(spec).unwrap(),
        fps,
        bridge_spi: spi,
        spi_hz: None,
        drone: DroneConfig {
            mode: Mode::StockPlaintext,
            packet_payload: packet,
        },
        frames,
    })
    .unwrap()
}

struct Rx {
    stop: Arc<AtomicBool>,
    frames: mpsc::Receiver<Delivered>,
    thread: thread::JoinHandle<Result<Summary, receiver::ReceiverError>>,
}

fn receiver_on(addr: SocketAddr, transport: Transport, session: SessionKind) -> Rx {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let st = stop.clone();
    let thread = thread::spawn(move || {
        receiver::run(
            ReceiverConfig {
                bridge: addr,
                transport,
                session,
                stop: st,
                duration: Some(Duration::from_secs(60)),
                max_frames: None,
                idle_timeout: Duration::from_secs(2),
            },
            Sinks {
                viewer: None,
                metrics_csv: None,
                record_dir: None,
                frames: Some(tx),
                status_line: false,
                log_errors: true,
            },
            false,
        )
    });
    Rx {
        stop,
        frames: rx,
        thread,
    }
}

impl Rx {
    fn take(&self, n: usize, within: Duration) -> Vec<Delivered> {
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        while got.len() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.frames.recv_timeout(left) {
                Ok(f) => got.push(f),
                Err(_) => break,
            }
        }
        got
    }
    fn finish(self) -> Summary {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap().unwrap()
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
    for (transport, packet) in [(Transport::Tcp, 1020), (Transport::Tcp, 128)] {
        let b = bridge_at(any(), any(), any());
        let rx = receiver_on(b.tcp_addr, transport, SessionKind::StockPlaintext);
        wait_clients(&b, 1);
        // 60 fps keeps the bridge queue (4 frames) from overflowing on a loaded machine.
        let n = node(&spec, b.spi_addr, 60.0, Some(frames.len() as u64), packet);
        let got = rx.take(frames.len(), Duration::from_secs(30));
        let s = rx.finish();
        n.stop();
        assert_eq!(got.len(), frames.len(), "packet size {packet}: {s:?}");
        for (i, (g, f)) in got.iter().zip(&frames).enumerate() {
            assert!(g.pixels == *f, "frame {i} differs (packet size {packet})");
            assert_eq!((g.width, g.height), (324, 244));
        }
        assert_eq!(s.counters.malformed, 0);
    }
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
    let rx = receiver_on(tcp, Transport::Tcp, SessionKind::StockPlaintext);
    wait_clients(&b, 1);
    let n = node(&spec, spi, 30.0, None, 1020);
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
        if let Ok(f) = rx.frames.recv_timeout(Duration::from_millis(200))
            && f.capture_ns.is_some_and(|c| c > t_restart)
        {
            after += 1;
        }
    }
    let s = rx.finish();
    let r = n.stop();
    b2.stop();
    assert_eq!(after, 5, "no frames after the bridge restart: {s:?} {r:?}");
    assert!(s.connects >= 2, "receiver did not reconnect: {s:?}");
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
    let seqs: Vec<u64> = got.iter().map(|f| f.seq).collect();
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
