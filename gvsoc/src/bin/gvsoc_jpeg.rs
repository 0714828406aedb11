//! The JPEG rows of `make gvsoc-bench`: one picture, coded by the cluster encoder of
//! `gapstream_jpeg` with each DCT kernel, quality and core count of the run list, on the GAP8
//! model.
//!
//! The host runner (`cargo xtask gvsoc-bench`, `xtask/src/gvsoc_jpeg.rs`) writes the picture and
//! the runs into [`GVSOC_JPEG_CONFIG`] (a symbol in L2, found through the ELF's symbol table),
//! each run with the length and digest of the file the host's encoder writes for it (the
//! portable model: the same bits). Per run, on the FC: one warm-up encode of the picture's first
//! 16 rows with the same settings (so the cluster's instruction cache holds the code, as when
//! frames follow each other; flag [`JPEG_FLAG_COLD`] skips it), the measured encode, then the
//! file's length and digest, the guards around the output buffer and the cluster stacks'
//! high-water marks are checked, and one line is printed:
//!
//! `jpeg i=<n> variant=<v> quality=<q> cores=<n> width=<w> height=<h> cycles=<c>
//! instructions=<i> bytes=<len> stack0=<used>/<size> stack=<used>/<size> fcstack=<used>/<size> digest=<hex> ok`
//! (or `FAIL <why>`).
//!
//! `cycles`: elapsed cluster clock cycles of the encoder's cluster job (the cluster timer, read
//! on core 0): the tables copied next to the cores, the header written, the fork, every band
//! coded and streamed through L1, the join and EOI.
#![cfg_attr(target_arch = "riscv32", no_std, no_main)]

/// Layout sensitivity, as in `gvsoc_bench`: `GVSOC_HOT_PAD=<bytes>` at build time puts that many
/// bytes between the hot code (`.text.hot.*`) and the rest of the program.
#[cfg(target_arch = "riscv32")]
mod layout {
    const fn parse(v: Option<&str>) -> usize {
        let Some(s) = v else { return 0 };
        let (b, mut i, mut r) = (s.as_bytes(), 0, 0);
        while i < b.len() {
            r = r * 10 + (b[i] - b'0') as usize;
            i += 1;
        }
        r
    }
    const HOT_PAD: usize = parse(option_env!("GVSOC_HOT_PAD"));
    core::arch::global_asm!(
        ".pushsection .text.pad,\"ax\",@progbits",
        ".skip {pad}",
        ".popsection",
        pad = const HOT_PAD,
    );
}

#[cfg(target_arch = "riscv32")]
mod app {
    #[allow(dead_code)] // the host runner's half of the shared layout
    mod config {
        include!("../jpeg_common.rs");
    }
    use config::*;

    use gap_rust_sdk::bare::{BareCluster, BareL2};
    use gap_rust_sdk::{Buf, bare_println};
    #[cfg(feature = "pulp")]
    use gapstream_jpeg::Pulp;
    use gapstream_jpeg::cluster::{ClusterEncoder, Config};
    use gapstream_jpeg::testimage::digest;
    use gapstream_jpeg::{Error, FrameSpec, Kernel, Portable};

    /// The picture and its runs (patched by the host runner; see the module docs).
    #[unsafe(no_mangle)]
    #[used]
    pub static GVSOC_JPEG_CONFIG: [u8; JPEG_CONFIG_BYTES] = [0; JPEG_CONFIG_BYTES];

    fn byte(i: usize) -> u8 {
        // SAFETY: `i` is inside the config static (callers stay below its size); a volatile read,
        // because the runner changes the bytes after compilation.
        unsafe { core::ptr::read_volatile((&raw const GVSOC_JPEG_CONFIG).cast::<u8>().add(i)) }
    }

    fn word(i: usize) -> u32 {
        u32::from_le_bytes([
            byte(4 * i),
            byte(4 * i + 1),
            byte(4 * i + 2),
            byte(4 * i + 3),
        ])
    }

    fn run(i: usize) -> JpegRun {
        let mut w = [0u32; JPEG_RUN_WORDS];
        for (k, v) in w.iter_mut().enumerate() {
            *v = word(JPEG_HEAD_WORDS + JPEG_RUN_WORDS * i + k);
        }
        JpegRun::from_words(w)
    }

    /// Bytes a cluster stack must keep unused.
    const STACK_MARGIN: usize = 256;

    fn guard_byte(i: usize) -> u8 {
        0x5A ^ (i as u8).wrapping_mul(13)
    }

    struct Outcome {
        len: usize,
        cycles: u32,
        instructions: u32,
    }

    fn measure<K: Kernel>(
        cl: &BareCluster,
        enc: &mut ClusterEncoder<'_, BareCluster>,
        spec: &FrameSpec,
        frame: &[u8],
        out: &mut [u8],
        warm: bool,
    ) -> Result<Outcome, Error> {
        if warm {
            let rows = (spec.height as usize).min(16);
            let w = FrameSpec {
                height: rows as u16,
                ..*spec
            };
            enc.encode::<K>(&w, &frame[..rows * spec.width as usize], out)?;
        }
        let len = enc.encode::<K>(spec, frame, out)?;
        let st = cl.last_run();
        Ok(Outcome {
            len,
            cycles: st.cycles,
            instructions: st.instructions,
        })
    }

    fn main() -> u32 {
        let Some(cl) = BareCluster::take() else {
            bare_println!("jpeg FAIL: the cluster did not boot");
            return 1;
        };
        if word(0) != JPEG_MAGIC || word(1) != JPEG_VERSION {
            bare_println!("jpeg FAIL: no run list (run through `cargo xtask gvsoc-bench`)");
            return 2;
        }
        let count = (word(2) as usize).min(JPEG_MAX_RUNS);
        let warm = word(3) & JPEG_FLAG_COLD == 0;
        let (w, h) = (word(4) as usize, word(5) as usize);
        if w == 0 || h == 0 || w * h > JPEG_MAX_PIXELS || w > u16::MAX as usize {
            bare_println!("jpeg FAIL: bad frame size {w}x{h}");
            return 3;
        }
        let (Ok(mut frame), Ok(mut region)) = (
            Buf::zeroed(&BareL2, w * h, 8),
            Buf::zeroed(&BareL2, JPEG_OUT_BYTES + 2 * JPEG_GUARD, 8),
        ) else {
            bare_println!("jpeg FAIL: no L2 for the frame and the output");
            return 4;
        };
        for (i, p) in frame.iter_mut().enumerate() {
            *p = byte(JPEG_FRAME_AT + i);
        }
        let mut enc = match ClusterEncoder::new(&cl, Config::new(8)) {
            Ok(e) => e,
            Err(e) => {
                bare_println!("jpeg FAIL: encoder: {e}");
                return 5;
            }
        };
        let mut failed = 0u32;
        for i in 0..count {
            let r = run(i);
            let variant = JPEG_VARIANTS
                .get(r.variant as usize)
                .copied()
                .unwrap_or("?");
            let spec = FrameSpec {
                width: w as u16,
                height: h as u16,
                quality: r.quality as u8,
                bands: r.cores as u8,
            };
            for (j, b) in region.iter_mut().enumerate() {
                *b = guard_byte(j);
            }
            let out = &mut region[JPEG_GUARD..JPEG_GUARD + JPEG_OUT_BYTES];
            let result = match r.variant {
                0 => measure::<Portable>(&cl, &mut enc, &spec, &frame, out, warm),
                #[cfg(feature = "pulp")]
                1 => measure::<Pulp>(&cl, &mut enc, &spec, &frame, out, warm),
                _ => Err(Error::Config),
            };
            let len = result.as_ref().map_or(0, |o| o.len);
            let d = digest(&region[JPEG_GUARD..JPEG_GUARD + len]);
            let want = (r.digest_hi as u64) << 32 | r.digest_lo as u64;
            let guards_ok = (0..JPEG_GUARD)
                .chain(JPEG_GUARD + JPEG_OUT_BYTES..region.len())
                .all(|j| region[j] == guard_byte(j));
            let (s0, z0) = gap_rust_sdk::bare::stack_used(0);
            let (s1, z1) = (1..8)
                .map(gap_rust_sdk::bare::stack_used)
                .fold((0, 0), |(m, _), (u, z)| (m.max(u), z));
            let stacks_ok = s0 + STACK_MARGIN <= z0 && s1 + STACK_MARGIN <= z1;
            // The FC's stack lies right above the program's statics: near its end, the run's
            // state may already be corrupt, whatever it returned.
            let (sf, zf) = gap_rust_sdk::bare::fc_stack_used();
            let verdict = match &result {
                _ if sf + STACK_MARGIN > zf => "FAIL fc-stack-near-overflow",
                Err(_) => "FAIL encoder-error",
                Ok(_) if !guards_ok => "FAIL guard-overwritten",
                Ok(o) if o.len != r.len as usize || d != want => "FAIL digest",
                Ok(_) if !stacks_ok => "FAIL stack-near-overflow",
                Ok(_) => "ok",
            };
            if verdict != "ok" {
                failed += 1;
            }
            let (c, n) = result
                .as_ref()
                .map_or((0, 0), |o| (o.cycles, o.instructions));
            bare_println!(
                "jpeg i={i} variant={variant} quality={} cores={} width={w} height={h} cycles={c} instructions={n} bytes={len} stack0={s0}/{z0} stack={s1}/{z1} fcstack={sf}/{zf} digest={d:016x} {verdict}",
                r.quality,
                r.cores
            );
            if let Err(e) = result {
                bare_println!("jpeg i={i} error: {e}");
            }
        }
        bare_println!("jpeg done runs={count} failed={failed}");
        if failed == 0 { 0 } else { 6 }
    }

    gap_rust_sdk::bare_main!(main);
}

#[cfg(not(target_arch = "riscv32"))]
fn main() {
    eprintln!(
        "a GAP8 program: build with --target riscv32imc-unknown-none-elf and run on GVSOC (make gvsoc-bench)"
    );
}
