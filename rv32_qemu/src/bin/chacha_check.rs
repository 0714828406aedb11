//! ChaCha20 on rv32 (QEMU): RFC 8439 vectors, a seeded randomized cross-check of the RV32 assembly
//! and portable backends against RustCrypto `chacha20` (random keys, nonces, byte offsets,
//! lengths, unaligned in-place and in-to-out buffers, random chunking), and the end of the
//! keystream.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use cipher::{KeyIvInit, StreamCipher, StreamCipherCore, StreamCipherSeek};
use gap_rust_cipher_s::chacha::{BLOCKS, ChaCha20Portable, ChaCha20Rv32, KEYSTREAM_BYTES};
use gap_rust_cipher_s::{CipherId, KeystreamApplier, KeystreamError, Sequential};
use rv32_qemu::{Rng, println};

const SEED: u64 = 0x6761_7073_7472_6561; // "gapstrea"
const CASES: usize = 300;

fn hex(s: &str) -> Vec<u8> {
    let d: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    d.chunks(2)
        .map(|p| {
            let v = |c: u8| (c as char).to_digit(16).unwrap() as u8;
            (v(p[0]) << 4) | v(p[1])
        })
        .collect()
}

fn rfc8439<C: KeyIvInit + StreamCipher + StreamCipherSeek>(name: &str) -> Result<(), &'static str> {
    let key: [u8; 32] = core::array::from_fn(|i| i as u8);
    // §2.3.2: block function, counter 1.
    let mut c = C::new_from_slices(&key, &hex("000000090000004a00000000")).unwrap();
    c.seek(64u64);
    let mut block = [0u8; 64];
    c.apply_keystream(&mut block);
    let want = hex(
        "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e
         d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e",
    );
    if block[..] != want[..] {
        return Err("RFC 8439 2.3.2 block mismatch");
    }
    // §2.4.2: encryption from counter 1.
    let plain = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";
    let want = hex(
        "6e2e359a2568f98041ba0728dd0d6981 e97e7aec1d4360c20a27afccfd9fae0b
         f91b65c5524733ab8f593dabcd62b357 1639d624e65152ab8f530c359f0861d8
         07ca0dbf500d6a6156a38e088a22b65e 52bc514d16ccf806818ce91ab7793736
         5af90bbf74a35be6b40b8eedf2785e42 874d",
    );
    let mut c = C::new_from_slices(&key, &hex("000000000000004a00000000")).unwrap();
    c.seek(64u64);
    let mut buf = plain.to_vec();
    c.apply_keystream(&mut buf);
    if buf != want {
        return Err("RFC 8439 2.4.2 ciphertext mismatch");
    }
    println!("chacha20 {name}: RFC 8439 2.3.2 and 2.4.2 ok");
    Ok(())
}

/// One random case against the reference; returns the number of bytes checked.
fn one_case<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
    rng: &mut Rng,
) -> Result<usize, &'static str> {
    let mut key = [0u8; 32];
    let mut nonce = [0u8; 12];
    rng.fill(&mut key);
    rng.fill(&mut nonce);
    let len = match rng.below(4) {
        0 => rng.below(65),
        1 => 64 * (1 + rng.below(16)),
        _ => rng.below(4097),
    };
    // Offsets: small, anywhere, and close to (but before) the point where the reference stops.
    let offset = match rng.below(3) {
        0 => rng.below(5000) as u64,
        1 => rng.next_u64() % (KEYSTREAM_BYTES - 64 - 8192),
        _ => KEYSTREAM_BYTES - 64 - 4096 - rng.below(4096) as u64,
    };
    let mut data = vec![0u8; len];
    rng.fill(&mut data);

    let mut want = data.clone();
    let mut r = chacha20::ChaCha20::new(&key.into(), &nonce.into());
    r.try_seek(offset).map_err(|_| "reference seek failed")?;
    r.try_apply_keystream(&mut want)
        .map_err(|_| "reference apply failed")?;

    let mut c = C::new_from_slices(&key, &nonce).unwrap();
    c.try_seek(offset).map_err(|_| "seek failed")?;
    // Random split points.
    let mut cuts = vec![0, len];
    for _ in 0..rng.below(4) {
        cuts.push(rng.below(len + 1));
    }
    cuts.sort_unstable();
    let misalign = rng.below(4);
    let mut out = vec![0u8; len + misalign];
    if rng.below(2) == 0 {
        out[misalign..].copy_from_slice(&data);
        for w in cuts.windows(2) {
            c.try_apply_keystream(&mut out[misalign + w[0]..misalign + w[1]])
                .map_err(|_| "apply failed")?;
        }
    } else {
        let src_mis = rng.below(4);
        let mut src = vec![0u8; len + src_mis];
        src[src_mis..].copy_from_slice(&data);
        for w in cuts.windows(2) {
            c.try_apply_keystream_b2b(
                &src[src_mis + w[0]..src_mis + w[1]],
                &mut out[misalign + w[0]..misalign + w[1]],
            )
            .map_err(|_| "apply b2b failed")?;
        }
    }
    if out[misalign..] != want[..] {
        println!("mismatch: offset={offset} len={len} misalign={misalign} cuts={cuts:?}");
        return Err("keystream differs from RustCrypto chacha20");
    }
    if c.current_pos::<u64>() != offset + len as u64 {
        return Err("position after apply is wrong");
    }
    Ok(len)
}

fn cross_check<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
    name: &str,
) -> Result<(), &'static str> {
    let mut rng = Rng::new(SEED);
    let mut bytes = 0;
    for _ in 0..CASES {
        bytes += one_case::<C>(&mut rng)?;
    }
    println!(
        "chacha20 {name}: {CASES} random cases ({bytes} bytes, seed {SEED:#x}) match RustCrypto chacha20"
    );
    Ok(())
}

/// Block 0xFFFF_FFFF from RustCrypto's core (its stream wrapper stops one block earlier).
fn reference_last_block(key: &[u8; 32], nonce: &[u8; 12]) -> [u8; 64] {
    let mut core = chacha20::ChaChaCore::<chacha20::R20, chacha20::variants::Ietf>::new(
        key.into(),
        nonce.into(),
    );
    core.set_block_pos(u32::MAX);
    let mut b = Default::default();
    core.write_keystream_block(&mut b);
    b.into()
}

fn end_of_keystream<C: KeyIvInit + StreamCipher + StreamCipherSeek>(
    name: &str,
) -> Result<(), &'static str> {
    let (key, nonce) = ([0xa5u8; 32], [0x3cu8; 12]);
    let last = reference_last_block(&key, &nonce);
    let mut c = C::new_from_slices(&key, &nonce).unwrap();
    c.try_seek((BLOCKS - 2) * 64 + 5)
        .map_err(|_| "seek near end failed")?;
    let mut buf = [0u8; 123];
    c.try_apply_keystream(&mut buf)
        .map_err(|_| "apply up to the end failed")?;
    if buf[59..] != last[..] {
        return Err("last block (counter 0xFFFFFFFF) differs from the reference core");
    }
    let mut one = [0x77u8; 1];
    if c.try_apply_keystream(&mut one).is_ok() || one != [0x77] {
        return Err("apply past the end did not fail cleanly");
    }
    if c.try_seek(KEYSTREAM_BYTES + 1).is_ok() {
        return Err("seek past the end did not fail");
    }
    c.try_seek(KEYSTREAM_BYTES)
        .map_err(|_| "seek to the end failed")?;
    if c.try_apply_keystream(&mut [0u8; 1]).is_ok() {
        return Err("apply at the end did not fail");
    }
    println!("chacha20 {name}: last block usable, past-the-end apply/seek rejected");
    Ok(())
}

fn sequential() -> Result<(), &'static str> {
    let (key, nonce) = ([1u8; 32], [2u8; 12]);
    let mut d = [0u8; 100];
    if Sequential.apply_keystream(
        CipherId::ChaCha20,
        &key,
        &nonce,
        KEYSTREAM_BYTES - 99,
        &mut d,
    ) != Err(KeystreamError::CounterOverflow)
    {
        return Err("Sequential did not report CounterOverflow");
    }
    let mut rng = Rng::new(SEED ^ 1);
    let mut data = vec![0u8; 3000];
    rng.fill(&mut data);
    let mut want = data.clone();
    let mut r = chacha20::ChaCha20::new(&key.into(), &nonce.into());
    r.seek(12345u64);
    r.apply_keystream(&mut want);
    Sequential
        .apply_keystream(CipherId::ChaCha20, &key, &nonce, 12345, &mut data)
        .map_err(|_| "Sequential failed")?;
    if data != want {
        return Err("Sequential (rv32-asm) differs from RustCrypto");
    }
    println!(
        "chacha20 Sequential ({}): ok",
        gap_rust_cipher_s::chacha::SELECTED_BACKEND
    );
    Ok(())
}

fn main() -> Result<(), &'static str> {
    if gap_rust_cipher_s::chacha::SELECTED_BACKEND != "rv32-asm" {
        return Err("QEMU build must select the rv32-asm backend (is feature `pulp` on?)");
    }
    rfc8439::<ChaCha20Rv32>("rv32-asm")?;
    rfc8439::<ChaCha20Portable>("portable")?;
    cross_check::<ChaCha20Rv32>("rv32-asm")?;
    cross_check::<ChaCha20Portable>("portable")?;
    end_of_keystream::<ChaCha20Rv32>("rv32-asm")?;
    end_of_keystream::<ChaCha20Portable>("portable")?;
    sequential()
}
rv32_qemu::entry!(main);
