//! The forwarding core driven by std / tokio sockets: the ESP32 as it runs on the host.
//!
//! - SPI side: a TCP listener standing in for the SPI link; the simulated drone connects to it
//!   (one GAP8 at a time: while one link is up, a second connection is refused, so nobody else
//!   on the machine can take the stream over; a restarted GAP8 connects again once its old
//!   connection is closed).
//! - WiFi side: a TCP server (port 5000 like the stock firmware) and a UDP socket. Who gets the
//!   stream over UDP is the [`crate::cookie::Gate`]'s decision: an address registers by echoing a
//!   cookie the bridge sent to it, and stays registered only while it echoes the probes the bridge
//!   sends it every second (`HostConfig::udp`, [`GateConfig`]); until then it gets nothing but a
//!   cookie of its request's size. Stream packets go to a UDP client only before its deadline.
//!   UDP and TCP clients have separate slots.
//! - Refusals (datagrams from unregistered addresses, full slots, a second GAP8) are logged at
//!   most once a second, with the number left out.
//!
//! Every socket has its own task; the core sits behind one mutex that is never held across I/O.
//! A client that cannot take bytes for [`HostConfig::client_write_timeout`] is disconnected.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Notify;

use crate::cookie::{Event, Gate, GateConfig, Outcome};
use crate::fec::{Fec, FecClientStats, FecConfig};
use crate::forward::{Bridge, BridgeError, ClientId, Config, Transport};
use crate::netsim::{Air, Channel, LossChannel, LossModel, WifiModel};

/// Where the host bridge listens and how patient it is.
#[derive(Clone, Debug)]
pub struct HostConfig {
    pub spi_listen: SocketAddr,
    pub tcp_listen: SocketAddr,
    pub udp_listen: Option<SocketAddr>,
    pub core: Config,
    /// The UDP registration: timeout, probe interval, budgets.
    pub udp: GateConfig,
    pub client_write_timeout: Duration,
    /// Print one line per connection event on stderr.
    pub verbose: bool,
    /// Forward error correction for the UDP clients that ask for it ([`crate::fec`]).
    pub fec: FecConfig,
    /// The WiFi model: a rate shared by all clients and backpressure to the SPI side (`None`:
    /// as fast as the sockets go).
    pub wifi: Option<WifiModel>,
    /// Under the WiFi model: the access point's channel this bridge shares with other bridges (a
    /// swarm's decks on one access point: every byte also takes its airtime there). `None`: the
    /// bridge has the channel to itself.
    pub channel: Option<Arc<Channel>>,
    /// Loss on the UDP output (tests and demos).
    pub udp_loss: Option<LossModel>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            spi_listen: "127.0.0.1:5100".parse().expect("static address"),
            tcp_listen: "127.0.0.1:5000".parse().expect("static address"),
            udp_listen: Some("127.0.0.1:5000".parse().expect("static address")),
            core: Config::default(),
            udp: GateConfig::default(),
            client_write_timeout: Duration::from_secs(3),
            verbose: false,
            fec: FecConfig::default(),
            wifi: None,
            channel: None,
            udp_loss: None,
        }
    }
}

struct Shared {
    core: Mutex<Bridge>,
    wakers: Mutex<HashMap<ClientId, Arc<Notify>>>,
    spi_notify: Notify,
    udp_notify: Notify,
    /// Locked before `core` when both are needed.
    udp: Mutex<UdpGate>,
    refusals: Mutex<RateLimitedLog>,
    refused: AtomicU64,
    verbose: bool,
    /// FEC state of the UDP clients. Lock order: `udp`, then `fec`, then `core`.
    fec: Mutex<Fec>,
    /// The FEC's millisecond clock starts here.
    start: Instant,
    /// The WiFi model's channel and queue limit.
    air: Option<Air>,
    wifi_queue: Option<usize>,
    loss: Option<LossModel>,
    loss_channels: Mutex<HashMap<ClientId, LossChannel>>,
    udp_lost: AtomicU64,
}

/// The UDP registration and its clock.
struct UdpGate {
    gate: Gate,
    start: Instant,
}

impl UdpGate {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
}

fn fresh_secret() -> io::Result<[u8; 32]> {
    let mut s = [0u8; 32];
    getrandom::fill(&mut s).map_err(|e| io::Error::other(format!("no random numbers: {e}")))?;
    Ok(s)
}

/// At most one line per `window`: the first refusal is printed, the ones in the next `window`
/// are only counted, and the next line printed says how many were left out.
struct RateLimitedLog {
    window: Duration,
    last: Option<Instant>,
    left_out: u64,
}

impl RateLimitedLog {
    fn new(window: Duration) -> Self {
        RateLimitedLog {
            window,
            last: None,
            left_out: 0,
        }
    }

    /// The line to print for this event now, if any.
    fn note(&mut self, now: Instant, what: &str) -> Option<String> {
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < self.window)
        {
            self.left_out += 1;
            return None;
        }
        let line = if self.left_out > 0 {
            format!(
                "{what} (and {} more refused since the last such line)",
                self.left_out
            )
        } else {
            what.to_string()
        };
        self.last = Some(now);
        self.left_out = 0;
        Some(line)
    }
}

impl Shared {
    fn core(&self) -> std::sync::MutexGuard<'_, Bridge> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn udp(&self) -> std::sync::MutexGuard<'_, UdpGate> {
        self.udp.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn fec(&self) -> std::sync::MutexGuard<'_, Fec> {
        self.fec.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }
    /// Whether the loss model drops the next datagram to client `id`.
    fn lose_datagram(&self, id: ClientId) -> bool {
        let Some(m) = &self.loss else { return false };
        self.loss_channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id)
            .or_insert_with(|| m.channel(u64::from(id)))
            .lose()
    }
    fn wake_clients(&self) {
        for n in self
            .wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            n.notify_one();
        }
        self.udp_notify.notify_one();
    }
    fn log(&self, msg: std::fmt::Arguments<'_>) {
        if self.verbose {
            eprintln!("esp32-bridge: {msg}");
        }
    }
    /// A refused datagram or connection: counted, logged at most once a second.
    fn refuse(&self, msg: std::fmt::Arguments<'_>) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if !self.verbose {
            return;
        }
        let line = self
            .refusals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .note(Instant::now(), &msg.to_string());
        if let Some(l) = line {
            eprintln!("esp32-bridge: {l}");
        }
    }
    fn drop_client(&self, id: ClientId) {
        self.wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        self.fec().forget(id);
        let left = self.core().remove_client(id);
        if let Some(st) = left {
            // The last client leaving queues WIFI_CTRL "client disconnected" for the GAP8.
            self.spi_notify.notify_one();
            self.log(format_args!(
                "client {id} left (sent {} messages, dropped {} frames for it)",
                st.messages_sent, st.frames_dropped
            ));
        }
    }
}

/// A bridge running on its own tokio runtime (own threads). Dropping it stops it and closes every
/// socket, like pulling the ESP32's power.
pub struct HostBridge {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
    pub spi_addr: SocketAddr,
    pub tcp_addr: SocketAddr,
    pub udp_addr: Option<SocketAddr>,
}

impl HostBridge {
    /// Binds every socket (port 0 picks free ports) and starts serving.
    pub fn start(cfg: HostConfig) -> io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("esp32-bridge")
            .enable_all()
            .build()?;
        cfg.fec
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let shared = Arc::new(Shared {
            core: Mutex::new(Bridge::new(cfg.core)),
            fec: Mutex::new(Fec::new(cfg.fec)),
            start: Instant::now(),
            air: cfg.wifi.map(|w| match &cfg.channel {
                Some(c) => Air::on_channel(w.mbps, c.clone()),
                None => Air::new(w.mbps),
            }),
            wifi_queue: cfg.wifi.map(|w| w.queue_bytes),
            loss: cfg.udp_loss,
            loss_channels: Mutex::new(HashMap::new()),
            udp_lost: AtomicU64::new(0),
            wakers: Mutex::new(HashMap::new()),
            spi_notify: Notify::new(),
            udp_notify: Notify::new(),
            udp: Mutex::new(UdpGate {
                gate: Gate::new(fresh_secret()?, cfg.udp),
                start: Instant::now(),
            }),
            refusals: Mutex::new(RateLimitedLog::new(Duration::from_secs(1))),
            refused: AtomicU64::new(0),
            verbose: cfg.verbose,
        });
        let small_spi_buffer = cfg.wifi.is_some();
        let (spi, tcp, udp) = runtime.block_on(async {
            let spi = if small_spi_buffer {
                spi_listener_for_wifi_model(cfg.spi_listen)?
            } else {
                TcpListener::bind(cfg.spi_listen).await?
            };
            let tcp = TcpListener::bind(cfg.tcp_listen).await?;
            let udp = match cfg.udp_listen {
                Some(a) => Some(Arc::new(UdpSocket::bind(a).await?)),
                None => None,
            };
            io::Result::Ok((spi, tcp, udp))
        })?;
        let spi_addr = spi.local_addr()?;
        let tcp_addr = tcp.local_addr()?;
        let udp_addr = match &udp {
            Some(u) => Some(u.local_addr()?),
            None => None,
        };
        runtime.spawn(spi_side(spi, shared.clone()));
        runtime.spawn(tcp_side(tcp, shared.clone(), cfg.client_write_timeout));
        if let Some(u) = udp {
            runtime.spawn(udp_reader(u.clone(), shared.clone()));
            runtime.spawn(udp_writer(u.clone(), shared.clone()));
            runtime.spawn(udp_timers(u, shared.clone()));
        }
        Ok(HostBridge {
            runtime: Some(runtime),
            shared,
            spi_addr,
            tcp_addr,
            udp_addr,
        })
    }

    /// Datagrams and connections refused so far (unregistered UDP addresses, bad cookies, full
    /// slots, a second GAP8).
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// UDP clients registered now.
    pub fn udp_clients(&self) -> usize {
        self.shared.udp().gate.len()
    }

    /// The UDP registration's counters.
    pub fn udp_stats(&self) -> crate::cookie::GateStats {
        self.shared.udp().gate.stats()
    }

    /// Datagrams the loss model dropped on the UDP output.
    pub fn udp_lost(&self) -> u64 {
        self.shared.udp_lost.load(Ordering::Relaxed)
    }

    /// FEC counters of every client that asked for it, summed.
    pub fn fec_totals(&self) -> FecClientStats {
        self.shared.fec().totals()
    }

    /// Runs `f` on the core (for statistics).
    pub fn with_core<R>(&self, f: impl FnOnce(&Bridge) -> R) -> R {
        f(&self.shared.core())
    }

    /// Waits until a GAP8 (or the simulated node) has connected to the SPI side, at most
    /// `timeout`; true when it has. Messages that clients send towards the GAP8 before its link is
    /// up are dropped when it comes up (a restarted GAP8 must not see stale handshake messages).
    pub fn wait_gap8_link(&self, timeout: Duration) -> bool {
        let end = std::time::Instant::now() + timeout;
        loop {
            if self.with_core(|b| b.stats().spi_resets) > 0 {
                return true;
            }
            if std::time::Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops the bridge and closes every socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_millis(200));
        }
    }
}

impl Drop for HostBridge {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The SPI-side listener under the WiFi model. Its backpressure must reach the GAP8 after a few
/// packets, not after the megabytes a localhost connection buffers (a real SPI link holds one
/// packet): a 16 KiB receive buffer, and segments of an Ethernet MSS instead of loopback's 64 KiB
/// (with 64 KiB segments a small window never reopens by one segment and the sender falls back to
/// zero-window probes, and the sender's buffer grows with its window of ten such segments).
fn spi_listener_for_wifi_model(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_recv_buffer_size(16 * 1024)?;
    s.set_tcp_mss(1460)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(4)?;
    TcpListener::from_std(s.into())
}

async fn spi_side(listener: TcpListener, shared: Arc<Shared>) {
    let mut current: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let Ok((sock, peer)) = listener.accept().await else {
            continue;
        };
        if current.as_ref().is_some_and(|h| !h.is_finished()) {
            shared.refuse(format_args!(
                "refusing a second GAP8 link from {peer}: one is up"
            ));
            drop(sock);
            continue;
        }
        let _ = sock.set_nodelay(true);
        shared.core().spi_reset();
        shared.log(format_args!("GAP8 link up ({peer})"));
        let sh = shared.clone();
        current = Some(tokio::spawn(async move {
            let (mut rd, mut wr) = sock.into_split();
            let sh2 = sh.clone();
            let writer = tokio::spawn(async move {
                loop {
                    let work = sh2.core().next_for_spi();
                    match work {
                        Some((bytes, r)) => match wr.write(&bytes[r]).await {
                            Ok(n) if n > 0 => sh2.core().spi_sent(n),
                            _ => return,
                        },
                        None => sh2.spi_notify.notified().await,
                    }
                }
            });
            // Under the WiFi model the SPI side reads about a packet at a time and waits while
            // every client's queue is full.
            let mut buf = vec![
                0u8;
                if sh.wifi_queue.is_some() {
                    2048
                } else {
                    64 * 1024
                }
            ];
            loop {
                if let Some(q) = sh.wifi_queue {
                    while sh.core().wifi_backlogged(q) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
                match rd.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let done = sh.core().spi_received(&buf[..n]);
                        if done > 0 {
                            sh.wake_clients();
                        }
                    }
                }
            }
            writer.abort();
            sh.log(format_args!("GAP8 link down"));
        }));
    }
}

/// The kernel send buffer asked for each TCP client (Linux doubles it): about three raw 324×244
/// frames, so that what waits for a slow client waits in the core's queue. Not less: on loopback
/// a TCP segment is up to 64 KiB, and a buffer with room for one segment waits for a delayed ACK
/// after each (32 KiB capped the demo's stream near its own rate: p50 65 ms instead of 24.5 ms,
/// and drops).
pub const CLIENT_SEND_BUFFER: usize = 128 * 1024;

async fn tcp_side(listener: TcpListener, shared: Arc<Shared>, write_timeout: Duration) {
    loop {
        let Ok((sock, peer)) = listener.accept().await else {
            continue;
        };
        let id = match shared.core().add_client(Transport::Tcp) {
            Ok(id) => id,
            Err(e) => {
                shared.refuse(format_args!("refusing TCP {peer}: {e}"));
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        // The core's queue is the backlog, with its whole-frame drops; a kernel send buffer that
        // autotuning grows to megabytes would be a second one, hiding seconds of stream from
        // the drop policy (an ESP32's lwIP has a few KiB).
        let _ = socket2::SockRef::from(&sock).set_send_buffer_size(CLIENT_SEND_BUFFER);
        // The core queued WIFI_CTRL "client connected" for the GAP8.
        shared.spi_notify.notify_one();
        let waker = Arc::new(Notify::new());
        shared
            .wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, waker.clone());
        let leader = shared.core().leader() == Some(id);
        shared.log(format_args!(
            "client {id} connected over TCP from {peer}{}",
            if leader { " (leader)" } else { "" }
        ));
        tokio::spawn(tcp_client(sock, id, waker, shared.clone(), write_timeout));
    }
}

async fn tcp_client(
    sock: TcpStream,
    id: ClientId,
    waker: Arc<Notify>,
    shared: Arc<Shared>,
    write_timeout: Duration,
) {
    let (mut rd, mut wr) = sock.into_split();
    let sh = shared.clone();
    let mut writer = tokio::spawn(async move {
        loop {
            let work = sh.core().next_for_client(id);
            match work {
                Some((bytes, mut r)) => {
                    if let Some(air) = &sh.air {
                        // A TCP segment's worth at a time, each after its airtime.
                        r.end = r.end.min(r.start + 1460);
                        tokio::time::sleep_until(air.reserve(r.len()).into()).await;
                    }
                    match tokio::time::timeout(write_timeout, wr.write(&bytes[r])).await {
                        Ok(Ok(n)) if n > 0 => sh.core().client_sent(id, n),
                        Ok(_) => return "connection closed",
                        Err(_) => return "too slow (write timed out)",
                    }
                }
                None => waker.notified().await,
            }
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    let why = loop {
        tokio::select! {
            r = rd.read(&mut buf) => match r {
                Ok(0) => break "closed by peer".to_string(),
                Err(e) => break e.to_string(),
                Ok(n) => {
                    let res = shared.core().client_received(id, &buf[..n]);
                    match res {
                        Ok(k) => if k > 0 { shared.spi_notify.notify_one() },
                        Err(BridgeError::Cpx(e)) => break format!("garbled CPX from client: {e}"),
                        Err(e) => break e.to_string(),
                    }
                }
            },
            w = &mut writer => break w.map(str::to_string).unwrap_or_else(|e| e.to_string()),
        }
    };
    writer.abort();
    shared.log(format_args!("client {id}: {why}"));
    shared.drop_client(id);
}

async fn udp_reader(sock: Arc<UdpSocket>, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 2048];
    loop {
        let Ok((n, peer)) = sock.recv_from(&mut buf).await else {
            continue;
        };
        let d = &buf[..n];
        // A registered client's FEC request or loss report (`crate::fec`): for the FEC state, not
        // the forwarding core.
        if gapstream_fec::wire::is_fec(d) {
            let id = shared
                .udp()
                .gate
                .clients()
                .find(|(a, _)| *a == peer)
                .map(|(_, id)| id);
            match id {
                Some(id) => {
                    shared.fec().client_datagram(id, d);
                }
                None => shared.refuse(format_args!(
                    "UDP {peer}: FEC datagram from an unregistered address"
                )),
            }
            continue;
        }
        let outcome = {
            let mut u = shared.udp();
            let now = u.now_ms();
            let mut core = shared.core();
            u.gate.datagram(&mut core, peer, d, now)
        };
        match outcome {
            Outcome::Reply(r) => {
                let _ = sock.send_to(&r, peer).await;
            }
            Outcome::Registered {
                id,
                welcome,
                evicted,
            } => {
                if let Some((a, e)) = evicted {
                    shared.log(format_args!(
                        "client {e} (UDP {a}) evicted: no proof for a while, its slot goes to {peer}"
                    ));
                }
                shared.log(format_args!("client {id} registered over UDP from {peer}"));
                // The core has queued the client-connected status for the GAP8.
                shared.spi_notify.notify_one();
                let _ = sock.send_to(&welcome, peer).await;
                shared.udp_notify.notify_one();
            }
            Outcome::Refreshed(_) => {}
            Outcome::Left(id) => {
                shared.log(format_args!("client {id} (UDP {peer}) left"));
                shared.spi_notify.notify_one();
            }
            Outcome::Forwarded(_, Ok(k)) => {
                if k > 0 {
                    shared.spi_notify.notify_one();
                }
            }
            Outcome::Forwarded(id, Err(e)) => {
                shared.refuse(format_args!("client {id}: dropped datagram: {e}"))
            }
            Outcome::Refused(why) => shared.refuse(format_args!("UDP {peer}: {why} ({n} bytes)")),
        }
    }
}

async fn udp_writer(sock: Arc<UdpSocket>, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 2048];
    loop {
        let (start, peers) = {
            let u = shared.udp();
            let peers: Vec<(SocketAddr, ClientId)> = u.gate.clients().collect();
            (u.start, peers)
        };
        // Clients the registration dropped keep no FEC state.
        shared
            .fec()
            .retain(|id| peers.iter().any(|(_, p)| *p == id));
        let mut sent_any = false;
        for (addr, id) in peers {
            // A few datagrams per client per round, so one client cannot starve the others.
            for _ in 0..16 {
                // Nothing after the registration's deadline, however late the timers run.
                let now = start.elapsed().as_millis() as u64;
                if !shared.udp().gate.sendable(id, now) {
                    break;
                }
                let fec_now = shared.now_ms();
                let n = {
                    let mut fec = shared.fec();
                    let mut core = shared.core();
                    fec.next_datagram(&mut core, id, fec_now, &mut buf)
                };
                let Some(n) = n else { break };
                if let Some(air) = &shared.air {
                    tokio::time::sleep_until(air.reserve(n).into()).await;
                }
                if shared.lose_datagram(id) {
                    shared.udp_lost.fetch_add(1, Ordering::Relaxed);
                } else {
                    // A failed send (for example ECONNREFUSED from a closed port) loses this datagram only.
                    let _ = sock.send_to(&buf[..n], addr).await;
                }
                {
                    let mut fec = shared.fec();
                    let mut core = shared.core();
                    fec.datagram_sent(&mut core, id, fec_now);
                }
                sent_any = true;
            }
        }
        if !sent_any {
            // Nothing queued: wait for the core, or for the FEC block timeout to close a block.
            let deadline = shared.fec().next_deadline();
            match deadline {
                Some(t) => {
                    let wait = t.saturating_sub(shared.now_ms()).max(1);
                    let _ = tokio::time::timeout(
                        Duration::from_millis(wait),
                        shared.udp_notify.notified(),
                    )
                    .await;
                    let now = shared.now_ms();
                    shared.fec().tick(now);
                }
                None => shared.udp_notify.notified().await,
            }
        }
    }
}

/// The registration's timers: probes, expiry, secret rotation.
async fn udp_timers(sock: Arc<UdpSocket>, shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut events = Vec::new();
        {
            let mut u = shared.udp();
            let now = u.now_ms();
            let mut core = shared.core();
            u.gate
                .poll(&mut core, now, || fresh_secret().ok(), |e| events.push(e));
        }
        for e in events {
            match e {
                Event::Probe(addr, d) => {
                    let _ = sock.send_to(&d, addr).await;
                }
                Event::Expired(addr, id) => {
                    shared.log(format_args!(
                        "client {id} (UDP {addr}) timed out: no current proof that it receives"
                    ));
                    // The last client leaving queues WIFI_CTRL "client disconnected".
                    shared.spi_notify.notify_one();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cookie::{self, Client, ClientConfig, Control, Received, Status};
    use crate::cpx::{MessageAssembler, Route, Target, encode_packet};
    use std::io::{Read, Write};
    use std::net::{TcpStream as StdTcp, UdpSocket as StdUdp};

    fn message(tag: u8, len: usize, src: Target, dst: Target) -> Vec<u8> {
        let payload: Vec<u8> = (0..len).map(|i| tag ^ (i * 7) as u8).collect();
        let chunks: Vec<&[u8]> = payload.chunks(1020).collect();
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

    fn local() -> HostConfig {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        HostConfig {
            spi_listen: any,
            tcp_listen: any,
            udp_listen: Some(any),
            ..HostConfig::default()
        }
    }

    fn read_messages(s: &mut StdTcp, n: usize) -> Vec<Vec<u8>> {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut a = MessageAssembler::new(1 << 20);
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        while got.len() < n {
            let k = s.read(&mut buf).expect("bridge sends in time");
            assert!(k > 0, "bridge closed the connection");
            a.push(&buf[..k], |m| got.push(m.bytes), |e| panic!("{e}"));
        }
        got
    }

    #[test]
    fn tcp_and_udp_clients_get_the_stream_and_upstream_reaches_the_gap8() {
        let b = HostBridge::start(local()).unwrap();
        let mut gap8 = StdTcp::connect(b.spi_addr).unwrap();
        let mut leader = StdTcp::connect(b.tcp_addr).unwrap();
        let mut listener = StdTcp::connect(b.tcp_addr).unwrap();
        let udp = StdUdp::bind("127.0.0.1:0").unwrap();
        register(&udp, b.udp_addr.unwrap()).unwrap();
        // Wait until the bridge registered all three.
        let t0 = Instant::now();
        while b.with_core(|c| c.client_ids().count()) < 3 {
            assert!(t0.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        let frames: Vec<Vec<u8>> = (0..3)
            .map(|t| message(t, 20_000, Target::Gap8, Target::WifiHost))
            .collect();
        for f in &frames {
            gap8.write_all(f).unwrap();
        }
        assert_eq!(read_messages(&mut leader, 3), frames);
        assert_eq!(read_messages(&mut listener, 3), frames);
        // UDP: one packet per datagram.
        udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut a = MessageAssembler::new(1 << 20);
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        while got.len() < 3 {
            let (n, _) = udp.recv_from(&mut buf).unwrap();
            if cookie::is_control(&buf[..n]) {
                continue; // a probe
            }
            a.push(&buf[..n], |m| got.push(m.bytes), |e| panic!("{e}"));
        }
        assert_eq!(got, frames);
        // One listener leaves; the others keep receiving.
        drop(listener);
        let up = message(9, 50, Target::WifiHost, Target::Gap8);
        leader.write_all(&up).unwrap();
        // Before it, the GAP8 got "client connected" (WIFI_CTRL [0x32, 1]): once per client, or
        // fewer when clients connected before the bridge saw the GAP8's link come up (a link reset
        // clears the queue and reports the status once).
        let status = [4u8, 0, 4 | 2 << 3 | 1 << 6, 4, 0x32, 1];
        gap8.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut seen = 0;
        loop {
            let mut p = [0u8; 6];
            gap8.read_exact(&mut p).unwrap();
            if p != status {
                let mut back = p.to_vec();
                back.resize(up.len(), 0);
                gap8.read_exact(&mut back[6..]).unwrap();
                assert_eq!(back, up);
                break;
            }
            seen += 1;
        }
        assert!((1..=3).contains(&seen), "{seen} status packets");
        let f = message(7, 5000, Target::Gap8, Target::WifiHost);
        gap8.write_all(&f).unwrap();
        assert_eq!(read_messages(&mut leader, 1), vec![f]);
        b.stop();
        // Stopped: connections are closed.
        let mut one = [0u8; 1];
        leader
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert!(matches!(leader.read(&mut one), Ok(0) | Err(_)));
    }

    /// Milliseconds since `t0`: the clock a test gives the registration's client.
    fn ms(t0: Instant) -> u64 {
        t0.elapsed().as_millis() as u64
    }

    /// Registers `udp` with the bridge at `to` as a receiver does (the `cookie::Client` state
    /// machine, its clock from the returned instant), at most `within`.
    fn register_within(
        udp: &StdUdp,
        to: SocketAddr,
        within: Duration,
    ) -> Result<(Client, Instant), String> {
        let t0 = Instant::now();
        let mut c = Client::new(
            ClientConfig {
                register_timeout_ms: within.as_millis() as u64,
                ..ClientConfig::default()
            },
            0,
        );
        udp.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut buf = [0u8; 2048];
        loop {
            while let Some(d) = c.poll_transmit(ms(t0)) {
                udp.send_to(&d, to).unwrap();
            }
            match c.status(ms(t0)) {
                Status::Registered => return Ok((c, t0)),
                Status::Registering => {}
                s => return Err(format!("{s:?}")),
            }
            if let Ok((n, _)) = udp.recv_from(&mut buf) {
                c.handle(&buf[..n], ms(t0));
            }
        }
    }

    fn register(udp: &StdUdp, to: SocketAddr) -> Result<(Client, Instant), String> {
        register_within(udp, to, Duration::from_secs(2))
    }

    /// Keeps registered clients registered, as receivers do (they answer every probe), and
    /// drains what they receive, until `done` is set.
    fn keep_registered(
        clients: Vec<(StdUdp, Client, Instant)>,
        to: SocketAddr,
        done: Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<Vec<Status>> {
        std::thread::spawn(move || {
            let mut clients = clients;
            for (s, ..) in &clients {
                s.set_nonblocking(true).unwrap();
            }
            let mut buf = [0u8; 2048];
            while !done.load(Ordering::Relaxed) {
                for (s, c, t0) in &mut clients {
                    while let Ok((n, _)) = s.recv_from(&mut buf) {
                        c.handle(&buf[..n], ms(*t0));
                    }
                    while let Some(d) = c.poll_transmit(ms(*t0)) {
                        let _ = s.send_to(&d, to);
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            clients.iter().map(|(_, c, t0)| c.status(ms(*t0))).collect()
        })
    }

    /// A bridge with a GAP8 streaming 20 KB frames to it (on a thread) until the flag is set.
    fn streaming(
        b: &HostBridge,
    ) -> (
        Arc<std::sync::atomic::AtomicBool>,
        std::thread::JoinHandle<()>,
    ) {
        let mut gap8 = StdTcp::connect(b.spi_addr).unwrap();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let t = std::thread::spawn(move || {
            let mut k = 0u8;
            while !st.load(Ordering::Relaxed) {
                if gap8
                    .write_all(&message(k, 20_000, Target::Gap8, Target::WifiHost))
                    .is_err()
                {
                    return;
                }
                k = k.wrapping_add(1);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        (stop, t)
    }

    /// An empty datagram (28 bytes on the wire with its IPv4 and UDP headers) from an address the
    /// bridge does not know, while frames flow: nothing comes back, and the address gets no slot.
    /// A request gets a cookie of its own size, stray bytes get nothing; no frame data at all.
    #[test]
    fn finding5_empty_datagram_from_a_new_address_gets_no_larger_reply_and_no_frame_data() {
        let b = HostBridge::start(local()).unwrap();
        let (stop, t) = streaming(&b);
        let to = b.udp_addr.unwrap();
        let probe = StdUdp::bind("127.0.0.1:0").unwrap();
        probe
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut sent = 0usize;
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        let req = Control::Request.encode();
        for d in [&[][..], &[0u8][..], &[0u8; 3][..], &req[..], &[][..]] {
            probe.send_to(d, to).unwrap();
            sent += d.len();
            let t0 = Instant::now();
            let mut replies = Vec::new();
            while t0.elapsed() < Duration::from_millis(400) {
                if let Ok((n, _)) = probe.recv_from(&mut buf) {
                    assert!(
                        n <= d.len(),
                        "a {n}-byte reply to a {}-byte datagram",
                        d.len()
                    );
                    replies.push(buf[..n].to_vec());
                }
            }
            if d.len() < req.len() {
                assert!(
                    replies.is_empty(),
                    "a reply to {} bytes: {replies:?}",
                    d.len()
                );
            }
            got.extend(replies);
        }
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(matches!(Control::parse(&got[0]), Some(Control::Cookie(_))));
        let back: usize = got.iter().map(Vec::len).sum();
        assert!(back <= sent, "{back} bytes back for {sent}");
        assert_eq!(b.udp_clients(), 0, "no slot without the echo");
        assert!(b.refused() >= 4);
        // Who echoes the cookie gets the stream.
        register(&probe, to).unwrap();
        assert_eq!(b.udp_clients(), 1);
        let mut a = MessageAssembler::new(1 << 20);
        let mut frames = 0;
        probe
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        while frames < 2 {
            let (n, _) = probe.recv_from(&mut buf).unwrap();
            if !cookie::is_control(&buf[..n]) {
                a.push(&buf[..n], |_| frames += 1, |e| panic!("{e}"));
            }
        }
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }

    /// A cookie is bound to the address it was sent to: echoed from another port (a spoofer who
    /// did not receive it), it registers nothing.
    #[test]
    fn finding5_a_cookie_echoed_from_another_address_registers_nothing() {
        let b = HostBridge::start(local()).unwrap();
        let to = b.udp_addr.unwrap();
        let (u1, u2) = (
            StdUdp::bind("127.0.0.1:0").unwrap(),
            StdUdp::bind("127.0.0.1:0").unwrap(),
        );
        u1.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        u2.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        u1.send_to(&Control::Request.encode(), to).unwrap();
        let mut buf = [0u8; 64];
        let (k, _) = u1.recv_from(&mut buf).unwrap();
        let Some(Control::Cookie(c)) = Control::parse(&buf[..k]) else {
            panic!("no cookie")
        };
        u2.send_to(&Control::Echo(c).encode(), to).unwrap();
        assert!(u2.recv_from(&mut buf).is_err(), "no welcome");
        assert_eq!(b.udp_clients(), 0);
    }

    /// Thousands of tiny datagrams from 400 source addresses, and clients that complete the
    /// cookie exchange from 6 addresses: at most the UDP slots are taken, and a TCP receiver
    /// that connects afterwards gets its slot and the stream.
    #[test]
    fn finding5_a_flood_of_tiny_datagrams_from_many_sources_cannot_lock_out_a_tcp_receiver() {
        let b = HostBridge::start(HostConfig {
            // Registrations that last the whole test without answering probes.
            udp: GateConfig {
                timeout_ms: 60_000,
                stale_ms: 60_000,
                ..GateConfig::default()
            },
            ..local()
        })
        .unwrap();
        let (stop, t) = streaming(&b);
        let to = b.udp_addr.unwrap();
        let flood: Vec<StdUdp> = (0..400)
            .map(|i| StdUdp::bind(format!("127.0.{}.{}:0", 1 + i / 200, 1 + i % 200)).unwrap())
            .collect();
        // In batches, each read by the bridge before the next is sent: on a busy machine a burst
        // of 4000 datagrams overflows the socket's receive buffer while the bridge waits for a
        // core, and the kernel drops what the test then counts on seeing refused.
        for _ in 0..5 {
            for batch in flood.chunks(25) {
                for s in batch {
                    let _ = s.send_to(&[], to);
                    let _ = s.send_to(&[0x55], to);
                }
                wait_until_refusals_settle(&b);
            }
        }
        // Proven clients from 6 addresses, 3 each, fill the UDP slots (2 per address, 4 in
        // all) ...
        let mut welcomed = 0;
        let mut keep = Vec::new();
        for i in 0..6 {
            for _ in 0..3 {
                let s = StdUdp::bind(format!("127.1.0.{}:0", 1 + i)).unwrap();
                if register_within(&s, to, Duration::from_millis(400)).is_ok() {
                    welcomed += 1;
                }
                keep.push(s);
            }
        }
        let udp_slots = Config::default().max_udp_clients;
        assert_eq!(welcomed, udp_slots);
        assert_eq!(b.udp_clients(), udp_slots);
        // ... yet every TCP slot is free: a receiver connects and gets frames.
        for _ in 0..Config::default().max_clients {
            let mut tcp = StdTcp::connect(b.tcp_addr).unwrap();
            assert_eq!(read_messages(&mut tcp, 1).len(), 1);
        }
        assert!(b.refused() >= 1000, "refused {}", b.refused());
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }

    /// Returns once the bridge's refusal count has not moved for 20 ms (at most 5 s).
    fn wait_until_refusals_settle(b: &HostBridge) {
        let t0 = Instant::now();
        let (mut last, mut since) = (b.refused(), Instant::now());
        while since.elapsed() < Duration::from_millis(20) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(2));
            let now = b.refused();
            if now != last {
                (last, since) = (now, Instant::now());
            }
        }
    }

    /// Every datagram `sock` receives until `done` is set, with its arrival time after `t0`.
    fn record_arrivals(
        sock: &StdUdp,
        t0: Instant,
        done: Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<Vec<(Duration, Vec<u8>)>> {
        let rx = sock.try_clone().unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 2048];
            while !done.load(Ordering::Relaxed) {
                if let Ok((n, _)) = rx.recv_from(&mut buf) {
                    got.push((t0.elapsed(), buf[..n].to_vec()));
                }
            }
            got
        })
    }

    /// What an off-path attacker can send from the victim's address: anything not derived from
    /// the datagrams the victim received (it never sees those), including the tokens the bridge
    /// sent to the attacker's own, registered, address (`own`). Each round has one of each.
    fn off_path_datagrams(round: u32, own: &[cookie::Token]) -> Vec<Vec<u8>> {
        let noise = |k: u32| -> [u8; 16] {
            core::array::from_fn(|i| {
                (round.wrapping_mul(2654435761) ^ (k * 97 + i as u32 * 31)) as u8
            })
        };
        let made_up = |k: u32| cookie::Token {
            issued: own.last().map_or(round * 100, |t| t.issued),
            mac: noise(k),
        };
        let mut out = vec![vec![], vec![0u8], noise(1).to_vec(), b"GSCW".to_vec()];
        out.push(Control::Request.encode().to_vec());
        for (k, t) in [made_up(2), made_up(3)]
            .into_iter()
            .chain(own.iter().copied())
            .enumerate()
        {
            for c in [
                Control::Echo(t),
                Control::Alive(t),
                Control::Leave(t),
                Control::Probe(t),
                Control::Welcome(t),
                Control::Cookie(t),
            ] {
                out.push(c.encode().to_vec());
            }
            // The same token one millisecond later (what the attacker could try for the victim).
            let shifted = cookie::Token {
                issued: t.issued.wrapping_add(k as u32 + 1),
                ..t
            };
            out.push(Control::Alive(shifted).encode().to_vec());
        }
        // A CPX packet towards the drone.
        out.push(message(round as u8, 40, Target::WifiHost, Target::Gap8));
        out
    }

    /// Attack 1 of the second security round: a victim registers once and goes silent; an
    /// off-path attacker then sends, from the victim's own address, ten rounds a second of
    /// everything it can make without the datagrams the victim received (empty keep-alives,
    /// junk, requests, CPX, echoes, alives and leaves with made-up tokens and with the tokens of
    /// its own registration). 6 s after the registration the victim gets no stream packet, no
    /// probe, nothing else but the cookies answering the attacker's own requests (as many bytes
    /// as the attacker sent in them).
    #[test]
    fn attack1_spoofed_keepalives_do_not_refresh_a_registration() {
        let b = HostBridge::start(local()).unwrap();
        let (stop, t) = streaming(&b);
        let to = b.udp_addr.unwrap();
        // The attacker's own registration, kept alive: its tokens are real, for its address.
        let attacker = StdUdp::bind("127.0.0.1:0").unwrap();
        let (mut ac, at0) = register(&attacker, to).unwrap();
        attacker.set_nonblocking(true).unwrap();
        let victim = StdUdp::bind("127.0.0.1:0").unwrap();
        register(&victim, to).unwrap();
        let t0 = Instant::now();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let listener = record_arrivals(&victim, t0, done.clone());
        let mut round = 0;
        let mut requests_late = 0usize;
        let mut own: Vec<cookie::Token> = Vec::new();
        let mut buf = [0u8; 2048];
        while t0.elapsed() < Duration::from_secs(9) {
            // The attacker runs its own client (and asks for cookies for itself too).
            let _ = attacker.send_to(&Control::Request.encode(), to);
            while let Ok((n, _)) = attacker.recv_from(&mut buf) {
                if let Some(Control::Cookie(t) | Control::Welcome(t) | Control::Probe(t)) =
                    Control::parse(&buf[..n])
                {
                    own.push(t);
                }
                ac.handle(&buf[..n], ms(at0));
            }
            while let Some(d) = ac.poll_transmit(ms(at0)) {
                let _ = attacker.send_to(&d, to);
            }
            let recent = &own[own.len().saturating_sub(4)..];
            for d in off_path_datagrams(round, recent) {
                if t0.elapsed() > Duration::from_secs(6)
                    && Control::parse(&d) == Some(Control::Request)
                {
                    requests_late += d.len();
                }
                let _ = victim.send_to(&d, to);
            }
            round += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
        done.store(true, Ordering::Relaxed);
        let got = listener.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        let early = got
            .iter()
            .filter(|(at, _)| *at < Duration::from_secs(2))
            .count();
        let late: Vec<&(Duration, Vec<u8>)> = got
            .iter()
            .filter(|(at, _)| *at > Duration::from_secs(6))
            .collect();
        let late_other: Vec<usize> = late
            .iter()
            .filter(|(_, d)| !matches!(Control::parse(d), Some(Control::Cookie(_))))
            .map(|(_, d)| d.len())
            .collect();
        let late_cookie_bytes: usize = late
            .iter()
            .filter(|(_, d)| matches!(Control::parse(d), Some(Control::Cookie(_))))
            .map(|(_, d)| d.len())
            .sum();
        eprintln!(
            "attack1: {} datagrams to the victim in its first 2 s, {} datagrams ({} bytes) other than cookies after 6 s, {late_cookie_bytes} cookie bytes after 6 s for {requests_late} request bytes; the attacker replayed {} tokens of its own",
            early,
            late_other.len(),
            late_other.iter().sum::<usize>(),
            own.len()
        );
        assert!(early > 0, "the victim got the stream while registered");
        assert!(
            late_other.is_empty(),
            "{} datagrams ({} bytes) reached the silent victim after 6 s",
            late_other.len(),
            late_other.iter().sum::<usize>()
        );
        assert!(late_cookie_bytes <= requests_late);
        assert!(!own.is_empty());
        assert_eq!(
            b.udp_clients(),
            1,
            "only the attacker's own registration is left"
        );
        assert_eq!(ac.status(ms(at0)), Status::Registered);
    }

    /// Registers `udp` as a receiver does and returns how long until its first stream packet,
    /// if that came within `within` of the start.
    fn register_and_first_packet(
        udp: &StdUdp,
        to: SocketAddr,
        within: Duration,
    ) -> Option<Duration> {
        let start = Instant::now();
        let (mut c, t0) = register_within(udp, to, within).ok()?;
        let mut buf = [0u8; 2048];
        while start.elapsed() < within {
            while let Some(d) = c.poll_transmit(ms(t0)) {
                udp.send_to(&d, to).unwrap();
            }
            let Ok((n, _)) = udp.recv_from(&mut buf) else {
                continue;
            };
            if c.handle(&buf[..n], ms(t0)) == Received::Data {
                return Some(start.elapsed());
            }
        }
        None
    }

    /// Attack 4 of the second security round: 7 registrations held from 4 addresses (answering
    /// their probes, as receivers do), while spoofed cookie requests run at 50/s from the
    /// legitimate receiver's IP and at 400/s from 250 other addresses: the receiver still
    /// registers and gets stream packets within 2 s.
    #[test]
    fn attack4_a_udp_receiver_gets_frames_while_registrations_are_held_and_requests_flood() {
        let b = HostBridge::start(HostConfig {
            // The demo's settings: its receivers all run on one machine.
            udp: GateConfig {
                clients_per_ip: 8,
                ..GateConfig::default()
            },
            core: Config {
                max_udp_clients: 8,
                ..Config::default()
            },
            ..local()
        })
        .unwrap();
        let (stop, t) = streaming(&b);
        let to = b.udp_addr.unwrap();
        let holders: Vec<(StdUdp, Client, Instant)> = (0..7)
            .map(|i| {
                let s = StdUdp::bind(format!("127.0.1.{}:0", 1 + i % 4)).unwrap();
                let (c, t0) = register(&s, to).unwrap();
                (s, c, t0)
            })
            .collect();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let keep = keep_registered(holders, to, done.clone());
        // The floods: 50 requests/s from the receiver's IP, 400/s from 250 addresses.
        let same_ip: Vec<StdUdp> = (0..5)
            .map(|_| StdUdp::bind("127.0.0.1:0").unwrap())
            .collect();
        let many: Vec<StdUdp> = (0..250)
            .map(|i| StdUdp::bind(format!("127.0.2.{}:0", 1 + i)).unwrap())
            .collect();
        let d = done.clone();
        let flood = std::thread::spawn(move || {
            let req = Control::Request.encode();
            let t0 = Instant::now();
            let (mut a, mut k) = (0usize, 0usize);
            while !d.load(Ordering::Relaxed) {
                let ms = t0.elapsed().as_millis() as usize;
                while a < ms * 50 / 1000 {
                    let _ = same_ip[a % same_ip.len()].send_to(&req, to);
                    a += 1;
                }
                while k < ms * 400 / 1000 {
                    let _ = many[k % many.len()].send_to(&req, to);
                    k += 1;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            (a, k)
        });
        std::thread::sleep(Duration::from_secs(1));
        let rx = StdUdp::bind("127.0.0.1:0").unwrap();
        let took = register_and_first_packet(&rx, to, Duration::from_secs(2));
        done.store(true, Ordering::Relaxed);
        let held = keep.join().unwrap();
        let (a, k) = flood.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
        let st = b.udp_stats();
        eprintln!(
            "attack4: first stream packet after {took:?}; flood sent {a} requests from the receiver's IP and {k} from 250 addresses; bridge: {} cookies, {} over the cookie budget, {} registered",
            st.cookies, st.over_cookie_budget, st.registered
        );
        assert!(took.is_some(), "no stream packet within 2 s");
        assert!(held.iter().all(|s| *s == Status::Registered), "{held:?}");
        assert_eq!(b.udp_clients(), 8);
    }

    #[test]
    fn finding6_refusals_are_logged_at_most_once_a_second() {
        let mut log = RateLimitedLog::new(Duration::from_secs(1));
        let t0 = Instant::now();
        let lines: Vec<String> = (0..10_000u64)
            .filter_map(|i| log.note(t0 + Duration::from_micros(90 * i), "refused"))
            .collect();
        assert_eq!(lines, vec!["refused".to_string()], "one line in 0.9 s");
        let next = log
            .note(t0 + Duration::from_millis(1500), "refused")
            .unwrap();
        assert_eq!(
            next,
            "refused (and 9999 more refused since the last such line)"
        );
        assert!(log.note(t0 + Duration::from_millis(1600), "x").is_none());
        assert_eq!(
            log.note(t0 + Duration::from_millis(2600), "x").as_deref(),
            Some("x (and 1 more refused since the last such line)")
        );
    }

    /// A second connection on the SPI side while the GAP8's link is up is refused: the first
    /// keeps streaming. Once the first is gone, a new one is accepted (a restarted GAP8).
    #[test]
    fn finding6_a_second_gap8_connection_cannot_take_the_stream_over() {
        let b = HostBridge::start(local()).unwrap();
        let mut gap8 = StdTcp::connect(b.spi_addr).unwrap();
        assert!(b.wait_gap8_link(Duration::from_secs(5)));
        let mut client = StdTcp::connect(b.tcp_addr).unwrap();
        let t0 = Instant::now();
        while b.with_core(|c| c.client_ids().count()) < 1 {
            assert!(t0.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut intruder = StdTcp::connect(b.spi_addr).unwrap();
        intruder
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut one = [0u8; 1];
        assert!(
            matches!(intruder.read(&mut one), Ok(0) | Err(_)),
            "the intruder is closed"
        );
        let _ = intruder.write_all(&message(66, 500, Target::Gap8, Target::WifiHost));
        let f = message(1, 3000, Target::Gap8, Target::WifiHost);
        gap8.write_all(&f).unwrap();
        assert_eq!(read_messages(&mut client, 1), vec![f]);
        assert_eq!(b.with_core(|c| c.stats().spi_resets), 1);
        assert!(b.refused() >= 1);
        // The GAP8 restarts: its old connection closes, the new one is taken.
        drop(gap8);
        let t0 = Instant::now();
        loop {
            let mut g = StdTcp::connect(b.spi_addr).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            if b.with_core(|c| c.stats().spi_resets) == 2 {
                let f = message(2, 3000, Target::Gap8, Target::WifiHost);
                g.write_all(&f).unwrap();
                assert_eq!(read_messages(&mut client, 1), vec![f]);
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(5));
        }
    }

    /// A GAP8 link (with a send buffer of about one SPI burst, as the simulated drone's link) and
    /// a WiFi client of bridge `b`; a thread writes 40 messages of 20,000 bytes to the GAP8 side as
    /// fast as the bridge takes them, counting the bytes written.
    fn gap8_writing_to_a_client(
        b: &HostBridge,
    ) -> (StdTcp, Arc<AtomicU64>, std::thread::JoinHandle<()>) {
        let mut gap8 = StdTcp::connect(b.spi_addr).unwrap();
        socket2::SockRef::from(&gap8)
            .set_send_buffer_size(16 * 1024)
            .unwrap();
        let client = StdTcp::connect(b.tcp_addr).unwrap();
        let t0 = Instant::now();
        while b.with_core(|c| c.client_ids().count()) < 1 {
            assert!(t0.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        let written = Arc::new(AtomicU64::new(0));
        let w = written.clone();
        let writer = std::thread::spawn(move || {
            for k in 0..40u8 {
                let m = message(k, 20_000, Target::Gap8, Target::WifiHost);
                if gap8.write_all(&m).is_err() {
                    return;
                }
                w.fetch_add(m.len() as u64, Ordering::Relaxed);
            }
        });
        (client, written, writer)
    }

    /// Under the WiFi model the GAP8 is held back instead of frames being dropped: a GAP8 that
    /// writes as fast as it can gets through at the air rate (never faster), the client loses
    /// nothing, and what waits in the bridge stays within a frame or two.
    #[test]
    fn the_wifi_model_paces_the_air_and_holds_the_gap8_back() {
        let b = HostBridge::start(HostConfig {
            wifi: Some(WifiModel {
                mbps: 8.0,
                queue_bytes: 32 * 1024,
            }),
            ..local()
        })
        .unwrap();
        let (mut client, written, writer) = gap8_writing_to_a_client(&b);
        let start = Instant::now();
        let got = read_messages(&mut client, 12);
        let secs = start.elapsed().as_secs_f64();
        let bytes: usize = got.iter().map(Vec::len).sum();
        // 1 MB/s on the air: 12 messages of ~20 KB take at least ~0.24 s, whatever the machine.
        assert!(bytes as f64 / secs <= 1.1e6, "{} B/s", bytes as f64 / secs);
        for (k, m) in got.iter().enumerate() {
            assert_eq!(m, &message(k as u8, 20_000, Target::Gap8, Target::WifiHost));
        }
        // The GAP8 is held back: it got at most the queue, a message in flight and the small
        // socket buffers ahead of what the client received.
        let ahead = written.load(Ordering::Relaxed) as i64 - bytes as i64;
        eprintln!(
            "the GAP8 ran {ahead} bytes ahead of the client, {:.0} B/s",
            bytes as f64 / secs
        );
        assert!(ahead < 150_000, "the GAP8 ran {ahead} bytes ahead");
        assert!(b.with_core(|c| c.client_stats(1).unwrap().frames_dropped) == 0);
        drop(client);
        b.stop();
        let _ = writer.join();
    }

    /// Three bridges on one channel (a swarm's decks on one access point): together they get
    /// the channel's rate, not three times a deck's, every client gets its messages whole and in
    /// order, and each bridge's GAP8 is held back by that bridge's own full queue.
    #[test]
    fn bridges_on_one_channel_share_its_rate_and_hold_each_gap8_back() {
        let channel = Channel::new(8.0); // 1 MB/s for the three together
        let wifi = Some(WifiModel {
            mbps: 8.0, // and as much for each alone
            queue_bytes: 32 * 1024,
        });
        let bridges: Vec<HostBridge> = (0..3)
            .map(|_| {
                HostBridge::start(HostConfig {
                    wifi,
                    channel: Some(channel.clone()),
                    ..local()
                })
                .unwrap()
            })
            .collect();
        let mut clients = Vec::new();
        let mut writers = Vec::new();
        for b in &bridges {
            let (client, written, t) = gap8_writing_to_a_client(b);
            clients.push(client);
            writers.push((written, t));
        }
        let start = Instant::now();
        let readers: Vec<_> = clients
            .into_iter()
            .map(|mut c| {
                std::thread::spawn(move || {
                    let got = read_messages(&mut c, 8);
                    (got, c)
                })
            })
            .collect();
        let got: Vec<(Vec<Vec<u8>>, StdTcp)> =
            readers.into_iter().map(|r| r.join().unwrap()).collect();
        let secs = start.elapsed().as_secs_f64();
        let bytes: usize = got.iter().flat_map(|(g, _)| g).map(Vec::len).sum();
        // 1 MB/s for all: 24 messages of ~20 KB take at least ~0.46 s, whatever the machine
        // (three decks alone would take a third of that).
        eprintln!(
            "three bridges on one 8 Mbit/s channel: {:.0} B/s together",
            bytes as f64 / secs
        );
        assert!(bytes as f64 / secs <= 1.1e6, "{} B/s", bytes as f64 / secs);
        for (g, _) in &got {
            for (k, m) in g.iter().enumerate() {
                assert_eq!(m, &message(k as u8, 20_000, Target::Gap8, Target::WifiHost));
            }
        }
        for (i, ((written, _), (g, _))) in writers.iter().zip(&got).enumerate() {
            let received: usize = g.iter().map(Vec::len).sum();
            let ahead = written.load(Ordering::Relaxed) as i64 - received as i64;
            assert!(ahead < 150_000, "GAP8 {i} ran {ahead} bytes ahead");
            assert_eq!(
                bridges[i].with_core(|c| c.client_stats(1).unwrap().frames_dropped),
                0
            );
        }
        drop(got);
        for b in bridges {
            b.stop();
        }
        for (_, t) in writers {
            let _ = t.join();
        }
    }

    /// The loss model drops about the asked share of the UDP output, reproducibly per seed.
    #[test]
    fn udp_loss_drops_datagrams_on_the_output() {
        let b = HostBridge::start(HostConfig {
            udp_loss: Some(LossModel::parse("20", 3).unwrap()),
            ..local()
        })
        .unwrap();
        let mut gap8 = StdTcp::connect(b.spi_addr).unwrap();
        let udp = StdUdp::bind("127.0.0.1:0").unwrap();
        let _reg = register(&udp, b.udp_addr.unwrap()).unwrap();
        let t0 = Instant::now();
        while b.with_core(|c| c.client_ids().count()) < 1 {
            assert!(t0.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(5));
        }
        udp.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let mut n = 0u64;
            while let Ok((k, _)) = udp.recv_from(&mut buf) {
                // The registration's probes are not stream datagrams.
                if buf[..k.min(2)] != *b"GS" {
                    n += 1;
                }
            }
            n
        });
        for k in 0..10 {
            gap8.write_all(&message(k, 20_000, Target::Gap8, Target::WifiHost))
                .unwrap();
            std::thread::sleep(Duration::from_millis(10));
        }
        let n = reader.join().unwrap();
        let lost = b.udp_lost();
        assert_eq!(n + lost, 200, "{n} received, {lost} lost");
        assert!((20..=60).contains(&lost), "{lost} of 200 lost at 20 %");
    }

    #[test]
    fn garbled_client_is_disconnected_others_unaffected() {
        let b = HostBridge::start(local()).unwrap();
        let mut gap8 = StdTcp::connect(b.spi_addr).unwrap();
        let mut good = StdTcp::connect(b.tcp_addr).unwrap();
        let mut bad = StdTcp::connect(b.tcp_addr).unwrap();
        bad.write_all(&[0xFF, 0xFF, 1, 2, 3]).unwrap();
        bad.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut one = [0u8; 1];
        assert!(matches!(bad.read(&mut one), Ok(0) | Err(_)));
        let f = message(1, 3000, Target::Gap8, Target::WifiHost);
        gap8.write_all(&f).unwrap();
        assert_eq!(read_messages(&mut good, 1), vec![f]);
    }
}
