//! The drone's connection: [`DroneConnection`].

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
    /// [`Self::frame_packetizer`].
    pub fn seal_frame<K: KeystreamApplier + ?Sized, C: Clock + ?Sized>(
        &mut self,
        k: &mut K,
        clock: &C,
        meta: FrameMeta,
        payload: &mut [u8],
    ) -> Result<SealedFrame, SealError> {
        self.session.seal_frame(k, clock, meta, payload)
    }

    /// The packets of a frame just sealed (`payload` is the buffer sealed in place):
    /// `header ‖ payload ‖ tag` at the connection's route and packet size, cut by the caller into
    /// a buffer of its own (`WIRE_OVERHEAD + packet_payload` bytes). Send what the session queued
    /// first ([`Connection::poll_message`] until `None`): a GROUP_KEY its timers drew goes out
    /// before the frame it keys.
    pub fn frame_packetizer<'a>(
        &self,
        sealed: &'a SealedFrame,
        payload: &'a [u8],
    ) -> Packetizer<'a> {
        let parts = [&sealed.header[..], payload, sealed.tag()];
        Packetizer::checked(
            DroneSession::ROUTE,
            parts,
            self.io.packet_payload,
            LastFlag::Final,
        )
    }

    /// Ends every session: CLOSEs are queued for [`Connection::poll_transmit`], every key is wiped.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        self.session.close(k)
    }
}
