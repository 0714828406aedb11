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
//!
//! One file per role, as rustls splits its client and server: `drone.rs` ([`DroneSession`], its
//! configuration, events, errors and counters), `receiver.rs` ([`ReceiverSession`], likewise) and
//! `common.rs` (what both use: [`HandshakeStats`], sealing a control message).

mod common;
mod drone;
mod receiver;

pub use crate::clock::Clock;
pub use common::HandshakeStats;
pub use drone::{
    DroneConfig, DroneCounters, DroneError, DroneEvent, DroneSession, HARD_MAX_FRAMES_PER_EPOCH,
    LeaveReason, MAX_OUTBOX, MAX_RECEIVERS, SealError, SessionInfo,
};
pub use receiver::{
    Frame, ReceiverConfig, ReceiverCounters, ReceiverEvent, ReceiverSession, Rejected,
};

#[cfg(test)]
mod tests;
