//! `gapstream_drone::Link` over the AI-deck's SPI link to the ESP32: CPX packets, one per SPI
//! transaction, with the two ready-to-talk lines, as Bitcraze's firmware pair does it
//! (aideck-gap8-examples `lib/cpx/src/com.c` on the GAP8, aideck-esp-firmware
//! `main/spi_transport.c` on the ESP32), so a deck with the stock ESP32 firmware works too, at the
//! two clocks the AI-deck really allows.
//!
//! The deck's board corrupts ESP32 -> GAP8 data (MISO) clocked above 7.2 MHz, while GAP8 -> ESP32
//! alone runs at 30 MHz (E. Cereda, A. Giusti, D. Palossi, "NanoCockpit: Performance-optimized
//! Application Framework for AI-based Autonomous Nanorobotics", arXiv 2601.07476, 2026). So every
//! transfer that reads MISO runs at the *upstream* clock (<= 7.2 MHz) and everything else at the
//! *downstream* clock with MISO not even sampled; [`SpiHw::transfer`] ties the clock to whether
//! `rx` is given, so reading MISO at the fast clock cannot be written.
//!
//! One transaction (the GAP8 is the SPI master, mode 0, MSB first):
//! 1. the GAP8 puts its packet (`u16` length, routing header, data) or an empty one (length 0) in
//!    its transmit buffer; if it has a packet it raises its ready line (GPIO 3);
//! 2. the ESP32 prepares a slave transaction (its packet for the GAP8, or length 0) and raises its
//!    ready line (GPIO 18); the GAP8 waits for that rising edge;
//! 3. the GAP8 clocks 4 bytes full duplex at the upstream clock with CS held: both lengths are now
//!    known, reliably;
//! 4. it lowers its ready line and clocks the rest: `max(tx_len, rx_len) - 2` bytes rounded up to a
//!    multiple of 4 (at least 4), releasing CS: full duplex at the upstream clock when the ESP32
//!    has a packet for the GAP8 (`rx_len > 0`), transmit-only at the downstream clock otherwise.
//!    The ESP32 lowers its line when the transaction ends.
//!
//! So the ESP32 needs no rule of its own: it may put a packet for the GAP8 into any transaction
//! (as the stock firmware does), and that transaction is then clocked slowly; a frame's packets,
//! with nothing coming back, go at the fast clock. A rising edge of the ESP32's line while the
//! GAP8 has nothing to send means the ESP32 has a packet for the GAP8: the GAP8 then runs a
//! transaction with an empty packet. The link logic is generic over [`SpiHw`] (the board:
//! `fw_spi_transfer`, `fw_gap_rtt_set`, `fw_esp_rtt_*`), so the host tests run it against the ESP32
//! side of `esp32_bridge`. [`queue`] runs it in a task of its own so that a frame is sent while
//! the next one is sealed (`LINK_SLOTS`, 16 by default on the GAP8: docs/hardware.md, section 10).

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;

use gapstream_drone::Link;
use gapstream_protocol::cpx::{self, MTU};

use crate::entropy::SharedPool;

pub mod queue;

/// Most receive transactions served by one [`CpxSpiLink::poll_recv`] / [`CpxSpiLink::wait_upstream`].
pub const MAX_DRAIN: usize = 32;
/// Bytes clocked in the first part of a transaction.
pub const HEADER_PART: usize = 4;
/// Transmit / receive buffer: length prefix + the largest CPX packet, rounded up to 4.
pub const BUFFER_LEN: usize = (2 + MTU).div_ceil(4) * 4;

/// The board's SPI master and handshake lines.
pub trait SpiHw {
    /// Transfers `tx`; `keep_cs` keeps CS asserted after it. With `rx` (`rx.len() == tx.len()`):
    /// full duplex at the upstream clock (<= 7.2 MHz, MISO read). Without: transmit only at the
    /// downstream clock (up to 30 MHz), MISO not sampled.
    fn transfer(
        &mut self,
        tx: &[u8],
        rx: Option<&mut [u8]>,
        keep_cs: bool,
    ) -> Result<(), LinkError>;
    /// Drives the GAP8's ready-to-talk line.
    fn set_gap_rtt(&mut self, high: bool);
    /// Takes one pending rising edge of the ESP32's ready line (never blocks).
    fn take_esp_edge(&mut self) -> bool;
    /// Waits up to `timeout_us` for a rising edge of the ESP32's ready line and takes it.
    fn wait_esp_edge(&mut self, timeout_us: u32) -> bool;
    /// A free-running timer (for the entropy pool's timing input).
    fn stamp(&self) -> u32;
}

/// Why the link failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// The ESP32 did not raise its ready line within the timeout (not running, or stalled).
    Timeout,
    /// The SPI driver refused the transfer.
    Spi,
    /// `send` was given bytes that are not whole CPX packets.
    NotAPacket,
}

impl core::fmt::Display for LinkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LinkError::Timeout => f.write_str("the ESP32 did not signal ready (timeout)"),
            LinkError::Spi => f.write_str("SPI transfer failed"),
            LinkError::NotAPacket => f.write_str("not a whole CPX packet"),
        }
    }
}

/// Counters of the link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub transactions: u64,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Bytes clocked on the SPI bus (both parts of every transaction).
    pub bytes_clocked: u64,
    /// Received lengths outside 2..=MTU (noise on the bus, an ESP32 in reset): ignored.
    pub bad_rx_lengths: u64,
    /// Received packets dropped because the receive queue was full.
    pub rx_dropped: u64,
    pub timeouts: u64,
    /// Timer cycles spent waiting for the ESP32's ready line (sends only).
    pub wait_cycles: u64,
    /// Timer cycles spent in SPI transfers (both parts).
    pub transfer_cycles: u64,
    /// Bytes clocked at the upstream clock (MISO read) / at the downstream clock (transmit only).
    pub bytes_up_clock: u64,
    pub bytes_down_clock: u64,
    /// Timer cycles from raising the ready line for a packet to the end of its transaction.
    pub send_cycles: u64,
}

/// The link.
pub struct CpxSpiLink<H: SpiHw> {
    hw: H,
    tx: Vec<u8>,
    rx: Vec<u8>,
    /// Received CPX wire packets not yet read by `poll_recv`.
    inbox: VecDeque<u8>,
    inbox_limit: usize,
    timeout_us: u32,
    pool: Option<SharedPool>,
    stats: LinkStats,
    /// `poll_recv` returns nothing while set (see [`WaitUpstream::defer_upstream`]).
    deferred: bool,
}

/// The padded size of the second part of a transaction for the two length fields.
pub fn second_part_len(tx_len: u16, rx_len: u16) -> usize {
    let need = (tx_len.max(rx_len) as usize + 2).saturating_sub(HEADER_PART);
    need.div_ceil(4).max(1) * 4
}

impl<H: SpiHw> CpxSpiLink<H> {
    /// `timeout_us`: how long a send waits for the ESP32's ready line.
    pub fn new(hw: H, timeout_us: u32, pool: Option<SharedPool>) -> Self {
        CpxSpiLink {
            hw,
            tx: vec![0u8; BUFFER_LEN],
            rx: vec![0u8; BUFFER_LEN],
            inbox: VecDeque::with_capacity(2 * BUFFER_LEN),
            inbox_limit: 16 * 1024,
            timeout_us,
            pool,
            stats: LinkStats::default(),
            deferred: false,
        }
    }

    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    pub fn hw(&self) -> &H {
        &self.hw
    }

    pub fn hw_mut(&mut self) -> &mut H {
        &mut self.hw
    }

    fn note_edge(&mut self) {
        if let Some(p) = &self.pool {
            p.borrow_mut().absorb_timing(self.hw.stamp());
        }
    }

    /// One transaction carrying `packet` (a whole CPX wire packet, or empty: only receive).
    /// The ESP32 must be armed: for a send the GAP8 raises its line and waits for the ESP32's
    /// edge; for a receive the caller has taken the edge already.
    fn transaction(&mut self, packet: &[u8]) -> Result<(), LinkError> {
        let t_start = self.hw.stamp();
        // The link's own transmit buffer, out of `self` for the call (no allocation: an empty Vec
        // takes its place).
        let mut tx = core::mem::take(&mut self.tx);
        tx[..packet.len()].copy_from_slice(packet);
        if packet.is_empty() {
            tx[..2].fill(0);
        }
        let r = self.clock_transaction(&tx, !packet.is_empty(), t_start);
        self.tx = tx;
        r
    }

    /// One transaction clocking `tx`: a CPX wire packet at its start (or a zero length: only
    /// receive) followed by padding, at least [`BUFFER_LEN`] bytes (a packet's transaction clocks
    /// up to its length rounded up to 4; the padding bytes are whatever `tx` holds there).
    fn clock_transaction(
        &mut self,
        tx: &[u8],
        sending: bool,
        t_start: u32,
    ) -> Result<(), LinkError> {
        let tx = &tx[..BUFFER_LEN];
        self.rx[..HEADER_PART].fill(0);
        if sending {
            let t0 = self.hw.stamp();
            self.hw.set_gap_rtt(true);
            if !self.hw.take_esp_edge() && !self.hw.wait_esp_edge(self.timeout_us) {
                self.hw.set_gap_rtt(false);
                self.stats.timeouts += 1;
                return Err(LinkError::Timeout);
            }
            self.stats.wait_cycles += self.hw.stamp().wrapping_sub(t0) as u64;
            self.note_edge();
        }
        let t1 = self.hw.stamp();
        // The lengths: always read (MISO), so at the upstream clock.
        self.hw
            .transfer(&tx[..HEADER_PART], Some(&mut self.rx[..HEADER_PART]), true)
            .inspect_err(|_| self.hw.set_gap_rtt(false))?;
        let tx_len = cpx::length_field(tx).unwrap_or(0);
        let mut rx_len = cpx::length_field(&self.rx).unwrap_or(0);
        if rx_len != 0 && !(2..=MTU as u16).contains(&rx_len) {
            // Not a length the ESP32 sends: clock only what we send, drop what came in.
            self.stats.bad_rx_lengths += 1;
            rx_len = 0;
        }
        let rest = second_part_len(tx_len, rx_len);
        self.hw.set_gap_rtt(false);
        let end = HEADER_PART + rest;
        if rx_len > 0 {
            // A packet for the GAP8: the rest at the upstream clock.
            self.hw.transfer(
                &tx[HEADER_PART..end],
                Some(&mut self.rx[HEADER_PART..end]),
                false,
            )?;
            self.stats.bytes_up_clock += end as u64;
        } else {
            // Nothing comes back: the rest at the downstream clock, MISO ignored.
            self.hw.transfer(&tx[HEADER_PART..end], None, false)?;
            self.stats.bytes_up_clock += HEADER_PART as u64;
            self.stats.bytes_down_clock += rest as u64;
        }
        self.stats.transfer_cycles += self.hw.stamp().wrapping_sub(t1) as u64;
        self.stats.transactions += 1;
        self.stats.bytes_clocked += end as u64;
        if sending {
            self.stats.packets_sent += 1;
            self.stats.send_cycles += self.hw.stamp().wrapping_sub(t_start) as u64;
        }
        if rx_len > 0 {
            let n = 2 + rx_len as usize;
            if self.inbox.len() + n > self.inbox_limit {
                self.stats.rx_dropped += 1;
            } else {
                self.inbox.extend(&self.rx[..n]);
                self.stats.packets_received += 1;
            }
        }
        Ok(())
    }

    /// Serves the transactions the ESP32 has armed (it has packets for the GAP8), at most
    /// [`MAX_DRAIN`] per call so a misbehaving ESP32 cannot keep the GAP8 from its frames.
    fn drain_esp(&mut self) -> Result<(), LinkError> {
        for _ in 0..MAX_DRAIN {
            if !self.hw.take_esp_edge() {
                break;
            }
            self.note_edge();
            self.transaction(&[])?;
        }
        Ok(())
    }

    /// Sends one whole CPX wire packet (checked) in one transaction.
    pub fn send_packet(&mut self, p: &[u8]) -> Result<(), LinkError> {
        match cpx::packet_len(p) {
            Ok(Some(n)) if n == p.len() => self.transaction(p),
            _ => Err(LinkError::NotAPacket),
        }
    }

    /// Sends the CPX wire packet at the start of `buf` (checked) straight from `buf`, which is at
    /// least [`BUFFER_LEN`] bytes long (the link task's ring slots): no copy into the link's own
    /// buffer.
    pub fn send_padded(&mut self, buf: &[u8]) -> Result<(), LinkError> {
        if buf.len() < BUFFER_LEN {
            return Err(LinkError::NotAPacket);
        }
        if !matches!(cpx::packet_len(buf), Ok(Some(_))) {
            return Err(LinkError::NotAPacket);
        }
        let t_start = self.hw.stamp();
        self.clock_transaction(buf, true, t_start)
    }

    /// Serves one transaction the ESP32 armed on its own (it has a packet for the GAP8), if any.
    /// Returns whether there was one.
    pub fn serve_esp(&mut self) -> Result<bool, LinkError> {
        if !self.hw.take_esp_edge() {
            return Ok(false);
        }
        self.note_edge();
        self.transaction(&[])?;
        Ok(true)
    }

    /// Moves the received CPX wire bytes out (at most `buf.len()`), returning how many.
    pub fn take_received(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.inbox.len());
        for (d, s) in buf.iter_mut().zip(self.inbox.drain(..n)) {
            *d = s;
        }
        n
    }

    /// Received bytes not yet taken.
    pub fn received_len(&self) -> usize {
        self.inbox.len()
    }

    /// Waits up to `timeout_us` for the ESP32 to signal that it has something for the GAP8, and
    /// reads it. Returns whether anything was read.
    pub fn wait_upstream(&mut self, timeout_us: u32) -> Result<bool, LinkError> {
        if !self.inbox.is_empty() {
            return Ok(true);
        }
        if !self.hw.take_esp_edge() && !self.hw.wait_esp_edge(timeout_us) {
            return Ok(false);
        }
        self.note_edge();
        self.transaction(&[])?;
        self.drain_esp()?;
        Ok(!self.inbox.is_empty())
    }
}

impl<H: SpiHw> Link for CpxSpiLink<H> {
    type Error = LinkError;

    fn send(&mut self, packets: &[u8]) -> Result<(), LinkError> {
        let mut rest = packets;
        while !rest.is_empty() {
            let n = match cpx::packet_len(rest) {
                Ok(Some(n)) if n <= rest.len() => n,
                _ => return Err(LinkError::NotAPacket),
            };
            let (p, r) = rest.split_at(n);
            self.send_packet(p)?;
            rest = r;
        }
        Ok(())
    }

    fn poll_recv(&mut self, buf: &mut [u8]) -> Result<usize, LinkError> {
        if self.deferred {
            return Ok(0);
        }
        if self.inbox.is_empty() {
            self.drain_esp()?;
        }
        let n = buf.len().min(self.inbox.len());
        for (d, s) in buf.iter_mut().zip(self.inbox.drain(..n)) {
            *d = s;
        }
        Ok(n)
    }
}

/// What the app needs from the link beyond `Link`.
pub trait WaitUpstream {
    /// Sleeps until the receiver says something (instead of spinning on `poll_recv`).
    fn wait_upstream_us(&mut self, timeout_us: u32) -> bool;
    /// While on, `poll_recv` hands out nothing: what arrives is kept for later (the per-frame step
    /// runs on a small stack that a handshake would overflow).
    fn defer_upstream(&mut self, _on: bool) {}
    /// Timer cycles the link has spent sending packets so far (ready line raised to end of
    /// transaction), when it measures them.
    fn link_send_cycles(&self) -> Option<u64> {
        None
    }
}

impl<H: SpiHw> WaitUpstream for CpxSpiLink<H> {
    fn wait_upstream_us(&mut self, timeout_us: u32) -> bool {
        self.wait_upstream(timeout_us).unwrap_or(false)
    }
    fn defer_upstream(&mut self, on: bool) {
        self.deferred = on;
    }
    fn link_send_cycles(&self) -> Option<u64> {
        Some(self.stats.send_cycles)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use esp32_bridge::forward::{Bridge, Config, Transport};
    use esp32_bridge::spi_slave::SpiSlave;
    use gapstream_protocol::cpx::{self, Route, StreamDecoder, Target};
    use proptest::prelude::*;

    /// The ESP32 end of the SPI bus, running esp32_bridge's SPI-slave logic and forwarding core
    /// (what the ESP-IDF firmware and the GVSOC stand-in run), with protocol checks on what the
    /// GAP8 side does.
    /// The WiFi side of [`EspModel`]: a receiver reading from and writing to the bridge.
    pub type WifiSide = Box<dyn FnMut(&mut Bridge)>;

    pub struct EspModel {
        pub bridge: Bridge,
        pub slave: SpiSlave,
        esp_tx: Vec<u8>,
        esp_rx: Vec<u8>,
        pos: usize,
        armed: bool,
        gap_rtt: bool,
        gap_edge: bool,
        edges: u32,
        in_transaction: bool,
        first_part_done: bool,
        pub violations: Vec<String>,
        /// The ESP32 does not answer at all (powered off).
        pub dead: bool,
        pub transfers: Vec<(usize, bool)>,
        /// Per transfer: at the downstream clock (transmit only)?
        pub fast: Vec<bool>,
        pub clock: u32,
        /// The WiFi side: called whenever the ESP32's task runs (a receiver reading and answering).
        pub wifi: Option<WifiSide>,
    }

    impl EspModel {
        pub fn new() -> Self {
            EspModel {
                bridge: Bridge::new(Config::default()),
                slave: SpiSlave::new(),
                esp_tx: vec![0; esp32_bridge::spi_slave::BUFFER_LEN],
                esp_rx: vec![0; esp32_bridge::spi_slave::BUFFER_LEN],
                pos: 0,
                armed: false,
                gap_rtt: false,
                gap_edge: false,
                edges: 0,
                in_transaction: false,
                first_part_done: false,
                violations: Vec::new(),
                dead: false,
                transfers: Vec::new(),
                fast: Vec::new(),
                clock: 0,
                wifi: None,
            }
        }

        /// The ESP32's SPI task: arm when the GAP8 asked or a packet waits for it.
        pub fn run_esp(&mut self) {
            if self.dead {
                return;
            }
            if let Some(w) = self.wifi.as_mut() {
                w(&mut self.bridge);
            }
            if self.armed {
                return;
            }
            if self.slave.should_arm(&self.bridge, self.gap_edge) {
                self.gap_edge = false;
                self.slave.arm(&mut self.bridge, &mut self.esp_tx);
                self.esp_rx.fill(0);
                self.pos = 0;
                self.armed = true;
                self.edges += 1;
            }
        }
    }

    impl SpiHw for EspModel {
        fn transfer(
            &mut self,
            tx: &[u8],
            mut rx: Option<&mut [u8]>,
            keep_cs: bool,
        ) -> Result<(), LinkError> {
            self.transfers.push((tx.len(), keep_cs));
            self.fast.push(rx.is_none());
            if tx.len() % 4 != 0 || rx.as_ref().is_some_and(|r| r.len() != tx.len()) {
                self.violations
                    .push(format!("transfer of {} bytes", tx.len()));
            }
            if !self.in_transaction {
                self.in_transaction = true;
                self.first_part_done = false;
                if !self.armed {
                    self.violations
                        .push("transfer while the ESP32 is not armed".into());
                }
                if rx.is_none() {
                    self.violations
                        .push("the lengths were not read at the upstream clock".into());
                }
            }
            if self.first_part_done && self.gap_rtt {
                self.violations
                    .push("GAP8 ready line still high in the second part".into());
            }
            // The bytes of the ESP32's packet: they must be read at the upstream clock.
            let esp_len = if self.armed {
                2 + cpx::length_field(&self.esp_tx).map_or(0, usize::from)
            } else {
                0
            };
            if rx.is_none() && esp_len > 2 && self.pos < esp_len {
                self.violations.push(format!(
                    "bytes {}..{} of the ESP32's packet clocked at the downstream clock (MISO ignored): lost",
                    self.pos,
                    esp_len.min(self.pos + tx.len())
                ));
            }
            for (i, t) in tx.iter().enumerate() {
                let at = self.pos + i;
                if let Some(r) = rx.as_deref_mut() {
                    r[i] = if self.armed && at < self.esp_tx.len() {
                        self.esp_tx[at]
                    } else {
                        0xFF
                    };
                }
                if at < self.esp_rx.len() {
                    self.esp_rx[at] = *t;
                }
            }
            self.pos += tx.len();
            self.first_part_done = true;
            if !keep_cs {
                self.in_transaction = false;
                if self.armed {
                    self.armed = false;
                    let n = self.pos.min(self.esp_rx.len());
                    let rx = self.esp_rx[..n].to_vec();
                    let _ = self.slave.complete(&mut self.bridge, &rx);
                }
                self.run_esp();
            }
            Ok(())
        }
        fn set_gap_rtt(&mut self, high: bool) {
            if high && !self.gap_rtt {
                self.gap_edge = true;
            }
            self.gap_rtt = high;
            self.run_esp();
        }
        fn take_esp_edge(&mut self) -> bool {
            self.run_esp();
            if self.edges > 0 {
                self.edges -= 1;
                true
            } else {
                false
            }
        }
        fn wait_esp_edge(&mut self, _timeout_us: u32) -> bool {
            self.take_esp_edge()
        }
        fn stamp(&self) -> u32 {
            self.clock
        }
    }

    fn packets_of(route: Route, msg: &[u8], payload: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut p =
            cpx::Packetizer::new(route, [msg, &[], &[]], payload, cpx::LastFlag::Final).unwrap();
        let mut buf = [0u8; 1100];
        while let Some(n) = p.next_packet(&mut buf) {
            out.extend_from_slice(&buf[..n.unwrap()]);
        }
        out
    }

    #[test]
    fn transaction_sizes_follow_the_stock_protocol() {
        assert_eq!(second_part_len(0, 0), 4);
        assert_eq!(second_part_len(2 + 1020, 0), 1020);
        assert_eq!(second_part_len(5, 0), 4);
        assert_eq!(second_part_len(7, 3), 8);
        assert_eq!(second_part_len(0, 1022), 1020);
        assert_eq!(BUFFER_LEN, 1024);
    }

    /// The bridge tells the GAP8 "client connected" (WIFI_CTRL `[0x32, 1]`) when a client is
    /// added: the first bytes the drone reads. Checks it and returns what follows.
    fn after_client_status(rx: &[u8]) -> &[u8] {
        const STATUS: [u8; 6] = [4, 0, 4 | 2 << 3 | 1 << 6, 4, 0x32, 1];
        assert_eq!(rx.get(..6), Some(&STATUS[..]), "client status first");
        &rx[6..]
    }

    #[test]
    fn packets_reach_a_client_of_the_bridge_and_upstream_reaches_the_drone() {
        let mut link = CpxSpiLink::new(EspModel::new(), 1000, None);
        let client = link.hw_mut().bridge.add_client(Transport::Tcp).unwrap();
        let down = Route::new(Target::Gap8, Target::WifiHost, cpx::GAPSTREAM_FUNCTION);
        let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let wire = packets_of(down, &msg, 1020);
        link.send(&wire).unwrap();
        assert!(
            link.hw().violations.is_empty(),
            "{:?}",
            link.hw().violations
        );
        assert_eq!(link.stats().packets_sent, 5);
        // Every transaction: 4 bytes with CS held, then the rest.
        for pair in link.hw().transfers.chunks(2) {
            assert_eq!(pair[0], (4, true));
            assert!(!pair[1].1);
        }
        let mut got = Vec::new();
        while let Some((b, r)) = link.hw_mut().bridge.next_for_client(client) {
            got.extend_from_slice(&b[r.clone()]);
            link.hw_mut().bridge.client_sent(client, r.len());
        }
        assert_eq!(got, wire, "the client gets the packets as sent");

        // The receiver answers: its message reaches the GAP8 through poll_recv.
        let up = Route::new(Target::WifiHost, Target::Gap8, cpx::GAPSTREAM_FUNCTION);
        let answer = packets_of(up, &[9u8; 1500], 1020);
        link.hw_mut()
            .bridge
            .client_received(client, &answer)
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut rx = Vec::new();
        for _ in 0..4 {
            let n = link.poll_recv(&mut buf).unwrap();
            rx.extend_from_slice(&buf[..n]);
        }
        assert_eq!(after_client_status(&rx), &answer[..]);
        assert!(
            link.hw().violations.is_empty(),
            "{:?}",
            link.hw().violations
        );
    }

    #[test]
    fn a_silent_esp32_times_out_and_lowers_the_line() {
        let mut m = EspModel::new();
        m.dead = true;
        let mut link = CpxSpiLink::new(m, 10, None);
        let wire = packets_of(
            Route::new(Target::Gap8, Target::WifiHost, cpx::GAPSTREAM_FUNCTION),
            b"x",
            1020,
        );
        assert_eq!(link.send(&wire), Err(LinkError::Timeout));
        assert!(!link.hw().gap_rtt);
        assert_eq!(link.stats().timeouts, 1);
        assert!(link.hw().transfers.is_empty());
    }

    #[test]
    fn garbage_lengths_from_the_bus_are_ignored() {
        struct Noisy(u8, Vec<usize>);
        impl SpiHw for Noisy {
            fn transfer(
                &mut self,
                tx: &[u8],
                rx: Option<&mut [u8]>,
                _k: bool,
            ) -> Result<(), LinkError> {
                if let Some(rx) = rx {
                    rx.fill(self.0);
                }
                self.1.push(tx.len());
                Ok(())
            }
            fn set_gap_rtt(&mut self, _: bool) {}
            fn take_esp_edge(&mut self) -> bool {
                true
            }
            fn wait_esp_edge(&mut self, _: u32) -> bool {
                true
            }
            fn stamp(&self) -> u32 {
                0
            }
        }
        // A bus stuck high reads length 0xFFFF: nothing is queued, only 4 + 4 bytes are clocked.
        let mut link = CpxSpiLink::new(Noisy(0xFF, Vec::new()), 10, None);
        let mut buf = [0u8; 64];
        assert_eq!(link.wait_upstream(10), Ok(false));
        assert_eq!(link.poll_recv(&mut buf).unwrap_or(1), 0);
        assert!(link.stats().bad_rx_lengths >= 1);
        assert!(link.hw().1.iter().all(|&n| n == 4));
    }

    #[test]
    fn partial_or_oversized_packets_are_refused() {
        let mut link = CpxSpiLink::new(EspModel::new(), 10, None);
        assert_eq!(link.send(&[5]), Err(LinkError::NotAPacket));
        assert_eq!(link.send(&[10, 0, 1, 2]), Err(LinkError::NotAPacket));
        assert_eq!(link.send(&[0xFF, 0x03, 0, 0]), Err(LinkError::NotAPacket));
        // Straight from a ring slot: the slot must be a whole buffer, the length a packet's.
        assert_eq!(
            link.send_padded(&[4, 0, 1, 2, 3, 4]),
            Err(LinkError::NotAPacket)
        );
        let mut slot = vec![0u8; BUFFER_LEN];
        slot[..2].copy_from_slice(&(MTU as u16 + 1).to_le_bytes());
        assert_eq!(link.send_padded(&slot), Err(LinkError::NotAPacket));
        assert_eq!(link.stats().transactions, 0);
    }

    /// A packet sent from a padded slot clocks the same bytes as one sent by `send`.
    #[test]
    fn a_packet_from_a_slot_is_the_same_transaction_as_a_copied_one() {
        let route = Route::new(Target::Gap8, Target::WifiHost, cpx::GAPSTREAM_FUNCTION);
        let w = packets_of(route, &[0xA5; 700], 1020);
        let mut a = CpxSpiLink::new(EspModel::new(), 1000, None);
        let ca = a.hw_mut().bridge.add_client(Transport::Tcp).unwrap();
        a.send(&w).unwrap();
        let mut b = CpxSpiLink::new(EspModel::new(), 1000, None);
        let cb = b.hw_mut().bridge.add_client(Transport::Tcp).unwrap();
        let mut slot = vec![0x5Au8; BUFFER_LEN];
        slot[..w.len()].copy_from_slice(&w);
        b.send_padded(&slot).unwrap();
        assert_eq!(a.stats().bytes_clocked, b.stats().bytes_clocked);
        assert_eq!(b.stats().packets_sent, 1);
        fn output(l: &mut CpxSpiLink<EspModel>, c: esp32_bridge::forward::ClientId) -> Vec<u8> {
            let mut got = Vec::new();
            while let Some((b, r)) = l.hw_mut().bridge.next_for_client(c) {
                got.extend_from_slice(&b[r.clone()]);
                l.hw_mut().bridge.client_sent(c, r.len());
            }
            got
        }
        assert_eq!(output(&mut a, ca), w);
        assert_eq!(output(&mut b, cb), w);
        assert!(b.hw().violations.is_empty(), "{:?}", b.hw().violations);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
        /// Any message sizes and packet sizes, both directions interleaved: bytes arrive intact
        /// and the transactions always respect the protocol.
        #[test]
        fn both_directions_interleaved(down in proptest::collection::vec(0usize..3000, 1..5),
                                       up in proptest::collection::vec(1usize..2500, 0..4),
                                       payload in prop_oneof![Just(128usize), Just(1020), 1usize..1020]) {
            let mut link = CpxSpiLink::new(EspModel::new(), 10, None);
            let client = link.hw_mut().bridge.add_client(Transport::Tcp).unwrap();
            let dr = Route::new(Target::Gap8, Target::WifiHost, cpx::GAPSTREAM_FUNCTION);
            let ur = Route::new(Target::WifiHost, Target::Gap8, cpx::GAPSTREAM_FUNCTION);
            let mut sent_down = Vec::new();
            let mut sent_up = Vec::new();
            let mut got_up = Vec::new();
            let mut buf = vec![0u8; 700];
            for (i, n) in down.iter().enumerate() {
                if let Some(u) = up.get(i) {
                    let w = packets_of(ur, &vec![i as u8; *u], 1020);
                    link.hw_mut().bridge.client_received(client, &w).unwrap();
                    sent_up.extend_from_slice(&w);
                }
                let w = packets_of(dr, &vec![(i + 100) as u8; *n], payload);
                link.send(&w).unwrap();
                sent_down.extend_from_slice(&w);
                let k = link.poll_recv(&mut buf).unwrap();
                got_up.extend_from_slice(&buf[..k]);
            }
            loop {
                let k = link.poll_recv(&mut buf).unwrap();
                if k == 0 { break; }
                got_up.extend_from_slice(&buf[..k]);
            }
            prop_assert!(link.hw().violations.is_empty(), "{:?}", link.hw().violations);
            prop_assert_eq!(after_client_status(&got_up), &sent_up[..]);
            let mut got_down = Vec::new();
            while let Some((b, r)) = link.hw_mut().bridge.next_for_client(client) {
                got_down.extend_from_slice(&b[r.clone()]);
                link.hw_mut().bridge.client_sent(client, r.len());
            }
            // The bridge regroups packets into messages; compare the decoded packet payloads.
            let decode = |b: &[u8]| {
                let mut d = StreamDecoder::new();
                let mut input = b;
                let mut out = Vec::new();
                while let Some(p) = d.decode(&mut input) { out.push(p.unwrap().payload.to_vec()); }
                out
            };
            prop_assert_eq!(decode(&got_down), decode(&sent_down));
        }
    }
}
