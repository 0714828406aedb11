//! AES-128-CTR on rv32: FIPS-197 C.1 (block), SP 800-38A F.5.1 / F.5.2 (CTR) for every variant
//! (the PULP kernel with `p.ror` emulated by a trap handler), and a seeded randomized cross-check against `ctr::Ctr128BE<aes::Aes128>`
//! (random keys, IVs near carries and the 2^128 wrap, unaligned seeks, chunked calls, unaligned
//! buffers).
#![no_std]
#![no_main]

extern crate alloc;
use cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use gap_rust_cipher_s::aes::{self, Aes128CtrWith, Backend};
use rv32_qemu::{Rng, println};

#[path = "aes_support/pulp_emu.rs"]
mod pulp_emu;

const F5_KEY: [u8; 16] = [
    0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6, 0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c,
];
const F5_CTR: [u8; 16] = [
    0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff,
];
const F5_PT: [u8; 64] = [
    0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e, 0x11, 0x73, 0x93, 0x17, 0x2a,
    0xae, 0x2d, 0x8a, 0x57, 0x1e, 0x03, 0xac, 0x9c, 0x9e, 0xb7, 0x6f, 0xac, 0x45, 0xaf, 0x8e, 0x51,
    0x30, 0xc8, 0x1c, 0x46, 0xa3, 0x5c, 0xe4, 0x11, 0xe5, 0xfb, 0xc1, 0x19, 0x1a, 0x0a, 0x52, 0xef,
    0xf6, 0x9f, 0x24, 0x45, 0xdf, 0x4f, 0x9b, 0x17, 0xad, 0x2b, 0x41, 0x7b, 0xe6, 0x6c, 0x37, 0x10,
];
const F5_CT: [u8; 64] = [
    0x87, 0x4d, 0x61, 0x91, 0xb6, 0x20, 0xe3, 0x26, 0x1b, 0xef, 0x68, 0x64, 0x99, 0x0d, 0xb6, 0xce,
    0x98, 0x06, 0xf6, 0x6b, 0x79, 0x70, 0xfd, 0xff, 0x86, 0x17, 0x18, 0x7b, 0xb9, 0xff, 0xfd, 0xff,
    0x5a, 0xe4, 0xdf, 0x3e, 0xdb, 0xd5, 0xd3, 0x5e, 0x5b, 0x4f, 0x09, 0x02, 0x0d, 0xb0, 0x3e, 0xab,
    0x1e, 0x03, 0x1d, 0xda, 0x2f, 0xbe, 0x03, 0xd1, 0x79, 0x21, 0x70, 0xa0, 0xf3, 0x00, 0x9c, 0xee,
];

fn vectors<C: KeyIvInit + StreamCipher>(name: &str) -> Result<(), &'static str> {
    let mut buf = F5_PT;
    C::new_from_slices(&F5_KEY, &F5_CTR)
        .map_err(|_| "key/IV length")?
        .apply_keystream(&mut buf);
    if buf != F5_CT {
        println!("{name}: SP 800-38A F.5.1 (CTR-AES128.Encrypt) FAILED");
        return Err("SP 800-38A F.5.1");
    }
    C::new_from_slices(&F5_KEY, &F5_CTR)
        .map_err(|_| "key/IV length")?
        .apply_keystream(&mut buf);
    if buf != F5_PT {
        println!("{name}: SP 800-38A F.5.2 (CTR-AES128.Decrypt) FAILED");
        return Err("SP 800-38A F.5.2");
    }
    println!("{name}: SP 800-38A F.5.1 and F.5.2 ok");
    Ok(())
}

fn random_iv(rng: &mut Rng) -> [u8; 16] {
    let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
    let iv = match rng.below(4) {
        0 => r,
        1 => u128::MAX - rng.below(600) as u128,
        2 => (r & !0xFFFF) | (0xFFFF - rng.below(300) as u128),
        _ => (r & !0xFF_FFFF_FFFF) | (0xFF_FFFF_FFFF - rng.below(600) as u128),
    };
    iv.to_be_bytes()
}

fn cross_check<B: Backend>(seed: u64, rounds: usize) -> Result<(), &'static str> {
    let mut rng = Rng::new(seed);
    let mut a = alloc::vec![0u8; 2048 + 4];
    let mut b = alloc::vec![0u8; 2048 + 4];
    let mut total = 0usize;
    for _ in 0..rounds {
        let mut key = [0u8; 16];
        rng.fill(&mut key);
        let iv = random_iv(&mut rng);
        let seek = if rng.below(2) == 0 {
            rng.below(80)
        } else {
            rng.below(20_000)
        } as u64;
        let len = rng.below(2049);
        let off = rng.below(4);
        rng.fill(&mut a[off..off + len]);
        b[off..off + len].copy_from_slice(&a[off..off + len]);
        let mut r = aes::Reference::new(&key.into(), &iv.into());
        r.seek(seek);
        r.apply_keystream(&mut a[off..off + len]);
        let mut c = Aes128CtrWith::<B>::new(&key.into(), &iv.into());
        c.seek(seek);
        // Apply in up to three pieces of random length.
        let mut rest = &mut b[off..off + len];
        for _ in 0..rng.below(3) {
            let n = rng.below(rest.len() + 1);
            let (x, y) = rest.split_at_mut(n);
            c.apply_keystream(x);
            rest = y;
        }
        c.apply_keystream(rest);
        if a[off..off + len] != b[off..off + len] || c.current_pos::<u64>() != seek + len as u64 {
            println!(
                "{}: mismatch key={key:02x?} iv={iv:02x?} seek={seek} len={len} off={off}",
                B::NAME
            );
            return Err("randomized cross-check against ctr::Ctr128BE<aes::Aes128> failed");
        }
        total += len;
    }
    println!(
        "{}: {rounds} random cases ({total} bytes) match ctr::Ctr128BE<aes::Aes128>",
        B::NAME
    );
    Ok(())
}

fn variant<B: Backend>(rounds: usize) -> Result<(), &'static str> {
    vectors::<Aes128CtrWith<B>>(B::NAME)?;
    cross_check::<B>(0x05ee_dae5 ^ B::NAME.len() as u64, rounds)
}

fn main() -> Result<(), &'static str> {
    // FIPS-197 appendix C.1: the block function.
    let key: [u8; 16] = core::array::from_fn(|i| i as u8);
    let pt: [u8; 16] = core::array::from_fn(|i| (i as u8) * 0x11);
    let want = [
        0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5,
        0x5a,
    ];
    if aes::encrypt_blocks(&key, &pt, &pt) != (want, want) {
        return Err("FIPS-197 C.1");
    }
    println!("block function: FIPS-197 C.1 ok");
    vectors::<aes::Reference>("rustcrypto")?;
    vectors::<aes::Aes128Ctr>("best")?;
    variant::<aes::Portable>(120)?;
    variant::<aes::Rv32>(120)?;
    // The PULP kernel, with p.ror emulated by a trap handler. First anchor the emulator's decoding
    // to the golden word of platform-facts / asm_macros: p.ror a0, a0, a1 = 0x08B55533.
    let emu = pulp_emu::PulpEmu::install()?;
    let mut a0 = 0x8000_0001u32;
    // SAFETY: a register-only instruction, emulated while `emu` is alive.
    unsafe {
        core::arch::asm!(".insn 4, 0x08b55533", inout("a0") a0, in("a1") 4u32, options(nomem, nostack))
    };
    if a0 != 0x1800_0000 {
        return Err("p.ror a0, a0, a1 (0x08B55533) emulated wrongly");
    }
    count_check(&emu)?;
    let t0 = emu.traps();
    // Fewer cases: every emulated p.ror costs about a hundred QEMU instructions.
    variant::<aes::Pulp>(25)?;
    let t1 = emu.traps();
    println!(
        "pulp: emulated {} p.ror, {} pv.srl.sci.b, {} pv.sll.sci.b, {} pv.srl.b, {} pv.sll.b, {} p.lw, {} hardware loops ({} jumps back)",
        t1[0] - t0[0],
        t1[1] - t0[1],
        t1[2] - t0[2],
        t1[3] - t0[3],
        t1[4] - t0[4],
        t1[5] - t0[5],
        t1[10] - t0[10],
        t1[9] - t0[9]
    );
    drop(emu);
    Ok(())
}
/// The emulator's corrected instruction counts are exact: sequences of emulated instructions
/// (alone, back to back, between ordinary ones) and a 3-iteration hardware loop count what a
/// PULP core retires for them.
fn count_check(emu: &pulp_emu::PulpEmu) -> Result<(), &'static str> {
    macro_rules! c {
        ($($l:literal),*) => {{
            let mut v = 5u32;
            let words = [1u32, 2, 3, 4, 5, 6, 7, 8];
            let mut ptr = words.as_ptr();
            // SAFETY: ALU instructions on t0, p.lw reading `words` through t1 (at most two words
            // on), lp.* setting the emulator's loop state; all emulated while `emu` is alive.
            let (_, n) = emu.count(|| unsafe {
                core::arch::asm!($($l),*, inout("t0") v, inout("t1") ptr,
                    in("t2") 0x0604_0208u32, options(nostack, readonly))
            });
            core::hint::black_box((&mut v, &mut ptr));
            n
        }};
    }
    let base = c!("addi t0, t0, 1") - 1;
    let got = [
        c!(".insn 4, 0x0872d2b3") - base, // p.ror t0, t0, t2
        c!(".insn 4, 0x0872d2b3", ".insn 4, 0x0872d2b3") - base,
        c!(".insn 4, 0x0043228b", ".insn 4, 0x0043228b") - base, // p.lw t0, 4(t1!)
        c!(
            "addi t0, t0, 1",
            ".insn 4, 0x0043228b",
            "addi t0, t0, 1",
            ".insn 4, 0x407292d7"
        ) - base,
        c!(".insn 4, 0x407292d7", ".insn 4, 0x507292d7") - base, // pv.srl.b / pv.sll.b
        // lp.starti x0, 12; lp.endi x0, 12; lp.counti x0, 3; two-instruction body; marker:
        // 3 + 3 * 2 + 1 on GAP8.
        c!(
            ".option push",
            ".option norvc",
            ".insn 4, 0x0060007b",
            ".insn 4, 0x0060107b",
            ".insn 4, 0x0030307b",
            "addi t0, t0, 1",
            "addi t0, t0, 1",
            ".insn 4, 0x08005033",
            ".option pop"
        ) - base,
    ];
    if got != [1, 2, 2, 4, 2, 10] {
        println!("emulated instruction counts {got:?}, want [1, 2, 2, 4, 2, 10]");
        return Err("the PULP emulator's instruction counts are not exact");
    }
    println!("pulp emulator: instruction counts of emulated sequences and a hardware loop exact");
    Ok(())
}

rv32_qemu::entry!(main);
