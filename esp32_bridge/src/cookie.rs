//! UDP return-routability check, sans I/O: a stateless cookie that a UDP client must echo before
//! the bridge sends it anything larger than what it sent (the idea of DTLS 1.2's
//! HelloVerifyRequest, E. Rescorla and N. Modadugu, RFC 6347, 2012, and of WireGuard's cookie
//! replies, J. A. Donenfeld, "WireGuard: Next Generation Kernel Network Tunnel", NDSS 2017).
//!
//! Datagrams (all before the CPX stream; none is a valid CPX packet, whose first two bytes are a
//! length of at most 1022):
//!
//! | datagram | bytes | sent by |
//! |---|---|---|
//! | request | `"GSCQ"` + 16 zero bytes (20) | client, from an address the bridge does not know |
//! | cookie  | `"GSCK"` + 16-byte cookie (20) | bridge, only in answer to a request, never larger |
//! | echo    | `"GSCE"` + the cookie (20)     | client |
//! | welcome | `"GSCW"` (4)                   | bridge, once the echo checked: the client is registered |
//!
//! The cookie is HMAC-SHA-256 (RFC 2104) under a bridge secret of the time slot and the client's
//! address (IP and port), truncated to 16 bytes: the bridge keeps no state per unproven address,
//! and only who receives datagrams at that address can echo it. The secret is drawn afresh every
//! slot ([`CookieJar::advance`]); a cookie is valid in its slot and the next one.
//! [`SourceLimiter`] bounds how many cookies one source address gets per second.

use alloc::collections::BTreeMap;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroize;

/// Bytes of a cookie.
pub const COOKIE_LEN: usize = 16;
/// A request: magic and padding, as large as the cookie datagram that answers it.
pub const REQUEST_LEN: usize = 4 + COOKIE_LEN;
/// Magics of the four datagrams.
pub const MAGIC_REQUEST: [u8; 4] = *b"GSCQ";
pub const MAGIC_COOKIE: [u8; 4] = *b"GSCK";
pub const MAGIC_ECHO: [u8; 4] = *b"GSCE";
pub const MAGIC_WELCOME: [u8; 4] = *b"GSCW";

/// One of the exchange's datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    Request,
    Cookie([u8; COOKIE_LEN]),
    Echo([u8; COOKIE_LEN]),
    Welcome,
}

impl Control {
    /// Recognises one of the exchange's datagrams (exact sizes; a request's padding must be zero).
    pub fn parse(d: &[u8]) -> Option<Control> {
        let (magic, rest) = (d.get(..4)?, &d[4..]);
        let cookie = || <[u8; COOKIE_LEN]>::try_from(rest).ok();
        match <[u8; 4]>::try_from(magic).ok()? {
            MAGIC_REQUEST if rest.len() == COOKIE_LEN && rest.iter().all(|&b| b == 0) => {
                Some(Control::Request)
            }
            MAGIC_COOKIE => cookie().map(Control::Cookie),
            MAGIC_ECHO => cookie().map(Control::Echo),
            MAGIC_WELCOME if rest.is_empty() => Some(Control::Welcome),
            _ => None,
        }
    }

    /// The datagram's bytes (at most [`REQUEST_LEN`]).
    pub fn encode(&self) -> ([u8; REQUEST_LEN], usize) {
        let mut out = [0u8; REQUEST_LEN];
        let (magic, body) = match self {
            Control::Request => (MAGIC_REQUEST, Some([0; COOKIE_LEN])),
            Control::Cookie(c) => (MAGIC_COOKIE, Some(*c)),
            Control::Echo(c) => (MAGIC_ECHO, Some(*c)),
            Control::Welcome => (MAGIC_WELCOME, None),
        };
        out[..4].copy_from_slice(&magic);
        match body {
            Some(b) => {
                out[4..].copy_from_slice(&b);
                (out, REQUEST_LEN)
            }
            None => (out, 4),
        }
    }
}

/// The bridge's cookie secrets: the current slot's and the previous slot's.
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

    /// Moves to time slot `slot` (no-op if already there): the current secret becomes the previous
    /// one and `fresh` gives the new one; after a gap of more than one slot both are replaced.
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

    fn mac(secret: &[u8; 32], slot: u64, peer: &[u8]) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("any key length");
        m.update(b"gapstream udp cookie");
        m.update(&slot.to_le_bytes());
        m.update(peer);
        m
    }

    /// A secret derived from the current one (for when no fresh random numbers can be had).
    pub fn next_secret(&self) -> [u8; 32] {
        Self::mac(&self.current, self.slot, b"next secret")
            .finalize()
            .into_bytes()
            .into()
    }

    /// The cookie for `peer` (an encoding of its address, see `host::peer_bytes`) in this slot.
    pub fn cookie(&self, peer: &[u8]) -> [u8; COOKIE_LEN] {
        let tag = Self::mac(&self.current, self.slot, peer)
            .finalize()
            .into_bytes();
        let mut c = [0u8; COOKIE_LEN];
        c.copy_from_slice(&tag[..COOKIE_LEN]);
        c
    }

    /// True when `cookie` was made for `peer` in this slot or the previous one (constant time).
    pub fn check(&self, peer: &[u8], cookie: &[u8; COOKIE_LEN]) -> bool {
        let now = Self::mac(&self.current, self.slot, peer)
            .verify_truncated_left(cookie)
            .is_ok();
        let before = self.previous.as_ref().is_some_and(|p| {
            Self::mac(p, self.slot.wrapping_sub(1), peer)
                .verify_truncated_left(cookie)
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

/// Token buckets per source (for example the IP address of who asks for a cookie): at most
/// `burst` at once and `per_sec` a second on average per source, `max_sources` tracked at once
/// (a source beyond that is refused until buckets refill), and `global_per_sec` for all sources
/// together. Time is given in milliseconds by the caller.
pub struct SourceLimiter<K: Ord> {
    burst: u32,
    per_sec: u32,
    max_sources: usize,
    global: Bucket,
    global_per_sec: u32,
    buckets: BTreeMap<K, Bucket>,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// Tokens in 1/1000.
    milli: u64,
    at_ms: u64,
}

impl Bucket {
    fn refill(&mut self, now_ms: u64, burst: u32, per_sec: u32) {
        let dt = now_ms.saturating_sub(self.at_ms);
        self.milli = (self.milli + dt * per_sec as u64).min(burst as u64 * 1000);
        self.at_ms = now_ms.max(self.at_ms);
    }

    fn take(&mut self, now_ms: u64, burst: u32, per_sec: u32) -> bool {
        self.refill(now_ms, burst, per_sec);
        if self.milli >= 1000 {
            self.milli -= 1000;
            true
        } else {
            false
        }
    }

    fn full(&self, now_ms: u64, burst: u32, per_sec: u32) -> bool {
        let dt = now_ms.saturating_sub(self.at_ms);
        self.milli + dt * per_sec as u64 >= burst as u64 * 1000
    }
}

impl<K: Ord + Clone> SourceLimiter<K> {
    pub fn new(burst: u32, per_sec: u32, max_sources: usize, global_per_sec: u32) -> Self {
        SourceLimiter {
            burst: burst.max(1),
            per_sec,
            max_sources,
            global: Bucket {
                milli: global_per_sec as u64 * 1000,
                at_ms: 0,
            },
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
            self.buckets.insert(
                source.clone(),
                Bucket {
                    milli: burst as u64 * 1000,
                    at_ms: now_ms,
                },
            );
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
        self.buckets.retain(|_, b| !b.full(now_ms, burst, rate));
    }

    /// Sources tracked.
    pub fn sources(&self) -> usize {
        self.buckets.len()
    }
}

/// What a driver does with a datagram from an address that is not a registered client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send these bytes back (a cookie: never larger than the datagram), nothing more.
    Reply([u8; REQUEST_LEN], usize),
    /// A good echo: the address is proven. Register it if a slot is free, then send
    /// [`Control::Welcome`].
    Register,
    /// No answer; the reason, for the (rate-limited) log.
    Refuse(&'static str),
}

/// The bridge's side of the exchange, sans I/O: cookie secrets rotating every `slot_ms`, and
/// the per-source limit on cookies. Shared by the host driver and the ESP32's C entry points.
pub struct Gate<K: Ord + Clone> {
    jar: CookieJar,
    limiter: SourceLimiter<K>,
    slot_ms: u64,
}

impl<K: Ord + Clone> Gate<K> {
    /// `secret`: 32 random bytes for the first slot.
    pub fn new(secret: [u8; 32], limiter: SourceLimiter<K>, slot_ms: u64) -> Self {
        Gate {
            jar: CookieJar::new(secret, 0),
            limiter,
            slot_ms: slot_ms.max(1),
        }
    }

    /// Moves to the slot of `now_ms`; `fresh` gives the new secret (`None`: derived from the
    /// current one by HMAC, which an attacker who does not know it cannot predict either).
    fn tick(&mut self, now_ms: u64, fresh: impl FnOnce() -> Option<[u8; 32]>) {
        let slot = now_ms / self.slot_ms;
        if slot > self.jar.slot() {
            let next = fresh().unwrap_or_else(|| self.jar.next_secret());
            self.jar.advance(slot, || next);
        }
    }

    /// Decides about datagram `d` from `peer` (its address encoded as the cookie binds it;
    /// `source` its IP for the limits) at `now_ms`.
    pub fn unproven(
        &mut self,
        peer: &[u8],
        source: &K,
        d: &[u8],
        now_ms: u64,
        fresh: impl FnOnce() -> Option<[u8; 32]>,
    ) -> Verdict {
        self.tick(now_ms, fresh);
        match Control::parse(d) {
            Some(Control::Request) => {
                if !self.limiter.allow(source, now_ms) {
                    return Verdict::Refuse("cookie rate limit");
                }
                let (b, n) = Control::Cookie(self.jar.cookie(peer)).encode();
                debug_assert!(n <= d.len());
                Verdict::Reply(b, n)
            }
            Some(Control::Echo(c)) if self.jar.check(peer, &c) => Verdict::Register,
            Some(Control::Echo(_)) => Verdict::Refuse("bad or expired cookie"),
            _ => Verdict::Refuse("datagram from an unregistered address"),
        }
    }

    /// Forgets the sources whose limits are back to full.
    pub fn forget_idle(&mut self, now_ms: u64) {
        self.limiter.forget_idle(now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_round_trip_and_sizes() {
        for c in [
            Control::Request,
            Control::Cookie([7; 16]),
            Control::Echo([9; 16]),
            Control::Welcome,
        ] {
            let (b, n) = c.encode();
            assert_eq!(Control::parse(&b[..n]), Some(c));
        }
        assert_eq!(Control::Request.encode().1, 20);
        assert_eq!(Control::Cookie([0; 16]).encode().1, 20);
        assert_eq!(Control::Welcome.encode().1, 4);
        assert_eq!(Control::parse(b"GSCQ"), None, "a request must be padded");
        assert_eq!(Control::parse(&[]), None);
        let mut r = Control::Request.encode().0;
        r[10] = 1;
        assert_eq!(Control::parse(&r), None);
        // No CPX packet is one of them: a CPX length is at most 1022, "GS" reads as 21319.
        assert!(u16::from_le_bytes(*b"GS") > 1022);
    }

    #[test]
    fn cookies_bind_address_and_slot_and_expire_after_two_slots() {
        let mut jar = CookieJar::new([1; 32], 10);
        let a = b"\x04\x7f\x00\x00\x01\x13\x88";
        let b = b"\x04\x7f\x00\x00\x01\x13\x89";
        let c = jar.cookie(a);
        assert!(jar.check(a, &c));
        assert!(!jar.check(b, &c), "another port");
        let mut bad = c;
        bad[15] ^= 1;
        assert!(!jar.check(a, &bad));
        jar.advance(11, || [2; 32]);
        assert!(jar.check(a, &c), "valid in the next slot");
        assert_ne!(jar.cookie(a), c, "new secret, new cookie");
        jar.advance(12, || [3; 32]);
        assert!(!jar.check(a, &c), "expired");
        let c2 = jar.cookie(a);
        jar.advance(20, || [4; 32]);
        assert!(!jar.check(a, &c2), "a gap drops both secrets");
    }

    #[test]
    fn gate_answers_only_requests_and_registers_only_good_echoes() {
        let mut g = Gate::new([5; 32], SourceLimiter::new(2, 1, 16, 100), 30_000);
        let peer = b"\x04\x0a\x00\x00\x02\x13\x88";
        let none = || None;
        for d in [&[][..], &[1u8][..], &[0u8; 20][..], b"GSCQ"] {
            assert!(matches!(
                g.unproven(peer, &1u32, d, 0, none),
                Verdict::Refuse(_)
            ));
        }
        let (req, n) = Control::Request.encode();
        let Verdict::Reply(b, k) = g.unproven(peer, &1, &req[..n], 0, none) else {
            panic!("no cookie")
        };
        assert_eq!(k, n);
        let Some(Control::Cookie(c)) = Control::parse(&b[..k]) else {
            panic!("not a cookie")
        };
        let (echo, en) = Control::Echo(c).encode();
        assert_eq!(
            g.unproven(peer, &1, &echo[..en], 1000, none),
            Verdict::Register
        );
        // Another address with the same cookie: refused.
        let other = b"\x04\x0a\x00\x00\x03\x13\x88";
        assert!(matches!(
            g.unproven(other, &1, &echo[..en], 1000, none),
            Verdict::Refuse(_)
        ));
        // Still good in the next slot, not the one after (secrets derived, no fresh ones).
        assert_eq!(
            g.unproven(peer, &1, &echo[..en], 45_000, none),
            Verdict::Register
        );
        assert!(matches!(
            g.unproven(peer, &1, &echo[..en], 60_000, none),
            Verdict::Refuse(_)
        ));
        // The per-source limit: burst 2, then 1 a second.
        let mut g = Gate::new([5; 32], SourceLimiter::new(2, 1, 16, 100), 30_000);
        let got = (0..10)
            .filter(|_| matches!(g.unproven(peer, &7, &req[..n], 0, none), Verdict::Reply(..)))
            .count();
        assert_eq!(got, 2);
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
