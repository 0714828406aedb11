//! What both roles share: the handshake statistics, sealing a control message.

use alloc::vec::Vec;

use gap_rust_cipher_s::KeystreamApplier;

use crate::aead::CryptoError;
use crate::frame;
use crate::suite::{KexMode, Suite};
use crate::wire::{self, MsgType, SessionId};

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

pub(super) fn wire_len(n: usize, packet: usize) -> u64 {
    crate::cpx::wire_len(n, packet.clamp(1, crate::cpx::MAX_PAYLOAD)) as u64
}

/// Seals a control message of `session` into a new buffer.
pub(super) fn control<K: KeystreamApplier + ?Sized>(
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
