//! UDP registration, sans I/O: who gets the stream over UDP, and for how long.
//!
//! A UDP source address can be forged, so the bridge sends the stream only to an address that
//! keeps showing that it *receives* there: it must echo tokens the bridge sent to that address,
//! recently. The design follows QUIC's address validation (J. Iyengar, M. Thomson, RFC 9000 §8,
//! 2021: tokens bound to the client's address, no more than the client sent before the address
//! is validated, path validation by echoing unpredictable data) and WireGuard's cookies
//! (J. A. Donenfeld, "WireGuard: Next Generation Kernel Network Tunnel", NDSS 2017: a cookie is a
//! MAC of the source address under a rotating secret, answered statelessly, and rate limits
//! apply only to sources that proved their address).
//!
//! Every datagram of the exchange is [`DATAGRAM_LEN`] (24) bytes: a magic and a 20-byte body.
//!
//! | datagram | magic | body | sent by |
//! |---|---|---|---|
//! | request | `GSCQ` | 20 zero bytes | client, to start |
//! | cookie  | `GSCK` | token (label cookie) | bridge, only in answer to a request |
//! | echo    | `GSCE` | the cookie | client |
//! | welcome | `GSCW` | token (label probe) | bridge, in answer to a good echo: registered |
//! | probe   | `GSCP` | token (label probe) | bridge, to each registered address every second |
//! | alive   | `GSCA` | the welcome's or a probe's token | client, once per token it gets |
//! | leave   | `GSCL` | a current probe token | client, when it stops |
//!
//! token = issued (u32 LE, the bridge's clock in ms when it made it) ‖ the first 16 bytes of
//! HMAC-SHA-256(secret, label ‖ issued ‖ address), address = family (`04`/`06`) ‖ IP ‖ port (BE),
//! label `"gapstream udp cookie"` or `"gapstream udp probe"`. The bridge keeps no state for a
//! token: it recomputes the MAC (current or previous secret) and checks the age. Only the
//! address's owner ever sees a token, so an echo proves reception at that address *when the
//! token was issued*; a registration lasts [`GateConfig::timeout_ms`] after the issue of the
//! newest token its address echoed, whatever else arrives from that address.
//!
//! [`Gate`] is the bridge's side (the table of registered addresses, shared by the host driver and
//! the ESP32's C entry points), [`Client`] the receiver's.

#[cfg(test)]
mod attacks;
mod client;
mod gate;
#[cfg(test)]
mod spec_vectors;

pub use client::{Client, ClientConfig, Received, Status};
pub use gate::{Event, Gate, GateConfig, GateStats, Outcome, Refusal};

use alloc::collections::BTreeMap;
use core::net::{IpAddr, SocketAddr};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroize;

/// Bytes of a token's MAC.
pub const MAC_LEN: usize = 16;
/// Bytes of a token: issue time (u32 LE) and MAC.
pub const TOKEN_LEN: usize = 4 + MAC_LEN;
/// Bytes of every datagram of the exchange: magic and body.
pub const DATAGRAM_LEN: usize = 4 + TOKEN_LEN;
/// One datagram of the exchange.
pub type Datagram = [u8; DATAGRAM_LEN];

/// Magics of the datagrams.
pub const MAGIC_REQUEST: [u8; 4] = *b"GSCQ";
pub const MAGIC_COOKIE: [u8; 4] = *b"GSCK";
pub const MAGIC_ECHO: [u8; 4] = *b"GSCE";
pub const MAGIC_WELCOME: [u8; 4] = *b"GSCW";
pub const MAGIC_PROBE: [u8; 4] = *b"GSCP";
pub const MAGIC_ALIVE: [u8; 4] = *b"GSCA";
pub const MAGIC_LEAVE: [u8; 4] = *b"GSCL";

/// The MAC labels: a cookie (answers a request) and a probe token (welcome and probes).
pub const LABEL_COOKIE: &[u8] = b"gapstream udp cookie";
pub const LABEL_PROBE: &[u8] = b"gapstream udp probe";

/// True when a datagram belongs to the exchange rather than the CPX stream: it starts with
/// `"GS"`, which read as a CPX length (little-endian) is 21,319, above the largest (1022).
pub fn is_control(d: &[u8]) -> bool {
    d.starts_with(b"GS")
}

/// A token: when the bridge made it (its clock in ms, low 32 bits) and the MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub issued: u32,
    pub mac: [u8; MAC_LEN],
}

impl Token {
    pub fn to_bytes(self) -> [u8; TOKEN_LEN] {
        let mut b = [0u8; TOKEN_LEN];
        b[..4].copy_from_slice(&self.issued.to_le_bytes());
        b[4..].copy_from_slice(&self.mac);
        b
    }

    pub fn from_bytes(b: &[u8; TOKEN_LEN]) -> Token {
        let mut mac = [0u8; MAC_LEN];
        mac.copy_from_slice(&b[4..]);
        Token {
            issued: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            mac,
        }
    }
}

/// One datagram of the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Request,
    Cookie(Token),
    Echo(Token),
    Welcome(Token),
    Probe(Token),
    Alive(Token),
    Leave(Token),
}

impl Control {
    /// Recognises one of the exchange's datagrams (exactly [`DATAGRAM_LEN`] bytes; a request's
    /// body must be zero).
    pub fn parse(d: &[u8]) -> Option<Control> {
        let d: &Datagram = d.try_into().ok()?;
        let magic = [d[0], d[1], d[2], d[3]];
        let body: &[u8; TOKEN_LEN] = d[4..].try_into().expect("24 - 4 bytes");
        let t = Token::from_bytes(body);
        Some(match magic {
            MAGIC_REQUEST if body.iter().all(|&b| b == 0) => Control::Request,
            MAGIC_COOKIE => Control::Cookie(t),
            MAGIC_ECHO => Control::Echo(t),
            MAGIC_WELCOME => Control::Welcome(t),
            MAGIC_PROBE => Control::Probe(t),
            MAGIC_ALIVE => Control::Alive(t),
            MAGIC_LEAVE => Control::Leave(t),
            _ => return None,
        })
    }

    /// The datagram's bytes.
    pub fn encode(&self) -> Datagram {
        let (magic, body) = match *self {
            Control::Request => (MAGIC_REQUEST, [0u8; TOKEN_LEN]),
            Control::Cookie(t) => (MAGIC_COOKIE, t.to_bytes()),
            Control::Echo(t) => (MAGIC_ECHO, t.to_bytes()),
            Control::Welcome(t) => (MAGIC_WELCOME, t.to_bytes()),
            Control::Probe(t) => (MAGIC_PROBE, t.to_bytes()),
            Control::Alive(t) => (MAGIC_ALIVE, t.to_bytes()),
            Control::Leave(t) => (MAGIC_LEAVE, t.to_bytes()),
        };
        let mut out = [0u8; DATAGRAM_LEN];
        out[..4].copy_from_slice(&magic);
        out[4..].copy_from_slice(&body);
        out
    }
}

/// An address as tokens bind it: family (`04` or `06`), IP, port (big-endian); 7 or 19 bytes.
/// An IPv4-mapped IPv6 address counts as the IPv4 address.
pub fn peer_bytes(a: SocketAddr) -> ([u8; 19], usize) {
    let mut out = [0u8; 19];
    match a.ip().to_canonical() {
        IpAddr::V4(ip) => {
            out[0] = 4;
            out[1..5].copy_from_slice(&ip.octets());
            out[5..7].copy_from_slice(&a.port().to_be_bytes());
            (out, 7)
        }
        IpAddr::V6(ip) => {
            out[0] = 6;
            out[1..17].copy_from_slice(&ip.octets());
            out[17..19].copy_from_slice(&a.port().to_be_bytes());
            (out, 19)
        }
    }
}

/// The bridge's token secrets: the current one and the one before (rotated by [`Self::advance`],
/// so a token made just before a rotation still checks).
pub struct CookieJar {
    slot: u64,
    current: [u8; 32],
    previous: Option<[u8; 32]>,
}

impl CookieJar {
    pub fn new(secret: [u8; 32], slot: u64) -> Self {
        CookieJar {
            slot,
            current: secret,
            previous: None,
        }
    }

    /// Moves to rotation slot `slot` (no-op if already there): the current secret becomes the
    /// previous one and `fresh` gives the new one; after a gap of more than one slot both are
    /// replaced.
    pub fn advance(&mut self, slot: u64, fresh: impl FnOnce() -> [u8; 32]) {
        if slot <= self.slot {
            return;
        }
        let mut old = core::mem::replace(&mut self.current, fresh());
        if let Some(mut p) = self.previous.take() {
            p.zeroize();
        }
        if slot == self.slot + 1 {
            self.previous = Some(old);
        }
        old.zeroize();
        self.slot = slot;
    }

    pub fn slot(&self) -> u64 {
        self.slot
    }

    fn mac(secret: &[u8; 32], label: &[u8], issued: u32, peer: &[u8]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("any key length");
        m.update(label);
        m.update(&issued.to_le_bytes());
        m.update(peer);
        m
    }

    /// A secret derived from the current one (when no fresh random numbers can be had: whoever
    /// does not know the current secret cannot predict it either).
    pub fn next_secret(&self) -> [u8; 32] {
        let mut m =
            <Hmac<Sha256> as KeyInit>::new_from_slice(&self.current).expect("any key length");
        m.update(b"gapstream udp next secret");
        m.update(&self.slot.to_le_bytes());
        m.finalize().into_bytes().into()
    }

    /// The token for `peer` ([`peer_bytes`]) under `label`, issued at `issued`.
    pub fn token(&self, label: &[u8], issued: u32, peer: &[u8]) -> Token {
        let tag = Self::mac(&self.current, label, issued, peer)
            .finalize()
            .into_bytes();
        let mut mac = [0u8; MAC_LEN];
        mac.copy_from_slice(&tag[..MAC_LEN]);
        Token { issued, mac }
    }

    /// True when `token` was made for `peer` under `label` with the current or the previous
    /// secret (the MAC compared in constant time; the age is the caller's business).
    pub fn check(&self, label: &[u8], token: &Token, peer: &[u8]) -> bool {
        let now = Self::mac(&self.current, label, token.issued, peer)
            .verify_truncated_left(&token.mac)
            .is_ok();
        let before = self.previous.as_ref().is_some_and(|p| {
            Self::mac(p, label, token.issued, peer)
                .verify_truncated_left(&token.mac)
                .is_ok()
        });
        now | before
    }
}

impl Drop for CookieJar {
    fn drop(&mut self) {
        self.current.zeroize();
        if let Some(p) = &mut self.previous {
            p.zeroize();
        }
    }
}

/// A token bucket: `milli` tokens in 1/1000, refilled at `per_sec` a second up to `burst`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bucket {
    milli: u64,
    at_ms: u64,
}

impl Bucket {
    pub(crate) fn full(burst: u32, now_ms: u64) -> Self {
        Bucket {
            milli: burst as u64 * 1000,
            at_ms: now_ms,
        }
    }

    fn refill(&mut self, now_ms: u64, burst: u32, per_sec: u32) {
        let dt = now_ms.saturating_sub(self.at_ms);
        self.milli = (self.milli + dt * per_sec as u64).min(burst as u64 * 1000);
        self.at_ms = now_ms.max(self.at_ms);
    }

    pub(crate) fn take(&mut self, now_ms: u64, burst: u32, per_sec: u32) -> bool {
        self.refill(now_ms, burst, per_sec);
        if self.milli >= 1000 {
            self.milli -= 1000;
            true
        } else {
            false
        }
    }

    fn is_full(&self, now_ms: u64, burst: u32, per_sec: u32) -> bool {
        let dt = now_ms.saturating_sub(self.at_ms);
        self.milli + dt * per_sec as u64 >= burst as u64 * 1000
    }
}

/// Token buckets per source (the bridge uses it per IP address, for registrations, which only
/// sources that proved their address reach): at most `burst` at once and `per_sec` a second on
/// average per source, `max_sources` tracked at once (a source beyond that is refused until
/// buckets refill), and `global_per_sec` for all sources together. Time is given in
/// milliseconds by the caller.
pub struct SourceLimiter<K: Ord> {
    burst: u32,
    per_sec: u32,
    max_sources: usize,
    global: Bucket,
    global_per_sec: u32,
    buckets: BTreeMap<K, Bucket>,
}

impl<K: Ord + Clone> SourceLimiter<K> {
    pub fn new(burst: u32, per_sec: u32, max_sources: usize, global_per_sec: u32) -> Self {
        SourceLimiter {
            burst: burst.max(1),
            per_sec,
            max_sources,
            global: Bucket::full(global_per_sec.max(1), 0),
            global_per_sec,
            buckets: BTreeMap::new(),
        }
    }

    /// Takes one token for `source` at `now_ms`; false when it (or everyone together) is over.
    pub fn allow(&mut self, source: &K, now_ms: u64) -> bool {
        let (burst, rate) = (self.burst, self.per_sec);
        if !self.buckets.contains_key(source) {
            if self.buckets.len() >= self.max_sources {
                self.forget_idle(now_ms);
            }
            if self.buckets.len() >= self.max_sources {
                return false;
            }
            self.buckets
                .insert(source.clone(), Bucket::full(burst, now_ms));
        }
        let b = self.buckets.get_mut(source).expect("inserted above");
        b.refill(now_ms, burst, rate);
        if b.milli < 1000 {
            return false;
        }
        let gps = self.global_per_sec;
        if !self.global.take(now_ms, gps.max(1), gps) {
            return false;
        }
        b.take(now_ms, burst, rate)
    }

    /// Drops the buckets that are full again (their sources are as if never seen).
    pub fn forget_idle(&mut self, now_ms: u64) {
        let (burst, rate) = (self.burst, self.per_sec);
        self.buckets.retain(|_, b| !b.is_full(now_ms, burst, rate));
    }

    /// Sources tracked.
    pub fn sources(&self) -> usize {
        self.buckets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((a, port))
    }

    #[test]
    fn datagrams_round_trip_and_are_all_24_bytes() {
        let t = Token {
            issued: 0x0403_0201,
            mac: [7; 16],
        };
        for c in [
            Control::Request,
            Control::Cookie(t),
            Control::Echo(t),
            Control::Welcome(t),
            Control::Probe(t),
            Control::Alive(t),
            Control::Leave(t),
        ] {
            let b = c.encode();
            assert_eq!(b.len(), 24);
            assert_eq!(Control::parse(&b), Some(c));
            assert!(is_control(&b));
            for n in [0, 4, 20, 23] {
                assert_eq!(Control::parse(&b[..n]), None, "{n} bytes of {c:?}");
            }
            let mut longer = b.to_vec();
            longer.push(0);
            assert_eq!(Control::parse(&longer), None);
        }
        assert_eq!(&Control::Cookie(t).encode()[4..8], &[1, 2, 3, 4]);
        let mut r = Control::Request.encode();
        r[10] = 1;
        assert_eq!(Control::parse(&r), None, "a request's body is zero");
        let mut x = Control::Probe(t).encode();
        x[3] = b'Z';
        assert_eq!(Control::parse(&x), None);
        // No CPX packet is one of them: a CPX length is at most 1022, "GS" reads as 21319.
        assert_eq!(u16::from_le_bytes(*b"GS"), 21319);
        assert!(!is_control(&[4, 0, 0x5c, 0x0e, 1, 2]));
    }

    #[test]
    fn tokens_bind_label_time_and_address_and_survive_one_rotation() {
        let mut jar = CookieJar::new([1; 32], 10);
        let (a, na) = peer_bytes(v4([127, 0, 0, 1], 5000));
        let (b, nb) = peer_bytes(v4([127, 0, 0, 1], 5001));
        let (a, b) = (&a[..na], &b[..nb]);
        let c = jar.token(LABEL_COOKIE, 77, a);
        assert!(jar.check(LABEL_COOKIE, &c, a));
        assert!(!jar.check(LABEL_COOKIE, &c, b), "another port");
        assert!(!jar.check(LABEL_PROBE, &c, a), "another label");
        let moved = Token { issued: 78, ..c };
        assert!(!jar.check(LABEL_COOKIE, &moved, a), "another time");
        let mut bad = c;
        bad.mac[15] ^= 1;
        assert!(!jar.check(LABEL_COOKIE, &bad, a));
        jar.advance(11, || [2; 32]);
        assert!(jar.check(LABEL_COOKIE, &c, a), "previous secret");
        assert_ne!(jar.token(LABEL_COOKIE, 77, a), c, "new secret, new token");
        jar.advance(12, || [3; 32]);
        assert!(!jar.check(LABEL_COOKIE, &c, a), "two rotations later");
        let c2 = jar.token(LABEL_COOKIE, 1, a);
        jar.advance(20, || [4; 32]);
        assert!(!jar.check(LABEL_COOKIE, &c2, a), "a gap drops both secrets");
    }

    #[test]
    fn addresses_encode_as_documented() {
        let (b, n) = peer_bytes(v4([192, 168, 4, 2], 0x1388));
        assert_eq!(&b[..n], &[4, 192, 168, 4, 2, 0x13, 0x88]);
        let mapped: SocketAddr = "[::ffff:192.168.4.2]:5000".parse().unwrap();
        let (m, k) = peer_bytes(mapped);
        assert_eq!(
            &m[..k],
            &b[..n],
            "an IPv4-mapped address is the IPv4 address"
        );
        let v6: SocketAddr = "[fe80::1]:5000".parse().unwrap();
        let (b, n) = peer_bytes(v6);
        assert_eq!(n, 19);
        assert_eq!(b[0], 6);
        assert_eq!(&b[17..19], &[0x13, 0x88]);
    }

    #[test]
    fn limiter_bounds_each_source_and_all_together() {
        let mut l = SourceLimiter::new(4, 2, 3, 1000);
        let got = (0..100).filter(|_| l.allow(&1u32, 0)).count();
        assert_eq!(got, 4, "burst");
        assert!(!l.allow(&1, 400));
        assert!(l.allow(&1, 500), "2 per second refill");
        assert!(l.allow(&2, 500) && l.allow(&3, 500));
        assert!(!l.allow(&4, 500), "3 sources tracked at most");
        assert!(l.allow(&4, 10_000), "idle ones forgotten");
        let mut g = SourceLimiter::new(4, 2, 10_000, 100);
        let got = (0..1000u32).filter(|k| g.allow(k, 0)).count();
        assert_eq!(got, 100, "global cap");
    }
}
