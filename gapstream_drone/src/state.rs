//! The flight controller's state over the deck's UART: NanoCockpit's `!STA` message, parsed on
//! the GAP8, the latest sample kept with its arrival time, a [`StateRecord`] for every frame.
//!
//! The Crazyflie's STM32 sends its state estimate to the AI-deck's GAP8 over UART (115200 8N1 on
//! the deck's UART1 pins) in the message of NanoCockpit's STM32 application (E. Cereda, A. Giusti,
//! D. Palossi, "NanoCockpit: Performance-optimized Application Framework for AI-based Autonomous
//! Nanorobotics", 2026; `aideck_protocol.h` upstream, `lib/uart_protocol.h` in Bitcraze's
//! aideck-gap8-examples), 40 bytes, little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | `21 53 54 41` ("!STA") |
//! | 4 | 4 | timestamp (u32: µs from `usecTimestamp()`, or FreeRTOS ticks of 1 ms in NanoCockpit's own app) |
//! | 8 | 6 | position x, y, z, mm (i16) |
//! | 14 | 6 | velocity, mm/s |
//! | 20 | 6 | acceleration, mm/s² |
//! | 26 | 4 | attitude quaternion, compressed (`gapstream_protocol::state::quat`) |
//! | 30 | 6 | body rates roll, pitch, yaw, mrad/s |
//! | 36 | 4 | CRC-32 (IEEE 802.3, reflected, as zlib) of bytes 0..36 |
//!
//! The same link carries NanoCockpit's `!RNG` (4 bytes of entropy) and `!TOF` (68 bytes: an 8×8
//! ranging frame) messages; they are recognised, checked and counted, not used. Anything else
//! (the Crazyflie never sends other bytes to the GAP8, but a UART picks up noise at power-up) is
//! skipped a byte at a time until a header and a good CRC line up again: a garbled stretch costs
//! the messages it overlaps, never the parser's state, and nothing panics.
//!
//! The timing that matters is the arrival: [`StateSource`] hands each byte with the drone's time
//! it came in (the firmware stamps bytes in its UART interrupt), a message's arrival is its last
//! byte's, and [`StateTracker::record`] picks the latest sample that had arrived when the frame's
//! exposure ended: later ones (parsed while the frame waited to be sealed) belong to the next frame.

use gapstream_protocol::state::{SAMPLE_FIELDS_LEN, StateRecord, StateSample};

/// "!STA".
pub const STATE_HEADER: [u8; 4] = *b"!STA";
/// "!RNG".
pub const RNG_HEADER: [u8; 4] = *b"!RNG";
/// "!TOF".
pub const TOF_HEADER: [u8; 4] = *b"!TOF";
/// Bytes of a whole `!STA` message.
pub const STATE_MSG_LEN: usize = 4 + 4 + SAMPLE_FIELDS_LEN + 4;
const RNG_BODY: usize = 4;
const TOF_BODY: usize = 68;
const MAX_MSG: usize = 4 + TOF_BODY + 4;

/// CRC-32 as zlib's `crc32` (polynomial 0xEDB88320 reflected, initial and final XOR 0xFFFFFFFF):
/// the Crazyflie's `crc32CalculateBuffer`. Bit by bit: 40 bytes at 100 Hz cost the GAP8 nothing
/// worth a 1 KiB table in L2.
pub fn crc32(data: &[u8]) -> u32 {
    let mut r = 0xFFFF_FFFFu32;
    for &b in data {
        r ^= b as u32;
        for _ in 0..8 {
            r = if r & 1 != 0 {
                (r >> 1) ^ 0xEDB8_8320
            } else {
                r >> 1
            };
        }
    }
    r ^ 0xFFFF_FFFF
}

/// Unit of the STM32's timestamp field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stm32Time {
    /// Microseconds (`usecTimestamp()`: Bitcraze's `app_state_stream_aideck`, gapstream's app).
    #[default]
    Micros,
    /// FreeRTOS ticks of 1 ms (NanoCockpit's STM32 application, `stateCompressed_t.timestamp`).
    Millis,
}

impl Stm32Time {
    /// The field in µs (wrapping like the u32 it came in).
    pub fn to_us(self, raw: u32) -> u32 {
        match self {
            Stm32Time::Micros => raw,
            Stm32Time::Millis => raw.wrapping_mul(1000),
        }
    }
}

/// Encodes a `!STA` message (what the flight controller sends; for the simulated drone, the tests
/// and the GVSOC stand-in's check).
pub fn encode_state(s: &StateSample) -> [u8; STATE_MSG_LEN] {
    let mut b = [0u8; STATE_MSG_LEN];
    b[..4].copy_from_slice(&STATE_HEADER);
    b[4..8].copy_from_slice(&s.stm32_us.to_le_bytes());
    b[8..36].copy_from_slice(&s.encode_fields());
    let crc = crc32(&b[..36]);
    b[36..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// A whole, checked message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UartMessage {
    /// A state estimate (timestamp as sent: see [`Stm32Time`]).
    State(StateSample),
    /// NanoCockpit's entropy word.
    Rng(u32),
    /// NanoCockpit's ranging frame (not kept).
    Tof,
}

/// What went wrong on the UART (each counted by [`UartCounters`]; the parser goes on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UartError {
    /// A message's CRC did not match: `header` is which message it claimed to be.
    Checksum { header: [u8; 4] },
}

impl core::fmt::Display for UartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            UartError::Checksum { header } => write!(
                f,
                "UART message {:?} with a bad CRC",
                core::str::from_utf8(header).unwrap_or("????")
            ),
        }
    }
}

/// What the parser saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UartCounters {
    pub bytes: u64,
    pub states: u64,
    /// `!RNG` and `!TOF` messages.
    pub others: u64,
    pub bad_crc: u64,
    /// Bytes skipped while looking for a header.
    pub skipped: u64,
}

/// The streaming parser: bytes in, checked messages out. Bounded (one message of buffer).
#[derive(Clone, Debug)]
pub struct UartParser {
    buf: [u8; MAX_MSG],
    len: usize,
    /// The whole length of the message whose header starts `buf`, once [`UartParser::next_event`]
    /// has seen it (0: not known). While fewer bytes are buffered, a byte completes nothing and
    /// [`UartParser::push`] returns at once: the firmware parses every UART byte in the drone loop,
    /// and the header checks per byte were most of its cost.
    need: usize,
    counters: UartCounters,
}

impl Default for UartParser {
    fn default() -> Self {
        Self::new()
    }
}

fn body_len(header: &[u8]) -> Option<usize> {
    match header {
        h if h == STATE_HEADER => Some(4 + SAMPLE_FIELDS_LEN),
        h if h == RNG_HEADER => Some(RNG_BODY),
        h if h == TOF_HEADER => Some(TOF_BODY),
        _ => None,
    }
}

/// The whole length (header, body, CRC) of the message `header` (4 bytes) starts, or None when it
/// is no header this parser knows.
pub fn message_len(header: &[u8]) -> Option<usize> {
    body_len(header).map(|body| 4 + body + 4)
}

/// The shortest message on the line (`!RNG`, 12 bytes) and the longest (`!TOF`, 76 bytes).
pub const MIN_MSG_LEN: usize = 4 + RNG_BODY + 4;
/// See [`MIN_MSG_LEN`].
pub const MAX_MSG_LEN: usize = MAX_MSG;
const _: () = assert!(MIN_MSG_LEN <= STATE_MSG_LEN && STATE_MSG_LEN <= MAX_MSG_LEN);

/// Could `b` (shorter than 4) be the start of a header?
fn header_prefix(b: &[u8]) -> bool {
    [STATE_HEADER, RNG_HEADER, TOF_HEADER]
        .iter()
        .any(|h| h.starts_with(b))
}

impl UartParser {
    pub const fn new() -> Self {
        UartParser {
            buf: [0; MAX_MSG],
            len: 0,
            need: 0,
            counters: UartCounters {
                bytes: 0,
                states: 0,
                others: 0,
                bad_crc: 0,
                skipped: 0,
            },
        }
    }

    pub fn counters(&self) -> UartCounters {
        self.counters
    }

    /// Takes one byte; returns the first event it completes. Call [`UartParser::next_event`]
    /// until it returns None afterwards: a message whose CRC failed may have hidden whole messages
    /// behind its header, which are then found without another byte.
    pub fn push(&mut self, byte: u8) -> Option<Result<UartMessage, UartError>> {
        self.counters.bytes += 1;
        if self.len == MAX_MSG {
            // Only when the caller never drains the events: stay bounded.
            self.drop_front(1);
        }
        self.buf[self.len] = byte;
        self.len += 1;
        if self.len < self.need {
            // Inside a message whose header is known: what next_event would find (nothing).
            return None;
        }
        self.next_event()
    }

    /// The line went idle: whatever is buffered is a message cut short (or noise) and goes,
    /// counted as skipped. The flight controller sends each message in one burst, so a pause
    /// mid-message means its end was lost.
    pub fn flush(&mut self) {
        self.counters.skipped += self.len as u64;
        self.len = 0;
        self.need = 0;
    }

    fn drop_front(&mut self, n: usize) {
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
        self.need = 0;
    }

    /// The next message or error the buffered bytes hold, if any.
    pub fn next_event(&mut self) -> Option<Result<UartMessage, UartError>> {
        // Whatever cannot start a header goes, a byte at a time.
        while self.len > 0 && !header_prefix(&self.buf[..self.len.min(4)]) {
            self.drop_front(1);
            self.counters.skipped += 1;
        }
        if self.len < 4 {
            return None;
        }
        // Four bytes that are a header prefix are a header.
        let body = body_len(&self.buf[..4])?;
        let total = 4 + body + 4;
        if self.len < total {
            self.need = total;
            return None;
        }
        let crc = u32::from_le_bytes(self.buf[4 + body..total].try_into().unwrap());
        if crc32(&self.buf[..4 + body]) != crc {
            let header: [u8; 4] = self.buf[..4].try_into().unwrap();
            self.counters.bad_crc += 1;
            // The header may itself be noise that looked like one: try the bytes after it.
            self.drop_front(1);
            self.counters.skipped += 1;
            return Some(Err(UartError::Checksum { header }));
        }
        let msg = match &self.buf[..4] {
            h if h == STATE_HEADER => {
                self.counters.states += 1;
                let fields: &[u8; SAMPLE_FIELDS_LEN] = self.buf[8..36].try_into().unwrap();
                UartMessage::State(StateSample::decode_fields(
                    u32::from_le_bytes(self.buf[4..8].try_into().unwrap()),
                    fields,
                ))
            }
            h if h == RNG_HEADER => {
                self.counters.others += 1;
                UartMessage::Rng(u32::from_le_bytes(self.buf[4..8].try_into().unwrap()))
            }
            _ => {
                self.counters.others += 1;
                UartMessage::Tof
            }
        };
        self.drop_front(total);
        Some(Ok(msg))
    }
}

/// Where the state bytes come from: the firmware's UART receive ring, the simulated flight
/// controller. Non-blocking.
pub trait StateSource {
    /// The next received byte and the drone's time it arrived (ns, the drone's clock), or None
    /// when nothing is pending.
    fn next_byte(&mut self) -> Option<(u8, u64)>;
}

impl<S: StateSource + ?Sized> StateSource for alloc::boxed::Box<S> {
    fn next_byte(&mut self) -> Option<(u8, u64)> {
        (**self).next_byte()
    }
}

/// Samples kept: at 100 Hz, 80 ms of history, more than a frame waits between the end of its
/// exposure and its seal.
const HISTORY: usize = 8;

/// The latest samples with their arrival times (ns), newest wins.
#[derive(Clone, Debug, Default)]
pub struct StateLatch {
    ring: [(StateSample, u64); HISTORY],
    next: usize,
    held: usize,
}

impl StateLatch {
    pub fn push(&mut self, s: StateSample, arrival_ns: u64) {
        self.ring[self.next] = (s, arrival_ns);
        self.next = (self.next + 1) % HISTORY;
        self.held = (self.held + 1).min(HISTORY);
    }

    /// The newest sample that had arrived at `t_ns` (None when none had).
    pub fn at(&self, t_ns: u64) -> Option<(StateSample, u64)> {
        (1..=self.held)
            .map(|back| self.ring[(self.next + HISTORY - back) % HISTORY])
            .filter(|&(_, a)| a <= t_ns)
            .max_by_key(|&(_, a)| a)
    }

    /// The newest sample (None before the first).
    pub fn latest(&self) -> Option<(StateSample, u64)> {
        (self.held > 0).then(|| self.ring[(self.next + HISTORY - 1) % HISTORY])
    }
}

/// Settings of the state path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateConfig {
    /// A sample older than this at the end of a frame's exposure is flagged stale (ns).
    pub max_age_ns: u64,
    /// Unit of the STM32's timestamp.
    pub stm32_time: Stm32Time,
}

/// A pause of the line longer than this ends whatever message was in progress (ns): 2 ms, 23
/// byte times at 115200 baud, while the flight controller sends a message's 40 bytes back to back
/// every 10 ms.
pub const IDLE_RESET_NS: u64 = 2_000_000;

impl Default for StateConfig {
    /// 50 ms: five missed samples at NanoCockpit's 100 Hz.
    fn default() -> Self {
        StateConfig {
            max_age_ns: 50_000_000,
            stm32_time: Stm32Time::Micros,
        }
    }
}

/// Parser + latch over a [`StateSource`]: what the drone loop holds.
#[derive(Debug)]
pub struct StateTracker<S: StateSource> {
    source: S,
    parser: UartParser,
    latch: StateLatch,
    cfg: StateConfig,
    last_error: Option<UartError>,
    /// Arrival of the last byte (ns).
    last_byte_ns: Option<u64>,
}

impl<S: StateSource> StateTracker<S> {
    pub fn new(source: S, cfg: StateConfig) -> Self {
        StateTracker {
            source,
            parser: UartParser::new(),
            latch: StateLatch::default(),
            cfg,
            last_error: None,
            last_byte_ns: None,
        }
    }

    /// Reads every pending byte; returns the samples that completed.
    pub fn poll(&mut self) -> usize {
        let mut n = 0;
        while let Some((b, t)) = self.source.next_byte() {
            if self
                .last_byte_ns
                .is_some_and(|l| t.saturating_sub(l) > IDLE_RESET_NS)
            {
                self.parser.flush();
            }
            self.last_byte_ns = Some(t);
            let mut ev = self.parser.push(b);
            while let Some(e) = ev {
                match e {
                    Ok(UartMessage::State(mut s)) => {
                        s.stm32_us = self.cfg.stm32_time.to_us(s.stm32_us);
                        self.latch.push(s, t);
                        n += 1;
                    }
                    Ok(_) => {}
                    Err(e) => self.last_error = Some(e),
                }
                ev = self.parser.next_event();
            }
        }
        n
    }

    /// The record of a frame whose exposure ended at `exposure_end_ns` (the drone's clock): the
    /// newest sample that had arrived then, stale when older than the bound.
    pub fn record(&self, exposure_end_ns: u64) -> StateRecord {
        StateRecord::new(
            self.latch.at(exposure_end_ns).map(|(s, a)| (s, a / 1000)),
            exposure_end_ns / 1000,
            self.cfg.max_age_ns / 1000,
        )
    }

    pub fn counters(&self) -> UartCounters {
        self.parser.counters()
    }

    pub fn last_error(&self) -> Option<UartError> {
        self.last_error
    }

    pub fn latch(&self) -> &StateLatch {
        &self.latch
    }

    pub fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use proptest::prelude::*;

    fn sample(i: i16) -> StateSample {
        StateSample {
            stm32_us: (i as u32).wrapping_mul(1000),
            position_mm: [i, i.wrapping_neg(), i.wrapping_mul(2)],
            velocity_mm_s: [3, 4, 5],
            accel_mm_s2: [-6, 7, -8],
            quat: 0xC000_0000 | i as u32,
            rates_mrad_s: [9, -10, 11],
        }
    }

    fn parse_all(bytes: &[u8]) -> (Vec<UartMessage>, UartCounters) {
        let mut p = UartParser::new();
        let mut out = Vec::new();
        for &b in bytes {
            let mut ev = p.push(b);
            while let Some(e) = ev {
                if let Ok(m) = e {
                    out.push(m);
                }
                ev = p.next_event();
            }
        }
        (out, p.counters())
    }

    #[test]
    fn message_lengths() {
        assert_eq!(message_len(&STATE_HEADER), Some(STATE_MSG_LEN));
        assert_eq!(message_len(&RNG_HEADER), Some(MIN_MSG_LEN));
        assert_eq!(message_len(&TOF_HEADER), Some(MAX_MSG_LEN));
        assert_eq!(message_len(b"!STX"), None);
        assert_eq!(message_len(b"!ST"), None, "a prefix is no header");
    }

    #[test]
    fn crc_is_zlibs() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        let b: Vec<u8> = (0..=255u8).collect();
        let mut h = crc32fast::Hasher::new();
        h.update(&b);
        assert_eq!(crc32(&b), h.finalize());
    }

    /// The layout of NanoCockpit's `state_msg_t` (packed): header, u32 time, nine i16, the i32
    /// quaternion, three i16, CRC. Built here field by field, independently of the encoder.
    #[test]
    fn a_message_laid_out_by_hand_parses() {
        let mut m = Vec::new();
        m.extend_from_slice(b"!STA");
        m.extend_from_slice(&123_456u32.to_le_bytes());
        for v in [1i16, 2, 3, -4, -5, -6, 7, 8, 9] {
            m.extend_from_slice(&v.to_le_bytes());
        }
        m.extend_from_slice(&0x8123_4567u32.to_le_bytes());
        for v in [10i16, 11, -12] {
            m.extend_from_slice(&v.to_le_bytes());
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&m);
        m.extend_from_slice(&h.finalize().to_le_bytes());
        assert_eq!(m.len(), STATE_MSG_LEN);
        let want = StateSample {
            stm32_us: 123_456,
            position_mm: [1, 2, 3],
            velocity_mm_s: [-4, -5, -6],
            accel_mm_s2: [7, 8, 9],
            quat: 0x8123_4567,
            rates_mrad_s: [10, 11, -12],
        };
        assert_eq!(encode_state(&want).to_vec(), m);
        assert_eq!(parse_all(&m).0, [UartMessage::State(want)]);
    }

    #[test]
    fn rng_and_tof_are_recognised_and_skipped() {
        let mut b = Vec::new();
        for (h, body) in [(RNG_HEADER, 4usize), (TOF_HEADER, 68)] {
            let mut m = h.to_vec();
            m.extend((0..body).map(|i| i as u8));
            let c = crc32(&m);
            m.extend_from_slice(&c.to_le_bytes());
            b.extend(m);
        }
        b.extend_from_slice(&encode_state(&sample(3)));
        let (msgs, c) = parse_all(&b);
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[2], UartMessage::State(sample(3)));
        assert_eq!((c.states, c.others, c.bad_crc, c.skipped), (1, 2, 0, 0));
    }

    #[test]
    fn a_bad_crc_is_counted_and_the_next_message_still_parses() {
        let mut b = encode_state(&sample(1)).to_vec();
        b[10] ^= 0x40;
        b.extend_from_slice(&encode_state(&sample(2)));
        let mut p = UartParser::new();
        let mut errs = 0;
        let mut got = Vec::new();
        for &x in &b {
            let mut ev = p.push(x);
            while let Some(e) = ev {
                match e {
                    Ok(m) => got.push(m),
                    Err(UartError::Checksum { header }) => {
                        assert_eq!(&header, b"!STA");
                        errs += 1
                    }
                }
                ev = p.next_event();
            }
        }
        assert_eq!((errs, got), (1, alloc::vec![UartMessage::State(sample(2))]));
    }

    #[test]
    fn latch_picks_the_newest_sample_before_the_exposure_end() {
        let mut l = StateLatch::default();
        assert_eq!(l.at(100), None);
        for i in 0..20u64 {
            l.push(sample(i as i16), 10 * i);
        }
        assert_eq!(l.at(125).map(|x| x.1), Some(120));
        assert_eq!(l.at(190).map(|x| x.1), Some(190));
        // Older than the history: nothing that had arrived is kept any more.
        assert_eq!(l.at(50), None);
        assert_eq!(l.latest().map(|x| x.1), Some(190));
    }

    struct Bytes(Vec<(u8, u64)>);
    impl StateSource for Bytes {
        fn next_byte(&mut self) -> Option<(u8, u64)> {
            (!self.0.is_empty()).then(|| self.0.remove(0))
        }
    }

    #[test]
    fn tracker_stamps_arrival_with_the_last_byte_and_flags_stale() {
        let mut bytes = Vec::new();
        for (k, s) in [(0u64, sample(1)), (1, sample(2))] {
            for (i, &b) in encode_state(&s).iter().enumerate() {
                // 115200 baud: ~87 µs a byte; messages 10 ms apart.
                bytes.push((b, k * 10_000_000 + i as u64 * 86_806));
            }
        }
        let last = 10_000_000 + 39 * 86_806;
        let mut t = StateTracker::new(
            Bytes(bytes),
            StateConfig {
                max_age_ns: 12_000_000,
                stm32_time: Stm32Time::Millis,
            },
        );
        assert_eq!(t.poll(), 2);
        let r = t.record(last + 5_000_000);
        assert!(r.is_valid() && !r.is_stale());
        assert_eq!(r.arrival_us, last / 1000);
        assert_eq!(r.sample.stm32_us, 2_000_000, "ticks of 1 ms to µs");
        assert_eq!(r.sample.position_mm, [2, -2, 4]);
        // Between the two: the first.
        assert_eq!(t.record(last - 1).sample.position_mm, [1, -1, 2]);
        // Long after: still the newest, flagged.
        let old = t.record(last + 40_000_000);
        assert!(old.is_valid() && old.is_stale());
        // Before any: no sample.
        assert!(!t.record(1).is_valid());
    }

    proptest! {
        /// Any bytes, then a pause of the line, then messages: no panic, every byte counted,
        /// and the messages after the pause all arrive, in order, as the last ones found
        /// (garbage can hold a lucky message of its own only with a matching CRC). Without the
        /// pause a header-looking tail of the garbage may swallow up to 76 bytes of what follows.
        #[test]
        fn garbage_then_messages(garbage in proptest::collection::vec(any::<u8>(), 0..300),
                                 ids in proptest::collection::vec(any::<i16>(), 1..5)) {
            let mut bytes: Vec<(u8, u64)> = garbage.iter().map(|&b| (b, 1_000)).collect();
            for &i in &ids {
                bytes.extend(encode_state(&sample(i)).iter().map(|&b| (b, 10_000_000)));
            }
            let n = bytes.len();
            let mut t = StateTracker::new(Bytes(bytes), StateConfig::default());
            prop_assert!(t.poll() >= ids.len());
            prop_assert_eq!(t.counters().bytes, n as u64);
            let got = t.latch().latest().unwrap().0;
            prop_assert_eq!(got, sample(*ids.last().unwrap()));
            let (_, c) = parse_all(&garbage);
            prop_assert_eq!(c.bytes, garbage.len() as u64);
        }

        /// The fast path of `push` (inside a message whose header is known) changes nothing:
        /// the same events and counters as looking for an event after every byte, over any mix
        /// of messages (whole, cut short, with a flipped bit) and noise.
        #[test]
        fn push_fast_path_equals_an_event_check_per_byte(
            parts in proptest::collection::vec((0u8..5, any::<i16>(), any::<u8>(), proptest::collection::vec(any::<u8>(), 0..8)), 0..20),
        ) {
            let mut bytes = Vec::new();
            for (kind, i, x, noise) in parts {
                bytes.extend(noise);
                let mut m = encode_state(&sample(i)).to_vec();
                match kind {
                    0 => {}
                    1 => m.truncate(x as usize % STATE_MSG_LEN),
                    2 => m[x as usize % STATE_MSG_LEN] ^= 1 << (x % 8),
                    3 => m = [&RNG_HEADER[..], &[x; 4]].concat(),
                    _ => m = [&TOF_HEADER[..], &[x; 72]].concat(),
                }
                bytes.extend(m);
            }
            let (mut fast, mut slow) = (UartParser::new(), UartParser::new());
            for &b in &bytes {
                let mut f = Vec::new();
                let mut ev = fast.push(b);
                while let Some(e) = ev {
                    f.push(e);
                    ev = fast.next_event();
                }
                // `push` without the fast path.
                slow.counters.bytes += 1;
                if slow.len == MAX_MSG {
                    slow.drop_front(1);
                }
                slow.buf[slow.len] = b;
                slow.len += 1;
                let mut s = Vec::new();
                let mut ev = slow.next_event();
                while let Some(e) = ev {
                    s.push(e);
                    ev = slow.next_event();
                }
                prop_assert_eq!(f, s);
                prop_assert_eq!(fast.counters(), slow.counters());
            }
        }

        /// Flipping any one bit of a message loses that message only.
        #[test]
        fn one_flipped_bit_costs_one_message(at in 0usize..STATE_MSG_LEN, bit in 0u8..8) {
            let mut b = encode_state(&sample(5)).to_vec();
            b[at] ^= 1 << bit;
            b.extend_from_slice(&encode_state(&sample(6)));
            let (msgs, _) = parse_all(&b);
            prop_assert_eq!(msgs, alloc::vec![UartMessage::State(sample(6))]);
        }
    }
}
