//! The drone's clock from a free-running 32-bit hardware counter (GAP8: FC timer 1 at the FC
//! clock, 50 MHz on the model, so it wraps every 86 s): extended to 64 bits in software, in cycles
//! for the per-stage figures and in nanoseconds for `gapstream_drone::Clock`.

use core::cell::Cell;

/// A free-running up-counter.
pub trait Counter32 {
    /// The counter now.
    fn read(&self) -> u32;
    /// Its rate in Hz (must be > 0).
    fn hz(&self) -> u32;
}

/// 64-bit cycles and nanoseconds from a [`Counter32`]. Reads must come at least once per wrap
/// period (86 s at 50 MHz); the firmware reads it several times per frame.
pub struct WideClock<T: Counter32> {
    counter: T,
    last: Cell<u32>,
    high: Cell<u64>,
    ns: NsPerCycles,
}

impl<T: Counter32> WideClock<T> {
    pub fn new(counter: T) -> Self {
        let now = counter.read();
        let ns = NsPerCycles::new(counter.hz());
        WideClock {
            counter,
            last: Cell::new(now),
            high: Cell::new(0),
            ns,
        }
    }

    /// The counter.
    pub fn counter(&self) -> &T {
        &self.counter
    }

    /// Cycles since [`WideClock::new`]'s reading of the counter, plus that reading.
    pub fn cycles(&self) -> u64 {
        let now = self.counter.read();
        if now < self.last.get() {
            self.high.set(self.high.get() + (1u64 << 32));
        }
        self.last.set(now);
        self.high.get() | now as u64
    }

    /// Extends a raw counter value taken a short while (less than one wrap period) before now, for
    /// timestamps recorded by interrupt handlers.
    pub fn extend(&self, raw: u32) -> u64 {
        let now = self.cycles();
        let back = (now as u32).wrapping_sub(raw) as u64;
        now - back.min(now)
    }

    /// Cycles to nanoseconds at the counter's rate (exact integer arithmetic, no overflow for
    /// any u64 cycle count below 2^64 / 10^9 * hz... i.e. centuries).
    pub fn cycles_to_ns(&self, cycles: u64) -> u64 {
        self.ns.ns(cycles)
    }
}

/// [`cycles_to_ns`] at one rate, without a division per call: the drone loop converts every
/// UART byte's stamp, and a 64-bit division is a library call on rv32imc (~550 FC cycles each on
/// the GVSOC model, two per conversion). Each division by the rate is a multiplication by its
/// reciprocal `floor((2^64 - 1) / hz)`, computed once, whose quotient is at most 2 short, then
/// corrected: the same results as [`cycles_to_ns`] for every input (`tests::converter_*`).
#[derive(Clone, Copy, Debug)]
pub struct NsPerCycles {
    hz: u64,
    recip: u64,
}

impl NsPerCycles {
    pub fn new(hz: u32) -> Self {
        let hz = hz.max(1) as u64;
        NsPerCycles {
            hz,
            recip: u64::MAX / hz,
        }
    }

    /// `(n / hz, n % hz)`.
    fn div_rem(&self, n: u64) -> (u64, u64) {
        // q ≤ n / hz (recip ≤ 2^64 / hz), so q * hz ≤ n; and q ≥ n / hz − 2.
        let mut q = mulhi(n, self.recip);
        let mut r = n - q * self.hz;
        while r >= self.hz {
            q += 1;
            r -= self.hz;
        }
        (q, r)
    }

    /// `cycles` in nanoseconds, rounded down (as [`cycles_to_ns`]).
    pub fn ns(&self, cycles: u64) -> u64 {
        let (q, r) = self.div_rem(cycles);
        // r < hz < 2^32: r * 10^9 < 2^62.
        let (f, _) = self.div_rem(r * 1_000_000_000);
        q.wrapping_mul(1_000_000_000).wrapping_add(f)
    }
}

/// The high 64 bits of `a * b`, from 32-bit halves (no 128-bit library call on rv32imc).
fn mulhi(a: u64, b: u64) -> u64 {
    let (a0, a1) = (a & 0xFFFF_FFFF, a >> 32);
    let (b0, b1) = (b & 0xFFFF_FFFF, b >> 32);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    // At most 3 (2^32 − 1): no overflow.
    let mid = (p00 >> 32) + (p01 & 0xFFFF_FFFF) + (p10 & 0xFFFF_FFFF);
    p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32)
}

/// `cycles` at `hz` in nanoseconds, rounded down: `cycles * 10^9 / hz` (taken modulo 2^64 past
/// centuries). In two 64-bit divisions by `hz` (whole seconds, then the rest), not one 128-bit
/// division: rv32imc has no 128-bit arithmetic, and the library's 128-bit division cost the
/// firmware thousands of FC cycles per call, which the drone loop paid for every UART byte it
/// stamped (docs/hardware.md, "The drone's state"). Equal to the 128-bit formula for every input
/// (`tests::ns_equal_the_128_bit_formula`): `cycles = q * hz + r` gives
/// `cycles * 10^9 / hz = q * 10^9 + r * 10^9 / hz` exactly, and `r * 10^9 < 2^32 * 10^9 < 2^64`.
pub fn cycles_to_ns(cycles: u64, hz: u32) -> u64 {
    let hz = hz.max(1) as u64;
    let (q, r) = (cycles / hz, cycles % hz);
    q.wrapping_mul(1_000_000_000)
        .wrapping_add(r * 1_000_000_000 / hz)
}

impl<T: Counter32> gapstream_drone::Clock for WideClock<T> {
    fn now_ns(&self) -> u64 {
        self.cycles_to_ns(self.cycles())
    }
}

impl<T: Counter32> gapstream_drone::Clock for &WideClock<T> {
    fn now_ns(&self) -> u64 {
        (*self).now_ns()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use gapstream_drone::Clock;
    use proptest::prelude::*;
    use std::rc::Rc;

    /// A counter the test moves by hand.
    #[derive(Clone)]
    pub struct FakeCounter(pub Rc<Cell<u32>>, pub u32);
    impl Counter32 for FakeCounter {
        fn read(&self) -> u32 {
            self.0.get()
        }
        fn hz(&self) -> u32 {
            self.1
        }
    }

    proptest! {
        /// The two-division form against the 128-bit formula it replaces, for any cycle count
        /// and rate.
        #[test]
        fn ns_equal_the_128_bit_formula(cycles in any::<u64>(), hz in any::<u32>()) {
            let h = hz.max(1) as u128;
            prop_assert_eq!(cycles_to_ns(cycles, hz), ((cycles as u128 * 1_000_000_000) / h) as u64);
        }

        /// The same at the firmware's rates, over a run's cycle counts.
        #[test]
        fn ns_at_fc_rates(cycles in 0u64..(1 << 44), i in 0usize..4) {
            let hz = [50_000_000u32, 150_000_000, 240_000_000, 250_000_000][i];
            prop_assert_eq!(
                cycles_to_ns(cycles, hz),
                ((cycles as u128 * 1_000_000_000) / hz as u128) as u64
            );
            prop_assert_eq!(NsPerCycles::new(hz).ns(cycles), cycles_to_ns(cycles, hz));
        }

        /// The reciprocal converter equals the divisions for any cycle count and rate.
        #[test]
        fn converter_equals_the_divisions(cycles in any::<u64>(), hz in any::<u32>()) {
            prop_assert_eq!(NsPerCycles::new(hz).ns(cycles), cycles_to_ns(cycles, hz));
        }

        /// Its division at the edges: any dividend, small and large rates.
        #[test]
        fn converter_div_rem(n in any::<u64>(), hz in prop_oneof![1u32..16, any::<u32>(), (u32::MAX - 16)..=u32::MAX]) {
            let c = NsPerCycles::new(hz);
            prop_assert_eq!(c.div_rem(n), (n / hz.max(1) as u64, n % hz.max(1) as u64));
        }

        #[test]
        fn mulhi_is_the_high_half(a in any::<u64>(), b in any::<u64>()) {
            prop_assert_eq!(mulhi(a, b), ((a as u128 * b as u128) >> 64) as u64);
        }
    }

    #[test]
    fn converter_edges() {
        for hz in [0u32, 1, 2, 3, 240_000_000, u32::MAX] {
            let c = NsPerCycles::new(hz);
            for n in [
                0u64,
                1,
                hz as u64,
                (hz as u64).wrapping_sub(1),
                u64::MAX,
                u64::MAX - 1,
                1 << 63,
            ] {
                assert_eq!(c.ns(n), cycles_to_ns(n, hz), "{n} at {hz} Hz");
                let h = hz.max(1) as u64;
                assert_eq!(c.div_rem(n), (n / h, n % h), "{n} at {hz} Hz");
            }
        }
    }

    #[test]
    fn wraps_are_counted() {
        let c = Rc::new(Cell::new(0xFFFF_FF00u32));
        let clk = WideClock::new(FakeCounter(c.clone(), 50_000_000));
        assert_eq!(clk.cycles(), 0xFFFF_FF00);
        c.set(0x10);
        assert_eq!(clk.cycles(), (1 << 32) + 0x10);
        c.set(0xFFFF_FFFF);
        assert_eq!(clk.cycles(), (1 << 32) + 0xFFFF_FFFF);
        c.set(5);
        assert_eq!(clk.cycles(), (2 << 32) + 5);
    }

    #[test]
    fn nanoseconds_at_50_mhz_are_20_per_cycle() {
        let c = Rc::new(Cell::new(0));
        let clk = WideClock::new(FakeCounter(c.clone(), 50_000_000));
        c.set(50_000_000);
        assert_eq!(clk.now_ns(), 1_000_000_000);
        assert_eq!(cycles_to_ns(3, 50_000_000), 60);
        assert_eq!(
            cycles_to_ns(u64::MAX / 2, 50_000_000),
            ((u64::MAX / 2) as u128 * 20) as u64
        );
    }

    #[test]
    fn extend_maps_a_recent_raw_value_across_a_wrap() {
        let c = Rc::new(Cell::new(0xFFFF_FFF0u32));
        let clk = WideClock::new(FakeCounter(c.clone(), 1000));
        c.set(0x20);
        // Recorded by an interrupt just before the wrap.
        assert_eq!(clk.extend(0xFFFF_FFF8), 0xFFFF_FFF8);
        assert_eq!(clk.extend(0x18), (1 << 32) + 0x18);
    }

    proptest! {
        /// Reading at least once per wrap: the 64-bit value is the sum of all increments.
        #[test]
        fn monotonic_sum_of_steps(start in any::<u32>(), steps in proptest::collection::vec(0u32..=u32::MAX, 1..50)) {
            let c = Rc::new(Cell::new(start));
            let clk = WideClock::new(FakeCounter(c.clone(), 50_000_000));
            let mut expect = start as u64;
            prop_assert_eq!(clk.cycles(), expect);
            for s in steps {
                c.set(c.get().wrapping_add(s));
                expect += s as u64;
                prop_assert_eq!(clk.cycles(), expect);
            }
        }
    }
}
