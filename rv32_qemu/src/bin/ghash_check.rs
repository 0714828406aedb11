//! GHASH on rv32 (the `asm!` carry-less multiply of `gap_rust_cipher_s::ghash`) against RustCrypto
//! `ghash`: both multiply kernels, seeded random keys, data and lengths (0..=600 bytes, unaligned
//! starts), single-bit and all-ones operands, the GCM specification's test case 2 hash key, the
//! per-core combination (`gcm_tag_parts`, 1..=8 parts) against a sequential GHASH.
#![no_std]
#![no_main]

extern crate alloc;
use ::ghash::universal_hash::UniversalHash;
use alloc::vec::Vec;
use gap_rust_cipher_s::ghash::{self, Ghash, field};
use rv32_qemu::{Rng, println};

fn reference(h: &[u8; 16], aad: &[u8], data: &[u8]) -> [u8; 16] {
    let mut g = ::ghash::GHash::new(&(*h).into());
    g.update_padded(aad);
    g.update_padded(data);
    g.finalize().into()
}

fn ours<M: field::Multiplier>(h: &[u8; 16], aad: &[u8], data: &[u8]) -> [u8; 16] {
    let mut g = Ghash::<M>::with_kernel(h);
    g.update_padded(aad);
    g.update_padded(data);
    g.state()
}

fn main() -> Result<(), &'static str> {
    let mut rng = Rng::new(0x6E45_0C4E);
    let mut buf = alloc::vec![0u8; 640];
    let mut cases = 0u32;
    // GCM spec test case 2: H = E_K(0) for the zero key, one zero ciphertext block's GHASH.
    let h2: [u8; 16] = [
        0x66, 0xe9, 0x4b, 0xd4, 0xef, 0x8a, 0x2c, 0x3b, 0x88, 0x4c, 0xfa, 0x59, 0xca, 0x34, 0x2b,
        0x2e,
    ];
    let c2: [u8; 16] = [
        0x03, 0x88, 0xda, 0xce, 0x60, 0xb6, 0xa3, 0x92, 0xf3, 0x28, 0xc2, 0xb9, 0x71, 0xb2, 0xfe,
        0x78,
    ];
    if ours::<field::Wide>(&h2, &[], &c2) != reference(&h2, &[], &c2) {
        return Err("test case 2 hash differs");
    }
    for i in 0..128usize {
        for j in [0usize, 1, 63, 64, 127, i] {
            let mut x = [0u8; 16];
            x[i / 8] = 0x80 >> (i % 8);
            let mut h = [0u8; 16];
            h[j / 8] = 0x80 >> (j % 8);
            let want = reference(&h, &[], &x);
            if ours::<field::Wide>(&h, &[], &x) != want
                || ours::<field::Low>(&h, &[], &x) != want
                || ours::<field::Half>(&h, &[], &x) != want
            {
                println!("single bits {i} {j} differ");
                return Err("single-bit multiply differs from RustCrypto ghash");
            }
            cases += 1;
        }
    }
    let ones = [0xffu8; 16];
    if ours::<field::Wide>(&ones, &[], &ones) != reference(&ones, &[], &ones)
        || ours::<field::Half>(&ones, &[], &ones) != reference(&ones, &[], &ones)
    {
        return Err("all-ones multiply differs");
    }
    for _ in 0..300 {
        let mut h = [0u8; 16];
        rng.fill(&mut h);
        rng.fill(&mut buf);
        let start = (rng.next_u64() % 16) as usize;
        let len = (rng.next_u64() % 601) as usize;
        let alen = (rng.next_u64() % 40) as usize;
        let data = &buf[start..start + len];
        let aad: Vec<u8> = buf[..alen].to_vec();
        let want = reference(&h, &aad, data);
        if ours::<field::Wide>(&h, &aad, data) != want
            || ours::<field::Low>(&h, &aad, data) != want
            || ours::<field::Half>(&h, &aad, data) != want
        {
            println!("len {len} start {start} aad {alen} differs");
            return Err("GHASH differs from RustCrypto ghash");
        }
        // The per-core combination with the length block and a mask equals the sequential one.
        let mask = [0x5au8; 16];
        let seq = ghash::gcm_tag(&h, &mask, &aad, data);
        let parts = 1 + (rng.next_u64() % 8) as usize;
        if ghash::gcm_tag_parts(&h, &mask, &aad, data, parts) != seq {
            return Err("per-core GHASH combination differs");
        }
        cases += 1;
    }
    println!("ghash_check: {cases} cases against RustCrypto ghash");
    println!("RESULT pass");
    Ok(())
}
rv32_qemu::entry!(main);
