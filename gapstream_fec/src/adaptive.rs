//! The adaptive redundancy rule the bridge runs on each receiver's loss reports
//! ([`crate::wire::Report`], cumulative shard counts every 500 ms).
//!
//! From the shards received and lost since the last report the bridge estimates the loss rate
//! `p` (a rise is taken at once, a fall slowly: `p ← 0.7 p + 0.3 p_new`), and takes the larger of
//! two parity counts per `k` data shards: the smallest `m` for which a block of `k + m`
//! independent losses at `1.5 p` fails with probability at most [`TARGET_BLOCK_FAILURE`], and one
//! more than the most shards a single block lost in the last [`WORST_WINDOW`] reports (10 s; what
//! bursts cost, which the rate alone does not tell). A report of a block that could not be
//! rebuilt raises `m` by at least `max(1, k / 8)`. Lowering is gradual (half the way per report);
//! raising is immediate. `m` never leaves `[floor, ceiling]`, whatever the reports say: a forged
//! report can cost at most the ceiling's airtime, and cannot take the protection below the floor.

use crate::wire::Report;

/// Largest accepted failure probability of one block at the estimated loss rate.
pub const TARGET_BLOCK_FAILURE: f64 = 1e-4;
/// Reports covering fewer shards than this do not move the estimate.
pub const MIN_SAMPLES: u64 = 16;
/// Reports whose worst block is remembered (at one report every 500 ms: 10 s).
pub const WORST_WINDOW: usize = 20;

/// Limits of the adaptive mode (parity shards per `k` data shards).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveConfig {
    pub k: u8,
    pub floor: u8,
    pub ceiling: u8,
    /// Parity shards before the first report.
    pub start: u8,
}

/// P[X > m] for X ~ Binomial(n, p), summed from the top (no cancellation), in `f64` without `std`.
pub fn binomial_tail(n: usize, p: f64, m: usize) -> f64 {
    if m >= n || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    // pmf(0) = (1-p)^n, pmf(x+1) = pmf(x) · (n-x)/(x+1) · p/(1-p).
    let q = 1.0 - p;
    let mut pmf = 1.0f64;
    for _ in 0..n {
        pmf *= q;
    }
    let ratio = p / q;
    let mut tail = 0.0;
    for x in 0..n {
        pmf *= (n - x) as f64 / (x + 1) as f64 * ratio;
        if x + 1 > m {
            tail += pmf;
        }
    }
    tail.min(1.0)
}

/// The smallest `m` in `floor..=ceiling` for which a block of `k` data and `m` parity shards,
/// losing each shard with probability `p`, fails with probability at most `target`
/// (`ceiling` when none does).
pub fn parity_for(k: u8, p: f64, floor: u8, ceiling: u8, target: f64) -> u8 {
    let top = ceiling.max(floor);
    for m in floor..=top {
        if binomial_tail(k as usize + m as usize, p, m as usize) <= target {
            return m;
        }
    }
    top
}

/// The state of the adaptive mode for one receiver.
#[derive(Clone, Debug)]
pub struct Adaptive {
    cfg: AdaptiveConfig,
    m: u8,
    p_est: f64,
    last: Option<Report>,
    reports: u64,
    ignored: u64,
    worst: [u16; WORST_WINDOW],
    worst_at: usize,
}

impl Adaptive {
    pub fn new(cfg: AdaptiveConfig) -> Self {
        let cfg = AdaptiveConfig {
            ceiling: cfg.ceiling.max(cfg.floor),
            ..cfg
        };
        Adaptive {
            m: cfg.start.clamp(cfg.floor, cfg.ceiling),
            cfg,
            p_est: 0.0,
            last: None,
            reports: 0,
            ignored: 0,
            worst: [0; WORST_WINDOW],
            worst_at: 0,
        }
    }

    /// Parity shards per `k` data shards now.
    pub fn parity(&self) -> u8 {
        self.m
    }

    /// The loss rate estimate now.
    pub fn loss_estimate(&self) -> f64 {
        self.p_est
    }

    /// Reports taken and reports ignored (implausible counts).
    pub fn reports(&self) -> (u64, u64) {
        (self.reports, self.ignored)
    }

    /// A report from the receiver; `sent` = shards the bridge sent it since the previous report.
    /// Returns the parity count to use from now on.
    pub fn on_report(&mut self, r: Report, sent: u64) -> u8 {
        let Some(prev) = self.last.replace(r) else {
            return self.m;
        };
        let recv = r.received.wrapping_sub(prev.received) as u64;
        let lost = r.lost.wrapping_sub(prev.lost) as u64;
        let unrec = r.unrecoverable.wrapping_sub(prev.unrecoverable) as u64;
        // Counts that no stream could have produced (a forged or garbled report): ignored. The
        // receiver counts shards of finished blocks, so a report may lag the bridge by a block
        // or two: a margin of 256 shards.
        if recv + lost > 2 * sent + 256 || unrec > recv + lost + 1 {
            self.ignored += 1;
            return self.m;
        }
        self.reports += 1;
        self.worst[self.worst_at] = r.worst;
        self.worst_at = (self.worst_at + 1) % WORST_WINDOW;
        let n = recv + lost;
        let mut want = self.m;
        if n >= MIN_SAMPLES {
            let p = lost as f64 / n as f64;
            self.p_est = if p > self.p_est {
                p
            } else {
                0.7 * self.p_est + 0.3 * p
            };
            let p_eff = (1.5 * self.p_est).min(0.5);
            want = parity_for(
                self.cfg.k,
                p_eff,
                self.cfg.floor,
                self.cfg.ceiling,
                TARGET_BLOCK_FAILURE,
            );
            let worst = self.worst.iter().copied().max().unwrap_or(0);
            if worst > 0 {
                let w = u8::try_from(worst).unwrap_or(u8::MAX).saturating_add(1);
                want = want.max(w.min(self.cfg.ceiling));
            }
        }
        if unrec > 0 {
            let step = (self.cfg.k / 8).max(1);
            want = want.max(self.m.saturating_add(step));
        }
        self.m = if want >= self.m {
            want
        } else {
            self.m - (self.m - want).div_ceil(2)
        }
        .clamp(self.cfg.floor, self.cfg.ceiling);
        self.m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact_tail(n: usize, p: f64, m: usize) -> f64 {
        // Sum of C(n, x) p^x (1-p)^(n-x) for x > m, with binomials as f64 products.
        (m + 1..=n)
            .map(|x| {
                let mut c = 1.0f64;
                for i in 0..x {
                    c = c * (n - i) as f64 / (i + 1) as f64;
                }
                c * p.powi(x as i32) * (1.0 - p).powi((n - x) as i32)
            })
            .sum()
    }

    #[test]
    fn the_binomial_tail_is_right() {
        for (n, p, m) in [
            (12usize, 0.05, 4usize),
            (50, 0.05, 10),
            (49, 0.2, 30),
            (8, 0.5, 0),
            (256, 0.01, 2),
        ] {
            let a = binomial_tail(n, p, m);
            let b = exact_tail(n, p, m);
            assert!((a - b).abs() <= 1e-12 + 1e-9 * b, "{n} {p} {m}: {a} vs {b}");
        }
        assert_eq!(binomial_tail(10, 0.0, 0), 0.0);
        assert_eq!(binomial_tail(10, 1.0, 3), 1.0);
        assert_eq!(binomial_tail(10, 0.3, 10), 0.0);
    }

    /// The figures of docs/stream.md ("The defaults"): at 5 % independent loss a raw frame (78
    /// packets) in ten blocks of 8 + 4 is lost with probability ~2e-3, in two blocks of 39 + 10
    /// with probability ~5e-5.
    #[test]
    fn docs_frame_loss_figures() {
        let frame =
            |blocks: i32, n: usize, m: usize| 1.0 - (1.0 - binomial_tail(n, 0.05, m)).powi(blocks);
        let wfb = frame(10, 12, 4);
        let ours = frame(2, 49, 10);
        assert!((1.7e-3..1.9e-3).contains(&wfb), "{wfb}");
        assert!((4.7e-5..5.0e-5).contains(&ours), "{ours}");
    }

    #[test]
    fn parity_grows_with_loss_and_stays_in_bounds() {
        let mut last = 0;
        for p in [0.0, 0.001, 0.01, 0.02, 0.05, 0.1, 0.2] {
            let m = parity_for(40, p, 2, 40, TARGET_BLOCK_FAILURE);
            assert!(m >= last && (2..=40).contains(&m), "{p}: {m}");
            last = m;
        }
        assert_eq!(parity_for(40, 0.0, 2, 40, TARGET_BLOCK_FAILURE), 2);
        assert_eq!(parity_for(40, 0.9, 2, 12, TARGET_BLOCK_FAILURE), 12);
        assert_eq!(
            parity_for(40, 0.05, 5, 3, TARGET_BLOCK_FAILURE),
            5,
            "ceiling below floor"
        );
    }

    fn cfg() -> AdaptiveConfig {
        AdaptiveConfig {
            k: 40,
            floor: 2,
            ceiling: 30,
            start: 10,
        }
    }

    #[test]
    fn without_loss_it_falls_to_the_floor_and_with_loss_it_rises_at_once() {
        let mut a = Adaptive::new(cfg());
        let mut r = Report::default();
        let mut seen = alloc::vec::Vec::new();
        for _ in 0..8 {
            r.received += 1000;
            seen.push(a.on_report(r, 1000));
        }
        assert_eq!(*seen.last().unwrap(), 2, "{seen:?}");
        assert!(seen.windows(2).all(|w| w[1] <= w[0]), "{seen:?}");
        r.received += 900;
        r.lost += 100;
        let m = a.on_report(r, 1000);
        assert!(m >= 12, "10 % loss: {m}");
        r.received += 990;
        r.lost += 10;
        r.unrecoverable += 1;
        assert!(a.on_report(r, 1000) > m, "an unrecoverable block raises it");
    }

    /// Bursts: the same loss rate in bursts leaves blocks that lost many shards; the parity
    /// follows the worst of them, and forgets it only after the window.
    #[test]
    fn the_worst_block_lifts_the_parity_for_the_window() {
        let mut a = Adaptive::new(cfg());
        let mut r = Report::default();
        a.on_report(r, 1000);
        r.received += 950;
        r.lost += 50;
        let iid = a.on_report(r, 1000);
        let mut b = Adaptive::new(cfg());
        let mut r = Report::default();
        b.on_report(r, 1000);
        r.received += 950;
        r.lost += 50;
        r.worst = 19;
        assert_eq!(b.on_report(r, 1000), 20.max(iid));
        r.worst = 0;
        for _ in 0..WORST_WINDOW - 2 {
            r.received += 950;
            r.lost += 50;
            assert_eq!(
                b.on_report(r, 1000),
                20.max(iid),
                "remembered for the window"
            );
        }
        for _ in 0..8 {
            r.received += 950;
            r.lost += 50;
            b.on_report(r, 1000);
        }
        assert!(b.parity() < 20);
    }

    /// Forged reports: whatever they say, m stays in [floor, ceiling]; absurd counts are ignored.
    #[test]
    fn forged_reports_are_bounded() {
        let mut a = Adaptive::new(cfg());
        let mut x = 0x2545_F491u32;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for _ in 0..10_000 {
            let r = Report {
                received: rnd(),
                lost: rnd(),
                unrecoverable: rnd() % 3,
                worst: rnd() as u16,
            };
            let m = a.on_report(r, (rnd() % 4000) as u64);
            assert!((2..=30).contains(&m));
        }
        // A report claiming a million lost shards after 100 sent changes nothing.
        let mut a = Adaptive::new(cfg());
        a.on_report(Report::default(), 0);
        let m = a.on_report(
            Report {
                received: 0,
                lost: 1_000_000,
                unrecoverable: 0,
                worst: 0,
            },
            100,
        );
        assert_eq!(m, 10);
        assert_eq!(a.reports(), (0, 1));
    }
}
