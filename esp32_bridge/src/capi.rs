//! C entry points for the ESP32 firmware's ESP-IDF glue (`esp32_bridge/esp-idf/`) and the GVSOC
//! ESP32 stand-in (`gvsoc/e2e/esp32_standin.cpp`): the forwarding core ([`Bridge`]) and the SPI
//! slave ([`SpiSlave`]) behind an opaque handle. Header: `include/esp32_bridge.h` (kept in sync by
//! `tests/capi_header.rs`).
//!
//! Not thread-safe: the caller serialises all calls on one handle (the ESP-IDF glue holds one
//! FreeRTOS mutex around every call; the stand-in is single-threaded). Never unwinds into C: every
//! function returns a status (negative values are `ESP32B_E*` codes).
//!
//! Feature `capi`. On a bare-metal target (the ESP32's `xtensa-esp32-none-elf`), this module also
//! provides the global allocator (the C library's `malloc` / `free`, i.e. ESP-IDF's heap) and a
//! panic handler that calls `abort()`.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use core::ffi::c_int;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use crate::cookie::{Control, Datagram, Event, Gate, GateConfig, Outcome};
use crate::forward::{Bridge, BridgeError, Config, Transport, UpstreamPolicy};
use crate::spi_slave::{BUFFER_LEN, SpiSlave};

/// A null handle or buffer, a buffer too small, or a length above `PTRDIFF_MAX` (or one running
/// past the end of memory: no such buffer exists, nothing is read or written).
pub const ESP32B_EINVAL: i32 = -1;
/// No such client.
pub const ESP32B_ENOCLIENT: i32 = -2;
/// The client limit is reached.
pub const ESP32B_EFULL: i32 = -3;
/// Malformed CPX (counted; the stream goes on).
pub const ESP32B_ECPX: i32 = -4;

/// Largest reply of [`esp32b_udp_received`] (`ESP32B_UDP_REPLY_MAX`): every datagram of the
/// registration is this long.
pub const ESP32B_UDP_REPLY_MAX: usize = crate::cookie::DATAGRAM_LEN;

/// Bridge configuration (`esp32b_config_t`). Zero fields take the defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Esp32bConfig {
    pub client_queue_bytes: u32,
    pub control_reserve_bytes: u32,
    pub spi_queue_bytes: u32,
    pub max_message: u32,
    pub max_clients: u32,
    /// Non-zero: only the leader (oldest client) may talk to the GAP8.
    pub leader_only: u32,
}

/// Counters (`esp32b_stats_t`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Esp32bStats {
    pub spi_transactions: u64,
    pub packets_to_gap8: u64,
    pub packets_from_gap8: u64,
    pub spi_malformed: u64,
    pub clients: u32,
    pub reserved: u32,
}

const _: () = {
    assert!(core::mem::size_of::<Esp32bConfig>() == 24);
    assert!(core::mem::size_of::<Esp32bStats>() == 40);
    assert!(core::mem::offset_of!(Esp32bStats, clients) == 32);
};

/// The handle (`esp32b_t`).
pub struct Esp32b {
    bridge: Bridge,
    slave: SpiSlave,
    /// Transport of each connected client (the core does not expose it).
    transports: alloc::vec::Vec<(u32, Transport)>,
    /// The UDP registration, once [`esp32b_udp_secret`] gave it a secret.
    udp_gate: Option<Gate>,
    /// Probes [`esp32b_udp_tick`] made, for [`esp32b_udp_next`].
    udp_probes: VecDeque<(SocketAddr, Datagram)>,
    /// Round robin over the registered clients in [`esp32b_udp_next`].
    udp_cursor: usize,
    /// The caller's 32-bit millisecond clock, extended to 64 bits.
    last_ms: u32,
    now_ms: u64,
}

impl Esp32b {
    fn transport(&self, id: u32) -> Option<Transport> {
        self.transports
            .iter()
            .find(|(c, _)| *c == id)
            .map(|(_, t)| *t)
    }

    /// The caller's wrapping millisecond clock as a 64-bit one.
    fn clock(&mut self, now_ms: u32) -> u64 {
        self.now_ms += u64::from(now_ms.wrapping_sub(self.last_ms));
        self.last_ms = now_ms;
        self.now_ms
    }
}

fn ipv4(ip: u32, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port))
}

fn err(e: BridgeError) -> i32 {
    match e {
        BridgeError::TooManyClients => ESP32B_EFULL,
        BridgeError::UnknownClient(_) => ESP32B_ENOCLIENT,
        BridgeError::Cpx(_) => ESP32B_ECPX,
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// # Safety
/// `h` is null or a handle from [`esp32b_new`] not yet freed, used by one caller at a time.
unsafe fn handle<'a>(h: *mut Esp32b) -> Option<&'a mut Esp32b> {
    // SAFETY: caller contract.
    unsafe { h.as_mut() }
}

/// Whether `len` bytes at `p` can be one buffer at all: at most `isize::MAX` bytes (what
/// `core::slice::from_raw_parts` requires), not running past the end of the address space.
fn span_ok(p: *const u8, len: usize) -> bool {
    len <= isize::MAX as usize && (p as usize).checked_add(len).is_some()
}

/// # Safety
/// `p` is null (then `len` must be 0) or valid for `len` bytes.
unsafe fn bytes<'a>(p: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if p.is_null() || !span_ok(p, len) {
        return None;
    }
    // SAFETY: caller contract.
    Some(unsafe { core::slice::from_raw_parts(p, len) })
}

/// # Safety
/// `p` is null or valid for writes of `len` bytes.
unsafe fn bytes_mut<'a>(p: *mut u8, len: usize) -> Option<&'a mut [u8]> {
    if p.is_null() || !span_ok(p, len) {
        return None;
    }
    // SAFETY: caller contract.
    Some(unsafe { core::slice::from_raw_parts_mut(p, len) })
}

/// Size the SPI transmit / receive buffers must have (`ESP32B_SPI_BUFFER_LEN`).
#[unsafe(no_mangle)]
pub extern "C" fn esp32b_spi_buffer_len() -> u32 {
    BUFFER_LEN as u32
}

/// A new bridge; `cfg` may be null (defaults). Null when out of memory.
///
/// # Safety
/// `cfg` is null or points to an `esp32b_config_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_new(cfg: *const Esp32bConfig) -> *mut Esp32b {
    // SAFETY: caller contract.
    let c = unsafe { cfg.as_ref() }.copied().unwrap_or_default();
    let d = Config::default();
    let pick = |v: u32, dv: usize| if v == 0 { dv } else { v as usize };
    let config = Config {
        client_queue_bytes: pick(c.client_queue_bytes, d.client_queue_bytes),
        control_reserve_bytes: pick(c.control_reserve_bytes, d.control_reserve_bytes),
        spi_queue_bytes: pick(c.spi_queue_bytes, d.spi_queue_bytes),
        max_message: pick(c.max_message, d.max_message),
        max_clients: pick(c.max_clients, d.max_clients),
        // The C configuration's limit applies to each transport (separate slots).
        max_udp_clients: pick(c.max_clients, d.max_udp_clients),
        upstream: if c.leader_only != 0 {
            UpstreamPolicy::LeaderOnly
        } else {
            UpstreamPolicy::All
        },
    };
    Box::into_raw(Box::new(Esp32b {
        bridge: Bridge::new(config),
        slave: SpiSlave::new(),
        transports: alloc::vec::Vec::new(),
        udp_gate: None,
        udp_probes: VecDeque::new(),
        udp_cursor: 0,
        last_ms: 0,
        now_ms: 0,
    }))
}

/// Frees a bridge (null is ignored).
///
/// # Safety
/// `h` is null or from [`esp32b_new`], not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_free(h: *mut Esp32b) {
    if !h.is_null() {
        // SAFETY: caller contract: made by `Box::into_raw` in `esp32b_new`.
        drop(unsafe { Box::from_raw(h) });
    }
}

/// 1 if the ESP32 should arm an SPI transaction now (`gap8_asked`: the GAP8's ready line rose
/// since the last transaction), 0 if not, <0 on a bad handle.
///
/// # Safety
/// See [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_spi_should_arm(h: *mut Esp32b, gap8_asked: c_int) -> i32 {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { handle(h) }) else {
        return ESP32B_EINVAL;
    };
    h.slave.should_arm(&h.bridge, gap8_asked != 0) as i32
}

/// Fills `tx` (at least `esp32b_spi_buffer_len()` bytes) for the next transaction; returns the
/// wire length of the packet placed (0: none).
///
/// # Safety
/// See [`handle`]; `tx` valid for `cap` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_spi_arm(h: *mut Esp32b, tx: *mut u8, cap: usize) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(tx)) = (unsafe { handle(h) }, unsafe { bytes_mut(tx, cap) }) else {
        return ESP32B_EINVAL;
    };
    if tx.len() < BUFFER_LEN {
        return ESP32B_EINVAL;
    }
    count(h.slave.arm(&mut h.bridge, tx))
}

/// A transaction ended: `rx` holds the `len` bytes the GAP8 clocked. Returns the number of
/// messages completed (queued for the clients), or `ESP32B_ECPX` for a malformed packet.
///
/// # Safety
/// See [`handle`]; `rx` valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_spi_complete(h: *mut Esp32b, rx: *const u8, len: usize) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(rx)) = (unsafe { handle(h) }, unsafe { bytes(rx, len) }) else {
        return ESP32B_EINVAL;
    };
    match h.slave.complete(&mut h.bridge, rx) {
        Ok(n) => count(n),
        Err(e) => err(e),
    }
}

/// The GAP8 was reset: drop its partial message.
///
/// # Safety
/// See [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_spi_reset(h: *mut Esp32b) -> i32 {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { handle(h) }) else {
        return ESP32B_EINVAL;
    };
    h.bridge.spi_reset();
    0
}

/// A new WiFi client (`udp` non-zero: datagrams). Returns its id (>= 0) or `ESP32B_EFULL`.
///
/// # Safety
/// See [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_client_add(h: *mut Esp32b, udp: c_int) -> i32 {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { handle(h) }) else {
        return ESP32B_EINVAL;
    };
    let t = if udp != 0 {
        Transport::Udp
    } else {
        Transport::Tcp
    };
    match h.bridge.add_client(t) {
        Ok(id) => match i32::try_from(id) {
            Ok(v) => {
                h.transports.push((id, t));
                v
            }
            Err(_) => {
                h.bridge.remove_client(id);
                ESP32B_EFULL
            }
        },
        Err(e) => err(e),
    }
}

/// Starts the UDP registration (docs/protocol.md §2) with 32 random bytes; until then no UDP
/// client can register. The secret changes every 30 s (derived from the previous one by HMAC).
/// The timers and budgets are `GateConfig::default()`'s: registrations last 5 s after the newest
/// token echoed, a probe every second, at most 2 registrations per IP address, 1000 cookies a
/// second in all.
///
/// # Safety
/// See [`handle`]; `secret` valid for 32 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_udp_secret(h: *mut Esp32b, secret: *const u8) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(s)) = (unsafe { handle(h) }, unsafe { bytes(secret, 32) }) else {
        return ESP32B_EINVAL;
    };
    let Ok(s) = <[u8; 32]>::try_from(s) else {
        return ESP32B_EINVAL;
    };
    h.udp_gate = Some(Gate::new(s, GateConfig::default()));
    0
}

/// Any datagram from the UDP socket, from IPv4 address `ip`, `port` (host byte order; `now_ms`
/// a millisecond clock that may wrap). The core decides: it answers a request with a cookie, a
/// good echo with the welcome (registering the address), takes the echoes of its probes, and
/// forwards a registered client's CPX packets. Writes what to send back to the sender into
/// `reply` (`cap` >= `ESP32B_UDP_REPLY_MAX`) and its length into `*reply_len` (0: nothing; never
/// more than `len`). Returns > 0 when the GAP8 has something new (a message completed towards
/// it, or a client registered or left: wake the SPI task), 0 if not, or an error code.
///
/// # Safety
/// See [`handle`]; `data` valid for `len` bytes, `reply` for `cap`, `reply_len` for one `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_udp_received(
    h: *mut Esp32b,
    ip: u32,
    port: u16,
    data: *const u8,
    len: usize,
    now_ms: u32,
    reply: *mut u8,
    cap: usize,
    reply_len: *mut usize,
) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(d), Some(out)) =
        (unsafe { handle(h) }, unsafe { bytes(data, len) }, unsafe {
            bytes_mut(reply, cap)
        })
    else {
        return ESP32B_EINVAL;
    };
    // SAFETY: caller contract.
    let Some(reply_len) = (unsafe { reply_len.as_mut() }) else {
        return ESP32B_EINVAL;
    };
    *reply_len = 0;
    if out.len() < ESP32B_UDP_REPLY_MAX {
        return ESP32B_EINVAL;
    }
    let now = h.clock(now_ms);
    let Some(gate) = h.udp_gate.as_mut() else {
        return 0;
    };
    let mut send = |b: &Datagram| {
        out[..b.len()].copy_from_slice(b);
        *reply_len = b.len();
    };
    match gate.datagram(&mut h.bridge, ipv4(ip, port), d, now) {
        Outcome::Reply(r) => {
            send(&r);
            0
        }
        Outcome::Registered {
            id,
            welcome,
            evicted,
        } => {
            if let Some((_, e)) = evicted {
                h.transports.retain(|(c, _)| *c != e);
            }
            h.transports.push((id, Transport::Udp));
            send(&welcome);
            1
        }
        Outcome::Left(id) => {
            h.transports.retain(|(c, _)| *c != id);
            1
        }
        Outcome::Forwarded(_, Ok(n)) => count(n),
        Outcome::Forwarded(_, Err(e)) => err(e),
        Outcome::Refreshed(_) | Outcome::Refused(_) => 0,
    }
}

/// Time passes (call it every few tens of milliseconds): ends the UDP registrations without a
/// current proof and makes the probes that are due (sent by [`esp32b_udp_next`]). Returns the
/// number of registrations that ended (> 0: wake the SPI task, the GAP8 may get a
/// client-status packet).
///
/// # Safety
/// See [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_udp_tick(h: *mut Esp32b, now_ms: u32) -> i32 {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { handle(h) }) else {
        return ESP32B_EINVAL;
    };
    let now = h.clock(now_ms);
    let Some(gate) = h.udp_gate.as_mut() else {
        return 0;
    };
    let mut ended = 0;
    let (probes, transports) = (&mut h.udp_probes, &mut h.transports);
    gate.poll(
        &mut h.bridge,
        now,
        || None,
        |e| match e {
            Event::Probe(a, d) => {
                // A probe nobody took before the next one is stale: keep one per client.
                probes.retain(|(x, _)| *x != a);
                probes.push_back((a, d));
            }
            Event::Expired(a, id) => {
                probes.retain(|(x, _)| *x != a);
                transports.retain(|(c, _)| *c != id);
                ended += 1;
            }
        },
    );
    ended
}

/// The next datagram for a registered UDP client: a probe, else the next CPX packet of a client
/// whose registration is current (round robin over the clients). Writes it into `out` and its
/// destination into `*ip`, `*port` (host byte order) and returns its length (0: nothing to send;
/// `ESP32B_EINVAL` if `cap` is too small). `*client` is the client to report the sent packet
/// for with [`esp32b_client_sent`], or -1 for a probe (nothing to report; a probe that could
/// not be sent is lost, like one lost on the air).
///
/// # Safety
/// See [`handle`]; `out` valid for `cap` bytes, `ip`, `port`, `client` for one value each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_udp_next(
    h: *mut Esp32b,
    now_ms: u32,
    out: *mut u8,
    cap: usize,
    ip: *mut u32,
    port: *mut u16,
    client: *mut i32,
) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(out)) = (unsafe { handle(h) }, unsafe { bytes_mut(out, cap) }) else {
        return ESP32B_EINVAL;
    };
    // SAFETY: caller contract.
    let (Some(ip), Some(port), Some(client)) =
        (unsafe { ip.as_mut() }, unsafe { port.as_mut() }, unsafe {
            client.as_mut()
        })
    else {
        return ESP32B_EINVAL;
    };
    *client = -1;
    let now = h.clock(now_ms);
    let mut to = |a: SocketAddr| match a {
        SocketAddr::V4(v4) => {
            *ip = u32::from(*v4.ip());
            *port = v4.port();
        }
        SocketAddr::V6(_) => {}
    };
    if let Some((a, d)) = h.udp_probes.pop_front() {
        if out.len() < d.len() {
            return ESP32B_EINVAL;
        }
        out[..d.len()].copy_from_slice(&d);
        to(a);
        return count(d.len());
    }
    let Some(gate) = h.udp_gate.as_ref() else {
        return 0;
    };
    let n = gate.len();
    for k in 0..n {
        let i = (h.udp_cursor + k) % n;
        let Some((a, id)) = gate.clients().nth(i) else {
            break;
        };
        if !gate.sendable(id, now) {
            continue;
        }
        let Some((bytes, range)) = h.bridge.next_for_client(id) else {
            continue;
        };
        let src = &bytes[range];
        if src.len() > out.len() {
            return ESP32B_EINVAL;
        }
        out[..src.len()].copy_from_slice(src);
        to(a);
        *client = i32::try_from(id).unwrap_or(-1);
        h.udp_cursor = i + 1;
        return count(src.len());
    }
    0
}

/// Forgets a client and what was queued for it.
///
/// # Safety
/// See [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_client_remove(h: *mut Esp32b, id: u32) -> i32 {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { handle(h) }) else {
        return ESP32B_EINVAL;
    };
    h.transports.retain(|(c, _)| *c != id);
    if let Some(g) = h.udp_gate.as_mut()
        && g.remove(&mut h.bridge, id)
    {
        return 0;
    }
    match h.bridge.remove_client(id) {
        Some(_) => 0,
        None => ESP32B_ENOCLIENT,
    }
}

/// Bytes from a TCP client. Returns the number of messages completed towards the GAP8, or an
/// error (`ESP32B_ECPX`: garbled input, counted; the client may stay connected).
///
/// # Safety
/// See [`handle`]; `data` valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_client_received(
    h: *mut Esp32b,
    id: u32,
    data: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(d)) = (unsafe { handle(h) }, unsafe { bytes(data, len) }) else {
        return ESP32B_EINVAL;
    };
    match h.bridge.client_received(id, d) {
        Ok(n) => count(n),
        Err(e) => err(e),
    }
}

/// One datagram from a UDP client (exactly one CPX packet; empty = "I am here"; a repeated
/// message of the cookie exchange is ignored: 0).
///
/// # Safety
/// See [`handle`]; `data` valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_client_datagram(
    h: *mut Esp32b,
    id: u32,
    data: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(d)) = (unsafe { handle(h) }, unsafe { bytes(data, len) }) else {
        return ESP32B_EINVAL;
    };
    if Control::parse(d).is_some() {
        return 0;
    }
    match h.bridge.client_datagram(id, d) {
        Ok(n) => count(n),
        Err(e) => err(e),
    }
}

/// Copies the next bytes to write to a client into `out`: for TCP up to `cap` bytes of the
/// unwritten rest of its head message, for UDP one whole datagram (`ESP32B_EINVAL` if `cap` is too
/// small for it). Returns the byte count (0: nothing queued). Report what was written with
/// [`esp32b_client_sent`].
///
/// # Safety
/// See [`handle`]; `out` valid for `cap` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_client_next(
    h: *mut Esp32b,
    id: u32,
    out: *mut u8,
    cap: usize,
) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(out)) = (unsafe { handle(h) }, unsafe { bytes_mut(out, cap) }) else {
        return ESP32B_EINVAL;
    };
    let udp = h.transport(id) == Some(Transport::Udp);
    let Some((bytes, range)) = h.bridge.next_for_client(id) else {
        return if h.transport(id).is_some() {
            0
        } else {
            ESP32B_ENOCLIENT
        };
    };
    let src = &bytes[range];
    if udp && src.len() > out.len() {
        return ESP32B_EINVAL;
    }
    let n = src.len().min(out.len());
    out[..n].copy_from_slice(&src[..n]);
    count(n)
}

/// The driver wrote `n` bytes (TCP) or one datagram of `n` bytes (UDP) to the client.
///
/// # Safety
/// See [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_client_sent(h: *mut Esp32b, id: u32, n: usize) -> i32 {
    // SAFETY: caller contract.
    let Some(h) = (unsafe { handle(h) }) else {
        return ESP32B_EINVAL;
    };
    if h.transport(id).is_none() {
        return ESP32B_ENOCLIENT;
    }
    h.bridge.client_sent(id, n);
    0
}

/// Counters.
///
/// # Safety
/// See [`handle`]; `out` points to an `esp32b_stats_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn esp32b_stats(h: *mut Esp32b, out: *mut Esp32bStats) -> i32 {
    // SAFETY: caller contract.
    let (Some(h), Some(out)) = (unsafe { handle(h) }, unsafe { out.as_mut() }) else {
        return ESP32B_EINVAL;
    };
    let s = h.slave.stats();
    *out = Esp32bStats {
        spi_transactions: s.transactions,
        packets_to_gap8: s.packets_to_gap8,
        packets_from_gap8: s.packets_from_gap8,
        spi_malformed: s.malformed,
        clients: h.bridge.client_ids().count() as u32,
        reserved: 0,
    };
    0
}

// --- bare-metal runtime (the ESP32 build) ---------------------------------------------------------

#[cfg(target_os = "none")]
mod runtime {
    use core::alloc::{GlobalAlloc, Layout};

    unsafe extern "C" {
        fn malloc(size: usize) -> *mut u8;
        fn free(p: *mut u8);
        fn abort() -> !;
    }

    /// ESP-IDF's heap. Its `malloc` aligns to 4 (8 with PSRAM); larger alignments are served by
    /// over-allocating and storing the original pointer just below the returned block.
    struct CHeap;

    // SAFETY: returns blocks of `layout.size()` bytes aligned to `layout.align()` or null, and
    // frees exactly what `malloc` returned (recovered from the word before an over-aligned block).
    unsafe impl GlobalAlloc for CHeap {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if layout.align() <= 4 {
                // SAFETY: plain C allocation.
                return unsafe { malloc(layout.size().max(1)) };
            }
            let Some(total) = layout.size().checked_add(layout.align() + 4) else {
                return core::ptr::null_mut();
            };
            // SAFETY: plain C allocation.
            let raw = unsafe { malloc(total) };
            if raw.is_null() {
                return raw;
            }
            let start = raw as usize + 4;
            let aligned = (start + layout.align() - 1) & !(layout.align() - 1);
            // SAFETY: `aligned - 4 >= raw` and `aligned + size <= raw + total`; the word below the
            // block is inside the allocation and 4-aligned (align > 4 is a power of two).
            unsafe { *((aligned - 4) as *mut usize) = raw as usize };
            aligned as *mut u8
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            if layout.align() <= 4 {
                // SAFETY: from `malloc` above.
                unsafe { free(ptr) };
            } else {
                // SAFETY: `alloc` stored the original pointer in the word below the block.
                unsafe { free(*((ptr as usize - 4) as *const usize) as *mut u8) };
            }
        }
    }

    #[global_allocator]
    static HEAP: CHeap = CHeap;

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo) -> ! {
        // SAFETY: ESP-IDF's abort prints a backtrace and resets the chip.
        unsafe { abort() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    /// Lengths no buffer can have (above `isize::MAX`, or wrapping around the address space) are
    /// refused with `ESP32B_EINVAL` before any slice is made, by every entry point taking one.
    #[test]
    fn finding6_capi_refuses_lengths_above_isize_max() {
        // SAFETY (whole test): valid handle; the buffers are valid for every length accepted.
        unsafe {
            let h = esp32b_new(core::ptr::null());
            let id = esp32b_client_add(h, 1) as u32;
            let mut buf = [0u8; 2048];
            let p = buf.as_mut_ptr();
            for len in [isize::MAX as usize + 1, usize::MAX] {
                assert_eq!(esp32b_spi_arm(h, p, len), ESP32B_EINVAL);
                assert_eq!(esp32b_spi_complete(h, p, len), ESP32B_EINVAL);
                assert_eq!(esp32b_client_received(h, id, p, len), ESP32B_EINVAL);
                assert_eq!(esp32b_client_datagram(h, id, p, len), ESP32B_EINVAL);
                assert_eq!(esp32b_client_next(h, id, p, len), ESP32B_EINVAL);
            }
            let end = (usize::MAX - 10) as *mut u8;
            assert_eq!(esp32b_client_received(h, id, end, 64), ESP32B_EINVAL);
            assert_eq!(esp32b_spi_arm(h, end, 2048), ESP32B_EINVAL);
            // Good lengths still work.
            assert_eq!(esp32b_client_datagram(h, id, p, 0), 0);
            assert!(esp32b_spi_arm(h, p, buf.len()) >= 0);
            esp32b_free(h);
        }
    }

    /// Calls [`esp32b_udp_received`]: (return value, reply).
    unsafe fn udp_in(h: *mut Esp32b, ip: u32, port: u16, d: &[u8], now: u32) -> (i32, Vec<u8>) {
        let mut reply = [0u8; ESP32B_UDP_REPLY_MAX];
        let mut n = 99usize;
        // SAFETY: caller contract; the buffers are valid.
        let r = unsafe {
            esp32b_udp_received(
                h,
                ip,
                port,
                d.as_ptr(),
                d.len(),
                now,
                reply.as_mut_ptr(),
                reply.len(),
                &mut n,
            )
        };
        (r, reply[..n].to_vec())
    }

    /// Calls [`esp32b_udp_next`] until nothing is left: (destination, client, bytes) each.
    unsafe fn udp_out(h: *mut Esp32b, now: u32) -> Vec<((u32, u16), i32, Vec<u8>)> {
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            let (mut ip, mut port, mut client) = (0u32, 0u16, 0i32);
            // SAFETY: caller contract; the buffers are valid.
            let n = unsafe {
                esp32b_udp_next(
                    h,
                    now,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut ip,
                    &mut port,
                    &mut client,
                )
            };
            assert!(n >= 0);
            if n == 0 {
                return got;
            }
            if client >= 0 {
                // SAFETY: valid handle.
                assert_eq!(
                    unsafe { esp32b_client_sent(h, client as u32, n as usize) },
                    0
                );
            }
            got.push(((ip, port), client, buf[..n as usize].to_vec()));
        }
    }

    /// The ESP32's UDP side, all through the core: an unregistered address gets nothing for an
    /// empty datagram or a CPX packet, a cookie of the request's size for a request, a client
    /// slot only for the echo of its own cookie; then the stream and a probe every second, only
    /// while it echoes the probes; a spoofed alive or leave changes nothing.
    #[test]
    fn finding5_udp_cookie_exchange_through_the_c_entry_points() {
        // SAFETY (whole test): valid handle and buffers, one caller.
        unsafe {
            let h = esp32b_new(core::ptr::null());
            let (ip, port) = (0xC0A8_0402u32, 40_000u16);
            let req = Control::Request.encode();
            assert_eq!(udp_in(h, ip, port, &req, 0), (0, vec![]), "no secret yet");
            assert_eq!(esp32b_udp_secret(h, [9u8; 32].as_ptr()), 0);
            let packet = wire(
                Route {
                    destination: Target::Gap8 as u8,
                    source: Target::WifiHost as u8,
                    last_packet: true,
                    function: Function::App as u8,
                },
                b"hello",
            );
            for d in [&[][..], &[0u8][..], &packet[..]] {
                assert_eq!(udp_in(h, ip, port, d, 5), (0, vec![]));
            }
            let (_, cookie) = udp_in(h, ip, port, &req, 10);
            assert_eq!(cookie.len(), req.len());
            let Some(Control::Cookie(c)) = Control::parse(&cookie) else {
                panic!("no cookie")
            };
            let echo = Control::Echo(c).encode();
            assert_eq!(
                udp_in(h, ip, port + 1, &echo, 20),
                (0, vec![]),
                "another port"
            );
            let (r, welcome) = udp_in(h, ip, port, &echo, 30);
            assert_eq!(r, 1, "a client registered: wake the SPI task");
            let Some(Control::Welcome(w)) = Control::parse(&welcome) else {
                panic!("no welcome")
            };
            assert_eq!(udp_in(h, ip, port, &packet, 40), (1, vec![]), "forwarded");
            // The GAP8 streams: the client gets it, one packet per datagram.
            let down = wire(
                Route::new(Target::Gap8, Target::WifiHost, Function::Test),
                &[5u8; 3000],
            );
            let mut rx = vec![0u8; BUFFER_LEN];
            let mut off = 0;
            while off < down.len() {
                let n = gapstream_protocol::cpx::packet_len(&down[off..])
                    .unwrap()
                    .unwrap();
                rx.fill(0);
                rx[..n].copy_from_slice(&down[off..off + n]);
                esp32b_spi_complete(h, rx.as_ptr(), rx.len());
                off += n;
            }
            let got = udp_out(h, 50);
            assert_eq!(got.len(), 3);
            assert!(got.iter().all(|(to, id, _)| *to == (ip, port) && *id >= 0));
            assert_eq!(got.concat_bytes(), down);
            // A probe a second; only the real token's echo refreshes.
            assert_eq!(esp32b_udp_tick(h, 1_040), 0);
            let probes = udp_out(h, 1_040);
            assert_eq!(probes.len(), 1);
            let Some(Control::Probe(p)) = Control::parse(&probes[0].2) else {
                panic!("no probe")
            };
            assert_eq!((probes[0].0, probes[0].1), ((ip, port), -1));
            let forged = crate::cookie::Token { mac: [0; 16], ..p };
            for d in [
                Control::Alive(forged),
                Control::Leave(forged),
                Control::Echo(w),
            ] {
                assert_eq!(udp_in(h, ip, port, &d.encode(), 1_050), (0, vec![]));
            }
            assert_eq!(
                udp_in(h, ip, port, &Control::Alive(p).encode(), 1_060),
                (0, vec![])
            );
            // Its newest proof was issued at 1040: registered until 6040, whatever else comes.
            for t in (1_100..6_040).step_by(100) {
                udp_in(h, ip, port, &[], t);
                udp_in(h, ip, port, &Control::Alive(forged).encode(), t);
                assert_eq!(esp32b_udp_tick(h, t), 0, "at {t}");
                udp_out(h, t);
            }
            assert_eq!(esp32b_udp_tick(h, 6_040), 1, "expired");
            esp32b_spi_complete(h, rx.as_ptr(), rx.len());
            assert!(udp_out(h, 6_050).is_empty(), "nothing after the deadline");
            let mut st = Esp32bStats::default();
            esp32b_stats(h, &mut st);
            assert_eq!(st.clients, 0);
            // The clock wraps: registration still works across it.
            let near = u32::MAX - 5;
            let (_, cookie) = udp_in(h, ip, 7, &req, near);
            let Some(Control::Cookie(c)) = Control::parse(&cookie) else {
                panic!("no cookie")
            };
            let (r, w) = udp_in(h, ip, 7, &Control::Echo(c).encode(), 100);
            assert_eq!((r, w.len()), (1, 24));
            // A leave with the welcome's token ends it at once.
            let Some(Control::Welcome(t)) = Control::parse(&w) else {
                panic!("no welcome")
            };
            assert_eq!(
                udp_in(h, ip, 7, &Control::Leave(t).encode(), 200),
                (1, vec![])
            );
            esp32b_stats(h, &mut st);
            assert_eq!(st.clients, 0);
            esp32b_free(h);
        }
    }

    trait Concat {
        fn concat_bytes(&self) -> Vec<u8>;
    }
    impl Concat for Vec<((u32, u16), i32, Vec<u8>)> {
        fn concat_bytes(&self) -> Vec<u8> {
            self.iter().flat_map(|x| x.2.iter().copied()).collect()
        }
    }

    #[test]
    fn a_whole_exchange_through_the_c_entry_points() {
        // SAFETY (whole test): valid handle and buffers, one caller.
        unsafe {
            let h = esp32b_new(core::ptr::null());
            assert!(!h.is_null());
            let tcp = esp32b_client_add(h, 0);
            let udp = esp32b_client_add(h, 1);
            assert!(tcp >= 0 && udp >= 0 && tcp != udp);
            // The GAP8 sends a frame-sized message over SPI: every client gets it.
            let down = wire(
                Route::new(Target::Gap8, Target::WifiHost, Function::Test),
                &[5u8; 3000],
            );
            let mut rx = vec![0u8; BUFFER_LEN];
            let mut done = 0;
            let mut off = 0;
            while off < down.len() {
                let n = gapstream_protocol::cpx::packet_len(&down[off..])
                    .unwrap()
                    .unwrap();
                rx.fill(0);
                rx[..n].copy_from_slice(&down[off..off + n]);
                done += esp32b_spi_complete(h, rx.as_ptr(), rx.len());
                off += n;
            }
            assert_eq!(done, 1);
            let mut out = vec![0u8; 1500];
            let mut got = Vec::new();
            loop {
                let n = esp32b_client_next(h, tcp as u32, out.as_mut_ptr(), 700);
                assert!(n >= 0);
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&out[..n as usize]);
                assert_eq!(esp32b_client_sent(h, tcp as u32, n as usize), 0);
            }
            assert_eq!(got, down);
            // UDP: one packet per datagram; a small buffer is refused, not truncated.
            assert_eq!(
                esp32b_client_next(h, udp as u32, out.as_mut_ptr(), 10),
                ESP32B_EINVAL
            );
            let n = esp32b_client_next(h, udp as u32, out.as_mut_ptr(), out.len());
            assert_eq!(n, 1024);
            // The receiver answers over TCP: the ESP32 arms a transaction carrying it.
            let up = wire(
                Route::new(Target::WifiHost, Target::Gap8, Function::Test),
                b"hello",
            );
            // First the two "client connected" notifications (WIFI_CTRL [0x32, 1]).
            let mut tx = vec![0u8; esp32b_spi_buffer_len() as usize];
            for _ in 0..2 {
                assert_eq!(esp32b_spi_should_arm(h, 0), 1);
                assert_eq!(esp32b_spi_arm(h, tx.as_mut_ptr(), tx.len()), 6);
                assert_eq!(tx[..6], [4, 0, 4 | 2 << 3 | 1 << 6, 4, 0x32, 1]);
            }
            assert_eq!(esp32b_spi_should_arm(h, 0), 0);
            assert_eq!(
                esp32b_client_received(h, tcp as u32, up.as_ptr(), up.len()),
                1
            );
            assert_eq!(esp32b_spi_should_arm(h, 0), 1);
            assert_eq!(
                esp32b_spi_arm(h, tx.as_mut_ptr(), tx.len()),
                up.len() as i32
            );
            assert_eq!(&tx[..up.len()], &up[..]);
            // Errors are codes, never panics.
            assert_eq!(esp32b_client_sent(h, 99, 1), ESP32B_ENOCLIENT);
            assert_eq!(esp32b_spi_arm(h, tx.as_mut_ptr(), 10), ESP32B_EINVAL);
            assert_eq!(
                esp32b_spi_complete(h, [0xFFu8, 0xFF, 0, 0].as_ptr(), 4),
                ESP32B_ECPX
            );
            assert_eq!(
                esp32b_client_received(core::ptr::null_mut(), 0, up.as_ptr(), 1),
                ESP32B_EINVAL
            );
            let mut st = Esp32bStats::default();
            assert_eq!(esp32b_stats(h, &mut st), 0);
            assert_eq!(
                (st.clients, st.packets_from_gap8, st.packets_to_gap8),
                (2, 3, 3)
            );
            assert_eq!(esp32b_client_remove(h, tcp as u32), 0);
            assert_eq!(esp32b_client_remove(h, tcp as u32), ESP32B_ENOCLIENT);
            esp32b_free(h);
        }
    }
}
