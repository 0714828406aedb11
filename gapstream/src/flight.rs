//! The simulated flight controller: a known trajectory, sent to the simulated drone as the
//! Crazyflie's STM32 sends its state to the GAP8 (NanoCockpit's `!STA` messages at 100 Hz over a
//! 115200-baud UART, each byte arriving when the UART would deliver it), so the simulated drone
//! stamps its frames through the same parser and latch the firmware runs
//! (`gapstream_drone::state`).
//!
//! The trajectory ([`Circle`]): a horizontal circle at constant speed, the nose along the
//! direction of travel. Its values at the STM32's time `t` (s), in the message's units and
//! rounded half away from zero: position `(R cos θ, R sin θ, h)`, velocity `(−Rω sin θ, Rω cos θ,
//! 0)`, acceleration `(−Rω² cos θ, −Rω² sin θ, 0)`, yaw `θ + π/2`, body rates `(0, 0, ω)`, with
//! `θ = ωt`, `ω = 2π / period`; the quaternion `(0, 0, sin(yaw/2), cos(yaw/2))` in `f32`,
//! compressed. `python/tests/test_mcap.py` recomputes them from `t` and checks every Odometry.

use std::collections::VecDeque;

use gapstream_drone::state::{StateSource, encode_state};
use gapstream_protocol::state::{StateSample, quat};

/// A circle with the nose along the path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Circle {
    pub radius_m: f64,
    pub altitude_m: f64,
    /// One lap, s.
    pub period_s: f64,
}

impl Default for Circle {
    /// 1 m radius at 1 m, a lap in 10 s (0.63 m/s).
    fn default() -> Self {
        Circle {
            radius_m: 1.0,
            altitude_m: 1.0,
            period_s: 10.0,
        }
    }
}

/// Metres (or per second) to the message's mm, rounded half away from zero, saturated.
fn mm(v: f64) -> i16 {
    (v * 1000.0).round().clamp(i16::MIN as f64, i16::MAX as f64) as i16
}

impl Circle {
    /// The state at the STM32's time `stm32_us`.
    pub fn sample(&self, stm32_us: u32) -> StateSample {
        let t = stm32_us as f64 / 1e6;
        let w = 2.0 * std::f64::consts::PI / self.period_s;
        let th = w * t;
        let r = self.radius_m;
        let yaw = th + std::f64::consts::FRAC_PI_2;
        let q = [0.0, 0.0, (yaw / 2.0).sin() as f32, (yaw / 2.0).cos() as f32];
        StateSample {
            stm32_us,
            position_mm: [mm(r * th.cos()), mm(r * th.sin()), mm(self.altitude_m)],
            velocity_mm_s: [mm(-r * w * th.sin()), mm(r * w * th.cos()), 0],
            accel_mm_s2: [mm(-r * w * w * th.cos()), mm(-r * w * w * th.sin()), 0],
            quat: quat::compress(q),
            rates_mrad_s: [0, 0, mm(w)],
        }
    }
}

/// The flight controller's state rate (NanoCockpit's STM32 application: 100 Hz).
pub const STATE_RATE_HZ: u32 = 100;
/// The STM32's clock at the simulated drone's first message, µs: the Crazyflie was up 2 s before
/// the AI-deck's application started.
pub const STM32_START_US: u32 = 2_000_000;

/// UART at 115200 8N1: ten bits a byte.
pub const UART_BYTE_NS: u64 = 1_000_000_000 * 10 / 115_200;

/// The simulated STM32: a `!STA` message every `period_ns` of the drone's clock from `start_ns`,
/// its bytes arriving one UART byte time apart; the STM32's own clock reads `stm32_start_us` at
/// the first message.
pub struct SimFlightController<C: Fn() -> u64> {
    clock: C,
    trajectory: Circle,
    start_ns: u64,
    period_ns: u64,
    stm32_start_us: u32,
    next_msg: u64,
    pending: VecDeque<(u8, u64)>,
}

impl<C: Fn() -> u64> SimFlightController<C> {
    /// Messages at `rate_hz` from now on (`clock`: the drone's clock, ns).
    pub fn new(clock: C, trajectory: Circle, rate_hz: u32, stm32_start_us: u32) -> Self {
        let start_ns = clock();
        SimFlightController {
            clock,
            trajectory,
            start_ns,
            period_ns: 1_000_000_000 / rate_hz.max(1) as u64,
            stm32_start_us,
            next_msg: 0,
            pending: VecDeque::new(),
        }
    }

    /// The sample of message `k` (what the drone receives).
    pub fn sample_of(&self, k: u64) -> StateSample {
        let us = self
            .stm32_start_us
            .wrapping_add((k * self.period_ns / 1000) as u32);
        self.trajectory.sample(us)
    }
}

impl<C: Fn() -> u64> StateSource for SimFlightController<C> {
    fn next_byte(&mut self) -> Option<(u8, u64)> {
        let now = (self.clock)();
        // Queue every message the STM32 has started sending by now.
        while self.start_ns + self.next_msg * self.period_ns <= now {
            let sent = self.start_ns + self.next_msg * self.period_ns;
            let msg = encode_state(&self.sample_of(self.next_msg));
            for (i, b) in msg.into_iter().enumerate() {
                self.pending
                    .push_back((b, sent + (i as u64 + 1) * UART_BYTE_NS));
            }
            self.next_msg += 1;
        }
        match self.pending.front() {
            Some(&(_, at)) if at <= now => self.pending.pop_front(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapstream_drone::state::{StateConfig, StateTracker};
    use std::cell::Cell;
    use std::rc::Rc;

    #[test]
    fn the_circle_in_message_units() {
        let c = Circle::default();
        let s0 = c.sample(0);
        assert_eq!(s0.position_mm, [1000, 0, 1000]);
        assert_eq!(s0.velocity_mm_s, [0, 628, 0]);
        assert_eq!(s0.accel_mm_s2, [-395, 0, 0]);
        assert_eq!(s0.rates_mrad_s, [0, 0, 628]);
        // A quarter lap later: at (0, 1), moving towards -x.
        let s = c.sample(2_500_000);
        assert_eq!(s.position_mm, [0, 1000, 1000]);
        assert_eq!(s.velocity_mm_s, [-628, 0, 0]);
        // Yaw 90° at t = 0: the nose along +y.
        let q = crate::drone_state::decompress(s0.quat);
        assert!(
            (q[2] - std::f32::consts::FRAC_1_SQRT_2).abs() < 2e-3,
            "{q:?}"
        );
    }

    /// The simulated STM32 through the drone's parser: 100 Hz, each message complete one UART
    /// message time (40 bytes at 115200 baud, 3.47 ms) after it was started; the record's values
    /// are the trajectory's at the sample's STM32 time.
    #[test]
    fn through_the_drones_parser() {
        let now = Rc::new(Cell::new(1_000_000_000u64));
        let n2 = now.clone();
        let fc = SimFlightController::new(move || n2.get(), Circle::default(), 100, 5_000_000);
        let mut t = StateTracker::new(fc, StateConfig::default());
        now.set(1_000_000_000 + 35 * 1_000_000);
        assert_eq!(
            t.poll(),
            4,
            "messages at 0, 10, 20, 30 ms are complete at 35 ms"
        );
        let r = t.record(now.get());
        assert!(r.is_valid() && !r.is_stale());
        assert_eq!(r.arrival_us, (1_030_000_000 + 40 * UART_BYTE_NS) / 1000);
        assert_eq!(r.sample, Circle::default().sample(5_030_000));
        assert!(r.age_us().unwrap() < 12_000);
    }
}
