//! The bridge's side of the UDP registration: the table of registered addresses, what to answer,
//! when to probe, when a registration ends. Sans I/O: the drivers (`host`, `capi`) pass every
//! datagram from the UDP socket to [`Gate::datagram`], call [`Gate::poll`] every few tens of
//! milliseconds and send what they are told to; stream packets go only to a client for which
//! [`Gate::sendable`] holds.
//!
//! What holds (docs/protocol.md §13 says it for the whole bridge):
//!
//! - *Registration needs reception.* An address is registered only by echoing a cookie the
//!   bridge sent to that address at most [`GateConfig::cookie_max_age_ms`] earlier.
//! - *Refresh needs current reception.* A registration lasts [`GateConfig::timeout_ms`] after
//!   the issue of the newest token (cookie, welcome or probe) its address echoed; a token is
//!   sent only to the address it names, so nothing an off-path sender can make moves that
//!   deadline. Stream data, control messages and empty datagrams from a registered address
//!   refresh nothing.
//! - *Nothing to unproven addresses but cookies.* An address that is not registered gets only a
//!   cookie in answer to a request, of the request's size, and at most
//!   [`GateConfig::cookies_per_sec`] of them in all; the bridge keeps no state for it.
//! - *Budgets a spoofer cannot spend for somebody else.* There is no per-address budget on
//!   unproven traffic. Registrations are limited per IP (slots and rate) and in all, counted
//!   only for echoes of valid cookies, i.e. for addresses that proved they receive; a newcomer
//!   takes the slot of a *stale* registration (no proof for [`GateConfig::stale_ms`]), the
//!   stalest first, never that of a client that keeps answering probes.

use alloc::vec::Vec;
use core::net::{IpAddr, SocketAddr};

use super::{
    Bucket, Control, CookieJar, Datagram, LABEL_COOKIE, LABEL_PROBE, SourceLimiter, Token,
    is_control, peer_bytes,
};
use crate::forward::{Bridge, BridgeError, ClientId, Transport};

/// Timers and budgets of the registration. Times in milliseconds of the caller's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateConfig {
    /// A registration ends this long after the issue of the newest token its address echoed.
    pub timeout_ms: u64,
    /// Each registered address gets a probe (a fresh token to echo) this often.
    pub probe_interval_ms: u64,
    /// A registration whose newest proof is older than this is *stale*: a newcomer may take its
    /// slot.
    pub stale_ms: u64,
    /// A cookie registers only if echoed this soon after its issue.
    pub cookie_max_age_ms: u64,
    /// Registrations one IP address holds at most.
    pub clients_per_ip: usize,
    /// Registrations per IP (counted on valid echoes only): at most this many at once ...
    pub registrations_burst: u32,
    /// ... and this many a second on average ...
    pub registrations_per_sec: u32,
    /// ... and this many a second for all addresses together.
    pub registrations_global_per_sec: u32,
    /// Cookies sent a second, to all unregistered addresses together (the only budget on
    /// unproven traffic; it bounds what spoofed requests cost the registered clients' stream).
    pub cookies_per_sec: u32,
    /// The token secret changes this often (the previous one still checks).
    pub secret_rotation_ms: u64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            timeout_ms: 5_000,
            probe_interval_ms: 1_000,
            stale_ms: 3_000,
            cookie_max_age_ms: 2_000,
            clients_per_ip: 2,
            registrations_burst: 4,
            registrations_per_sec: 2,
            registrations_global_per_sec: 50,
            cookies_per_sec: 1_000,
            secret_rotation_ms: 30_000,
        }
    }
}

/// Why a datagram got nothing (for the drivers' rate-limited log; each is counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// From an address that is not registered, and neither a request nor an echo.
    NotRegistered,
    /// Looks like the exchange (starts with `"GS"`) but is none of its datagrams.
    Malformed,
    /// A datagram only the bridge sends (cookie, welcome, probe).
    WrongDirection,
    /// An echo, alive or leave whose token the bridge did not make for this address recently.
    BadToken,
    /// More requests than [`GateConfig::cookies_per_sec`]: no cookie.
    CookieBudget,
    /// This IP address registered too often.
    RegistrationRate,
    /// This IP address holds its [`GateConfig::clients_per_ip`] registrations, none stale.
    AddressFull,
    /// Every UDP slot is held by a registration that is not stale.
    NoFreeSlot,
}

impl core::fmt::Display for Refusal {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Refusal::NotRegistered => "datagram from an unregistered address",
            Refusal::Malformed => "malformed registration datagram",
            Refusal::WrongDirection => "a datagram only the bridge sends",
            Refusal::BadToken => "bad or expired token",
            Refusal::CookieBudget => "cookie budget spent",
            Refusal::RegistrationRate => "registration rate limit of that address",
            Refusal::AddressFull => "that address holds its share of UDP clients",
            Refusal::NoFreeSlot => "every UDP slot is held by a live client",
        })
    }
}

/// What a driver does with a datagram ([`Gate::datagram`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Send these bytes back to the sender (a cookie, or the welcome again), nothing more.
    Reply(Datagram),
    /// The sender is a new client: send it `welcome`. `evicted` lost its slot to it (stale).
    Registered {
        id: ClientId,
        welcome: Datagram,
        evicted: Option<(SocketAddr, ClientId)>,
    },
    /// A registered client's proof: nothing to send.
    Refreshed(ClientId),
    /// A registered client left: it is removed from the forwarding core.
    Left(ClientId),
    /// A registered client's datagram went to the forwarding core
    /// ([`Bridge::client_datagram`]: messages completed towards the GAP8, or the error).
    Forwarded(ClientId, Result<usize, BridgeError>),
    /// Nothing to send.
    Refused(Refusal),
}

/// What [`Gate::poll`] asks of the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Send this probe to this registered address.
    Probe(SocketAddr, Datagram),
    /// This registration ended (no current proof); it is removed from the forwarding core.
    Expired(SocketAddr, ClientId),
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateStats {
    pub cookies: u64,
    pub registered: u64,
    pub refreshed: u64,
    pub probes: u64,
    pub expired: u64,
    pub evicted: u64,
    pub left: u64,
    /// Datagrams refused (every [`Refusal`]).
    pub refused: u64,
    /// Of those, tokens that did not check.
    pub bad_tokens: u64,
    /// Of those, requests beyond the cookie budget.
    pub over_cookie_budget: u64,
}

struct Registration {
    peer: SocketAddr,
    ip: IpAddr,
    id: ClientId,
    /// Issue time of the newest token the address echoed.
    proof_ms: u64,
    next_probe_ms: u64,
}

/// The bridge's side of the UDP registration.
pub struct Gate {
    cfg: GateConfig,
    jar: CookieJar,
    cookies: Bucket,
    registrations: SourceLimiter<IpAddr>,
    regs: Vec<Registration>,
    stats: GateStats,
}

fn canonical(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(a.ip().to_canonical(), a.port())
}

impl Gate {
    /// `secret`: 32 random bytes for the first rotation slot (the clock's 0 to
    /// [`GateConfig::secret_rotation_ms`]).
    pub fn new(secret: [u8; 32], cfg: GateConfig) -> Self {
        Gate {
            jar: CookieJar::new(secret, 0),
            cookies: Bucket::full(cfg.cookies_per_sec.max(1), 0),
            registrations: SourceLimiter::new(
                cfg.registrations_burst,
                cfg.registrations_per_sec,
                256,
                cfg.registrations_global_per_sec,
            ),
            regs: Vec::new(),
            stats: GateStats::default(),
            cfg,
        }
    }

    pub fn config(&self) -> &GateConfig {
        &self.cfg
    }

    pub fn stats(&self) -> GateStats {
        self.stats
    }

    /// The registered clients: address and forwarding-core id.
    pub fn clients(&self) -> impl Iterator<Item = (SocketAddr, ClientId)> + '_ {
        self.regs.iter().map(|r| (r.peer, r.id))
    }

    /// Registered clients now.
    pub fn len(&self) -> usize {
        self.regs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.regs.is_empty()
    }

    /// True while `id` is registered and its deadline has not passed: only then may the driver
    /// send it stream data (so a late [`Gate::poll`] never extends a registration).
    pub fn sendable(&self, id: ClientId, now_ms: u64) -> bool {
        self.regs
            .iter()
            .any(|r| r.id == id && now_ms < r.proof_ms + self.cfg.timeout_ms)
    }

    /// When [`Gate::poll`] has something to do next (a probe or an expiry), if anything.
    pub fn next_timeout(&self) -> Option<u64> {
        self.regs
            .iter()
            .map(|r| r.next_probe_ms.min(r.proof_ms + self.cfg.timeout_ms))
            .min()
    }

    /// The full issue time of `t`, if it is a `label` token the bridge made for `peer` at most
    /// `max_age_ms` ago.
    fn verify(
        &self,
        label: &[u8],
        t: &Token,
        peer: &[u8],
        now_ms: u64,
        max_age_ms: u64,
    ) -> Option<u64> {
        let age = u64::from((now_ms as u32).wrapping_sub(t.issued));
        if age > max_age_ms || age > now_ms || !self.jar.check(label, t, peer) {
            return None;
        }
        Some(now_ms - age)
    }

    fn probe_token(&self, peer: &[u8], now_ms: u64) -> Token {
        self.jar.token(LABEL_PROBE, now_ms as u32, peer)
    }

    fn refuse(&mut self, why: Refusal) -> Outcome {
        self.stats.refused += 1;
        match why {
            Refusal::BadToken => self.stats.bad_tokens += 1,
            Refusal::CookieBudget => self.stats.over_cookie_budget += 1,
            _ => {}
        }
        Outcome::Refused(why)
    }

    /// Decides about datagram `d` from `peer` at `now_ms`.
    pub fn datagram(
        &mut self,
        bridge: &mut Bridge,
        peer: SocketAddr,
        d: &[u8],
        now_ms: u64,
    ) -> Outcome {
        let peer = canonical(peer);
        let (pb, pl) = peer_bytes(peer);
        let pb = &pb[..pl];
        let reg = self.regs.iter().position(|r| r.peer == peer);
        if !is_control(d) {
            return match reg {
                Some(i) => {
                    let id = self.regs[i].id;
                    Outcome::Forwarded(id, bridge.client_datagram(id, d))
                }
                None => self.refuse(Refusal::NotRegistered),
            };
        }
        let Some(c) = Control::parse(d) else {
            return self.refuse(Refusal::Malformed);
        };
        match c {
            Control::Request => {
                let per_sec = self.cfg.cookies_per_sec;
                if !self.cookies.take(now_ms, per_sec.max(1), per_sec) {
                    return self.refuse(Refusal::CookieBudget);
                }
                self.stats.cookies += 1;
                let t = self.jar.token(LABEL_COOKIE, now_ms as u32, pb);
                Outcome::Reply(Control::Cookie(t).encode())
            }
            Control::Echo(t) => {
                let max_age = self.cfg.cookie_max_age_ms;
                let Some(issued) = self.verify(LABEL_COOKIE, &t, pb, now_ms, max_age) else {
                    return self.refuse(Refusal::BadToken);
                };
                match reg {
                    Some(i) => {
                        // Its welcome was lost: the proof counts, the welcome goes again.
                        self.refresh(i, issued);
                        let w = Control::Welcome(self.probe_token(pb, now_ms));
                        Outcome::Reply(w.encode())
                    }
                    None => self.register(bridge, peer, pb, issued, now_ms),
                }
            }
            Control::Alive(t) | Control::Leave(t) => {
                let Some(i) = reg else {
                    return self.refuse(Refusal::NotRegistered);
                };
                let max_age = self.cfg.timeout_ms;
                let Some(issued) = self.verify(LABEL_PROBE, &t, pb, now_ms, max_age) else {
                    return self.refuse(Refusal::BadToken);
                };
                let id = self.regs[i].id;
                if matches!(c, Control::Leave(_)) {
                    self.regs.remove(i);
                    bridge.remove_client(id);
                    self.stats.left += 1;
                    return Outcome::Left(id);
                }
                self.refresh(i, issued);
                Outcome::Refreshed(id)
            }
            Control::Cookie(_) | Control::Welcome(_) | Control::Probe(_) => {
                self.refuse(Refusal::WrongDirection)
            }
        }
    }

    fn refresh(&mut self, i: usize, issued_ms: u64) {
        let r = &mut self.regs[i];
        r.proof_ms = r.proof_ms.max(issued_ms);
        self.stats.refreshed += 1;
    }

    /// The stalest registration among those `pick` selects, if it is stale.
    fn stale_victim(&self, now_ms: u64, pick: impl Fn(&Registration) -> bool) -> Option<usize> {
        let (i, r) = self
            .regs
            .iter()
            .enumerate()
            .filter(|(_, r)| pick(r))
            .min_by_key(|(_, r)| r.proof_ms)?;
        (now_ms.saturating_sub(r.proof_ms) > self.cfg.stale_ms).then_some(i)
    }

    fn evict(&mut self, bridge: &mut Bridge, i: usize) -> (SocketAddr, ClientId) {
        let r = self.regs.remove(i);
        bridge.remove_client(r.id);
        self.stats.evicted += 1;
        (r.peer, r.id)
    }

    fn register(
        &mut self,
        bridge: &mut Bridge,
        peer: SocketAddr,
        pb: &[u8],
        issued_ms: u64,
        now_ms: u64,
    ) -> Outcome {
        let ip = peer.ip();
        if !self.registrations.allow(&ip, now_ms) {
            return self.refuse(Refusal::RegistrationRate);
        }
        let mut evicted = None;
        if self.regs.iter().filter(|r| r.ip == ip).count() >= self.cfg.clients_per_ip {
            match self.stale_victim(now_ms, |r| r.ip == ip) {
                Some(i) => evicted = Some(self.evict(bridge, i)),
                None => return self.refuse(Refusal::AddressFull),
            }
        }
        let id = match bridge.add_client(Transport::Udp) {
            Ok(id) => id,
            Err(_) => {
                let Some(i) = self.stale_victim(now_ms, |_| true) else {
                    return self.refuse(Refusal::NoFreeSlot);
                };
                let e = self.evict(bridge, i);
                evicted = evicted.or(Some(e));
                match bridge.add_client(Transport::Udp) {
                    Ok(id) => id,
                    Err(_) => return self.refuse(Refusal::NoFreeSlot),
                }
            }
        };
        self.regs.push(Registration {
            peer,
            ip,
            id,
            proof_ms: issued_ms,
            next_probe_ms: now_ms + self.cfg.probe_interval_ms,
        });
        self.stats.registered += 1;
        Outcome::Registered {
            id,
            welcome: Control::Welcome(self.probe_token(pb, now_ms)).encode(),
            evicted,
        }
    }

    /// Forgets client `id` (for example when the driver cannot send to it any more).
    pub fn remove(&mut self, bridge: &mut Bridge, id: ClientId) -> bool {
        let Some(i) = self.regs.iter().position(|r| r.id == id) else {
            return false;
        };
        self.regs.remove(i);
        bridge.remove_client(id);
        true
    }

    /// Time passes: rotates the secret when due (`fresh` gives the new one; `None`: derived from
    /// the current one), ends the registrations whose deadline passed and sends the probes that
    /// are due, each through `out`.
    pub fn poll(
        &mut self,
        bridge: &mut Bridge,
        now_ms: u64,
        fresh: impl FnOnce() -> Option<[u8; 32]>,
        mut out: impl FnMut(Event),
    ) {
        let slot = now_ms / self.cfg.secret_rotation_ms.max(1);
        if slot > self.jar.slot() {
            let next = fresh().unwrap_or_else(|| self.jar.next_secret());
            self.jar.advance(slot, || next);
        }
        self.registrations.forget_idle(now_ms);
        let mut i = 0;
        while i < self.regs.len() {
            let r = &self.regs[i];
            if now_ms >= r.proof_ms + self.cfg.timeout_ms {
                let r = self.regs.remove(i);
                bridge.remove_client(r.id);
                self.stats.expired += 1;
                out(Event::Expired(r.peer, r.id));
                continue;
            }
            if now_ms >= r.next_probe_ms {
                let (pb, pl) = peer_bytes(r.peer);
                let t = self.probe_token(&pb[..pl], now_ms);
                let r = &mut self.regs[i];
                r.next_probe_ms = now_ms + self.cfg.probe_interval_ms;
                self.stats.probes += 1;
                out(Event::Probe(r.peer, Control::Probe(t).encode()));
            }
            i += 1;
        }
    }
}
