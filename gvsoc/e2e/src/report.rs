//! The run's verdict: the firmware's own figures (its `FW summary` line, in FC cycles), the
//! received frames matched byte for byte against the inputs, and the run's criteria.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `key=value` fields of the last line starting with `prefix` (e.g. `"FW summary "`).
pub fn fields(log: &str, prefix: &str) -> Option<BTreeMap<String, String>> {
    let line = log.lines().rev().find(|l| l.starts_with(prefix))?;
    Some(
        line[prefix.len()..]
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// The firmware's summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FwSummary {
    pub frames: u64,
    pub period_cycles: u64,
    pub fps: f64,
    pub capture_cycles: u64,
    pub seal_cycles: u64,
    pub send_cycles: u64,
    pub sum_cycles: u64,
    pub ratio: f64,
    pub fc_hz: u64,
}

impl FwSummary {
    pub fn parse(log: &str) -> Option<Self> {
        let f = fields(log, "FW summary ")?;
        let u = |k: &str| f.get(k)?.parse::<u64>().ok();
        let x = |k: &str| f.get(k)?.parse::<f64>().ok();
        Some(FwSummary {
            frames: u("frames")?,
            period_cycles: u("period_cycles")?,
            fps: x("fps")?,
            capture_cycles: u("capture_cycles")?,
            seal_cycles: u("seal_cycles")?,
            send_cycles: u("send_cycles")?,
            sum_cycles: u("sum_cycles")?,
            ratio: x("ratio")?,
            fc_hz: u("fc_hz")?,
        })
    }
}

/// Which input frame each received frame is (byte for byte), `None` if it is none of them.
pub fn match_frames(inputs: &[Vec<u8>], received: &[Vec<u8>]) -> Vec<Option<usize>> {
    received
        .iter()
        .map(|r| inputs.iter().position(|i| i == r))
        .collect()
}

/// The criteria of the run.
#[derive(Clone, Copy, Debug)]
pub struct Criteria {
    pub min_frames: usize,
    pub max_ratio: f64,
}

/// The verdict: the text to print and whether every criterion holds.
pub fn verdict(
    matches: &[Option<usize>],
    fw: Option<&FwSummary>,
    criteria: Criteria,
) -> (String, bool) {
    let mut s = String::new();
    let mut ok = true;
    let exact = matches.iter().filter(|m| m.is_some()).count();
    let order: Vec<String> = matches
        .iter()
        .map(|m| m.map_or("?".to_string(), |i| i.to_string()))
        .collect();
    let _ = writeln!(
        s,
        "gvsoc-e2e: {} frames received and verified by the receiver, {} byte-exact with an input frame (input frames {})",
        matches.len(),
        exact,
        order.join(", ")
    );
    if exact < matches.len() {
        ok = false;
        let _ = writeln!(
            s,
            "gvsoc-e2e: FAIL: a received frame differs from every input frame"
        );
    }
    if matches.windows(2).any(|w| w[0].is_some() && w[0] == w[1]) {
        ok = false;
        let _ = writeln!(
            s,
            "gvsoc-e2e: FAIL: the same input frame was received twice in a row (a stale buffer)"
        );
    }
    if exact < criteria.min_frames {
        ok = false;
        let _ = writeln!(
            s,
            "gvsoc-e2e: FAIL: {exact} byte-exact frames, at least {} wanted",
            criteria.min_frames
        );
    }
    match fw {
        None => {
            ok = false;
            let _ = writeln!(
                s,
                "gvsoc-e2e: FAIL: the firmware printed no `FW summary` line"
            );
        }
        Some(f) => {
            let ms = |c: u64| c as f64 * 1e3 / f.fc_hz.max(1) as f64;
            let _ = writeln!(
                s,
                "gvsoc-e2e: per frame, steady state over {} frames, FC at {:.0} MHz (simulated):",
                f.frames,
                f.fc_hz as f64 / 1e6
            );
            let _ = writeln!(s, "    stage                       cycles        ms");
            for (name, c) in [
                ("capture (CPI, uDMA)", f.capture_cycles),
                ("encrypt + tag (cluster+FC)", f.seal_cycles),
                ("SPI send to the ESP32", f.send_cycles),
                ("one after the other (sum)", f.sum_cycles),
                ("frame period", f.period_cycles),
            ] {
                let _ = writeln!(s, "    {name:<26} {c:>10} {:>9.2}", ms(c));
            }
            let slower = f.capture_cycles.max(f.seal_cycles + f.send_cycles);
            let _ = writeln!(
                s,
                "gvsoc-e2e: {:.2} frames per simulated second; period / sum = {:.3} (criterion <= {:.2}); period / slower of capture and encrypt+send = {:.3}",
                f.fps,
                f.ratio,
                criteria.max_ratio,
                f.period_cycles as f64 / slower.max(1) as f64
            );
            if !(f.ratio > 0.0 && f.ratio <= criteria.max_ratio) {
                ok = false;
                let _ = writeln!(
                    s,
                    "gvsoc-e2e: FAIL: the frame period is not hidden behind the slower stage"
                );
            }
        }
    }
    let _ = writeln!(s, "gvsoc-e2e: {}", if ok { "ok" } else { "FAILED" });
    (s, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "FW start frames=8\nFW frame n=1 seq=0 capture_cycles=5\n\
        FW summary frames=8 period_cycles=3400000 fps=14.71 capture_cycles=3300000 seal_cycles=400000 send_cycles=3000000 sum_cycles=6700000 ratio=0.507 fc_hz=50000000\nFW exit status=0\n";

    #[test]
    fn parses_the_summary_line() {
        let f = FwSummary::parse(LOG).unwrap();
        assert_eq!(f.frames, 8);
        assert_eq!(f.sum_cycles, 6_700_000);
        assert!((f.ratio - 0.507).abs() < 1e-9);
        assert!(FwSummary::parse("FW summary frames=x").is_none());
        assert_eq!(fields(LOG, "FW exit ").unwrap()["status"], "0");
    }

    #[test]
    fn verdict_checks_every_criterion() {
        let f = FwSummary::parse(LOG).unwrap();
        let c = Criteria {
            min_frames: 5,
            max_ratio: 0.6,
        };
        let good: Vec<Option<usize>> = (0..6).map(|i| Some(i * 4 % 11)).collect();
        assert!(verdict(&good, Some(&f), c).1);
        let mut bad = good.clone();
        bad[2] = None;
        assert!(
            !verdict(&bad, Some(&f), c).1,
            "a frame that matches no input"
        );
        assert!(!verdict(&good[..4], Some(&f), c).1, "too few frames");
        let stale = vec![Some(1), Some(1), Some(2), Some(3), Some(4), Some(5)];
        assert!(!verdict(&stale, Some(&f), c).1, "a repeated frame");
        let slow = FwSummary { ratio: 0.9, ..f };
        assert!(!verdict(&good, Some(&slow), c).1, "no overlap");
        assert!(!verdict(&good, None, c).1, "no summary");
    }

    #[test]
    fn matching_is_byte_exact() {
        let inputs = vec![vec![1u8, 2, 3], vec![4u8, 5, 6]];
        assert_eq!(
            match_frames(&inputs, &[vec![4, 5, 6], vec![1, 2, 4], vec![1, 2, 3]]),
            vec![Some(1), None, Some(0)]
        );
    }
}
