//! One bridge's connection loop: link bytes → CPX decoder → session → events; each verified frame
//! becomes one [`Frame`] and is published on the bus with the counters of that moment; the
//! counters (one path: the sessions' counters plus the receiver's own) go into the [`Meter`],
//! whose row is published every 0.5 s as the [`Status`] every output shows; diagnostic lines
//! become [`Note`]s; and what the receiver saw is turned into a diagnosis when frames do not come.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use gapstream_drone::testpattern;
use gapstream_protocol::cpx::StreamDecoder;
use gapstream_protocol::session;
use gapstream_protocol::wire::{FrameHeader, PixelFormat};

use super::bus::{Bus, Event as BusEvent, Note, Status};
use super::frame::{Frame, Protection, Source, latency_ms};
use super::transport::{self, Link};
use super::{Delivered, Event, ReceiverConfig, ReceiverError, Session, SessionKind, Summary};
use crate::metrics::{Counters, Meter, Percentiles};
use crate::sim::unix_ns;
use crate::timesync::ClockEstimator;

/// How long the connection may stay silent before it is made again. A secure session is silent
/// until the drone answers its HELLO (the drone sends nothing to a receiver without a session,
/// and the session resends a lost HELLO by itself): before the first byte on a connection the
/// limit is five times the idle timeout, so that a drone slow to answer (a loaded machine, a
/// HELLO lost while the drone's link came up) does not cost a reconnect that throws away the
/// handshake in progress.
fn idle_limit(idle_timeout: Duration, heard: bool) -> Duration {
    if heard {
        idle_timeout
    } else {
        idle_timeout * 5
    }
}

/// The receiver's state over all its connections to one bridge.
pub(super) struct Station<'a> {
    cfg: &'a ReceiverConfig,
    /// The bus, owned (`receiver::run`: closed at the end) or shared with the other drones of a
    /// ground station (`receiver::run_shared`: whoever holds it last closes it).
    bus: Arc<Bus>,
    source: Source,
    protection: Protection,
    label: Arc<str>,
    counters: Counters,
    /// Malformed input the receiver itself counted (garbled CPX, stock images cut short).
    own_malformed: u64,
    /// Counters of finished sessions (each connection has a new session).
    base: session::ReceiverCounters,
    meter: Meter,
    status: Status,
    start: Instant,
    connects: u64,
    /// Bytes the bridge sent over all connections (the bridge is alive).
    bytes_in: u64,
    /// Sessions that ended while the drone went on streaming to a group without this receiver
    /// (frames under keys it was not given, after it had frames): the sign of a second receiver
    /// with this key (each one's handshake replaces the other's session at the drone).
    taken_over: u64,
    /// Frames delivered on this connection, and the receiver's frames-without-key count at the
    /// last one.
    conn_frames: u64,
    no_key_at_frame: u64,
    last_error: Option<String>,
    /// The drone's clock on this machine's (reset with every connection: the drone may have
    /// restarted, a new clock).
    clock: ClockEstimator,
}

impl<'a> Station<'a> {
    pub(super) fn new(cfg: &'a ReceiverConfig, bus: Arc<Bus>) -> Self {
        let label: Arc<str> = Arc::from(cfg.session.label());
        let status = Status {
            source: cfg.source.to_string(),
            connection: "starting".into(),
            suite: label.to_string(),
            transport: cfg.transport.to_string(),
            ..Status::default()
        };
        let st = Station {
            cfg,
            bus,
            source: cfg.source.clone(),
            protection: cfg.session.protection(),
            label,
            counters: Counters::default(),
            own_malformed: 0,
            base: session::ReceiverCounters::default(),
            meter: Meter::new(),
            status,
            start: Instant::now(),
            connects: 0,
            bytes_in: 0,
            taken_over: 0,
            conn_frames: 0,
            no_key_at_frame: 0,
            last_error: None,
            clock: ClockEstimator::new(),
        };
        st.publish_status(false);
        st
    }

    /// Counters of the sessions that ended, for the next session to start from.
    pub(super) fn base(&self) -> session::ReceiverCounters {
        self.base
    }

    pub(super) fn done(&self) -> bool {
        self.cfg.stop.load(Ordering::Relaxed)
            || self.cfg.duration.is_some_and(|d| self.start.elapsed() >= d)
            || self
                .cfg
                .max_frames
                .is_some_and(|m| self.counters.frames >= m)
    }

    /// Connects to the bridge; `None` (after a line and a short pause) when it cannot be reached.
    pub(super) fn connect(&mut self) -> Option<Box<dyn Link>> {
        self.set_connection("connecting");
        let fec = (self.cfg.fec && self.cfg.transport == transport::Transport::Udp)
            .then_some(self.counters.fec);
        match transport::open(self.cfg.transport, self.cfg.bridge, fec) {
            Ok(l) => {
                self.connects += 1;
                if self.connects > 1 {
                    self.note(
                        false,
                        format!(
                            "reconnected to the bridge at {} ({})",
                            self.cfg.bridge, self.cfg.transport
                        ),
                    );
                }
                Some(l)
            }
            Err(e) => {
                self.error(format!(
                    "cannot reach the bridge at {} ({}): {e}; retrying",
                    self.cfg.bridge, self.cfg.transport
                ));
                self.set_connection("bridge unreachable");
                self.tick(false);
                std::thread::sleep(Duration::from_millis(200));
                None
            }
        }
    }

    /// Streams over `link` with `session` until the receiver is done (then it leaves properly)
    /// or the connection must be made again (`Ok` either way).
    pub(super) fn stream(
        &mut self,
        link: &mut dyn Link,
        session: &mut dyn Session,
    ) -> Result<(), ReceiverError> {
        let opening = session.opening().map_err(ReceiverError::Fatal)?;
        if !opening.is_empty()
            && let Err(e) = link.send(&opening)
        {
            self.error(format!("sending to the bridge: {e}"));
            return Ok(());
        }
        self.set_connection("streaming");
        self.conn_frames = 0;
        self.clock.reset();
        let mut decoder = StreamDecoder::new();
        let (mut events, mut reply) = (Vec::new(), Vec::new());
        let mut buf = vec![0u8; 64 * 1024];
        let mut last_data = Instant::now();
        let mut heard = matches!(self.cfg.session, SessionKind::StockPlaintext);
        let mut garbled = false;
        while !self.done() {
            let n = match link.recv(&mut buf) {
                Ok(n) => n,
                Err(e) => return self.reconnect(format!("connection to the bridge lost: {e}")),
            };
            if n > 0 {
                last_data = Instant::now();
                self.bytes_in += n as u64;
                heard = true;
            } else if last_data.elapsed() > idle_limit(self.cfg.idle_timeout, heard) {
                let s = last_data.elapsed().as_secs_f64();
                return self.reconnect(format!("no data from the bridge for {s:.1} s"));
            }
            if let Some(f) = link.fec_counters() {
                self.counters.fec = f;
            }
            if link.is_datagram() {
                // A datagram is exactly one packet: never carry a partial one across datagrams.
                decoder.reset();
            }
            let mut input = &buf[..n];
            while let Some(r) = decoder.decode(&mut input) {
                match r {
                    Ok(p) => {
                        garbled = false;
                        session.packet(p.route, p.payload, &mut events, &mut reply)
                    }
                    // One line and one count per garbled stretch (the decoder slides byte by byte).
                    Err(e) if !garbled => {
                        garbled = true;
                        events.push(Event::Malformed(format!(
                            "garbled CPX from the bridge: {e}; resynchronising"
                        )))
                    }
                    Err(_) => {}
                }
            }
            session.tick(&mut events, &mut reply);
            if !reply.is_empty() {
                let r = link.send(&reply);
                reply.clear();
                if let Err(e) = r {
                    self.error(format!("sending to the bridge: {e}"));
                    return Ok(());
                }
            }
            let mut restart = None;
            for ev in events.drain(..) {
                self.handle(ev, &mut restart)?;
            }
            self.refresh(session);
            self.tick(false);
            if let Some(e) = self.bus.failure() {
                return Err(ReceiverError::Output(e));
            }
            if let Some(m) = restart {
                if self.conn_frames > 0 && self.counters.no_key > self.no_key_at_frame {
                    self.taken_over += 1;
                    self.error(
                        "the drone went on streaming to its group without this receiver: is another receiver using the same receiver key?".into(),
                    );
                }
                return self.reconnect(m);
            }
        }
        // Stopped: leave the group properly (the drone rekeys without this receiver at once).
        let bye = session.closing();
        if !bye.is_empty() {
            let _ = link.send(&bye);
        }
        link.finish();
        Ok(())
    }

    fn reconnect(&mut self, why: String) -> Result<(), ReceiverError> {
        let msg = format!("{why}; reconnecting");
        self.error(msg);
        self.set_connection("reconnecting");
        Ok(())
    }

    /// Adds a finished connection's session counters to the running totals.
    pub(super) fn carry(&mut self, s: &dyn Session) {
        if let Some(c) = s.raw_counters() {
            super::accumulate(&mut self.base, &c);
        }
    }

    fn handle(&mut self, ev: Event, restart: &mut Option<String>) -> Result<(), ReceiverError> {
        match ev {
            Event::Frame(d) => self.deliver(d),
            Event::Malformed(m) => {
                self.own_malformed += 1;
                self.error(m);
            }
            Event::Lost(k) => self.counters.lost += k,
            Event::Rejected(m) => self.error(m),
            Event::Info(m) => {
                self.status.last_message = Some(m.clone());
                self.note(false, m);
                self.publish_status(false);
            }
            Event::Restart(m) => *restart = Some(m),
            Event::ClockSample {
                sent_ns,
                drone_ns,
                received_ns,
            } => self.clock.exchange(sent_ns, drone_ns, received_ns),
            Event::Fatal(m) => {
                self.status.last_error = Some(m.clone());
                self.set_connection("stopped");
                return Err(ReceiverError::Fatal(m));
            }
        }
        Ok(())
    }

    /// The one place a session's frame becomes a [`Frame`]: counted, measured, published.
    fn deliver(&mut self, d: Delivered) {
        // Compress, then seal: a coded payload is decoded only now that it verified; a payload
        // that does not decode is a malformed frame (counted, the stream goes on).
        let wire_len = d.pixels.len();
        let coded_format = d
            .pixel_format
            .and_then(|c| PixelFormat::try_from(c).ok())
            .filter(|f| f.is_coded());
        let (d, coded) = match coded_format {
            None => (d, None),
            Some(f) => match crate::codec::decode(f, d.width, d.height, &d.pixels) {
                Some(Ok(px)) => {
                    let coded: Arc<[u8]> = Arc::from(d.pixels);
                    (Delivered { pixels: px, ..d }, Some((f, coded)))
                }
                Some(Err(e)) => {
                    self.own_malformed += 1;
                    self.error(format!("frame {}: {e}", d.seq));
                    return;
                }
                None => (d, None),
            },
        };
        let now = unix_ns();
        let latency = d.capture_ns.and_then(|c| latency_ms(now, c));
        if let Some(s) = testpattern::decode(&d.pixels, d.width, d.height) {
            self.status.image_latency_ms = latency_ms(now, s.capture_ns);
        }
        self.counters.frames += 1;
        self.conn_frames += 1;
        self.no_key_at_frame = self.counters.no_key;
        self.counters.payload_bytes += wire_len as u64;
        self.meter.frame(wire_len, latency);
        self.status.seq = Some(d.seq);
        let header = FrameHeader {
            padded: false,
            suite: 0,
            pixel_format: match &coded {
                Some((f, _)) => f.code(),
                None if self.cfg.bayer => PixelFormat::BayerRggb8.code(),
                None => PixelFormat::Grey8.code(),
            },
            width: d.width as u16,
            height: d.height as u16,
            epoch: d.epoch.unwrap_or(0),
            sequence: d.seq,
            capture_ns: d.capture_ns.unwrap_or(0),
            payload_len: wire_len as u32,
            state: d.state.map(|r| r.encode()),
        };
        let capture = d.capture_ns.and_then(|c| {
            self.clock.frame(c, now);
            // Never after the frame arrived: an estimate past that is certainly late.
            self.clock.estimate(c).map(|mut e| {
                e.receiver_ns = e.receiver_ns.min(now);
                e
            })
        });
        let state = d.state.map(crate::drone_state::DroneState::from_record);
        if let Some(s) = &state {
            self.status.state = Some(s.line());
        }
        let frame = Frame {
            source: self.source.clone(),
            header,
            protection: self.protection,
            suite: self.label.clone(),
            pixels: Arc::from(d.pixels),
            coded: coded.map(|(_, c)| c),
            receive_ns: now,
            latency_ms: latency,
            state,
            capture,
        };
        self.bus.publish(BusEvent::Frame(
            Arc::new(frame),
            Arc::new(self.counters.clone()),
        ));
    }

    /// The counters after a batch of events: the session's own plus the receiver's.
    fn refresh(&mut self, session: &dyn Session) {
        self.counters.malformed = self.own_malformed;
        session.counters(&mut self.counters);
        let raw = session.raw_counters().unwrap_or_default();
        self.counters.handshake_failures = self.base.handshake_failures + raw.handshake_failures;
        if let Some(l) = session.suite_label()
            && *l != *self.label
        {
            self.label = Arc::from(l);
            self.status.suite = self.label.to_string();
            self.publish_status(false);
        }
    }

    /// A metrics row every 0.5 s (or now, `force`), published with the status.
    fn tick(&mut self, force: bool) {
        if let Some(row) = self.meter.tick(&self.counters, force) {
            self.status.row = row;
            self.publish_status(true);
        }
    }

    fn publish_status(&self, new_row: bool) {
        let mut s = self.status.clone();
        s.counters = self.counters.clone();
        s.new_row = new_row;
        s.diagnosis = self.diagnosis();
        self.bus.publish(BusEvent::Status(Arc::new(s)));
    }

    fn set_connection(&mut self, state: &str) {
        if self.status.connection != state {
            self.status.connection = state.into();
            self.publish_status(false);
        }
    }

    /// An error line, once per distinct message in a row.
    fn error(&mut self, msg: String) {
        if self.last_error.as_deref() != Some(msg.as_str()) {
            self.note(true, msg.clone());
        }
        self.status.last_error = Some(msg.clone());
        self.last_error = Some(msg);
        self.publish_status(false);
    }

    fn note(&self, error: bool, text: String) {
        self.bus.publish(BusEvent::Note(Arc::new(Note {
            source: self.source.to_string(),
            error,
            text,
        })));
    }

    /// Why frames do not come (or what goes wrong while they do), from what the receiver saw.
    fn diagnosis(&self) -> Option<String> {
        let c = &self.counters;
        let secure = matches!(self.cfg.session, SessionKind::Secure(_));
        if c.frames > 0 {
            return (self.taken_over > 0).then(|| {
                format!(
                    "the drone went on streaming to its group without this receiver {} time{} (its session replaced): another receiver is most likely using the same receiver key (each receiver needs its own: gapstream pair --receivers N)",
                    self.taken_over,
                    if self.taken_over == 1 { "" } else { "s" }
                )
            });
        }
        if self.connects == 0 {
            return Some(format!(
                "the bridge at {} ({}) was never reachable",
                self.cfg.bridge, self.cfg.transport
            ));
        }
        if !secure || c.handshakes > 0 {
            return None;
        }
        if c.handshake_failures > 0 {
            return Some(format!(
                "the drone refused {} handshake attempt{} while the bridge was up: this receiver's key is most likely not paired with this drone (pair them again with `gapstream pair` and give the drone its drone.key)",
                c.handshake_failures,
                if c.handshake_failures == 1 { "" } else { "s" }
            ));
        }
        (self.bytes_in > 0 || self.start.elapsed() > Duration::from_secs(2)).then(|| {
            "the bridge is up but the drone answered no handshake (is the drone running and connected to the bridge?)".to_string()
        })
    }

    /// Closes the bus (every output finishes) and sums the run up; `outcome` is the loop's end.
    pub(super) fn finish(
        mut self,
        outcome: Result<(), ReceiverError>,
    ) -> Result<Summary, ReceiverError> {
        self.tick(true);
        let diagnosis = self.diagnosis();
        let elapsed_s = self.start.elapsed().as_secs_f64();
        let latency = Percentiles::of(&mut self.meter.all_latencies_ms);
        // The outputs end with the last receiver on the bus (a ground station closes it after
        // every drone's receiver finished).
        let outputs = Arc::try_unwrap(self.bus)
            .map(Bus::close)
            .unwrap_or_default();
        outcome?;
        if let Some(e) = outputs.iter().find_map(|o| o.error.clone()) {
            return Err(ReceiverError::Output(e));
        }
        Ok(Summary {
            counters: self.counters,
            latency,
            elapsed_s,
            connects: self.connects,
            diagnosis,
            outputs,
        })
    }
}
