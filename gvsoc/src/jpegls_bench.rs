//! The JPEG-LS rows of `gvsoc_bench` (included by `src/bin/gvsoc_bench.rs`): one frame of the
//! frame set, patched by the runner into [`GVSOC_BENCH_FRAME`] (L2), coded in
//! [`JPEGLS_BANDS`](gvsoc::JPEGLS_BANDS) bands by `gapstream_jpegls::cluster::encode` on the run's
//! cores into the payload region (L2); the cycles are the cluster job's (bands, DMA, join).
use gap_rust_sdk::bare::BareCluster;
use gapstream_jpegls::{Layout, Plan, cluster};
use gvsoc::{BENCH_FRAME_H, BENCH_FRAME_W, JPEGLS_BANDS};

/// The frame in L2 (a non-zero pattern so that it has contents in the ELF the runner patches).
#[repr(C, align(4))]
pub struct Frame(pub [u8; BENCH_FRAME_W * BENCH_FRAME_H]);

/// The frame the runner patches (see the module docs).
#[unsafe(no_mangle)]
#[used]
pub static GVSOC_BENCH_FRAME: Frame = Frame([0x5a; BENCH_FRAME_W * BENCH_FRAME_H]);

/// Codes the frame on `cores` cores into `out`; a warm-up call on the frame's top 16 lines
/// first (the instruction cache then holds the job's code). Returns the stream's length and
/// the measured job's statistics.
pub fn run(
    cl: &BareCluster,
    pulp: bool,
    cores: usize,
    out: &mut [u8],
    warm: bool,
) -> Result<(usize, gap_rust_sdk::bare::RunStats), gapstream_jpegls::EncodeError> {
    // The patched bytes, not the initialiser the compiler saw.
    let frame: &[u8] = &core::hint::black_box(&GVSOC_BENCH_FRAME).0;
    if warm {
        let top = Plan::new(BENCH_FRAME_W, 16, Layout::Grey, JPEGLS_BANDS)?;
        code(cl, pulp, cores, &top, &frame[..BENCH_FRAME_W * 16], out)?;
    }
    let plan = Plan::new(BENCH_FRAME_W, BENCH_FRAME_H, Layout::Grey, JPEGLS_BANDS)?;
    let n = code(cl, pulp, cores, &plan, frame, out)?;
    Ok((n, cl.last_run()))
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
