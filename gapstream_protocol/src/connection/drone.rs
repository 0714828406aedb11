//! The drone's connection: [`DroneConnection`] and the packets it sends.

use gap_rust_cipher_s::KeystreamApplier;
use rand_core::CryptoRng;

use super::{Connection, Io, MAX_UPSTREAM_MESSAGE, Side};
use crate::clock::Clock;
use crate::cpx::{CpxError, LastFlag, Packetizer};
use crate::frame::{FrameMeta, SealedFrame};
use crate::handshake::DroneIdentity;
use crate::session::{DroneConfig, DroneError, DroneEvent, DroneSession, SealError};

impl Connection<DroneSession> {
    /// The drone's connection for the pairing `id` (an [`crate::Identity`] for one receiver, a
    /// [`DroneIdentity`] for several). `cfg.packet_payload` (1..=1020) is the size of the packets
    /// it sends; a size outside that range is [`CpxError::BadPacketSize`].
    pub fn new(id: impl Into<DroneIdentity>, cfg: DroneConfig) -> Result<Self, CpxError> {
        // The packet size is checked before anything is built (nothing to tear down on error).
        let io = Io::new(cfg.packet_payload, MAX_UPSTREAM_MESSAGE)?;
        Ok(Connection {
            session: DroneSession::new(id, cfg),
            io,
        })
    }

    /// Hands the oldest whole message from the receivers to the session: its event, `Ok(None)`
    /// when it had nothing to report (or no message was waiting: see
    /// [`Connection::has_message`]), or why it was rejected (counted; the stream goes on). The
    /// drone draws a fresh generator per message that may need randomness, so `rng` is asked for
    /// only here.
    pub fn process_message<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
    ) -> Result<Option<DroneEvent>, DroneError>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let Some(msg) = self.io.assembler.next_message() else {
            return Ok(None);
        };
        let r = self.session.handle_message(k, rng, clock, &msg);
        if r.is_err() {
            self.io.rejected += 1;
        }
        r
    }

    /// The session's timers ([`DroneSession::handle_timeout`]): receivers gone silent, the rekey
    /// policy, group-key resends. Returns the receivers that timed out.
    pub fn handle_timeout<K, R, C>(&mut self, k: &mut K, rng: &mut R, clock: &C) -> usize
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        self.session.handle_timeout(k, rng, clock)
    }

    /// Seals one frame in place ([`DroneSession::seal_frame`]); send it with
    /// [`Self::frame_packets`].
    pub fn seal_frame<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
        meta: FrameMeta,
        payload: &mut [u8],
    ) -> Result<SealedFrame, SealError> {
        self.session.seal_frame(k, clock, meta, payload)
    }

    /// The packets to send for a frame just sealed (`payload` is the buffer sealed in place): first
    /// whatever the session queued (a GROUP_KEY its timers drew goes out before the frame it
    /// keys), then `header ‖ payload ‖ tag` at the connection's packet size.
    pub fn frame_packets<'a>(
        &'a mut self,
        sealed: &'a SealedFrame,
        payload: &'a [u8],
    ) -> Packets<'a> {
        let frame = Packetizer::new(
            DroneSession::ROUTE,
            [&sealed.header, payload, sealed.tag()],
            self.io.packet_payload,
            LastFlag::Final,
        )
        .ok();
        Packets {
            io: &mut self.io,
            session: &mut self.session,
            frame,
        }
    }

    /// The packets of what the session queued (handshake answers, group keys, keepalives, closes):
    /// the same as [`Connection::poll_transmit`], as a [`Packets`] like a frame's.
    pub fn queued_packets(&mut self) -> Packets<'_> {
        Packets {
            io: &mut self.io,
            session: &mut self.session,
            frame: None,
        }
    }

    /// Ends every session: CLOSEs are queued for [`Connection::poll_transmit`], every key is wiped.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        self.session.close(k)
    }
}

/// CPX packets to send, lent one at a time from the connection's packet buffer (each until the
/// next call): what the session queued, then, from
/// [`DroneConnection::frame_packets`](super::DroneConnection::frame_packets), the frame.
pub struct Packets<'a> {
    io: &'a mut Io,
    session: &'a mut DroneSession,
    /// The frame's packets; `None` for the queued messages alone.
    frame: Option<Packetizer<'a>>,
}

impl core::fmt::Debug for Packets<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Packets")
            .field(
                "frame_packets_left",
                &self.frame.as_ref().map(|p| p.packets_left()),
            )
            .finish_non_exhaustive()
    }
}

impl Packets<'_> {
    /// The next packet, `None` after the last.
    pub fn next_packet(&mut self) -> Option<&[u8]> {
        if let Some(n) = self.io.next_packet(self.session) {
            return Some(&self.io.packet[..n]);
        }
        // Cannot fail: the buffer holds 4 + packet_payload bytes.
        let n = self
            .frame
            .as_mut()?
            .next_packet(&mut self.io.packet)?
            .ok()?;
        Some(&self.io.packet[..n])
    }
}
