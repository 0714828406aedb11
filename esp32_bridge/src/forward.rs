//! The forwarding core, sans I/O: what the ESP32 does between its SPI link to the GAP8 and its
//! WiFi clients, as a state machine that the host binary (tokio sockets) and the ESP-IDF glue
//! (`esp-idf/`: FreeRTOS tasks) drive the same way:
//!
//! - bytes from the GAP8 → [`Bridge::spi_received`] → whole messages queued for every client;
//! - bytes / datagrams from a client → [`Bridge::client_received`] / [`Bridge::client_datagram`] →
//!   whole messages queued for the GAP8 (never interleaved with another client's message);
//! - the drivers take work with [`Bridge::next_for_client`] / [`Bridge::next_for_spi`], write it
//!   without holding the core, and report with [`Bridge::client_sent`] / [`Bridge::spi_sent`].
//!
//! Queues are bounded in bytes. When a client is slow, whole frame messages are dropped for that
//! client only (the oldest one not being written), never part of a message and never by blocking the
//! SPI side or the other clients: the stock firmware's stall does not happen here.
//! Control messages (handshake, group keys, keepalives) are kept in preference to frames.
//! The bridge holds no key and never reads past the CPX routing header and the gapstream message
//! type byte.
//!
//! Client status and the stock stream, as Bitcraze's AI-deck ESP32 firmware does it: when a client
//! connects or leaves, the core queues `WIFI_CTRL_STATUS_CLIENT_CONNECTED` (`[0x32, 1]` while any
//! client is connected, `[0x32, 0]` when the last one left) for the GAP8 on function WIFI_CTRL,
//! again after every GAP8 link reset; the stock GAP8 streamer only sends while a client is there.
//! A client that joins while a stock image (function APP) is under way gets nothing of that stream
//! until the next 11-byte `0xBC` header packet, and a client that lost part of a stock image (slow
//! client) loses the rest of that image too: a stock viewer reads whatever comes first as a header.
//!
//! Several receivers (a leader and listeners): every message from the GAP8 goes to every client —
//! frames are sealed once for the whole group, and each receiver skips the handshake and control
//! messages addressed to another receiver's session — and every client's messages go to the GAP8,
//! each forwarded whole (a message from one client is never interleaved with another's), which is
//! what lets each receiver run its own handshake with the drone.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ops::Range;

use crate::cpx::{self, CpxError, MessageAssembler, Route, WireMessage};
use gapstream_protocol::compat;

/// A client's identifier (never reused while the bridge runs).
pub type ClientId = u32;

/// How a client is connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A byte stream: CPX packets back to back, like the stock firmware's port 5000.
    Tcp,
    /// One CPX packet per datagram.
    Udp,
}

/// Whose upstream messages reach the GAP8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamPolicy {
    /// Every client's (each message forwarded whole): what gapstream's secure stream needs, since
    /// every receiver runs its own handshake with the drone.
    All,
    /// Only the leader's (the oldest connected client); listeners only receive — useful only for
    /// the stock plaintext stream (a secure listener could not handshake).
    LeaderOnly,
}

/// Limits and policies.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Bytes queued per client before frames are dropped for it (default: 4 raw 324×244 frames).
    pub client_queue_bytes: usize,
    /// Extra room per client for control messages once frames fill the queue.
    pub control_reserve_bytes: usize,
    /// Bytes queued towards the GAP8.
    pub spi_queue_bytes: usize,
    /// Largest message reassembled (both directions).
    pub max_message: usize,
    /// Most TCP clients at once.
    pub max_clients: usize,
    /// Most UDP clients at once: separate slots, so that neither transport can take all of them
    /// (a UDP client costs its sender one datagram, a TCP client a handshake).
    pub max_udp_clients: usize,
    pub upstream: UpstreamPolicy,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            client_queue_bytes: 4 * 82_000,
            control_reserve_bytes: 16 * 1024,
            spi_queue_bytes: 32 * 1024,
            max_message: 128 * 1024,
            max_clients: 8,
            max_udp_clients: 4,
            upstream: UpstreamPolicy::All,
        }
    }
}

/// Why the core refused something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BridgeError {
    TooManyClients,
    UnknownClient(ClientId),
    Cpx(CpxError),
}

impl core::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BridgeError::TooManyClients => f.write_str("too many clients"),
            BridgeError::UnknownClient(id) => write!(f, "unknown client {id}"),
            BridgeError::Cpx(e) => write!(f, "{e}"),
        }
    }
}

/// A queued message, shared by all the clients it goes to.
#[derive(Clone, Debug)]
pub struct Message {
    pub bytes: Arc<[u8]>,
    pub packets: u32,
    pub first: Route,
    /// Frames may be dropped for a slow client; control messages are kept when possible.
    pub droppable: bool,
    /// Part of the stock image stream (function APP).
    pub stock: bool,
    /// The 11-byte `0xBC` packet that starts a stock image.
    pub stock_header: bool,
}

impl Message {
    fn from_wire(w: WireMessage) -> Self {
        let droppable = is_droppable(&w);
        let stock = w.first.function == gapstream_protocol::cpx::Function::App as u8;
        let stock_header = w.packets == 1
            && compat::is_stock_header_packet(
                w.first,
                w.bytes.get(cpx::WIRE_OVERHEAD..).unwrap_or(&[]),
            );
        Message {
            droppable,
            stock,
            stock_header,
            bytes: Arc::from(w.bytes),
            packets: w.packets,
            first: w.first,
        }
    }
}

/// Frames may be dropped for a slow client, control messages (handshake, rekey, alerts) should not.
/// Told apart without any key: a gapstream message starts with `"GS" 01 <type>` and type `0x10` is
/// a frame (`gapstream_protocol::wire`); the stock image stream (function APP) is all frame data;
/// anything else longer than one packet is treated as a frame.
fn is_droppable(w: &WireMessage) -> bool {
    let payload = w.bytes.get(cpx::WIRE_OVERHEAD..).unwrap_or(&[]);
    let gs = gapstream_protocol::wire::MAGIC;
    if w.first.function == gapstream_protocol::cpx::GAPSTREAM_FUNCTION as u8
        && payload.len() >= 4
        && payload[..2] == gs
    {
        return payload[3] == gapstream_protocol::wire::MsgType::Frame as u8;
    }
    w.first.function == gapstream_protocol::cpx::Function::App as u8 || w.packets > 1
}

/// Counters of one client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    pub messages_queued: u64,
    pub messages_sent: u64,
    pub frames_dropped: u64,
    pub control_dropped: u64,
    pub bytes_sent: u64,
    pub malformed: u64,
    pub upstream_messages: u64,
    /// Stock image packets not sent to this client because it joined (or lost data) in the middle
    /// of an image: it starts at the next `0xBC` header.
    pub stock_skipped: u64,
}

/// Counters of the bridge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BridgeStats {
    pub spi_messages: u64,
    pub spi_malformed: u64,
    pub spi_bytes_in: u64,
    pub upstream_dropped: u64,
    pub upstream_refused: u64,
    pub clients_connected: u64,
    pub clients_left: u64,
    /// Times the GAP8 side (re)started its link (`spi_reset`): a host waits on it before clients
    /// talk to the drone, since a reset drops what was queued for the GAP8.
    pub spi_resets: u64,
    /// Client-status notifications queued for the GAP8 (connect, last disconnect, link reset).
    pub client_status_sent: u64,
    /// Frames dropped for slow clients, over all clients (also those that left since).
    pub frames_dropped: u64,
}

struct Client {
    id: ClientId,
    transport: Transport,
    queue: VecDeque<Message>,
    queued_bytes: usize,
    /// Bytes (TCP) or packets (UDP) of the head message already handed to the driver.
    head_progress: usize,
    rx: MessageAssembler,
    stats: ClientStats,
    /// The client gets stock packets (false until the next `0xBC` header packet).
    stock_synced: bool,
}

impl Client {
    fn head_in_flight(&self) -> bool {
        self.head_progress > 0
    }

    /// Queues `m`, dropping whole frames (oldest first, never the one being written) to make room.
    fn offer(&mut self, m: &Message, cap: usize, reserve: usize) {
        if m.stock {
            return self.offer_stock(m, cap);
        }
        let size = m.bytes.len();
        let limit = if m.droppable { cap } else { cap + reserve };
        while self.queued_bytes + size > limit {
            let start = usize::from(self.head_in_flight());
            // Stock packets go as whole images only (`offer_stock`).
            let victim = (start..self.queue.len())
                .find(|&i| self.queue[i].droppable && !self.queue[i].stock);
            match victim {
                Some(i) => {
                    let v = self.queue.remove(i).expect("index in range");
                    self.queued_bytes -= v.bytes.len();
                    self.stats.frames_dropped += 1;
                }
                None => {
                    if m.droppable {
                        self.stats.frames_dropped += 1;
                    } else {
                        self.stats.control_dropped += 1;
                    }
                    return;
                }
            }
        }
        self.queued_bytes += size;
        self.queue.push_back(m.clone());
        self.stats.messages_queued += 1;
    }

    /// A packet of the stock image stream (one CPX packet per message, an image = an 11-byte
    /// `0xBC` header packet and the packets of its pixels). A stock viewer cannot resynchronise:
    /// it reads whatever follows an image as the next header. So images go whole or not at all:
    /// to make room the oldest queued image that has not started going out is dropped whole; an
    /// image that cannot be queued is dropped whole (its queued packets too) while none of it
    /// went out; and an image that started going out is never cut (the queue then holds up to
    /// the rest of that one image beyond its bound). Each dropped image counts once in
    /// `frames_dropped`, its packets in `stock_skipped`.
    fn offer_stock(&mut self, m: &Message, cap: usize) {
        if m.stock_header {
            self.stock_synced = true;
        } else if !self.stock_synced {
            self.stats.stock_skipped += 1;
            return;
        }
        let size = m.bytes.len();
        while self.queued_bytes + size > cap && self.drop_oldest_unstarted_stock_image(false) {}
        if self.queued_bytes + size > cap {
            if m.stock_header {
                // This image never starts for this client.
                self.stats.frames_dropped += 1;
                self.stats.stock_skipped += 1;
                self.stock_synced = false;
                return;
            }
            if self.drop_oldest_unstarted_stock_image(true) {
                // The image `m` belongs to had not started: it went whole, `m` goes with it.
                self.stats.stock_skipped += 1;
                self.stock_synced = false;
                return;
            }
            // The image is going out: its rest is queued beyond the bound.
        }
        self.queued_bytes += size;
        self.queue.push_back(m.clone());
        self.stats.messages_queued += 1;
    }

    /// Drops the oldest queued stock image none of which went out yet: from its header up to the
    /// next queued header, or (`open`) the last one, still being received. False when none.
    fn drop_oldest_unstarted_stock_image(&mut self, open: bool) -> bool {
        let start = usize::from(self.head_in_flight());
        let headers: Vec<usize> = (start..self.queue.len())
            .filter(|&i| self.queue[i].stock_header)
            .collect();
        let range = match (headers.first(), headers.get(1)) {
            (Some(&a), Some(&b)) if !open => a..b,
            (Some(&a), None) if open => a..self.queue.len(),
            _ => return false,
        };
        let mut i = range.start;
        let mut end = range.end;
        while i < end {
            if self.queue[i].stock {
                let v = self.queue.remove(i).expect("index in range");
                self.queued_bytes -= v.bytes.len();
                self.stats.stock_skipped += 1;
                end -= 1;
            } else {
                i += 1;
            }
        }
        self.stats.frames_dropped += 1;
        true
    }
}

/// The whole forwarding state. Single-threaded: drivers share it behind one lock.
pub struct Bridge {
    cfg: Config,
    clients: Vec<Client>,
    next_id: ClientId,
    spi_rx: MessageAssembler,
    to_spi: VecDeque<Message>,
    to_spi_bytes: usize,
    spi_head_progress: usize,
    stats: BridgeStats,
}

impl Bridge {
    pub fn new(cfg: Config) -> Self {
        Bridge {
            cfg,
            clients: Vec::new(),
            next_id: 1,
            spi_rx: MessageAssembler::new(cfg.max_message),
            to_spi: VecDeque::new(),
            to_spi_bytes: 0,
            spi_head_progress: 0,
            stats: BridgeStats::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn stats(&self) -> BridgeStats {
        self.stats
    }

    pub fn client_stats(&self, id: ClientId) -> Option<ClientStats> {
        self.client(id).map(|c| c.stats)
    }

    pub fn client_ids(&self) -> impl Iterator<Item = ClientId> + '_ {
        self.clients.iter().map(|c| c.id)
    }

    /// The leader: the client connected longest.
    pub fn leader(&self) -> Option<ClientId> {
        self.clients.first().map(|c| c.id)
    }

    fn client(&self, id: ClientId) -> Option<&Client> {
        self.clients.iter().find(|c| c.id == id)
    }

    fn client_mut(&mut self, id: ClientId) -> Result<&mut Client, BridgeError> {
        self.clients
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or(BridgeError::UnknownClient(id))
    }

    /// A new client, if its transport has a free slot ([`Config::max_clients`] for TCP,
    /// [`Config::max_udp_clients`] for UDP).
    pub fn add_client(&mut self, transport: Transport) -> Result<ClientId, BridgeError> {
        let limit = match transport {
            Transport::Tcp => self.cfg.max_clients,
            Transport::Udp => self.cfg.max_udp_clients,
        };
        let used = self
            .clients
            .iter()
            .filter(|c| c.transport == transport)
            .count();
        if used >= limit {
            return Err(BridgeError::TooManyClients);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.clients.push(Client {
            id,
            transport,
            queue: VecDeque::new(),
            queued_bytes: 0,
            head_progress: 0,
            rx: MessageAssembler::new(self.cfg.max_message),
            stats: ClientStats::default(),
            stock_synced: false,
        });
        self.stats.clients_connected += 1;
        self.queue_client_status();
        Ok(id)
    }

    /// Forgets a client and everything queued for it; the others are not touched.
    pub fn remove_client(&mut self, id: ClientId) -> Option<ClientStats> {
        let i = self.clients.iter().position(|c| c.id == id)?;
        self.stats.clients_left += 1;
        let stats = self.clients.remove(i).stats;
        if self.clients.is_empty() {
            self.queue_client_status();
        }
        Some(stats)
    }

    /// Queues `WIFI_CTRL_STATUS_CLIENT_CONNECTED` for the GAP8: 1 while any client is connected,
    /// 0 when none is (Bitcraze's ESP32 firmware sends it on each connect and disconnect). Kept
    /// even when the queue towards the GAP8 is full: it is 6 bytes.
    fn queue_client_status(&mut self) {
        let mut bytes = Vec::with_capacity(cpx::WIRE_OVERHEAD + 2);
        let payload = compat::client_status_payload(!self.clients.is_empty());
        cpx::encode_packet(compat::CLIENT_STATUS_ROUTE, &payload, &mut bytes);
        self.to_spi_bytes += bytes.len();
        self.to_spi.push_back(Message {
            bytes: Arc::from(bytes),
            packets: 1,
            first: compat::CLIENT_STATUS_ROUTE,
            droppable: false,
            stock: false,
            stock_header: false,
        });
        self.stats.client_status_sent += 1;
    }

    /// The GAP8 side was reset (SPI link restarted): drop its partial message.
    pub fn spi_reset(&mut self) {
        self.stats.spi_resets += 1;
        self.spi_rx.reset();
        self.spi_head_progress = 0;
        self.to_spi.clear();
        self.to_spi_bytes = 0;
        // A GAP8 that (re)started must learn that clients are waiting.
        if !self.clients.is_empty() {
            self.queue_client_status();
        }
    }

    /// Bytes from the GAP8. Never blocks and never fails: malformed input is counted and skipped.
    /// Returns the number of messages completed (each queued for every client).
    pub fn spi_received(&mut self, bytes: &[u8]) -> usize {
        self.stats.spi_bytes_in += bytes.len() as u64;
        let mut done = Vec::new();
        let mut errors = 0u64;
        self.spi_rx
            .push(bytes, |m| done.push(Message::from_wire(m)), |_| errors += 1);
        self.stats.spi_malformed += errors;
        let (cap, reserve) = (self.cfg.client_queue_bytes, self.cfg.control_reserve_bytes);
        let dropped = |cs: &[Client]| cs.iter().map(|c| c.stats.frames_dropped).sum::<u64>();
        let before = dropped(&self.clients);
        for m in &done {
            self.stats.spi_messages += 1;
            for c in &mut self.clients {
                c.offer(m, cap, reserve);
            }
        }
        self.stats.frames_dropped += dropped(&self.clients) - before;
        done.len()
    }

    fn upstream(&mut self, id: ClientId, done: Vec<Message>) -> usize {
        let allowed = match self.cfg.upstream {
            UpstreamPolicy::All => true,
            UpstreamPolicy::LeaderOnly => self.leader() == Some(id),
        };
        let mut n = 0;
        for m in done {
            if !allowed {
                self.stats.upstream_refused += 1;
                continue;
            }
            if self.to_spi_bytes + m.bytes.len() > self.cfg.spi_queue_bytes {
                self.stats.upstream_dropped += 1;
                continue;
            }
            self.to_spi_bytes += m.bytes.len();
            self.to_spi.push_back(m);
            n += 1;
        }
        if let Ok(c) = self.client_mut(id) {
            c.stats.upstream_messages += n as u64;
        }
        n
    }

    /// One SPI transaction from the GAP8, which carries exactly one CPX packet (the ESP32 path: the
    /// transaction boundary resynchronises, so a garbled packet costs only its message).
    pub fn spi_transfer(&mut self, packet: &[u8]) -> Result<usize, BridgeError> {
        if !matches!(cpx::packet_len(packet), Ok(Some(n)) if n == packet.len()) {
            self.stats.spi_malformed += 1;
            self.spi_rx.reset();
            return Err(BridgeError::Cpx(CpxError::BadDatagram));
        }
        Ok(self.spi_received(packet))
    }

    /// Stream bytes from a TCP client. Malformed input is counted; the first error is returned after
    /// the whole input was processed (the driver may log it; the client stays connected).
    pub fn client_received(&mut self, id: ClientId, bytes: &[u8]) -> Result<usize, BridgeError> {
        let c = self.client_mut(id)?;
        let mut done = Vec::new();
        let mut first_err = None;
        c.rx.push(
            bytes,
            |m| done.push(Message::from_wire(m)),
            |e| {
                first_err.get_or_insert(e);
            },
        );
        if first_err.is_some() {
            c.stats.malformed += 1;
        }
        let n = self.upstream(id, done);
        match first_err {
            Some(e) => Err(BridgeError::Cpx(e)),
            None => Ok(n),
        }
    }

    /// One datagram from a UDP client: exactly one CPX packet (an empty datagram only says "I am
    /// here"). Packets are grouped into messages like a stream.
    pub fn client_datagram(&mut self, id: ClientId, datagram: &[u8]) -> Result<usize, BridgeError> {
        if datagram.is_empty() {
            self.client_mut(id)?;
            return Ok(0);
        }
        let ok = matches!(cpx::packet_len(datagram), Ok(Some(n)) if n == datagram.len());
        if !ok {
            let c = self.client_mut(id)?;
            c.stats.malformed += 1;
            c.rx.reset();
            return Err(BridgeError::Cpx(CpxError::BadDatagram));
        }
        self.client_received(id, datagram)
    }

    /// The next bytes to write to a client: for TCP the unwritten rest of the head message, for
    /// UDP its next packet (one datagram). The bytes are shared, not copied.
    pub fn next_for_client(&mut self, id: ClientId) -> Option<(Arc<[u8]>, Range<usize>)> {
        let c = self.client_mut(id).ok()?;
        let m = c.queue.front()?;
        match c.transport {
            Transport::Tcp => Some((m.bytes.clone(), c.head_progress..m.bytes.len())),
            Transport::Udp => {
                let start = c.head_progress;
                let n = cpx::packet_len(&m.bytes[start..]).ok()??;
                Some((m.bytes.clone(), start..start + n))
            }
        }
    }

    /// The driver wrote `n` bytes (TCP) or one datagram of `n` bytes (UDP) to the client.
    pub fn client_sent(&mut self, id: ClientId, n: usize) {
        let Ok(c) = self.client_mut(id) else { return };
        let Some(len) = c.queue.front().map(|m| m.bytes.len()) else {
            return;
        };
        c.head_progress = (c.head_progress + n).min(len);
        c.stats.bytes_sent += n as u64;
        if c.head_progress == len {
            c.queue.pop_front();
            c.queued_bytes -= len;
            c.head_progress = 0;
            c.stats.messages_sent += 1;
        }
    }

    /// True when something waits for this client.
    pub fn has_work_for(&self, id: ClientId) -> bool {
        self.client(id).is_some_and(|c| !c.queue.is_empty())
    }

    /// Bytes queued for a client (not yet handed to its socket).
    pub fn client_queued_bytes(&self, id: ClientId) -> Option<usize> {
        self.client(id).map(|c| c.queued_bytes)
    }

    /// True when there are clients and every one has at least `bytes` queued: the WiFi side is
    /// the bottleneck, and taking more from the GAP8 would only drop frames for all of them
    /// (a WiFi model serving the SPI side only while this is false passes the backpressure on
    /// to the GAP8, as an ESP32 that stops arming SPI transactions does).
    pub fn wifi_backlogged(&self, bytes: usize) -> bool {
        !self.clients.is_empty() && self.clients.iter().all(|c| c.queued_bytes >= bytes)
    }

    /// The unwritten rest of the head message towards the GAP8.
    pub fn next_for_spi(&self) -> Option<(Arc<[u8]>, Range<usize>)> {
        let m = self.to_spi.front()?;
        Some((m.bytes.clone(), self.spi_head_progress..m.bytes.len()))
    }

    /// Tests: takes the client-status notifications out of the queue towards the GAP8 (wherever
    /// they are, none partly sent) and returns their values in order.
    #[cfg(test)]
    pub(crate) fn take_client_status(&mut self) -> Vec<bool> {
        let mut got = Vec::new();
        let mut i = usize::from(self.spi_head_progress > 0);
        while i < self.to_spi.len() {
            let m = &self.to_spi[i];
            let st = compat::parse_client_status(m.first, &m.bytes[cpx::WIRE_OVERHEAD..]);
            match st {
                Some(v) if m.packets == 1 => {
                    got.push(v);
                    self.to_spi_bytes -= m.bytes.len();
                    self.to_spi.remove(i);
                }
                _ => i += 1,
            }
        }
        got
    }

    /// The driver wrote `n` bytes towards the GAP8.
    pub fn spi_sent(&mut self, n: usize) {
        let Some(len) = self.to_spi.front().map(|m| m.bytes.len()) else {
            return;
        };
        self.spi_head_progress = (self.spi_head_progress + n).min(len);
        if self.spi_head_progress == len {
            self.to_spi.pop_front();
            self.to_spi_bytes -= len;
            self.spi_head_progress = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpx::{Target, encode_packet};
    use alloc::vec;
    use proptest::prelude::*;

    fn message(tag: u8, len: usize, src: Target, dst: Target) -> Vec<u8> {
        let payload: Vec<u8> = (0..len).map(|i| tag ^ i as u8).collect();
        let chunks: Vec<&[u8]> = if len == 0 {
            vec![&[][..]]
        } else {
            payload.chunks(1020).collect()
        };
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            let h = Route {
                destination: dst as u8,
                source: src as u8,
                last_packet: i + 1 == chunks.len(),
                function: 0x0E,
            };
            encode_packet(h, c, &mut out);
        }
        out
    }
    fn frame(tag: u8) -> Vec<u8> {
        message(tag, 79_056 + 64, Target::Gap8, Target::WifiHost)
    }

    /// Drains everything queued for a TCP client, writing at most `chunk` bytes at a time.
    fn drain(b: &mut Bridge, id: ClientId, chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some((bytes, r)) = b.next_for_client(id) {
            let end = (r.start + chunk).min(r.end);
            out.extend_from_slice(&bytes[r.start..end]);
            b.client_sent(id, end - r.start);
        }
        out
    }

    #[test]
    fn slow_client_loses_whole_frames_others_get_everything() {
        let mut b = Bridge::new(Config::default());
        let fast = b.add_client(Transport::Tcp).unwrap();
        let slow = b.add_client(Transport::Tcp).unwrap();
        let mut fast_got = Vec::new();
        let mut sent = Vec::new();
        // The slow client starts writing the first frame and then stalls for 20 frames.
        b.spi_received(&frame(0));
        sent.extend_from_slice(&frame(0));
        let (_, r) = b.next_for_client(slow).unwrap();
        b.client_sent(slow, r.len() / 2);
        for t in 1..=20u8 {
            let f = frame(t);
            // Feed in odd-sized SPI chunks.
            for c in f.chunks(777) {
                b.spi_received(c);
            }
            sent.extend_from_slice(&f);
            fast_got.extend_from_slice(&drain(&mut b, fast, 1 << 20));
        }
        // Everything for the fast client, in order, byte-identical.
        assert_eq!(fast_got, sent);
        assert_eq!(b.client_stats(fast).unwrap().frames_dropped, 0);
        // The slow client finishes the frame it was writing, then gets the newest frames only, whole.
        let rest = drain(&mut b, slow, 4096);
        let mut a = MessageAssembler::new(1 << 20);
        let mut msgs = Vec::new();
        a.push(&frame(0)[..frame(0).len() / 2], |_| {}, |e| panic!("{e}"));
        a.push(&rest, |m| msgs.push(m.bytes), |e| panic!("{e}"));
        assert_eq!(msgs[0], frame(0));
        let cap_frames = Config::default().client_queue_bytes / frame(0).len();
        assert_eq!(msgs.len(), cap_frames);
        for (k, m) in msgs[1..].iter().enumerate() {
            assert_eq!(*m, frame((20 - cap_frames + 2 + k) as u8));
        }
        assert_eq!(
            b.client_stats(slow).unwrap().frames_dropped,
            20 - (cap_frames as u64 - 1)
        );
    }

    #[test]
    fn frames_and_control_are_told_apart_without_a_key() {
        let mk = |function: u8, payload: &[u8], packets: u32| {
            let mut bytes = Vec::new();
            encode_packet(
                Route {
                    destination: 3,
                    source: 4,
                    last_packet: true,
                    function,
                },
                payload,
                &mut bytes,
            );
            WireMessage {
                bytes,
                packets,
                first: Route {
                    destination: 3,
                    source: 4,
                    last_packet: true,
                    function,
                },
            }
        };
        assert!(is_droppable(&mk(0x0E, &[0x47, 0x53, 2, 0x10, 0, 0], 1)));
        assert!(!is_droppable(&mk(0x0E, &[0x47, 0x53, 2, 0x01, 0, 0], 3)));
        assert!(!is_droppable(&mk(0x0E, &[0x47, 0x53, 2, 0x20], 1)));
        assert!(is_droppable(&mk(0x05, &[0xBC, 1, 2], 1)));
        assert!(!is_droppable(&mk(0x02, b"console", 1)));
    }

    #[test]
    fn control_messages_survive_a_full_queue() {
        let mut b = Bridge::new(Config::default());
        let c = b.add_client(Transport::Tcp).unwrap();
        for t in 0..10 {
            b.spi_received(&frame(t));
        }
        let ctl = message(9, 100, Target::Gap8, Target::WifiHost);
        b.spi_received(&ctl);
        let got = drain(&mut b, c, 1 << 20);
        assert!(got.ends_with(&ctl));
        assert_eq!(b.client_stats(c).unwrap().control_dropped, 0);
    }

    #[test]
    fn listener_leaving_does_not_disturb_others_and_leader_moves_on() {
        let mut b = Bridge::new(Config {
            upstream: UpstreamPolicy::LeaderOnly,
            ..Config::default()
        });
        let leader = b.add_client(Transport::Tcp).unwrap();
        let l1 = b.add_client(Transport::Udp).unwrap();
        let l2 = b.add_client(Transport::Tcp).unwrap();
        assert_eq!(b.leader(), Some(leader));
        b.spi_received(&frame(1));
        // l1 leaves half way through a frame.
        let (_, r) = b.next_for_client(l1).unwrap();
        b.client_sent(l1, r.len());
        assert!(b.remove_client(l1).is_some());
        b.spi_received(&frame(2));
        let mut expect = frame(1);
        expect.extend_from_slice(&frame(2));
        assert_eq!(drain(&mut b, leader, 3000), expect);
        assert_eq!(drain(&mut b, l2, 5000), expect);
        // Only the leader's upstream messages reach the GAP8.
        let up = message(3, 40, Target::WifiHost, Target::Gap8);
        assert_eq!(b.client_received(l2, &up), Ok(0));
        assert_eq!(b.client_received(leader, &up), Ok(1));
        assert_eq!(b.take_client_status(), vec![true, true, true]);
        let (bytes, r) = b.next_for_spi().unwrap();
        assert_eq!(&bytes[r.clone()], &up[..]);
        b.spi_sent(r.len());
        assert!(b.next_for_spi().is_none());
        assert_eq!(b.stats().upstream_refused, 1);
        b.remove_client(leader);
        assert_eq!(b.leader(), Some(l2));
        assert_eq!(b.client_received(l2, &up), Ok(1));
    }

    #[test]
    fn udp_clients_get_one_packet_per_datagram() {
        let mut b = Bridge::new(Config::default());
        let u = b.add_client(Transport::Udp).unwrap();
        let f = frame(4);
        b.spi_received(&f);
        let mut got = Vec::new();
        let mut n = 0;
        while let Some((bytes, r)) = b.next_for_client(u) {
            assert_eq!(cpx::packet_len(&bytes[r.clone()]), Ok(Some(r.len())));
            got.extend_from_slice(&bytes[r.clone()]);
            b.client_sent(u, r.len());
            n += 1;
        }
        assert_eq!(got, f);
        assert_eq!(n, f.len().div_ceil(1024));
        // A datagram that is not one packet is refused and counted, the next good one passes.
        assert_eq!(
            b.client_datagram(u, &[5, 0, 0]),
            Err(BridgeError::Cpx(CpxError::BadDatagram))
        );
        let up = message(3, 10, Target::WifiHost, Target::Gap8);
        assert_eq!(b.client_datagram(u, &up), Ok(1));
        assert_eq!(b.client_datagram(u, &[]), Ok(0));
        assert_eq!(b.client_stats(u).unwrap().malformed, 1);
    }

    #[test]
    fn upstream_messages_are_never_interleaved() {
        let mut b = Bridge::new(Config::default());
        let a = b.add_client(Transport::Tcp).unwrap();
        let c = b.add_client(Transport::Tcp).unwrap();
        let ma = message(1, 3000, Target::WifiHost, Target::Gap8);
        let mc = message(2, 3000, Target::WifiHost, Target::Gap8);
        // Interleave the two clients' bytes.
        for (x, y) in ma.chunks(500).zip(mc.chunks(500)) {
            b.client_received(a, x).unwrap();
            b.client_received(c, y).unwrap();
        }
        assert_eq!(b.take_client_status(), vec![true, true]);
        let mut out = Vec::new();
        while let Some((bytes, r)) = b.next_for_spi() {
            out.extend_from_slice(&bytes[r.clone()]);
            b.spi_sent(r.len());
        }
        let mut expect = ma.clone();
        expect.extend_from_slice(&mc);
        assert_eq!(out, expect);
    }

    /// Three receivers handshaking at once, two over TCP (bytes cut anywhere) and one over UDP
    /// (one packet per datagram), their multi-packet messages interleaved packet by packet: the
    /// GAP8 gets each message whole, in the order they completed.
    #[test]
    fn upstream_messages_of_three_clients_reach_the_gap8_whole() {
        let mut b = Bridge::new(Config::default());
        let t1 = b.add_client(Transport::Tcp).unwrap();
        let t2 = b.add_client(Transport::Tcp).unwrap();
        let u = b.add_client(Transport::Udp).unwrap();
        let small = |tag: u8, len: usize| -> Vec<u8> {
            let payload: Vec<u8> = (0..len).map(|i| tag ^ (i * 3) as u8).collect();
            let chunks: Vec<&[u8]> = payload.chunks(128).collect();
            let mut out = Vec::new();
            for (i, ch) in chunks.iter().enumerate() {
                let h = Route {
                    destination: Target::Gap8 as u8,
                    source: Target::WifiHost as u8,
                    last_packet: i + 1 == chunks.len(),
                    function: 0x0E,
                };
                encode_packet(h, ch, &mut out);
            }
            out
        };
        // HELLO-sized messages (a P-256 HELLO is 137 bytes: 2 packets of 128), then a KEY_ACK.
        let msgs = [small(1, 137), small(2, 328), small(3, 137), small(4, 42)];
        let packets = |m: &[u8]| -> Vec<Vec<u8>> {
            let mut out = Vec::new();
            let mut rest = m;
            while !rest.is_empty() {
                let n = cpx::packet_len(rest).unwrap().unwrap();
                out.push(rest[..n].to_vec());
                rest = &rest[n..];
            }
            out
        };
        let (p1, p2, p3) = (packets(&msgs[0]), packets(&msgs[1]), packets(&msgs[2]));
        // Round robin: one packet of each client in turn; the TCP clients' packets split in two.
        for (k, q) in p2.iter().enumerate() {
            if let Some(p) = p1.get(k) {
                let (x, y) = p.split_at(p.len() / 2);
                b.client_received(t1, x).unwrap();
                b.client_received(t1, y).unwrap();
            }
            let (x, y) = q.split_at(3);
            b.client_received(t2, x).unwrap();
            b.client_received(t2, y).unwrap();
            if let Some(p) = p3.get(k) {
                b.client_datagram(u, p).unwrap();
            }
        }
        b.client_received(t1, &msgs[3]).unwrap();
        assert_eq!(b.take_client_status(), vec![true, true, true]);
        let mut got = Vec::new();
        let mut a = MessageAssembler::new(1 << 16);
        while let Some((bytes, r)) = b.next_for_spi() {
            a.push(&bytes[r.clone()], |m| got.push(m.bytes), |e| panic!("{e}"));
            b.spi_sent(r.len());
        }
        // msgs[0] and msgs[2] complete in round 2, msgs[1] in round 3, msgs[3] last.
        assert_eq!(
            got,
            vec![
                msgs[0].clone(),
                msgs[2].clone(),
                msgs[1].clone(),
                msgs[3].clone()
            ]
        );
        for id in [t1, t2, u] {
            assert_eq!(b.client_stats(id).unwrap().malformed, 0);
        }
    }

    fn spi_bytes(b: &mut Bridge) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some((bytes, r)) = b.next_for_spi() {
            out.extend_from_slice(&bytes[r.clone()]);
            b.spi_sent(r.len());
        }
        out
    }

    /// As aideck-esp-firmware's `main/wifi.c`: `[0x32, 1]` to the GAP8 on function WIFI_CTRL when
    /// a client connects, `[0x32, 0]` when it leaves; with several clients, 0 only when the last
    /// one left; again after the GAP8's link was reset while clients are connected.
    #[test]
    fn client_connect_and_disconnect_are_reported_to_the_gap8() {
        let status = |v: u8| vec![4u8, 0, 4 | 2 << 3 | 1 << 6, 4, 0x32, v];
        let mut b = Bridge::new(Config::default());
        assert!(b.next_for_spi().is_none());
        let a = b.add_client(Transport::Tcp).unwrap();
        assert_eq!(spi_bytes(&mut b), status(1));
        let c = b.add_client(Transport::Udp).unwrap();
        assert_eq!(spi_bytes(&mut b), status(1));
        b.remove_client(a);
        assert!(b.next_for_spi().is_none(), "a client is still connected");
        b.spi_reset();
        assert_eq!(spi_bytes(&mut b), status(1));
        b.remove_client(c);
        assert_eq!(spi_bytes(&mut b), status(0));
        b.spi_reset();
        assert!(b.next_for_spi().is_none());
        assert_eq!(b.stats().client_status_sent, 4);
    }

    /// The stock stream as the stock GAP8 sends it: an 11-byte `0xBC` header packet, then the
    /// image in packets, `last_packet` on every one.
    fn stock_image(tag: u8, size: usize) -> Vec<u8> {
        let route = Route {
            destination: Target::WifiHost as u8,
            source: Target::Gap8 as u8,
            last_packet: true,
            function: 5,
        };
        let mut h = vec![0xBC];
        h.extend_from_slice(&(size as u16).to_le_bytes());
        h.extend_from_slice(&1u16.to_le_bytes());
        h.extend_from_slice(&[1, 0]);
        h.extend_from_slice(&(size as u32).to_le_bytes());
        let mut out = Vec::new();
        encode_packet(route, &h, &mut out);
        let body: Vec<u8> = (0..size).map(|i| tag ^ (i * 5) as u8).collect();
        for c in body.chunks(1020) {
            encode_packet(route, c, &mut out);
        }
        out
    }

    /// A client joining in the middle of a stock image gets its first byte at the next header,
    /// whatever packet the image was at; the client already there gets everything.
    #[test]
    fn a_client_joining_mid_image_starts_at_the_next_stock_header() {
        let img = |t| stock_image(t, 5000);
        let packets = |m: &[u8]| -> Vec<Vec<u8>> {
            let mut out = Vec::new();
            let mut rest = m;
            while !rest.is_empty() {
                let n = cpx::packet_len(rest).unwrap().unwrap();
                out.push(rest[..n].to_vec());
                rest = &rest[n..];
            }
            out
        };
        let n_packets = packets(&img(0)).len();
        for join_after in 0..n_packets {
            let mut b = Bridge::new(Config::default());
            let first = b.add_client(Transport::Tcp).unwrap();
            let mut late = None;
            for (k, p) in packets(&img(1)).iter().enumerate() {
                if k == join_after && k > 0 {
                    late = Some(b.add_client(Transport::Tcp).unwrap());
                }
                b.spi_received(p);
            }
            let late = late.unwrap_or_else(|| b.add_client(Transport::Tcp).unwrap());
            b.spi_received(&img(2));
            let mut all = img(1);
            all.extend_from_slice(&img(2));
            assert_eq!(drain(&mut b, first, 1 << 20), all);
            assert_eq!(
                drain(&mut b, late, 777),
                img(2),
                "joined after packet {join_after}"
            );
        }
    }

    /// A slow client that loses part of a stock image loses the rest of it: what it gets next
    /// starts with a header and every image it gets is whole.
    #[test]
    fn a_slow_stock_client_loses_whole_images_only() {
        let mut b = Bridge::new(Config {
            client_queue_bytes: 12_000,
            control_reserve_bytes: 0,
            ..Config::default()
        });
        let c = b.add_client(Transport::Tcp).unwrap();
        let mut got = Vec::new();
        for t in 0..12u8 {
            b.spi_received(&stock_image(t, 5000));
            if t % 4 == 3 {
                got.extend_from_slice(&drain(&mut b, c, 1 << 20));
            }
        }
        got.extend_from_slice(&drain(&mut b, c, 1 << 20));
        // Parse as opencv-viewer.py does: a header packet, then packets until `size` bytes.
        let mut rest = &got[..];
        let mut images = Vec::new();
        while !rest.is_empty() {
            let n = cpx::packet_len(rest).unwrap().unwrap();
            assert_eq!(
                n,
                4 + 11,
                "every image starts with an 11-byte header packet"
            );
            assert_eq!(rest[4], 0xBC);
            let size = u32::from_le_bytes(rest[11..15].try_into().unwrap()) as usize;
            rest = &rest[n..];
            let mut body = Vec::new();
            while body.len() < size {
                let n = cpx::packet_len(rest).unwrap().unwrap();
                body.extend_from_slice(&rest[4..n]);
                rest = &rest[n..];
            }
            assert_eq!(body.len(), size);
            images.push(body[0]);
        }
        assert!(images.len() < 12, "the slow client lost images");
        assert!(images.len() >= 2);
        assert!(b.client_stats(c).unwrap().frames_dropped > 0);
    }

    #[test]
    fn garbled_spi_is_counted_and_the_stream_resynchronises() {
        let mut b = Bridge::new(Config::default());
        let c = b.add_client(Transport::Tcp).unwrap();
        let mut bad = frame(1);
        bad[0] = 0xFF;
        bad[1] = 0xFF; // impossible length in the first packet
        // The client keeps up (drained after every frame), so the queue drops nothing and every
        // loss below is the garbled byte's.
        let mut got = Vec::new();
        b.spi_received(&bad);
        got.extend(drain(&mut b, c, 1 << 20));
        for t in 2..12 {
            b.spi_received(&frame(t));
            got.extend(drain(&mut b, c, 1 << 20));
        }
        assert_eq!(b.client_stats(c).unwrap().frames_dropped, 0);
        let mut a = MessageAssembler::new(1 << 20);
        let mut msgs = Vec::new();
        a.push(&got, |m| msgs.push(m.bytes), |e| panic!("{e}"));
        // The garbled frame is lost (what follows its first packet arrives as a fragment the
        // receiver's reassembler drops); the codec resynchronises on the next plausible packet
        // header (gapstream_protocol::cpx::StreamDecoder), which is the garbled frame's second
        // packet: every later frame arrives whole. One garbled byte costs one message.
        assert!(!msgs.contains(&frame(1)));
        let lost = (2..12).filter(|&t| !msgs.contains(&frame(t))).count();
        eprintln!("frames lost after one garbled length: {lost}");
        assert_eq!(lost, 0, "frames after the garbled one were lost");
        assert_eq!(
            b.stats().spi_malformed,
            1,
            "one garbled stretch, reported once"
        );
        // One SPI transaction = one packet (the ESP32 path) needs no resynchronisation at all.
        let mut b = Bridge::new(Config::default());
        let c = b.add_client(Transport::Tcp).unwrap();
        assert!(b.spi_transfer(&bad[..1024]).is_err());
        let f = frame(7);
        let mut rest = &f[..];
        while !rest.is_empty() {
            let n = cpx::packet_len(rest).unwrap().unwrap();
            b.spi_transfer(&rest[..n]).unwrap();
            rest = &rest[n..];
        }
        assert_eq!(drain(&mut b, c, 1 << 20), f);
        assert_eq!(
            b.client_received(99, &[]),
            Err(BridgeError::UnknownClient(99))
        );
        let mut b2 = Bridge::new(Config {
            max_clients: 1,
            ..Config::default()
        });
        b2.add_client(Transport::Tcp).unwrap();
        assert_eq!(
            b2.add_client(Transport::Tcp),
            Err(BridgeError::TooManyClients)
        );
    }

    #[test]
    fn finding5_udp_and_tcp_clients_have_separate_slots() {
        let mut b = Bridge::new(Config {
            max_clients: 2,
            max_udp_clients: 3,
            ..Config::default()
        });
        for _ in 0..3 {
            b.add_client(Transport::Udp).unwrap();
        }
        assert_eq!(
            b.add_client(Transport::Udp),
            Err(BridgeError::TooManyClients)
        );
        // Every UDP slot taken: TCP clients still get theirs, and the other way round.
        let t1 = b.add_client(Transport::Tcp).unwrap();
        b.add_client(Transport::Tcp).unwrap();
        assert_eq!(
            b.add_client(Transport::Tcp),
            Err(BridgeError::TooManyClients)
        );
        b.remove_client(t1);
        assert!(b.add_client(Transport::Tcp).is_ok());
    }

    /// Parses a stock stream as opencv-viewer.py does (a header packet, then packets until
    /// `size` bytes): every image's first byte (its tag), or why the script would break.
    fn opencv_viewer_images(mut rest: &[u8]) -> Result<Vec<u8>, String> {
        let mut images = Vec::new();
        while !rest.is_empty() {
            let n = cpx::packet_len(rest).unwrap().unwrap();
            if n != 4 + 11 || rest[4] != 0xBC {
                return Err(format!(
                    "image {} does not start with a header",
                    images.len()
                ));
            }
            let size = u32::from_le_bytes(rest[11..15].try_into().unwrap()) as usize;
            rest = &rest[n..];
            let mut body = Vec::new();
            while body.len() < size && !rest.is_empty() {
                let n = cpx::packet_len(rest).unwrap().unwrap();
                body.extend_from_slice(&rest[4..n]);
                rest = &rest[n..];
            }
            if body.len() > size || (body.len() < size && !rest.is_empty()) {
                return Err(format!("image of {} bytes, header said {size}", body.len()));
            }
            if body.len() == size {
                images.push(body[0]);
            }
        }
        Ok(images)
    }

    proptest! {
        /// A stock client that the bridge writes to in pieces (a slow reader, a loaded machine)
        /// while images keep coming: every image it gets is whole — a started image is never cut,
        /// images are dropped whole (counted) — so a stock viewer never reads one image's pixels
        /// into the next header's place.
        #[test]
        fn a_stock_client_written_in_pieces_gets_whole_images_only(
            ops in proptest::collection::vec((any::<bool>(), 1usize..9000), 1..120),
        ) {
            let cap = 12_000;
            let mut b = Bridge::new(Config { client_queue_bytes: cap, control_reserve_bytes: 0, ..Config::default() });
            let c = b.add_client(Transport::Tcp).unwrap();
            let mut got = Vec::new();
            let mut tag = 0u8;
            for (image, n) in ops {
                if image {
                    b.spi_received(&stock_image(tag, 5000));
                    tag = tag.wrapping_add(1);
                } else {
                    let mut left = n;
                    while left > 0 {
                        let Some((bytes, r)) = b.next_for_client(c) else { break };
                        let end = (r.start + left).min(r.end);
                        got.extend_from_slice(&bytes[r.start..end]);
                        b.client_sent(c, end - r.start);
                        left -= end - r.start;
                    }
                }
                // Bounded: at most the bound plus the rest of the one image being written.
                let cl = b.clients.iter().find(|x| x.id == c).unwrap();
                prop_assert!(cl.queued_bytes <= cap + 5000 + 6 * 4 + 15, "{}", cl.queued_bytes);
            }
            got.extend_from_slice(&drain(&mut b, c, 1 << 20));
            let images = opencv_viewer_images(&got);
            prop_assert!(images.is_ok(), "{:?}", images);
            let images = images.unwrap();
            // In order, each one whole, and every image either delivered or counted as dropped.
            prop_assert!(images.windows(2).all(|w| w[0] < w[1]));
            let st = b.client_stats(c).unwrap();
            prop_assert_eq!(images.len() as u64 + st.frames_dropped, tag as u64);
        }
    }

    proptest! {
        #[test]
        fn queues_stay_bounded_and_deliver_whole_messages(
            ops in proptest::collection::vec((0u8..4, 1usize..6000), 1..200),
        ) {
            let cfg = Config { client_queue_bytes: 20_000, control_reserve_bytes: 2_000, ..Config::default() };
            let mut b = Bridge::new(cfg);
            let c = b.add_client(Transport::Tcp).unwrap();
            let mut a = MessageAssembler::new(1 << 20);
            let mut sent = Vec::new();
            let mut got: Vec<Vec<u8>> = Vec::new();
            for (k, (op, n)) in ops.into_iter().enumerate() {
                match op {
                    0 | 1 => {
                        let m = message(k as u8, n, Target::Gap8, Target::WifiHost);
                        sent.push(m.clone());
                        b.spi_received(&m);
                    }
                    _ => {
                        if let Some((bytes, r)) = b.next_for_client(c) {
                            let end = (r.start + n).min(r.end);
                            a.push(&bytes[r.start..end], |m| got.push(m.bytes), |e| panic!("{e}"));
                            b.client_sent(c, end - r.start);
                        }
                    }
                }
                let cl = b.clients.iter().find(|x| x.id == c).unwrap();
                prop_assert!(cl.queued_bytes <= cfg.client_queue_bytes + cfg.control_reserve_bytes);
                prop_assert_eq!(cl.queued_bytes, cl.queue.iter().map(|m| m.bytes.len()).sum::<usize>());
            }
            while let Some((bytes, r)) = b.next_for_client(c) {
                a.push(&bytes[r.clone()], |m| got.push(m.bytes), |e| panic!("{e}"));
                b.client_sent(c, r.len());
            }
            // What arrived is a subsequence of what was sent, each message whole.
            let mut it = sent.iter();
            for g in &got {
                prop_assert!(it.any(|s| s == g));
            }
            let st = b.client_stats(c).unwrap();
            prop_assert_eq!(st.messages_sent as usize, got.len());
            prop_assert_eq!(got.len() as u64 + st.frames_dropped + st.control_dropped, sent.len() as u64);
        }
    }
}
