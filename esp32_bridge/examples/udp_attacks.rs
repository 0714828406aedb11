//! Attacks 1 and 4 on a running bridge's UDP registration, from the outside, on the machine that
//! runs it (the attackers' and holders' addresses are 127.0.x.y, all loopback on Linux):
//!
//! ```text
//! gapstream demo --transport udp            # or esp32-bridge with a drone; UDP on 127.0.0.1:5000
//! cargo run --release -p esp32_bridge --example udp_attacks -- 127.0.0.1:5000 --holders 6
//! ```
//!
//! (The demo's own receiver holds one of its 8 UDP slots: with `--holders 6`, 7 registrations
//! are held besides the new receiver's. Against a bridge without receivers, the default 7.)
//!
//! - attack 1: a victim registers once and goes silent (it only listens); for 9 s an attacker
//!   sends, from the victim's own socket, ten rounds a second of what an off-path attacker can
//!   make (empty keep-alives, junk, requests, CPX, echoes/alives/leaves with made-up tokens and
//!   with the tokens of the attacker's own registration). Passes when the victim gets nothing
//!   after 6 s but cookies answering the attacker's requests, no more bytes than those.
//! - attack 4: N (default 7) registrations held from 4 addresses (answering their probes), spoofed cookie
//!   requests at 50/s from the receiver's IP and 400/s from 250 addresses; after 1 s a receiver
//!   registers. Passes when it gets a stream packet within 2 s.
//!
//! Prints one line per attack; exits non-zero when one does not pass.

use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use esp32_bridge::cookie::{Client, ClientConfig, Control, Received, Status, Token};

fn ms(t0: Instant) -> u64 {
    t0.elapsed().as_millis() as u64
}

/// Registers `s` with the bridge as a receiver does.
fn register(s: &UdpSocket, to: SocketAddr) -> Result<(Client, Instant), String> {
    let t0 = Instant::now();
    let mut c = Client::new(ClientConfig::default(), 0);
    s.set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 2048];
    loop {
        while let Some(d) = c.poll_transmit(ms(t0)) {
            s.send_to(&d, to).map_err(|e| e.to_string())?;
        }
        match c.status(ms(t0)) {
            Status::Registered => return Ok((c, t0)),
            Status::Registering => {}
            st => return Err(format!("registration {st:?}")),
        }
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            c.handle(&buf[..n], ms(t0));
        }
    }
}

fn bind(a: &str) -> Result<UdpSocket, String> {
    UdpSocket::bind(a).map_err(|e| format!("bind {a}: {e}"))
}

fn attack1(to: SocketAddr) -> Result<bool, String> {
    let attacker = bind("127.0.0.1:0")?;
    let (mut ac, at0) = register(&attacker, to)?;
    attacker.set_nonblocking(true).map_err(|e| e.to_string())?;
    let victim = bind("127.0.0.1:0")?;
    register(&victim, to)?;
    let t0 = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let rx = victim.try_clone().map_err(|e| e.to_string())?;
    rx.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| e.to_string())?;
    let d = done.clone();
    let listener = thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while !d.load(Ordering::Relaxed) {
            if let Ok((n, _)) = rx.recv_from(&mut buf) {
                got.push((t0.elapsed(), buf[..n].to_vec()));
            }
        }
        got
    });
    let mut own: Vec<Token> = Vec::new();
    let mut buf = [0u8; 2048];
    let (mut round, mut sent_bytes, mut late_requests) = (0u32, 0usize, 0usize);
    while t0.elapsed() < Duration::from_secs(9) {
        let _ = attacker.send_to(&Control::Request.encode(), to);
        while let Ok((n, _)) = attacker.recv_from(&mut buf) {
            if let Some(Control::Cookie(t) | Control::Welcome(t) | Control::Probe(t)) =
                Control::parse(&buf[..n])
            {
                own.push(t);
            }
            ac.handle(&buf[..n], ms(at0));
        }
        while let Some(d) = ac.poll_transmit(ms(at0)) {
            let _ = attacker.send_to(&d, to);
        }
        let made_up = Token {
            issued: own.last().map_or(0, |t| t.issued),
            mac: [round as u8; 16],
        };
        let mut batch: Vec<Vec<u8>> = vec![vec![], vec![0x55], b"GSCW".to_vec()];
        batch.push(Control::Request.encode().to_vec());
        // A CPX packet towards the drone (4-byte header, 8 bytes).
        batch.push(vec![10, 0, 0x5c, 0x0e, 0x47, 0x53, 0x02, 0x23, 0, 0, 0, 0]);
        for t in own[own.len().saturating_sub(4)..]
            .iter()
            .copied()
            .chain([made_up])
        {
            for c in [Control::Echo(t), Control::Alive(t), Control::Leave(t)] {
                batch.push(c.encode().to_vec());
            }
        }
        for d in &batch {
            if t0.elapsed() > Duration::from_secs(6) && Control::parse(d) == Some(Control::Request)
            {
                late_requests += d.len();
            }
            sent_bytes += d.len();
            let _ = victim.send_to(d, to);
        }
        round += 1;
        thread::sleep(Duration::from_millis(100));
    }
    done.store(true, Ordering::Relaxed);
    if let Some(x) = ac.leave() {
        let _ = attacker.send_to(&x, to);
    }
    let got = listener.join().map_err(|_| "listener panicked")?;
    let early = got
        .iter()
        .filter(|(at, _)| *at < Duration::from_secs(2))
        .count();
    let late: Vec<&(Duration, Vec<u8>)> = got
        .iter()
        .filter(|(at, _)| *at > Duration::from_secs(6))
        .collect();
    let is_cookie = |d: &[u8]| matches!(Control::parse(d), Some(Control::Cookie(_)));
    let other: Vec<usize> = late
        .iter()
        .filter(|(_, d)| !is_cookie(d))
        .map(|(_, d)| d.len())
        .collect();
    let cookie_bytes: usize = late
        .iter()
        .filter(|(_, d)| is_cookie(d))
        .map(|(_, d)| d.len())
        .sum();
    let pass = early > 0 && other.is_empty() && cookie_bytes <= late_requests;
    println!(
        "attack 1: {}: the silent victim got {early} datagrams in its first 2 s; after 6 s {} datagrams ({} bytes) other than cookies, {cookie_bytes} cookie bytes for {late_requests} request bytes; the attacker sent {sent_bytes} bytes as the victim in {round} rounds, replaying {} tokens of its own",
        if pass { "pass" } else { "FAIL" },
        other.len(),
        other.iter().sum::<usize>(),
        own.len()
    );
    Ok(pass)
}

fn attack4(to: SocketAddr, n_holders: usize) -> Result<bool, String> {
    let mut holders = Vec::new();
    for i in 0..n_holders {
        let s = bind(&format!("127.0.1.{}:0", 1 + i % 4))?;
        let (c, t0) = register(&s, to)?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        holders.push((s, c, t0));
    }
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let keep = thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !d.load(Ordering::Relaxed) {
            for (s, c, t0) in &mut holders {
                while let Ok((n, _)) = s.recv_from(&mut buf) {
                    c.handle(&buf[..n], ms(*t0));
                }
                while let Some(x) = c.poll_transmit(ms(*t0)) {
                    let _ = s.send_to(&x, to);
                }
            }
            thread::sleep(Duration::from_millis(5));
        }
        let held = holders
            .iter()
            .filter(|(_, c, t0)| c.status(ms(*t0)) == Status::Registered)
            .count();
        for (s, c, _) in &mut holders {
            if let Some(x) = c.leave() {
                let _ = s.send_to(&x, to);
            }
        }
        held
    });
    let same_ip: Vec<UdpSocket> = (0..5)
        .map(|_| bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()?;
    let many: Vec<UdpSocket> = (0..250)
        .map(|i| bind(&format!("127.0.2.{}:0", 1 + i)))
        .collect::<Result<_, _>>()?;
    let d = done.clone();
    let flood = thread::spawn(move || {
        let req = Control::Request.encode();
        let t0 = Instant::now();
        let (mut a, mut k) = (0usize, 0usize);
        while !d.load(Ordering::Relaxed) {
            let ms = t0.elapsed().as_millis() as usize;
            while a < ms * 50 / 1000 {
                let _ = same_ip[a % same_ip.len()].send_to(&req, to);
                a += 1;
            }
            while k < ms * 400 / 1000 {
                let _ = many[k % many.len()].send_to(&req, to);
                k += 1;
            }
            thread::sleep(Duration::from_millis(2));
        }
        (a, k, t0.elapsed())
    });
    thread::sleep(Duration::from_secs(1));
    let rx = bind("127.0.0.1:0")?;
    let start = Instant::now();
    let mut took = None;
    if let Ok((mut c, t0)) = register(&rx, to) {
        let mut buf = [0u8; 2048];
        while start.elapsed() < Duration::from_secs(2) {
            while let Some(x) = c.poll_transmit(ms(t0)) {
                let _ = rx.send_to(&x, to);
            }
            if let Ok((n, _)) = rx.recv_from(&mut buf)
                && c.handle(&buf[..n], ms(t0)) == Received::Data
            {
                took = Some(start.elapsed());
                break;
            }
        }
        if let Some(x) = c.leave() {
            let _ = rx.send_to(&x, to);
        }
    }
    done.store(true, Ordering::Relaxed);
    let held = keep.join().map_err(|_| "holders panicked")?;
    let (a, k, t) = flood.join().map_err(|_| "flood panicked")?;
    let secs = t.as_secs_f64();
    let pass = took.is_some_and(|t| t <= Duration::from_secs(2));
    println!(
        "attack 4: {}: first stream packet {} after the receiver started, while {held}/{n_holders} registrations from 4 addresses stayed held and spoofed requests ran at {:.0}/s from its IP and {:.0}/s from 250 addresses",
        if pass { "pass" } else { "FAIL" },
        took.map_or("never (2 s)".to_string(), |t| format!(
            "{:.1} ms",
            t.as_secs_f64() * 1e3
        )),
        a as f64 / secs,
        k as f64 / secs
    );
    Ok(pass && held == n_holders)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: udp_attacks BRIDGE_UDP_ADDRESS [--holders N] (for example 127.0.0.1:5000)";
    let (to, n_holders) = match args.as_slice() {
        [to] => (to.clone(), 7),
        [to, flag, n] if flag == "--holders" => match n.parse() {
            Ok(n) => (to.clone(), n),
            Err(e) => {
                eprintln!("udp_attacks: error: --holders {n}: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => {
            eprintln!("{usage}");
            return ExitCode::FAILURE;
        }
    };
    let to: SocketAddr = match to.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("udp_attacks: error: {to}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for (name, result) in [
        ("attack 1", attack1(to)),
        ("attack 4", attack4(to, n_holders)),
    ] {
        match result {
            Ok(pass) => ok &= pass,
            Err(e) => {
                eprintln!("udp_attacks: error: {name}: {e}");
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
