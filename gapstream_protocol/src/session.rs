//! The two I/O-free state machines: [`DroneSession`] (Noise responder to every paired receiver,
//! seals frames once for all of them) and [`ReceiverSession`] (Noise initiator, opens frames).
//! Bytes in → events and bytes out, in the spirit of rustls: the caller moves messages (the
//! firmware over CPX/SPI, the host over tokio, the tests through a `Vec`), supplies time through
//! [`Clock`], randomness through `rand_core`'s `CryptoRng`, and the keystream engine through
//! `KeystreamApplier`.
//!
//! ```text
//! drone, per receiver session:
//!   HELLO ok ──▶ candidate (ACCEPT + GROUP_KEY out) ──first authenticated message──▶ confirmed
//!                   (replaces that receiver's older session)      │ CLOSE / silent for member_timeout
//!                                                                  ▼
//!                                                                gone (receiver left: rekey)
//! drone, group:
//!   no epoch ──first KEY_ACK──▶ epoch n ──join / leave / N frames / T ns / REKEY_REQUEST──▶ n+1 pending
//!   (GROUP_KEY to every session, resent until KEY_ACK) ──all acked, or commit timeout and one ack──▶
//!   epoch n+1 (frames switch; epoch n's key wiped)            last receiver gone ──▶ no epoch
//! receiver: Idle ──connect──▶ Handshaking ──ACCEPT ok──▶ Established ──GROUP_KEY──▶ next epoch held
//!                   (HELLO out) │  ▲ timeout: new HELLO      │   (KEY_ACK out) ──frame of it──▶ current
//!                   ALERT / bad ACCEPT: counted, fresh HELLO │   (previous kept for the grace window)
//!                   after a growing backoff (never gives up)  │
//!                                                            └─ CLOSE ──▶ Closed;  drone silent ──▶ Idle (SessionLost)
//! ```
//!
//! Frames that fail (tag, replay, epoch, suite, layout) are rejected with a typed [`Rejected`],
//! counted in [`ReceiverCounters`], and the stream goes on. What the bridge broadcasts for another
//! receiver (an ACCEPT or ALERT for another hello id, a control message of another session) is
//! ignored and only counted (`not_for_us`).

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use gap_rust_cipher_s::KeystreamApplier;
use rand_core::CryptoRng;
use zeroize::Zeroizing;

use crate::aead::CryptoError;
use crate::frame::{self, FrameMeta, OpenError, SealedFrame};
use crate::handshake::{
    self, DroneIdentity, DronePolicy, Established, HandshakeError, Identity, Offer,
    ReceiverHandshake, SuiteSet,
};
use crate::keys::{GroupKeys, GroupPool, GroupSecret, KeyLogLine, SessionKeys};
use crate::replay::{ReplayError, ReplayWindow};
use crate::suite::{KexMode, Suite};
use crate::wire::{self, AlertCode, FrameHeader, GroupKeyBody, MsgType, SessionId, WireError};

/// Monotonic time in nanoseconds.
pub trait Clock {
    fn now_ns(&self) -> u64;
}

impl<F: Fn() -> u64> Clock for F {
    fn now_ns(&self) -> u64 {
        self()
    }
}

/// Most frames one epoch may carry even when no rekey happens (the caller never calls
/// [`DroneSession::handle_timeout`], or acknowledgements never arrive): sealing stops
/// ([`SealError::RekeyStalled`]) rather than going on for ever under one key.
pub const HARD_MAX_FRAMES_PER_EPOCH: u64 = 1 << 30;

/// Most receivers a drone serves at once (the bound of [`DroneConfig::max_receivers`]).
pub const MAX_RECEIVERS: usize = handshake::MAX_RECEIVER_KEYS;

/// Most messages the drone queues before [`DroneSession::poll_transmit`] drains them; beyond it a
/// message is dropped and counted (GROUP_KEYs are resent, a lost ACCEPT makes the receiver retry).
pub const MAX_OUTBOX: usize = 8 * MAX_RECEIVERS + 8;

/// Cost of the last completed handshake, as seen by one side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandshakeStats {
    pub suite: Suite,
    pub mode: KexMode,
    /// Message bytes sent / received (HELLO, ACCEPT).
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// The same on the wire, with CPX framing at the configured packet size.
    pub wire_bytes_sent: u64,
    pub wire_bytes_received: u64,
    /// Receiver: from sending the first HELLO of this handshake (retries included) to having read
    /// ACCEPT: round trips and the drone's work.
    /// Drone: from reading HELLO to having built ACCEPT (its computation).
    pub duration_ns: u64,
    /// HELLOs sent for this handshake (receiver; 1 on the drone).
    pub attempts: u32,
}

fn wire_len(n: usize, packet: usize) -> u64 {
    crate::cpx::wire_len(n, packet.clamp(1, crate::cpx::MAX_PAYLOAD)) as u64
}

fn control_body_u32(body: &[u8]) -> Option<u32> {
    body.try_into().ok().map(u32::from_le_bytes)
}

/// Seals a control message of `session` into a new buffer.
fn control<K: KeystreamApplier + ?Sized>(
    k: &mut K,
    key: &crate::keys::DirectionKey,
    t: MsgType,
    session: SessionId,
    seq: &mut u64,
    body: &[u8],
) -> Result<Vec<u8>, CryptoError> {
    let next = seq.checked_add(1).ok_or(CryptoError::SequenceExhausted)?;
    let mut out = alloc::vec![0u8; wire::CONTROL_HEADER_LEN + body.len() + crate::aead::TAG_LEN];
    frame::seal_control(k, key, t, session, *seq, body, &mut out)?;
    *seq = next;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Drone

/// Drone configuration.
#[derive(Clone, Debug)]
pub struct DroneConfig {
    /// Suites and modes the drone accepts.
    pub policy: DronePolicy,
    /// Receivers served at once (1..=[`MAX_RECEIVERS`]); a HELLO from one more is refused
    /// ([`AlertCode::GroupFull`]).
    pub max_receivers: usize,
    /// Start a new epoch after this many frames in one.
    pub rekey_after_frames: u64,
    /// Start a new epoch after this long in one.
    pub rekey_after_ns: u64,
    /// Resend an unacknowledged GROUP_KEY after this long.
    pub rekey_retransmit_ns: u64,
    /// Switch frames to a pending epoch after this long even if some receivers have not
    /// acknowledged it yet (at least one must have).
    pub rekey_commit_timeout_ns: u64,
    /// A receiver silent for this long (no KEEPALIVE, no KEY_ACK) has left.
    pub member_timeout_ns: u64,
    /// CPX packet payload size (for the wire-byte statistics).
    pub packet_payload: usize,
    /// Produce key-log lines ([`DroneSession::drain_keylog`]). Debug aid; off by default.
    pub keylog: bool,
    /// The drone's boot counter: a persistent count advanced (and stored) at every start, before
    /// any handshake (`gapstream_drone::boot`). It is authenticated in every ACCEPT and so bound
    /// into every session key, and mixed into the drone's ephemeral keys: what a receiver sent to
    /// an earlier boot (a recorded KEY_ACK) never opens in this one, even if the drone's randomness
    /// repeats. 0 only for tests and benchmarks; a drone application must set it.
    pub boot_counter: u32,
}

impl Default for DroneConfig {
    fn default() -> Self {
        DroneConfig {
            policy: DronePolicy::default(),
            max_receivers: 4,
            rekey_after_frames: 10_000,
            rekey_after_ns: 60_000_000_000,
            rekey_retransmit_ns: 250_000_000,
            rekey_commit_timeout_ns: 500_000_000,
            member_timeout_ns: 5_000_000_000,
            packet_payload: crate::cpx::MAX_PAYLOAD,
            keylog: false,
            boot_counter: 0,
        }
    }
}

/// Why a receiver's session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaveReason {
    /// It sent CLOSE.
    Closed,
    /// It was silent for [`DroneConfig::member_timeout_ns`].
    TimedOut,
}

/// What happened on the drone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DroneEvent {
    /// A receiver completed the handshake (an ACCEPT, and the group key when there is one, are
    /// queued). `receiver` is its index in the drone's pairing; `rejoined`: that receiver already
    /// had a session, which the new one replaces once the receiver uses it (no rekey).
    Established {
        session: SessionId,
        receiver: usize,
        rejoined: bool,
        suite: Suite,
        mode: KexMode,
        stats: HandshakeStats,
    },
    /// A HELLO was refused (an ALERT may be queued); every running session is kept.
    HelloRefused(HandshakeError),
    /// A receiver acknowledged an epoch's group key.
    KeyAcked { session: SessionId, epoch: u32 },
    /// A receiver asked for a rekey; it has started.
    RekeyRequested { session: SessionId },
    /// A receiver closed its session. If it was that receiver's last, a rekey has started so that
    /// it cannot read the frames of the next epoch.
    Left {
        session: SessionId,
        receiver: usize,
        reason: LeaveReason,
    },
}

/// Why the drone rejected a message (it goes on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DroneError {
    Wire(WireError),
    /// A control message of no running session.
    UnknownSession,
    /// A control message that did not open (wrong key, altered).
    Control(OpenError),
    /// A message the drone never receives (ACCEPT, FRAME, ...).
    Unexpected(MsgType),
    /// A control message with a sequence number already seen.
    ControlReplay,
    /// A well-formed control message with a body that makes no sense now.
    BadControl,
}

impl core::fmt::Display for DroneError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DroneError::Wire(e) => e.fmt(f),
            DroneError::UnknownSession => f.write_str("control message of no running session"),
            DroneError::Control(e) => write!(f, "control message rejected: {e}"),
            DroneError::Unexpected(t) => {
                write!(f, "unexpected message type {:#04x} on the drone", *t as u8)
            }
            DroneError::ControlReplay => f.write_str("replayed control message"),
            DroneError::BadControl => f.write_str("control message does not fit the session state"),
        }
    }
}

/// Why a frame could not be sealed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SealError {
    /// No receiver holds a group key yet (or every receiver left).
    NotEstablished,
    /// The 64-bit sequence number is used up: restart the drone.
    SequenceExhausted,
    /// The 32-bit epoch counter is used up: restart the drone.
    EpochExhausted,
    /// [`HARD_MAX_FRAMES_PER_EPOCH`] frames without a new epoch.
    RekeyStalled,
    /// The payload exceeds the frame header's 32-bit length.
    PayloadTooLong,
    Crypto(CryptoError),
}

impl From<CryptoError> for SealError {
    fn from(e: CryptoError) -> Self {
        SealError::Crypto(e)
    }
}

impl core::fmt::Display for SealError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SealError::NotEstablished => f.write_str("no receiver holds a group key yet"),
            SealError::SequenceExhausted => f.write_str("sequence numbers exhausted: restart"),
            SealError::EpochExhausted => f.write_str("key epochs exhausted: restart"),
            SealError::RekeyStalled => f.write_str("no new epoch and the epoch is full"),
            SealError::PayloadTooLong => f.write_str("payload longer than 2^32 - 1 bytes"),
            SealError::Crypto(e) => e.fmt(f),
        }
    }
}

/// Drone-side counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DroneCounters {
    pub frames_sealed: u64,
    pub payload_bytes: u64,
    pub handshakes: u64,
    pub hellos_refused: u64,
    /// Receivers that joined (a HELLO from a receiver without a session).
    pub members_joined: u64,
    /// Receivers that left by CLOSE / by going silent.
    pub members_left: u64,
    pub members_timed_out: u64,
    /// Sessions replaced by a newer session of the same receiver.
    pub sessions_replaced: u64,
    /// Group epochs drawn / put into use for frames.
    pub rekeys_started: u64,
    pub rekeys_committed: u64,
    /// GROUP_KEY messages sent (first sends and resends) / resends / acknowledgements.
    pub keys_sent: u64,
    pub key_retransmits: u64,
    pub keys_acked: u64,
    pub messages_rejected: u64,
    /// Messages dropped because the outbox was full ([`MAX_OUTBOX`]).
    pub outbox_dropped: u64,
}

/// A running session with one receiver, as the drone sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    pub session: SessionId,
    /// Index of the receiver's key in the drone's pairing.
    pub receiver: usize,
    /// The receiver has sent an authenticated message in this session.
    pub confirmed: bool,
    /// Highest epoch whose group key it acknowledged.
    pub acked: Option<u32>,
}

struct DroneSess {
    id: SessionId,
    receiver: usize,
    keys: SessionKeys,
    ctrl_out: u64,
    ctrl_in_top: Option<u64>,
    confirmed: bool,
    acked: Option<u32>,
    key_sent_ns: u64,
    last_heard_ns: u64,
    /// The group's next frame sequence number when this session's HELLO was accepted: the session
    /// never had a key for a frame below it, and its receiver refuses those (every GROUP_KEY of
    /// the session carries it).
    first_sequence: u64,
}

impl DroneSess {
    fn has_acked(&self, epoch: u32) -> bool {
        self.acked.is_some_and(|a| a >= epoch)
    }
}

/// A group epoch: its secret (sent to every member) and frame key.
struct GroupEpoch {
    secret: GroupSecret,
    keys: GroupKeys,
}

/// The drone side. Holds its static key and the paired receivers' public keys, one session per
/// receiver (plus, while a receiver re-handshakes, its newer candidate session), and the group's
/// epochs. Memory is bounded: at most `2 × max_receivers` sessions and [`MAX_OUTBOX`] queued
/// messages.
pub struct DroneSession {
    id: DroneIdentity,
    cfg: DroneConfig,
    sessions: Vec<DroneSess>,
    pool: GroupPool,
    /// The group's suite, fixed by the first receiver while any session runs.
    suite: Option<Suite>,
    current: Option<GroupEpoch>,
    epoch_frames: u64,
    epoch_start_ns: u64,
    pending: Option<GroupEpoch>,
    pending_since_ns: u64,
    rekey_requested: bool,
    next_epoch: u32,
    next_seq: u64,
    outbox: VecDeque<Vec<u8>>,
    keylog: VecDeque<KeyLogLine>,
    stats: Option<HandshakeStats>,
    counters: DroneCounters,
}

impl core::fmt::Debug for DroneSession {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DroneSession")
            .field("sessions", &self.sessions.len())
            .field("epoch", &self.epoch())
            .field("pending", &self.pending_epoch())
            .finish_non_exhaustive()
    }
}

impl DroneSession {
    /// `id` is the drone's pairing (an [`Identity`] for one receiver, a [`DroneIdentity`] for
    /// several).
    pub fn new(id: impl Into<DroneIdentity>, mut cfg: DroneConfig) -> Self {
        cfg.max_receivers = cfg.max_receivers.clamp(1, MAX_RECEIVERS);
        DroneSession {
            id: id.into(),
            sessions: Vec::with_capacity(2 * cfg.max_receivers),
            cfg,
            pool: GroupPool::new(),
            suite: None,
            current: None,
            epoch_frames: 0,
            epoch_start_ns: 0,
            pending: None,
            pending_since_ns: 0,
            rekey_requested: false,
            next_epoch: 0,
            next_seq: 0,
            outbox: VecDeque::with_capacity(MAX_OUTBOX),
            keylog: VecDeque::new(),
            stats: None,
            counters: DroneCounters::default(),
        }
    }

    /// Frames can be sealed: some receiver holds the current group key.
    pub fn is_established(&self) -> bool {
        self.current.is_some()
    }
    /// The group's suite (while any receiver has a session).
    pub fn suite(&self) -> Option<Suite> {
        self.suite
    }
    /// The epoch frames are sealed under.
    pub fn epoch(&self) -> Option<u32> {
        self.current.as_ref().map(|e| e.keys.epoch)
    }
    /// The next epoch, sent to the receivers and not yet used for frames.
    pub fn pending_epoch(&self) -> Option<u32> {
        self.pending.as_ref().map(|e| e.keys.epoch)
    }
    /// The sequence number the next frame gets (one sequence for the whole group and run).
    pub fn next_sequence(&self) -> Option<u64> {
        self.current.as_ref().map(|_| self.next_seq)
    }
    /// Distinct receivers with a session.
    pub fn members(&self) -> usize {
        let mut seen = 0u32;
        for s in &self.sessions {
            seen |= 1 << s.receiver;
        }
        seen.count_ones() as usize
    }
    /// The running sessions.
    pub fn sessions(&self) -> impl Iterator<Item = SessionInfo> + '_ {
        self.sessions.iter().map(|s| SessionInfo {
            session: s.id,
            receiver: s.receiver,
            confirmed: s.confirmed,
            acked: s.acked,
        })
    }
    pub fn handshake_stats(&self) -> Option<HandshakeStats> {
        self.stats
    }
    pub fn counters(&self) -> DroneCounters {
        self.counters
    }
    pub fn config(&self) -> &DroneConfig {
        &self.cfg
    }

    /// Next message to send (ACCEPT, ALERT, GROUP_KEY, KEEPALIVE, CLOSE); the bridge gives every
    /// message to every receiver, which ignore what is not theirs.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.outbox.pop_front()
    }

    /// Next key-log line (only with [`DroneConfig::keylog`]; at most [`MAX_OUTBOX`] are kept).
    pub fn drain_keylog(&mut self) -> Option<KeyLogLine> {
        self.keylog.pop_front()
    }

    fn push_out(&mut self, m: Vec<u8>) {
        if self.outbox.len() >= MAX_OUTBOX {
            self.counters.outbox_dropped += 1;
        } else {
            self.outbox.push_back(m);
        }
    }

    fn has_session_of(&self, receiver: usize) -> bool {
        self.sessions.iter().any(|s| s.receiver == receiver)
    }

    /// Handles one message from a receiver.
    pub fn handle_message<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
        msg: &[u8],
    ) -> Result<Option<DroneEvent>, DroneError>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let r = match wire::parse_prefix(msg).map_err(DroneError::Wire) {
            Ok(MsgType::Hello) => Ok(Some(self.on_hello(k, rng, clock, msg))),
            Ok(MsgType::KeyAck | MsgType::RekeyRequest | MsgType::Keepalive | MsgType::Close) => {
                self.on_control(k, rng, clock, msg)
            }
            Ok(other) => Err(DroneError::Unexpected(other)),
            Err(e) => Err(e),
        };
        if r.is_err() {
            self.counters.messages_rejected += 1;
        }
        self.maybe_commit(clock.now_ns());
        r
    }

    fn refuse(
        &mut self,
        error: HandshakeError,
        alert: Option<[u8; wire::ALERT_LEN]>,
    ) -> DroneEvent {
        if let Some(a) = alert {
            self.push_out(a.to_vec());
        }
        self.counters.hellos_refused += 1;
        DroneEvent::HelloRefused(error)
    }

    fn on_hello<K, R, C>(&mut self, k: &mut K, rng: &mut R, clock: &C, hello: &[u8]) -> DroneEvent
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let t0 = clock.now_ns();
        let (hello_id, key_id) = match handshake::hello_ids(hello) {
            Ok(x) => x,
            Err(e) => return self.refuse(HandshakeError::Wire(e), None),
        };
        // Which paired receiver: by key id, before any Diffie-Hellman.
        let Some(receiver) = self.id.receiver_index(&key_id) else {
            let alert = wire::encode_alert(hello_id, AlertCode::AuthenticationFailed);
            return self.refuse(HandshakeError::Authentication, Some(alert));
        };
        if self.sessions.iter().any(|s| s.id == hello_id) {
            // The HELLO that opened a running session, replayed: receivers never resend one.
            return self.refuse(HandshakeError::HelloIdMismatch, None);
        }
        let rejoined = self.has_session_of(receiver);
        if !rejoined && self.members() >= self.cfg.max_receivers {
            let alert = wire::encode_alert(hello_id, AlertCode::GroupFull);
            return self.refuse(HandshakeError::GroupFull, Some(alert));
        }
        // While receivers are in the group, a newcomer must use the group's suite.
        let mut policy = self.cfg.policy;
        if let Some(s) = self.suite {
            policy.suites = SuiteSet::empty().with(s);
        }
        let Some(peer) = self.id.for_receiver(receiver) else {
            return self.refuse(HandshakeError::Noise, None);
        };
        let est = handshake::respond(&peer, &policy, self.cfg.boot_counter, rng, hello).and_then(
            |(e, accept)| {
                let keys = SessionKeys::derive(k, &e.secret).map_err(|_| handshake::Refusal {
                    error: HandshakeError::Noise,
                    alert: Some(wire::encode_alert(hello_id, AlertCode::InternalError)),
                })?;
                Ok((e, keys, accept))
            },
        );
        let (est, keys, accept) = match est {
            Ok(x) => x,
            Err(refusal) => return self.refuse(refusal.error, refusal.alert),
        };
        let Established {
            suite,
            mode,
            hello_id,
            secret,
            ..
        } = est;
        let stats = HandshakeStats {
            suite,
            mode,
            bytes_sent: accept.len() as u64,
            bytes_received: hello.len() as u64,
            wire_bytes_sent: wire_len(accept.len(), self.cfg.packet_payload),
            wire_bytes_received: wire_len(hello.len(), self.cfg.packet_payload),
            duration_ns: clock.now_ns().saturating_sub(t0),
            attempts: 1,
        };
        // Every accepted handshake feeds the pool (its hash covers the receiver's fresh ephemeral).
        self.pool.absorb(&secret.contribution());
        drop(secret);
        self.suite = Some(suite);
        self.push_out(accept);
        // An older candidate session of this receiver (never used) is replaced at once; a
        // confirmed one keeps running until the new one is used.
        let before = self.sessions.len();
        self.sessions
            .retain(|s| s.receiver != receiver || s.confirmed);
        self.counters.sessions_replaced += (before - self.sessions.len()) as u64;
        self.sessions.push(DroneSess {
            id: hello_id,
            receiver,
            keys,
            ctrl_out: 0,
            ctrl_in_top: None,
            confirmed: false,
            acked: None,
            key_sent_ns: t0,
            last_heard_ns: t0,
            first_sequence: self.next_seq,
        });
        let i = self.sessions.len() - 1;
        self.counters.handshakes += 1;
        self.stats = Some(stats);
        if rejoined {
            // The same receiver again: it may read the current epoch (it held it) at once.
            if self.current.is_some() {
                self.send_group_key(k, i, false, t0);
            }
            if self.pending.is_some() {
                self.send_group_key(k, i, true, t0);
            }
        } else {
            self.counters.members_joined += 1;
            if self.pending.is_some() {
                // Not used for any frame yet: the newcomer may have it.
                self.send_group_key(k, i, true, t0);
            } else {
                // Joining starts a new epoch: the newcomer cannot read earlier frames.
                let _ = self.start_epoch(k, rng, t0);
            }
        }
        DroneEvent::Established {
            session: hello_id,
            receiver,
            rejoined,
            suite,
            mode,
            stats,
        }
    }

    /// Sends session `i` the group key of the pending (or current) epoch.
    fn send_group_key<K: KeystreamApplier + ?Sized>(
        &mut self,
        k: &mut K,
        i: usize,
        pending: bool,
        now: u64,
    ) {
        let ep = if pending {
            self.pending.as_ref()
        } else {
            self.current.as_ref()
        };
        let (Some(ep), Some(suite)) = (ep, self.suite) else {
            return;
        };
        let s = &mut self.sessions[i];
        let body = GroupKeyBody {
            epoch: ep.keys.epoch,
            first_sequence: s.first_sequence,
            secret: ep.secret.clone(),
        }
        .encode();
        let m = control(
            k,
            &s.keys.d2r_control,
            MsgType::GroupKey,
            s.id,
            &mut s.ctrl_out,
            &body[..],
        );
        s.key_sent_ns = now;
        if self.cfg.keylog {
            // Bounded like the outbox: a caller that never drains loses the oldest lines.
            if self.keylog.len() >= MAX_OUTBOX {
                self.keylog.pop_front();
            }
            self.keylog.push_back(KeyLogLine {
                session: s.id,
                suite,
                group: ep.keys.clone(),
                session_keys: s.keys.clone(),
            });
        }
        if let Ok(m) = m {
            self.counters.keys_sent += 1;
            self.push_out(m);
        }
    }

    /// Draws a new epoch (replacing a pending one that was never used) and sends its group key
    /// to every session.
    fn start_epoch<K, R>(&mut self, k: &mut K, rng: &mut R, now: u64) -> Result<(), SealError>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
    {
        let suite = self.suite.ok_or(SealError::NotEstablished)?;
        let epoch = self.next_epoch;
        self.next_epoch = epoch.checked_add(1).ok_or(SealError::EpochExhausted)?;
        let mut fresh = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut fresh[..]);
        let secret = self.pool.draw(&fresh, epoch);
        let keys = GroupKeys::derive(k, &secret, epoch, suite)?;
        // A replaced pending epoch is dropped (wiped) here.
        self.pending = Some(GroupEpoch { secret, keys });
        self.pending_since_ns = now;
        self.rekey_requested = false;
        self.counters.rekeys_started += 1;
        for i in 0..self.sessions.len() {
            self.send_group_key(k, i, true, now);
        }
        Ok(())
    }

    /// Sessions whose acknowledgement the commit waits for: confirmed ones, and a receiver's only
    /// session (a newcomer). A candidate next to a confirmed session of the same receiver (a
    /// reconnect in progress, or a replayed HELLO) does not hold the group back.
    fn counts_for_commit(&self, s: &DroneSess) -> bool {
        s.confirmed
            || !self
                .sessions
                .iter()
                .any(|o| o.receiver == s.receiver && o.confirmed)
    }

    /// Moves frames to the pending epoch once every member acknowledged it, or after the commit
    /// timeout when at least one did. (At least one acknowledgement is always required: frames are
    /// only ever sealed under a key that a live receiver holds, never under one drawn for a
    /// replayed HELLO alone.)
    fn maybe_commit(&mut self, now: u64) {
        let Some(p) = &self.pending else { return };
        let e = p.keys.epoch;
        let mut all = true;
        let mut any = false;
        for s in &self.sessions {
            let acked = s.has_acked(e);
            any |= acked;
            if !acked && self.counts_for_commit(s) {
                all = false;
            }
        }
        let timed_out =
            now.saturating_sub(self.pending_since_ns) >= self.cfg.rekey_commit_timeout_ns;
        if any && (all || timed_out) {
            // The old current epoch's keys are dropped (wiped) here.
            self.current = self.pending.take();
            self.epoch_frames = 0;
            self.epoch_start_ns = now;
            self.counters.rekeys_committed += 1;
        }
    }

    /// Removes session `i`; if it was its receiver's last, that receiver has left: a new epoch
    /// starts (or, with nobody left, every group key is wiped).
    fn remove_session<K, R>(&mut self, k: &mut K, rng: &mut R, i: usize, now: u64) -> bool
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
    {
        let s = self.sessions.swap_remove(i);
        if self.has_session_of(s.receiver) {
            return false;
        }
        self.counters.members_left += 1;
        if self.sessions.is_empty() {
            self.current = None;
            self.pending = None;
            self.suite = None;
            self.rekey_requested = false;
        } else if self.start_epoch(k, rng, now).is_err() {
            // No new epoch possible: stop sealing rather than let the leaver read on.
            self.current = None;
            self.pending = None;
        }
        true
    }

    fn on_control<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
        msg: &[u8],
    ) -> Result<Option<DroneEvent>, DroneError>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let now = clock.now_ns();
        let h = frame::control_header(msg).map_err(DroneError::Control)?;
        let i = self
            .sessions
            .iter()
            .position(|s| s.id == h.session)
            .ok_or(DroneError::UnknownSession)?;
        let s = &mut self.sessions[i];
        if s.ctrl_in_top.is_some_and(|top| h.sequence <= top) {
            return Err(DroneError::ControlReplay);
        }
        let mut buf = Zeroizing::new(msg.to_vec());
        let (h, body) =
            frame::open_control(k, &s.keys.r2d_control, &mut buf).map_err(DroneError::Control)?;
        s.ctrl_in_top = Some(h.sequence);
        s.last_heard_ns = now;
        let (session, receiver) = (s.id, s.receiver);
        if !s.confirmed {
            // The receiver uses this session: it replaces the receiver's older one.
            s.confirmed = true;
            let before = self.sessions.len();
            self.sessions
                .retain(|o| o.receiver != receiver || o.id == session);
            self.counters.sessions_replaced += (before - self.sessions.len()) as u64;
        }
        let i = self
            .sessions
            .iter()
            .position(|s| s.id == session)
            .expect("kept above");
        match h.msg_type {
            MsgType::KeyAck => {
                let epoch = control_body_u32(body).ok_or(DroneError::BadControl)?;
                let known = self.pending_epoch() == Some(epoch) || self.epoch() == Some(epoch);
                if !known {
                    return Err(DroneError::BadControl);
                }
                let s = &mut self.sessions[i];
                s.acked = Some(s.acked.map_or(epoch, |a| a.max(epoch)));
                self.counters.keys_acked += 1;
                Ok(Some(DroneEvent::KeyAcked { session, epoch }))
            }
            MsgType::RekeyRequest => {
                if self.pending.is_none() && self.current.is_some() {
                    self.start_epoch(k, rng, now)
                        .map_err(|_| DroneError::BadControl)?;
                } else {
                    self.rekey_requested = true;
                }
                Ok(Some(DroneEvent::RekeyRequested { session }))
            }
            MsgType::Keepalive => {
                let s = &mut self.sessions[i];
                if let Ok(m) = control(
                    k,
                    &s.keys.d2r_control,
                    MsgType::Keepalive,
                    s.id,
                    &mut s.ctrl_out,
                    &[],
                ) {
                    self.push_out(m);
                }
                Ok(None)
            }
            MsgType::Close => {
                self.remove_session(k, rng, i, now);
                Ok(Some(DroneEvent::Left {
                    session,
                    receiver,
                    reason: LeaveReason::Closed,
                }))
            }
            other => Err(DroneError::Unexpected(other)),
        }
    }

    /// Timers; call it regularly (the drone loop: once per frame, before [`Self::seal_frame`]):
    /// removes receivers silent for [`DroneConfig::member_timeout_ns`] (and rekeys so they cannot
    /// read on), starts a new epoch when the policy says so (frames, time, a receiver's request),
    /// and resends unacknowledged GROUP_KEYs. Returns the number of receivers that timed out.
    pub fn handle_timeout<K, R, C>(&mut self, k: &mut K, rng: &mut R, clock: &C) -> usize
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let now = clock.now_ns();
        let mut left = 0;
        while let Some(i) = self
            .sessions
            .iter()
            .position(|s| now.saturating_sub(s.last_heard_ns) >= self.cfg.member_timeout_ns)
        {
            if self.remove_session(k, rng, i, now) {
                left += 1;
            }
        }
        self.counters.members_timed_out += left as u64;
        self.maybe_commit(now);
        if self.current.is_some() && self.pending.is_none() {
            let due = self.rekey_requested
                || self.epoch_frames >= self.cfg.rekey_after_frames
                || now.saturating_sub(self.epoch_start_ns) >= self.cfg.rekey_after_ns;
            if due {
                let _ = self.start_epoch(k, rng, now);
            }
        }
        // Resend the newest group key to the sessions that have not acknowledged it.
        let target = self
            .pending_epoch()
            .map(|e| (e, true))
            .or(self.epoch().map(|e| (e, false)));
        if let Some((epoch, pending)) = target {
            for i in 0..self.sessions.len() {
                let s = &self.sessions[i];
                if !s.has_acked(epoch)
                    && now.saturating_sub(s.key_sent_ns) >= self.cfg.rekey_retransmit_ns
                {
                    self.send_group_key(k, i, pending, now);
                    self.counters.key_retransmits += 1;
                }
            }
        }
        left
    }

    /// Encrypts and authenticates one frame in place under the group's current epoch (moving to
    /// the pending epoch first when it may); send `sealed.header ‖ payload ‖ sealed.tag()` (for
    /// example with [`SealedFrame::packetizer`]). One sealed frame serves every receiver.
    pub fn seal_frame<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
        meta: FrameMeta,
        payload: &mut [u8],
    ) -> Result<SealedFrame, SealError> {
        self.maybe_commit(clock.now_ns());
        let (Some(cur), Some(suite)) = (self.current.as_ref(), self.suite) else {
            return Err(SealError::NotEstablished);
        };
        if self.next_seq == u64::MAX {
            return Err(SealError::SequenceExhausted);
        }
        if self.epoch_frames >= HARD_MAX_FRAMES_PER_EPOCH {
            return Err(SealError::RekeyStalled);
        }
        let payload_len = u32::try_from(payload.len()).map_err(|_| SealError::PayloadTooLong)?;
        let header = FrameHeader {
            suite: suite as u8,
            pixel_format: meta.pixel_format,
            width: meta.width,
            height: meta.height,
            epoch: cur.keys.epoch,
            sequence: self.next_seq,
            capture_ns: meta.capture_ns,
            payload_len,
        };
        let sealed = frame::seal_frame(k, &cur.keys.frame, &header, payload)?;
        self.next_seq += 1;
        self.epoch_frames += 1;
        self.counters.frames_sealed += 1;
        self.counters.payload_bytes += payload.len() as u64;
        Ok(sealed)
    }

    /// Ends every session: queues a CLOSE to each and wipes every key.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        for mut s in core::mem::take(&mut self.sessions) {
            if let Ok(m) = control(
                k,
                &s.keys.d2r_control,
                MsgType::Close,
                s.id,
                &mut s.ctrl_out,
                &[0],
            ) {
                self.push_out(m);
            }
        }
        self.current = None;
        self.pending = None;
        self.suite = None;
    }
}

// ---------------------------------------------------------------------------------------------
// Receiver

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
        }
    }
}

impl ReceiverConfig {
    /// The largest message the receiver accepts (for [`crate::assembler::Assembler::new`]).
    pub fn max_message(&self) -> usize {
        (wire::FRAME_HEADER_LEN + self.max_payload as usize + crate::aead::TAG_LEN).max(4096)
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
        &self.buf[wire::FRAME_HEADER_LEN..wire::FRAME_HEADER_LEN + self.header.payload_len as usize]
    }
    /// The pixels as an owned buffer (reuses the message's allocation).
    pub fn into_pixels(mut self) -> Vec<u8> {
        let n = self.header.payload_len as usize;
        self.buf
            .copy_within(wire::FRAME_HEADER_LEN..wire::FRAME_HEADER_LEN + n, 0);
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
            Rejected::Unexpected(t) => write!(
                f,
                "unexpected message type {:#04x} on the receiver",
                *t as u8
            ),
        }
    }
}

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
    id: Identity,
    key_id: [u8; 4],
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
            key_id: handshake::receiver_key_id(&id.local.public()),
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
        let (hs, hello) = ReceiverHandshake::start_as(&self.id, self.key_id, &offer, rng)?;
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
                    if let Ok(m) = control(
                        k,
                        &l.keys.r2d_control,
                        MsgType::Keepalive,
                        l.session,
                        &mut l.ctrl_out,
                        &[],
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
        let RxState::Handshaking { hs, .. } = &self.state else {
            return Err(Rejected::StaleHandshake);
        };
        match hs.answers(msg) {
            Ok(()) => {}
            Err(HandshakeError::Wire(w)) => return Err(Rejected::Wire(w)),
            Err(_) => return Err(Rejected::StaleHandshake),
        }
        let RxState::Handshaking {
            hs,
            hello_len,
            attempts,
            ..
        } = core::mem::replace(&mut self.state, RxState::Idle)
        else {
            unreachable!("checked above")
        };
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
        let est = hs.finish(msg, &mut decrypt).and_then(|e| {
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
                // Anybody can send bytes that look like an ACCEPT: this attempt is over (its Noise
                // state is spent), the receiver is not.
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
            MsgType::Keepalive => Ok(None),
            MsgType::Close => {
                self.end_link();
                self.state = RxState::Closed;
                Ok(Some(ReceiverEvent::Closed))
            }
            other => Err(Rejected::Unexpected(other)),
        }
    }
}

#[cfg(test)]
mod tests;
