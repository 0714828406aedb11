//! The drone's connection: [`DroneConnection`] and the packets of a sealed frame.

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
        let packet = cfg.packet_payload;
        Connection::with_session(DroneSession::new(id, cfg), packet, MAX_UPSTREAM_MESSAGE)
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
        let Some(msg) = self.io.next_message() else {
            return Ok(None);
        };
        let r = self.session.handle_message(k, rng, clock, &msg);
        if r.is_err() {
            self.io.counters.rejected += 1;
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
    ) -> FramePackets<'a> {
        let frame = Packetizer::new(
            DroneSession::ROUTE,
            [&sealed.header, payload, sealed.tag()],
            self.io.packet_payload,
            LastFlag::Final,
        )
        .ok();
        FramePackets {
            io: &mut self.io,
            session: &mut self.session,
            frame,
        }
    }

    /// Ends every session: CLOSEs are queued for [`Connection::poll_transmit`], every key is wiped.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        self.session.close(k)
    }
}

/// The CPX packets of one sealed frame, preceded by what the session had queued
/// ([`DroneConnection::frame_packets`](super::DroneConnection::frame_packets)); each is lent from the connection's packet buffer until the
/// next call.
pub struct FramePackets<'a> {
    io: &'a mut Io,
    session: &'a mut DroneSession,
    /// `None` only if the packet size were invalid, which the connection refused at its creation.
    frame: Option<Packetizer<'a>>,
}

impl core::fmt::Debug for FramePackets<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FramePackets")
            .field(
                "frame_packets_left",
                &self.frame.as_ref().map(|p| p.packets_left()),
            )
            .finish_non_exhaustive()
    }
}

impl FramePackets<'_> {
    /// The next packet, `None` after the frame's last.
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
        self.io.count_out(n);
        Some(&self.io.packet[..n])
    }
}
