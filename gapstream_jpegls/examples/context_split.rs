//! How evenly the JPEG-LS model's work would spread over 8 cores if it were split by context
//! instead of by band (an analysis for a design that is not built; docs/jpegls.md, "What is left").
//!
//! Bands with restart markers cost bytes because every restart resets the 365 contexts. The
//! regular-mode contexts are independent state machines, so one scan without restarts could be
//! coded in parallel by giving each core a set of contexts. That only pays if the samples spread
//! evenly over the cores: this example walks each frame of the set as the encoder does
//! (`model::context` on the padded lines, run mode where the three gradients are zero), counts
//! the samples of each context, the run-mode work (one sequential owner: `RUNindex` links every
//! run of the scan) and assigns them to 8 cores, largest first to the least loaded, per frame and
//! per strip of 8 lines (what an encoder that pipelines strips through L1 could do).
//!
//! ```sh
//! cargo run -p gapstream_jpegls --example context_split
//! ```

use gapstream_jpegls::model::{CONTEXTS, context};

const CORES: usize = 8;
const STRIP: usize = 8;

/// Work units of one range of lines: regular-mode samples per context, then the run state (one
/// unit a run and one an interruption sample).
fn units(px: &[u8], width: usize, lines: std::ops::Range<usize>) -> Vec<u64> {
    let mut u = vec![0u64; CONTEXTS + 1];
    let mut prev = vec![0u8; width + 2];
    let mut cur = vec![0u8; width + 2];
    // The line above the first line of the scan is zero (and so after every restart).
    if lines.start > 0 {
        prev[1..=width].copy_from_slice(&px[(lines.start - 1) * width..lines.start * width]);
        if lines.start > 1 {
            prev[0] = px[(lines.start - 2) * width];
        }
    }
    for y in lines {
        cur[1..=width].copy_from_slice(&px[y * width..(y + 1) * width]);
        gapstream_jpegls::line::edges(&mut prev, &mut cur, width);
        let mut i = 1;
        while i <= width {
            let (ra, rb, rc, rd) = (
                i32::from(cur[i - 1]),
                i32::from(prev[i]),
                i32::from(prev[i - 1]),
                i32::from(prev[i + 1]),
            );
            let q = context(rd, rb, rc, ra);
            if q != 0 {
                u[q.unsigned_abs() as usize] += 1;
                i += 1;
                continue;
            }
            // Run mode: the run of samples equal to Ra, then the interruption sample.
            u[CONTEXTS] += 1;
            while i <= width && cur[i] == ra as u8 {
                i += 1;
            }
            if i <= width {
                u[CONTEXTS] += 1;
                i += 1;
            }
        }
        // The next line's Rc at its first sample is this line's Ra there (cur[0]).
        std::mem::swap(&mut prev, &mut cur);
    }
    u
}

/// The busiest core's load over the mean, units given to the least loaded core largest first.
fn busiest_over_mean(u: &[u64]) -> (u64, f64) {
    let mut sorted: Vec<u64> = u.iter().copied().filter(|&w| w > 0).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    let mut load = [0u64; CORES];
    for w in sorted {
        *load.iter_mut().min().expect("cores") += w;
    }
    let total: u64 = load.iter().sum();
    let max = *load.iter().max().expect("cores");
    (max, max as f64 * CORES as f64 / total.max(1) as f64)
}

fn main() {
    let set = match frameset::standard_set() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("context_split: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "{:<16} {:>8} {:>8} {:>10} {:>10} {:>12}",
        "picture", "regular", "run", "top unit", "frame 8c", "8-line strips"
    );
    for p in &set {
        let all = units(&p.pixels, p.width, 0..p.height);
        let total: u64 = all.iter().sum();
        let regular: u64 = all[..CONTEXTS].iter().sum();
        let top = *all.iter().max().expect("units");
        let (_, frame) = busiest_over_mean(&all);
        // Strips: each strip's own counts (known after its modelling pass), its busiest core.
        let (mut busiest, mut sum) = (0u64, 0u64);
        for y in (0..p.height).step_by(STRIP) {
            let u = units(&p.pixels, p.width, y..(y + STRIP).min(p.height));
            busiest += busiest_over_mean(&u).0;
            sum += u.iter().sum::<u64>();
        }
        println!(
            "{:<16} {:>8} {:>8} {:>9.1}% {:>9.2}x {:>11.2}x",
            p.name,
            regular,
            all[CONTEXTS],
            100.0 * top as f64 / total as f64,
            frame,
            busiest as f64 * CORES as f64 / sum as f64
        );
    }
}
