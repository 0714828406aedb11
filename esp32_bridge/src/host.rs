//! The forwarding core driven by std / tokio sockets: the ESP32 as it runs on the host.
//!
//! - SPI side: a TCP listener standing in for the SPI link; the simulated drone connects to it
//!   (one GAP8 at a time; a new connection replaces the old one, like a GAP8 reset).
//! - WiFi side: a TCP server (port 5000 like the stock firmware) and a UDP socket. A UDP client is
//!   any address that sends a datagram (an empty one just registers / keeps alive); it is forgotten
//!   after [`HostConfig::udp_client_timeout`] of silence.
//!
//! Every socket has its own task; the core sits behind one mutex that is never held across I/O.
//! A client that cannot take bytes for [`HostConfig::client_write_timeout`] is disconnected.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Notify;

use crate::forward::{Bridge, BridgeError, ClientId, Config, Transport};

/// Where the host bridge listens and how patient it is.
#[derive(Clone, Debug)]
pub struct HostConfig {
    pub spi_listen: SocketAddr,
    pub tcp_listen: SocketAddr,
    pub udp_listen: Option<SocketAddr>,
    pub core: Config,
    pub udp_client_timeout: Duration,
    pub client_write_timeout: Duration,
    /// Print one line per connection event on stderr.
    pub verbose: bool,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            spi_listen: "127.0.0.1:5100".parse().expect("static address"),
            tcp_listen: "127.0.0.1:5000".parse().expect("static address"),
            udp_listen: Some("127.0.0.1:5000".parse().expect("static address")),
            core: Config::default(),
            udp_client_timeout: Duration::from_secs(5),
            client_write_timeout: Duration::from_secs(3),
            verbose: false,
        }
    }
}

struct Shared {
    core: Mutex<Bridge>,
    wakers: Mutex<HashMap<ClientId, Arc<Notify>>>,
    spi_notify: Notify,
    udp_notify: Notify,
    udp_peers: Mutex<HashMap<SocketAddr, (ClientId, Instant)>>,
    verbose: bool,
}

impl Shared {
    fn core(&self) -> std::sync::MutexGuard<'_, Bridge> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
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
    fn drop_client(&self, id: ClientId) {
        self.wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
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
        let shared = Arc::new(Shared {
            core: Mutex::new(Bridge::new(cfg.core)),
            wakers: Mutex::new(HashMap::new()),
            spi_notify: Notify::new(),
            udp_notify: Notify::new(),
            udp_peers: Mutex::new(HashMap::new()),
            verbose: cfg.verbose,
        });
        let (spi, tcp, udp) = runtime.block_on(async {
            let spi = TcpListener::bind(cfg.spi_listen).await?;
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
            runtime.spawn(udp_writer(u, shared.clone()));
            runtime.spawn(udp_expiry(shared.clone(), cfg.udp_client_timeout));
        }
        Ok(HostBridge {
            runtime: Some(runtime),
            shared,
            spi_addr,
            tcp_addr,
            udp_addr,
        })
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

async fn spi_side(listener: TcpListener, shared: Arc<Shared>) {
    let mut current: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let Ok((sock, peer)) = listener.accept().await else {
            continue;
        };
        if let Some(old) = current.take() {
            old.abort();
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
            let mut buf = vec![0u8; 64 * 1024];
            loop {
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

async fn tcp_side(listener: TcpListener, shared: Arc<Shared>, write_timeout: Duration) {
    loop {
        let Ok((sock, peer)) = listener.accept().await else {
            continue;
        };
        let id = match shared.core().add_client(Transport::Tcp) {
            Ok(id) => id,
            Err(e) => {
                shared.log(format_args!("refusing {peer}: {e}"));
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
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
                Some((bytes, r)) => {
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
        let known = shared
            .udp_peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .map(|p| p.0);
        let id = match known {
            Some(id) => id,
            None => {
                let Ok(id) = shared.core().add_client(Transport::Udp) else {
                    shared.log(format_args!("refusing UDP {peer}: too many clients"));
                    continue;
                };
                shared.log(format_args!("client {id} registered over UDP from {peer}"));
                shared.spi_notify.notify_one();
                id
            }
        };
        shared
            .udp_peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(peer, (id, Instant::now()));
        let res = shared.core().client_datagram(id, &buf[..n]);
        match res {
            Ok(k) if k > 0 => shared.spi_notify.notify_one(),
            Ok(_) => {}
            Err(e) => shared.log(format_args!("client {id}: dropped datagram: {e}")),
        }
    }
}

async fn udp_writer(sock: Arc<UdpSocket>, shared: Arc<Shared>) {
    loop {
        let peers: Vec<(SocketAddr, ClientId)> = shared
            .udp_peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(a, (id, _))| (*a, *id))
            .collect();
        let mut sent_any = false;
        for (addr, id) in peers {
            // A few datagrams per client per round, so one client cannot starve the others.
            for _ in 0..16 {
                let work = shared.core().next_for_client(id);
                let Some((bytes, r)) = work else { break };
                let n = r.len();
                // A failed send (for example ECONNREFUSED from a closed port) loses this datagram only.
                let _ = sock.send_to(&bytes[r], addr).await;
                shared.core().client_sent(id, n);
                sent_any = true;
            }
        }
        if !sent_any {
            shared.udp_notify.notified().await;
        }
    }
}

async fn udp_expiry(shared: Arc<Shared>, timeout: Duration) {
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let stale: Vec<(SocketAddr, ClientId)> = shared
            .udp_peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, (_, seen))| seen.elapsed() > timeout)
            .map(|(a, (id, _))| (*a, *id))
            .collect();
        for (addr, id) in stale {
            shared
                .udp_peers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&addr);
            shared.log(format_args!("client {id} (UDP {addr}) timed out"));
            shared.drop_client(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        udp.send_to(&[], b.udp_addr.unwrap()).unwrap();
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
