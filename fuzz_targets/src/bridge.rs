//! The bridge's client side: what WiFi clients send (TCP bytes, UDP datagrams, the UDP
//! registration) through `esp32_bridge::cookie::Gate` and the forwarding core
//! `esp32_bridge::forward::Bridge`, with the GAP8 side and the drivers' writes driven by the
//! input too.

use std::net::SocketAddr;

use esp32_bridge::cookie::{Control, Event, Gate, GateConfig, Outcome as GateOutcome};
use esp32_bridge::cpx::{self, MessageAssembler};
use esp32_bridge::forward::{Bridge, ClientId, Config, Transport, UpstreamPolicy};

use crate::Input;

/// Operations of a record (`ctl & 7`); `ctl >> 3` picks the client (index into those connected).
pub mod op {
    pub const ADD_TCP: u8 = 0;
    /// Registers a UDP client directly; with [`VIA_GATE`] the body is a datagram from address
    /// [`gate_peer`]`(p)` (p = `(ctl >> 3) & 7`), decided by the registration gate.
    pub const ADD_UDP: u8 = 1;
    /// `ctl` bit for [`ADD_UDP`] (and, for [`FROM_GAP8`], one SPI transaction instead of bytes).
    pub const VIA_GATE: u8 = 0x40;
    pub const REMOVE: u8 = 2;
    /// The body arrives from a TCP client (stream bytes).
    pub const TCP_BYTES: u8 = 3;
    /// The body is one datagram from a UDP client.
    pub const DATAGRAM: u8 = 4;
    /// The driver writes to the client (TCP: at most `u16` of the body bytes, 0 = all).
    pub const WRITE_CLIENT: u8 = 5;
    /// The driver writes towards the GAP8 (at most `u16` of the body bytes, 0 = all).
    pub const WRITE_SPI: u8 = 6;
    /// The body arrives from the GAP8.
    pub const FROM_GAP8: u8 = 7;
}

/// The token secret of the first rotation slot (the seeds echo cookies made with it).
pub const GATE_SECRET: [u8; 32] = [9; 32];
/// The time that passes per record.
pub const RECORD_MS: u64 = 250;

/// The registration's timers and budgets: small, so that inputs reach every limit.
pub fn gate_config() -> GateConfig {
    GateConfig {
        secret_rotation_ms: 10_000,
        cookies_per_sec: 10,
        registrations_burst: 2,
        registrations_per_sec: 1,
        registrations_global_per_sec: 4,
        ..GateConfig::default()
    }
}

/// UDP peer `p`: addresses on two IPs (p & 1), so that per-address limits are reached too.
pub fn gate_peer(p: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1 + (p & 1)], 4000 + u16::from(p)))
}

/// The bridge configuration for the selector byte: bit 0 small queues, bit 1 two clients of each
/// transport at most, bit 2 only the leader talks to the GAP8.
pub fn bridge_config(sel: u8) -> Config {
    let d = Config::default();
    let small = sel & 1 != 0;
    Config {
        client_queue_bytes: if small { 3000 } else { d.client_queue_bytes },
        control_reserve_bytes: if small { 1000 } else { d.control_reserve_bytes },
        spi_queue_bytes: if small { 2500 } else { d.spi_queue_bytes },
        max_message: if small { 2048 } else { d.max_message },
        max_clients: if sel & 2 != 0 { 2 } else { d.max_clients },
        max_udp_clients: if sel & 2 != 0 { 2 } else { d.max_udp_clients },
        upstream: if sel & 4 != 0 {
            UpstreamPolicy::LeaderOnly
        } else {
            UpstreamPolicy::All
        },
    }
}

/// What one side saw come out of the bridge, checked as it arrives.
struct Sink {
    asm: MessageAssembler,
    messages: usize,
}

impl Sink {
    fn new(max: usize) -> Self {
        Sink {
            asm: MessageAssembler::new(max),
            messages: 0,
        }
    }
    fn push(&mut self, bytes: &[u8], what: &str) {
        let mut n = 0;
        self.asm.push(
            bytes,
            |_| n += 1,
            |e| panic!("the bridge sent {what} bytes that are not whole CPX messages: {e}"),
        );
        self.messages += n;
    }
}

/// `bridge_client`: input `config selector u8` ([`bridge_config`]), then records ([`op`]).
/// Invariants: a registration datagram that parses re-encodes to the same bytes (the receiver
/// parses them too); the gate never answers with more bytes than it got (no amplification), an
/// unregistered address only with a cookie, a registration only for a good echo, and the core's
/// UDP clients are the gate's; whatever the clients send, the bytes the bridge writes
/// towards the GAP8 and to each TCP client are whole CPX messages, never interleaved (a fresh
/// reassembler reads them without an error); a UDP client gets exactly one CPX packet per datagram.
pub fn bridge_client(data: &[u8]) {
    run(data);
}

/// What a `bridge_client` run got through (the seeds' depth checks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// UDP clients registered through the gate.
    pub gate_registered: usize,
    /// Whole messages written towards the GAP8.
    pub to_gap8: usize,
    /// Whole messages written to clients.
    pub to_clients: usize,
}

/// The body of `bridge_client`.
pub fn run(data: &[u8]) -> Outcome {
    let mut out = Outcome::default();
    let mut i = Input::new(data);
    let cfg = bridge_config(i.byte());
    let mut b = Bridge::new(cfg);
    let mut gate = Gate::new(GATE_SECRET, gate_config());
    let mut now_ms = 0u64;
    let mut spi = Sink::new(usize::MAX);
    let mut sinks: Vec<(ClientId, Transport, Sink)> = Vec::new();
    while let Some((ctl, body)) = i.record() {
        now_ms += RECORD_MS;
        let ids: Vec<ClientId> = b.client_ids().collect();
        let pick = ids.get((ctl >> 3) as usize % ids.len().max(1)).copied();
        let limit = match body {
            [a, c, ..] => u16::from_le_bytes([*a, *c]) as usize,
            _ => 0,
        };
        match (ctl & 7, pick) {
            (op::ADD_UDP, _) if ctl & op::VIA_GATE != 0 => {
                let peer = gate_peer((ctl >> 3) & 7);
                if let Some(c) = Control::parse(body) {
                    assert_eq!(&c.encode()[..], body, "{c:?} re-encodes differently");
                }
                let registered = gate.clients().any(|(a, _)| a == peer);
                match gate.datagram(&mut b, peer, body, now_ms) {
                    GateOutcome::Reply(r) => {
                        assert!(
                            r.len() <= body.len(),
                            "{}-byte reply to a {}-byte datagram",
                            r.len(),
                            body.len()
                        );
                        match Control::parse(&r) {
                            Some(Control::Cookie(_)) => {}
                            Some(Control::Welcome(_)) => assert!(registered),
                            other => panic!("reply {other:?}"),
                        }
                    }
                    GateOutcome::Registered { id, evicted, .. } => {
                        assert!(!registered);
                        assert!(matches!(Control::parse(body), Some(Control::Echo(_))));
                        out.gate_registered += 1;
                        if let Some((_, e)) = evicted {
                            sinks.retain(|(s, _, _)| *s != e);
                        }
                        sinks.push((id, Transport::Udp, Sink::new(usize::MAX)));
                    }
                    GateOutcome::Left(id) => {
                        assert!(registered);
                        sinks.retain(|(s, _, _)| *s != id);
                    }
                    GateOutcome::Refreshed(_) | GateOutcome::Forwarded(..) => assert!(registered),
                    GateOutcome::Refused(_) => {}
                }
                gate.poll(
                    &mut b,
                    now_ms,
                    || None,
                    |e| {
                        if let Event::Expired(_, id) = e {
                            sinks.retain(|(s, _, _)| *s != id);
                        }
                    },
                );
                for (_, id) in gate.clients() {
                    assert!(
                        b.client_ids().any(|c| c == id),
                        "gate client {id} not in the core"
                    );
                }
            }
            (op::ADD_TCP, _) | (op::ADD_UDP, _) => {
                let t = if ctl & 7 == op::ADD_TCP {
                    Transport::Tcp
                } else {
                    Transport::Udp
                };
                if let Ok(id) = b.add_client(t) {
                    sinks.push((id, t, Sink::new(usize::MAX)));
                }
            }
            (op::REMOVE, Some(id)) => {
                if !gate.remove(&mut b, id) {
                    assert!(b.remove_client(id).is_some());
                }
                out.to_clients += sinks
                    .iter()
                    .find(|(s, ..)| *s == id)
                    .map_or(0, |x| x.2.messages);
                sinks.retain(|(s, _, _)| *s != id);
            }
            (op::TCP_BYTES, Some(id)) => {
                let _ = b.client_received(id, body);
            }
            (op::DATAGRAM, Some(id)) => {
                let _ = b.client_datagram(id, body);
            }
            (op::WRITE_CLIENT, Some(id)) => {
                let (_, t, sink) = sinks.iter_mut().find(|(s, _, _)| *s == id).expect("sink");
                let udp = *t == Transport::Udp;
                while let Some((bytes, range)) = b.next_for_client(id) {
                    let mut n = range.len();
                    if !udp && limit > 0 {
                        n = n.min(limit);
                    }
                    if udp {
                        let one = cpx::packet_len(&bytes[range.clone()]);
                        assert!(
                            matches!(one, Ok(Some(k)) if k == range.len()) || range.is_empty(),
                            "a datagram that is not one packet: {one:?} for {} bytes",
                            range.len()
                        );
                    }
                    sink.push(&bytes[range.start..range.start + n], "client");
                    b.client_sent(id, n);
                    if n == 0 || !udp && limit > 0 {
                        break;
                    }
                }
            }
            (op::WRITE_SPI, _) => {
                while let Some((bytes, range)) = b.next_for_spi() {
                    let n = if limit > 0 {
                        range.len().min(limit)
                    } else {
                        range.len()
                    };
                    spi.push(&bytes[range.start..range.start + n], "GAP8-bound");
                    b.spi_sent(n);
                    if n == 0 || limit > 0 {
                        break;
                    }
                }
            }
            (op::FROM_GAP8, _) => {
                if ctl & op::VIA_GATE != 0 {
                    let _ = b.spi_transfer(body);
                } else {
                    b.spi_received(body);
                }
            }
            _ => {}
        }
    }
    out.to_gap8 = spi.messages;
    out.to_clients += sinks.iter().map(|x| x.2.messages).sum::<usize>();
    out
}
