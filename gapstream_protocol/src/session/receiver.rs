//! The receiver's side: [`ReceiverSession`], the Noise initiator, which opens the group's frames.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use gap_rust_cipher_s::KeystreamApplier;
use rand_core::CryptoRng;
use zeroize::Zeroizing;

use crate::frame::{self, OpenError};
use crate::handshake::{
    Established, HandshakeError, HelloKeys, Identity, Offer, ReceiverHandshake,
};
use crate::keys::{GroupKeys, KeyLogLine, SessionKeys};
use crate::replay::{ReplayError, ReplayWindow};
use crate::suite::{KexMode, Suite};
use crate::wire::{self, FrameHeader, GroupKeyBody, MsgType, SessionId, WireError};

use super::common::{HandshakeStats, control, wire_len};
use crate::clock::Clock;

/// Receiver configuration.
#[derive(Clone, Debug)]
pub struct ReceiverConfig {
    /// Suites offered, in preference order.
    pub suites: Vec<Suite>,
    /// Key-establishment modes offered, in preference order.
    pub modes: Vec<KexMode>,
    /// The receiver's RSA key (needed to offer [`KexMode::RsaOaep2048`]).
    #[cfg(target_has_atomic = "ptr")]
    pub rsa_key: Option<crate::rsa_oaep::Decryptor>,
    /// Resend a fresh HELLO when no ACCEPT came within this time.
    pub handshake_timeout_ns: u64,
    /// After an attempt fails on a remote cause (an ALERT, which is unauthenticated, or an ACCEPT
    /// that does not authenticate), the next HELLO goes out after this long, doubled for every
    /// further failure in a row up to [`ReceiverConfig::max_retry_backoff_ns`]. The receiver never
    /// gives up for a remote cause.
    pub retry_backoff_ns: u64,
    pub max_retry_backoff_ns: u64,
    /// How long frames of the previous epoch are still accepted after the switch to a new one.
    pub grace_ns: u64,
    /// Send a KEEPALIVE this often while established (the drone drops receivers it does not hear
    /// from, and answers, so both ends notice a dead peer).
    pub keepalive_ns: u64,
    /// No authenticated message from the drone for this long: the session is lost
    /// ([`ReceiverEvent::SessionLost`]; connect again).
    pub session_timeout_ns: u64,
    /// Largest frame payload accepted.
    pub max_payload: u32,
    /// CPX packet payload size (for the wire-byte statistics).
    pub packet_payload: usize,
    /// Produce key-log lines ([`ReceiverSession::drain_keylog`]). Debug aid; off by default.
    pub keylog: bool,
    /// The wall-clock time (ns since 1970-01-01 UTC) at which the session's [`Clock`] read 0.
    /// A HELLO's time is this plus the clock, and above the time of the session's previous
    /// HELLO: the drone accepts a receiver's HELLO only with a time above every one it accepted
    /// from it, also from an earlier process of that receiver, so an application that makes new
    /// sessions (a restart, a reconnect) sets it from the system clock (`gapstream` does). 0: the
    /// clock alone (tests, one session per drone run).
    pub wall_clock_origin_ns: u64,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            suites: alloc::vec![Suite::ChaCha20Poly1305, Suite::Aes128Gcm],
            modes: alloc::vec![KexMode::X25519],
            #[cfg(target_has_atomic = "ptr")]
            rsa_key: None,
            handshake_timeout_ns: 2_000_000_000,
            retry_backoff_ns: 250_000_000,
            max_retry_backoff_ns: 8_000_000_000,
            grace_ns: 500_000_000,
            keepalive_ns: 1_000_000_000,
            session_timeout_ns: 5_000_000_000,
            max_payload: 4 << 20,
            packet_payload: crate::cpx::MAX_PAYLOAD,
            keylog: false,
            wall_clock_origin_ns: 0,
        }
    }
}

impl ReceiverConfig {
    /// The largest message the receiver accepts (for [`crate::assembler::Assembler::new`]).
    pub fn max_message(&self) -> usize {
        (wire::FRAME_HEADER_MAX_LEN + self.max_payload as usize + crate::aead::TAG_LEN).max(4096)
    }
}

/// Receiver-side counters, for the receiver's metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    /// Frames delivered.
    pub frames: u64,
    pub payload_bytes: u64,
    /// Frames whose tag did not verify.
    pub tag_failures: u64,
    /// Frames with a sequence number already received, or sealed before this session began
    /// (replayed across a reconnect: below the first sequence number of the session's GROUP_KEY).
    pub replays: u64,
    /// Frames older than the replay window (or with the never-sealed sequence number `u64::MAX`).
    pub too_old: u64,
    /// Sequence numbers never received (gaps), from each session's first frame on, over all
    /// sessions.
    pub lost_frames: u64,
    /// Frames received out of order (and accepted).
    pub late_frames: u64,
    /// Frames carrying another suite than the negotiated one (downgrade attempts).
    pub wrong_suite: u64,
    /// Frames of an epoch older than the current one whose keys are gone (grace window over).
    pub bad_epoch: u64,
    /// Frames of an epoch whose group key this receiver was never given (it joined after them,
    /// its GROUP_KEY is still on its way, or it was removed from the group).
    pub no_key: u64,
    /// Messages for other receivers (the bridge broadcasts): ignored.
    pub not_for_us: u64,
    /// Messages that are not well-formed.
    pub malformed: u64,
    /// ACCEPTs for the current HELLO that did not authenticate (forged, or altered on the way):
    /// dropped, the handshake kept waiting for the drone's.
    pub bad_accepts: u64,
    /// Control messages rejected.
    pub control_rejected: u64,
    /// Group keys received (GROUP_KEY) and epoch changes of the frames.
    pub keys_received: u64,
    pub rekeys: u64,
    pub handshakes: u64,
    pub handshake_failures: u64,
    /// Sessions given up because the drone fell silent.
    pub sessions_lost: u64,
    /// Of the last handshake.
    pub handshake_bytes_sent: u64,
    pub handshake_bytes_received: u64,
    pub handshake_ns: u64,
}

/// A delivered frame. The buffer is the received message, decrypted in place.
#[derive(Clone, PartialEq, Eq)]
pub struct Frame {
    pub header: FrameHeader,
    /// False for the unauthenticated suites (and `none`): the contents were not checked.
    pub authenticated: bool,
    buf: Vec<u8>,
}

impl core::fmt::Debug for Frame {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Frame")
            .field("header", &self.header)
            .field("authenticated", &self.authenticated)
            .finish()
    }
}

impl Frame {
    /// The pixels (or whatever the payload is).
    pub fn pixels(&self) -> &[u8] {
        let at = self.header.header_len();
        &self.buf[at..at + self.header.payload_len as usize]
    }
    /// The drone's state when the frame was exposed (None when the drone sent none), read from
    /// the header's state record, which the tag covered. An error is a record this build cannot
    /// read (a newer record version): the frame itself is authentic.
    pub fn state(&self) -> Option<Result<crate::state::StateRecord, crate::state::StateError>> {
        self.header.state_record()
    }
    /// The pixels as an owned buffer (reuses the message's allocation).
    pub fn into_pixels(mut self) -> Vec<u8> {
        let (at, n) = (self.header.header_len(), self.header.payload_len as usize);
        self.buf.copy_within(at..at + n, 0);
        self.buf.truncate(n);
        self.buf
    }
}

/// What happened on the receiver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReceiverEvent {
    /// The handshake completed; frames follow once the group key arrived
    /// ([`ReceiverEvent::Rekeyed`]).
    Established {
        suite: Suite,
        mode: KexMode,
        stats: HandshakeStats,
    },
    /// The handshake could not even start, for a local cause (nothing to offer, an RSA mode
    /// without an RSA key): the caller reports it and fixes its configuration. Remote causes never
    /// end the handshake: see [`ReceiverEvent::AttemptFailed`].
    HandshakeFailed(HandshakeError),
    /// This attempt failed on a remote cause — an ALERT (unauthenticated: the drone's, or
    /// anybody's) or an ACCEPT that does not authenticate — and is counted in
    /// `handshake_failures`; a fresh HELLO follows after `retry_in_ns` (growing backoff). After an
    /// ALERT the attempt's handshake state is kept until then, so a forged ALERT followed by the
    /// drone's real ACCEPT still completes it.
    AttemptFailed {
        error: HandshakeError,
        retry_in_ns: u64,
    },
    /// No ACCEPT in time: a new HELLO was queued.
    HandshakeRetry {
        attempt: u32,
    },
    Frame(Frame),
    /// The drone sent the group key of a new epoch (a KEY_ACK is queued).
    Rekeyed {
        epoch: u32,
    },
    /// The drone answered a KEEPALIVE: sent at `sent_ns`, the drone's clock read `drone_ns` in
    /// between, the answer here at `received_ns` (this session's clock): a two-way sample of the
    /// drone's clock, authenticated like every control message. Nothing to do for the protocol;
    /// a receiver that stamps frames on its own clock feeds it to its clock estimate.
    ClockSample {
        sent_ns: u64,
        drone_ns: u64,
        received_ns: u64,
    },
    /// The drone closed the session.
    Closed,
    /// Nothing authenticated came from the drone for [`ReceiverConfig::session_timeout_ns`]
    /// (it restarted, or the path is gone): the keys are wiped; connect again.
    SessionLost,
}

/// Why the receiver rejected a message. Counted; the stream goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    Wire(WireError),
    /// A frame whose length disagrees with its header or exceeds the configured maximum.
    Length {
        expected: usize,
        have: usize,
    },
    TagFailure,
    Replay(ReplayError),
    /// A frame of an epoch before the current one whose grace window is over.
    BadEpoch {
        epoch: u32,
        current: u32,
    },
    /// A frame of an epoch whose group key this receiver does not hold.
    NoKey {
        epoch: u32,
    },
    /// A frame with another suite than the negotiated one.
    WrongSuite {
        got: u8,
        negotiated: Suite,
    },
    /// A frame or control message while no session is established.
    NotEstablished,
    Control(OpenError),
    /// A control message whose sequence number is not above the last one accepted (a replay).
    ControlReplay,
    /// An ACCEPT or ALERT that answers an earlier HELLO of this receiver.
    StaleHandshake,
    /// An ACCEPT for the current HELLO whose Noise message does not authenticate (not made by the
    /// paired drone, or altered): dropped, the handshake goes on waiting for the drone's.
    BadAccept,
    Unexpected(MsgType),
}

impl core::fmt::Display for Rejected {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Rejected::Wire(e) => e.fmt(f),
            Rejected::Length { expected, have } => {
                write!(f, "frame of {have} bytes, expected {expected}")
            }
            Rejected::TagFailure => f.write_str("frame failed authentication (tag mismatch)"),
            Rejected::Replay(e) => e.fmt(f),
            Rejected::BadEpoch { epoch, current } => {
                write!(f, "frame of key epoch {epoch}, current is {current}")
            }
            Rejected::NoKey { epoch } => {
                write!(
                    f,
                    "frame of key epoch {epoch}, whose group key this receiver lacks"
                )
            }
            Rejected::WrongSuite { got, negotiated } => {
                write!(
                    f,
                    "frame with suite {got:#04x}, negotiated {negotiated} (downgrade attempt?)"
                )
            }
            Rejected::NotEstablished => f.write_str("no session established"),
            Rejected::Control(e) => write!(f, "control message rejected: {e}"),
            Rejected::ControlReplay => f.write_str("replayed control message"),
            Rejected::StaleHandshake => f.write_str("handshake message for an earlier HELLO"),
            Rejected::BadAccept => f.write_str(
                "ACCEPT that does not authenticate (not from the paired drone, or altered): dropped",
            ),
            Rejected::Unexpected(t) => write!(
                f,
                "unexpected message type {:#04x} on the receiver",
                *t as u8
            ),
        }
    }
}

#[cfg_attr(feature = "fork", derive(Clone))]
struct RxLink {
    suite: Suite,
    session: SessionId,
    keys: SessionKeys,
    /// The epoch of the latest frames opened.
    current: Option<GroupKeys>,
    /// A newer epoch's key, received and not yet seen on a frame.
    next: Option<GroupKeys>,
    /// The epoch before `current`, and when it stops being accepted.
    previous: Option<(GroupKeys, u64)>,
    window: ReplayWindow,
    ctrl_out: u64,
    ctrl_in_top: Option<u64>,
    last_heard_ns: u64,
    keepalive_sent_ns: u64,
}

enum RxState {
    Idle,
    Handshaking {
        hs: Box<ReceiverHandshake>,
        hello_len: usize,
        /// When a fresh HELLO goes out if no ACCEPT came (timeout, or backoff after an ALERT).
        retry_ns: u64,
        attempts: u32,
    },
    /// An attempt failed (its ACCEPT did not authenticate): a fresh HELLO at `retry_ns`.
    Backoff {
        retry_ns: u64,
        attempts: u32,
    },
    Established(Box<RxLink>),
    Closed,
}

/// Hello ids of this receiver's recent HELLOs remembered to tell a late answer to one of them
/// (counted as stale) from an answer to another receiver (ignored).
const RECENT_HELLOS: usize = 4;

/// The receiver side. Holds its static key and the paired drone's public key.
pub struct ReceiverSession {
    // Read by the tests (a receiver re-made with the same pairing).
    pub(super) id: Identity,
    /// Key id and HELLO MAC key, derived once.
    hello_keys: HelloKeys,
    /// The time of the last HELLO (the next one's is above it).
    last_hello_time: u64,
    cfg: ReceiverConfig,
    state: RxState,
    outbox: VecDeque<Vec<u8>>,
    keylog: VecDeque<KeyLogLine>,
    stats: Option<HandshakeStats>,
    counters: ReceiverCounters,
    lost_before: u64,
    /// First HELLO of the current handshake (for the duration).
    first_hello_ns: u64,
    recent_hellos: [Option<SessionId>; RECENT_HELLOS],
    recent_next: usize,
    /// Attempts failed in a row (remote causes), for the backoff.
    failures_in_a_row: u32,
    /// The drone's boot counter of the last handshake (from its authenticated ACCEPT).
    drone_boot: Option<u32>,
}

impl core::fmt::Debug for ReceiverSession {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ReceiverSession")
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl ReceiverSession {
    pub fn new(id: Identity, cfg: ReceiverConfig) -> Self {
        ReceiverSession {
            hello_keys: HelloKeys::new(&id),
            last_hello_time: 0,
            id,
            cfg,
            state: RxState::Idle,
            outbox: VecDeque::new(),
            keylog: VecDeque::new(),
            stats: None,
            counters: ReceiverCounters::default(),
            lost_before: 0,
            first_hello_ns: 0,
            recent_hellos: [None; RECENT_HELLOS],
            recent_next: 0,
            failures_in_a_row: 0,
            drone_boot: None,
        }
    }

    /// A copy of the whole state (feature `fork`, for fuzzing snapshots; never in a product: two
    /// copies would seal control messages under the same key and nonce). `None` while a handshake
    /// is under way (its Noise state cannot be copied).
    #[cfg(feature = "fork")]
    pub fn fork(&self) -> Option<Self> {
        let state = match &self.state {
            RxState::Idle => RxState::Idle,
            RxState::Closed => RxState::Closed,
            RxState::Backoff { retry_ns, attempts } => RxState::Backoff {
                retry_ns: *retry_ns,
                attempts: *attempts,
            },
            RxState::Established(l) => RxState::Established(l.clone()),
            RxState::Handshaking { .. } => return None,
        };
        Some(ReceiverSession {
            id: self.id.clone(),
            hello_keys: self.hello_keys.clone(),
            last_hello_time: self.last_hello_time,
            cfg: self.cfg.clone(),
            state,
            outbox: self.outbox.clone(),
            keylog: self.keylog.clone(),
            stats: self.stats,
            counters: self.counters,
            lost_before: self.lost_before,
            first_hello_ns: self.first_hello_ns,
            recent_hellos: self.recent_hellos,
            recent_next: self.recent_next,
            failures_in_a_row: self.failures_in_a_row,
            drone_boot: self.drone_boot,
        })
    }

    /// The drone's boot counter as its last authenticated ACCEPT gave it (a larger value than
    /// before means the drone restarted).
    pub fn drone_boot(&self) -> Option<u32> {
        self.drone_boot
    }

    pub fn config(&self) -> &ReceiverConfig {
        &self.cfg
    }
    pub fn is_established(&self) -> bool {
        matches!(self.state, RxState::Established(_))
    }
    pub fn is_closed(&self) -> bool {
        matches!(self.state, RxState::Closed)
    }
    pub fn suite(&self) -> Option<Suite> {
        match &self.state {
            RxState::Established(l) => Some(l.suite),
            _ => None,
        }
    }
    /// This session's id (the hello id of its HELLO).
    pub fn session_id(&self) -> Option<SessionId> {
        match &self.state {
            RxState::Established(l) => Some(l.session),
            RxState::Handshaking { hs, .. } => Some(hs.hello_id()),
            _ => None,
        }
    }
    /// The epoch of the frames being opened (or, before the first frame, of the key held).
    pub fn epoch(&self) -> Option<u32> {
        match &self.state {
            RxState::Established(l) => l.current.as_ref().or(l.next.as_ref()).map(|g| g.epoch),
            _ => None,
        }
    }
    pub fn handshake_stats(&self) -> Option<HandshakeStats> {
        self.stats
    }
    /// The counters (loss included), for the metrics.
    pub fn counters(&self) -> ReceiverCounters {
        let mut c = self.counters;
        let (lost, late) = match &self.state {
            RxState::Established(l) => (l.window.lost(), l.window.late()),
            _ => (0, 0),
        };
        c.lost_frames = self.lost_before + lost;
        c.late_frames += late;
        c
    }
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.outbox.pop_front()
    }
    pub fn drain_keylog(&mut self) -> Option<KeyLogLine> {
        self.keylog.pop_front()
    }

    fn end_link(&mut self) {
        if let RxState::Established(l) = &self.state {
            self.lost_before += l.window.lost();
            self.counters.late_frames += l.window.late();
        }
    }

    /// Starts (or restarts) the handshake: a HELLO is queued. Any running session ends.
    pub fn connect<R: CryptoRng + ?Sized, C: Clock + ?Sized>(
        &mut self,
        rng: &mut R,
        clock: &C,
    ) -> Result<(), HandshakeError> {
        self.end_link();
        self.state = RxState::Idle;
        self.first_hello_ns = clock.now_ns();
        self.failures_in_a_row = 0;
        self.send_hello(rng, clock, 1)
    }

    fn send_hello<R: CryptoRng + ?Sized, C: Clock + ?Sized>(
        &mut self,
        rng: &mut R,
        clock: &C,
        attempts: u32,
    ) -> Result<(), HandshakeError> {
        #[cfg(target_has_atomic = "ptr")]
        let rsa_modulus = self.cfg.rsa_key.as_ref().map(|k| k.modulus());
        #[cfg(not(target_has_atomic = "ptr"))]
        let rsa_modulus = None;
        let offer = Offer {
            suites: &self.cfg.suites,
            modes: &self.cfg.modes,
            rsa_modulus,
        };
        let time = self
            .cfg
            .wall_clock_origin_ns
            .saturating_add(clock.now_ns())
            .max(self.last_hello_time.saturating_add(1));
        let (hs, hello) =
            ReceiverHandshake::start_as(&self.id, &self.hello_keys, time, &offer, rng)?;
        self.last_hello_time = time;
        let hello_len = hello.len();
        self.recent_hellos[self.recent_next] = Some(hs.hello_id());
        self.recent_next = (self.recent_next + 1) % RECENT_HELLOS;
        self.outbox.push_back(hello);
        self.state = RxState::Handshaking {
            hs: Box::new(hs),
            hello_len,
            retry_ns: clock.now_ns().saturating_add(self.cfg.handshake_timeout_ns),
            attempts,
        };
        Ok(())
    }

    /// Ends the current attempt for a remote cause: counted, and the next HELLO is scheduled after
    /// the backoff. `keep` is the attempt's handshake (after an ALERT), still able to complete.
    fn attempt_failed(
        &mut self,
        error: HandshakeError,
        now: u64,
        keep: Option<(Box<ReceiverHandshake>, usize)>,
        attempts: u32,
    ) -> ReceiverEvent {
        self.counters.handshake_failures += 1;
        let shift = self.failures_in_a_row.min(16);
        self.failures_in_a_row = self.failures_in_a_row.saturating_add(1);
        let retry_in_ns = self
            .cfg
            .retry_backoff_ns
            .saturating_mul(1 << shift)
            .min(self.cfg.max_retry_backoff_ns);
        let retry_ns = now.saturating_add(retry_in_ns);
        self.state = match keep {
            Some((hs, hello_len)) => RxState::Handshaking {
                hs,
                hello_len,
                retry_ns,
                attempts,
            },
            None => RxState::Backoff { retry_ns, attempts },
        };
        ReceiverEvent::AttemptFailed { error, retry_in_ns }
    }

    /// Timers: resends a HELLO after the handshake timeout; while established, sends a KEEPALIVE
    /// every [`ReceiverConfig::keepalive_ns`], wipes the previous epoch's keys when the grace
    /// window is over, and gives the session up when the drone has been silent for
    /// [`ReceiverConfig::session_timeout_ns`]. Call it regularly (for example every 100 ms).
    pub fn handle_timeout<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
    ) -> Option<ReceiverEvent>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let now = clock.now_ns();
        match &mut self.state {
            RxState::Handshaking {
                retry_ns, attempts, ..
            }
            | RxState::Backoff { retry_ns, attempts }
                if now >= *retry_ns =>
            {
                let attempt = *attempts + 1;
                match self.send_hello(rng, clock, attempt) {
                    Ok(()) => Some(ReceiverEvent::HandshakeRetry { attempt }),
                    Err(e) => {
                        self.state = RxState::Idle;
                        Some(ReceiverEvent::HandshakeFailed(e))
                    }
                }
            }
            RxState::Established(l) => {
                if l.previous.as_ref().is_some_and(|(_, until)| now >= *until) {
                    l.previous = None; // wiped on drop
                }
                if now.saturating_sub(l.last_heard_ns) >= self.cfg.session_timeout_ns {
                    self.end_link();
                    self.state = RxState::Idle;
                    self.counters.sessions_lost += 1;
                    return Some(ReceiverEvent::SessionLost);
                }
                if now.saturating_sub(l.keepalive_sent_ns) >= self.cfg.keepalive_ns {
                    l.keepalive_sent_ns = now;
                    // Its body is this clock's time: the drone's answer echoes it with the
                    // drone's clock ([`ReceiverEvent::ClockSample`]).
                    if let Ok(m) = control(
                        k,
                        &l.keys.r2d_control,
                        MsgType::Keepalive,
                        l.session,
                        &mut l.ctrl_out,
                        &now.to_le_bytes(),
                    ) {
                        self.outbox.push_back(m);
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Asks the drone to start a new epoch.
    pub fn request_rekey<K: KeystreamApplier + ?Sized>(
        &mut self,
        k: &mut K,
    ) -> Result<(), Rejected> {
        let RxState::Established(l) = &mut self.state else {
            return Err(Rejected::NotEstablished);
        };
        let m = control(
            k,
            &l.keys.r2d_control,
            MsgType::RekeyRequest,
            l.session,
            &mut l.ctrl_out,
            &[0],
        )
        .map_err(|e| Rejected::Control(OpenError::Crypto(e)))?;
        self.outbox.push_back(m);
        Ok(())
    }

    /// Ends the session: queues a CLOSE (the drone then rekeys the group without this receiver)
    /// and wipes the keys.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        if let RxState::Established(l) = &mut self.state {
            if let Ok(m) = control(
                k,
                &l.keys.r2d_control,
                MsgType::Close,
                l.session,
                &mut l.ctrl_out,
                &[0],
            ) {
                self.outbox.push_back(m);
            }
        }
        self.end_link();
        self.state = RxState::Closed;
    }

    /// Handles one message from the drone (reassembled from CPX packets). Frames are decrypted
    /// in the message's own buffer. Messages for other receivers give `Ok(None)`.
    pub fn handle_message<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
        msg: Vec<u8>,
    ) -> Result<Option<ReceiverEvent>, Rejected>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let r = self.handle_inner(k, rng, clock, msg);
        if let Err(e) = &r {
            let c = &mut self.counters;
            match e {
                Rejected::TagFailure => c.tag_failures += 1,
                Rejected::Replay(ReplayError::Duplicate | ReplayError::BeforeSession) => {
                    c.replays += 1
                }
                Rejected::Replay(ReplayError::TooOld | ReplayError::OutOfRange) => c.too_old += 1,
                Rejected::WrongSuite { .. } => c.wrong_suite += 1,
                Rejected::BadEpoch { .. } => c.bad_epoch += 1,
                Rejected::NoKey { .. } => c.no_key += 1,
                Rejected::Control(_) | Rejected::ControlReplay => c.control_rejected += 1,
                Rejected::Wire(_)
                | Rejected::Length { .. }
                | Rejected::Unexpected(_)
                | Rejected::StaleHandshake => c.malformed += 1,
                Rejected::BadAccept => c.bad_accepts += 1,
                Rejected::NotEstablished => c.malformed += 1,
            }
        }
        r
    }

    fn not_for_us(&mut self) -> Result<Option<ReceiverEvent>, Rejected> {
        self.counters.not_for_us += 1;
        Ok(None)
    }

    fn is_recent_hello(&self, id: &SessionId) -> bool {
        self.recent_hellos.contains(&Some(*id))
    }

    fn handle_inner<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
        msg: Vec<u8>,
    ) -> Result<Option<ReceiverEvent>, Rejected>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        match wire::parse_prefix(&msg).map_err(Rejected::Wire)? {
            t @ (MsgType::Accept | MsgType::Alert) => {
                let id = if t == MsgType::Accept {
                    wire::HandshakeHeader::decode(&msg)
                        .map_err(Rejected::Wire)?
                        .0
                        .hello_id
                } else {
                    wire::decode_alert(&msg).map_err(Rejected::Wire)?.0
                };
                let current = match &self.state {
                    RxState::Handshaking { hs, .. } => hs.hello_id() == id,
                    _ => false,
                };
                if !current {
                    return if self.is_recent_hello(&id) {
                        Err(Rejected::StaleHandshake)
                    } else {
                        self.not_for_us()
                    };
                }
                if t == MsgType::Accept {
                    self.on_accept(k, rng, clock, &msg)
                } else {
                    self.on_alert(&msg, clock.now_ns())
                }
            }
            MsgType::Frame => self
                .on_frame(k, clock, msg)
                .map(|f| Some(ReceiverEvent::Frame(f))),
            MsgType::GroupKey | MsgType::Keepalive | MsgType::Close => {
                let h = frame::control_header(&msg).map_err(Rejected::Control)?;
                match &self.state {
                    RxState::Established(l) if l.session == h.session => {
                        self.on_control(k, clock, &msg)
                    }
                    _ => self.not_for_us(),
                }
            }
            other => Err(Rejected::Unexpected(other)),
        }
    }

    fn on_alert(&mut self, msg: &[u8], now: u64) -> Result<Option<ReceiverEvent>, Rejected> {
        let RxState::Handshaking { hs, .. } = &self.state else {
            return Err(Rejected::StaleHandshake);
        };
        let e = hs.read_alert(msg).map_err(|e| match e {
            HandshakeError::Wire(w) => Rejected::Wire(w),
            _ => Rejected::StaleHandshake,
        })?;
        let RxState::Handshaking {
            hs,
            hello_len,
            attempts,
            ..
        } = core::mem::replace(&mut self.state, RxState::Idle)
        else {
            unreachable!("checked above")
        };
        // Unauthenticated: it ends nothing by itself. The attempt stays open (the drone's real
        // ACCEPT may still come) and a fresh HELLO follows after the backoff.
        Ok(Some(self.attempt_failed(
            e,
            now,
            Some((hs, hello_len)),
            attempts,
        )))
    }

    fn on_accept<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
        msg: &[u8],
    ) -> Result<Option<ReceiverEvent>, Rejected>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let RxState::Handshaking { hs, .. } = &mut self.state else {
            return Err(Rejected::StaleHandshake);
        };
        match hs.answers(msg) {
            Ok(()) => {}
            Err(HandshakeError::Wire(w)) => return Err(Rejected::Wire(w)),
            Err(_) => return Err(Rejected::StaleHandshake),
        }
        #[cfg(target_has_atomic = "ptr")]
        let rsa = self.cfg.rsa_key.clone();
        let mut decrypt = |ct: &[u8]| -> Result<Zeroizing<Vec<u8>>, HandshakeError> {
            #[cfg(target_has_atomic = "ptr")]
            {
                let key = rsa.as_ref().ok_or(HandshakeError::RsaKeyMissing)?;
                key.decrypt(rng, ct).map_err(HandshakeError::Rsa)
            }
            #[cfg(not(target_has_atomic = "ptr"))]
            {
                let _ = (ct, &rng);
                Err(HandshakeError::RsaKeyMissing)
            }
        };
        let est = match hs.finish(msg, &mut decrypt) {
            // Anybody can send bytes that look like an ACCEPT for this HELLO (its ids are in the
            // clear): one that does not authenticate is dropped and the handshake waits on, its
            // state untouched (WireGuard drops such a response too). Only an authenticated ACCEPT
            // ends the attempt.
            Err(HandshakeError::Authentication) => return Err(Rejected::BadAccept),
            r => r,
        };
        let RxState::Handshaking {
            hello_len,
            attempts,
            ..
        } = core::mem::replace(&mut self.state, RxState::Idle)
        else {
            unreachable!("checked above")
        };
        let est = est.and_then(|e| {
            let keys = SessionKeys::derive(k, &e.secret).map_err(|_| HandshakeError::Noise)?;
            Ok((e, keys))
        });
        match est {
            Ok((
                Established {
                    suite,
                    mode,
                    hello_id,
                    drone_boot,
                    secret,
                },
                keys,
            )) => {
                drop(secret);
                self.drone_boot = Some(drone_boot);
                let now = clock.now_ns();
                let stats = HandshakeStats {
                    suite,
                    mode,
                    bytes_sent: hello_len as u64,
                    bytes_received: msg.len() as u64,
                    wire_bytes_sent: wire_len(hello_len, self.cfg.packet_payload),
                    wire_bytes_received: wire_len(msg.len(), self.cfg.packet_payload),
                    duration_ns: now.saturating_sub(self.first_hello_ns),
                    attempts,
                };
                self.stats = Some(stats);
                self.failures_in_a_row = 0;
                let c = &mut self.counters;
                c.handshakes += 1;
                c.handshake_bytes_sent = stats.bytes_sent;
                c.handshake_bytes_received = stats.bytes_received;
                c.handshake_ns = stats.duration_ns;
                self.state = RxState::Established(Box::new(RxLink {
                    suite,
                    session: hello_id,
                    keys,
                    current: None,
                    next: None,
                    previous: None,
                    window: ReplayWindow::new(),
                    ctrl_out: 0,
                    ctrl_in_top: None,
                    last_heard_ns: now,
                    keepalive_sent_ns: now,
                }));
                Ok(Some(ReceiverEvent::Established { suite, mode, stats }))
            }
            Err(e) => {
                // An authenticated ACCEPT the receiver cannot use (a choice it did not offer, a bad
                // share): this attempt is over, the receiver is not.
                let now = clock.now_ns();
                Ok(Some(self.attempt_failed(e, now, None, attempts)))
            }
        }
    }

    fn on_frame<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
        mut msg: Vec<u8>,
    ) -> Result<Frame, Rejected> {
        let now = clock.now_ns();
        let (max, grace) = (self.cfg.max_payload, self.cfg.grace_ns);
        let h = FrameHeader::decode(&msg).map_err(Rejected::Wire)?;
        let RxState::Established(l) = &mut self.state else {
            // The group's frames keep coming while this receiver (re)joins: it has no key yet.
            return Err(Rejected::NoKey { epoch: h.epoch });
        };
        if h.suite != l.suite as u8 {
            return Err(Rejected::WrongSuite {
                got: h.suite,
                negotiated: l.suite,
            });
        }
        if h.payload_len > max {
            return Err(Rejected::Length {
                expected: max as usize,
                have: h.payload_len as usize,
            });
        }
        frame::frame_layout(&msg, l.suite).map_err(|e| match e {
            OpenError::Length { expected, have } => Rejected::Length { expected, have },
            OpenError::Wire(w) => Rejected::Wire(w),
            OpenError::Crypto(_) => Rejected::TagFailure,
        })?;
        l.window.check(h.sequence).map_err(Rejected::Replay)?;
        let authenticated = l.suite.is_authenticated();
        let e = h.epoch;
        let is = |g: &Option<GroupKeys>| g.as_ref().is_some_and(|g| g.epoch == e);
        let (key, promote) = if is(&l.current) {
            (&l.current.as_ref().expect("checked").frame, false)
        } else if is(&l.next) {
            (&l.next.as_ref().expect("checked").frame, true)
        } else if let Some((p, _)) = l
            .previous
            .as_ref()
            .filter(|(p, until)| p.epoch == e && now < *until)
        {
            (&p.frame, false)
        } else if let Some(c) = l.current.as_ref().filter(|c| e < c.epoch) {
            return Err(Rejected::BadEpoch {
                epoch: e,
                current: c.epoch,
            });
        } else {
            return Err(Rejected::NoKey { epoch: e });
        };
        frame::open_frame(k, key, &mut msg).map_err(|_| Rejected::TagFailure)?;
        if promote {
            // The drone switched to the epoch whose key we were given: the current one becomes
            // the previous (kept for the grace window, for frames still in flight).
            if let Some(old) = l.current.take() {
                l.previous = Some((old, now.saturating_add(grace)));
                self.counters.rekeys += 1;
            }
            l.current = l.next.take();
        }
        l.window.commit(h.sequence).map_err(Rejected::Replay)?;
        l.last_heard_ns = now;
        self.counters.frames += 1;
        self.counters.payload_bytes += h.payload_len as u64;
        Ok(Frame {
            header: h,
            authenticated,
            buf: msg,
        })
    }

    fn on_control<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
        msg: &[u8],
    ) -> Result<Option<ReceiverEvent>, Rejected> {
        let now = clock.now_ns();
        let (keylog, grace) = (self.cfg.keylog, self.cfg.grace_ns);
        let RxState::Established(l) = &mut self.state else {
            return Err(Rejected::NotEstablished);
        };
        let h = frame::control_header(msg).map_err(Rejected::Control)?;
        if l.ctrl_in_top.is_some_and(|top| h.sequence <= top) {
            return Err(Rejected::ControlReplay);
        }
        let mut buf = Zeroizing::new(msg.to_vec());
        let (h, body) =
            frame::open_control(k, &l.keys.d2r_control, &mut buf).map_err(Rejected::Control)?;
        l.ctrl_in_top = Some(h.sequence);
        l.last_heard_ns = now;
        match h.msg_type {
            MsgType::GroupKey => {
                let g = GroupKeyBody::decode(body)
                    .ok_or(Rejected::Control(OpenError::Wire(WireError::Reserved)))?;
                let e = g.epoch;
                // Frames sealed before this session existed are replays here, whatever the
                // (fresh) window says.
                l.window.raise_floor(g.first_sequence);
                let held = |x: &Option<GroupKeys>| x.as_ref().map(|x| x.epoch);
                let known = held(&l.current) == Some(e) || held(&l.next) == Some(e);
                let older =
                    held(&l.current).is_some_and(|c| e < c) || held(&l.next).is_some_and(|n| e < n);
                let mut event = None;
                if !known && !older {
                    let keys = GroupKeys::derive(k, &g.secret, e, l.suite)
                        .map_err(|e| Rejected::Control(OpenError::Crypto(e)))?;
                    if keylog {
                        self.keylog.push_back(KeyLogLine {
                            session: l.session,
                            suite: l.suite,
                            group: keys.clone(),
                            session_keys: l.keys.clone(),
                        });
                    }
                    // A newer key while one is held but not seen on a frame yet: either the drone
                    // drew again before using it (a receiver left), or its frames are still on
                    // the way; keep it for the grace window like a previous epoch.
                    if let Some(unseen) = l.next.take() {
                        l.previous = Some((unseen, now.saturating_add(grace)));
                    }
                    l.next = Some(keys);
                    self.counters.keys_received += 1;
                    event = Some(ReceiverEvent::Rekeyed { epoch: e });
                }
                if !older {
                    // Acknowledge (again, when our earlier KEY_ACK may have been lost).
                    let m = control(
                        k,
                        &l.keys.r2d_control,
                        MsgType::KeyAck,
                        l.session,
                        &mut l.ctrl_out,
                        &e.to_le_bytes(),
                    )
                    .map_err(|e| Rejected::Control(OpenError::Crypto(e)))?;
                    self.outbox.push_back(m);
                }
                Ok(event)
            }
            MsgType::Keepalive => {
                // The drone's answer to one of ours: our send time echoed, its clock added (an
                // older drone answers with an empty body: nothing to learn).
                let (Ok(sent), Ok(drone)) = (
                    <[u8; 8]>::try_from(body.get(..8).unwrap_or_default()),
                    <[u8; 8]>::try_from(body.get(8..16).unwrap_or_default()),
                ) else {
                    return Ok(None);
                };
                let sent_ns = u64::from_le_bytes(sent);
                Ok((sent_ns <= now).then(|| ReceiverEvent::ClockSample {
                    sent_ns,
                    drone_ns: u64::from_le_bytes(drone),
                    received_ns: now,
                }))
            }
            MsgType::Close => {
                self.end_link();
                self.state = RxState::Closed;
                Ok(Some(ReceiverEvent::Closed))
            }
            other => Err(Rejected::Unexpected(other)),
        }
    }
}
