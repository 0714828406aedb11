//! The ESP32's end of the SPI link to the GAP8 (the ESP32 is the SPI slave), sans I/O: one CPX
//! packet per SPI transaction in each direction, as Bitcraze's stock ESP32 firmware does it
//! (aideck-esp-firmware `main/spi_transport.c`), on top of the forwarding core ([`Bridge`]).
//!
//! The driver (ESP-IDF glue: `esp-idf/main/`, or the GVSOC stand-in `gvsoc/e2e/`) runs:
//! ```text
//! loop {
//!     wait until the GAP8's ready line rose, or should_arm() says a packet waits for the GAP8;
//!     arm(): fill the transmit buffer (next packet for the GAP8, or length 0);
//!     queue the slave transaction, raise the ESP32's ready line;
//!     ... the GAP8 clocks the transaction ...
//!     lower the ready line; complete(received bytes)
//! }
//! ```
//! Buffer layout (both directions): `u16` little-endian length of routing header + data (0 = no
//! packet), 2-byte routing header, data; i.e. exactly a CPX wire packet, padded by the master.
//!
//! Clocks: the AI-deck's board corrupts what the ESP32 drives on MISO above 7.2 MHz, while the
//! GAP8 -> ESP32 direction runs at 30 MHz (E. Cereda, A. Giusti, D. Palossi, "NanoCockpit",
//! arXiv 2601.07476, 2026). The slave follows whatever clock the master sets, so the rule lives in
//! the GAP8's link (`gapstream_firmware::link`): it reads the 4 length bytes of every transaction
//! at <= 7.2 MHz and clocks the rest fast only when this side's length is 0. The ESP32 therefore
//! keeps the stock behaviour above: a packet for the GAP8 may go into any transaction (one the
//! GAP8 asked for, or one armed on its own), and is always read at the slow clock.

use crate::cpx::{self, MTU};
use crate::forward::{Bridge, BridgeError};

/// Size of the DMA buffers of a transaction: the largest CPX wire packet, rounded up to 4.
pub const BUFFER_LEN: usize = (2 + MTU).div_ceil(4) * 4;

/// Counters of the SPI side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpiSlaveStats {
    pub transactions: u64,
    /// Packets given to the GAP8.
    pub packets_to_gap8: u64,
    /// Packets received from the GAP8.
    pub packets_from_gap8: u64,
    /// Transactions whose received length was not a CPX packet (or was cut short).
    pub malformed: u64,
}

/// The SPI-slave state (what is armed).
#[derive(Clone, Debug, Default)]
pub struct SpiSlave {
    stats: SpiSlaveStats,
}

impl SpiSlave {
    pub const fn new() -> Self {
        SpiSlave {
            stats: SpiSlaveStats {
                transactions: 0,
                packets_to_gap8: 0,
                packets_from_gap8: 0,
                malformed: 0,
            },
        }
    }

    pub fn stats(&self) -> SpiSlaveStats {
        self.stats
    }

    /// Whether to arm a transaction now: the GAP8 raised its ready line (`gap8_asked`), or a
    /// packet waits for the GAP8.
    pub fn should_arm(&self, bridge: &Bridge, gap8_asked: bool) -> bool {
        gap8_asked || bridge.next_for_spi().is_some()
    }

    /// Fills `tx` (at least [`BUFFER_LEN`] bytes) for the next transaction: the next packet the
    /// bridge has for the GAP8, or an empty one. Returns the packet's wire length (0: empty).
    /// The packet is taken from the bridge now (as the stock firmware takes it from its queue).
    pub fn arm(&mut self, bridge: &mut Bridge, tx: &mut [u8]) -> usize {
        let head = tx.len().min(2);
        tx[..head].fill(0);
        let Some((bytes, range)) = bridge.next_for_spi() else {
            return 0;
        };
        let rest = &bytes[range];
        let n = match cpx::packet_len(rest) {
            Ok(Some(n)) if n <= rest.len() && n <= tx.len() => n,
            // The queue towards the GAP8 only holds whole, valid packets (the core checked them
            // when the client sent them); anything else is skipped rather than sent half.
            _ => {
                let skip = rest.len();
                bridge.spi_sent(skip);
                self.stats.malformed += 1;
                return 0;
            }
        };
        tx[..n].copy_from_slice(&rest[..n]);
        bridge.spi_sent(n);
        self.stats.packets_to_gap8 += 1;
        n
    }

    /// A transaction ended; `rx` is what the GAP8 clocked out (its buffer, at least 4 bytes).
    /// Forwards the packet in it, if any. Returns the number of whole messages it completed.
    pub fn complete(&mut self, bridge: &mut Bridge, rx: &[u8]) -> Result<usize, BridgeError> {
        self.stats.transactions += 1;
        if rx.len() < 2 {
            self.stats.malformed += 1;
            return Err(BridgeError::Cpx(cpx::CpxError::BadDatagram));
        }
        let len = gapstream_protocol::cpx::length_field(rx).map_or(0, usize::from);
        if len == 0 {
            return Ok(0);
        }
        if !(2..=MTU).contains(&len) || rx.len() < 2 + len {
            self.stats.malformed += 1;
            bridge.spi_reset();
            return Err(BridgeError::Cpx(cpx::CpxError::BadDatagram));
        }
        let r = bridge.spi_transfer(&rx[..2 + len]);
        if r.is_ok() {
            self.stats.packets_from_gap8 += 1;
        } else {
            self.stats.malformed += 1;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forward::{Config, Transport};
    use alloc::vec;
    use alloc::vec::Vec;
    use gapstream_protocol::cpx::{Function, LastFlag, Packetizer, Route, Target};

    fn wire(route: Route, msg: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut p = Packetizer::new(route, [msg, &[], &[]], 1020, LastFlag::Final).unwrap();
        let mut buf = [0u8; 1024];
        while let Some(n) = p.next_packet(&mut buf) {
            out.extend_from_slice(&buf[..n.unwrap()]);
        }
        out
    }

    #[test]
    fn arms_one_packet_per_transaction_for_the_gap8() {
        let mut b = Bridge::new(Config::default());
        let c = b.add_client(Transport::Tcp).unwrap();
        assert_eq!(b.take_client_status(), vec![true]);
        let mut s = SpiSlave::new();
        assert!(!s.should_arm(&b, false));
        assert!(s.should_arm(&b, true));
        let up = wire(
            Route::new(Target::WifiHost, Target::Gap8, Function::App),
            &[7u8; 1500],
        );
        b.client_received(c, &up).unwrap();
        assert!(s.should_arm(&b, false));
        let mut tx = vec![0u8; BUFFER_LEN];
        let n1 = s.arm(&mut b, &mut tx);
        assert_eq!(&tx[..n1], &up[..n1]);
        assert_eq!(n1, 1024);
        let n2 = s.arm(&mut b, &mut tx);
        assert_eq!(&tx[..n2], &up[n1..]);
        assert_eq!(s.arm(&mut b, &mut tx), 0);
        assert_eq!(tx[..2], [0, 0], "an empty transaction says length 0");
        assert_eq!(s.stats().packets_to_gap8, 2);
    }

    #[test]
    fn completes_packets_from_the_gap8_and_rejects_garbage() {
        let mut b = Bridge::new(Config::default());
        let c = b.add_client(Transport::Tcp).unwrap();
        let mut s = SpiSlave::new();
        let down = wire(
            Route::new(Target::Gap8, Target::WifiHost, Function::Test),
            b"hello",
        );
        let mut rx = vec![0u8; BUFFER_LEN];
        rx[..down.len()].copy_from_slice(&down);
        assert_eq!(s.complete(&mut b, &rx), Ok(1));
        let (bytes, r) = b.next_for_client(c).unwrap();
        assert_eq!(&bytes[r], &down[..]);
        // An empty transaction, then a length larger than the MTU.
        assert_eq!(s.complete(&mut b, &[0, 0, 0, 0]), Ok(0));
        assert!(s.complete(&mut b, &[0xFF, 0xFF, 0, 0]).is_err());
        // Cut short: the length says more than was clocked.
        assert!(s.complete(&mut b, &[20, 0, 1, 2]).is_err());
        assert_eq!(s.stats().malformed, 2);
        assert_eq!(s.stats().packets_from_gap8, 1);
    }
}
