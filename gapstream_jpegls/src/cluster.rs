//! The bands on the cluster's cores (feature `cluster`; any `gap_rust_sdk` backend: the GAP8
//! with or without the SDK, or host threads in the tests).
//!
//! ```text
//!  FC:      cluster.run(job)
//!  core 0:    L1 per core: model, three line buffers, a Bayer staging line, a code chunk
//!             fork: core c codes segments [c·s/n, (c+1)·s/n) (contiguous in stream order):
//!               per line: the next line's DMA L2 -> L1 runs while this line is coded
//!               (Dma::overlap); the code goes into the L1 chunk, which is written to the
//!               segment's region of the output in L2 whenever it fills (and at the end)
//!             join: segments moved to the front of their regions through L1 (DMA), markers
//! ```
//!
//! The output's layout during the job is [`Plan::region`]'s: every segment has
//! `out.len() / segments` bytes (less the separator); a segment that needs more gives
//! [`EncodeError::OutputFull`], even when the whole stream would have fitted.
use crate::bits::{Sink, Writer};
use crate::encode::{MAX_SEPARATOR, Plan};
use crate::line::Ops;
use crate::model::Model;
use crate::{EncodeError, Layout};
use gap_rust_sdk::{Cluster, Controller, Dma, DmaRaw, MAX_CORES, RawAlloc, Team};

/// L1 bytes of the shared quantisation table.
const QUANT_L1: usize = 512;
/// Bytes of a core's code chunk in L1.
pub const CHUNK: usize = 512;
/// Segments one core may code in one call.
pub const MAX_SEGMENTS_PER_CORE: usize = 32;

/// L1 bytes one core uses for a plan ([`encode`] allocates `cores` times this and 512 bytes).
pub fn l1_per_core(plan: &Plan) -> usize {
    let line = (plan.plane_width() + 2).next_multiple_of(4);
    let staging = match plan.layout() {
        Layout::Grey => 0,
        Layout::BayerRggb => plan.width().next_multiple_of(4),
    };
    core::mem::size_of::<Model>() + 3 * line + staging + CHUNK
}

/// Where a core's full L1 chunks go: the segment's region of the output in L2 (DMA, waited for).
struct ChunkSink<'a, D: DmaRaw> {
    region: &'a mut [u8],
    written: usize,
    dma: &'a mut Dma<D>,
}

// A core has at most two DMA commands in flight: the next line's fetch (`Dma::overlap` with an
// empty write-back) and a full chunk's spill (one command: the handles never `set_chunk`), so
// 8 cores stay within mchan's 16 transfer ids for the whole cluster (more can deadlock it).
// A one-slot spill handle (`slots_per_handle(8, 2)`) would enforce it in the type, but cost grass
// 0.1-0.6 % on GVSOC by code placement alone, so the bound is kept by construction and checked here.
const _: () = assert!(2 * MAX_CORES <= gap_rust_sdk::dma::CLUSTER_DMA_IDS);

impl<D: DmaRaw> Sink for ChunkSink<'_, D> {
    fn spill(&mut self, bytes: &[u8]) -> bool {
        let n = bytes.len();
        let ok = match self.region.get_mut(self.written..self.written + n) {
            Some(dst) => self.dma.copy_out(bytes, dst).is_ok(),
            None => false,
        };
        if ok {
            self.written += n;
        }
        ok
    }
}

/// What every core reads.
struct Shared<'a> {
    plan: &'a Plan,
    /// The gradient quantisation table, copied into L1 (the cluster has no data cache).
    quant: &'a [i8; 511],
    pixels: &'a [u8],
    cores: usize,
}

/// One core's part: its L1, its segments' output regions, their lengths, its DMA handles.
struct Slot<'a, D: DmaRaw> {
    l1: &'a mut [u8],
    out: &'a mut [u8],
    /// Offset in `out` of each of its segments' regions.
    first: usize,
    count: usize,
    lens: [usize; MAX_SEGMENTS_PER_CORE],
    dma: Option<(Dma<D>, Dma<D>)>,
    result: Result<(), EncodeError>,
}

/// Segments of core `c` of `n`: `[c·s/n, (c+1)·s/n)`.
fn share(segments: usize, cores: usize, c: usize) -> (usize, usize) {
    (c * segments / cores, (c + 1) * segments / cores)
}

/// Codes `pixels` (in L2) with `plan` on `cores` cluster cores into `out` (L2); returns the
/// stream's length. Nothing is allocated but L1 (freed on return).
pub fn encode<K: Ops, C: Cluster>(
    cl: &C,
    cores: usize,
    plan: &Plan,
    pixels: &[u8],
    out: &mut [u8],
) -> Result<usize, EncodeError> {
    if pixels.len() != plan.width() * plan.height() {
        return Err(EncodeError::Input);
    }
    let segs = plan.segments();
    if cores == 0 || cores > MAX_CORES.min(cl.max_cores()) {
        return Err(EncodeError::Cluster);
    }
    let cores = cores.min(segs);
    if segs > cores * MAX_SEGMENTS_PER_CORE {
        return Err(EncodeError::Bands);
    }
    let per = l1_per_core(plan);
    let mut l1 = cl
        .l1()
        .alloc_zeroed(QUANT_L1 + per * cores, 4)
        .map_err(|_| EncodeError::Scratch)?;
    let (q, l1s) = l1.split_at_mut(QUANT_L1);
    let q: &mut [i8] = bytemuck::cast_slice_mut(q);
    let quant: &mut [i8; 511] = (&mut q[..K::QUANT.len()])
        .try_into()
        .map_err(|_| EncodeError::Scratch)?;
    if plan.preset().is_default() {
        quant.copy_from_slice(K::QUANT);
    } else {
        plan.preset().fill_table(K::QUANT_SCALE, quant);
    }
    let quant: &[i8; 511] = quant;
    let region0 = plan.region(0, out.len());
    let share_len = region0.len() + MAX_SEPARATOR;
    if region0.is_empty() {
        return Err(EncodeError::OutputFull);
    }
    let starts: [usize; MAX_CORES] =
        core::array::from_fn(|c| plan.region(share(segs, cores, c).0, out.len()).start);
    let shared = Shared {
        plan,
        quant,
        pixels,
        cores,
    };
    cl.run(|ctrl| {
        // Per-core slots: disjoint L1 slices and disjoint output ranges.
        let mut rest_l1 = &mut l1s[..];
        let (_, mut rest_out) = out.split_at_mut(starts[0]);
        let mut slots: [Option<Slot<'_, _>>; MAX_CORES] = core::array::from_fn(|_| None);
        for (c, slot) in slots.iter_mut().enumerate().take(cores) {
            let (lo, hi) = share(segs, cores, c);
            let (mine, r) = rest_l1.split_at_mut(per);
            rest_l1 = r;
            let (o, r) = rest_out.split_at_mut((hi - lo) * share_len);
            rest_out = r;
            *slot = Some(Slot {
                l1: mine,
                out: o,
                first: lo,
                count: hi - lo,
                lens: [0; MAX_SEGMENTS_PER_CORE],
                dma: Some((ctrl.dma(), ctrl.dma())),
                result: Ok(()),
            });
        }
        let fork = ctrl.fork_each(cores, &shared, &mut slots, |team, sh, slot| {
            let _ = team.core_id();
            if let Some(s) = slot {
                s.result = code_segments::<K, _>(sh, s, share_len);
            }
        });
        let mut lens = [0usize; MAX_CORES * MAX_SEGMENTS_PER_CORE];
        fork.map_err(|_| EncodeError::Cluster)?;
        for s in slots.iter().flatten() {
            s.result?;
            lens[s.first..s.first + s.count].copy_from_slice(&s.lens[..s.count]);
        }
        drop(slots);
        // The join, on core 0: segments moved to the front through L1.
        let mut dma = ctrl.dma();
        join_dma(plan, out, &mut l1s[..], &mut dma, &lens[..segs])
    })
    .map_err(|_| EncodeError::Cluster)?
}

/// Moves every segment from its region to its place in the stream (towards the front, in
/// order: a chunk is read before anything after it is written) through `bounce` (L1), and
/// writes the prefix and the separators.
fn join_dma<D: DmaRaw>(
    plan: &Plan,
    out: &mut [u8],
    bounce: &mut [u8],
    dma: &mut Dma<D>,
    lens: &[usize],
) -> Result<usize, EncodeError> {
    let mut p = plan.write_prefix(out)?;
    for (i, &len) in lens.iter().enumerate() {
        let src = plan.region(i, out.len()).start;
        if src < p || len > bounce.len() * 64 * 1024 {
            return Err(EncodeError::OutputFull);
        }
        if src != p {
            let mut o = 0;
            while o < len {
                let n = (len - o).min(bounce.len());
                dma.copy_in(&out[src + o..][..n], &mut bounce[..n])
                    .and_then(|_| dma.copy_out(&bounce[..n], &mut out[p + o..][..n]))
                    .map_err(|_| EncodeError::Cluster)?;
                o += n;
            }
        }
        p += len;
        if i + 1 < lens.len() && p + plan.separator_len(i) > plan.region(i + 1, out.len()).start {
            return Err(EncodeError::OutputFull);
        }
        p += plan.write_separator(i, out.get_mut(p..).ok_or(EncodeError::OutputFull)?)?;
    }
    Ok(p)
}

/// One core: its segments, each into its region of `s.out`.
fn code_segments<K: Ops, D: DmaRaw>(
    sh: &Shared<'_>,
    s: &mut Slot<'_, D>,
    share_len: usize,
) -> Result<(), EncodeError> {
    let _ = sh.cores;
    let plan = sh.plan;
    let (mut dma_in, mut dma_out) = s.dma.take().ok_or(EncodeError::Cluster)?;
    let pw = plan.plane_width();
    let line = (pw + 2).next_multiple_of(4);
    let (model_bytes, rest) = s.l1.split_at_mut(core::mem::size_of::<Model>());
    let model: &mut Model = bytemuck::from_bytes_mut(model_bytes);
    let (lines, rest) = rest.split_at_mut(3 * line);
    let staging_len = match plan.layout() {
        Layout::Grey => 0,
        Layout::BayerRggb => plan.width().next_multiple_of(4),
    };
    let (staging, chunk) = rest.split_at_mut(staging_len);
    let chunk = &mut chunk[..CHUNK];
    for k in 0..s.count {
        let i = s.first + k;
        let seg = plan.segment(i);
        let region = &mut s.out[k * share_len..(k + 1) * share_len - MAX_SEPARATOR];
        model.reset_at = plan.preset().reset as u16;
        model.reset();
        let (a, r) = lines.split_at_mut(line);
        // The line above a band's first line is zeros; the other two buffers are fetched into
        // (`line[1..=pw]`) and get their edge samples from `edges` before they are read.
        a.fill(0);
        let (b, c) = r.split_at_mut(line);
        let mut bufs = [a, b, c];
        let sink = ChunkSink {
            region,
            written: 0,
            dma: &mut dma_out,
        };
        let mut w = Writer::new(&mut *chunk, sink);
        // The segment's first line, then each line while the next is fetched.
        fetch(
            plan,
            sh.pixels,
            seg.component,
            seg.first_line,
            &mut dma_in,
            staging,
            bufs[1],
        )?;
        for y in seg.first_line..seg.first_line + seg.lines {
            let [prev, cur, next] = &mut bufs;
            let more = y + 1 < seg.first_line + seg.lines;
            // `next[pw + 1..]` is never fetched into: its empty head is the L1 side of the
            // empty write-back (the DMA checks that both local sides are in L1).
            let (nbuf, ntail) = next.split_at_mut(pw + 1);
            let (src, dst): (&[u8], &mut [u8]) = match (more, plan.layout()) {
                (false, _) => (&[], &mut nbuf[..0]),
                (true, Layout::Grey) => {
                    (&sh.pixels[(y + 1) * plan.width()..][..pw], &mut nbuf[1..])
                }
                (true, Layout::BayerRggb) => (
                    &sh.pixels[(2 * (y + 1) + seg.component / 2) * plan.width()..][..plan.width()],
                    &mut staging[..plan.width()],
                ),
            };
            dma_in
                .overlap((&ntail[..0], &mut []), (src, dst), || {
                    K::encode_line(model, sh.quant, &mut w, prev, cur, pw)
                })
                .map_err(|_| EncodeError::Cluster)?;
            if w.overflowed() {
                return Err(EncodeError::OutputFull);
            }
            if more && plan.layout() == Layout::BayerRggb {
                deinterleave(staging, seg.component, &mut next[1..=pw]);
            }
            bufs.rotate_left(1);
        }
        w.finish();
        w.spill();
        if w.overflowed() {
            return Err(EncodeError::OutputFull);
        }
        s.lens[k] = w.sink.written;
    }
    Ok(())
}

/// Line `y` of component `c`'s plane into `dst[1..=pw]` (waits for its DMA).
fn fetch<D: DmaRaw>(
    plan: &Plan,
    pixels: &[u8],
    c: usize,
    y: usize,
    dma: &mut Dma<D>,
    staging: &mut [u8],
    dst: &mut [u8],
) -> Result<(), EncodeError> {
    let (w, pw) = (plan.width(), plan.plane_width());
    match plan.layout() {
        Layout::Grey => dma
            .copy_in(&pixels[y * w..][..pw], &mut dst[1..=pw])
            .map_err(|_| EncodeError::Cluster),
        Layout::BayerRggb => {
            dma.copy_in(&pixels[(2 * y + c / 2) * w..][..w], &mut staging[..w])
                .map_err(|_| EncodeError::Cluster)?;
            deinterleave(staging, c, &mut dst[1..=pw]);
            Ok(())
        }
    }
}

/// The samples of colour `c` (column parity `c % 2`) of a mosaic row.
#[inline]
fn deinterleave(row: &[u8], c: usize, dst: &mut [u8]) {
    for (d, s) in dst.iter_mut().zip(row[c % 2..].iter().step_by(2)) {
        *d = *s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gap_rust_sdk::host::HostCluster;

    fn picture(w: usize, h: usize, seed: u32) -> alloc::vec::Vec<u8> {
        let mut s = seed | 1;
        (0..w * h)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                ((i % w) as u32 / 3 + (i / w) as u32 + (s & 7)) as u8
            })
            .collect()
    }

    #[test]
    fn cluster_bands_give_the_single_core_stream() {
        let cl = HostCluster::new();
        for (w, h, layout) in [
            (324, 244, Layout::Grey),
            (324, 244, Layout::BayerRggb),
            (37, 5, Layout::Grey),
            (2, 2, Layout::BayerRggb),
            (1, 1, Layout::Grey),
        ] {
            let px = picture(w, h, w as u32 * 7 + h as u32);
            for cores in [1, 2, 3, 8] {
                for bands in [1, 2, 8] {
                    let plan = Plan::new(w, h, layout, bands).unwrap();
                    let want = crate::encode_to_vec(&plan, &px).unwrap();
                    // Room for every segment's worst case in its region.
                    let room = plan.prefix_len()
                        + plan.segments() * (plan.max_segment_len(0) + MAX_SEPARATOR);
                    let mut out = alloc::vec![0u8; room];
                    let n = encode::<crate::Portable, _>(&cl, cores, &plan, &px, &mut out).unwrap();
                    assert!(
                        out[..n] == want[..],
                        "{w}x{h} {layout:?} {cores} cores {bands} bands"
                    );
                }
            }
        }
    }

    /// Output buffers from roomy down to too short (segments' destinations reaching into other
    /// segments' code): the join gives the one-core stream or `OutputFull`, never another
    /// stream.
    #[test]
    fn every_output_length_gives_the_stream_or_output_full() {
        let cl = HostCluster::new();
        // Bands of very different lengths: a flat top, noise below.
        let (w, h) = (48, 40);
        let mut px = picture(w, h, 11);
        for (i, v) in px.iter_mut().enumerate() {
            if i / w < 15 {
                *v = 7;
            } else {
                *v = v.wrapping_mul(37);
            }
        }
        let mut oks = 0;
        for (layout, bands, cores) in [
            (Layout::Grey, 8, 8),
            (Layout::Grey, 5, 3),
            (Layout::Grey, 8, 2),
            (Layout::BayerRggb, 4, 8),
        ] {
            let plan = Plan::new(w, h, layout, bands).unwrap();
            let want = crate::encode_to_vec(&plan, &px).unwrap();
            let room =
                plan.prefix_len() + plan.segments() * (plan.max_segment_len(0) + MAX_SEPARATOR);
            let mut len = room;
            while len >= want.len() {
                let mut out = alloc::vec![0u8; len];
                match encode::<crate::Portable, _>(&cl, cores, &plan, &px, &mut out) {
                    Ok(n) => {
                        assert!(
                            out[..n] == want[..],
                            "{layout:?} {bands} bands {cores} cores, {len} B"
                        );
                        oks += 1;
                    }
                    Err(e) => assert_eq!(e, EncodeError::OutputFull, "{len} B"),
                }
                len -= 1 + len / 97;
            }
        }
        assert!(oks > 100, "{oks}");
    }

    #[test]
    fn a_region_too_small_is_an_error() {
        let cl = HostCluster::new();
        let px = picture(64, 64, 3);
        let plan = Plan::new(64, 64, Layout::Grey, 4).unwrap();
        let mut out = alloc::vec![0u8; 200];
        assert_eq!(
            encode::<crate::Portable, _>(&cl, 4, &plan, &px, &mut out),
            Err(EncodeError::OutputFull)
        );
    }
}
