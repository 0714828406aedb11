//! The STM32's state messages on the GAP8's UART: the bytes `firmware/src/board.c` receives
//! (`fw_uart_rx_*`: two one-byte uDMA reads always queued, each byte stamped with FC timer 1 in its
//! completion callback, a ring of 512) as a `gapstream_drone::state::StateSource`: each byte with
//! its arrival on the drone's clock, which the drone loop parses (`gapstream_drone::state`) and
//! stamps its frames with.

use gapstream_drone::state::StateSource;

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
}

impl<R: UartRx, T: Counter32> UartStateSource<R, T> {
    pub fn new(rx: R, clock: WideClock<T>) -> Self {
        UartStateSource { rx, clock }
    }
}

impl<R: UartRx, T: Counter32> StateSource for UartStateSource<R, T> {
    fn next_byte(&mut self) -> Option<(u8, u64)> {
        let (b, raw) = self.rx.next()?;
        // The stamp is recent (the ring holds 128 ms; the timer wraps after 17 s at 240 MHz).
        let cycles = self.clock.extend(raw);
        Some((b, self.clock.cycles_to_ns(cycles)))
    }
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
