//! The band plan's estimate on the calibration pictures (`tests/pictures/mod.rs`): per picture
//! the estimate, the stream's length with 1 band (the defaults: the scan is CharLS's byte for
//! byte), with the coder's 8 bands and with the sparse plan, and the plan chosen.
//!
//! `cargo run --release -p gapstream_jpegls --example plan_estimate`
#[path = "../tests/pictures/mod.rs"]
mod pictures;

use gapstream_jpegls::{BandChooser, Plan, adapt::estimate, encode_to_vec};

fn main() {
    let chooser = BandChooser::new(8);
    println!(
        "{:<26} {:>6} {:>8} {:>8} {:>6} {:>8} {:>6} {:>6} {:>7}",
        "picture", "est mb", "1 band", "8 bands", "8b/1b", "sparse", "sp/1b", "bps8", "chosen"
    );
    for p in pictures::calibration_set() {
        let e = estimate(p.w, p.h, p.layout, &p.px).unwrap();
        let len = |plan: &Plan| encode_to_vec(plan, &p.px).unwrap().len();
        let one = len(&Plan::new(p.w, p.h, p.layout, 1).unwrap());
        let eight = len(&Plan::new(p.w, p.h, p.layout, 8).unwrap());
        let sparse = len(&Plan::new(p.w, p.h, p.layout, BandChooser::SPARSE_BANDS)
            .unwrap()
            .with_preset(BandChooser::SPARSE_PRESET));
        let chosen = chooser.plan_for(p.w, p.h, p.layout, &e).unwrap();
        println!(
            "{:<26} {:>6} {:>8} {:>8} {:>6.4} {:>8} {:>6.4} {:>6.3} {:>7}",
            p.name,
            e.millibits(),
            one,
            eight,
            eight as f64 / one as f64,
            sparse,
            sparse as f64 / one as f64,
            eight as f64 * 8.0 / (p.w * p.h) as f64,
            chosen.bands()
        );
    }
}
