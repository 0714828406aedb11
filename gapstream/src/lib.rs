//! gapstream receiver and host simulation.
//!
//! | module | what |
//! |---|---|
//! | [`images`] | frame sources (synthetic pattern, PGM/PNG folder, raw file), PNG/PGM I/O, Bayer demosaicing |
//! | [`metrics`] | counters, latency percentiles, CPU / RSS / SoC temperature sampling, the 0.5 s metrics CSV |
//! | [`viewer`] | live web viewer on localhost (page, `/frame.png`, `/stats.json`) |
//! | [`report`] | `gapstream report`: PNG plots from a metrics CSV |
pub mod images;
pub mod metrics;
pub mod report;
pub mod viewer;
