//! The registration against an attacker on the WiFi, exhaustively and on a simulated clock: the
//! bridge (forwarding core + [`Gate`]) and any number of addresses exchange datagrams through
//! [`Sim`], which records every datagram the bridge sends, to whom and when. Receivers run the
//! real [`Client`] state machine; attackers send whatever they can make.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec;
use alloc::vec::Vec;
use core::net::SocketAddr;

use proptest::prelude::*;

use super::*;
use crate::cpx::{Route, Target, encode_packet};
use crate::forward::{Bridge, ClientId, Config};

/// What the bridge sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Cookie,
    Welcome,
    Probe,
    Stream,
}

fn kind(d: &[u8]) -> Kind {
    match Control::parse(d) {
        Some(Control::Cookie(_)) => Kind::Cookie,
        Some(Control::Welcome(_)) => Kind::Welcome,
        Some(Control::Probe(_)) => Kind::Probe,
        Some(c) => panic!("the bridge sent {c:?}"),
        None => {
            assert!(!is_control(d), "the bridge sent {d:?}");
            Kind::Stream
        }
    }
}

fn sa(a: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((a, port))
}

/// A two-packet message from the GAP8 (a small frame).
fn frame(tag: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, last) in [(0u8, false), (1, true)] {
        let h = Route {
            destination: Target::WifiHost as u8,
            source: Target::Gap8 as u8,
            last_packet: last,
            function: 0x0E,
        };
        encode_packet(h, &[tag ^ i; 300], &mut out);
    }
    out
}

/// The bridge on a simulated clock, and the network around it.
struct Sim {
    bridge: Bridge,
    gate: Gate,
    now: u64,
    next_frame: u64,
    tag: u8,
    /// Every datagram the bridge sent: when, to whom, what, how long.
    log: Vec<(u64, SocketAddr, Kind, usize)>,
    /// What arrived at the addresses the test listens at.
    inbox: BTreeMap<SocketAddr, VecDeque<Vec<u8>>>,
}

impl Sim {
    fn new(gate: GateConfig, core: Config) -> Sim {
        Sim {
            bridge: Bridge::new(core),
            gate: Gate::new([0x5A; 32], gate),
            now: 1_000,
            next_frame: 1_000,
            tag: 0,
            log: Vec::new(),
            inbox: BTreeMap::new(),
        }
    }

    fn listen(&mut self, a: SocketAddr) {
        self.inbox.entry(a).or_default();
    }

    fn deliver(&mut self, to: SocketAddr, d: &[u8]) {
        self.log.push((self.now, to, kind(d), d.len()));
        if let Some(q) = self.inbox.get_mut(&to) {
            q.push_back(d.to_vec());
        }
    }

    /// A datagram from `peer` reaches the bridge.
    fn send(&mut self, peer: SocketAddr, d: &[u8]) -> Outcome {
        let o = self.gate.datagram(&mut self.bridge, peer, d, self.now);
        match &o {
            Outcome::Reply(r) => {
                assert!(r.len() <= d.len(), "a reply larger than the datagram");
                self.deliver(peer, &r.clone());
            }
            Outcome::Registered { welcome, .. } => self.deliver(peer, &welcome.clone()),
            _ => {}
        }
        o
    }

    /// `dt` ms pass: the GAP8 sends a frame every 33 ms, the gate's timers run, and every
    /// client whose registration is current gets what is queued for it.
    fn step(&mut self, dt: u64) {
        self.now += dt;
        while self.next_frame <= self.now {
            self.tag = self.tag.wrapping_add(1);
            self.bridge.spi_received(&frame(self.tag));
            self.next_frame += 33;
        }
        let mut events = Vec::new();
        let now = self.now;
        self.gate
            .poll(&mut self.bridge, now, || None, |e| events.push(e));
        for e in events {
            if let Event::Probe(a, d) = e {
                self.deliver(a, &d);
            }
        }
        let clients: Vec<(SocketAddr, ClientId)> = self.gate.clients().collect();
        for (a, id) in clients {
            while self.gate.sendable(id, self.now) {
                let Some((bytes, r)) = self.bridge.next_for_client(id) else {
                    break;
                };
                let n = r.len();
                self.deliver(a, &bytes[r]);
                self.bridge.client_sent(id, n);
            }
        }
    }

    fn take(&mut self, a: SocketAddr) -> Vec<Vec<u8>> {
        self.inbox
            .get_mut(&a)
            .map(|q| q.drain(..).collect())
            .unwrap_or_default()
    }

    /// Runs receiver `c` at `a` once: reads what arrived, sends what it has to. The number of
    /// stream datagrams that arrived.
    fn drive(&mut self, a: SocketAddr, c: &mut Client) -> usize {
        let mut data = 0;
        for d in self.take(a) {
            data += usize::from(c.handle(&d, self.now) == Received::Data);
        }
        while let Some(d) = c.poll_transmit(self.now) {
            self.send(a, &d);
        }
        data
    }

    /// What the bridge sent to `a` from time `from` on.
    fn sent_to(&self, a: SocketAddr, from: u64) -> Vec<(u64, Kind, usize)> {
        self.log
            .iter()
            .filter(|(t, to, ..)| *to == a && *t >= from)
            .map(|(t, _, k, n)| (*t, *k, *n))
            .collect()
    }
}

/// Registers a receiver at `a` (running the others in `keep` meanwhile); the time it took.
fn register(sim: &mut Sim, a: SocketAddr, keep: &mut [(SocketAddr, Client)]) -> (Client, u64) {
    sim.listen(a);
    let start = sim.now;
    let mut c = Client::new(ClientConfig::default(), sim.now);
    while c.status(sim.now) == Status::Registering {
        sim.drive(a, &mut c);
        for (x, k) in keep.iter_mut() {
            sim.drive(*x, k);
        }
        sim.step(10);
        sim.drive(a, &mut c);
    }
    assert_eq!(c.status(sim.now), Status::Registered, "{a}");
    (c, sim.now - start)
}

/// A tiny deterministic generator for the attackers' noise.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        core::array::from_fn(|_| self.next() as u8)
    }
}

/// Everything an off-path attacker can send as `victim` at `now`: junk, the old empty
/// keep-alive, requests, CPX, and every datagram of the exchange carrying made-up tokens, tokens
/// the bridge sent to the attacker's own addresses (`own`) and variations of those.
fn off_path(now: u64, own: &[Token], noise: &mut Noise) -> Vec<Vec<u8>> {
    let mut out = vec![
        vec![],
        vec![0x55],
        noise.bytes::<24>().to_vec(),
        b"GSCW".to_vec(),
        Control::Request.encode().to_vec(),
        frame(7)[..304].to_vec(),
    ];
    let mut tokens = vec![
        Token {
            issued: now as u32,
            mac: noise.bytes(),
        },
        Token {
            issued: noise.next() as u32,
            mac: noise.bytes(),
        },
    ];
    for t in own {
        tokens.push(*t);
        tokens.push(Token {
            issued: t.issued.wrapping_add(1 + (noise.next() % 3000) as u32),
            ..*t
        });
        let mut flipped = *t;
        flipped.mac[(noise.next() % 16) as usize] ^= 1 << (noise.next() % 8);
        tokens.push(flipped);
    }
    for t in tokens {
        for c in [
            Control::Echo(t),
            Control::Alive(t),
            Control::Leave(t),
            Control::Cookie(t),
            Control::Welcome(t),
            Control::Probe(t),
        ] {
            out.push(c.encode().to_vec());
        }
    }
    out
}

/// The tokens the bridge sent to `a` (the attacker's own address).
fn tokens_in(d: &[Vec<u8>]) -> Vec<Token> {
    d.iter()
        .filter_map(|d| match Control::parse(d) {
            Some(Control::Cookie(t) | Control::Welcome(t) | Control::Probe(t)) => Some(t),
            _ => None,
        })
        .collect()
}

/// A victim registered once and went silent; an off-path attacker, itself a registered client
/// of the bridge (so it holds real tokens for its own addresses), sends as the victim, every
/// 10 ms for 12 s, everything of [`off_path`]. From the victim's deadline on (5 s after its
/// cookie's issue, so at most 5 s after its registration) the bridge sends the victim nothing
/// but the cookies answering the attacker's requests, byte for byte no more than those requests.
#[test]
fn attack1_spoofed_keepalives_do_not_refresh_a_registration() {
    let cfg = GateConfig::default();
    let mut sim = Sim::new(cfg, Config::default());
    let (victim, attacker, attacker2) = (
        sa([10, 0, 0, 7], 5000),
        sa([10, 0, 0, 66], 4000),
        sa([10, 0, 0, 66], 4001),
    );
    let (ac, _) = register(&mut sim, attacker, &mut []);
    sim.listen(attacker2);
    let mut keep = [(attacker, ac)];
    let (_silent, _) = register(&mut sim, victim, &mut keep);
    let [(_, mut ac)] = keep;
    let t0 = sim.now;
    let mut noise = Noise(0x9E37_79B9_7F4A_7C15);
    let mut own: Vec<Token> = Vec::new();
    let mut request_bytes_after_deadline = 0;
    let deadline = t0 + cfg.timeout_ms;
    while sim.now < t0 + 12_000 {
        // The attacker's own receivers: its registration, and cookies for a second port.
        let mine = sim.take(attacker);
        own.extend(tokens_in(&mine));
        for d in &mine {
            ac.handle(d, sim.now);
        }
        while let Some(d) = ac.poll_transmit(sim.now) {
            sim.send(attacker, &d);
        }
        sim.send(attacker2, &Control::Request.encode());
        own.extend(tokens_in(&sim.take(attacker2)));
        let recent = own[own.len().saturating_sub(6)..].to_vec();
        for d in off_path(sim.now, &recent, &mut noise) {
            if sim.now >= deadline && Control::parse(&d) == Some(Control::Request) {
                request_bytes_after_deadline += d.len();
            }
            sim.send(victim, &d);
        }
        sim.step(10);
    }
    let before: Vec<_> = sim.sent_to(victim, 0);
    assert!(before.iter().any(|x| x.1 == Kind::Stream));
    let after = sim.sent_to(victim, deadline);
    let not_cookies: Vec<_> = after.iter().filter(|x| x.1 != Kind::Cookie).collect();
    assert!(
        not_cookies.is_empty(),
        "{} datagrams after the deadline, first {:?}",
        not_cookies.len(),
        not_cookies.first()
    );
    let cookie_bytes: usize = after.iter().map(|x| x.2).sum();
    assert!(cookie_bytes <= request_bytes_after_deadline);
    assert!(!sim.gate.clients().any(|(a, _)| a == victim));
    assert_eq!(
        ac.status(sim.now),
        Status::Registered,
        "the attacker's own client is fine"
    );
    assert!(own.len() > 1000, "{} own tokens replayed", own.len());
    assert!(sim.gate.stats().bad_tokens > 10_000);
}

/// One attacker action: a delay, then a datagram as the victim.
#[derive(Clone, Debug)]
enum Spoof {
    Bytes(Vec<u8>),
    /// A datagram of the exchange (magic index) with a made-up token issued `age` ms ago.
    MadeUp(u8, u16, [u8; 16]),
    /// A datagram of the exchange with one of the attacker's own tokens, its issue time moved by
    /// `shift` and, if `flip` < 128, one MAC bit flipped.
    Own(u8, usize, i16, u8),
    Request,
}

fn spoof_strategy() -> impl Strategy<Value = (u8, Spoof)> {
    let spoof = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Spoof::Bytes),
        (0u8..7, any::<u16>(), any::<[u8; 16]>()).prop_map(|(m, a, t)| Spoof::MadeUp(m, a, t)),
        (0u8..7, any::<usize>(), any::<i16>(), any::<u8>())
            .prop_map(|(m, i, s, f)| Spoof::Own(m, i, s, f)),
        Just(Spoof::Request),
    ];
    (0u8..60, spoof)
}

fn with_magic(m: u8, t: Token) -> Control {
    match m % 7 {
        0 => Control::Echo(t),
        1 => Control::Alive(t),
        2 => Control::Leave(t),
        3 => Control::Cookie(t),
        4 => Control::Welcome(t),
        5 => Control::Probe(t),
        _ => Control::Request,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Attack 1, any schedule: whatever an off-path attacker sends as the victim, when, the
    /// victim's registration ends at its deadline and nothing but cookies answering requests
    /// follows.
    #[test]
    fn attack1_no_off_path_schedule_extends_a_registration(
        plan in proptest::collection::vec(spoof_strategy(), 1..400),
    ) {
        let cfg = GateConfig::default();
        let mut sim = Sim::new(cfg, Config::default());
        let (victim, attacker) = (sa([10, 0, 0, 7], 5000), sa([10, 0, 0, 66], 4000));
        let (ac, _) = register(&mut sim, attacker, &mut []);
        let mut keep = [(attacker, ac)];
        register(&mut sim, victim, &mut keep);
        let [(_, mut ac)] = keep;
        let deadline = sim.now + cfg.timeout_ms;
        let mut own: Vec<Token> = Vec::new();
        let mut requests_after = 0usize;
        for (delay, s) in plan {
            for _ in 0..delay {
                let mine = sim.take(attacker);
                own.extend(tokens_in(&mine));
                for d in &mine {
                    ac.handle(d, sim.now);
                }
                while let Some(d) = ac.poll_transmit(sim.now) {
                    sim.send(attacker, &d);
                }
                sim.step(5);
            }
            let d: Vec<u8> = match s {
                Spoof::Bytes(b) => b,
                Spoof::MadeUp(m, age, mac) => with_magic(m, Token {
                    issued: (sim.now as u32).wrapping_sub(u32::from(age)),
                    mac,
                }).encode().to_vec(),
                Spoof::Own(m, i, shift, flip) if !own.is_empty() => {
                    let mut t = own[i % own.len()];
                    t.issued = t.issued.wrapping_add(shift as i32 as u32);
                    if flip < 128 {
                        t.mac[usize::from(flip % 16)] ^= 1 << (flip % 8);
                    }
                    with_magic(m, t).encode().to_vec()
                }
                Spoof::Own(..) | Spoof::Request => Control::Request.encode().to_vec(),
            };
            if sim.now >= deadline && Control::parse(&d) == Some(Control::Request) {
                requests_after += d.len();
            }
            sim.send(victim, &d);
        }
        while sim.now < deadline + 100 {
            sim.step(10);
        }
        let after = sim.sent_to(victim, deadline);
        prop_assert!(after.iter().all(|x| x.1 == Kind::Cookie), "{:?}", after.first());
        prop_assert!(after.iter().map(|x| x.2).sum::<usize>() <= requests_after);
        prop_assert!(!sim.gate.clients().any(|(a, _)| a == victim));
    }
}

/// Attack 4: 7 registrations held from 4 addresses (receivers answering their probes) while
/// spoofed cookie requests run at 50/s from the legitimate receiver's IP and at 400/s from 250
/// other addresses: the receiver registers and gets stream data within 2 s, every holder keeps
/// its registration. With the demo's budgets (8 UDP slots, 8 per IP) and with the defaults' 2
/// per IP, for 8 flood phases (when the floods' datagrams arrive relative to the receiver's,
/// seeded).
#[test]
fn attack4_udp_receivers_cannot_be_locked_out() {
    for seed in 1..=8u64 {
        for per_ip in [8, 2] {
            attack4_run(seed, per_ip);
        }
    }
}

fn attack4_run(seed: u64, per_ip: usize) {
    let cfg = GateConfig {
        clients_per_ip: per_ip,
        ..GateConfig::default()
    };
    let mut sim = Sim::new(
        cfg,
        Config {
            max_udp_clients: 8,
            ..Config::default()
        },
    );
    let mut holders: Vec<(SocketAddr, Client)> = Vec::new();
    for i in 0..7u8 {
        let a = sa([10, 0, 1, 1 + i % 4], 6000 + u16::from(i));
        let (c, _) = register(&mut sim, a, &mut holders);
        holders.push((a, c));
    }
    let victim = sa([10, 0, 0, 7], 5000);
    let mut noise = Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (phase_a, phase_b) = (noise.next() % 20, noise.next() % 3);
    let flood_start = sim.now;
    let (mut same_ip, mut many) = (0u64, 0u64);
    let mut rx: Option<(Client, u64)> = None;
    let mut first_data = None;
    while sim.now < flood_start + 3_000 {
        let t = sim.now - flood_start;
        let mut batch = Vec::new();
        while same_ip < (t + phase_a) * 50 / 1000 {
            // Other ports of its IP: what drains a budget kept per IP (a request with its very
            // address would only send the receiver a cookie, which helps it).
            let port = 5001 + (noise.next() % 60_000) as u16;
            batch.push(sa([10, 0, 0, 7], port));
            same_ip += 1;
        }
        while many < (t + phase_b) * 400 / 1000 {
            batch.push(sa([10, 0, 2, 1 + (many % 250) as u8], 7000));
            many += 1;
        }
        // The floods' datagrams of this step arrive partly before, partly after the others.
        let split = (noise.next() % (batch.len() as u64 + 1)) as usize;
        for a in &batch[..split] {
            sim.send(*a, &Control::Request.encode());
        }
        for (a, c) in holders.iter_mut() {
            sim.drive(*a, c);
        }
        if t >= 1_000 && rx.is_none() {
            sim.listen(victim);
            rx = Some((Client::new(ClientConfig::default(), sim.now), sim.now));
        }
        if let Some((c, start)) = &mut rx
            && sim.drive(victim, c) > 0
            && first_data.is_none()
        {
            first_data = Some(sim.now - *start);
        }
        for a in &batch[split..] {
            sim.send(*a, &Control::Request.encode());
        }
        sim.step(5);
    }
    let took = first_data.unwrap_or_else(|| {
        panic!("seed {seed}, {per_ip} per IP: the receiver got no stream data in 2 s")
    });
    assert!(took <= 2_000, "seed {seed}, {per_ip} per IP: {took} ms");
    for (a, c) in &holders {
        assert_eq!(c.status(sim.now), Status::Registered, "{a}");
    }
    assert_eq!(sim.gate.len(), 8);
    assert!(same_ip >= 149 && many >= 1190, "{same_ip} {many}");
}

/// Far above the cookie budget (20,000 spoofed requests a second from 1000 addresses, plus
/// spoofed alives and echoes as each holder): registered clients keep their registrations and
/// their stream, and the bridge sends at most its cookie budget to unproven addresses.
#[test]
fn registered_clients_keep_their_stream_whatever_unproven_traffic_arrives() {
    let cfg = GateConfig::default();
    let mut sim = Sim::new(cfg, Config::default());
    let mut holders: Vec<(SocketAddr, Client)> = Vec::new();
    for i in 0..4u8 {
        let a = sa([10, 0, 1, 1 + i / 2], 6000 + u16::from(i));
        let (c, _) = register(&mut sim, a, &mut holders);
        holders.push((a, c));
    }
    let start = sim.now;
    let mut noise = Noise(7);
    let mut k = 0u64;
    let mut seen = [0usize; 4];
    while sim.now < start + 10_000 {
        for _ in 0..100 {
            let a = sa([10, 3, (k / 250 % 4) as u8, (k % 250) as u8], 9);
            sim.send(a, &Control::Request.encode());
            k += 1;
        }
        for (i, (a, c)) in holders.iter_mut().enumerate() {
            let t = Token {
                issued: sim.now as u32,
                mac: noise.bytes(),
            };
            sim.send(*a, &Control::Alive(t).encode());
            sim.send(*a, &Control::Echo(t).encode());
            seen[i] += sim.drive(*a, c);
        }
        sim.step(5);
    }
    for (a, c) in &holders {
        assert_eq!(c.status(sim.now), Status::Registered, "{a}");
    }
    // 30 two-packet frames a second for 10 s.
    assert!(seen.iter().all(|&n| n > 550), "{seen:?}");
    let cookies = sim.log.iter().filter(|x| x.2 == Kind::Cookie).count();
    assert!(cookies as u64 <= 10 * u64::from(cfg.cookies_per_sec) + u64::from(cfg.cookies_per_sec));
    assert!(sim.gate.stats().over_cookie_budget > 100_000);
}

/// All 8 slots held by receivers that answer their probes: a newcomer gets none. One goes
/// silent: once its newest proof is older than `stale_ms`, the next newcomer takes exactly its
/// slot; the live ones are never evicted.
#[test]
fn a_newcomer_takes_only_a_stale_slot() {
    let cfg = GateConfig {
        clients_per_ip: 8,
        ..GateConfig::default()
    };
    let mut sim = Sim::new(
        cfg,
        Config {
            max_udp_clients: 8,
            ..Config::default()
        },
    );
    let mut holders: Vec<(SocketAddr, Client)> = Vec::new();
    for i in 0..8u8 {
        let a = sa([10, 0, 1, 1 + i], 6000);
        let (c, _) = register(&mut sim, a, &mut holders);
        holders.push((a, c));
    }
    let newcomer = sa([10, 0, 9, 9], 5000);
    sim.listen(newcomer);
    let mut c = Client::new(ClientConfig::default(), sim.now);
    while c.status(sim.now) == Status::Registering {
        sim.drive(newcomer, &mut c);
        for (a, h) in holders.iter_mut() {
            sim.drive(*a, h);
        }
        sim.step(10);
    }
    assert_eq!(c.status(sim.now), Status::TimedOut, "no slot is free");
    assert!(sim.gate.stats().refused > 0);
    // Holder 3 goes silent.
    let (silent, _) = holders.remove(3);
    let silent_since = sim.now;
    let mut c = Client::new(ClientConfig::default(), sim.now);
    let mut registered_at = None;
    while sim.now < silent_since + 4_000 {
        sim.drive(newcomer, &mut c);
        for (a, h) in holders.iter_mut() {
            sim.drive(*a, h);
        }
        if registered_at.is_none() && c.status(sim.now) == Status::Registered {
            registered_at = Some(sim.now);
        }
        if c.status(sim.now) == Status::TimedOut {
            c = Client::new(ClientConfig::default(), sim.now);
        }
        sim.step(10);
    }
    let at = registered_at.expect("the newcomer never registered");
    assert!(
        at - silent_since > cfg.stale_ms - 1_000,
        "{}",
        at - silent_since
    );
    assert_eq!(sim.gate.stats().evicted, 1);
    assert!(!sim.gate.clients().any(|(a, _)| a == silent));
    for (a, h) in &holders {
        assert_eq!(h.status(sim.now), Status::Registered, "{a}");
        assert!(sim.gate.clients().any(|(x, _)| x == *a));
    }
}

/// Per IP address: at most `clients_per_ip` registrations; spoofed echoes with bad cookies from
/// that IP cost it nothing (its registration budget counts only valid echoes).
#[test]
fn per_address_limits_count_only_proven_registrations() {
    let cfg = GateConfig::default();
    let mut sim = Sim::new(cfg, Config::default());
    let mut held: Vec<(SocketAddr, Client)> = Vec::new();
    for port in [1, 2] {
        let a = sa([10, 0, 0, 5], port);
        let (c, _) = register(&mut sim, a, &mut held);
        held.push((a, c));
    }
    // Thousands of bad echoes and requests as other ports of that IP.
    let mut noise = Noise(99);
    for i in 0..5_000u16 {
        let t = Token {
            issued: sim.now as u32,
            mac: noise.bytes(),
        };
        sim.send(sa([10, 0, 0, 5], 100 + i), &Control::Echo(t).encode());
        sim.send(sa([10, 0, 0, 5], 100 + i), &Control::Request.encode());
    }
    sim.step(1_000);
    for (a, c) in held.iter_mut() {
        sim.drive(*a, c);
    }
    // A third from that IP: refused while the two are live.
    let third = sa([10, 0, 0, 5], 3);
    sim.listen(third);
    sim.send(third, &Control::Request.encode());
    let c = tokens_in(&sim.take(third))[0];
    assert_eq!(
        sim.send(third, &Control::Echo(c).encode()),
        Outcome::Refused(Refusal::AddressFull)
    );
    // One leaves (with its own current token): the third registers at once.
    let (a, mut c1) = held.remove(0);
    let leave = c1.leave().unwrap();
    assert!(matches!(sim.send(a, &leave), Outcome::Left(_)));
    sim.send(third, &Control::Request.encode());
    let c = tokens_in(&sim.take(third))[0];
    assert!(matches!(
        sim.send(third, &Control::Echo(c).encode()),
        Outcome::Registered { evicted: None, .. }
    ));
    // The registration rate per IP: burst 4, then 2 a second (valid echoes only).
    let mut cfg = cfg;
    cfg.clients_per_ip = 100;
    let mut sim = Sim::new(
        cfg,
        Config {
            max_udp_clients: 8,
            ..Config::default()
        },
    );
    let mut outcomes = Vec::new();
    for port in 0..6 {
        let a = sa([10, 0, 0, 6], 40 + port);
        sim.listen(a);
        sim.send(a, &Control::Request.encode());
        let c = tokens_in(&sim.take(a))[0];
        outcomes.push(sim.send(a, &Control::Echo(c).encode()));
    }
    let ok = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Registered { .. }))
        .count();
    assert_eq!(ok, 4, "{outcomes:?}");
    assert_eq!(outcomes[4], Outcome::Refused(Refusal::RegistrationRate));
    assert_eq!(outcomes[5], Outcome::Refused(Refusal::RegistrationRate));
}

/// A leave or an alive needs a current token of that address: a made-up one, another
/// address's, or one older than the timeout changes nothing.
#[test]
fn leave_and_alive_need_a_current_token_of_that_address() {
    let cfg = GateConfig::default();
    let mut sim = Sim::new(cfg, Config::default());
    let (a, b) = (sa([10, 0, 0, 1], 1), sa([10, 0, 0, 2], 1));
    let (ca, _) = register(&mut sim, a, &mut []);
    let mut keep = [(a, ca)];
    let (_cb, _) = register(&mut sim, b, &mut keep);
    let [(_, mut ca)] = keep;
    sim.step(1_000);
    let tb = tokens_in(&sim.take(b));
    let ta = tokens_in(&sim.take(a));
    let (tb, ta) = (*tb.last().unwrap(), *ta.last().unwrap());
    for t in [tb, Token { mac: [1; 16], ..ta }] {
        for c in [Control::Leave(t), Control::Alive(t)] {
            assert_eq!(
                sim.send(a, &c.encode()),
                Outcome::Refused(Refusal::BadToken)
            );
        }
    }
    assert!(matches!(
        sim.send(a, &Control::Alive(ta).encode()),
        Outcome::Refreshed(_)
    ));
    // Too old: the timeout has passed since its issue (the bridge dropped `a` by then too).
    for d in sim.take(a) {
        ca.handle(&d, sim.now);
    }
    sim.step(cfg.timeout_ms + 10);
    assert!(!sim.gate.clients().any(|(x, _)| x == a));
    assert_eq!(
        sim.send(a, &Control::Leave(ta).encode()),
        Outcome::Refused(Refusal::NotRegistered)
    );
}

/// The stream goes only to registered addresses, probes once a second each, and nothing of the
/// stream after a registration's deadline even when the timers run late.
#[test]
fn probes_every_second_and_no_stream_after_the_deadline() {
    let cfg = GateConfig::default();
    let mut sim = Sim::new(cfg, Config::default());
    let a = sa([10, 0, 0, 1], 1);
    let (_c, _) = register(&mut sim, a, &mut []);
    let t0 = sim.now;
    // Silent: probes at about 1 s intervals until the deadline, then nothing.
    while sim.now < t0 + 8_000 {
        sim.step(10);
    }
    let probes: Vec<u64> = sim
        .sent_to(a, t0)
        .iter()
        .filter(|x| x.1 == Kind::Probe)
        .map(|x| x.0)
        .collect();
    assert!((4..=5).contains(&probes.len()), "{probes:?}");
    assert!(
        probes
            .windows(2)
            .all(|w| w[1] - w[0] == cfg.probe_interval_ms)
    );
    let last = sim.sent_to(a, 0).last().unwrap().0;
    assert!(last < t0 + cfg.timeout_ms, "{last} vs {t0}");
    // Timers late by seconds: `sendable` still stops the stream at the deadline.
    let mut sim = Sim::new(cfg, Config::default());
    let (_c, _) = register(&mut sim, a, &mut []);
    let id = sim.gate.clients().next().unwrap().1;
    let t0 = sim.now;
    assert!(sim.gate.sendable(id, t0));
    assert!(!sim.gate.sendable(id, t0 + cfg.timeout_ms));
    let next = sim.gate.next_timeout().unwrap();
    assert!(
        next > t0 && next <= t0 + cfg.probe_interval_ms,
        "{next} {t0}"
    );
}
