//! The sans-I/O [`Connection`]: bytes in → events and bytes out, one type for both roles, in the
//! manner of rustls' `ConnectionCommon` with its client and server connections.
//!
//! A connection owns everything between the wire and a session: the CPX deframer
//! ([`crate::cpx::StreamDecoder`]), the message reassembler ([`crate::assembler::Assembler`]), the
//! session of its role, and the packetizer for what it sends, at one packet size (the session's
//! configured `packet_payload`, which its wire-byte statistics use too). It never touches a socket,
//! a link or a timer: the caller moves bytes and supplies time, randomness and the keystream engine.
//!
//! * [`DroneConnection`] = `Connection<DroneSession>`: the drone, serving every paired receiver
//!   ([`DroneConnection::seal_frame`], [`DroneConnection::frame_packetizer`]).
//! * [`ReceiverConnection`] = `Connection<ReceiverSession>`: one receiver
//!   ([`ReceiverConnection::connect`]).
//!
//! Driving one (the same shape on both sides):
//!
//! ```text
//! bytes from the link ──read_stream / read_datagram──▶ deframer ─▶ reassembler ─▶ messages waiting
//!      (callback: Incoming::Other / Garbled / Dropped)
//! while has_message():  process_message(engine, rng, clock) ─▶ Ok(Some(event)) | Ok(None) | Err(rejection)
//! about every 100 ms (the drone: once per frame):  handle_timeout(engine, rng, clock)
//! while let Some(packet) = poll_transmit():  send packet
//!   (or poll_message(): a Packetizer to cut into a buffer of one's own; the drone's frames:
//!    frame_packetizer after seal_frame, once the queued messages went out)
//! ```
//!
//! Input is either a byte stream (TCP, SPI: [`Connection::read_stream`], any chunking, a packet may
//! span calls) or datagrams (UDP: [`Connection::read_datagram`], each exactly one packet; a partial
//! packet is never carried into the next datagram). Bytes that are not CPX are skipped until a
//! plausible packet starts again and reported once per garbled stretch; messages that lost
//! packets are dropped by the reassembler and reported; messages the session refuses come back as
//! its typed rejection. The stream goes on in every case.
//!
//! Memory: the deframer's fixed 1 KiB, the reassembler's message in progress (bounded by the
//! largest message the role accepts), the session, and one packet buffer if `poll_transmit` is
//! used. Sending copies each packet into one buffer (the connection's, or the caller's with
//! `poll_message` and `frame_packetizer`): nothing is allocated per packet.

use alloc::vec;
use alloc::vec::Vec;

use crate::assembler::{Assembler, AssemblyError};
use crate::cpx::{
    self, CpxError, GAPSTREAM_FUNCTION, LastFlag, MAX_PAYLOAD, PacketRef, Packetizer, Route,
    StreamDecoder, Target, WIRE_OVERHEAD,
};
use crate::session::{DroneSession, ReceiverSession};

mod drone;
mod receiver;

#[cfg(test)]
mod tests;

/// Largest message the drone reassembles from what the receivers send (a HELLO of the RSA-OAEP
/// mode, the largest, is under 600 bytes).
pub const MAX_UPSTREAM_MESSAGE: usize = 4096;

/// The drone's connection: [`DroneSession`] behind the CPX deframer, reassembler and packetizer.
pub type DroneConnection = Connection<DroneSession>;
/// A receiver's connection: [`ReceiverSession`] behind the CPX deframer, reassembler and
/// packetizer.
pub type ReceiverConnection = Connection<ReceiverSession>;

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::session::DroneSession {}
    impl Sealed for crate::session::ReceiverSession {}
}

/// The role a [`Connection`] plays: [`DroneSession`] or [`ReceiverSession`] (sealed).
pub trait Side: sealed::Sealed {
    /// The CPX route of what this side sends.
    const ROUTE: Route;
    #[doc(hidden)]
    fn next_outgoing(&mut self) -> Option<Vec<u8>>;
}

impl Side for DroneSession {
    const ROUTE: Route = Route::new(Target::Gap8, Target::WifiHost, GAPSTREAM_FUNCTION);
    fn next_outgoing(&mut self) -> Option<Vec<u8>> {
        self.poll_transmit()
    }
}

impl Side for ReceiverSession {
    const ROUTE: Route = Route::new(Target::WifiHost, Target::Gap8, GAPSTREAM_FUNCTION);
    fn next_outgoing(&mut self) -> Option<Vec<u8>> {
        self.poll_transmit()
    }
}

/// What reading bytes found besides the protocol's own packets, handed to the callback of
/// [`Connection::read_stream`] and [`Connection::read_datagram`] as it happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// A packet of another CPX function (the ESP32's WIFI_CTRL status, the console, the stock
    /// image stream): not the protocol's; the caller's to use or ignore.
    Other(PacketRef<'a>),
    /// The first error of a stretch of bytes that are not CPX (the deframer slides on until a
    /// plausible packet starts; the rest of the stretch is not reported again), or a datagram that
    /// ends inside a packet ([`CpxError::Truncated`]).
    Garbled(CpxError),
    /// A message (or a packet) the reassembler dropped: packets were lost or garbled.
    Dropped(AssemblyError),
    /// A message was reassembled (it waits for `process_message`), in the order they wait;
    /// `wire_len`: the bytes its packets took on the wire, CPX headers included.
    Message { wire_len: usize },
}

/// What a connection read (what it sends, its caller sees).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionCounters {
    /// CPX packets read, of every function.
    pub packets_in: u64,
    /// Of them, packets of other functions ([`Incoming::Other`]).
    pub other_packets: u64,
    /// Stretches of garbled bytes (each reported once), and every deframer error within them
    /// (one per byte slid over; a datagram cut inside a packet counts one).
    pub garbled: u64,
    pub cpx_errors: u64,
    /// Messages the reassembler dropped and packets it could not place ([`Incoming::Dropped`]).
    pub dropped: u64,
    /// Messages reassembled, and the ones the session rejected.
    pub messages: u64,
    pub rejected: u64,
}

/// The wire half both roles share: deframer, reassembler, packetizer.
struct Io {
    decoder: StreamDecoder,
    assembler: Assembler,
    /// Inside a stretch of bytes that are not CPX (already reported).
    garbled: bool,
    packet_payload: usize,
    /// One packet on the wire, lent by `poll_transmit` (allocated at its first call: a caller that
    /// cuts packets into its own buffer, with `poll_message`, never needs it).
    packet: Vec<u8>,
    /// The outgoing message being cut into packets, and how much of it went out.
    sending: Vec<u8>,
    sent: usize,
    /// The counters not kept by the deframer and the reassembler themselves.
    garbled_stretches: u64,
    truncated_datagrams: u64,
    rejected: u64,
}

impl Io {
    fn new(packet_payload: usize, max_message: usize) -> Result<Io, CpxError> {
        if !(1..=MAX_PAYLOAD).contains(&packet_payload) {
            return Err(CpxError::BadPacketSize(packet_payload));
        }
        Ok(Io {
            decoder: StreamDecoder::new(),
            assembler: Assembler::new(max_message),
            garbled: false,
            packet_payload,
            packet: Vec::new(),
            sending: Vec::new(),
            sent: 0,
            garbled_stretches: 0,
            truncated_datagrams: 0,
            rejected: 0,
        })
    }

    fn read_stream(&mut self, bytes: &[u8], on: &mut impl FnMut(Incoming<'_>)) {
        let (assembler, garbled) = (&mut self.assembler, &mut self.garbled);
        let stretches = &mut self.garbled_stretches;
        self.decoder.decode_all(bytes, &mut |r| match r {
            Ok(p) => {
                *garbled = false;
                let done = assembler.counters().messages;
                // The reassembler counts (and ignores) the packets of other functions.
                if let Err(e) = assembler.push(p.route, p.payload) {
                    on(Incoming::Dropped(e));
                } else if p.route.function != GAPSTREAM_FUNCTION as u8 {
                    on(Incoming::Other(p));
                }
                if assembler.counters().messages != done {
                    on(Incoming::Message {
                        wire_len: assembler.last_wire_len(),
                    });
                }
            }
            Err(e) => {
                if !*garbled {
                    *garbled = true;
                    *stretches += 1;
                    on(Incoming::Garbled(e));
                }
            }
        });
    }

    /// Makes sure a message is being sent (the rest of one, or the session's next); false when
    /// nothing is queued.
    fn has_outgoing<S: Side>(&mut self, session: &mut S) -> bool {
        while self.sent >= self.sending.len() {
            match session.next_outgoing() {
                Some(m) => (self.sending, self.sent) = (m, 0),
                None => return false,
            }
        }
        true
    }

    /// Writes the next packet of what the session queued into `self.packet`; its length.
    fn next_packet<S: Side>(&mut self, session: &mut S) -> Option<usize> {
        if !self.has_outgoing(session) {
            return None;
        }
        if self.packet.is_empty() {
            self.packet = vec![0; WIRE_OVERHEAD + self.packet_payload];
        }
        let chunk = &self.sending[self.sent..];
        let chunk = &chunk[..chunk.len().min(self.packet_payload)];
        self.sent += chunk.len();
        let route = S::ROUTE.with_last(self.sent == self.sending.len());
        // Cannot fail: the chunk is at most packet_payload <= 1020 bytes, the buffer 4 more.
        cpx::encode_packet(route, chunk, &mut self.packet).ok()
    }
}

/// A sans-I/O protocol connection of one role ([`DroneConnection`], [`ReceiverConnection`]): CPX
/// bytes in, events and CPX bytes out (see the [module documentation](self)).
pub struct Connection<S> {
    session: S,
    io: Io,
}

impl<S: Side> core::fmt::Debug for Connection<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Connection")
            .field("packet_payload", &self.io.packet_payload)
            .field("counters", &self.counters())
            .finish_non_exhaustive()
    }
}

impl<S: Side> Connection<S> {
    /// Reads bytes of a byte stream (TCP, SPI): any chunking, a packet may span calls. Whole
    /// messages wait for `process_message`; everything else is handed to `on` as it is found ([`Incoming`]).
    pub fn read_stream(&mut self, bytes: &[u8], mut on: impl FnMut(Incoming<'_>)) {
        self.io.read_stream(bytes, &mut on);
    }

    /// Reads one datagram (UDP): whole CPX packets (one, as the bridge sends them). A partial
    /// packet at its end is dropped and reported ([`CpxError::Truncated`], unless inside a garbled
    /// stretch), never completed from the next datagram, and garbage at its start does not slide
    /// into the next one.
    pub fn read_datagram(&mut self, datagram: &[u8], mut on: impl FnMut(Incoming<'_>)) {
        self.io.decoder.reset();
        self.io.read_stream(datagram, &mut on);
        let have = self.io.decoder.buffered();
        if have > 0 {
            self.io.decoder.reset();
            self.io.truncated_datagrams += 1;
            if !self.io.garbled {
                self.io.garbled = true;
                self.io.garbled_stretches += 1;
                on(Incoming::Garbled(CpxError::Truncated { have }));
            }
        }
    }

    /// Reads one packet the caller has already deframed (a receiver that also speaks the stock
    /// stream on the same socket). Packets of other functions are ignored.
    pub fn read_packet(&mut self, route: Route, payload: &[u8]) -> Result<(), AssemblyError> {
        self.io.assembler.push(route, payload)
    }

    /// A whole message waits for `process_message`.
    pub fn has_message(&self) -> bool {
        self.io.assembler.has_message()
    }

    /// The message `process_message` takes next: for a caller that records the traffic.
    pub fn peek_message(&self) -> Option<&[u8]> {
        self.io.assembler.peek_message()
    }

    /// Takes the next whole message without handing it to the session (a monitor, a recorder, a
    /// test that plays an attacker); `process_message` is this, then the session.
    pub fn take_message(&mut self) -> Option<Vec<u8>> {
        self.io.assembler.next_message()
    }

    /// Drops a partial packet and a partial message (after the link was reset, for example: the
    /// next byte starts a packet).
    pub fn reset_input(&mut self) {
        self.io.decoder.reset();
        self.io.assembler.reset();
        self.io.garbled = false;
    }

    /// The next CPX packet to send (handshake answers, group keys, keepalives, closes: whatever
    /// the session queued), lent from the connection's packet buffer; `None` when nothing is
    /// queued. Messages go out whole and in order, cut at the connection's packet size.
    pub fn poll_transmit(&mut self) -> Option<&[u8]> {
        let n = self.io.next_packet(&mut self.session)?;
        Some(&self.io.packet[..n])
    }

    /// The next message to send (the rest of one `poll_transmit` began), as a [`Packetizer`] at
    /// the connection's route and packet size: the caller cuts it into packets in a buffer of its
    /// own (`WIRE_OVERHEAD + packet_payload` bytes) and sends every one before asking for the next
    /// message. The drone does this to send its session's messages, its frames
    /// ([`DroneConnection::frame_packetizer`]) and the stock stream through one loop.
    pub fn poll_message(&mut self) -> Option<Packetizer<'_>> {
        if !self.io.has_outgoing(&mut self.session) {
            return None;
        }
        let rest = &self.io.sending[self.io.sent..];
        self.io.sent = self.io.sending.len();
        Some(Packetizer::checked(
            S::ROUTE,
            [rest, &[], &[]],
            self.io.packet_payload,
            LastFlag::Final,
        ))
    }

    /// The session, for its state and counters.
    pub fn session(&self) -> &S {
        &self.session
    }

    /// The session itself, for what the connection does not wrap (a message that arrived whole
    /// by other means, the key log). What it queues still leaves through
    /// [`Connection::poll_transmit`].
    pub fn session_mut(&mut self) -> &mut S {
        &mut self.session
    }

    /// The payload bytes per packet this connection sends.
    pub fn packet_payload(&self) -> usize {
        self.io.packet_payload
    }

    pub fn counters(&self) -> ConnectionCounters {
        let a = self.io.assembler.counters();
        ConnectionCounters {
            packets_in: a.packets + a.ignored_packets,
            other_packets: a.ignored_packets,
            garbled: self.io.garbled_stretches,
            cpx_errors: self.io.decoder.errors() + self.io.truncated_datagrams,
            dropped: a.dropped_messages + a.stray_packets,
            messages: a.messages,
            rejected: self.io.rejected,
        }
    }
}
