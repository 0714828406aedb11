//! A receiver's connection: [`ReceiverConnection`].

use gap_rust_cipher_s::KeystreamApplier;
use rand_core::CryptoRng;

use super::{Connection, Io};
use crate::clock::Clock;
use crate::cpx::CpxError;
use crate::handshake::{HandshakeError, Identity};
use crate::session::{ReceiverConfig, ReceiverEvent, ReceiverSession, Rejected};

impl Connection<ReceiverSession> {
    /// A receiver's connection for the pairing `id`. `cfg.packet_payload` (1..=1020) is the size
    /// of the packets it sends (a size outside that range is [`CpxError::BadPacketSize`]);
    /// messages up to [`ReceiverConfig::max_message`] are reassembled.
    pub fn new(id: Identity, cfg: ReceiverConfig) -> Result<Self, CpxError> {
        let io = Io::new(cfg.packet_payload, cfg.max_message())?;
        Ok(Connection {
            session: ReceiverSession::new(id, cfg),
            io,
        })
    }

    /// A copy of the connection and its session (feature `fork`, for fuzzing snapshots; never in a
    /// product: see [`ReceiverSession::fork`]); `None` while a handshake is under way.
    #[cfg(feature = "fork")]
    pub fn fork(&self) -> Option<Self> {
        Some(Connection {
            session: self.session.fork()?,
            io: self.io.clone(),
        })
    }

    /// Starts (or restarts) the handshake: a HELLO is queued for [`Connection::poll_transmit`].
    pub fn connect<R: CryptoRng + ?Sized, C: Clock + ?Sized>(
        &mut self,
        rng: &mut R,
        clock: &C,
    ) -> Result<(), HandshakeError> {
        self.session.connect(rng, clock)
    }

    /// Hands the oldest whole message from the drone to the session: its event (a frame, decrypted
    /// in the message's own buffer; the handshake's end; a new epoch...), `Ok(None)` when it had
    /// nothing to report (a message for another receiver; or no message was waiting: see
    /// [`Connection::has_message`]), or why it was rejected (counted in the session's
    /// [`crate::session::ReceiverCounters`]; the stream goes on).
    pub fn process_message<K, R, C>(
        &mut self,
        k: &mut K,
        rng: &mut R,
        clock: &C,
    ) -> Result<Option<ReceiverEvent>, Rejected>
    where
        K: KeystreamApplier + ?Sized,
        R: CryptoRng + ?Sized,
        C: Clock + ?Sized,
    {
        let Some(msg) = self.io.assembler.next_message() else {
            return Ok(None);
        };
        let r = self.session.handle_message(k, rng, clock, msg);
        if r.is_err() {
            self.io.rejected += 1;
        }
        r
    }

    /// The session's timers ([`ReceiverSession::handle_timeout`]): HELLO retries, keepalives, the
    /// end of a grace window, a drone gone silent. Call it about every 100 ms.
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
        self.session.handle_timeout(k, rng, clock)
    }

    /// Asks the drone for a new epoch.
    pub fn request_rekey<K: KeystreamApplier + ?Sized>(
        &mut self,
        k: &mut K,
    ) -> Result<(), Rejected> {
        self.session.request_rekey(k)
    }

    /// Asks the drone to code the next frames at JPEG `quality` (1..=100; SET_QUALITY).
    pub fn request_quality<K: KeystreamApplier + ?Sized>(
        &mut self,
        k: &mut K,
        quality: u8,
    ) -> Result<(), Rejected> {
        self.session.request_quality(k, quality)
    }

    /// Ends the session: a CLOSE is queued (the drone then rekeys the group without this
    /// receiver), the keys are wiped.
    pub fn close<K: KeystreamApplier + ?Sized>(&mut self, k: &mut K) {
        self.session.close(k)
    }
}
