//! The JPEG-LS rows of `gvsoc_bench` (included by `src/bin/gvsoc_bench.rs`): one frame of the
//! frame set, patched by the runner into [`GVSOC_BENCH_FRAME`] (L2), coded in
//! the bands `gapstream_jpegls::BandChooser` chooses after a first coding of the same frame (a
//! still scene; at most [`JPEGLS_BANDS`](gvsoc::JPEGLS_BANDS)) by
//! `gapstream_jpegls::cluster::encode` on the run's cores into the payload region (L2); the
//! cycles are the second coding's cluster job (bands, DMA, join).
use gap_rust_sdk::bare::BareCluster;
use gapstream_jpegls::{BandChooser, Layout, Plan, cluster};
use gvsoc::{BENCH_FRAME_H, BENCH_FRAME_W, JPEGLS_BANDS};

/// The frame in L2 (a non-zero pattern so that it has contents in the ELF the runner patches).
#[repr(C, align(4))]
pub struct Frame(pub [u8; BENCH_FRAME_W * BENCH_FRAME_H]);

/// The frame the runner patches (see the module docs).
#[unsafe(no_mangle)]
#[used]
pub static GVSOC_BENCH_FRAME: Frame = Frame([0x5a; BENCH_FRAME_W * BENCH_FRAME_H]);

/// Codes the frame on `cores` cores into `out` as a drone streaming a still scene would: the
/// frame is coded once with the first frame's plan ([`BandChooser`] of [`JPEGLS_BANDS`] bands;
/// not measured, it is also the warm-up: the instruction cache then holds the job's code), its
/// size fed to the chooser, and coded again with the plan the chooser gives for the next frame
/// (measured). `warm = false` (cold): only the first frame's plan, coded once. Returns the
/// stream's length, the band count of the measured coding and the measured job's statistics.
pub fn run(
    cl: &BareCluster,
    pulp: bool,
    cores: usize,
    out: &mut [u8],
    warm: bool,
) -> Result<(usize, usize, gap_rust_sdk::bare::RunStats), gapstream_jpegls::EncodeError> {
    // The patched bytes, not the initialiser the compiler saw.
    let frame: &[u8] = &core::hint::black_box(&GVSOC_BENCH_FRAME).0;
    let mut chooser = BandChooser::new(JPEGLS_BANDS);
    if warm {
        let prev = chooser.plan(BENCH_FRAME_W, BENCH_FRAME_H, Layout::Grey)?;
        let n = code(cl, pulp, cores, &prev, frame, out)?;
        chooser.observe(&prev, Some(n));
    }
    let plan = chooser.plan(BENCH_FRAME_W, BENCH_FRAME_H, Layout::Grey)?;
    let n = code(cl, pulp, cores, &plan, frame, out)?;
    Ok((n, plan.bands(), cl.last_run()))
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
