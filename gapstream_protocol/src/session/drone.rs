//! The drone's side: [`DroneSession`], the Noise responder to every paired receiver, which seals
//! each frame once for all of them under the group's epoch key.

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use gap_rust_cipher_s::KeystreamApplier;
use rand_core::CryptoRng;
use zeroize::Zeroizing;

use crate::aead::CryptoError;
use crate::frame::{self, FrameMeta, OpenError, SealedFrame};
use crate::handshake::{
    self, DroneIdentity, DronePolicy, Established, HandshakeError, HelloMacKey, SuiteSet,
};
use crate::keys::{GroupKeys, GroupPool, GroupSecret, KeyLogLine, SessionKeys};
use crate::suite::{KexMode, Suite};
use crate::wire::{self, AlertCode, FrameHeader, GroupKeyBody, MsgType, SessionId, WireError};

use super::common::{HandshakeStats, control, wire_len};
use crate::clock::Clock;

/// Most frames one epoch may carry even when no rekey happens (the caller never calls
/// [`DroneSession::handle_timeout`], or acknowledgements never arrive): sealing stops
/// ([`SealError::RekeyStalled`]) rather than going on for ever under one key.
pub const HARD_MAX_FRAMES_PER_EPOCH: u64 = 1 << 30;

/// Most receivers a drone serves at once (the bound of [`DroneConfig::max_receivers`]).
pub const MAX_RECEIVERS: usize = handshake::MAX_RECEIVER_KEYS;

/// Most sessions the drone keeps for one receiver: its confirmed session and unconfirmed ones (a
/// new session never evicts another before it is confirmed; a HELLO beyond this is refused with
/// [`AlertCode::Busy`] before any Diffie-Hellman).
pub const MAX_SESSIONS_PER_RECEIVER: usize = 3;

/// Most messages the drone queues before [`DroneSession::poll_transmit`] drains them; beyond it a
/// message is dropped and counted (GROUP_KEYs are resent, a lost ACCEPT makes the receiver retry).
pub const MAX_OUTBOX: usize = 8 * MAX_RECEIVERS + 8;

fn control_body_u32(body: &[u8]) -> Option<u32> {
    body.try_into().ok().map(u32::from_le_bytes)
}

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
    /// At most one responder handshake (the Diffie-Hellman work of answering a HELLO) per receiver
    /// key in this time; a fresh HELLO of that receiver sooner is refused with
    /// [`AlertCode::Busy`] (the receiver retries after its backoff).
    pub hello_interval_ns: u64,
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
            hello_interval_ns: 1_000_000_000,
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
    /// A receiver asked for another JPEG quality (1..=100) from the next frame on (SET_QUALITY);
    /// the application applies it to its coder.
    QualityRequested { session: SessionId, quality: u8 },
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
    /// A request that would change what the drone sends (SET_QUALITY) from a receiver paired to
    /// watch only ([`DroneIdentity::watch_only`](crate::handshake::DroneIdentity::watch_only)).
    NotPermitted(MsgType),
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
            DroneError::NotPermitted(t) => write!(
                f,
                "control message type {:#04x} refused: the receiver is paired to watch only",
                *t as u8
            ),
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
    /// HELLOs refused, for any reason (those below included).
    pub hellos_refused: u64,
    /// HELLOs whose time was not above the greatest accepted from their receiver (replays),
    /// dropped after the MAC check, before any Diffie-Hellman.
    pub hellos_replayed: u64,
    /// Fresh HELLOs refused with [`AlertCode::Busy`] (rate limit per receiver key, or that
    /// receiver's unconfirmed sessions at their limit), before any Diffie-Hellman.
    pub hellos_busy: u64,
    /// HELLOs that passed the MAC, freshness and rate checks and cost the responder's
    /// Diffie-Hellman work (answered, or refused by the Noise handshake or the negotiation).
    pub responder_handshakes: u64,
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

#[cfg_attr(feature = "fork", derive(Clone))]
struct DroneSess {
    id: SessionId,
    receiver: usize,
    /// The suite this session negotiated (the group's once the group has one).
    suite: Suite,
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

/// A group epoch in use for frames: its secret (sent to every member) and frame key.
#[cfg_attr(feature = "fork", derive(Clone))]
struct GroupEpoch {
    secret: GroupSecret,
    keys: GroupKeys,
}

/// A group epoch drawn and sent, not used for frames yet: its frame key is derived when frames
/// move to it, for the group's suite (a group whose first receiver is still unconfirmed has none
/// yet).
#[cfg_attr(feature = "fork", derive(Clone))]
struct PendingEpoch {
    epoch: u32,
    secret: GroupSecret,
}

/// What the drone keeps per paired receiver key: the HELLO MAC key (derived once), the greatest
/// hello time it accepted (HELLO freshness), when it last did a responder handshake for it (the
/// rate limit). In RAM: a restarted drone starts over (docs/protocol.md §13).
#[cfg_attr(feature = "fork", derive(Clone))]
struct Peer {
    mac: HelloMacKey,
    greatest_time: Option<u64>,
    last_handshake_ns: Option<u64>,
}

/// The drone side. Holds its static key and the paired receivers' public keys, one session per
/// receiver (plus, while a receiver re-handshakes, its newer candidate session), and the group's
/// epochs. Memory is bounded: at most [`MAX_SESSIONS_PER_RECEIVER`] `× max_receivers` sessions
/// and [`MAX_OUTBOX`] queued messages.
pub struct DroneSession {
    id: DroneIdentity,
    cfg: DroneConfig,
    peers: Vec<Peer>,
    sessions: Vec<DroneSess>,
    pool: GroupPool,
    /// The group's suite: fixed by the first session that is confirmed (its receiver used it, so
    /// it is not a replayed HELLO's), kept while any session runs.
    suite: Option<Suite>,
    current: Option<GroupEpoch>,
    epoch_frames: u64,
    epoch_start_ns: u64,
    pending: Option<PendingEpoch>,
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
    /// `id` is the drone's pairing (an [`Identity`](crate::handshake::Identity) for one receiver,
    /// a [`DroneIdentity`] for several).
    ///
    /// Derives the HELLO MAC key of every paired receiver (one X25519 each).
    #[inline(never)]
    pub fn new(id: impl Into<DroneIdentity>, mut cfg: DroneConfig) -> Self {
        cfg.max_receivers = cfg.max_receivers.clamp(1, MAX_RECEIVERS);
        let id: DroneIdentity = id.into();
        let peers = id
            .receivers
            .iter()
            .map(|p| Peer {
                mac: HelloMacKey::derive(&id.local, p),
                greatest_time: None,
                last_handshake_ns: None,
            })
            .collect();
        DroneSession {
            id,
            peers,
            sessions: Vec::with_capacity(MAX_SESSIONS_PER_RECEIVER * cfg.max_receivers),
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

    /// A copy of the whole state (feature `fork`, for fuzzing snapshots; never in a product: two
    /// copies would seal control messages under the same key and nonce).
    #[cfg(feature = "fork")]
    pub fn fork(&self) -> Self {
        DroneSession {
            id: self.id.clone(),
            cfg: self.cfg.clone(),
            peers: self.peers.clone(),
            sessions: self.sessions.clone(),
            pool: self.pool.clone(),
            suite: self.suite,
            current: self.current.clone(),
            epoch_frames: self.epoch_frames,
            epoch_start_ns: self.epoch_start_ns,
            pending: self.pending.clone(),
            pending_since_ns: self.pending_since_ns,
            rekey_requested: self.rekey_requested,
            next_epoch: self.next_epoch,
            next_seq: self.next_seq,
            outbox: self.outbox.clone(),
            keylog: self.keylog.clone(),
            stats: self.stats,
            counters: self.counters,
        }
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
        self.pending.as_ref().map(|e| e.epoch)
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
            Ok(
                MsgType::KeyAck
                | MsgType::RekeyRequest
                | MsgType::Keepalive
                | MsgType::SetQuality
                | MsgType::Close,
            ) => self.on_control(k, rng, clock, msg),
            Ok(other) => Err(DroneError::Unexpected(other)),
            Err(e) => Err(e),
        };
        if r.is_err() {
            self.counters.messages_rejected += 1;
        }
        self.maybe_commit(k, clock.now_ns());
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
        // The cheap checks, in this order, before any Diffie-Hellman: the MAC (only the receiver
        // or the drone can make one), freshness (a replay's time is not above the greatest
        // accepted), the rate and the receiver's unconfirmed sessions.
        let peer = &self.peers[receiver];
        let time = match handshake::verify_hello(&peer.mac, hello) {
            Ok(p) => p.header.time,
            Err(e) => {
                let alert = wire::encode_alert(hello_id, AlertCode::AuthenticationFailed);
                return self.refuse(e, Some(alert));
            }
        };
        if peer.greatest_time.is_some_and(|g| time <= g) {
            // A replay (receivers never resend a HELLO): dropped without an answer.
            self.counters.hellos_replayed += 1;
            return self.refuse(HandshakeError::Replayed, None);
        }
        if self.sessions.iter().any(|s| s.id == hello_id) {
            // A session id in use (by another receiver: ids are the receivers' random choice).
            return self.refuse(HandshakeError::HelloIdMismatch, None);
        }
        let of_receiver = self
            .sessions
            .iter()
            .filter(|s| s.receiver == receiver)
            .count();
        if peer
            .last_handshake_ns
            .is_some_and(|t| t0.saturating_sub(t) < self.cfg.hello_interval_ns)
            || of_receiver >= MAX_SESSIONS_PER_RECEIVER
        {
            self.counters.hellos_busy += 1;
            let alert = wire::encode_alert(hello_id, AlertCode::Busy);
            return self.refuse(HandshakeError::Busy, Some(alert));
        }
        let rejoined = of_receiver > 0;
        if !rejoined && self.members() >= self.cfg.max_receivers {
            let alert = wire::encode_alert(hello_id, AlertCode::GroupFull);
            return self.refuse(HandshakeError::GroupFull, Some(alert));
        }
        // While the group has a suite, every new session uses it.
        let mut policy = self.cfg.policy;
        if let Some(s) = self.suite {
            policy.suites = SuiteSet::empty().with(s);
        }
        let Some(peer_id) = self.id.for_receiver(receiver) else {
            return self.refuse(HandshakeError::Noise, None);
        };
        // This HELLO gets its one responder handshake, whatever comes of it.
        let peer = &mut self.peers[receiver];
        peer.greatest_time = Some(time);
        peer.last_handshake_ns = Some(t0);
        self.counters.responder_handshakes += 1;
        let est = handshake::respond(
            &peer_id,
            &peer.mac,
            &policy,
            self.cfg.boot_counter,
            rng,
            hello,
        )
        .and_then(|(e, accept)| {
            let keys = SessionKeys::derive(k, &e.secret).map_err(|_| handshake::Refusal {
                error: HandshakeError::Noise,
                alert: Some(wire::encode_alert(hello_id, AlertCode::InternalError)),
            })?;
            Ok((e, keys, accept))
        });
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
        self.push_out(accept);
        // The new session is a candidate: it evicts nothing. When the receiver uses it (its first
        // authenticated message), its other sessions go (`on_control`).
        self.sessions.push(DroneSess {
            id: hello_id,
            receiver,
            suite,
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
        let (epoch, secret, keys) = match (pending, &self.pending, &self.current) {
            (true, Some(p), _) => (p.epoch, &p.secret, None),
            (false, _, Some(c)) => (c.keys.epoch, &c.secret, Some(&c.keys)),
            _ => return,
        };
        let s = &mut self.sessions[i];
        let body = GroupKeyBody {
            epoch,
            first_sequence: s.first_sequence,
            secret: secret.clone(),
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
            // The epoch's frame key for this session's suite.
            let group = match keys {
                Some(g) => Ok(g.clone()),
                None => GroupKeys::derive(k, secret, epoch, s.suite),
            };
            if let Ok(group) = group {
                // Bounded like the outbox: a caller that never drains loses the oldest lines.
                if self.keylog.len() >= MAX_OUTBOX {
                    self.keylog.pop_front();
                }
                self.keylog.push_back(KeyLogLine {
                    session: s.id,
                    suite: s.suite,
                    group,
                    session_keys: s.keys.clone(),
                });
            }
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
        let epoch = self.next_epoch;
        self.next_epoch = epoch.checked_add(1).ok_or(SealError::EpochExhausted)?;
        let mut fresh = Zeroizing::new([0u8; 32]);
        rng.fill_bytes(&mut fresh[..]);
        let secret = self.pool.draw(&fresh, epoch);
        // A replaced pending epoch is dropped (wiped) here.
        self.pending = Some(PendingEpoch { epoch, secret });
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
    fn maybe_commit<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K, now: u64) {
        let (Some(p), Some(suite)) = (&self.pending, self.suite) else {
            return;
        };
        let e = p.epoch;
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
            let Ok(keys) = GroupKeys::derive(k, &p.secret, e, suite) else {
                return;
            };
            let p = self.pending.take().expect("checked above");
            // The old current epoch's keys are dropped (wiped) here.
            self.current = Some(GroupEpoch {
                secret: p.secret.clone(),
                keys,
            });
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
        let (session, receiver, suite) = (s.id, s.receiver, s.suite);
        let mut fixes_suite = false;
        if !s.confirmed {
            // The receiver uses this session: it replaces the receiver's other ones.
            s.confirmed = true;
            let before = self.sessions.len();
            self.sessions
                .retain(|o| o.receiver != receiver || o.id == session);
            self.counters.sessions_replaced += (before - self.sessions.len()) as u64;
            // The first confirmed session decides the group's suite: a replayed HELLO never
            // confirms (its keys need an ephemeral key the attacker lacks), so it never does.
            fixes_suite = self.suite.is_none();
            self.suite.get_or_insert(suite);
        }
        let r = self.on_confirmed_control(k, rng, now, session, receiver, h.msg_type, body);
        if fixes_suite {
            // Sessions negotiated before the group had a suite, with another one, cannot be
            // members: they go (those receivers reconnect and get the group's suite).
            while let Some(i) = self.sessions.iter().position(|o| o.suite != suite) {
                self.remove_session(k, rng, i, now);
            }
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn on_confirmed_control<K, R>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        now: u64,
        session: SessionId,
        receiver: usize,
        msg_type: MsgType,
        body: &[u8],
    ) -> Result<Option<DroneEvent>, DroneError>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
    {
        let i = self
            .sessions
            .iter()
            .position(|s| s.id == session)
            .expect("kept above");
        match msg_type {
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
            MsgType::SetQuality if !self.id.may_steer(receiver) => {
                Err(DroneError::NotPermitted(MsgType::SetQuality))
            }
            MsgType::SetQuality => match body {
                [q @ 1..=100] => Ok(Some(DroneEvent::QualityRequested {
                    session,
                    quality: *q,
                })),
                _ => Err(DroneError::BadControl),
            },
            MsgType::Keepalive => {
                // The answer echoes the receiver's time (its first 8 body bytes, when it sent
                // them) and adds this clock's: a two-way exchange that puts the frames' capture
                // times on the receiver's clock (docs/protocol.md §7).
                let mut answer = [0u8; 16];
                let n = match <[u8; 8]>::try_from(&body[..body.len().min(8)]) {
                    Ok(t) => {
                        answer[..8].copy_from_slice(&t);
                        answer[8..].copy_from_slice(&now.to_le_bytes());
                        16
                    }
                    Err(_) => 0,
                };
                let s = &mut self.sessions[i];
                if let Ok(m) = control(
                    k,
                    &s.keys.d2r_control,
                    MsgType::Keepalive,
                    s.id,
                    &mut s.ctrl_out,
                    &answer[..n],
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
        self.maybe_commit(k, now);
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
        self.maybe_commit(k, clock.now_ns());
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
            padded: meta.padded,
            suite: suite as u8,
            pixel_format: meta.pixel_format.code(),
            width: meta.width,
            height: meta.height,
            epoch: cur.keys.epoch,
            sequence: self.next_seq,
            capture_ns: meta.capture_ns,
            payload_len,
            state: meta.state.map(|r| r.encode()),
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
