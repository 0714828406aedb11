//! Forward error correction over UDP through the whole chain on 127.0.0.1: simulated drone ->
//! host bridge (loss on its UDP output, FEC for the receiver that asks) -> receiver.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{any, raw_frames};
use esp32_bridge::fec::FecConfig;
use esp32_bridge::host::{HostBridge, HostConfig};
use esp32_bridge::netsim::{LossModel, WifiModel};
use gapstream::images::{FrameSource, SourceSpec};
use gapstream::receiver::outputs::Console;
use gapstream::receiver::{
    self, Bus, Frame, Policy, ReceiverConfig, SessionKind, Subscription, Summary, Transport,
};
use gapstream::run::{self, Security};
use gapstream::sim::{self, Node, NodeConfig};
use gapstream_drone::{DroneConfig, Mode};
use gapstream_fec::wire::ShardHeader;
use gapstream_protocol::suite::{KexMode, Suite};

/// One chain at a time: each test runs a drone (8 engine threads), a bridge and a receiver, and a
/// debug-build receiver that falls far behind on a loaded machine loses datagrams in the kernel
/// beyond the loss the test sets.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lets the drone send all its frames (60 s at most), half a second for the last ones to arrive,
/// then stops it: its report.
fn run_to_end(n: Node) -> sim::NodeReport {
    let t0 = Instant::now();
    while !n.is_finished() && t0.elapsed() < Duration::from_secs(60) {
        thread::sleep(Duration::from_millis(50));
    }
    thread::sleep(Duration::from_millis(500));
    n.stop()
}

fn secure() -> (Mode, SessionKind) {
    let (d, r) = run::fresh_pairing().unwrap();
    let sec = Security::Secure {
        suite: Suite::ChaCha20Poly1305,
        kex: KexMode::X25519,
    };
    (
        run::drone_mode(&sec, Some(d.into())).unwrap(),
        run::receiver_session(&sec, Some(r), 1020).unwrap(),
    )
}

/// A bridge whose WiFi side runs at 20 Mbit/s (so that a debug-build receiver on a loaded machine
/// keeps up and the only loss is the configured one).
fn bridge(loss: Option<LossModel>, fec: FecConfig) -> HostBridge {
    HostBridge::start(HostConfig {
        spi_listen: any(),
        tcp_listen: any(),
        udp_listen: Some(any()),
        wifi: Some(WifiModel {
            mbps: 20.0,
            queue_bytes: 32 * 1024,
        }),
        udp_loss: loss,
        fec,
        client_write_timeout: Duration::from_secs(60),
        ..HostConfig::default()
    })
    .unwrap()
}

fn node(spec: &SourceSpec, spi: SocketAddr, fps: f64, frames: u64, mode: Mode) -> Node {
    sim::start_node(NodeConfig {
        source: FrameSource::open(spec).unwrap(),
        fps,
        bridge_spi: spi,
        spi_hz: None,
        drone: DroneConfig {
            mode,
            packet_payload: 1020,
        },
        frames: Some(frames),
        engine: sim::EngineChoice::default(),
        coder: None,
        padding: gapstream_protocol::padding::Padding::Off,
        flight: None,
    })
    .unwrap()
}

/// Runs a receiver (FEC asked for) on `addr` until `stop`; the frames go to the subscription.
fn receiver(
    addr: SocketAddr,
    session: SessionKind,
    stop: Arc<AtomicBool>,
) -> (
    Subscription,
    thread::JoinHandle<Result<Summary, receiver::ReceiverError>>,
) {
    let mut bus = Bus::new();
    let frames = bus.subscribe("test", Policy::Every(4096));
    bus.attach(Box::new(Console::new(false, true)));
    let cfg = ReceiverConfig {
        stop,
        duration: Some(Duration::from_secs(120)),
        idle_timeout: Duration::from_secs(5),
        fec: true,
        ..ReceiverConfig::new(addr, Transport::Udp, session)
    };
    let t = thread::spawn(move || receiver::run(cfg, bus));
    (frames, t)
}

fn wait_clients(b: &HostBridge) {
    let t0 = Instant::now();
    while b.with_core(|c| c.client_ids().count()) < 1 {
        assert!(t0.elapsed() < Duration::from_secs(5), "no receiver");
        thread::sleep(Duration::from_millis(5));
    }
}

/// 5 % independent loss on the bridge's UDP output (seeded): with FEC (default k = 40, n = 50)
/// every frame the drone sent arrives byte-exact, lost packets are rebuilt, and the receiver
/// counts what it rebuilt. (Plain UDP loses 98 % of such frames: 0.95^78.)
#[test]
fn with_5_percent_loss_fec_delivers_every_frame_byte_exact() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = raw_frames(d.path(), 40);
    let b = bridge(
        Some(LossModel::parse("5", 11).unwrap()),
        FecConfig::default(),
    );
    let (mode, session) = secure();
    let stop = Arc::new(AtomicBool::new(false));
    let (rx, t) = receiver(b.udp_addr.unwrap(), session, stop.clone());
    wait_clients(&b);
    let n = node(&spec, b.spi_addr, 10.0, 100, mode);
    let rep = run_to_end(n);
    stop.store(true, Ordering::Relaxed);
    let s = t.join().unwrap().unwrap();
    let got: Vec<Arc<Frame>> = rx.drain();
    for g in &got {
        let i = u32::from_le_bytes(g.pixels[..4].try_into().unwrap()) as usize;
        assert!(
            *g.pixels == frames[i % frames.len()][..],
            "frame {} damaged",
            g.seq()
        );
    }
    let sent = rep.drone.frames_sent;
    eprintln!(
        "sent {sent}, delivered {}, lost {}; fec {:?}; bridge lost {} datagrams",
        got.len(),
        s.counters.lost,
        s.counters.fec,
        b.udp_lost()
    );
    assert!(sent >= 30, "{rep:?}");
    assert!(b.udp_lost() > 100, "the loss model lost {}", b.udp_lost());
    assert!(s.counters.fec.recovered > 100, "{:?}", s.counters.fec);
    assert_eq!(
        s.counters.fec.unrecoverable_blocks, 0,
        "{:?}",
        s.counters.fec
    );
    assert_eq!(
        got.len() as u64,
        sent,
        "every frame sent arrived: {:?}",
        s.counters
    );
    assert_eq!(s.counters.tag_failures, 0);
    let f = b.fec_totals();
    let overhead = f.wire_bytes as f64 / f.packet_bytes as f64 - 1.0;
    assert!((0.2..0.3).contains(&overhead), "overhead {overhead}");
}

/// A parity shard corrupted on the way (a relay flips a byte of its symbol's data area and drops
/// a data shard of the same block, so that the corrupted parity is what rebuilds it): the frame
/// fails its authentication tag, is counted, and the stream goes on. A forged parity shard
/// injected with a garbage symbol does the same or is refused by the length / padding check.
#[test]
fn a_corrupted_parity_shard_costs_one_frame_refused_by_its_tag() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let (spec, frames) = raw_frames(d.path(), 20);
    let b = bridge(None, FecConfig::default());
    let bridge_udp = b.udp_addr.unwrap();
    // The relay: receiver <-> relay <-> bridge.
    let relay = UdpSocket::bind(any()).unwrap();
    let relay_addr = relay.local_addr().unwrap();
    let to_bridge = UdpSocket::bind(any()).unwrap();
    to_bridge.connect(bridge_udp).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let receiver_addr = Arc::new(Mutex::new(None::<SocketAddr>));
    let (st1, st2, ra) = (stop.clone(), stop.clone(), receiver_addr.clone());
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
    let tampered = Arc::new(AtomicU64::new(0));
    let tp = tampered.clone();
    thread::spawn(move || {
        to_bridge
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 2048];
        // The victim: the first block of a frame after the tenth block (k = 39).
        let mut victim = None;
        while !st2.load(Ordering::Relaxed) {
            let Ok(n) = to_bridge.recv(&mut buf) else {
                continue;
            };
            let mut d = buf[..n].to_vec();
            if let Ok((h, _)) = ShardHeader::parse(&d) {
                if victim.is_none() && h.block >= 10 && h.k == 39 && !h.parity && h.index == 0 {
                    victim = Some(h.block);
                }
                if victim == Some(h.block) {
                    if !h.parity && h.index == 5 {
                        tp.fetch_add(1, Ordering::Relaxed);
                        continue; // lost: the parity must rebuild it
                    }
                    if h.parity && h.index == 39 {
                        // The first parity symbol, in the middle of its data area.
                        d[10 + 2 + 500] ^= 0x5A;
                        tp.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if let Some(to) = *receiver_addr.lock().unwrap() {
                let _ = relay.send_to(&d, to);
            }
        }
    });
    let (mode, session) = secure();
    let (rx, t) = receiver(relay_addr, session, stop.clone());
    wait_clients(&b);
    let n = node(&spec, b.spi_addr, 10.0, 40, mode);
    let rep = run_to_end(n);
    stop.store(true, Ordering::Relaxed);
    let s = t.join().unwrap().unwrap();
    let got: Vec<Arc<Frame>> = rx.drain();
    eprintln!(
        "sent {}, delivered {}, {:?}, fec {:?}",
        rep.drone.frames_sent,
        got.len(),
        s.counters,
        s.counters.fec
    );
    assert_eq!(
        tampered.load(Ordering::Relaxed),
        2,
        "the relay found its victim block"
    );
    for g in &got {
        let i = u32::from_le_bytes(g.pixels[..4].try_into().unwrap()) as usize;
        assert!(
            *g.pixels == frames[i % frames.len()][..],
            "frame {} damaged",
            g.seq()
        );
    }
    // The rebuilt packet was wrong: its frame failed its tag (counted) and only it was lost.
    assert_eq!(s.counters.tag_failures, 1, "{:?}", s.counters);
    // Every other frame arrived (a block lost in the kernel on a loaded machine would be counted).
    assert!(
        got.len() as u64 + 1 + s.counters.fec.unrecoverable_blocks >= rep.drone.frames_sent,
        "{:?}",
        s.counters
    );
    assert!(s.counters.fec.recovered >= 1);
    assert_eq!(s.connects, 1, "the stream went on without a reconnect");
}

/// The adaptive mode with no loss: the receiver's reports take the parity down to the floor
/// within a few seconds (2 parity shards per 40 data shards: ~5 % of the data plus headers).
#[test]
fn adaptive_fec_without_loss_falls_to_its_floor() {
    let _serial = serial();
    let d = tempfile::tempdir().unwrap();
    let (spec, _) = raw_frames(d.path(), 10);
    let b = bridge(
        None,
        FecConfig {
            adaptive: Some((2, 40)),
            ..FecConfig::default()
        },
    );
    let (mode, session) = secure();
    let stop = Arc::new(AtomicBool::new(false));
    let (_rx, t) = receiver(b.udp_addr.unwrap(), session, stop.clone());
    wait_clients(&b);
    let n = node(&spec, b.spi_addr, 10.0, 1_000, mode);
    let t0 = Instant::now();
    let mut at_floor = None;
    while t0.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(100));
        let f = b.fec_totals();
        if t0.elapsed().as_millis() % 1000 < 100 {
            eprintln!("{f:?}");
        }
        if f.reports >= 3 && f.parity_now == 2 {
            at_floor = Some(f);
            break;
        }
    }
    if at_floor.is_none() {
        n.stop();
        thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        let s = t.join().unwrap().unwrap();
        panic!(
            "the parity did not reach the floor: receiver {:?}, bridge {:?}",
            s.counters.fec,
            b.fec_totals()
        );
    }
    let first = at_floor.unwrap();
    thread::sleep(Duration::from_secs(2));
    let last = b.fec_totals();
    n.stop();
    stop.store(true, Ordering::Relaxed);
    let s = t.join().unwrap().unwrap();
    let overhead = (last.wire_bytes - first.wire_bytes) as f64
        / (last.packet_bytes - first.packet_bytes) as f64
        - 1.0;
    eprintln!(
        "floor after {:.1} s, overhead then {overhead:.4}",
        t0.elapsed().as_secs_f64()
    );
    assert!(overhead < 0.08, "overhead {overhead}");
    assert!(s.counters.fec.redundancy_pct < 6.0, "{:?}", s.counters.fec);
    assert_eq!(s.counters.lost, 0);
}
