//! The STM32's state messages on the GAP8's UART: the bytes `firmware/src/board.c` receives
//! (`fw_uart_rx_*`: uDMA reads of the lengths [`ReadPlanner`] picks, two always queued, each read's
//! bytes stamped with FC timer 1 in its completion callback, a ring of 512) as a
//! `gapstream_drone::state::StateSource`: each byte with its arrival on the drone's clock, which the
//! drone loop parses (`gapstream_drone::state`) and stamps its frames with.
//!
//! **Reads in batches.** A one-byte read per byte costs an interrupt and an event-kernel callback
//! per byte: 4,000 a second for NanoCockpit's 40-byte messages at 100 Hz (docs/hardware.md, "The
//! drone's state", has what the drone loop's share of the state path cost and costs now).
//! [`ReadPlanner`] sizes the reads so that a message's last byte always ends a read: a `!STA`
//! message comes in three reads (its header, 8 bytes, the remaining 28), each completion stamped
//! as the one-byte reads were, so a message's arrival (its last byte) keeps the stamp it had; the
//! other bytes of a read are back-dated from its completion by one byte time each
//! ([`backdated_stamp`]), exact while the line sends them back to back, as the flight controller
//! sends a message. Nothing here decides what the bytes mean: every byte still goes to the parser,
//! and a read the planner sized wrongly (noise, an unknown message, a message cut short) costs
//! only stamp accuracy for the bytes in it and a few one-byte reads until a header is seen again.

use gapstream_drone::state::StateSource;
use gapstream_drone::state::{MAX_MSG_LEN, MIN_MSG_LEN, message_len};

use crate::clock::{Counter32, WideClock};

/// Received bytes with the raw 32-bit timer value of their arrival.
pub trait UartRx {
    fn next(&mut self) -> Option<(u8, u32)>;
}

/// The UART's bytes on the drone's clock: a [`WideClock`] of its own over the drone clock's
/// counter (same counter, same rate: the same times), so the drone loop can own the source.
pub struct UartStateSource<R: UartRx, T: Counter32> {
    rx: R,
    clock: WideClock<T>,
    /// The last byte's raw stamp and its 64-bit cycles, within one read of the ring.
    last: Option<(u32, u64)>,
}

impl<R: UartRx, T: Counter32> UartStateSource<R, T> {
    pub fn new(rx: R, clock: WideClock<T>) -> Self {
        UartStateSource {
            rx,
            clock,
            last: None,
        }
    }
}

impl<R: UartRx, T: Counter32> StateSource for UartStateSource<R, T> {
    fn next_byte(&mut self) -> Option<(u8, u64)> {
        let Some((b, raw)) = self.rx.next() else {
            self.last = None;
            return None;
        };
        let cycles = match self.last {
            // The first byte of a read of the ring: on the clock, whose counter is read. The
            // stamp is recent (the ring holds 128 ms; the timer wraps after 17 s at 240 MHz).
            None => self.clock.extend(raw),
            // The next ones: next to the byte before (the ring's bytes span 128 ms at most, on
            // either side of it: a read's bytes are back-dated), without reading the counter.
            Some((last_raw, last_cycles)) => {
                last_cycles.wrapping_add(raw.wrapping_sub(last_raw) as i32 as i64 as u64)
            }
        };
        self.last = Some((raw, cycles));
        Some((b, self.clock.cycles_to_ns(cycles)))
    }
}

/// Where the bytes received so far leave the line, as far as the planner knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    /// Inside a message whose header was seen: this many bytes before its end (≥ 1).
    Inside(usize),
    /// Between messages: `window` holds the last `wlen` bytes, no header among them. `aligned`:
    /// they all came right after the end of a message (the next header may start there).
    Between { aligned: bool },
}

/// Picks the length of each uDMA read on the UART so that every message's last byte ends a read.
///
/// The driver keeps two reads queued (so the next one is running when one completes, and no byte
/// finds the uDMA without a buffer); when a read completes, the read after the one now running is
/// chosen. That one is chosen before the running read's bytes are known, so right after a message
/// the next two reads may hold at most the shortest message together: the header (4) and 8 more
/// ([`MIN_MSG_LEN`] = 12, NanoCockpit's `!RNG`); once the header is in, the rest of the message
/// comes in one read. Without a known header in sight the reads are one byte long, as before.
/// Lengths are 1..=[`ReadPlanner::MAX_READ`].
#[derive(Clone, Debug)]
pub struct ReadPlanner {
    at: At,
    window: [u8; 4],
    wlen: usize,
}

impl Default for ReadPlanner {
    fn default() -> Self {
        Self::new()
    }
}

impl ReadPlanner {
    /// The length of the two reads queued when the UART opens (the planner starts hunting).
    pub const FIRST_READ: usize = 1;
    /// The longest read: the rest of the longest message after a one-byte read.
    pub const MAX_READ: usize = MAX_MSG_LEN;
    /// The first read after a message's end: its header.
    const HEADER_READ: usize = 4;

    pub const fn new() -> Self {
        ReadPlanner {
            at: At::Between { aligned: false },
            window: [0; 4],
            wlen: 0,
        }
    }

    /// A read completed with `done`; the read queued after it (`in_flight` bytes long) is running.
    /// Returns the length of the read to queue after that one.
    pub fn next(&mut self, done: &[u8], in_flight: usize) -> usize {
        for &b in done {
            self.scan(b);
        }
        self.plan(in_flight)
    }

    fn scan(&mut self, b: u8) {
        match self.at {
            At::Inside(r) if r > 1 => self.at = At::Inside(r - 1),
            At::Inside(_) => {
                self.at = At::Between { aligned: true };
                self.wlen = 0;
            }
            At::Between { aligned } => {
                if self.wlen == 4 {
                    self.window.copy_within(1..4, 0);
                    self.wlen = 3;
                }
                self.window[self.wlen] = b;
                self.wlen += 1;
                if let Some(n) = message_len(&self.window[..self.wlen]) {
                    self.at = At::Inside(n - 4);
                    self.wlen = 0;
                    return;
                }
                // Still right after a message only while the bytes can be the start of a header.
                let prefix = self.wlen < 4 && message_len_prefix(&self.window[..self.wlen]);
                self.at = At::Between {
                    aligned: aligned && prefix,
                };
            }
        }
    }

    fn plan(&self, in_flight: usize) -> usize {
        match self.at {
            // The running read ends inside the message: the rest of it.
            At::Inside(r) if in_flight < r => r - in_flight,
            // The running read ends the message: the next one's header.
            At::Inside(r) if in_flight == r => Self::HEADER_READ,
            // Right after a message: together with the running read, no more than the shortest
            // message holds.
            At::Between { aligned: true } if self.wlen + in_flight < MIN_MSG_LEN => {
                MIN_MSG_LEN - self.wlen - in_flight
            }
            // The running read crosses a message's end, or nothing is known: a byte at a time.
            _ => 1,
        }
    }
}

/// Could `b` (at most 3 bytes) start a header the parser knows?
fn message_len_prefix(b: &[u8]) -> bool {
    [
        gapstream_drone::state::STATE_HEADER,
        gapstream_drone::state::RNG_HEADER,
        gapstream_drone::state::TOF_HEADER,
    ]
    .iter()
    .any(|h| h.starts_with(b))
}

/// The stamp `firmware/src/board.c` gives byte `i` of a read of `len` bytes that completed at
/// `done_at` (timer cycles): one byte time (`byte_cycles`, 10 bits at the baud rate for 8N1) per
/// byte after it, back from the completion. The last byte gets `done_at` itself.
pub fn backdated_stamp(done_at: u32, len: usize, i: usize, byte_cycles: u32) -> u32 {
    done_at.wrapping_sub(((len - 1 - i) as u32).wrapping_mul(byte_cycles))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::tests::FakeCounter;
    use core::cell::Cell;
    use gapstream_drone::state::{StateConfig, StateTracker, encode_state};
    use gapstream_protocol::state::StateSample;
    use std::collections::VecDeque;
    use std::rc::Rc;

    struct Ring(VecDeque<(u8, u32)>);
    impl UartRx for Ring {
        fn next(&mut self) -> Option<(u8, u32)> {
            self.0.pop_front()
        }
    }

    /// Bytes with breaks (`None`: the end of one read of the ring).
    struct Polls(VecDeque<Option<(u8, u32)>>);
    impl UartRx for Polls {
        fn next(&mut self) -> Option<(u8, u32)> {
            self.0.pop_front().flatten()
        }
    }

    proptest::proptest! {
        /// Within a read of the ring each stamp is placed next to the one before, without the
        /// counter: the same times as placing each one before the counter's value, for stamps in
        /// any order up to 2^30 cycles old (the ring holds 128 ms: 3 * 10^7 cycles at 240 MHz),
        /// the counter wrapped or not.
        #[test]
        fn stamps_relative_to_the_byte_before(
            now_low in proptest::prelude::any::<u32>(),
            ages in proptest::collection::vec((0u32..(1 << 30), proptest::prelude::any::<bool>()), 1..60),
        ) {
            let c = Rc::new(Cell::new(u32::MAX));
            let clock = WideClock::new(FakeCounter(c.clone(), 240_000_000));
            c.set(now_low);
            let now64 = clock.cycles(); // 2^32 + now_low: one wrap seen
            let reference = WideClock::new(FakeCounter(c.clone(), 240_000_000));
            let mut ring = VecDeque::new();
            for &(age, brk) in &ages {
                ring.push_back(Some((0x55, now_low.wrapping_sub(age))));
                if brk {
                    ring.push_back(None);
                }
            }
            let mut src = UartStateSource::new(Polls(ring), clock);
            for &(age, brk) in &ages {
                let (_, ns) = src.next_byte().unwrap();
                proptest::prop_assert_eq!(ns, reference.cycles_to_ns(now64 - age as u64));
                if brk {
                    proptest::prop_assert!(src.next_byte().is_none());
                }
            }
        }
    }

    /// Bytes stamped just before the timer wrapped are placed before it; the record's arrival is
    /// the last byte's time on the 64-bit clock.
    #[test]
    fn stamps_across_a_timer_wrap() {
        let c = Rc::new(Cell::new(0xFFFF_0000u32));
        let clock = WideClock::new(FakeCounter(c.clone(), 1_000_000));
        let clock2 = WideClock::new(FakeCounter(c.clone(), 1_000_000));
        let s = StateSample {
            stm32_us: 42,
            position_mm: [1, 2, 3],
            ..StateSample::default()
        };
        let ring: VecDeque<(u8, u32)> = encode_state(&s)
            .iter()
            .enumerate()
            .map(|(i, &b)| (b, 0xFFFF_FFF0u32.wrapping_add(i as u32)))
            .collect();
        c.set(0x100); // wrapped since
        let mut t = StateTracker::new(
            UartStateSource::new(Ring(ring), clock2),
            StateConfig::default(),
        );
        assert_eq!(t.poll(), 1);
        let last = 0xFFFF_FFF0u64 + 39; // the 40th byte, after the wrap: 2^32 + 23
        let r = t.record(clock.cycles_to_ns(1 << 33));
        assert_eq!(r.sample, s);
        assert_eq!(r.arrival_us, last, "1 MHz: a cycle is a microsecond");
    }
}

/// The planner against a model of the uDMA: reads of the planned lengths, two queued, over a byte
/// stream with its arrival times.
#[cfg(test)]
mod batch_tests {
    use super::*;
    use gapstream_drone::state::{RNG_HEADER, TOF_HEADER, crc32, encode_state};
    use gapstream_protocol::state::StateSample;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// The reads the planner asks for over `stream`: the end (exclusive) of each completed read.
    /// Checks every length asked for.
    fn reads(stream: &[u8]) -> Vec<usize> {
        let mut p = ReadPlanner::new();
        let mut queue = VecDeque::from([ReadPlanner::FIRST_READ, ReadPlanner::FIRST_READ]);
        let (mut pos, mut ends) = (0, Vec::new());
        loop {
            let len = queue.pop_front().unwrap();
            if pos + len > stream.len() {
                return ends;
            }
            let done = &stream[pos..pos + len];
            pos += len;
            ends.push(pos);
            let next = p.next(done, *queue.front().unwrap());
            assert!(
                (1..=ReadPlanner::MAX_READ).contains(&next),
                "read of {next} bytes"
            );
            queue.push_back(next);
        }
    }

    fn state_msg(i: u32) -> Vec<u8> {
        encode_state(&StateSample {
            stm32_us: i.wrapping_mul(10_000),
            position_mm: [i as i16, -(i as i16), 7],
            ..StateSample::default()
        })
        .to_vec()
    }

    fn other_msg(header: [u8; 4], body: &[u8]) -> Vec<u8> {
        let mut m = header.to_vec();
        m.extend_from_slice(body);
        let crc = crc32(&m);
        m.extend_from_slice(&crc.to_le_bytes());
        m
    }

    /// NanoCockpit's 100 Hz `!STA` stream, joined mid-message: a few one-byte reads until the
    /// first header, then three reads per message (header, 8 bytes, the rest), each message's last
    /// byte the end of a read.
    #[test]
    fn state_stream_three_reads_per_message() {
        let mut stream = state_msg(0)[17..].to_vec(); // opened mid-message
        let mut msg_ends = Vec::new();
        for i in 1..=100 {
            stream.extend(state_msg(i));
            msg_ends.push(stream.len());
        }
        let ends = reads(&stream);
        for e in &msg_ends {
            assert!(ends.contains(e), "message ending at {e} ends no read");
        }
        // After the first message: exactly 3 reads per message.
        let first = msg_ends[0];
        let after = ends.iter().filter(|&&e| e > first).count();
        assert_eq!(after, 3 * 99);
        // One byte per read before the first header: 23 bytes of the cut message, then the
        // first header byte by byte.
        let before = ends.iter().filter(|&&e| e <= first).count();
        assert!(
            before <= 23 + 4 + 3,
            "{before} reads before the first message's end"
        );
    }

    /// `!RNG` (12 bytes, the shortest) and `!TOF` (76, the longest) between the states, noise
    /// before and between: every message still ends a read.
    #[test]
    fn mixed_messages_and_noise() {
        let mut stream = b"boot: hello\n".to_vec();
        let mut msg_ends = Vec::new();
        for i in 0..30u32 {
            stream.extend(state_msg(i));
            msg_ends.push(stream.len());
            if i % 3 == 0 {
                stream.extend(other_msg(RNG_HEADER, &i.to_le_bytes()));
                msg_ends.push(stream.len());
            }
            if i % 5 == 1 {
                stream.extend(other_msg(TOF_HEADER, &[i as u8; 68]));
                msg_ends.push(stream.len());
            }
            if i % 7 == 2 {
                stream.extend(b"xyz");
            }
        }
        let ends = reads(&stream);
        for e in &msg_ends {
            assert!(ends.contains(e), "message ending at {e} ends no read");
        }
    }

    proptest! {
        /// Any bytes and any running read: a length in 1..=MAX_READ (checked in `reads`), and
        /// every byte read exactly once (the reads tile the stream).
        #[test]
        fn any_bytes_any_lengths(stream in proptest::collection::vec(any::<u8>(), 0..600)) {
            let ends = reads(&stream);
            prop_assert!(ends.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(stream.len() - ends.last().copied().unwrap_or(0) <= ReadPlanner::MAX_READ);
        }

        /// Messages of the three kinds, each after noise without a `!`: every message ends a read.
        #[test]
        fn every_message_ends_a_read(
            parts in proptest::collection::vec(
                (0u8..3, any::<u32>(), proptest::collection::vec(any::<u8>().prop_filter("no '!'", |b| *b != b'!'), 0..6)),
                1..40,
            )
        ) {
            let mut stream = Vec::new();
            let mut msg_ends = Vec::new();
            for (kind, x, noise) in parts {
                stream.extend(noise);
                stream.extend(match kind {
                    0 => state_msg(x),
                    1 => other_msg(RNG_HEADER, &x.to_le_bytes()),
                    _ => other_msg(TOF_HEADER, &[x as u8; 68]),
                });
                msg_ends.push(stream.len());
            }
            let ends = reads(&stream);
            for e in &msg_ends {
                prop_assert!(ends.contains(e), "message ending at {} ends no read", e);
            }
        }
    }

    /// The stamps: 8 messages of a 100 Hz state stream at 115200 baud (86.8 µs a byte) on a 1 MHz timer, each
    /// read's callback `latency` after its last byte. Every sample's arrival is its last byte's
    /// time plus the latency, as with one-byte reads; the bytes before it in a read get exact
    /// times too (back to back on the line; the byte time rounded to timer cycles), so the parser's 2 ms pause rule sees the gaps
    /// between messages and nothing else.
    #[test]
    fn arrival_stamps_are_the_last_bytes_time() {
        use crate::clock::WideClock;
        use crate::clock::tests::FakeCounter;
        use core::cell::Cell;
        use gapstream_drone::state::{StateConfig, StateTracker};
        use std::rc::Rc;

        struct Ring(VecDeque<(u8, u32)>);
        impl UartRx for Ring {
            fn next(&mut self) -> Option<(u8, u32)> {
                self.0.pop_front()
            }
        }
        // 10 bits at 115200 baud on a 1 MHz timer: 86.8 µs; the board's byte_cycles rounds down.
        let byte_ns = 10_000_000_000u64 / 115_200;
        let byte_cycles = (1_000_000u64 * 10 / 115_200) as u32;
        let latency = 25u32;
        let (mut stream, mut t_ns, mut last_byte_us) = (Vec::new(), Vec::new(), Vec::new());
        // 8 messages: what the latch keeps.
        for i in 0..8u32 {
            let start = 1_000_000 + i as u64 * 10_000_000; // ns
            for (k, b) in state_msg(i).into_iter().enumerate() {
                stream.push(b);
                t_ns.push(start + (k as u64 + 1) * byte_ns);
            }
            last_byte_us.push(*t_ns.last().unwrap() / 1000);
        }
        let ends = reads(&stream);
        let mut ring = VecDeque::new();
        let mut start = 0;
        for &e in &ends {
            let done_at = (t_ns[e - 1] / 1000) as u32 + latency;
            for (i, &b) in stream[start..e].iter().enumerate() {
                let s = backdated_stamp(done_at, e - start, i, byte_cycles);
                let truth = (t_ns[start + i] / 1000) as u32 + latency;
                // Exact but for the byte time's rounding to whole timer cycles (< 1 per byte).
                let bytes_after = (e - start - 1 - i) as u32;
                assert!(
                    truth.abs_diff(s) <= 1 + bytes_after,
                    "byte {i} of a read of {}: stamp {s}, truth {truth}",
                    e - start
                );
                ring.push_back((b, s));
            }
            start = e;
        }
        let c = Rc::new(Cell::new(0u32));
        let clock = WideClock::new(FakeCounter(c.clone(), 1_000_000));
        let mut t = StateTracker::new(
            UartStateSource::new(
                Ring(ring),
                WideClock::new(FakeCounter(c.clone(), 1_000_000)),
            ),
            StateConfig::default(),
        );
        c.set(300_000);
        assert_eq!(t.poll(), 8);
        assert_eq!(t.counters().skipped, 0, "no message cut by a false pause");
        for (i, &truth_us) in last_byte_us.iter().enumerate() {
            let at_ns = clock.cycles_to_ns(truth_us + latency as u64);
            let r = t.record(at_ns);
            assert_eq!(r.sample.stm32_us, i as u32 * 10_000);
            assert_eq!(r.arrival_us, truth_us + latency as u64, "message {i}");
        }
    }
}
