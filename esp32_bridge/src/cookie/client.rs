//! The receiver's side of the UDP registration, sans I/O: what to send when, what a datagram from
//! the bridge means, when the registration is lost. The receiver's UDP transport only drives it:
//!
//! ```text
//! let mut c = Client::new(ClientConfig::default(), now_ms);
//! loop {
//!     while let Some(d) = c.poll_transmit(now_ms) { socket.send(&d) }
//!     match c.status(now_ms) { Status::TimedOut | Status::Lost => reconnect, _ => {} }
//!     let d = socket.recv();                              // with a timeout
//!     if c.handle(&d, now_ms) == Received::Data { /* one CPX packet */ }
//! }
//! // when done: if let Some(d) = c.leave() { socket.send(&d) }
//! ```
//!
//! Registering: a request every [`ClientConfig::retry_ms`] until a cookie arrives, then the echo
//! of that cookie every `retry_ms` until the welcome (after [`ClientConfig::echo_restart_ms`]
//! without one, a new request: the cookie may have expired); [`Status::TimedOut`] after
//! [`ClientConfig::register_timeout_ms`]. Registered: every token the bridge sends (the welcome's,
//! then a probe's every second) is answered once with an alive; [`Status::Lost`] when no probe
//! came for [`ClientConfig::lost_ms`] (the bridge has dropped the registration by then).

use super::{Control, Datagram, Token, is_control};

/// The client's timers, in milliseconds of the caller's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// A request or echo without an answer is sent again after this long.
    pub retry_ms: u64,
    /// Echoing this long without a welcome: ask for a new cookie.
    pub echo_restart_ms: u64,
    /// Not registered this long after the start: give up ([`Status::TimedOut`]).
    pub register_timeout_ms: u64,
    /// Registered, and no probe for this long: the registration is gone ([`Status::Lost`]).
    pub lost_ms: u64,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            retry_ms: 250,
            echo_restart_ms: 1_000,
            register_timeout_ms: 2_000,
            // The bridge's timeout (5 s) plus one probe interval.
            lost_ms: 6_000,
        }
    }
}

/// Where the registration stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Asking for a cookie or echoing it.
    Registering,
    /// Welcomed, and probes keep coming.
    Registered,
    /// No welcome within [`ClientConfig::register_timeout_ms`].
    TimedOut,
    /// Registered, but no probe for [`ClientConfig::lost_ms`].
    Lost,
    /// [`Client::leave`] was called.
    Left,
}

/// What a datagram from the bridge was ([`Client::handle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// Part of the stream (a CPX packet): for the caller.
    Data,
    /// Part of the registration (consumed here, whatever it meant).
    Control,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Requesting,
    Echoing { cookie: Token, since_ms: u64 },
    Registered,
    Left,
}

/// The receiver's side of the registration with one bridge.
#[derive(Clone, Debug)]
pub struct Client {
    cfg: ClientConfig,
    phase: Phase,
    started_ms: u64,
    last_sent_ms: Option<u64>,
    /// When the last welcome or probe arrived.
    heard_ms: u64,
    /// The newest token from the bridge, and whether it still needs its alive.
    latest: Option<Token>,
    answer_due: bool,
    ignored: u64,
}

impl Client {
    pub fn new(cfg: ClientConfig, now_ms: u64) -> Self {
        Client {
            cfg,
            phase: Phase::Requesting,
            started_ms: now_ms,
            last_sent_ms: None,
            heard_ms: now_ms,
            latest: None,
            answer_due: false,
            ignored: 0,
        }
    }

    pub fn status(&self, now_ms: u64) -> Status {
        match self.phase {
            Phase::Requesting | Phase::Echoing { .. } => {
                if now_ms.saturating_sub(self.started_ms) >= self.cfg.register_timeout_ms {
                    Status::TimedOut
                } else {
                    Status::Registering
                }
            }
            Phase::Registered => {
                if now_ms.saturating_sub(self.heard_ms) >= self.cfg.lost_ms {
                    Status::Lost
                } else {
                    Status::Registered
                }
            }
            Phase::Left => Status::Left,
        }
    }

    /// Datagrams of the exchange that meant nothing in the state they arrived in (repeated,
    /// late, or forged ones).
    pub fn ignored(&self) -> u64 {
        self.ignored
    }

    fn retry_due(&self, now_ms: u64) -> bool {
        self.last_sent_ms
            .is_none_or(|t| now_ms.saturating_sub(t) >= self.cfg.retry_ms)
    }

    /// The next datagram to send to the bridge now, if any (call until `None`).
    pub fn poll_transmit(&mut self, now_ms: u64) -> Option<Datagram> {
        if !matches!(
            self.status(now_ms),
            Status::Registering | Status::Registered
        ) {
            return None;
        }
        match self.phase {
            Phase::Requesting if self.retry_due(now_ms) => {
                self.last_sent_ms = Some(now_ms);
                Some(Control::Request.encode())
            }
            Phase::Echoing { since_ms, .. }
                if now_ms.saturating_sub(since_ms) >= self.cfg.echo_restart_ms =>
            {
                self.phase = Phase::Requesting;
                self.last_sent_ms = Some(now_ms);
                Some(Control::Request.encode())
            }
            Phase::Echoing { cookie, .. } if self.retry_due(now_ms) => {
                self.last_sent_ms = Some(now_ms);
                Some(Control::Echo(cookie).encode())
            }
            Phase::Registered if self.answer_due => {
                self.answer_due = false;
                self.latest.map(|t| Control::Alive(t).encode())
            }
            _ => None,
        }
    }

    /// When [`Client::poll_transmit`] may have something next (a retry, or the status changes).
    pub fn poll_timeout(&self) -> Option<u64> {
        let give_up = self.started_ms + self.cfg.register_timeout_ms;
        let retry = self
            .last_sent_ms
            .map_or(self.started_ms, |t| t + self.cfg.retry_ms);
        match self.phase {
            Phase::Requesting => Some(retry.min(give_up)),
            Phase::Echoing { since_ms, .. } => {
                Some(retry.min(since_ms + self.cfg.echo_restart_ms).min(give_up))
            }
            Phase::Registered if self.answer_due => Some(self.heard_ms),
            Phase::Registered => Some(self.heard_ms + self.cfg.lost_ms),
            Phase::Left => None,
        }
    }

    /// A datagram from the bridge.
    pub fn handle(&mut self, d: &[u8], now_ms: u64) -> Received {
        if !is_control(d) {
            return Received::Data;
        }
        let registering = matches!(self.phase, Phase::Requesting | Phase::Echoing { .. })
            && self.status(now_ms) == Status::Registering;
        match (Control::parse(d), self.phase) {
            (Some(Control::Cookie(t)), Phase::Requesting) if registering => {
                self.phase = Phase::Echoing {
                    cookie: t,
                    since_ms: now_ms,
                };
                self.last_sent_ms = None;
            }
            (Some(Control::Welcome(t)), Phase::Requesting | Phase::Echoing { .. })
                if registering =>
            {
                self.phase = Phase::Registered;
                self.token(t, now_ms);
            }
            (Some(Control::Welcome(t) | Control::Probe(t)), Phase::Registered)
                if self.status(now_ms) == Status::Registered =>
            {
                self.token(t, now_ms);
            }
            _ => self.ignored += 1,
        }
        Received::Control
    }

    fn token(&mut self, t: Token, now_ms: u64) {
        self.heard_ms = now_ms;
        if self.latest != Some(t) {
            self.latest = Some(t);
            self.answer_due = true;
        }
    }

    /// Stops: the datagram that ends the registration at once (a leave with the newest token),
    /// if registered; without it the bridge forgets the address after its timeout.
    pub fn leave(&mut self) -> Option<Datagram> {
        let was = self.phase;
        self.phase = Phase::Left;
        match was {
            Phase::Registered => self.latest.map(|t| Control::Leave(t).encode()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    fn tok(k: u8) -> Token {
        Token {
            issued: u32::from(k) * 1000,
            mac: [k; 16],
        }
    }

    /// Every datagram `c` sends from `from` to `to` (exclusive), polled every millisecond.
    fn sent(c: &mut Client, from: u64, to: u64) -> Vec<(u64, Control)> {
        let mut out = Vec::new();
        for t in from..to {
            while let Some(d) = c.poll_transmit(t) {
                out.push((t, Control::parse(&d).unwrap()));
            }
        }
        out
    }

    #[test]
    fn requests_every_250_ms_and_gives_up_after_2_s() {
        let mut c = Client::new(ClientConfig::default(), 0);
        let got = sent(&mut c, 0, 3000);
        let times: Vec<u64> = got.iter().map(|x| x.0).collect();
        assert_eq!(times, [0, 250, 500, 750, 1000, 1250, 1500, 1750]);
        assert!(got.iter().all(|x| x.1 == Control::Request));
        assert_eq!(c.status(1999), Status::Registering);
        assert_eq!(c.status(2000), Status::TimedOut);
        assert_eq!(c.poll_timeout(), Some(2000));
        assert_eq!(c.leave(), None, "never registered: nothing to say");
    }

    #[test]
    fn echoes_the_cookie_then_asks_anew_after_a_second_without_welcome() {
        let mut c = Client::new(ClientConfig::default(), 0);
        assert_eq!(sent(&mut c, 0, 100).len(), 1);
        assert_eq!(
            c.handle(&Control::Cookie(tok(1)).encode(), 100),
            Received::Control
        );
        let got = sent(&mut c, 100, 1150);
        assert_eq!(
            got,
            [
                (100, Control::Echo(tok(1))),
                (350, Control::Echo(tok(1))),
                (600, Control::Echo(tok(1))),
                (850, Control::Echo(tok(1))),
                (1100, Control::Request),
            ]
        );
        // After the new request a new cookie counts; a further one while echoing is ignored.
        c.handle(&Control::Cookie(tok(2)).encode(), 1120);
        assert_eq!(sent(&mut c, 1120, 1121), [(1120, Control::Echo(tok(2)))]);
        c.handle(&Control::Cookie(tok(3)).encode(), 1130);
        assert_eq!(c.ignored(), 1);
        c.handle(&Control::Welcome(tok(4)).encode(), 1200);
        assert_eq!(c.status(1200), Status::Registered);
        assert_eq!(sent(&mut c, 1200, 1300), [(1200, Control::Alive(tok(4)))]);
    }

    #[test]
    fn answers_each_token_once_and_is_lost_without_probes() {
        let mut c = Client::new(ClientConfig::default(), 0);
        sent(&mut c, 0, 1);
        c.handle(&Control::Cookie(tok(1)).encode(), 10);
        sent(&mut c, 10, 11);
        c.handle(&Control::Welcome(tok(2)).encode(), 20);
        assert_eq!(sent(&mut c, 20, 30), [(20, Control::Alive(tok(2)))]);
        // The same welcome again (the bridge answered a repeated echo): nothing new to answer.
        c.handle(&Control::Welcome(tok(2)).encode(), 40);
        assert!(sent(&mut c, 40, 1000).is_empty());
        for (k, t) in [(3u8, 1020), (4, 2020), (5, 3020)] {
            c.handle(&Control::Probe(tok(k)).encode(), t);
            assert_eq!(sent(&mut c, t, t + 1), [(t, Control::Alive(tok(k)))]);
        }
        // Stray cookies, requests, echoes: consumed, ignored.
        for d in [
            Control::Cookie(tok(9)),
            Control::Request,
            Control::Echo(tok(9)),
            Control::Alive(tok(9)),
        ] {
            assert_eq!(c.handle(&d.encode(), 3100), Received::Control);
        }
        assert_eq!(c.handle(b"GSjunk", 3100), Received::Control);
        assert_eq!(c.handle(&[4, 0, 0x5c, 0x0e, 1, 2], 3100), Received::Data);
        assert!(sent(&mut c, 3100, 4000).is_empty());
        assert_eq!(c.status(3020 + 5999), Status::Registered);
        assert_eq!(c.poll_timeout(), Some(3020 + 6000));
        assert_eq!(c.status(3020 + 6000), Status::Lost);
        assert!(c.poll_transmit(9100).is_none());
        // Leaving says so with the newest token.
        let mut c2 = c.clone();
        c2.handle(&Control::Probe(tok(6)).encode(), 5000);
        assert_eq!(
            c.leave().map(|d| Control::parse(&d).unwrap()),
            Some(Control::Leave(tok(5)))
        );
        assert_eq!(c.status(0), Status::Left);
        assert_eq!(c.leave(), None);
        assert_eq!(
            c2.leave().map(|d| Control::parse(&d).unwrap()),
            Some(Control::Leave(tok(6)))
        );
    }
}
