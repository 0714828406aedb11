//! The JPEG-LS rows of `gvsoc_bench` (included by `src/bin/gvsoc_bench.rs`): one frame of the
//! frame set, patched by the runner into [`GVSOC_BENCH_FRAME`] (L2), coded with the plan
//! `gapstream_jpegls::BandChooser` takes from the frame itself (at most
//! [`JPEGLS_BANDS`](gvsoc::JPEGLS_BANDS) bands) by `gapstream_jpegls::cluster::encode` on the
//! run's cores into the payload region (L2); the cycles are the cluster job's (bands, DMA,
//! join). The plan's estimate runs on the FC before the job, as in the firmware; its FC cycles
//! and instructions are measured apart.
use gap_rust_sdk::bare::BareCluster;
use gapstream_jpegls::{BandChooser, Layout, Plan, adapt, cluster};
use gvsoc::{BENCH_FRAME_H, BENCH_FRAME_W, JPEGLS_BANDS};

/// The frame in L2 (a non-zero pattern so that it has contents in the ELF the runner patches).
#[repr(C, align(4))]
pub struct Frame(pub [u8; BENCH_FRAME_W * BENCH_FRAME_H]);

/// The frame the runner patches (see the module docs).
#[unsafe(no_mangle)]
#[used]
pub static GVSOC_BENCH_FRAME: Frame = Frame([0x5a; BENCH_FRAME_W * BENCH_FRAME_H]);

/// What one run measured.
pub struct Measured {
    /// The stream's length.
    pub coded: usize,
    /// The band count of the frame's plan.
    pub bands: usize,
    /// The measured cluster job.
    pub job: gap_rust_sdk::bare::RunStats,
    /// The plan's estimate on the FC: cycles and instructions (PULP counters of the FC).
    pub estimate_cycles: u32,
    /// See `estimate_cycles`.
    pub estimate_instructions: u32,
}

/// Codes the frame on `cores` cores into `out` as the firmware does: the frame's plan from its
/// own estimate ([`BandChooser::plan`] of [`JPEGLS_BANDS`] bands; the estimate on the FC,
/// measured), then one cluster job with that plan (measured). `warm`: before the measured job,
/// one unmeasured job of the same plan over the frame's first `2 × bands` lines, so that the
/// cluster's instruction cache holds the job's code as in a streaming loop (the other kernels'
/// warm-up call); `warm = false` (`--cold`): none.
pub fn run(
    cl: &BareCluster,
    pulp: bool,
    cores: usize,
    out: &mut [u8],
    warm: bool,
) -> Result<Measured, gapstream_jpegls::EncodeError> {
    // The patched bytes, not the initialiser the compiler saw.
    let frame: &[u8] = &core::hint::black_box(&GVSOC_BENCH_FRAME).0;
    let (w, h) = (BENCH_FRAME_W, BENCH_FRAME_H);
    gap_rust_sdk::bare::perf::start();
    let e = adapt::estimate(w, h, Layout::Grey, core::hint::black_box(frame));
    let (estimate_cycles, estimate_instructions) = (
        gap_rust_sdk::bare::perf::cycles(),
        gap_rust_sdk::bare::perf::instructions(),
    );
    let plan = BandChooser::new(JPEGLS_BANDS).plan_for(w, h, Layout::Grey, &e?)?;
    if warm {
        let lines = (2 * plan.bands()).min(h);
        let strip = Plan::new(w, lines, Layout::Grey, plan.bands())?.with_preset(plan.preset());
        code(cl, pulp, cores, &strip, &frame[..w * lines], out)?;
    }
    let coded = code(cl, pulp, cores, &plan, frame, out)?;
    Ok(Measured {
        coded,
        bands: plan.bands(),
        job: cl.last_run(),
        estimate_cycles,
        estimate_instructions,
    })
}

fn code(
    cl: &BareCluster,
    pulp: bool,
    cores: usize,
    plan: &Plan,
    frame: &[u8],
    out: &mut [u8],
) -> Result<usize, gapstream_jpegls::EncodeError> {
    if pulp {
        #[cfg(feature = "pulp")]
        return cluster::encode::<gapstream_jpegls::pulp::Pulp, _>(cl, cores, plan, frame, out);
    }
    cluster::encode::<gapstream_jpegls::Portable, _>(cl, cores, plan, frame, out)
}
