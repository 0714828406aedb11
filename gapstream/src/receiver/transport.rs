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
        let mut registration = Registration::new(Instant::now());
        registration.run(&socket)?;
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
            let n = (2 + u16::from_le_bytes([rest[0], rest[1]]) as usize).min(rest.len());
            self.socket.send(&rest[..n])?;
            rest = &rest[n..];
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(k) = self.registration.keepalive(Instant::now()) {
            self.socket.send(&k)?;
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
}

/// The UDP registration with the bridge, the one place that speaks it: the bridge sends nothing
/// larger than what it got to an address that has not shown that it receives there, so the
/// receiver asks for a cookie (a 20-byte request), echoes it, and waits for the welcome
/// (`esp32_bridge::cookie`); lost datagrams are sent again every 250 ms, for at most 2 s. Once
/// registered, an empty datagram every second keeps the registration (and NAT mappings) alive.
struct Registration {
    next: cookie::Control,
    sent: Option<Instant>,
    started: Instant,
    last_keepalive: Instant,
}

/// Resend interval and deadline of the registration; keep-alive interval.
const REGISTER_RESEND: Duration = Duration::from_millis(250);
const REGISTER_WITHIN: Duration = Duration::from_secs(2);
const KEEPALIVE: Duration = Duration::from_secs(1);

impl Registration {
    fn new(now: Instant) -> Self {
        Registration {
            next: cookie::Control::Request,
            sent: None,
            started: now,
            last_keepalive: now,
        }
    }

    /// The datagram to send now, if one is due (sans I/O).
    fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self
            .sent
            .is_some_and(|t| now.duration_since(t) < REGISTER_RESEND)
        {
            return None;
        }
        self.sent = Some(now);
        let (b, n) = self.next.encode();
        Some(b[..n].to_vec())
    }

    /// A datagram from the bridge during the registration: true once welcomed.
    fn handle(&mut self, datagram: &[u8]) -> bool {
        match cookie::Control::parse(datagram) {
            Some(cookie::Control::Cookie(c)) if self.next == cookie::Control::Request => {
                self.next = cookie::Control::Echo(c);
                self.sent = None;
                false
            }
            Some(cookie::Control::Welcome) => true,
            _ => false,
        }
    }

    /// A registration datagram arriving after the welcome (a repeat that crossed a retry): not CPX.
    fn is_control(&self, datagram: &[u8]) -> bool {
        cookie::Control::parse(datagram).is_some()
    }

    fn keepalive(&mut self, now: Instant) -> Option<Vec<u8>> {
        if now.duration_since(self.last_keepalive) <= KEEPALIVE {
            return None;
        }
        self.last_keepalive = now;
        Some(Vec::new())
    }

    /// Drives the exchange on `s` until welcomed or [`REGISTER_WITHIN`] is over.
    fn run(&mut self, s: &UdpSocket) -> io::Result<()> {
        let mut buf = [0u8; 2048];
        while self.started.elapsed() < REGISTER_WITHIN {
            if let Some(d) = self.poll_transmit(Instant::now()) {
                s.send(&d)?;
            }
            match s.recv(&mut buf) {
                Ok(n) if self.handle(&buf[..n]) => {
                    self.last_keepalive = Instant::now();
                    return Ok(());
                }
                Ok(_) => {}
                Err(e) if quiet(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no answer to the UDP registration (cookie request) within 2 s",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registration as the bridge's own cookie code answers it: request, cookie, echo, welcome.
    #[test]
    fn registration_follows_the_cookie_exchange() {
        let t0 = Instant::now();
        let mut r = Registration::new(t0);
        let req = r.poll_transmit(t0).unwrap();
        assert_eq!(cookie::Control::parse(&req), Some(cookie::Control::Request));
        assert!(r.poll_transmit(t0 + Duration::from_millis(10)).is_none());
        let again = r.poll_transmit(t0 + REGISTER_RESEND).unwrap();
        assert_eq!(again, req, "a lost request is sent again");
        let c = [7u8; cookie::COOKIE_LEN];
        let (b, n) = cookie::Control::Cookie(c).encode();
        assert!(!r.handle(&b[..n]));
        let echo = r.poll_transmit(t0 + REGISTER_RESEND).unwrap();
        assert_eq!(
            cookie::Control::parse(&echo),
            Some(cookie::Control::Echo(c))
        );
        let (b, n) = cookie::Control::Welcome.encode();
        assert!(r.handle(&b[..n]));
        assert!(r.is_control(&b[..n]));
        assert!(!r.is_control(&[4, 0, 0x9C, 0x09, 1, 2]));
    }
}
