//! Attacks 2 and 3 on the sessions of a running `gapstream demo`, from the outside, over its
//! bridge's TCP port on this machine:
//!
//! ```text
//! gapstream demo --viewer none --keys-dir /tmp/gs-keys         # the black box: drone, bridge, a receiver
//! cargo run --release -p gapstream --example session_attacks -- 127.0.0.1:5000 /tmp/gs-keys
//! ```
//!
//! The victims are real receivers (the code of `gapstream view`, in this process) with two of the
//! demo's spare receiver keys (`receiver2.key`, `receiver3.key`), connected through a
//! man-in-the-middle proxy on 127.0.0.1 that plays the attacker on the WiFi: it sees everything,
//! records, and writes what it likes towards the receiver. The drone is never touched.
//!
//! - attack 2: the proxy answers every HELLO of the victim with 3 forged ACCEPTs (its hello id
//!   and key id, made-up Noise bytes) before it even forwards the HELLO to the bridge, for 6 s.
//!   Passes when the victim is established (its first authenticated message upstream, the
//!   KEY_ACK) within 1 s of the drone's real ACCEPT passing the proxy, and gets frames.
//! - attack 3: the proxy records the victim's HELLOs of three short runs; then, while the victim
//!   streams a fourth time, the attacker replays the recorded HELLOs from its own connection to
//!   the bridge, alternating, 100 a second for 10 s, and reads everything the drone sends. Passes
//!   when no ACCEPT or ALERT answers a replayed HELLO, the drone shows at most one responder
//!   handshake (an ACCEPT, or an ALERT it can only send after its Diffie-Hellman work) per receiver
//!   key in any second, and the victim loses no frame and receives frames throughout.
//!
//! Prints the figures and one line per attack; exits non-zero when one does not pass.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use gapstream::receiver::{self, Bus, Policy, ReceiverConfig, Summary, Transport};
use gapstream::run::{self, Security};
use gapstream_protocol::assembler::Assembler;
use gapstream_protocol::cpx::{self, Function, Route, StreamDecoder, Target};
use gapstream_protocol::handshake::Role;
use gapstream_protocol::suite::{KexMode, Suite};
use gapstream_protocol::wire::{self, MsgType};

type Id = [u8; 8];

/// What the proxy saw, with the time it saw it.
#[derive(Default)]
struct Seen {
    /// HELLOs of the victim (whole messages), as they went upstream.
    hellos: Vec<(Instant, Vec<u8>)>,
    /// Hello ids of the drone's ACCEPTs as they went to the victim.
    accepts: Vec<(Instant, Id)>,
    /// Session ids of the victim's control messages as they went upstream.
    controls: Vec<(Instant, Id)>,
    forged: u64,
}

/// What [`Splitter::feed`] calls for each packet: its route, its payload, the messages it completed.
type OnPacket<'a> = dyn FnMut(Route, &[u8], Vec<Vec<u8>>) + 'a;

/// CPX packets and whole messages out of a TCP byte stream.
struct Splitter {
    dec: StreamDecoder,
    asm: Assembler,
}

impl Splitter {
    fn new() -> Self {
        Splitter {
            dec: StreamDecoder::new(),
            asm: Assembler::new(8 << 20),
        }
    }
    /// Each packet of `bytes` (route, payload) and, after it, the messages it completed.
    fn feed(&mut self, bytes: &[u8], on: &mut OnPacket<'_>) {
        let asm = &mut self.asm;
        self.dec.decode_all(bytes, &mut |p| {
            let Ok(p) = p else { return };
            let _ = asm.push(p.route, p.payload);
            let mut done = Vec::new();
            while let Some(m) = asm.next_message() {
                done.push(m);
            }
            on(p.route, p.payload, done);
        });
    }
}

fn packet(route: Route, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; cpx::MAX_WIRE_PACKET];
    let n = cpx::encode_packet(route, payload, &mut out).expect("a decoded packet re-encodes");
    out.truncate(n);
    out
}

/// `m` as the CPX packets a receiver (`up`) or the bridge sends it in.
fn packets_of(m: &[u8], up: bool) -> Vec<u8> {
    let route = if up {
        Route::new(Target::WifiHost, Target::Gap8, Function::Test)
    } else {
        Route::new(Target::Gap8, Target::WifiHost, Function::Test)
    };
    let mut p =
        cpx::Packetizer::new(route, [m, &[], &[]], 1020, cpx::LastFlag::Final).expect("size");
    let mut out = Vec::new();
    let mut buf = [0u8; cpx::MAX_WIRE_PACKET];
    while let Some(n) = p.next_packet(&mut buf) {
        out.extend_from_slice(&buf[..n.expect("fits")]);
    }
    out
}

/// An ACCEPT made up for `hello`: its hello id and key id, 56 Noise bytes of our own (the length of
/// an X25519-mode ACCEPT's).
fn forged_accept(hello: &[u8], salt: u64) -> Vec<u8> {
    let mut m = wire::HandshakeHeader {
        msg_type: MsgType::Accept,
        hello_id: hello[4..12].try_into().expect("a HELLO"),
        key_id: hello[12..16].try_into().expect("a HELLO"),
        noise_len: 56,
    }
    .encode()
    .to_vec();
    let mut x = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..56 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        m.push(x as u8);
    }
    m
}

/// The man in the middle between one receiver and the bridge. With `forge`, every HELLO going up
/// is first answered towards the receiver with that many forged ACCEPTs (written between two of
/// the bridge's messages, never inside one).
struct Proxy {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    fn start(bridge: SocketAddr, forge: usize) -> Result<Proxy, String> {
        let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("proxy: {e}"))?;
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st) = (seen.clone(), stop.clone());
        thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        if let Ok(b) = TcpStream::connect(bridge) {
                            relay(client, b, forge, s2.clone(), st.clone());
                        }
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(Proxy { addr, seen, stop })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Relays one connection both ways (two threads), packet by packet.
fn relay(
    client: TcpStream,
    bridge: TcpStream,
    forge: usize,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
) {
    let _ = client.set_nodelay(true);
    let _ = bridge.set_nodelay(true);
    // Forged ACCEPTs go through the downstream thread (it alone writes to the client), which
    // answers on the second channel once they are written.
    let (inject_tx, inject_rx) = mpsc::channel::<Vec<u8>>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (mut c_up, mut b_up) = (client.try_clone().unwrap(), bridge.try_clone().unwrap());
    let (mut c_down, mut b_down) = (client, bridge);
    let (seen_up, stop_up) = (seen.clone(), stop.clone());
    thread::spawn(move || {
        let mut sp = Splitter::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut n_forged = 0u64;
        while !stop_up.load(Ordering::Relaxed) {
            let n = match c_up.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut out: Vec<u8> = Vec::new();
            let mut ok = true;
            sp.feed(&buf[..n], &mut |route, payload, done| {
                let now = Instant::now();
                for m in &done {
                    match wire::parse_prefix(m) {
                        Ok(MsgType::Hello) => {
                            seen_up.lock().unwrap().hellos.push((now, m.clone()));
                            if forge > 0 {
                                let mut f = Vec::new();
                                for _ in 0..forge {
                                    n_forged += 1;
                                    f.extend(packets_of(&forged_accept(m, n_forged), false));
                                }
                                ok &= inject_tx.send(f).is_ok() && done_rx.recv().is_ok();
                                seen_up.lock().unwrap().forged += forge as u64;
                            }
                        }
                        Ok(t) if t.is_control() => {
                            if let Some(id) = wire::control_session(m) {
                                seen_up.lock().unwrap().controls.push((now, id));
                            }
                        }
                        _ => {}
                    }
                }
                out.extend(packet(route, payload));
            });
            if !ok || b_up.write_all(&out).is_err() {
                break;
            }
        }
        let _ = b_up.shutdown(Shutdown::Both);
        let _ = c_up.shutdown(Shutdown::Both);
    });
    thread::spawn(move || {
        let _ = b_down.set_read_timeout(Some(Duration::from_millis(2)));
        let mut sp = Splitter::new();
        let mut buf = vec![0u8; 1 << 16];
        // Inside one of the bridge's messages: no injection now.
        let mut inside = false;
        let mut pending: Vec<u8> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let mut out: Vec<u8> = Vec::new();
            let inject = |out: &mut Vec<u8>| {
                while let Ok(f) = inject_rx.try_recv() {
                    out.extend(f);
                    let _ = done_tx.send(());
                }
            };
            if !inside {
                inject(&mut out);
            }
            match b_down.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => pending.extend_from_slice(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
            let bytes = std::mem::take(&mut pending);
            sp.feed(&bytes, &mut |route, payload, done| {
                out.extend(packet(route, payload));
                inside = !route.last_packet;
                let now = Instant::now();
                for m in &done {
                    if m.get(3) == Some(&(MsgType::Accept as u8)) {
                        seen.lock()
                            .unwrap()
                            .accepts
                            .push((now, m[4..12].try_into().unwrap()));
                    }
                }
                if !inside {
                    inject(&mut out);
                }
            });
            if !out.is_empty() && c_down.write_all(&out).is_err() {
                break;
            }
        }
        let _ = c_down.shutdown(Shutdown::Both);
        let _ = b_down.shutdown(Shutdown::Both);
    });
}

/// A receiver (the code `gapstream view` runs) with key file `key`, connected to `to`, for `secs`.
struct Victim {
    thread: thread::JoinHandle<Result<Summary, receiver::ReceiverError>>,
    /// When each frame arrived.
    frames: thread::JoinHandle<Vec<Instant>>,
}

impl Victim {
    fn start(to: SocketAddr, key: &Path, secs: f64) -> Result<Victim, String> {
        let id = run::load_identity(key, Role::Receiver).map_err(|e| e.to_string())?;
        let sec = Security::Secure {
            suite: Suite::ChaCha20Poly1305,
            kex: KexMode::X25519,
        };
        let session = run::receiver_session(&sec, Some(id), 1020).map_err(|e| e.to_string())?;
        let mut bus = Bus::new();
        let sub = bus.subscribe("victim", Policy::Every(4096));
        // Arrival time of every frame, until the receiver ends (its end closes the bus).
        let frames = thread::spawn(move || {
            let mut at = Vec::new();
            while !sub.is_closed() {
                if sub.frame(Duration::from_millis(50)).is_some() {
                    at.push(Instant::now());
                }
            }
            at
        });
        let cfg = ReceiverConfig {
            duration: Some(Duration::from_secs_f64(secs)),
            idle_timeout: Duration::from_secs(3),
            ..ReceiverConfig::new(to, Transport::Tcp, session)
        };
        let thread = thread::spawn(move || receiver::run(cfg, bus));
        Ok(Victim { thread, frames })
    }
    /// Waits for the end; (summary, arrival time of every frame).
    fn finish(self) -> Result<(Summary, Vec<Instant>), String> {
        let summary = self.thread.join().map_err(|_| "receiver panicked")?;
        // The receiver's end closed the bus: the collector ends too.
        let at = self.frames.join().map_err(|_| "collector panicked")?;
        let s = summary.map_err(|e| format!("receiver: {e}"))?;
        Ok((s, at))
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn attack2(bridge: SocketAddr, keys: &Path) -> Result<bool, String> {
    let proxy = Proxy::start(bridge, 3)?;
    let v = Victim::start(proxy.addr, &keys.join(run::receiver_key_name(1)), 6.0)?;
    let (summary, frames) = v.finish()?;
    let seen = proxy.seen.lock().unwrap();
    let ids: HashSet<Id> = seen
        .hellos
        .iter()
        .map(|(_, h)| h[4..12].try_into().unwrap())
        .collect();
    let real = seen.accepts.iter().find(|(_, id)| ids.contains(id));
    let est = real.and_then(|(_, id)| seen.controls.iter().find(|(_, c)| c == id));
    println!(
        "attack 2: {} HELLO(s), {} forged ACCEPTs sent ahead of the drone's; real ACCEPT -> established (KEY_ACK): {}; frames {}, lost {}, handshakes {}",
        seen.hellos.len(),
        seen.forged,
        match (real, est) {
            (Some((ta, _)), Some((te, _))) => format!("{:.1} ms", ms(te.duration_since(*ta))),
            (Some(_), None) => "never".into(),
            _ => "no real ACCEPT".into(),
        },
        frames.len(),
        summary.counters.lost,
        summary.counters.handshakes
    );
    let pass = matches!((real, est), (Some((ta, _)), Some((te, _)))
        if te.duration_since(*ta) < Duration::from_secs(1))
        && !frames.is_empty()
        && seen.forged > 0;
    println!(
        "attack 2 (forged ACCEPT racing every HELLO): {}",
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(pass)
}

/// What the drone sent to everybody (the attacker's own connection to the bridge reads it all):
/// (time, type, hello id, key id of an ACCEPT, code of an ALERT).
type Answer = (Instant, MsgType, Id, Option<[u8; 4]>, Option<u8>);

fn attack3(bridge: SocketAddr, keys: &Path) -> Result<bool, String> {
    let key = keys.join(run::receiver_key_name(2));
    let proxy = Proxy::start(bridge, 0)?;
    // Three short runs of the victim: their HELLOs are recorded.
    for _ in 0..3 {
        let v = Victim::start(proxy.addr, &key, 1.5)?;
        v.finish()?;
        thread::sleep(Duration::from_millis(1200));
    }
    let recorded: Vec<Vec<u8>> = proxy
        .seen
        .lock()
        .unwrap()
        .hellos
        .iter()
        .map(|(_, h)| h.clone())
        .collect();
    if recorded.is_empty() {
        return Err("no HELLO recorded".into());
    }
    let replayed: HashSet<Id> = recorded
        .iter()
        .map(|h| h[4..12].try_into().unwrap())
        .collect();
    // The live victim.
    let live = Victim::start(proxy.addr, &key, 14.0)?;
    thread::sleep(Duration::from_secs(2));
    // The attacker's own connection to the bridge.
    let mut up = TcpStream::connect(bridge).map_err(|e| format!("attacker: {e}"))?;
    let mut down = up.try_clone().map_err(|e| e.to_string())?;
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let (a2, stop) = (answers.clone(), Arc::new(AtomicBool::new(false)));
    let st = stop.clone();
    let reader = thread::spawn(move || {
        let _ = down.set_read_timeout(Some(Duration::from_millis(50)));
        let mut sp = Splitter::new();
        let mut buf = vec![0u8; 1 << 16];
        while !st.load(Ordering::Relaxed) {
            let n = match down.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(_) => continue,
            };
            sp.feed(&buf[..n], &mut |_, _, done| {
                let now = Instant::now();
                for m in done {
                    match wire::parse_prefix(&m) {
                        Ok(t @ MsgType::Accept) => a2.lock().unwrap().push((
                            now,
                            t,
                            m[4..12].try_into().unwrap(),
                            Some(m[12..16].try_into().unwrap()),
                            None,
                        )),
                        Ok(t @ MsgType::Alert) if m.len() == wire::ALERT_LEN => a2
                            .lock()
                            .unwrap()
                            .push((now, t, m[4..12].try_into().unwrap(), None, Some(m[12]))),
                        _ => {}
                    }
                }
            });
        }
    });
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < Duration::from_secs(10) {
        let h = &recorded[sent as usize % recorded.len()];
        up.write_all(&packets_of(h, true))
            .map_err(|e| format!("attacker: {e}"))?;
        sent += 1;
        let next = t0 + Duration::from_millis(10 * sent);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            thread::sleep(d);
        }
    }
    let t1 = Instant::now();
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let _ = up.shutdown(Shutdown::Both);
    let (summary, frames) = live.finish()?;
    let answers = answers.lock().unwrap();
    let to_replays = answers
        .iter()
        .filter(|(_, _, id, _, _)| replayed.contains(id))
        .count();
    let accepts_to_replays = answers
        .iter()
        .filter(|(_, t, id, _, _)| *t == MsgType::Accept && replayed.contains(id))
        .count();
    // Responder handshakes the drone showed, per receiver key and second of the attack: ACCEPTs
    // (key id in the header) and the ALERTs it sends only after its Diffie-Hellman work (codes 2,
    // 3, 4, 5; code 1 may also answer a HELLO whose MAC fails, before any), attributed to the key
    // of the HELLO they answer where the attacker knows it.
    let key_of: BTreeMap<Id, [u8; 4]> = recorded
        .iter()
        .chain(proxy.seen.lock().unwrap().hellos.iter().map(|(_, h)| h))
        .map(|h| (h[4..12].try_into().unwrap(), h[12..16].try_into().unwrap()))
        .collect();
    let mut per_key_second: BTreeMap<([u8; 4], u64), u32> = BTreeMap::new();
    for (t, ty, id, kid, code) in answers.iter() {
        let dh = *ty == MsgType::Accept || matches!(code, Some(2..=5));
        let Some(k) = kid.or_else(|| key_of.get(id).copied()) else {
            continue;
        };
        if dh && *t >= t0 && *t <= t1 {
            *per_key_second
                .entry((k, t.duration_since(t0).as_secs()))
                .or_default() += 1;
        }
    }
    let max_dh = per_key_second.values().copied().max().unwrap_or(0);
    let during = frames.iter().filter(|t| **t >= t0 && **t <= t1).count();
    let seconds = t1.duration_since(t0).as_secs_f64();
    println!(
        "attack 3: {} recorded HELLO(s) replayed {} times in {:.1} s ({:.0}/s); answers to them: {} ({} ACCEPTs); responder handshakes seen per receiver key and second: at most {}; live receiver: {} frames during the replays ({:.1} fps), {} in all, lost {}, handshakes {}",
        recorded.len(),
        sent,
        seconds,
        sent as f64 / seconds,
        to_replays,
        accepts_to_replays,
        max_dh,
        during,
        during as f64 / seconds,
        summary.counters.frames,
        summary.counters.lost,
        summary.counters.handshakes
    );
    let pass = to_replays == 0
        && max_dh <= 1
        && summary.counters.lost == 0
        && during as f64 >= seconds
        && summary.counters.handshakes == 1;
    println!(
        "attack 3 (recorded HELLOs replayed at 100/s): {}",
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(pass)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(bridge), Some(keys)) = (args.first(), args.get(1)) else {
        eprintln!(
            "usage: session_attacks BRIDGE_TCP KEYS_DIR   (e.g. 127.0.0.1:5000 /tmp/gs-keys, from `gapstream demo --keys-dir /tmp/gs-keys`)"
        );
        return ExitCode::from(2);
    };
    let Ok(bridge) = bridge.parse::<SocketAddr>() else {
        eprintln!("session_attacks: {bridge} is not an address:port");
        return ExitCode::from(2);
    };
    let keys = PathBuf::from(keys);
    let mut ok = true;
    for (name, attack) in [
        (
            "attack 2",
            attack2 as fn(SocketAddr, &Path) -> Result<bool, String>,
        ),
        ("attack 3", attack3),
    ] {
        match attack(bridge, &keys) {
            Ok(p) => ok &= p,
            Err(e) => {
                eprintln!("session_attacks: {name}: {e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
