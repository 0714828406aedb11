//! The transport seam: how the receiver reaches a bridge. [`open`] gives a [`Link`] that carries
//! CPX bytes both ways — TCP (a byte stream, like the stock firmware's port 5000) or UDP (one CPX
//! packet per datagram, after the bridge's cookie registration). Whatever sits between the
//! session and the socket (the UDP registration and keep-alive today; forward error correction
//! on UDP later) lives here, behind [`Link`].
//!
//! Freshness: the TCP receive buffer is bounded ([`TCP_RECEIVE_BUFFER`]), so a receiver that falls
//! behind leaves the backlog in the bridge's queue, which drops whole frames (counted) instead of
//! letting the kernel hold seconds of stream.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use esp32_bridge::cookie;

/// How the receiver reaches the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Udp,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        })
    }
}

/// The kernel's receive buffer asked for a TCP connection to the bridge: about two raw 324×244
/// frames (Linux doubles it for its own bookkeeping). Enough for the stream's rate on any link
/// the AI-deck has (its WiFi's bandwidth-delay product is a few KiB), small enough that a
/// receiver short of CPU never has seconds of frames queued in the kernel.
pub const TCP_RECEIVE_BUFFER: usize = 160 * 1024;

/// How long one [`Link::recv`] waits for bytes.
pub const RECV_WAIT: Duration = Duration::from_millis(100);

/// An open connection to a bridge, carrying CPX packets.
pub trait Link: Send {
    /// Sends CPX packets (back to back).
    fn send(&mut self, packets: &[u8]) -> io::Result<()>;
    /// Bytes from the bridge: `Ok(0)` when nothing came within [`RECV_WAIT`] (or a signal cut the
    /// wait short: Ctrl-C must not look like a lost connection), `Err` when the connection is gone.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Each [`Link::recv`] returns whole packets (a datagram): a CPX decoder must not carry a
    /// partial packet from one to the next.
    fn is_datagram(&self) -> bool {
        false
    }
    /// Ends the connection cleanly.
    fn finish(&mut self) {}
}

/// Connects to the bridge at `addr` (for UDP: registers with it first).
pub fn open(t: Transport, addr: SocketAddr) -> io::Result<Box<dyn Link>> {
    match t {
        Transport::Tcp => Ok(Box::new(TcpLink::connect(addr)?)),
        Transport::Udp => Ok(Box::new(UdpLink::connect(addr)?)),
    }
}

fn quiet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// TCP: CPX packets back to back.
struct TcpLink(TcpStream);

impl TcpLink {
    fn connect(addr: SocketAddr) -> io::Result<Self> {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        // Before connecting, so that the window the bridge sees is the bounded one.
        s.set_recv_buffer_size(TCP_RECEIVE_BUFFER)?;
        s.connect_timeout(&addr.into(), Duration::from_secs(1))?;
        let s: TcpStream = s.into();
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(RECV_WAIT))?;
        Ok(TcpLink(s))
    }
}

impl Link for TcpLink {
    fn send(&mut self, packets: &[u8]) -> io::Result<()> {
        self.0.write_all(packets)
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf) {
            Ok(0) => Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "bridge closed the connection",
            )),
            Err(e) if quiet(&e) => Ok(0),
            r => r,
        }
    }

    /// Says so (FIN) and discards what is still in flight until the bridge closes too (at most
    /// 300 ms), so the bridge sees a close, not a reset.
    fn finish(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Write);
        let t0 = Instant::now();
        let mut buf = [0u8; 16 * 1024];
        while t0.elapsed() < Duration::from_millis(300) {
            match self.0.read(&mut buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if quiet(&e) => {}
                Err(_) => return,
            }
        }
    }
}

/// UDP: one CPX packet per datagram, after the registration.
struct UdpLink {
    socket: UdpSocket,
    registration: Registration,
}

impl UdpLink {
    fn connect(addr: SocketAddr) -> io::Result<Self> {
        let bind: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        }
        .parse()
        .expect("static");
        let socket = UdpSocket::bind(bind)?;
        socket.connect(addr)?;
        socket.set_read_timeout(Some(RECV_WAIT))?;
        let registration = Registration::run(&socket)?;
        Ok(UdpLink {
            socket,
            registration,
        })
    }
}

impl Link for UdpLink {
    fn send(&mut self, packets: &[u8]) -> io::Result<()> {
        let mut rest = packets;
        while rest.len() >= 2 {
            let n = (2 + gapstream_protocol::cpx::length_field(rest).map_or(0, usize::from))
                .min(rest.len());
            self.socket.send(&rest[..n])?;
            rest = &rest[n..];
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // The answers to the bridge's probes keep the registration.
        self.registration.transmit(&self.socket)?;
        if self.registration.lost() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "the bridge stopped probing this address (UDP registration lost)",
            ));
        }
        match self.socket.recv(buf) {
            Ok(n) if self.registration.is_control(&buf[..n]) => Ok(0),
            Err(e) if quiet(&e) => Ok(0),
            r => r,
        }
    }

    fn is_datagram(&self) -> bool {
        true
    }

    /// Says it leaves, so the bridge frees the slot at once.
    fn finish(&mut self) {
        if let Some(d) = self.registration.client.leave() {
            let _ = self.socket.send(&d);
        }
    }
}

/// The UDP registration with the bridge, the one place the receiver speaks it: the sans-I/O
/// `esp32_bridge::cookie::Client` decides what to send when (a request, the echo of the cookie,
/// retries every 250 ms for at most 2 s; once registered, an answer to each of the bridge's
/// probes) and what a datagram from the bridge is; this drives it with a socket and a clock.
struct Registration {
    client: cookie::Client,
    t0: Instant,
}

impl Registration {
    fn now_ms(&self) -> u64 {
        self.t0.elapsed().as_millis() as u64
    }

    /// Sends whatever the client has to send now.
    fn transmit(&mut self, s: &UdpSocket) -> io::Result<()> {
        while let Some(d) = self.client.poll_transmit(self.now_ms()) {
            s.send(&d)?;
        }
        Ok(())
    }

    /// A datagram from the bridge that belongs to the registration (a probe, a repeated cookie
    /// or welcome), not CPX.
    fn is_control(&mut self, datagram: &[u8]) -> bool {
        self.client.handle(datagram, self.now_ms()) == cookie::Received::Control
    }

    fn lost(&self) -> bool {
        self.client.status(self.now_ms()) == cookie::Status::Lost
    }

    /// Registers on `s`: until welcomed, or an error when the client gives up.
    fn run(s: &UdpSocket) -> io::Result<Self> {
        let mut reg = Registration {
            client: cookie::Client::new(cookie::ClientConfig::default(), 0),
            t0: Instant::now(),
        };
        let mut buf = [0u8; 2048];
        loop {
            reg.transmit(s)?;
            match reg.client.status(reg.now_ms()) {
                cookie::Status::Registered => return Ok(reg),
                cookie::Status::Registering => {}
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no answer to the UDP registration (cookie request) within 2 s",
                    ));
                }
            }
            match s.recv(&mut buf) {
                Ok(n) => {
                    reg.client.handle(&buf[..n], reg.now_ms());
                }
                Err(e) if quiet(&e) => {}
                Err(e) => return Err(e),
            }
        }
    }
}
