//! The two I/O-free state machines: [`DroneSession`] (Noise responder, sends frames) and
//! [`ReceiverSession`] (Noise initiator, opens frames). Bytes in → events and bytes out, in the
//! spirit of rustls: the caller moves messages (the firmware over CPX/SPI, the host over tokio, the
//! tests through a `Vec`), supplies time through [`Clock`], randomness through `rand_core`'s
//! `CryptoRng`, and the keystream engine through `KeystreamApplier`.
//!
//! ```text
//! drone:    Waiting ──HELLO ok──▶ Established(epoch 0) ──N frames / T ns / REKEY_REQUEST──▶ epoch+1 (REKEY sent,
//!              ▲   (ACCEPT out)         │  ▲                                                 resent until REKEY_ACK;
//!              └──────── CLOSE ─────────┘  └── a new valid HELLO replaces the session        old frame key wiped at once,
//!                                                                                            old control keys at the ack)
//! receiver: Idle ──connect──▶ Handshaking ──ACCEPT ok──▶ Established ──REKEY or frame of epoch+1 (authenticated)──▶
//!                   (HELLO out) │  ▲ timeout: new HELLO         │     epoch+1 (REKEY_ACK out; previous epoch kept for
//!                   ALERT / bad ACCEPT ──▶ Idle (HandshakeFailed)│     the grace window, then wiped)
//!                                                                └─ CLOSE ──▶ Closed
//! ```
//!
//! Frames that fail (tag, replay, epoch, suite, layout) are rejected with a typed [`Rejected`],
//! counted in [`ReceiverCounters`], and the stream goes on.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;

use gap_rust_cipher_s::KeystreamApplier;
use rand_core::CryptoRng;
use zeroize::Zeroizing;

use crate::aead::CryptoError;
use crate::frame::{self, FrameMeta, OpenError, SealedFrame};
use crate::handshake::{
    self, DronePolicy, Established, HandshakeError, Identity, Offer, ReceiverHandshake,
};
use crate::keys::{DirectionKey, EpochKeys, EpochSecret, KeyLogLine};
use crate::replay::{ReplayError, ReplayWindow};
use crate::suite::{KexMode, Suite};
use crate::wire::{self, FrameHeader, MsgType, WireError};

/// Monotonic time in nanoseconds.
pub trait Clock {
    fn now_ns(&self) -> u64;
}

impl<F: Fn() -> u64> Clock for F {
    fn now_ns(&self) -> u64 {
        self()
    }
}

/// Most frames one epoch may carry even when rekey acknowledgements never arrive: sealing stops
/// ([`SealError::RekeyStalled`]) rather than going on for ever under one key.
pub const HARD_MAX_FRAMES_PER_EPOCH: u64 = 1 << 30;

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

/// Seals a control message into a new buffer.
fn control<K: KeystreamApplier + ?Sized>(
    k: &mut K,
    key: &DirectionKey,
    t: MsgType,
    epoch: u32,
    seq: &mut u64,
    body: &[u8],
) -> Result<Vec<u8>, CryptoError> {
    let next = seq.checked_add(1).ok_or(CryptoError::SequenceExhausted)?;
    let mut out = alloc::vec![0u8; wire::CONTROL_HEADER_LEN + body.len() + crate::aead::TAG_LEN];
    frame::seal_control(k, key, t, epoch, *seq, body, &mut out)?;
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
    /// Rekey after this many frames in an epoch.
    pub rekey_after_frames: u64,
    /// Rekey after this long in an epoch.
    pub rekey_after_ns: u64,
    /// Resend an unacknowledged REKEY after this long.
    pub rekey_retransmit_ns: u64,
    /// CPX packet payload size (for the wire-byte statistics).
    pub packet_payload: usize,
    /// Produce key-log lines ([`DroneSession::drain_keylog`]). Debug aid; off by default.
    pub keylog: bool,
}

impl Default for DroneConfig {
    fn default() -> Self {
        DroneConfig {
            policy: DronePolicy::default(),
            rekey_after_frames: 10_000,
            rekey_after_ns: 60_000_000_000,
            rekey_retransmit_ns: 250_000_000,
            packet_payload: crate::cpx::MAX_PAYLOAD,
            keylog: false,
        }
    }
}

/// What happened on the drone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DroneEvent {
    /// A receiver completed the handshake (an ACCEPT is queued); frames may be sealed.
    Established {
        suite: Suite,
        mode: KexMode,
        stats: HandshakeStats,
    },
    /// A HELLO was refused (an ALERT may be queued); any running session is kept.
    HelloRefused(HandshakeError),
    /// The receiver acknowledged the epoch; the previous epoch's control keys are wiped.
    RekeyAcked { epoch: u32 },
    /// The receiver asked for a rekey; it happens with the next frame.
    RekeyRequested,
    /// The receiver closed the session; keys are wiped.
    Closed,
}

/// Why the drone rejected a message (it goes on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DroneError {
    Wire(WireError),
    /// A control message before any handshake.
    NotEstablished,
    /// A control message that did not open (wrong key, altered, replayed, unknown epoch).
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
            DroneError::NotEstablished => f.write_str("control message before the handshake"),
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
    /// No receiver has completed a handshake.
    NotEstablished,
    /// The 64-bit sequence number is used up: a new handshake is needed.
    SequenceExhausted,
    /// The 32-bit epoch counter is used up: a new handshake is needed.
    EpochExhausted,
    /// [`HARD_MAX_FRAMES_PER_EPOCH`] frames without a rekey acknowledgement.
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
            SealError::NotEstablished => f.write_str("no receiver has completed the handshake"),
            SealError::SequenceExhausted => {
                f.write_str("sequence numbers exhausted: handshake again")
            }
            SealError::EpochExhausted => f.write_str("key epochs exhausted: handshake again"),
            SealError::RekeyStalled => f.write_str("rekey not acknowledged and the epoch is full"),
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
    pub rekeys_started: u64,
    pub rekeys_acked: u64,
    pub rekey_retransmits: u64,
    pub messages_rejected: u64,
}

/// The previous epoch's control keys, kept until the receiver acknowledges the new epoch.
struct ControlKeys {
    epoch: u32,
    d2r: DirectionKey,
    r2d: DirectionKey,
}

struct DroneLink {
    suite: Suite,
    hello_id: [u8; 8],
    secret: EpochSecret,
    keys: EpochKeys,
    prev: Option<ControlKeys>,
    next_seq: u64,
    epoch_frames: u64,
    epoch_start_ns: u64,
    rekey_sent_ns: Option<u64>,
    rekey_requested: bool,
    ctrl_out: u64,
    ctrl_in_top: Option<u64>,
}

/// The drone side. Holds its static key and the paired receiver's public key.
pub struct DroneSession {
    id: Identity,
    cfg: DroneConfig,
    link: Option<DroneLink>,
    outbox: VecDeque<Vec<u8>>,
    keylog: VecDeque<KeyLogLine>,
    stats: Option<HandshakeStats>,
    counters: DroneCounters,
}

impl core::fmt::Debug for DroneSession {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DroneSession")
            .field("established", &self.link.is_some())
            .field("epoch", &self.epoch())
            .finish_non_exhaustive()
    }
}

impl DroneSession {
    pub fn new(id: Identity, cfg: DroneConfig) -> Self {
        DroneSession {
            id,
            cfg,
            link: None,
            outbox: VecDeque::new(),
            keylog: VecDeque::new(),
            stats: None,
            counters: DroneCounters::default(),
        }
    }

    pub fn is_established(&self) -> bool {
        self.link.is_some()
    }
    pub fn suite(&self) -> Option<Suite> {
        self.link.as_ref().map(|l| l.suite)
    }
    pub fn epoch(&self) -> Option<u32> {
        self.link.as_ref().map(|l| l.keys.epoch)
    }
    /// The sequence number the next frame gets.
    pub fn next_sequence(&self) -> Option<u64> {
        self.link.as_ref().map(|l| l.next_seq)
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

    /// Next message to send to the receiver (ACCEPT, ALERT, REKEY, CLOSE).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.outbox.pop_front()
    }

    /// Next key-log line (only with [`DroneConfig::keylog`]).
    pub fn drain_keylog(&mut self) -> Option<KeyLogLine> {
        self.keylog.pop_front()
    }

    fn log_keys(&mut self) {
        if self.cfg.keylog {
            if let Some(l) = &self.link {
                self.keylog.push_back(KeyLogLine {
                    hello_id: l.hello_id,
                    suite: l.suite,
                    keys: l.keys.clone(),
                });
            }
        }
    }

    /// Handles one message from the receiver.
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
        let r = self.handle_inner(k, rng, clock, msg);
        if r.is_err() {
            self.counters.messages_rejected += 1;
        }
        r
    }

    fn handle_inner<K, R, C>(
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
        let t = wire::parse_prefix(msg).map_err(DroneError::Wire)?;
        match t {
            MsgType::Hello => Ok(Some(self.on_hello(k, rng, clock, msg))),
            MsgType::RekeyAck | MsgType::RekeyRequest | MsgType::Close => self.on_control(k, msg),
            other => Err(DroneError::Unexpected(other)),
        }
    }

    fn on_hello<K, R, C>(&mut self, k: &mut K, rng: &mut R, clock: &C, hello: &[u8]) -> DroneEvent
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let t0 = clock.now_ns();
        let est =
            handshake::respond(&self.id, &self.cfg.policy, rng, hello).and_then(|(e, accept)| {
                let keys = EpochKeys::derive(k, &e.secret, 0, e.suite).map_err(|_| {
                    handshake::Refusal {
                        error: HandshakeError::Noise,
                        alert: None,
                    }
                })?;
                Ok((e, keys, accept))
            });
        match est {
            Ok((
                Established {
                    suite,
                    mode,
                    hello_id,
                    secret,
                },
                keys,
                accept,
            )) => {
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
                self.outbox.push_back(accept);
                self.link = Some(DroneLink {
                    suite,
                    hello_id,
                    secret,
                    keys,
                    prev: None,
                    next_seq: 0,
                    epoch_frames: 0,
                    epoch_start_ns: t0,
                    rekey_sent_ns: None,
                    rekey_requested: false,
                    ctrl_out: 0,
                    ctrl_in_top: None,
                });
                self.stats = Some(stats);
                self.counters.handshakes += 1;
                self.log_keys();
                DroneEvent::Established { suite, mode, stats }
            }
            Err(refusal) => {
                if let Some(a) = refusal.alert {
                    self.outbox.push_back(a.to_vec());
                }
                self.counters.hellos_refused += 1;
                DroneEvent::HelloRefused(refusal.error)
            }
        }
    }

    fn on_control<K: KeystreamApplier + ?Sized>(
        &mut self,
        k: &mut K,
        msg: &[u8],
    ) -> Result<Option<DroneEvent>, DroneError> {
        let link = self.link.as_mut().ok_or(DroneError::NotEstablished)?;
        let h = frame::control_header(msg).map_err(DroneError::Control)?;
        let key = if h.epoch == link.keys.epoch {
            &link.keys.r2d_control
        } else {
            match &link.prev {
                Some(p) if p.epoch == h.epoch => &p.r2d,
                _ => return Err(DroneError::Control(OpenError::Crypto(CryptoError::BadTag))),
            }
        };
        if link.ctrl_in_top.is_some_and(|top| h.sequence <= top) {
            return Err(DroneError::ControlReplay);
        }
        let mut buf = Zeroizing::new(msg.to_vec());
        let (h, body) = frame::open_control(k, key, &mut buf).map_err(DroneError::Control)?;
        link.ctrl_in_top = Some(h.sequence);
        match h.msg_type {
            MsgType::RekeyAck => {
                let acked = control_body_u32(body).ok_or(DroneError::BadControl)?;
                if acked != link.keys.epoch || h.epoch != acked || link.rekey_sent_ns.is_none() {
                    return Err(DroneError::BadControl);
                }
                link.rekey_sent_ns = None;
                link.prev = None; // wipes the previous control keys
                self.counters.rekeys_acked += 1;
                Ok(Some(DroneEvent::RekeyAcked { epoch: acked }))
            }
            MsgType::RekeyRequest => {
                link.rekey_requested = true;
                Ok(Some(DroneEvent::RekeyRequested))
            }
            MsgType::Close => {
                self.link = None;
                Ok(Some(DroneEvent::Closed))
            }
            other => Err(DroneError::Unexpected(other)),
        }
    }

    /// Resends an unacknowledged REKEY when due. Call it now and then (for example per frame).
    pub fn handle_timeout<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
    ) {
        let now = clock.now_ns();
        let Some(link) = self.link.as_mut() else {
            return;
        };
        let (Some(sent), Some(prev)) = (link.rekey_sent_ns, link.prev.as_ref()) else {
            return;
        };
        if now.saturating_sub(sent) < self.cfg.rekey_retransmit_ns {
            return;
        }
        let new_epoch = link.keys.epoch;
        if let Ok(m) = control(
            k,
            &prev.d2r,
            MsgType::Rekey,
            prev.epoch,
            &mut link.ctrl_out,
            &new_epoch.to_le_bytes(),
        ) {
            self.outbox.push_back(m);
            link.rekey_sent_ns = Some(now);
            self.counters.rekey_retransmits += 1;
        }
    }

    /// Starts epoch + 1 if the policy says so and no rekey is waiting for its acknowledgement.
    fn maybe_rekey<K: KeystreamApplier + ?Sized>(
        &mut self,
        k: &mut K,
        now: u64,
    ) -> Result<(), SealError> {
        let cfg = &self.cfg;
        let link = self.link.as_mut().ok_or(SealError::NotEstablished)?;
        let due = link.rekey_requested
            || link.epoch_frames >= cfg.rekey_after_frames
            || now.saturating_sub(link.epoch_start_ns) >= cfg.rekey_after_ns;
        if !due || link.rekey_sent_ns.is_some() {
            return Ok(());
        }
        let old = link.keys.epoch;
        let new_epoch = old.checked_add(1).ok_or(SealError::EpochExhausted)?;
        let secret = link.secret.next();
        let keys = EpochKeys::derive(k, &secret, new_epoch, link.suite)?;
        let m = control(
            k,
            &link.keys.d2r_control,
            MsgType::Rekey,
            old,
            &mut link.ctrl_out,
            &new_epoch.to_le_bytes(),
        )?;
        self.outbox.push_back(m);
        let old_keys = core::mem::replace(&mut link.keys, keys);
        // The old frame key is dropped (wiped) here; its control keys stay until the ack.
        link.prev = Some(ControlKeys {
            epoch: old,
            d2r: old_keys.d2r_control,
            r2d: old_keys.r2d_control,
        });
        link.secret = secret; // the old secret is wiped on drop
        link.epoch_frames = 0;
        link.epoch_start_ns = now;
        link.rekey_sent_ns = Some(now);
        link.rekey_requested = false;
        self.counters.rekeys_started += 1;
        self.log_keys();
        Ok(())
    }

    /// Encrypts and authenticates one frame in place (rekeying first when due); send
    /// `sealed.header ‖ payload ‖ sealed.tag()` (for example with [`SealedFrame::packetizer`]).
    pub fn seal_frame<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
        meta: FrameMeta,
        payload: &mut [u8],
    ) -> Result<SealedFrame, SealError> {
        let now = clock.now_ns();
        self.maybe_rekey(k, now)?;
        let link = self.link.as_mut().ok_or(SealError::NotEstablished)?;
        if link.next_seq == u64::MAX {
            return Err(SealError::SequenceExhausted);
        }
        if link.epoch_frames >= HARD_MAX_FRAMES_PER_EPOCH {
            return Err(SealError::RekeyStalled);
        }
        let payload_len = u32::try_from(payload.len()).map_err(|_| SealError::PayloadTooLong)?;
        let header = FrameHeader {
            suite: link.suite as u8,
            pixel_format: meta.pixel_format,
            width: meta.width,
            height: meta.height,
            epoch: link.keys.epoch,
            sequence: link.next_seq,
            capture_ns: meta.capture_ns,
            payload_len,
        };
        let sealed = frame::seal_frame(k, &link.keys.frame, &header, payload)?;
        link.next_seq += 1;
        link.epoch_frames += 1;
        self.counters.frames_sealed += 1;
        self.counters.payload_bytes += payload.len() as u64;
        Ok(sealed)
    }

    /// Ends the session: queues a CLOSE and wipes the keys.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        if let Some(mut l) = self.link.take() {
            if let Ok(m) = control(
                k,
                &l.keys.d2r_control,
                MsgType::Close,
                l.keys.epoch,
                &mut l.ctrl_out,
                &[0],
            ) {
                self.outbox.push_back(m);
            }
        }
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
    /// How long frames of the previous epoch are still accepted after a rekey.
    pub grace_ns: u64,
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
            grace_ns: 500_000_000,
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
    /// Frames with a sequence number already received.
    pub replays: u64,
    /// Frames older than the replay window.
    pub too_old: u64,
    /// Sequence numbers never received (gaps), over all sessions.
    pub lost_frames: u64,
    /// Frames received out of order (and accepted).
    pub late_frames: u64,
    /// Frames carrying another suite than the negotiated one (downgrade attempts).
    pub wrong_suite: u64,
    /// Frames of an epoch that is not current, previous-within-grace or next.
    pub bad_epoch: u64,
    /// Messages that are not well-formed.
    pub malformed: u64,
    /// Control messages rejected.
    pub control_rejected: u64,
    /// Epoch changes.
    pub rekeys: u64,
    pub handshakes: u64,
    pub handshake_failures: u64,
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
    /// The handshake completed.
    Established {
        suite: Suite,
        mode: KexMode,
        stats: HandshakeStats,
    },
    /// The handshake failed for good (authentication, refusal): the caller reports it and may
    /// [`ReceiverSession::connect`] again.
    HandshakeFailed(HandshakeError),
    /// No ACCEPT in time: a new HELLO was queued.
    HandshakeRetry {
        attempt: u32,
    },
    Frame(Frame),
    /// The drone announced a new epoch (REKEY) and it was acknowledged.
    Rekeyed {
        epoch: u32,
    },
    /// The drone closed the session.
    Closed,
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
    /// A frame of an epoch that is neither current, previous (within grace) nor next.
    BadEpoch {
        epoch: u32,
        current: u32,
    },
    /// A frame with another suite than the negotiated one.
    WrongSuite {
        got: u8,
        negotiated: Suite,
    },
    /// A frame or control message while no session is established.
    NotEstablished,
    Control(OpenError),
    /// An ACCEPT or ALERT that answers another HELLO.
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
            Rejected::WrongSuite { got, negotiated } => {
                write!(
                    f,
                    "frame with suite {got:#04x}, negotiated {negotiated} (downgrade attempt?)"
                )
            }
            Rejected::NotEstablished => f.write_str("no session established"),
            Rejected::Control(e) => write!(f, "control message rejected: {e}"),
            Rejected::StaleHandshake => f.write_str("handshake message for another HELLO"),
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
    hello_id: [u8; 8],
    secret: EpochSecret,
    keys: EpochKeys,
    /// Previous epoch's keys and when they stop being accepted.
    previous: Option<(EpochKeys, u64)>,
    window: ReplayWindow,
    ctrl_out: u64,
    ctrl_in_top: Option<u64>,
}

enum RxState {
    Idle,
    Handshaking {
        hs: Box<ReceiverHandshake>,
        hello_len: usize,
        sent_ns: u64,
        attempts: u32,
    },
    Established(Box<RxLink>),
    Closed,
}

/// The receiver side. Holds its static key and the paired drone's public key.
pub struct ReceiverSession {
    id: Identity,
    cfg: ReceiverConfig,
    state: RxState,
    outbox: VecDeque<Vec<u8>>,
    keylog: VecDeque<KeyLogLine>,
    stats: Option<HandshakeStats>,
    counters: ReceiverCounters,
    lost_before: u64,
    /// First HELLO of the current handshake (for the duration).
    first_hello_ns: u64,
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
            id,
            cfg,
            state: RxState::Idle,
            outbox: VecDeque::new(),
            keylog: VecDeque::new(),
            stats: None,
            counters: ReceiverCounters::default(),
            lost_before: 0,
            first_hello_ns: 0,
        }
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
    pub fn epoch(&self) -> Option<u32> {
        match &self.state {
            RxState::Established(l) => Some(l.keys.epoch),
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
        let (hs, hello) = ReceiverHandshake::start(&self.id, &offer, rng)?;
        let hello_len = hello.len();
        self.outbox.push_back(hello);
        self.state = RxState::Handshaking {
            hs: Box::new(hs),
            hello_len,
            sent_ns: clock.now_ns(),
            attempts,
        };
        Ok(())
    }

    /// Timers: resends a HELLO after the handshake timeout; wipes the previous epoch's keys when
    /// the grace window is over. Call it regularly (for example every 100 ms and per message).
    pub fn handle_timeout<R: CryptoRng + ?Sized, C: Clock + ?Sized>(
        &mut self,
        rng: &mut R,
        clock: &C,
    ) -> Option<ReceiverEvent> {
        let now = clock.now_ns();
        match &mut self.state {
            RxState::Handshaking {
                sent_ns, attempts, ..
            } if now.saturating_sub(*sent_ns) >= self.cfg.handshake_timeout_ns => {
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
            l.keys.epoch,
            &mut l.ctrl_out,
            &[0],
        )
        .map_err(|e| Rejected::Control(OpenError::Crypto(e)))?;
        self.outbox.push_back(m);
        Ok(())
    }

    /// Ends the session: queues a CLOSE and wipes the keys.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        if let RxState::Established(l) = &mut self.state {
            if let Ok(m) = control(
                k,
                &l.keys.r2d_control,
                MsgType::Close,
                l.keys.epoch,
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
    /// in the message's own buffer.
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
                Rejected::Replay(ReplayError::Duplicate) => c.replays += 1,
                Rejected::Replay(ReplayError::TooOld) => c.too_old += 1,
                Rejected::WrongSuite { .. } => c.wrong_suite += 1,
                Rejected::BadEpoch { .. } => c.bad_epoch += 1,
                Rejected::Control(_) => c.control_rejected += 1,
                Rejected::Wire(_)
                | Rejected::Length { .. }
                | Rejected::Unexpected(_)
                | Rejected::StaleHandshake => c.malformed += 1,
                Rejected::NotEstablished => c.malformed += 1,
            }
        }
        r
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
            MsgType::Accept => self.on_accept(k, rng, clock, &msg),
            MsgType::Alert => self.on_alert(&msg),
            MsgType::Frame => self
                .on_frame(k, clock, msg)
                .map(|f| Some(ReceiverEvent::Frame(f))),
            MsgType::Rekey | MsgType::Close => self.on_control(k, clock, &msg),
            other => Err(Rejected::Unexpected(other)),
        }
    }

    fn on_alert(&mut self, msg: &[u8]) -> Result<Option<ReceiverEvent>, Rejected> {
        let RxState::Handshaking { hs, .. } = &self.state else {
            return Err(Rejected::StaleHandshake);
        };
        let e = hs.read_alert(msg).map_err(|e| match e {
            HandshakeError::Wire(w) => Rejected::Wire(w),
            _ => Rejected::StaleHandshake,
        })?;
        self.state = RxState::Idle;
        self.counters.handshake_failures += 1;
        Ok(Some(ReceiverEvent::HandshakeFailed(e)))
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
            let keys =
                EpochKeys::derive(k, &e.secret, 0, e.suite).map_err(|_| HandshakeError::Noise)?;
            Ok((e, keys))
        });
        match est {
            Ok((
                Established {
                    suite,
                    mode,
                    hello_id,
                    secret,
                },
                keys,
            )) => {
                let stats = HandshakeStats {
                    suite,
                    mode,
                    bytes_sent: hello_len as u64,
                    bytes_received: msg.len() as u64,
                    wire_bytes_sent: wire_len(hello_len, self.cfg.packet_payload),
                    wire_bytes_received: wire_len(msg.len(), self.cfg.packet_payload),
                    duration_ns: clock.now_ns().saturating_sub(self.first_hello_ns),
                    attempts,
                };
                self.stats = Some(stats);
                let c = &mut self.counters;
                c.handshakes += 1;
                c.handshake_bytes_sent = stats.bytes_sent;
                c.handshake_bytes_received = stats.bytes_received;
                c.handshake_ns = stats.duration_ns;
                self.state = RxState::Established(Box::new(RxLink {
                    suite,
                    hello_id,
                    secret,
                    keys,
                    previous: None,
                    window: ReplayWindow::new(),
                    ctrl_out: 0,
                    ctrl_in_top: None,
                }));
                self.log_keys();
                Ok(Some(ReceiverEvent::Established { suite, mode, stats }))
            }
            Err(e) => {
                self.counters.handshake_failures += 1;
                Ok(Some(ReceiverEvent::HandshakeFailed(e)))
            }
        }
    }

    fn log_keys(&mut self) {
        if self.cfg.keylog {
            if let RxState::Established(l) = &self.state {
                self.keylog.push_back(KeyLogLine {
                    hello_id: l.hello_id,
                    suite: l.suite,
                    keys: l.keys.clone(),
                });
            }
        }
    }

    /// Moves to epoch + 1 with already derived keys; queues the REKEY_ACK.
    fn ratchet<K: KeystreamApplier + ?Sized>(
        &mut self,
        k: &mut K,
        now: u64,
        secret: EpochSecret,
        keys: EpochKeys,
    ) {
        let grace = self.cfg.grace_ns;
        let RxState::Established(l) = &mut self.state else {
            return;
        };
        let epoch = keys.epoch;
        let old = core::mem::replace(&mut l.keys, keys);
        l.previous = Some((old, now.saturating_add(grace)));
        l.secret = secret;
        if let Ok(m) = control(
            k,
            &l.keys.r2d_control,
            MsgType::RekeyAck,
            epoch,
            &mut l.ctrl_out,
            &epoch.to_le_bytes(),
        ) {
            self.outbox.push_back(m);
        }
        self.counters.rekeys += 1;
        self.log_keys();
    }

    fn next_epoch<K: KeystreamApplier + ?Sized>(
        k: &mut K,
        l: &RxLink,
    ) -> Result<(EpochSecret, EpochKeys), Rejected> {
        let epoch = l.keys.epoch.checked_add(1).ok_or(Rejected::BadEpoch {
            epoch: u32::MAX,
            current: l.keys.epoch,
        })?;
        let s = l.secret.next();
        let keys = EpochKeys::derive(k, &s, epoch, l.suite).map_err(|_| Rejected::TagFailure)?;
        Ok((s, keys))
    }

    fn on_frame<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
        mut msg: Vec<u8>,
    ) -> Result<Frame, Rejected> {
        let now = clock.now_ns();
        let max = self.cfg.max_payload;
        let RxState::Established(l) = &mut self.state else {
            return Err(Rejected::NotEstablished);
        };
        let h = FrameHeader::decode(&msg).map_err(Rejected::Wire)?;
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
        let open = |k: &mut K, key: &DirectionKey, msg: &mut [u8]| {
            frame::open_frame(k, key, msg)
                .map(|_| ())
                .map_err(|_| Rejected::TagFailure)
        };
        let cur = l.keys.epoch;
        if h.epoch == cur {
            open(k, &l.keys.frame, &mut msg)?;
        } else if l
            .previous
            .as_ref()
            .is_some_and(|(p, until)| p.epoch == h.epoch && now < *until)
        {
            let (p, _) = l.previous.as_ref().expect("checked");
            open(k, &p.frame, &mut msg)?;
        } else if Some(h.epoch) == cur.checked_add(1) {
            // The drone moved on (its REKEY may have been lost): follow only if the frame
            // authenticates under the next epoch's keys.
            let (s, keys) = Self::next_epoch(k, l)?;
            open(k, &keys.frame, &mut msg)?;
            self.ratchet(k, now, s, keys);
        } else {
            return Err(Rejected::BadEpoch {
                epoch: h.epoch,
                current: cur,
            });
        }
        let RxState::Established(l) = &mut self.state else {
            unreachable!("still established")
        };
        l.window.commit(h.sequence).map_err(Rejected::Replay)?;
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
        let RxState::Established(l) = &mut self.state else {
            return Err(Rejected::NotEstablished);
        };
        let h = frame::control_header(msg).map_err(Rejected::Control)?;
        let key = if h.epoch == l.keys.epoch {
            &l.keys.d2r_control
        } else {
            match &l.previous {
                Some((p, _)) if p.epoch == h.epoch => &p.d2r_control,
                _ => return Err(Rejected::Control(OpenError::Crypto(CryptoError::BadTag))),
            }
        };
        if l.ctrl_in_top.is_some_and(|top| h.sequence <= top) {
            return Err(Rejected::Control(OpenError::Crypto(CryptoError::BadTag)));
        }
        let mut buf = Zeroizing::new(msg.to_vec());
        let (h, body) = frame::open_control(k, key, &mut buf).map_err(Rejected::Control)?;
        l.ctrl_in_top = Some(h.sequence);
        match h.msg_type {
            MsgType::Rekey => {
                let new = control_body_u32(body)
                    .ok_or(Rejected::Control(OpenError::Wire(WireError::Reserved)))?;
                if h.epoch == l.keys.epoch && Some(new) == l.keys.epoch.checked_add(1) {
                    let (s, keys) = Self::next_epoch(k, l)?;
                    self.ratchet(k, now, s, keys);
                    Ok(Some(ReceiverEvent::Rekeyed { epoch: new }))
                } else if new == l.keys.epoch
                    && l.previous.as_ref().is_some_and(|(p, _)| p.epoch == h.epoch)
                {
                    // A retransmitted REKEY (our ACK was lost, or a frame already moved us): ACK again.
                    let m = control(
                        k,
                        &l.keys.r2d_control,
                        MsgType::RekeyAck,
                        new,
                        &mut l.ctrl_out,
                        &new.to_le_bytes(),
                    )
                    .map_err(|e| Rejected::Control(OpenError::Crypto(e)))?;
                    self.outbox.push_back(m);
                    Ok(None)
                } else {
                    Err(Rejected::Control(OpenError::Wire(WireError::Reserved)))
                }
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

#[cfg(test)]
mod tests;
