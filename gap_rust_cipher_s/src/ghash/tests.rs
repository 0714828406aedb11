//! GHASH against RustCrypto `ghash` / `aes-gcm` and the GCM specification's test cases.
extern crate std;
use super::field::{self, Half, Low, Multiplier, Wide};
use super::*;
use aes_gcm::aead::{AeadInOut, KeyInit};
use cipher::{KeyIvInit, StreamCipher};
use ghash::universal_hash::UniversalHash;
use proptest::prelude::*;
use std::vec::Vec;

fn hex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn reference_ghash(h: &[u8; 16], aad: &[u8], ct: &[u8]) -> [u8; 16] {
    let mut g = ghash::GHash::new(&(*h).into());
    g.update_padded(aad);
    g.update_padded(ct);
    g.finalize().into()
}

/// `E_K(block)` through this crate's reference CTR (the keystream of one counter block).
fn aes_block(key: &[u8; 16], block: &[u8; 16]) -> [u8; 16] {
    let mut b = [0u8; 16];
    crate::aes::Reference::new(key.into(), block.into()).apply_keystream(&mut b);
    b
}

/// GCM with any IV length (SP 800-38D §7.1), built from AES-CTR and this module: returns
/// `(H, ciphertext, tag)`.
fn gcm_encrypt(
    key: &[u8; 16],
    iv: &[u8],
    aad: &[u8],
    pt: &[u8],
    parts: usize,
) -> ([u8; 16], Vec<u8>, [u8; 16]) {
    let h = aes_block(key, &[0; 16]);
    let j0: [u8; 16] = if iv.len() == 12 {
        let mut j = [0u8; 16];
        j[..12].copy_from_slice(iv);
        j[15] = 1;
        j
    } else {
        let mut g = Ghash::new(&h);
        g.update_padded(iv);
        g.update_blocks(&length_block(0, iv.len() as u64));
        g.state()
    };
    let mask = aes_block(key, &j0);
    let mut ct = pt.to_vec();
    let mut c = crate::aes::Reference::new(key.into(), &j0.into());
    cipher::StreamCipherSeek::seek(&mut c, 16u64);
    c.apply_keystream(&mut ct);
    let tag = gcm_tag_parts(&h, &mask, aad, &ct, parts);
    (h, ct, tag)
}

/// Test cases 1–6 of McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)" (2005), the
/// AES-128 ones: empty and one-block messages under the zero key, 64 bytes, 60 bytes with 20
/// bytes of AAD, and the same with an 8-byte and a 60-byte IV (J0 itself from GHASH).
#[test]
fn gcm_spec_test_cases_1_to_6() {
    let k3 = "feffe9928665731c6d6a8f9467308308";
    let p3 = "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
              1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255";
    let p4 = &p3[..120];
    let a4 = "feedfacedeadbeeffeedfacedeadbeefabaddad2";
    #[rustfmt::skip]
    let cases: [(&str, &str, &str, &str, &str, &str, &str); 6] = [
        ("00000000000000000000000000000000", "000000000000000000000000", "", "",
         "66e94bd4ef8a2c3b884cfa59ca342b2e", "", "58e2fccefa7e3061367f1d57a4e7455a"),
        ("00000000000000000000000000000000", "000000000000000000000000", "00000000000000000000000000000000", "",
         "66e94bd4ef8a2c3b884cfa59ca342b2e", "0388dace60b6a392f328c2b971b2fe78", "ab6e47d42cec13bdf53a67b21257bddf"),
        (k3, "cafebabefacedbaddecaf888", p3, "", "b83b533708bf535d0aa6e52980d53b78",
         "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
          21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985",
         "4d5c2af327cd64a62cf35abd2ba6fab4"),
        (k3, "cafebabefacedbaddecaf888", p4, a4, "b83b533708bf535d0aa6e52980d53b78",
         "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
          21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
         "5bc94fbc3221a5db94fae95ae7121a47"),
        (k3, "cafebabefacedbad", p4, a4, "b83b533708bf535d0aa6e52980d53b78",
         "61353b4c2806934a777ff51fa22a4755699b2a714fcdc6f83766e5f97b6c7423\
          73806900e49f24b22b097544d4896b424989b5e1ebac0f07c23f4598",
         "3612d2e79e3b0785561be14aaca2fccb"),
        (k3, "9313225df88406e555909c5aff5269aa6a7a9538534f7da1e4c303d2a318a728\
              c3c0c95156809539fcf0e2429a6b525416aedbf5a0de6a57a637b39b", p4, a4,
         "b83b533708bf535d0aa6e52980d53b78",
         "8ce24998625615b603a033aca13fb894be9112a5c3a211a8ba262a3cca7e2ca7\
          01e4a9a4fba43c90ccdcb281d48c7c6fd62875d2aca417034c34aee5",
         "619cc5aefffe0bfa462af43c1699d050"),
    ];
    for (n, (k, iv, p, a, h, c, t)) in cases.iter().enumerate() {
        let key: [u8; 16] = hex(k).try_into().unwrap();
        for parts in 1..=8 {
            let (hh, ct, tag) = gcm_encrypt(&key, &hex(iv), &hex(a), &hex(p), parts);
            assert_eq!(hh.to_vec(), hex(h), "test case {}: H", n + 1);
            assert_eq!(ct, hex(c), "test case {}: ciphertext", n + 1);
            assert_eq!(
                tag.to_vec(),
                hex(t),
                "test case {}, {parts} parts: tag",
                n + 1
            );
        }
    }
}

/// A test that can fail: a flipped bit anywhere changes the tag.
#[test]
fn every_flipped_bit_changes_the_tag() {
    let h = [0x42u8; 16];
    let mask = [7u8; 16];
    let aad = [1u8; 36];
    let ct: Vec<u8> = (0..50u8).collect();
    let t = gcm_tag_parts(&h, &mask, &aad, &ct, 3);
    for i in 0..(36 + 50) * 8 {
        let (mut a, mut c) = (aad, ct.clone());
        if i < 36 * 8 {
            a[i / 8] ^= 1 << (i % 8);
        } else {
            c[i / 8 - 36] ^= 1 << (i % 8);
        }
        assert_ne!(gcm_tag_parts(&h, &mask, &a, &c, 3), t, "bit {i}");
    }
}

#[test]
fn layout_errors_are_reported() {
    let h = [3u8; 16];
    let gcm = Gcm::new(0, 100);
    let mut m = PartMac::new(&h);
    m.absorb(&[0; 20]);
    // Ends inside a block but not at the end of the ciphertext.
    assert_eq!(gcm.part_share(&h, 0, m.clone()), Err(PartError::Layout));
    // Unaligned start.
    assert_eq!(gcm.part_share(&h, 8, m.clone()), Err(PartError::Layout));
    // Past the end.
    assert_eq!(gcm.part_share(&h, 96, m.clone()), Err(PartError::Layout));
    assert!(gcm.part_share(&h, 80, m).is_ok());
}

fn elem(b: [u8; 16]) -> field::Elem {
    field::load(&b)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// One multiply, both kernels, against RustCrypto: GHASH of one block from zero is `X · H`.
    #[test]
    fn multiply_equals_rustcrypto(x in any::<[u8; 16]>(), h in any::<[u8; 16]>()) {
        let want = reference_ghash(&h, &[], &x);
        prop_assert_eq!(field::store(&Wide::new(&elem(h)).mul(&elem(x))), want);
        prop_assert_eq!(field::store(&Low::new(&elem(h)).mul(&elem(x))), want);
        prop_assert_eq!(field::store(&Half::new(&elem(h)).mul(&elem(x))), want);
        prop_assert_eq!(field::store(&field::mul(&elem(x), &elem(h))), want);
        // Commutes.
        prop_assert_eq!(field::mul(&elem(x), &elem(h)), field::mul(&elem(h), &elem(x)));
    }

    /// Special operands: zero, one (0x80 00..), all ones, single bits.
    #[test]
    fn multiply_single_bits(i in 0usize..128, j in 0usize..128) {
        let mut x = [0u8; 16];
        x[i / 8] = 0x80 >> (i % 8);
        let mut h = [0u8; 16];
        h[j / 8] = 0x80 >> (j % 8);
        let want = reference_ghash(&h, &[], &x);
        prop_assert_eq!(field::store(&Wide::new(&elem(h)).mul(&elem(x))), want);
        prop_assert_eq!(field::store(&Low::new(&elem(h)).mul(&elem(x))), want);
        prop_assert_eq!(field::store(&Half::new(&elem(h)).mul(&elem(x))), want);
        let ones = [0xffu8; 16];
        prop_assert_eq!(field::store(&field::mul(&elem(ones), &elem(h))), reference_ghash(&h, &[], &ones));
    }

    #[test]
    fn ghash_equals_rustcrypto(h in any::<[u8; 16]>(), aad in proptest::collection::vec(any::<u8>(), 0..80),
                               ct in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut g = Ghash::<Wide>::with_kernel(&h);
        g.update_padded(&aad);
        g.update_padded(&ct);
        prop_assert_eq!(g.state(), reference_ghash(&h, &aad, &ct));
        let mut g = Ghash::<Low>::with_kernel(&h);
        g.update_padded(&aad);
        g.update_padded(&ct);
        prop_assert_eq!(g.state(), reference_ghash(&h, &aad, &ct));
        let mut g = Ghash::<Half>::with_kernel(&h);
        g.update_padded(&aad);
        g.update_padded(&ct);
        prop_assert_eq!(g.state(), reference_ghash(&h, &aad, &ct));
    }

    /// `y · h^k` against k multiplies.
    #[test]
    fn power_equals_repeated_multiply(y in any::<[u8; 16]>(), h in any::<[u8; 16]>(), k in 0u64..70) {
        let mut want = elem(y);
        for _ in 0..k {
            want = field::mul(&want, &elem(h));
        }
        prop_assert_eq!(field::mul_pow(&elem(y), &elem(h), k), want);
    }

    /// A part fed in pieces of any lengths equals the part fed at once.
    #[test]
    fn part_mac_any_pieces(h in any::<[u8; 16]>(), data in proptest::collection::vec(any::<u8>(), 0..500),
                           cuts in proptest::collection::vec(0usize..500, 0..12)) {
        let mut whole = PartMac::new(&h);
        whole.absorb(&data);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.sort();
        let mut m = PartMac::new(&h);
        let mut at = 0;
        for c in cuts.into_iter().chain([data.len()]) {
            m.absorb(&data[at..c]);
            at = c;
        }
        prop_assert_eq!(m.len(), data.len() as u64);
        prop_assert_eq!(m.finish(), whole.finish());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The parallel combination against RustCrypto `aes-gcm`: lengths 0..=256 KiB (sampled,
    /// with the small and block-edge lengths weighted), 1–8 parts, AAD of any length and the
    /// 36-byte frame header.
    #[test]
    fn parallel_tag_equals_aes_gcm(len in prop_oneof![0usize..100, 0usize..4096, 0usize..=256 * 1024,
                                                      Just(256 * 1024), Just(79_056)],
                                   parts in 1usize..=8,
                                   aad_len in prop_oneof![Just(36usize), 0usize..70],
                                   key in any::<[u8; 16]>(), nonce in any::<[u8; 12]>(), seed in any::<u8>()) {
        let pt: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(29) ^ seed).collect();
        let aad: Vec<u8> = (0..aad_len).map(|i| (i as u8) ^ seed.rotate_left(3)).collect();
        let (_, ct, tag) = gcm_encrypt(&key, &nonce, &aad, &pt, parts);
        let mut want = pt.clone();
        let r = aes_gcm::Aes128Gcm::new(&key.into());
        let rtag = r.encrypt_inout_detached(&nonce.into(), &aad, want.as_mut_slice().into()).unwrap();
        prop_assert!(ct == want);
        prop_assert_eq!(&tag[..], &rtag[..]);
    }
}
